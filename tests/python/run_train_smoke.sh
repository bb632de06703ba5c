#!/usr/bin/env bash
# CTest wrapper: tools/train_heads on architectures other than Llama.
#  1. the trainer's PyTorch backbone (tools/train_heads/backbone.py) gives
#     EntMTP's logits (max abs 1e-4) and token ids on every test architecture
#     of tests/python/arch_models.py (GGUF F32, the 5-bit and K-quant types
#     and a Q4_K_M mix in EntMTP's f32 compute mode, and the Hugging Face
#     directories), so heads are trained on the model EntMTP runs; the same
#     check shows EntMTP dequantizes every type as the gguf package does;
#  2. a short smoke run of the whole pipeline (selfdistill.py, train.py) on a
#     random qwen2 GGUF (Medusa), a random gemma2 GGUF (Hydra) and a random
#     qwen3 Hugging Face directory (Medusa): sizes come from the model, and
#     `entmtp generate` loads the heads and emits greedy AR's tokens.
# Skips (77) without torch, safetensors, tokenizers, gguf or the bundled model.
set -euo pipefail
# shellcheck source=train_smoke_common.sh
source "$(dirname "$0")/train_smoke_common.sh" "$1"
py="$here/arch_models.py"
fail=0

# 1. backbone == EntMTP
for arch in llama3 qwen2 qwen3 phi3 gemma2 gemma3 gemma3w; do
  python3 "$py" write "$arch" f32 "$tmp/$arch.gguf" "$vocab"
done
python3 "$py" write llama3k q4_k_m "$tmp/llama3k.gguf" "$vocab"
for type in q5_0 q5_1 q4_k q5_k q6_k; do python3 "$py" write qwen2k "$type" "$tmp/qwen2k_$type.gguf" "$vocab"; done
for arch in llama3 qwen2 qwen3 phi3 gemma2 gemma3w; do python3 "$py" write-hf "$arch" "$tmp/$arch.gguf" "$tmp/hf_$arch"; done
models=""
for arch in llama3 qwen2 qwen3 phi3 gemma2 gemma3 gemma3w llama3k qwen2k_q5_0 qwen2k_q5_1 qwen2k_q4_k qwen2k_q5_k \
  qwen2k_q6_k; do models="$models $tmp/$arch.gguf"; done
for arch in llama3 qwen2 qwen3 phi3 gemma2 gemma3w; do models="$models $tmp/hf_$arch"; done
# shellcheck disable=SC2086
[ -n "${SKIP_BACKBONE:-}" ] || python3 "$here/check_train_backbone.py" "$cli" $models || fail=1

# 2. smoke runs: self-distil 6 math prompts (24 tokens each), train briefly
smoke() { # model kind name
  local m=$1 kind=$2 name=$3 work="$tmp/work_$3"
  echo "== smoke: $name ($kind)"
  python3 "$th/selfdistill.py" --model "$m" --split train --n math=6 --max-new 24 --batch 6 --work "$work" \
    --entmtp "$cli" 2>&1 | tail -2
  python3 "$th/selfdistill.py" --model "$m" --split eval --n math=2 --max-new 24 --batch 2 --work "$work" \
    --entmtp "$cli" 2>&1 | tail -1
  python3 "$th/train.py" --kind "$kind" --model "$m" --work "$work" --heads 4 --reg-epochs 2 --ce-epochs 2 \
    --batch 32 --eval-positions 200 --entmtp "$cli" --out "$tmp/$name.$kind.safetensors" 2>&1 > "$work/train.log" 2>&1 || { cat "$work/train.log"; return 1; }
  grep -E "train: (wrote|held-out accuracy final, full)" "$work/train.log"
  local p="Tom has 3 apples and buys 4 more. How many apples?"
  "$cli" generate --model "$m" --prompt "$p" --max-tokens 40 --ar --threads 2 --json > "$tmp/ar.json"
  # no --heads: the trained heads are found by the model identity train.py recorded
  ENTMTP_HEADS_DIR="$tmp" "$cli" generate --model "$m" --prompt "$p" --max-tokens 40 \
    --threads 2 --json > "$tmp/spec.json"
  python3 - "$tmp/ar.json" "$tmp/spec.json" "$tmp/$name.$kind.safetensors" <<'PY'
import json, sys
a, s = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:3])
if s.get("heads") != sys.argv[3] or "matched by identity" not in s.get("heads_reason", ""):
    sys.exit("the trained heads were not found by the model's identity: %s (%s)" % (s.get("heads"), s.get("heads_reason")))
ok = a["tokens"] == s["tokens"]
print(("lossless: the trained heads' greedy output is AR's" if ok else "NOT LOSSLESS") +
      f" ({len(s['tokens'])} tokens, mean accept {s.get('mean_accept_length')})")
sys.exit(0 if ok else 1)
PY
}
smoke "$tmp/qwen2.gguf" medusa qwen2 || fail=1
smoke "$tmp/gemma2.gguf" hydra gemma2 || fail=1
smoke "$tmp/hf_qwen3" medusa hf_qwen3 || fail=1
exit $fail
