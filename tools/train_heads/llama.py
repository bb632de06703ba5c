"""A Llama-family forward pass in PyTorch over a GGUF file, for training heads.

Weights come from the `gguf` package's own dequantizer, so the backbone the
heads are trained on is the model EntMTP runs (same dequantized values).
RoPE is applied in GGUF's interleaved layout on GGUF's permuted Q/K rows,
which is the same function as Hugging Face's rotate-half on unpermuted rows.

The tokenizer and the chat template come from the same GGUF (the helpers of
tests/python/make_tokenizer_fixture.py, which the tokenizer tests check
against EntMTP's own tokenizer).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))


def _fields(reader):
    kv = {}
    for f in reader.fields.values():
        if f.types and f.types[0].name == "STRING" and len(f.data) == 1:
            kv[f.name] = bytes(f.parts[f.data[0]]).decode("utf-8", "replace")
        elif len(f.data) == 1:
            kv[f.name] = f.parts[f.data[0]][0]
    return kv


class GGUFLlama(torch.nn.Module):
    """Frozen backbone: forward() returns the final-norm hidden states (what
    Medusa and Hydra heads read) and, on request, the logits."""

    def __init__(self, path, dtype=torch.float32):
        super().__init__()
        from gguf import GGUFReader
        from gguf.quants import dequantize

        r = GGUFReader(path)
        kv = _fields(r)
        if kv.get("general.architecture") != "llama":
            raise ValueError(f"{path}: architecture {kv.get('general.architecture')!r}, only 'llama' is supported")
        self.path = path
        self.reader = r
        self.hidden = int(kv["llama.embedding_length"])
        self.n_layers = int(kv["llama.block_count"])
        self.n_heads = int(kv["llama.attention.head_count"])
        self.n_kv = int(kv.get("llama.attention.head_count_kv", self.n_heads))
        self.head_dim = self.hidden // self.n_heads
        self.eps = float(kv["llama.attention.layer_norm_rms_epsilon"])
        self.theta = float(kv.get("llama.rope.freq_base", 10000.0))
        self.context = int(kv.get("llama.context_length", 2048))
        w = {}
        for t in r.tensors:
            a = dequantize(t.data, t.tensor_type).astype(np.float32)
            shape = [int(x) for x in reversed(t.shape.tolist())]
            w[t.name] = torch.from_numpy(a.reshape(shape)).to(dtype)
        self.embed = w["token_embd.weight"]
        self.lm_head = w.get("output.weight", self.embed)
        self.vocab = self.embed.shape[0]
        self.norm = w["output_norm.weight"]
        self.layers = []
        for l in range(self.n_layers):
            p = f"blk.{l}."
            self.layers.append({k: w[p + k + ".weight"] for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")})
        inv = 1.0 / self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)
        self.inv_freq = inv
        self.dtype = dtype

    def to_device(self, device):
        mv = lambda t: t.to(device)
        self.embed, self.norm = mv(self.embed), mv(self.norm)
        self.lm_head = self.embed if self.lm_head.data_ptr() == self.embed.data_ptr() else mv(self.lm_head)
        self.layers = [{k: mv(v) for k, v in L.items()} for L in self.layers]
        return self

    def _rms(self, x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * w

    def _rope(self, x, pos):
        # x [B, heads, T, hd] in GGUF's interleaved pair layout; pos [B, T]
        ang = pos.to(torch.float64)[:, None, :, None] * self.inv_freq.to(pos.device)
        c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)

    @torch.no_grad()
    def forward(self, ids, pos, key_mask, cache=None, logits=False, past=0):
        """ids, pos [B, T]; key_mask [B, S_max] bool (True = real token) over
        cached + new positions. cache: preallocated (K, V) per layer, each
        [B, n_kv, S_max, hd], filled up to `past` (None: no cache kept).
        Returns (hidden [B,T,H], logits or None, cache)."""
        B, T = ids.shape
        x = self.embed[ids]
        S = past + T
        causal = torch.ones(T, S, dtype=torch.bool, device=ids.device).tril(past)
        mask = causal[None, None] & key_mask[:, None, None, :S]
        rep = self.n_heads // self.n_kv
        for l, L in enumerate(self.layers):
            xn = self._rms(x, L["attn_norm"])
            q = (xn @ L["attn_q"].T).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
            k = (xn @ L["attn_k"].T).view(B, T, self.n_kv, self.head_dim).transpose(1, 2)
            v = (xn @ L["attn_v"].T).view(B, T, self.n_kv, self.head_dim).transpose(1, 2)
            q, k = self._rope(q, pos), self._rope(k, pos)
            if cache is not None:
                cache[l][0][:, :, past:S] = k
                cache[l][1][:, :, past:S] = v
                k, v = cache[l][0][:, :, :S], cache[l][1][:, :, :S]
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=rep > 1)
            x = x + att.transpose(1, 2).reshape(B, T, self.hidden) @ L["attn_output"].T
            xn = self._rms(x, L["ffn_norm"])
            x = x + (F.silu(xn @ L["ffn_gate"].T) * (xn @ L["ffn_up"].T)) @ L["ffn_down"].T
        h = self._rms(x, self.norm)
        return h, (h @ self.lm_head.T if logits else None), cache

    @torch.no_grad()
    def greedy_batch(self, prompts, max_new, stop_ids, record_topk=0):
        """Greedy continuations of several prompts at once (left padding).

        Returns a list of generated id lists, each cut after its first stop id.
        With record_topk > 0 it also returns, per prompt, the final-norm hidden
        state before each generated token ([n, H], the input of the heads) and
        the base model's top-k next-token ids and probabilities ([n, k])."""
        dev = self.embed.device
        B = len(prompts)
        P = max(len(p) for p in prompts)
        ids = torch.zeros(B, P, dtype=torch.long, device=dev)
        km = torch.zeros(B, P + max_new, dtype=torch.bool, device=dev)
        for i, p in enumerate(prompts):
            ids[i, P - len(p):] = torch.tensor(p, device=dev)
            km[i, P - len(p):P] = True
        pos = (km[:, :P].long().cumsum(1) - 1).clamp(min=0)
        cache = [tuple(torch.zeros(B, self.n_kv, P + max_new, self.head_dim, dtype=self.dtype, device=dev)
                       for _ in range(2)) for _ in range(self.n_layers)]
        h, _, cache = self.forward(ids, pos, km, cache, past=0)
        out = [[] for _ in range(B)]
        rec = [([], [], []) for _ in range(B)]
        done = torch.zeros(B, dtype=torch.bool, device=dev)
        next_pos = pos[:, -1] + 1
        last_h = h[:, -1]
        stop = torch.tensor(sorted(stop_ids), device=dev)
        for t in range(max_new):
            logits = last_h @ self.lm_head.T
            tok = logits.argmax(-1)
            if record_topk:
                pr, ix = torch.softmax(logits.float(), -1).topk(record_topk, dim=-1)
            for i in range(B):
                if not done[i]:
                    out[i].append(int(tok[i]))
                    if record_topk:
                        rec[i][0].append(last_h[i].to(torch.float16).cpu())
                        rec[i][1].append(ix[i].to(torch.int32).cpu())
                        rec[i][2].append(pr[i].to(torch.float16).cpu())
            done |= torch.isin(tok, stop)
            if bool(done.all()) or t == max_new - 1:
                break
            km[:, P + t] = True
            h, _, cache = self.forward(tok[:, None], next_pos[:, None], km, cache, past=P + t)
            last_h = h[:, -1]
            next_pos = next_pos + 1
        if not record_topk:
            return out
        recs = [(torch.stack(a), torch.stack(b), torch.stack(c)) for a, b, c in rec]
        return out, recs


class ChatTokenizer:
    """The GGUF's tokenizer and chat template, as EntMTP applies them."""

    def __init__(self, model):
        from make_tokenizer_fixture import build_reference, field, render_chat

        self.tk = build_reference(model.reader)
        self.template = field(model.reader, "tokenizer.chat_template")
        self._render = render_chat
        eos = field(model.reader, "tokenizer.ggml.eos_token_id")
        self.stop_ids = {int(eos)} if eos is not None else set()
        for name in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
            i = self.tk.token_to_id(name)
            if i is not None:
                self.stop_ids.add(i)

    def chat_ids(self, user, system=None):
        text = self._render(self.template, system, user)
        return self.tk.encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tk.decode(ids, skip_special_tokens=False)


def set_threads():
    n = os.cpu_count() or 1
    torch.set_num_threads(n)
    return n


def human_time(s):
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def ceil_div(a, b):
    return -(-a // b) if b else 0


__all__ = ["GGUFLlama", "ChatTokenizer", "set_threads", "human_time", "ceil_div", "math"]
