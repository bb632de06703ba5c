"""Model.tokenize(..., add_special=True) gives llama.cpp's ids (its
tokenizer with add_special, recorded by scripts/record-special-fixtures.sh
from llama.cpp-py0.3.16's llama-server into
tests/data/llamacpp/special-tokens.json) for a random-weight model of each
family whose tokenizer asks for a BOS (Gemma 2/3, Llama 3, Llama 2/Mistral
SentencePiece, Phi-3), one that does not (Qwen2/SmolLM2 style), one with
add_eos_token and add_sep_token, and one with add_bos_token off: the plain
prompt, and the chat template's text (never two BOS). The models' tokenizers
are llama.cpp's real vocabularies (models/ggml-vocab-*.gguf of the pinned
source, scripts/fetch-llamacpp-src.sh); skipped without it."""
import json
import os
import subprocess
import sys

import pytest

import entmtp

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "data", "llamacpp", "special-tokens.json")
SRC = os.path.join(ROOT, ".cache", "llama.cpp-py0.3.16", "src")
WRITER = os.path.join(ROOT, "tests", "python", "special_tokens.py")


@pytest.fixture(scope="module")
def cases():
    if not os.path.isfile(FIXTURE) or not os.path.isfile(WRITER):
        pytest.skip("not in a source checkout (tests/data/llamacpp/special-tokens.json)")
    if not os.path.isdir(os.path.join(SRC, "models")):
        pytest.skip(f"{SRC}/models is absent (scripts/fetch-llamacpp-src.sh)")
    try:
        import gguf  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        pytest.skip("model writer unavailable: %s (pip install gguf numpy)" % e)
    with open(FIXTURE, encoding="utf-8") as f:
        fx = json.load(f)
    out = []
    for case in fx["cases"]:  # written once into .cache/special-tokens-models, shared with CTest's check
        r = subprocess.run([sys.executable, WRITER, "path", case["name"]], check=True, capture_output=True, text=True)
        out.append((case, r.stdout.strip()))
    return fx, out


def test_add_special_matches_llamacpp(cases):
    fx, models = cases
    for case, path in models:
        with entmtp.Model(path, backend="cpu", threads=1) as m:
            name, bos = case["name"], case["bos"]
            assert m.tokenize(fx["prompt"], add_special=True, parse_special=True) == case["plain"], name
            user = fx["chats"]["user"][0]["content"]
            ids = m.tokenize(m.chat_prompt(user), add_special=True, parse_special=True)
            assert ids == case["chat"]["user"], name
            ids = m.tokenize(m.chat_messages(fx["chats"]["multi"]), add_special=True, parse_special=True)
            assert ids == case["chat"]["multi"], name
            assert ids[:2] != [bos, bos], f"{name}: two BOS"
            # the specials alone
            assert m.tokenize("", add_special=True) == case["empty"], name


def test_stream_prefills_llamacpp_ids(cases):
    """Session.stream(str) tokenizes as the CLI does: the ids it prefills are llama.cpp's."""
    fx, models = cases
    for case, path in models:
        with entmtp.Model(path, backend="cpu", threads=1) as m:
            n = len(case["chat"]["user"])
            s = entmtp.Session(m)
            list(s.stream(fx["chats"]["user"][0]["content"], 1))
            assert s.tokens()[:n] == case["chat"]["user"], case["name"]
            s = entmtp.Session(m)
            list(s.stream(fx["prompt"], 1, chat=False))
            assert s.tokens()[:len(case["plain"])] == case["plain"], case["name"]
            s.close()


def test_old_parameters_keep_their_meaning(cases):
    fx, models = cases
    for case, path in models:
        with entmtp.Model(path, backend="cpu", threads=1) as m:
            bare = m.tokenize(fx["prompt"], parse_special=True)
            assert case["bos"] not in bare[:1], case["name"]  # default: the text's tokens only
            assert m.tokenize(fx["prompt"], add_bos=True, parse_special=True) == [case["bos"]] + bare
            with pytest.raises(ValueError):
                m.tokenize("x", add_bos=True, add_special=True)
