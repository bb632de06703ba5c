"""Model and Heads: loading, info, tokenizer, progress callback, file errors."""
import os

import pytest

import entmtp


def test_info(model):
    i = model.info
    assert (i.architecture, i.name) == ("llama", "tiny-python-llama")
    assert (i.vocab_size, i.hidden_size, i.intermediate_size) == (272, 32, 48)
    assert (i.n_layers, i.n_heads, i.n_kv_heads, i.head_dim, i.context_length) == (2, 4, 2, 8, 256)
    assert i.rope_theta == 10000.0 and i.rms_norm_eps == pytest.approx(1e-5)
    assert i.tied_embeddings is False and (i.bos_token, i.eos_token) == (0, 2)
    assert i.n_params > 0 and i.backend == entmtp.Backend.CPU
    assert model.vocab_size == 272
    assert "tiny-python-llama" in repr(model)


def test_load_classmethod_and_backends(tiny):
    with entmtp.Model.load(tiny["model"], backend=entmtp.Backend.CPU, threads=2) as m:
        assert m.info.backend == entmtp.Backend.CPU
    assert m.closed and repr(m) == "<entmtp.Model closed>"
    with pytest.raises(entmtp.StateError):
        m.info  # noqa: B018 - info is read lazily after close
    m2 = entmtp.Model(tiny["model"], backend="auto")
    assert m2.info.backend in (entmtp.Backend.CPU, entmtp.Backend.CUDA)
    m2.close()
    with pytest.raises(entmtp.InvalidArgumentError, match="backend"):
        entmtp.Model(tiny["model"], backend="tpu")


def test_tokenize_roundtrip(model):
    toks = model.tokenize("Hello the world")
    assert all(isinstance(t, int) for t in toks)
    assert model.detokenize(toks) == "Hello the world"
    assert model.tokenize("the")[0] != model.tokenize(" the")[0]
    with_bos = model.tokenize("Hello", add_bos=True)
    assert with_bos[0] == model.info.bos_token and with_bos[1:] == model.tokenize("Hello")
    # a long text needs the BUFFER_TOO_SMALL retry path
    long = "héllo wörld " * 200
    assert model.detokenize(model.tokenize(long)) == long
    assert model.tokenize(b"bytes in") == model.tokenize("bytes in")
    assert model.tokenize("") == []


def test_special_tokens_and_eog(model):
    plain = model.tokenize("<|im_end|>")
    special = model.tokenize("<|im_end|>", parse_special=True)
    assert special == [2] and len(plain) > 1
    assert model.is_eog(2) and not model.is_eog(100)
    assert model.detokenize([2]) == "<|im_end|>"
    # bytes of a partial UTF-8 character
    e_acute = model.tokenize("é")
    assert len(e_acute) == 2
    assert model.detokenize_bytes(e_acute[:1]) == "é".encode()[:1]
    assert model.detokenize(e_acute[:1]) == "\ufffd"


def test_chat_prompt(model):
    p = model.chat_prompt("hi there")
    assert p == "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n"
    p = model.chat_prompt("hi", system_prompt="be brief")
    assert p.startswith("<|im_start|>system\nbe brief<|im_end|>\n")
    assert model.chat_prompt("x" * 1000).count("x") == 1000


def test_chat_messages(model):
    want = ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
            "<|im_start|>user\nbye<|im_end|>\n<|im_start|>assistant\n")
    turns = [("system", "S"), ("user", "hi"), ("assistant", "yo"), ("user", "bye")]
    assert model.chat_messages(turns) == want
    assert model.chat_messages([{"role": r, "content": c} for r, c in turns]) == want
    assert model.chat_messages([("user", "hi")]) == model.chat_prompt("hi")
    with pytest.raises(entmtp.InvalidArgumentError, match="message 1: role 'tool'"):
        model.chat_messages([("user", "hi"), ("tool", "x"), ("user", "y")])
    with pytest.raises(entmtp.InvalidArgumentError, match="last of the 2 messages"):
        model.chat_messages([("user", "hi"), ("assistant", "yo")])


def test_tokenizer_errors(model, tiny):
    with pytest.raises(entmtp.OutOfRangeError):
        model.detokenize([100000])
    with pytest.raises(entmtp.OutOfRangeError, match="int32"):
        model.detokenize([1 << 33])
    with entmtp.Model(tiny["model_notok"]) as m:
        assert m.info.vocab_size == 32
        with pytest.raises(entmtp.UnsupportedError, match="no tokenizer"):
            m.tokenize("hello")
        with pytest.raises(entmtp.UnsupportedError):
            m.chat_prompt("hello")


def test_progress_callback(tiny):
    calls = []
    with entmtp.Model(tiny["model"], progress=lambda f, what: calls.append((f, what))):
        pass
    assert calls and calls[-1][0] == pytest.approx(1.0)
    assert all(0.0 <= f <= 1.0 and isinstance(w, str) for f, w in calls)
    # a true return value cancels
    with pytest.raises(entmtp.CallbackError, match="cancelled"):
        entmtp.Model(tiny["model"], progress=lambda f, what: True)

    def boom(f, what):
        raise KeyError("stop loading")
    with pytest.raises(entmtp.CallbackError) as ei:
        entmtp.Model(tiny["model"], progress=boom)
    assert isinstance(ei.value.__cause__, KeyError) and "stop loading" in ei.value.message


def test_model_file_errors(tmp_path, tiny):
    with pytest.raises(entmtp.IoError, match="missing.gguf"):
        entmtp.Model(tmp_path / "missing.gguf")
    with open(tiny["model"], "rb") as f:
        data = f.read()
    for n in (3, 100, 5000, len(data) // 2, len(data) - 4):
        p = tmp_path / ("truncated_%d.gguf" % n)
        p.write_bytes(data[:n])
        with pytest.raises(entmtp.FormatError) as ei:
            entmtp.Model(p)
        assert str(p) in ei.value.message
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"NOTAGGUF" * 100)
    with pytest.raises(entmtp.FormatError, match="junk.gguf"):
        entmtp.Model(junk)
    # a directory without config.json
    with pytest.raises(entmtp.IoError, match="config.json"):
        entmtp.Model(tmp_path)


def test_heads_info(medusa, hydra):
    i = medusa.info
    assert (i.kind, i.n_heads, i.n_layers, i.shares_lm_head) == (entmtp.HeadsKind.MEDUSA, 4, 1, True)
    assert medusa.n_heads == 4 and "medusa" in repr(medusa)
    j = hydra.info
    assert (j.kind, j.n_heads, j.n_layers, j.shares_lm_head) == (entmtp.HeadsKind.HYDRA, 4, 1, True)


def test_heads_errors(model, tiny, tmp_path):
    import tinymodel
    with pytest.raises(entmtp.IoError, match="missing.safetensors"):
        model.load_heads(tmp_path / "missing.safetensors")
    with open(tiny["medusa"], "rb") as f:
        data = f.read()
    for n in (4, 12, 200, len(data) - 8):
        p = tmp_path / ("truncated_%d.safetensors" % n)
        p.write_bytes(data[:n])
        with pytest.raises(entmtp.FormatError) as ei:
            entmtp.Heads.load(model, p)
        assert str(p) in ei.value.message
    # heads for another hidden size
    other = tmp_path / "h16.safetensors"
    tinymodel.write_medusa(other, n_heads=2, hidden=16)
    with pytest.raises(entmtp.MismatchError, match="hidden"):
        model.load_heads(other)
    # a model file is not a heads file
    with pytest.raises(entmtp.FormatError):
        model.load_heads(tiny["model"])
    with pytest.raises(TypeError):
        entmtp.Heads("not a model", tiny["medusa"])


def test_paths_accept_str_bytes_and_pathlike(tiny):
    import pathlib
    for p in (tiny["model"], os.fsencode(tiny["model"]), pathlib.Path(tiny["model"])):
        with entmtp.Model(p) as m:
            assert m.info.vocab_size == 272
