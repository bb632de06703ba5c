#!/usr/bin/env bash
# Records llama.cpp's prompt ids for the special-token checks
# (tests/python/special_tokens.py: a random-weight model per family, its
# tokenizer one of llama.cpp's real vocabularies) into
# tests/data/llamacpp/special-tokens.json, from llama-server (--jinja) of the
# pinned llama.cpp: /tokenize with add_special and parse_special for the
# plain prompt; for each chat conversation /apply-template (minja renders
# the real template), then common/chat.cpp's rule for a template's leading
# bos_token (apply(): dropped when the vocabulary adds a BOS, which llama.cpp
# reports by /tokenize of "" with add_special starting with the BOS), then
# /tokenize with add_special. The pinned llama-server (llama.cpp-py0.3.16)
# does not apply that rule on its chat path: it passes add_bos = false to
# the template (fixed upstream by ggml-org/llama.cpp#15326, "common : use
# common_chat_templates for add_bos and add_eos") and so prefills two BOS;
# its raw text is kept in the fixture ("chat_text") for reference.
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

out = {"llamacpp": version,
       "note": "llama-server /tokenize (add_special, parse_special); chats: /apply-template, the leading "
               "bos_token dropped when the vocabulary adds a BOS (common/chat.cpp apply(), as fixed by "
               "ggml-org/llama.cpp#15326; this llama-server's own chat path keeps it: chat_text)",
       "prompt": S.PROMPT, "chats": S.CHATS, "cases": []}
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
        empty = tok("")  # the specials alone
        props = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/props", timeout=60).read())
        bos_text = props["bos_token"]
        bos_id = post(port, "/tokenize", {"content": bos_text, "add_special": False, "parse_special": True})["tokens"]
        add_bos = len(bos_id) == 1 and empty[:1] == bos_id
        case = {"name": name, "arch": arch, "vocab": vocab, "template": template, "flags": flags,
                "bos": bos_id[0] if len(bos_id) == 1 else -1, "add_bos": add_bos,
                "plain": tok(S.PROMPT), "chat": {}, "chat_text": {}, "empty": empty}
        for conv, msgs in S.CHATS.items():
            text = post(port, "/apply-template", {"messages": msgs})["prompt"]
            case["chat_text"][conv] = text
            if add_bos and bos_text and text.startswith(bos_text):  # common/chat.cpp apply()
                text = text[len(bos_text):]
            case["chat"][conv] = tok(text)
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
