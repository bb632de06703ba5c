#!/usr/bin/env bash
# CTest wrapper, per supported architecture (tests/python/arch_models.py) and
# weight type (F32; Q8_0 in the native and the f32 compute mode; the 5-bit
# and K-quant types and the Q4_K_M mix on hidden-256 models):
#  1. EntMTP against llama.cpp's recorded output (tests/data/llamacpp,
#     scripts/record-model-fixtures.sh): identical prompt token ids, identical
#     top-1 of the last position's logits, max abs logit difference within
#     the bound (F32: 1e-4, Gemma 1e-2 for llama.cpp's F16-table GELU; Q8_0:
#     1.0 on logits within +-60: llama.cpp quantizes activations to Q8_0 in
#     its dot products, EntMTP's native mode does too, its f32 mode does not);
#  2. the same F32 model as a Hugging Face directory (safetensors, config.json,
#     tokenizer.json) gives the GGUF's token ids and logits (max abs 1e-5);
#     Mistral's directory is the phi3 model with separate projections; Gemma
#     2/3 directories too, and configs the loader refuses are named;
#  3. lossless: greedy generation with random Medusa heads emits the tokens of
#     greedy AR (48 tokens, the heads' default tree and one wide tree), F32
#     and Q8_0 native;
#  4. `entmtp info` names the architecture and its features, and an
#     unsupported architecture is an error naming it;
#  5. an unrecognised chat template is announced and the plain prompt used;
#  6. the K-quant files and the sliding-window models (sections below).
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
fix="$here/../data/llamacpp"
vocab=${ENTMTP_MODEL:-$here/../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -r "$vocab" ] || { echo "SKIP: bundled model (the vocabulary source) not fetched"; exit 77; }
python3 -c "import gguf, numpy" 2>/dev/null || { echo "SKIP: python gguf/numpy missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py="$here/arch_models.py"
prompt=$(python3 "$py" prompt)
python3 "$py" heads "$tmp/heads.safetensors"
fail=0
# (strict UTF-8: a random model emits tokens that end inside a character, and
# the CLI's JSON must still be valid: such bytes become U+FFFD)
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1], encoding=\"utf-8\"))[sys.argv[2]])" "$1" "$2"; }
for arch in llama3 qwen2 qwen3 phi3 gemma2 gemma3; do
  python3 "$py" write "$arch" f32 "$tmp/$arch.f32.gguf" "$vocab"
  python3 "$py" write "$arch" q8_0 "$tmp/$arch.q8_0.gguf" "$vocab"
  # F32 weights; Q8_0 weights in the native mode (kept Q8_0, integer kernels)
  # and in the f32 mode (dequantized at load)
  for run in f32/native q8_0/native q8_0/f32; do
    type=${run%/*} compute=${run#*/}
    bound=1e-4; [ "$type" = f32 ] || bound=1.0
    # Gemma's GELU: llama.cpp's CPU rounds its input to F16 and reads a table
    case "$arch/$type" in gemma*/f32) bound=1e-2 ;; esac
    m="$tmp/$arch.$type.gguf"
    "$cli" generate --model "$m" --compute "$compute" --raw --prompt "$prompt" --max-tokens 1 --ar \
      --prompt-bits 16 --threads 2 --json --dump-logits "$tmp/ours.f32" > "$tmp/ours.json"
    echo "== $arch $type, compute $compute"
    python3 "$py" compare "$tmp/ours.json" "$tmp/ours.f32" "$fix/$arch.$type.json" "$fix/$arch.$type.f32" "$bound" \
      || fail=1
    [ "$compute" = native ] || continue # lossless: once per distinct forward pass
    "$cli" generate --model "$m" --raw --prompt "$prompt" --max-tokens 48 --ar --threads 2 --json > "$tmp/ar.json"
    a=$(field "$tmp/ar.json" tokens)
    for tree in "" "--tree mc_sim_7b_63"; do
      # shellcheck disable=SC2086
      "$cli" generate --model "$m" --heads "$tmp/heads.safetensors" $tree --raw --prompt "$prompt" \
        --max-tokens 48 --threads 2 --json > "$tmp/spec.json"
      s=$(field "$tmp/spec.json" tokens)
      acc=$(field "$tmp/spec.json" mean_accept_length)
      if [ "$a" = "$s" ]; then echo "lossless ${tree:-default tree}: identical to AR (mean accept $acc)"
      else echo "NOT LOSSLESS ${tree:-default tree}:"; echo " AR   $a"; echo " spec $s"; fail=1; fi
    done
  done
done
# K-quant and 5-bit files (tests/python/kquants.py writes the blocks): hidden
# 256, so every row is whole 256-value blocks; qwen2k in each type alone and
# in llama.cpp's Q4_K_M mix, llama3k in the Q4_K_M mix whose ffn_down falls
# back to Q5_0 / Q8_0 (rows of 640) as in a real Qwen2.5-0.5B Q4_K_M file.
# Native mode (the weights stay in their type, integer kernels) and f32 mode
# (dequantized at load); lossless greedy on the native model. Bound: 1% of
# llama.cpp's logit range (qwen2k's logits span about 235): llama.cpp
# rounds the activations to Q8_K / Q8_0 for these dot products, EntMTP keeps
# them in F32 (its f32 mode matches the gguf package's dequantized weights
# within 5e-5, test train_heads_archs), so the difference is llama.cpp's.
python3 "$py" heads "$tmp/heads256.safetensors" 256
python3 "$py" cases | while read -r arch type; do
  case "$arch" in *k) ;; *) continue ;; esac
  m="$tmp/$arch.$type.gguf"
  python3 "$py" write "$arch" "$type" "$m" "$vocab"
  for compute in native f32; do
    "$cli" generate --model "$m" --compute "$compute" --raw --prompt "$prompt" --max-tokens 1 --ar \
      --prompt-bits 16 --threads 2 --json --dump-logits "$tmp/ours.f32" > "$tmp/ours.json"
    echo "== $arch $type, compute $compute"
    python3 "$py" compare "$tmp/ours.json" "$tmp/ours.f32" "$fix/$arch.$type.json" "$fix/$arch.$type.f32" 1% \
      || echo fail > "$tmp/kfail"
  done
  "$cli" generate --model "$m" --raw --prompt "$prompt" --max-tokens 48 --ar --threads 2 --json > "$tmp/ar.json"
  "$cli" generate --model "$m" --heads "$tmp/heads256.safetensors" --raw --prompt "$prompt" \
    --max-tokens 48 --threads 2 --json > "$tmp/spec.json"
  if [ "$(field "$tmp/ar.json" tokens)" = "$(field "$tmp/spec.json" tokens)" ]; then
    echo "lossless: identical to AR (mean accept $(field "$tmp/spec.json" mean_accept_length))"
  else echo "NOT LOSSLESS on $arch $type"; echo fail > "$tmp/kfail"; fi
  rm -f "$m"
done
[ ! -e "$tmp/kfail" ] || fail=1

# Sliding windows shorter than the prompt (gemma2w, gemma3w: window 8, the
# prompt 30 tokens): the local layers run the attention_window op; against
# llama.cpp (F32, Gemma's GELU bound), and lossless over 48 generated tokens,
# tree nodes and AR steps far past the window.
for arch in gemma2w gemma3w; do
  m="$tmp/$arch.f32.gguf"
  python3 "$py" write "$arch" f32 "$m" "$vocab"
  "$cli" generate --model "$m" --raw --prompt "$prompt" --max-tokens 1 --ar --threads 2 --json \
    --dump-logits "$tmp/ours.f32" > "$tmp/ours.json"
  echo "== $arch f32 (sliding window 8)"
  python3 "$py" compare "$tmp/ours.json" "$tmp/ours.f32" "$fix/$arch.f32.json" "$fix/$arch.f32.f32" 1e-2 || fail=1
  "$cli" info --model "$m" | grep -q "sliding-window=8 " || { echo "info does not show the window"; fail=1; }
  "$cli" generate --model "$m" --raw --prompt "$prompt" --max-tokens 48 --ar --threads 2 --json > "$tmp/ar.json"
  for tree in "" "--tree mc_sim_7b_63"; do
    # shellcheck disable=SC2086
    "$cli" generate --model "$m" --heads "$tmp/heads.safetensors" $tree --raw --prompt "$prompt" \
      --max-tokens 48 --threads 2 --json > "$tmp/spec.json"
    if [ "$(field "$tmp/ar.json" tokens)" = "$(field "$tmp/spec.json" tokens)" ]; then
      echo "lossless ${tree:-default tree}: identical to AR (mean accept $(field "$tmp/spec.json" mean_accept_length))"
    else echo "NOT LOSSLESS on $arch ${tree:-default tree}"; fail=1; fi
  done
done

# Medusa-2's published layout ('medusa_head.' prefix, an lm_head per head)
python3 "$py" heads-medusa2 "$tmp/medusa2.safetensors" "$tmp/qwen2.f32.gguf"
"$cli" generate --model "$tmp/qwen2.f32.gguf" --raw --prompt "$prompt" --max-tokens 48 --ar --threads 2 --json > "$tmp/ar.json"
"$cli" generate --model "$tmp/qwen2.f32.gguf" --heads "$tmp/medusa2.safetensors" --tree chain_2 --raw --prompt "$prompt" \
  --max-tokens 48 --threads 2 --json > "$tmp/spec.json"
if [ "$(field "$tmp/ar.json" tokens)" = "$(field "$tmp/spec.json" tokens)" ]; then
  echo "lossless with Medusa-2 heads (own lm_heads): identical to AR (mean accept $(field "$tmp/spec.json" mean_accept_length))"
else echo "NOT LOSSLESS with Medusa-2 heads"; fail=1; fi

# entmtp info names the architecture and its features; what this build does
# not load is an error naming it
"$cli" info --model "$tmp/qwen3.f32.gguf" > "$tmp/info.txt"
grep -q "^architecture: qwen3 (supported)" "$tmp/info.txt" && grep -q "qk-norm" "$tmp/info.txt" \
  || { echo "info does not name qwen3 and its qk-norm:"; cat "$tmp/info.txt"; fail=1; }
python3 - "$tmp" <<'PY'
import sys
import numpy as np
from gguf import GGUFWriter
w = GGUFWriter(sys.argv[1] + "/mamba.gguf", "mamba")
w.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
if "$cli" info --model "$tmp/mamba.gguf" > /dev/null 2> "$tmp/err.txt" \
   || ! grep -q "architecture .mamba. is not supported" "$tmp/err.txt"; then
  echo "an unsupported architecture was not reported by name:"; cat "$tmp/err.txt"; fail=1
fi

# a chat template the library does not recognise: the CLI says so and uses
# the plain prompt (docs/models.md), never silently
python3 "$py" write qwen2 f32 "$tmp/tmpl.gguf" "$vocab" "{{ messages | tojson }}"
"$cli" generate --model "$tmp/tmpl.gguf" --prompt "Hi" --max-tokens 2 --ar --threads 2 --json \
  > "$tmp/t.json" 2> "$tmp/t.err"
"$cli" generate --model "$tmp/tmpl.gguf" --raw --prompt "Hi" --max-tokens 2 --ar --threads 2 --json > "$tmp/r.json"
if ! grep -q "chat template not recognised.*using the plain prompt" "$tmp/t.err" \
   || [ "$(field "$tmp/t.json" prompt_ids)" != "$(field "$tmp/r.json" prompt_ids)" ]; then
  echo "unrecognised chat template: no announcement, or not the plain prompt:"; cat "$tmp/t.err"; fail=1
fi

# GGUF against Hugging Face directories of the same weights
hf_prompt="Hello world, this is a test of the model"
# (Gemma: HF norms hold w - 1 and scale by 1 + w; gemma2w/gemma3w with their
# window-8 local layers)
for arch in llama3 qwen2 qwen3 phi3 mistral gemma2 gemma3 gemma2w gemma3w; do
  src=$arch; [ "$arch" = mistral ] && src=phi3
  python3 "$py" write-hf "$arch" "$tmp/$src.f32.gguf" "$tmp/hf_$arch"
  for m in "$tmp/$src.f32.gguf" "$tmp/hf_$arch"; do
    "$cli" generate --model "$m" --raw --prompt "$hf_prompt" --max-tokens 1 --ar --threads 2 --json \
      --dump-logits "$m.f32" > "$m.json"
  done
  echo "== $arch: Hugging Face directory against GGUF"
  python3 - "$tmp/$src.f32.gguf" "$tmp/hf_$arch" <<'PY' || fail=1
import json, sys
import numpy as np
g, h = sys.argv[1], sys.argv[2]
ids_g, ids_h = (json.load(open(p + ".json", encoding="utf-8"))["prompt_ids"] for p in (g, h))
d = float(np.max(np.abs(np.fromfile(g + ".f32", np.float32) - np.fromfile(h + ".f32", np.float32))))
print(json.dumps({"ids_equal": ids_g == ids_h, "max_abs_diff": d}))
sys.exit(0 if ids_g == ids_h and d <= 1e-5 else 1)
PY
  [ "$arch" = gemma3 ] || rm -rf "$tmp/hf_$arch"
done
# what the HF Gemma loader does not take is an error naming it
hf_err() { # python-edit expected-message
  rm -rf "$tmp/hf_bad"; cp -r "$tmp/hf_gemma3" "$tmp/hf_bad"
  python3 -c "import json,sys; p=sys.argv[1]+'/config.json'; c=json.load(open(p)); $1; json.dump(c, open(p,'w'))" "$tmp/hf_bad"
  if "$cli" info --model "$tmp/hf_bad" > /dev/null 2> "$tmp/err.txt" || ! grep -q "$2" "$tmp/err.txt"; then
    echo "HF Gemma config error not reported ($2):"; cat "$tmp/err.txt"; fail=1
  fi
}
hf_err "c['model_type']='gemma3'" "model_type 'gemma3' is the multimodal checkpoint"
hf_err "c['hidden_activation']='gelu'" "hidden_activation 'gelu' is not supported"
hf_err "c['layer_types']=['full_attention']*6" "layer_types\[0\] is not 'sliding_attention'"
exit $fail
