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
#     (check_eagle3_trainer.py);
#  6. fixed replies (selfdistill.py --answers dataset --prompts FILE): the
#     stored answer is the reply's tokens plus the end of turn, with the
#     model's own top-k at each of them (check_selfdistill_answers.py checks
#     that teacher-forcing equals generating), and eagle3.py trains on them
#     beside the greedy shards (--extra-train, with the products in bf16:
#     --compute bf16), refusing shards of other layers.
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

# 6. fixed replies
python3 - "$tmp/replies.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i in range(6):
        f.write(json.dumps({"task": "math", "prompt": f"What is {i} plus {i + 2}?",
                            "reply": f"{i} plus {i + 2} is {2 * i + 2}.\u2028" + " Adding them gives the sum." * i}) + "\n")
PY
python3 "$th/selfdistill.py" --eagle3 --answers dataset --prompts "$tmp/replies.jsonl" --model "$m" --max-new 24 \
  --work "$tmp/work_tf" 2>&1 | tail -1
python3 - "$m" "$tmp/work_tf/shards_eagle3/train" "$tmp/replies.jsonl" "$th" <<'PY'
import glob, json, os, sys
import torch
sys.path.insert(0, sys.argv[4])
from backbone import Backbone, ChatTokenizer
model = Backbone(sys.argv[1]); tok = ChatTokenizer(model)
meta = json.load(open(os.path.join(sys.argv[2], "meta.json")))
assert meta["answers"] == "dataset", meta
replies = {r["prompt"]: r["reply"] for r in map(json.loads, open(sys.argv[3], encoding="utf-8").read().split("\n")[:-1])}
samples = [s for f in sorted(glob.glob(os.path.join(sys.argv[2], "*.pt"))) for s in torch.load(f, weights_only=False)]
assert len(samples) == 6, len(samples)
end = tok.token_to_id("<|im_end|>")
for s in samples:
    ids = tok.tk.encode(replies[s["text"]], add_special_tokens=False).ids
    want = (ids + [end])[:meta["max_new"]]
    assert s["answer"] == want, (s["answer"], want)
    assert s["taps"].shape[0] == len(s["prompt"]) + len(s["answer"]) - 1, (s["taps"].shape, len(s["prompt"]))
    assert tuple(s["top_ids"].shape) == (len(s["answer"]), meta["topk"]), s["top_ids"].shape
    forced = model.teacher_forced_batch([s["prompt"]], [s["answer"]], meta["topk"], meta["layers"])[0]
    assert torch.equal(forced[1], s["top_ids"]), "stored top-k is not the model's own"
assert any(s["answer"][-1] == end for s in samples) and any(s["answer"][-1] != end for s in samples)
print(f"fixed replies: {sum(len(s['answer']) for s in samples)} answer tokens, reply + end of turn, model's own top-k")
PY
python3 "$th/eagle3.py" --model "$m" --work "$work" --extra-train "$tmp/work_tf/shards_eagle3/train" --epochs 1 \
  --ttt 2 --batch-rows 1024 --draft-vocab 512 --dtype f32 --compute bf16 --out "$tmp/drafter_tf.eagle3" > "$tmp/tf.log" 2>&1 \
  || { cat "$tmp/tf.log"; exit 1; }
grep -q "(dataset replies)" "$tmp/tf.log" || { echo "eagle3.py did not read the fixed replies: $(head -3 "$tmp/tf.log")"; exit 1; }
# that run trained its products in bf16 (--compute bf16): recorded, finished, finite losses
python3 - "$tmp/drafter_tf.eagle3.train.json" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r["hyperparameters"]["compute"] == "bf16", r["hyperparameters"]
assert r["finished"] and r["loss_history"], (r["finished"], r["loss_history"][:2])
assert all(math.isfinite(h["loss"]) for h in r["loss_history"] if "loss" in h), r["loss_history"]
PY
python3 - "$tmp/work_tf/shards_eagle3/train/meta.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["layers"] = [0, 1, 2]; json.dump(m, open(sys.argv[1], "w"))
PY
if python3 "$th/eagle3.py" --model "$m" --work "$work" --extra-train "$tmp/work_tf/shards_eagle3/train" --epochs 1 \
  --out "$tmp/drafter_bad.eagle3" > "$tmp/bad.log" 2>&1; then echo "shards of other layers were accepted"; exit 1; fi
grep -q "made with layers \[0, 1, 2\]" "$tmp/bad.log" || { echo "unclear refusal: $(tail -2 "$tmp/bad.log")"; exit 1; }
echo "eagle3.py trains on fixed replies beside greedy answers and refuses shards of other layers"

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
