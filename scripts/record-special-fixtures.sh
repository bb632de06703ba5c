#!/usr/bin/env bash
# Records llama.cpp's prompt ids for the special-token checks
# (tests/python/special_tokens.py: a random-weight model per family, its
# tokenizer one of llama.cpp's real vocabularies) into
# tests/data/llamacpp/special-tokens.json, from llama-server (--jinja) of the
# pinned llama.cpp: /tokenize with add_special and parse_special for the
# plain prompt; /apply-template, then /tokenize with add_special, for each
# chat conversation, which is what its chat completions prefill (the
# template's leading bos_token dropped when the vocabulary adds a BOS).
# Rerun after changing the cases, the prompts or the pinned llama.cpp.
#   needs: python3 with numpy + gguf, curl-free (urllib)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(bash "$root/scripts/build-llamacpp.sh")
lc=$(dirname "$(dirname "$bin")")            # .../llama.cpp-pyX/{src,build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$bin/llama-server" "$lc/src" "$(basename "$lc")" "$tmp" "$root" <<'PY'
import json, os, socket, subprocess, sys, time, urllib.request
server, src, version, tmp, root = sys.argv[1:]
sys.path.insert(0, os.path.join(root, "tests", "python"))
import special_tokens as S

def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

out = {"llamacpp": version, "prompt": S.PROMPT, "chats": S.CHATS, "cases": []}
for name, (arch, vocab, template, flags) in S.CASES.items():
    model = os.path.join(tmp, f"{name}.gguf")
    S.write(name, model, src)
    port = free_port()
    log = open(os.path.join(tmp, f"{name}.log"), "w")
    p = subprocess.Popen([server, "-m", model, "--port", str(port), "--host", "127.0.0.1", "--jinja",
                          "-c", "512", "-t", "2", "--no-webui"], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.5)
        else:
            sys.exit(f"llama-server did not start for {name}: see {log.name}")
        tok = lambda text: post(port, "/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]
        props = post(port, "/tokenize", {"content": "", "add_special": True})["tokens"]
        case = {"name": name, "arch": arch, "vocab": vocab, "template": template, "flags": flags,
                "plain": tok(S.PROMPT), "chat": {}, "chat_text": {}}
        for conv, msgs in S.CHATS.items():
            text = post(port, "/apply-template", {"messages": msgs})["prompt"]
            case["chat_text"][conv] = text
            case["chat"][conv] = tok(text)
        # the BOS id, from the vocabulary (for the never-two-BOS check)
        from gguf import GGUFReader
        r = GGUFReader(model)
        f = r.fields["tokenizer.ggml.bos_token_id"]
        case["bos"] = int(f.parts[f.data[0]][0])
        case["empty"] = props  # tokenize("") with add_special: the specials alone
        out["cases"].append(case)
        print(f"recorded {name}: plain {len(case['plain'])} ids, starts {case['plain'][:2]}", file=sys.stderr)
    finally:
        p.terminate()
        p.wait()
path = os.path.join(root, "tests", "data", "llamacpp", "special-tokens.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(f"wrote {path}", file=sys.stderr)
PY
