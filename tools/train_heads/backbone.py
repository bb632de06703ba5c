"""The forward pass of every architecture EntMTP loads, in PyTorch, over a GGUF
file or a Hugging Face directory, for training heads.

One description (sizes and per-family switches read from the GGUF keys or
config.json) drives one forward pass, as in EntMTP (docs/models.md):
llama / mistral (Llama 3 RoPE scaling, untied lm_head), qwen2 (Q/K/V bias),
qwen3 (per-head Q/K RMSNorm), phi3 (fused QKV and gate/up), gemma2 / gemma3
(embedding scale, GeGLU, post-norms, attention soft-capping, local layers
with a sliding window and, for Gemma 3, their own RoPE base).

Weights come from the `gguf` package's dequantizer (every type EntMTP reads,
K-quants included) or from safetensors, so the backbone the heads are
trained on is the model EntMTP runs. GGUF `llama` files keep llama.cpp's
permuted Q/K rows and use interleaved RoPE, the same function as the
rotate-half RoPE of the other layouts.

The tokenizer and the chat template come from the model: tokenizer.json
for a Hugging Face directory, the GGUF's byte-level BPE vocabulary with the
pre-tokenizer it names (tests/python/make_tokenizer_fixture.py), and for a
SentencePiece GGUF vocabulary the `entmtp` CLI's own tokenization.
"""
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

GGUF_ARCHS = ("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3")
HF_TYPES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "gemma3")


def _fields(reader):
    kv = {}
    for f in reader.fields.values():
        if f.types and f.types[0].name == "STRING" and len(f.data) == 1:
            kv[f.name] = bytes(f.parts[f.data[0]]).decode("utf-8", "replace")
        elif len(f.data) == 1:
            kv[f.name] = f.parts[f.data[0]][0]
    return kv


def llama3_inv_freq(inv, factor, low, high, orig):
    """Llama 3 RoPE scaling (rope_scaling.rope_type = llama3)."""
    out = []
    for f in inv.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < orig / high:
            out.append(f)
        elif wavelen > orig / low:
            out.append(f / factor)
        else:
            s = (orig / wavelen - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return torch.tensor(out, dtype=torch.float64)


class Config:
    """The model description (names as in EntMTP's emt_model_config)."""

    def __repr__(self):
        return " ".join(f"{k}={v}" for k, v in sorted(vars(self).items()))


def _gguf_config(r, kv):
    a = kv.get("general.architecture")
    if a not in GGUF_ARCHS:
        raise ValueError(f"architecture {a!r} is not supported (supported: {', '.join(GGUF_ARCHS)})")
    k = lambda s, d=None: kv.get(f"{a}.{s}", d)  # noqa: E731
    c = Config()
    c.arch = a
    c.hidden = int(k("embedding_length"))
    c.n_layers = int(k("block_count"))
    c.ffn = int(k("feed_forward_length"))
    c.n_heads = int(k("attention.head_count"))
    c.n_kv = int(k("attention.head_count_kv", c.n_heads))
    c.head_dim = int(k("attention.key_length", c.hidden // c.n_heads))
    c.eps = float(k("attention.layer_norm_rms_epsilon"))
    c.theta = float(k("rope.freq_base", 10000.0))
    c.ctx = int(k("context_length", 2048))
    c.window = int(k("attention.sliding_window", 0))
    c.interleaved_rope = a == "llama"
    c.gemma = a in ("gemma2", "gemma3")
    c.norm_plus_one = False  # GGUF Gemma norms already hold 1 + w
    c.attn_softcap = float(k("attn_logit_softcapping", 0.0)) if a == "gemma2" else 0.0
    c.final_softcap = float(k("final_logit_softcapping", 0.0)) if a == "gemma2" else 0.0
    c.local_period = {"gemma2": 2, "gemma3": 6}.get(a, 0)
    c.theta_local = 10000.0 if a == "gemma3" else 0.0
    c.query_scale = 0.0
    if c.gemma and c.n_layers == {"gemma2": 46, "gemma3": 62}[a]:  # the 27B models
        c.query_scale = 1.0 / math.sqrt(c.hidden / c.n_heads)
    c.rope_scaling = None
    st = k("rope.scaling.type")
    if st == "linear":
        c.rope_scaling = ("linear", float(k("rope.scaling.factor", 1.0)))
    elif st not in (None, "none"):
        raise ValueError(f"rope scaling type {st!r} is not supported")
    return c


def _hf_config(cfg):
    t = cfg.get("model_type")
    if t not in HF_TYPES:
        raise ValueError(f"model_type {t!r} is not supported (supported: {', '.join(HF_TYPES)})")
    if t == "gemma3":  # a multimodal config: the text model's part
        cfg = dict(cfg.get("text_config", cfg), model_type="gemma3_text")
        t = "gemma3_text"
    c = Config()
    c.arch = {"mistral": "llama", "gemma3_text": "gemma3"}.get(t, t)
    c.hidden = int(cfg["hidden_size"])
    c.n_layers = int(cfg["num_hidden_layers"])
    c.ffn = int(cfg["intermediate_size"])
    c.n_heads = int(cfg["num_attention_heads"])
    c.n_kv = int(cfg.get("num_key_value_heads") or c.n_heads)
    c.head_dim = int(cfg.get("head_dim") or c.hidden // c.n_heads)
    c.eps = float(cfg.get("rms_norm_eps", 1e-6))
    c.theta = float(cfg.get("rope_theta", 10000.0))
    c.ctx = int(cfg.get("max_position_embeddings", 2048))
    sw = cfg.get("sliding_window")
    used = cfg.get("use_sliding_window", True) if t == "qwen2" else True
    c.window = int(sw) if sw and used else 0
    c.interleaved_rope = False
    c.gemma = c.arch in ("gemma2", "gemma3")
    c.norm_plus_one = c.gemma  # HF Gemma RMSNorm: x * (1 + w)
    c.attn_softcap = float(cfg.get("attn_logit_softcapping") or 0.0)
    c.final_softcap = float(cfg.get("final_logit_softcapping") or 0.0)
    c.local_period = {"gemma2": 2, "gemma3": int(cfg.get("sliding_window_pattern", 6))}.get(c.arch, 0)
    c.theta_local = float(cfg.get("rope_local_base_freq", 10000.0)) if c.arch == "gemma3" else 0.0
    c.query_scale = 0.0
    if c.gemma and cfg.get("query_pre_attn_scalar") and int(cfg["query_pre_attn_scalar"]) != c.head_dim:
        c.query_scale = 1.0 / math.sqrt(float(cfg["query_pre_attn_scalar"]))
    rs = cfg.get("rope_scaling") or None
    c.rope_scaling = None
    if rs:
        rt = rs.get("rope_type", rs.get("type"))
        if rt == "llama3":
            c.rope_scaling = ("llama3", float(rs["factor"]), float(rs.get("low_freq_factor", 1.0)),
                              float(rs.get("high_freq_factor", 4.0)),
                              float(rs.get("original_max_position_embeddings", 8192)))
        elif rt == "linear":
            c.rope_scaling = ("linear", float(rs["factor"]))
        elif rt != "default":
            raise ValueError(f"rope_scaling type {rt!r} is not supported")
    c.tied = bool(cfg.get("tie_word_embeddings", c.gemma))
    return c


# HF tensor names -> the GGUF names the forward pass reads
_HF_LAYER = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "self_attn.qkv_proj": "attn_qkv",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
             "mlp.gate_up_proj": "ffn_up", "pre_feedforward_layernorm": "ffn_norm",
             "post_feedforward_layernorm": "post_ffw_norm"}


def _hf_name(name, gemma):
    if name in ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight"):
        return "token_embd.weight"
    if name in ("model.norm.weight", "model.language_model.norm.weight"):
        return "output_norm.weight"
    if name == "lm_head.weight":
        return "output.weight"
    parts = name.split(".")
    if parts[0] == "model" and parts[1] == "language_model":
        parts = parts[:1] + parts[2:]
    if len(parts) < 5 or parts[:2] != ["model", "layers"]:
        return None
    l, mod, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
    if gemma and mod == "post_attention_layernorm":
        g = "post_attention_norm"  # Gemma: post-attention norm; its pre-FFN norm is ffn_norm
    else:
        g = _HF_LAYER.get(mod)
    return None if g is None else f"blk.{l}.{g}.{kind}"


def _load_weights(path, dtype):
    """(config, {gguf_name: tensor}, reader or None, hf_dir or None)."""
    if os.path.isdir(path):
        from safetensors.torch import load_file
        cfg = json.load(open(os.path.join(path, "config.json")))
        c = _hf_config(cfg)
        w = {}
        files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        if not files:
            raise ValueError(f"{path}: no .safetensors files")
        for f in files:
            for name, t in load_file(os.path.join(path, f)).items():
                g = _hf_name(name, c.gemma)
                if g is None:
                    if "rotary_emb" in name:
                        continue
                    raise ValueError(f"{path}: tensor {name!r} is not supported")
                t = t.to(dtype)
                if c.norm_plus_one and g.endswith("norm.weight"):
                    t = t + 1.0
                w[g] = t
        if c.tied:
            w.pop("output.weight", None)
        c.inv_freq_divisors = None
        return c, w, None, path
    from gguf import GGUFReader
    from gguf.quants import dequantize
    r = GGUFReader(path)
    kv = _fields(r)
    c = _gguf_config(r, kv)
    w = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32)
        w[t.name] = torch.from_numpy(a.reshape([int(x) for x in reversed(t.shape.tolist())]).copy()).to(dtype)
    c.inv_freq_divisors = w.pop("rope_freqs.weight", None)
    return c, w, r, None


class Backbone(torch.nn.Module):
    """Frozen backbone: forward() returns the final-norm hidden states (what
    Medusa and Hydra heads read) and, on request, the logits."""

    def __init__(self, path, dtype=torch.float32):
        super().__init__()
        c, w, reader, hf_dir = _load_weights(path, dtype)
        self.cfg, self.path, self.reader, self.hf_dir, self.dtype = c, path, reader, hf_dir, dtype
        self.hidden, self.n_layers, self.n_heads, self.n_kv = c.hidden, c.n_layers, c.n_heads, c.n_kv
        self.head_dim, self.eps, self.context = c.head_dim, c.eps, c.ctx
        self.embed = w["token_embd.weight"]
        self.lm_head = w.get("output.weight", self.embed)
        self.vocab = self.embed.shape[0]
        self.norm = w["output_norm.weight"]
        q_rows, kv_rows = c.n_heads * c.head_dim, c.n_kv * c.head_dim
        known = {"token_embd.weight", "output.weight", "output_norm.weight"}
        self.layers = []
        for l in range(c.n_layers):
            p = f"blk.{l}."
            L = {k[len(p):-len(".weight")] if k.endswith(".weight") else k[len(p):]: v
                 for k, v in w.items() if k.startswith(p)}
            known.update(k for k in w if k.startswith(p))
            if "attn_qkv" in L:  # Phi-3: fused, Q rows then K then V
                qkv = L.pop("attn_qkv")
                L["attn_q"], L["attn_k"], L["attn_v"] = qkv[:q_rows], qkv[q_rows:q_rows + kv_rows], qkv[q_rows + kv_rows:]
            if "ffn_gate" not in L:  # Phi-3: ffn_up holds gate rows then up rows
                gu = L.pop("ffn_up")
                L["ffn_gate"], L["ffn_up"] = gu[:c.ffn], gu[c.ffn:]
            for need in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                         "ffn_gate", "ffn_up", "ffn_down"):
                if need not in L:
                    raise ValueError(f"{path}: layer {l} has no {need}")
            extra = set(L) - {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                              "ffn_up", "ffn_down", "attn_q.bias", "attn_k.bias", "attn_v.bias",
                              "attn_q_norm", "attn_k_norm", "post_attention_norm", "post_ffw_norm"}
            if extra:
                raise ValueError(f"{path}: layer {l}: tensors {sorted(extra)} are not supported here")
            L["local"] = bool(c.local_period) and l % c.local_period != c.local_period - 1
            self.layers.append(L)
        unknown = set(w) - known
        if unknown:
            raise ValueError(f"{path}: tensors {sorted(unknown)} are not supported here")
        inv = 1.0 / c.theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim)
        if c.inv_freq_divisors is not None:
            inv = inv / c.inv_freq_divisors.to(torch.float64)
        elif c.rope_scaling and c.rope_scaling[0] == "llama3":
            inv = llama3_inv_freq(inv, *c.rope_scaling[1:])
        elif c.rope_scaling and c.rope_scaling[0] == "linear":
            inv = inv / c.rope_scaling[1]
        self.inv_freq = inv
        self.inv_freq_local = None
        if c.theta_local:
            self.inv_freq_local = 1.0 / c.theta_local ** (
                torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim)
        self.embed_scale = math.sqrt(c.hidden) if c.gemma else 0.0
        self.scale = (c.query_scale or 1.0 / math.sqrt(c.head_dim))

    def describe(self):
        c = self.cfg
        return (f"{c.arch}: hidden {c.hidden}, {c.n_layers} layers, {c.n_heads} heads / {c.n_kv} KV heads "
                f"of {c.head_dim}, ffn {c.ffn}, vocab {self.vocab}, window {c.window or '-'}")

    def to_device(self, device):
        mv = lambda t: t.to(device) if torch.is_tensor(t) else t  # noqa: E731
        tied = self.lm_head.data_ptr() == self.embed.data_ptr()
        self.embed, self.norm = mv(self.embed), mv(self.norm)
        self.lm_head = self.embed if tied else mv(self.lm_head)
        self.layers = [{k: mv(v) for k, v in L.items()} for L in self.layers]
        return self

    def _rms(self, x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * w

    def _rope_tables(self, pos, inv_freq):
        """cos and sin for positions pos [B, T] ([B, 1, T, hd/2]): computed
        once per forward pass, not once per layer."""
        ang = pos.to(torch.float64)[:, None, :, None] * inv_freq.to(pos.device)
        return torch.cos(ang).to(self.dtype), torch.sin(ang).to(self.dtype)

    def _rope(self, x, pos, inv_freq, tables=None):
        # x [B, heads, T, hd]; pos [B, T]
        c, s = tables if tables is not None else self._rope_tables(pos, inv_freq)
        c, s = c.to(x.dtype), s.to(x.dtype)
        if self.cfg.interleaved_rope:
            a, b = x[..., 0::2], x[..., 1::2]
            return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
        h = x.shape[-1] // 2
        a, b = x[..., :h], x[..., h:]
        return torch.cat((a * c - b * s, a * s + b * c), dim=-1)

    def _attention(self, q, k, v, mask, local):
        c = self.cfg
        rep = self.n_heads // self.n_kv
        if local and c.window:
            mask = mask & self._window_mask
        if not c.attn_softcap:
            # grouped-query attention without copying K and V per query head
            # (repeat_interleave over the whole cache dominated decoding)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale, enable_gqa=rep > 1)
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-1, -2)) * self.scale
        s = c.attn_softcap * torch.tanh(s / c.attn_softcap)
        s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s.float(), -1).to(q.dtype) @ v

    @torch.no_grad()
    def forward(self, ids, pos, key_mask, cache=None, logits=False, past=0, taps=None):
        """ids, pos [B, T]; key_mask [B, S_max] bool (True = real token) over
        cached + new positions. cache: preallocated (K, V) per layer, each
        [B, n_kv, S_max, hd], filled up to `past` (None: no cache kept).
        taps: a dict {layer: None}; each entry receives the residual stream
        after that layer [B,T,H] (what an EAGLE-3 drafter reads).
        Returns (hidden [B,T,H], logits or None, cache)."""
        c = self.cfg
        B, T = ids.shape
        x = self.embed[ids]
        if self.embed_scale:
            x = x * self.embed_scale
        S = past + T
        causal = torch.ones(T, S, dtype=torch.bool, device=ids.device).tril(past)
        mask = causal[None, None] & key_mask[:, None, None, :S]
        # every query sees itself: left-padding rows stay finite (their
        # outputs are never read)
        mask = mask | (torch.arange(S, device=ids.device)[None, :] == torch.arange(past, S, device=ids.device)[:, None])
        if c.window:  # key j is visible from query i when pos_i - pos_j < window
            qpos = torch.arange(past, S, device=ids.device)[:, None]
            self._window_mask = (qpos - torch.arange(S, device=ids.device)[None, :] < c.window)[None, None]
        tables = {}  # the RoPE tables per frequency set, shared by the layers
        for l, L in enumerate(self.layers):
            xn = self._rms(x, L["attn_norm"])
            q, k, v = xn @ L["attn_q"].T, xn @ L["attn_k"].T, xn @ L["attn_v"].T
            if "attn_q.bias" in L:
                q, k, v = q + L["attn_q.bias"], k + L["attn_k.bias"], v + L["attn_v.bias"]
            q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
            k = k.view(B, T, self.n_kv, self.head_dim).transpose(1, 2)
            v = v.view(B, T, self.n_kv, self.head_dim).transpose(1, 2)
            if "attn_q_norm" in L:
                q, k = self._rms(q, L["attn_q_norm"]), self._rms(k, L["attn_k_norm"])
            inv = self.inv_freq_local if (L["local"] and self.inv_freq_local is not None) else self.inv_freq
            if id(inv) not in tables:
                tables[id(inv)] = self._rope_tables(pos, inv)
            q, k = self._rope(q, pos, inv, tables[id(inv)]), self._rope(k, pos, inv, tables[id(inv)])
            if cache is not None:
                cache[l][0][:, :, past:S] = k
                cache[l][1][:, :, past:S] = v
                k, v = cache[l][0][:, :, :S], cache[l][1][:, :, :S]
            att = self._attention(q, k, v, mask, L["local"] or not c.local_period)
            o = att.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim) @ L["attn_output"].T
            if "post_attention_norm" in L:
                o = self._rms(o, L["post_attention_norm"])
            x = x + o
            xn = self._rms(x, L["ffn_norm"])
            g = xn @ L["ffn_gate"].T
            g = F.gelu(g, approximate="tanh") if c.gemma else F.silu(g)
            f = (g * (xn @ L["ffn_up"].T)) @ L["ffn_down"].T
            if "post_ffw_norm" in L:
                f = self._rms(f, L["post_ffw_norm"])
            x = x + f
            if taps is not None and l in taps:
                taps[l] = x
        h = self._rms(x, self.norm)
        return h, self.logits_of(h) if logits else None, cache

    def logits_of(self, h):
        """The output head on final-norm hidden states (soft-capped where the
        model asks for it)."""
        out = h @ self.lm_head.T
        fc = self.cfg.final_softcap
        return fc * torch.tanh(out / fc) if fc else out

    def _left_pad(self, seqs, extra=0):
        """seqs as one left-padded batch: ids [B, S], the key mask [B, S +
        extra] (True on each sequence's tokens; the extra columns are for
        tokens still to come) and positions [B, S] counted from each
        sequence's first token."""
        dev = self.embed.device
        B, S = len(seqs), max(len(q) for q in seqs)
        ids = torch.zeros(B, S, dtype=torch.long, device=dev)
        km = torch.zeros(B, S + extra, dtype=torch.bool, device=dev)
        for i, q in enumerate(seqs):
            ids[i, S - len(q):] = torch.tensor(q, device=dev)
            km[i, S - len(q):S] = True
        return ids, km, (km[:, :S].long().cumsum(1) - 1).clamp(min=0)

    @torch.no_grad()
    def greedy_batch(self, prompts, max_new, stop_ids, record_topk=0, tap_layers=None):
        """Greedy continuations of several prompts at once (left padding).

        Returns a list of generated id lists, each cut after its first stop id.
        With record_topk > 0 it also returns, per prompt, the final-norm hidden
        state before each generated token ([n, H], the input of the heads) and
        the base model's top-k next-token ids and probabilities ([n, k]).
        With tap_layers (EAGLE-3) the first of those is instead the residual
        stream after those layers at every fed position, prompt included,
        concatenated ([P + n - 1, 3H] fp16, row i pairs with token i+1; the
        last answer token is never fed)."""
        dev = self.embed.device
        B = len(prompts)
        P = max(len(p) for p in prompts)
        ids, km, pos = self._left_pad(prompts, extra=max_new)
        cache = [tuple(torch.zeros(B, self.n_kv, P + max_new, self.head_dim, dtype=self.dtype, device=dev)
                       for _ in range(2)) for _ in range(self.n_layers)]
        taps = {l: None for l in tap_layers} if tap_layers else None
        h, _, cache = self.forward(ids, pos, km, cache, past=0, taps=taps)
        prompt_taps = None
        if taps:
            fused = torch.cat([taps[l] for l in tap_layers], dim=-1).to(torch.float16).cpu()
            prompt_taps = [fused[i, P - len(p):] for i, p in enumerate(prompts)]
        # Per decoding step, what the rows still generating produced (their
        # batch-wide row numbers in `alive`); split per row at the end, so the
        # loop makes no per-row host copies.
        steps = []  # (alive rows, token, top ids, top p, recorded hidden or tap)
        alive = torch.arange(B, device=dev)
        finished = torch.zeros(B, dtype=torch.bool, device=dev)  # stopped but not yet dropped from the batch
        next_pos = pos[:, -1] + 1
        last_h = h[:, -1]
        stop = torch.tensor(sorted(stop_ids) or [-1], device=dev)
        for t in range(max_new):
            logits = self.logits_of(last_h)
            tok = logits.argmax(-1)
            live = ~finished
            rec = [alive[live], tok[live], None, None, None]
            if record_topk:
                pr, ix = torch.softmax(logits.float(), -1).topk(record_topk, dim=-1)
                rec[2], rec[3] = ix[live].to(torch.int32), pr[live].to(torch.float16)
                if not taps:
                    rec[4] = last_h[live].to(torch.float16)
            steps.append(rec)
            finished |= torch.isin(tok, stop)
            if bool(finished.all()) or t == max_new - 1:
                break
            # drop the stopped rows once they are an eighth of the batch: the
            # rest decode on a smaller batch and cache
            n_fin = int(finished.sum())
            if n_fin and n_fin * 8 >= len(alive):
                keep = (~finished).nonzero().squeeze(1)
                alive, tok, next_pos, km = alive[keep], tok[keep], next_pos[keep], km[keep]
                cache = [(K[keep], V[keep]) for K, V in cache]
                finished = finished[keep]
            km[:, P + t] = True
            if taps:
                taps = {l: None for l in tap_layers}
            h, _, cache = self.forward(tok[:, None], next_pos[:, None], km, cache, past=P + t, taps=taps)
            if taps:  # the fed token's row, for the answers that go on
                fused = torch.cat([taps[l][:, -1] for l in tap_layers], dim=-1).to(torch.float16)
                steps[-1][4] = fused[~finished]
                steps[-1].append(alive[~finished])
            last_h = h[:, -1]
            next_pos = next_pos + 1

        def per_row(col, rows_col=0):
            parts = [(st[rows_col], st[col]) for st in steps if len(st) > max(col, rows_col) and st[col] is not None]
            if not parts:
                return [None] * B
            rows = torch.cat([r for r, _ in parts]).cpu()
            vals = torch.cat([v for _, v in parts]).cpu()
            order = torch.sort(rows, stable=True).indices  # steps are in time order: stable keeps it
            counts = torch.bincount(rows, minlength=B).tolist()
            return list(torch.split(vals[order], counts))

        out = [x.tolist() for x in per_row(1)]
        if not record_topk:
            return out
        top_ids, top_p = per_row(2), per_row(3)
        if taps is not None:
            answer_taps = per_row(4, rows_col=5)
            recs = []
            for i in range(B):
                fed = answer_taps[i] if answer_taps[i] is not None else prompt_taps[i][:0]
                recs.append((torch.cat([prompt_taps[i], fed]), top_ids[i], top_p[i]))
            return out, recs
        return out, list(zip(per_row(4), top_ids, top_p))


    @torch.no_grad()
    def teacher_forced_batch(self, prompts, answers, record_topk, tap_layers):
        """What greedy_batch records for EAGLE-3, for fixed answers instead
        of greedy ones: one pass over each prompt + answer (left padding).
        Returns per sample (taps [P + A - 1, 3H] fp16, the residual stream
        after tap_layers at every fed position; top ids [A, k] int32 and
        top p [A, k] fp16, the model's own distribution of each answer
        token given everything before it)."""
        seqs = [list(p) + list(a) for p, a in zip(prompts, answers)]
        S = max(len(q) for q in seqs)
        ids, km, pos = self._left_pad(seqs)
        taps = {l: None for l in tap_layers}
        h, _, _ = self.forward(ids, pos, km, None, past=0, taps=taps)
        fused = torch.cat([taps[l] for l in tap_layers], dim=-1).to(torch.float16).cpu()
        recs = []
        for i, (p, a) in enumerate(zip(prompts, answers)):
            start = S - len(seqs[i])
            # row j's logits give token j+1: answer token t comes from row P-1+t
            logits = self.logits_of(h[i, start + len(p) - 1:start + len(p) - 1 + len(a)])
            pr, ix = torch.softmax(logits.float(), -1).topk(record_topk, dim=-1)
            recs.append((fused[i, start:S - 1], ix.to(torch.int32).cpu(), pr.to(torch.float16).cpu()))
        return recs


def eagle3_tap_layers(n_layers):
    """The target layers an EAGLE-3 drafter reads, as SafeAILab/EAGLE chooses
    them (the inputs of layers 2, N/2 and N-3, i.e. the outputs of 1, N/2-1
    and N-4), and as EntMTP's loader defaults to; a target too shallow for
    that: its last three layers."""
    layers = [1, n_layers // 2 - 1, n_layers - 4]
    if not layers[0] < layers[1] < layers[2]:
        layers = list(range(n_layers))[-3:]
    return layers


def load_embeddings(path):
    """The frozen token embedding and lm_head (the rows Hydra's inputs and
    the heads' logits use), without the layers where the format allows."""
    if os.path.isdir(path):
        m = Backbone(path)
        return m.embed, m.lm_head
    from gguf import GGUFReader
    from gguf.quants import dequantize
    r = GGUFReader(path)
    w = {}
    for t in r.tensors:
        if t.name in ("token_embd.weight", "output.weight"):
            a = dequantize(t.data, t.tensor_type)
            w[t.name] = torch.from_numpy(a.reshape([int(x) for x in reversed(t.shape.tolist())]).copy()).float()
    embed = w["token_embd.weight"]
    return embed, w.get("output.weight", embed)


# Pre-tokenizer regexes (tokenizer.ggml.pre) for byte-level BPE vocabularies
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{{ '<|im_start|>assistant\\n' }}")
LLAMA3 = ("<|begin_of_text|>{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
          "{{ m['content'] }}<|eot_id|>{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}")


class ChatTokenizer:
    """The model's tokenizer and chat template, as EntMTP applies them."""

    def __init__(self, model, cli=None):
        from tokenizers import Regex, Tokenizer, pre_tokenizers
        from make_tokenizer_fixture import build_reference, field

        self.model, self.cli = model, cli
        self.tk, self.template, bos, eos = None, None, None, None
        if model.hf_dir:
            self.tk = Tokenizer.from_file(os.path.join(model.hf_dir, "tokenizer.json"))
            tc = os.path.join(model.hf_dir, "tokenizer_config.json")
            tcfg = json.load(open(tc)) if os.path.exists(tc) else {}
            self.template = tcfg.get("chat_template")
            tok_text = lambda t: t if isinstance(t, str) or t is None else t.get("content")  # noqa: E731
            bos, eos = tok_text(tcfg.get("bos_token")), tok_text(tcfg.get("eos_token"))
            eos_id = self.tk.token_to_id(eos) if eos else None
        else:
            r = model.reader
            self.template = field(r, "tokenizer.ggml.chat_template")
            tokens = field(r, "tokenizer.ggml.tokens")
            b, e = field(r, "tokenizer.ggml.bos_token_id"), field(r, "tokenizer.ggml.eos_token_id")
            bos = tokens[int(b)] if b is not None else None
            eos = tokens[int(e)] if e is not None else None
            eos_id = int(e) if e is not None else None
            if field(r, "tokenizer.ggml.model") == "gpt2":
                pre = field(r, "tokenizer.ggml.pre") or "gpt2"
                pre = {"llama3": "llama-bpe", "default": "gpt2"}.get(pre, pre)
                self.tk = build_reference(r, pre="gpt2" if pre == "qwen2" else pre)
                if pre == "qwen2":
                    self.tk.pre_tokenizer = pre_tokenizers.Sequence([
                        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
                elif pre not in ("smollm", "gpt2", "llama-bpe"):
                    raise ValueError(f"pre-tokenizer {pre!r}: not handled by the trainer's tokenizer")
            elif cli is None:
                raise ValueError("a SentencePiece vocabulary: pass --entmtp CLI so the library tokenizes")
            self._tokens = tokens
        self.bos_text, self.eos_text = bos or "", eos or ""
        self.stop_ids = {eos_id} if eos_id is not None else set()
        for name in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"):
            i = self.token_to_id(name)
            if i is not None:
                self.stop_ids.add(i)

    def token_to_id(self, text):
        if self.tk is not None:
            return self.tk.token_to_id(text)
        try:
            return self._tokens.index(text)
        except ValueError:
            return None

    def render(self, user, system=None):
        """The chat prompt as text; None when the template cannot be rendered
        (then the plain message is the prompt, as EntMTP's CLI does). Without
        a template, EntMTP uses ChatML or Llama 3 when the vocabulary has
        their tokens (src/tokenizer/chat.c): so does this."""
        template = self.template
        if not template and self.token_to_id("<|im_start|>") is not None:
            template = CHATML
        elif not template and self.token_to_id("<|start_header_id|>") is not None:
            template = LLAMA3
        if not template:
            return None
        import jinja2
        try:
            env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
            msgs = ([{"role": "system", "content": system}] if system is not None else [])
            msgs.append({"role": "user", "content": user})
            return env.from_string(template).render(messages=msgs, add_generation_prompt=True,
                                                         bos_token=self.bos_text, eos_token=self.eos_text)
        except Exception:  # noqa: BLE001 - any template error: the plain prompt
            return None

    def chat_ids(self, user, system=None):
        if self.tk is None:
            return self._cli_ids(user, system)
        text = self.render(user, system)
        return self.tk.encode(user if text is None else text, add_special_tokens=False).ids

    def _cli_ids(self, user, system):
        cmd = [self.cli, "generate", "--model", self.model.path, "--prompt", user, "--max-tokens", "1",
               "--ar", "--json", "--threads", "1"]
        if system is not None:
            cmd += ["--system", system]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return json.loads(out)["prompt_ids"]

    def decode(self, ids):
        if self.tk is None:
            return " ".join(self._tokens[i] for i in ids)
        return self.tk.decode(ids, skip_special_tokens=False)


# the name the first version (Llama only) had
GGUFLlama = Backbone


def set_threads():
    """All cores, or TRAIN_HEADS_THREADS: on a machine shared with other
    jobs one thread is about twice as fast as two (OpenMP threads waiting on
    each other while the other jobs hold the cores)."""
    n = int(os.environ.get("TRAIN_HEADS_THREADS") or 0) or os.cpu_count() or 1
    torch.set_num_threads(n)
    return n


class ActiveClock:
    """Seconds this process ran, not counting the time it was stopped
    (SIGSTOP/SIGTSTP ... SIGCONT, as around a benchmark): time budgets
    measured with it are not spent while the job is paused. The gap from
    the last tick() to the SIGCONT counts as paused."""

    def __init__(self):
        import signal
        self.start = self.last = time.time()
        self.paused = 0.0
        previous = signal.getsignal(signal.SIGCONT)

        def on_cont(signum, frame):
            now = time.time()
            self.paused += now - self.last
            self.last = now
            if callable(previous):
                previous(signum, frame)
        signal.signal(signal.SIGCONT, on_cont)

    def tick(self):
        self.last = time.time()

    def elapsed(self):
        self.tick()
        return self.last - self.start - self.paused


def human_time(s):
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def ceil_div(a, b):
    return -(-a // b) if b else 0


__all__ = ["Backbone", "GGUFLlama", "ChatTokenizer", "load_embeddings", "eagle3_tap_layers", "set_threads", "ActiveClock",
           "human_time",
           "ceil_div", "math"]
