#!/usr/bin/env bash
# CTest wrapper: tools/train_heads' EAGLE-3 recipe end to end on a random
# 8-layer qwen2 GGUF with the bundled vocabulary (tests/python/arch_models.py):
#  1. selfdistill.py --eagle3 (train and eval splits) and eagle3.py, briefly;
#     the answers are the model's greedy AR tokens as EntMTP generates them,
#     batched generation equals one prompt at a time, and a run stopped by
#     its time budget resumes with the prompts left;
#  2. the files are the published layout and EntMTP's loader accepts them
#     (`entmtp generate --heads DIR`), and greedy speculative == greedy AR;
#  3. training helped: the held-out top-1 of drafting step 1 after training
#     beats the untrained drafter's (both from the training record);
#  4. a second run with the same arguments resumes from the checkpoint;
#  5. the trainer's unrolled drafting steps give the distributions of the
#     numpy drafter that test_eagle3_reference holds EntMTP to
#     (check_eagle3_trainer.py).
# Skips (77) without torch, safetensors, tokenizers, gguf or the bundled model.
set -euo pipefail
# shellcheck source=train_smoke_common.sh
source "$(dirname "$0")/train_smoke_common.sh" "$1"
m="$tmp/qwen2d.gguf"
work="$tmp/work"
out="$tmp/drafter.eagle3"
python3 "$here/arch_models.py" write qwen2d f32 "$m" "$vocab"

python3 "$th/selfdistill.py" --eagle3 --model "$m" --split train --n math=32 --max-new 40 --batch 16 \
  --work "$work" 2>&1 | tail -2
python3 "$th/selfdistill.py" --eagle3 --model "$m" --split eval --n math=6 --max-new 40 --batch 6 \
  --work "$work" 2>&1 | tail -1
# the data is the model's: batched == one prompt at a time, answers == entmtp generate --ar
python3 "$here/check_selfdistill_answers.py" "$cli" "$m" "$work/shards_eagle3/train" 4
# a time budget stops self-distillation between batches; a rerun answers only the prompts left
sd_calib() { python3 "$th/selfdistill.py" --eagle3 --model "$m" --split calib --n math=6 --max-new 24 --batch 2 \
  --work "$work" "$@" 2>&1; }
# (the output is captured first: grep -q closing the pipe early would fail the writer under pipefail)
log=$(sd_calib --time-budget 0.001)
grep -q "time budget reached" <<< "$log" || { echo "no time budget stop: $log"; exit 1; }
log=$(sd_calib)
grep -q "6 answers in" <<< "$log" || { echo "selfdistill did not answer the batches left: $log"; exit 1; }
log=$(sd_calib | tr '\n' ' ')
grep -q "6 prompts already answered .* 6 answers in" <<< "$log" \
  || { echo "selfdistill did not resume by prompt: $log"; exit 1; }
train() {
  python3 "$th/eagle3.py" --model "$m" --work "$work" --epochs 12 --ttt 3 --lr 3e-3 --batch-rows 1024 \
    --draft-vocab 512 --log-every 20 --eval-every 16 --dtype f32 --out "$out" "$@" > "$work/train.log" 2>&1 || { cat "$work/train.log"; return 1; }
  grep -E "eagle3: (held-out|wrote|resumed|time budget)" "$work/train.log"
}
# a first run stopped by its time budget, then resumed to the end
train --time-budget 2
train

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
from safetensors import safe_open
names = set(safe_open(os.path.join(out, "model.safetensors"), "pt").keys())
want = {"fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"} | {
    f"midlayer.{n}.weight" for n in ("hidden_norm", "input_layernorm", "post_attention_layernorm",
                                     "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                     "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
assert names == want, f"tensor names {sorted(names ^ want)} differ from the published layout"
cfg = json.load(open(os.path.join(out, "config.json")))
assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4], cfg["eagle_config"]
rec = json.load(open(out + ".train.json"))
assert rec["finished"], "training did not finish"
before, after = rec["heldout_untrained"]["steps"][0]["top1"], rec["heldout"]["steps"][0]["top1"]
print(f"held-out step-1 top-1: untrained {before:.3f}, trained {after:.3f}; accept length "
      f"{rec['heldout_untrained']['accept_length']:.3f} -> {rec['heldout']['accept_length']:.3f}")
sys.exit(0 if after > before + 0.05 else 1)
PY

python3 "$here/check_eagle3_trainer.py" "$m" "$out" "$work/shards_eagle3/eval"

p="Tom has 3 apples and buys 4 more. How many apples?"
"$cli" generate --model "$m" --prompt "$p" --max-tokens 48 --ar --threads 2 --json > "$tmp/ar.json"
"$cli" generate --model "$m" --heads "$out" --prompt "$p" --max-tokens 48 --threads 2 --json > "$tmp/spec.json"
python3 - "$tmp/ar.json" "$tmp/spec.json" <<'PY'
import json, sys
a, s = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:3])
ok = a["tokens"] == s["tokens"]
print(("lossless: the trained EAGLE-3 drafter's greedy output is AR's" if ok else "NOT LOSSLESS") +
      f" ({len(s['tokens'])} tokens, mean accept {s.get('mean_accept_length')})")
sys.exit(0 if ok else 1)
PY
