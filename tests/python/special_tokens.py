#!/usr/bin/env python3
"""The special tokens a prompt gets (BOS, EOS as the model's tokenizer config
asks), against llama.cpp's ids.

Each case is a random-weight F32 model (tests/python/arch_models.py
write-vocab) whose tokenizer is one of llama.cpp's real vocabularies
(models/ggml-vocab-*.gguf of the pinned llama.cpp source) copied as it is,
with a family's real chat template (models/templates/*.jinja, the
vocabulary's own, or Meta-Llama-3-8B-Instruct's, held here):

  special_tokens.py cases                         the case names, one a line
  special_tokens.py write NAME OUT.gguf [LLAMACPP_SRC]
  special_tokens.py check ENTMTP_CLI [FIXTURE]    CLI generate and the server
                                                  against the fixture (CTest)
  special_tokens.py path NAME                     the case's model (written once
      into .cache/special-tokens-models, shared by the checks), on stdout
  special_tokens.py export OUTDIR                 every case's model (as path) and
      OUTDIR/cases.txt, the fixture in lines a test without a JSON parser
      reads (the Rust binding's tests/special_tokens.rs): "prompt HEX",
      "user HEX" (UTF-8 as hex), then per case "case NAME BOS PATH",
      "plain IDS", "chat IDS", "empty IDS"; exit 77 when the llama.cpp
      source is absent

scripts/record-special-fixtures.sh records llama.cpp's ids (llama.cpp-py0.3.16)
into tests/data/llamacpp/special-tokens.json: llama-server's /tokenize with
add_special for the plain prompt; for the chat conversations /apply-template,
the leading bos_token dropped when the vocabulary adds a BOS (common/chat.cpp's
rule, which that llama-server's own chat path skips: see the script), then
/tokenize with add_special.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(ROOT, "tests", "data", "llamacpp", "special-tokens.json")
LLAMACPP_SRC = os.path.join(ROOT, ".cache", "llama.cpp-py0.3.16", "src")

PROMPT = "Hello world! IT'S 2024: 12345 apples, caf\u00e9.\n  Indented\tline"
CHATS = {
    "user": [{"role": "user", "content": "How do vaccines train the immune system?"}],
    "multi": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
              {"role": "user", "content": "2+2?"}],
}

# Meta-Llama-3-8B-Instruct's chat template (tokenizer_config.json): Llama 3.1's
# (models/templates) prints today's date in llama.cpp, which would date the ids
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
INLINE_TEMPLATES = {"Meta-Llama-3-8B-Instruct": LLAMA3_TEMPLATE}

# name: (arch_models.py architecture, llama.cpp vocabulary, chat template (a
# models/templates file, an INLINE_TEMPLATES name, or "-" for the
# vocabulary's own), tokenizer.ggml flag overrides)
CASES = {
    # SentencePiece with add_bos_token (Gemma's kind of vocabulary: llama.cpp
    # ships no Gemma one) and Gemma's template ({{ bos_token }} first)
    "gemma2": ("gemma2", "llama-spm", "google-gemma-2-2b-it.jinja", []),
    "gemma3": ("gemma3", "llama-spm", "google-gemma-2-2b-it.jinja", []),
    # Llama 3: byte-level BPE, no add_bos_token key (llama.cpp's default for
    # llama-bpe is on), {{- bos_token }} first
    "llama3": ("llama3", "llama-bpe", "Meta-Llama-3-8B-Instruct", []),
    # Llama 2 / Mistral: SentencePiece, Mistral's [INST] template
    "mistral": ("llama3", "llama-spm", "mistralai-Mistral-Nemo-Instruct-2407.jinja", []),
    # Phi-3: its own vocabulary and template ({{ bos_token }} first)
    "phi3": ("phi3", "phi-3", "-", []),
    # SmolLM2 / Qwen2 style: a BOS id but no add_bos_token: no BOS
    "qwen2": ("qwen2", "qwen2", "-", []),
    # add_eos_token on: an EOS last; add_sep_token adds nothing (BPE/SPM)
    "spm_eos_sep": ("llama3", "llama-spm", "google-gemma-2-2b-it.jinja", ["add_eos_token=1", "add_sep_token=1"]),
    # add_bos_token off with a template that prints bos_token: the
    # template's BOS stays (llama.cpp strips it only when it adds one)
    "llama3_no_bos": ("llama3", "llama-bpe", "Meta-Llama-3-8B-Instruct", ["add_bos_token=0"]),
}


def write(name, out, src=LLAMACPP_SRC):
    arch, vocab, template, flags = CASES[name]
    tmpl = "-" if template == "-" else os.path.join(src, "models", "templates", template)
    with tempfile.TemporaryDirectory() as tmp:
        if template in INLINE_TEMPLATES:
            tmpl = os.path.join(tmp, template + ".jinja")
            with open(tmpl, "w", encoding="utf-8") as f:
                f.write(INLINE_TEMPLATES[template])
        subprocess.run([sys.executable, os.path.join(HERE, "arch_models.py"), "write-vocab", arch, out,
                        os.path.join(src, "models", f"ggml-vocab-{vocab}.gguf"), tmpl, *flags], check=True)


def model_path(name, src=LLAMACPP_SRC):
    """The case's model, written once into .cache/special-tokens-models/<key>/
    (the key hashes the writers and the vocabulary, so a change rewrites it):
    the CTest check and both binding suites share the files."""
    import hashlib
    arch, vocab, template, flags = CASES[name]
    h = hashlib.sha256(repr(CASES[name]).encode())
    for f in (os.path.join(HERE, "arch_models.py"), os.path.abspath(__file__),
              os.path.join(src, "models", f"ggml-vocab-{vocab}.gguf")):
        with open(f, "rb") as fh:
            h.update(fh.read())
    d = os.path.join(os.environ.get("ENTMTP_CACHE_ROOT", os.path.join(ROOT, ".cache")), "special-tokens-models",
                     h.hexdigest()[:16])
    path = os.path.join(d, name + ".gguf")
    if not os.path.exists(path):
        os.makedirs(d, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        write(name, tmp, src)
        os.replace(tmp, path)  # atomic: parallel runs never read a half-written file
    return path


def load_fixture(path=FIXTURE):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def bos_count(ids, bos):
    n = 0
    while n < len(ids) and ids[n] == bos:
        n += 1
    return n


def can_write_models():
    """Whether llama.cpp's vocabularies and the packages that write the
    models (arch_models.py: gguf, numpy) are here; says why not."""
    if not os.path.isdir(os.path.join(LLAMACPP_SRC, "models")):
        print(f"SKIP: {LLAMACPP_SRC}/models is absent (scripts/fetch-llamacpp-src.sh)")
        return False
    try:
        import gguf  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e} (pip install gguf numpy)")
        return False
    return True


def check(cli, fixture_path=FIXTURE):
    """entmtp generate (--raw and chat) and entmtp serve (completions and
    chat) prefill llama.cpp's ids; 0 pass, 1 fail, 77 skip."""
    if not can_write_models():
        return 77
    sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
    os.environ["ENTMTP_CLI"] = cli
    fx = load_fixture(fixture_path)
    has_serve = subprocess.run([cli, "serve", "--help"], capture_output=True).returncode == 0
    failures = 0

    def expect(got, want, what):
        nonlocal failures
        if got != want:
            failures += 1
            print(f"FAIL: {what}\n  entmtp    {got}\n  llama.cpp {want}")
        else:
            print(f"ok: {what} ({len(got)} ids)")

    for case in fx["cases"]:
        name = case["name"]
        model = model_path(name)
        bos = case["bos"]
        # generate: the ids it prefills, from --json's prompt_ids
        def generate(*args):
            r = subprocess.run([cli, "generate", "--model", model, "--no-heads", "--max-tokens", "1",
                                "--json", "--threads", "1", *args], capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stderr)
                return None
            return json.loads(r.stdout.strip().splitlines()[-1])["prompt_ids"]
        expect(generate("--raw", "--prompt", fx["prompt"]), case["plain"], f"{name}: generate --raw")
        user = CHATS["user"][0]["content"]
        got = generate("--prompt", user)
        expect(got, case["chat"]["user"], f"{name}: generate (chat template)")
        if got is not None and bos_count(got, bos) > 1:
            failures += 1
            print(f"FAIL: {name}: the chat prompt starts with {bos_count(got, bos)} BOS")
        if not has_serve:
            continue
        os.environ["ENTMTP_MODEL"] = model
        from serverutil import Server
        srv = Server()
        try:
            knobs = {"return_prompt_ids": True}
            st, r = srv.request("POST", "/v1/completions",
                                {"prompt": fx["prompt"], "max_tokens": 1, "temperature": 0, "entmtp": knobs})
            expect(r["entmtp"]["prompt_ids"] if st == 200 else (st, r), case["plain"], f"{name}: serve /v1/completions")
            for conv, msgs in CHATS.items():
                st, r = srv.request("POST", "/v1/chat/completions",
                                    {"messages": msgs, "max_tokens": 1, "temperature": 0, "entmtp": knobs})
                got = r["entmtp"]["prompt_ids"] if st == 200 else (st, r)
                expect(got, case["chat"][conv], f"{name}: serve /v1/chat/completions ({conv})")
                if isinstance(got, list) and bos_count(got, bos) > 1:
                    failures += 1
                    print(f"FAIL: {name}: the server's chat prompt starts with {bos_count(got, bos)} BOS")
        finally:
            srv.stop()
    print(f"{len(fx['cases'])} cases recorded by {fx['llamacpp']}, {failures} failures")
    return 1 if failures else 0


def export(outdir, fixture_path=FIXTURE):
    if not can_write_models():
        return 77
    fx = load_fixture(fixture_path)
    os.makedirs(outdir, exist_ok=True)
    ids = lambda v: " ".join(str(i) for i in v)
    lines = [f"prompt {fx['prompt'].encode().hex()}", f"user {CHATS['user'][0]['content'].encode().hex()}"]
    for case in fx["cases"]:
        path = model_path(case["name"])
        lines += [f"case {case['name']} {case['bos']} {path}", f"plain {ids(case['plain'])}",
                  f"chat {ids(case['chat']['user'])}", f"empty {ids(case['empty'])}"]
    with open(os.path.join(outdir, "cases.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return 0


def main():
    a = sys.argv[1:]
    if a == ["cases"]:
        print("\n".join(CASES))
    elif len(a) in (3, 4) and a[0] == "write":
        write(*a[1:])
    elif len(a) == 2 and a[0] == "path":
        print(model_path(a[1]))
    elif len(a) == 2 and a[0] == "export":
        sys.exit(export(a[1]))
    elif len(a) in (2, 3) and a[0] == "check":
        sys.exit(check(*a[1:]))
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
