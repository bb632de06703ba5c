# Sourced (bash) by run_train_smoke.sh and run_eagle3_train_smoke.sh with the
# CLI's path as $1: the paths they share, their skips (77) without the
# bundled model or the Python packages, and a temporary folder removed on exit.
cli=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab=${ENTMTP_MODEL:-$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -r "$vocab" ] || { echo "SKIP: bundled model (the vocabulary source) not fetched"; exit 77; }
python3 -c "import torch, safetensors, tokenizers, jinja2, gguf, numpy" 2>/dev/null \
  || { echo "SKIP: python torch/safetensors/tokenizers/jinja2/gguf missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
th="$root/tools/train_heads"
export OMP_NUM_THREADS=2
