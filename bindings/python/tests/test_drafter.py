"""What the CLI does, from Python: the drafter shipped for a model found by
the model's identity (not its file name), Session.for_model picking heads,
bank and the bank's default policy, Bank.default_policy, the stats of what
speculation bought (warm rate, speedup estimated or measured) and the
`entmtp` console command."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import entmtp
from entmtp import Bank, PolicyKind, Session

import tinymodel


def fnv1a64_of_tokens(tokens):
    """The vocabulary hash as include/entmtp.h defines it, computed here from
    the token texts tinymodel.py wrote: FNV-1a 64 over each text and a 0 byte."""
    h = 0xCBF29CE484222325
    for t in tokens:
        for b in t.encode("utf-8") + b"\0":
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write_train_json(stem, kind, info, vocab_hash=None):
    with open(stem + ".train.json", "w") as f:
        json.dump({"kind": kind, "model": {
            "architecture": info.architecture, "hidden_size": info.hidden_size, "n_layers": info.n_layers,
            "vocab_size": info.vocab_size,
            "vocab_hash": "fnv1a64:%016x" % (info.vocab_hash if vocab_hash is None else vocab_hash)}}, f)


@pytest.fixture(scope="module")
def shipped(tiny, model, tmp_path_factory):
    """A heads directory with a Hydra drafter (heads, train.json, a bank with
    figures and a default policy) for the tiny model, under names unlike it."""
    d = tmp_path_factory.mktemp("heads")
    stem = str(d / "my-drafter.hydra")
    shutil.copy(tiny["hydra"], stem + ".safetensors")
    write_train_json(stem, "hydra", model.info)
    b = Bank(max_depth=4)
    b.add_builtin("ar")
    b.add_builtin("chain_1")
    b.add_builtin("chain_3")
    for i, (mal, tps) in enumerate([(1.0, 100.0), (1.5, 120.0), (2.2, 110.0)]):
        b.set_figures(i, mal, tps)
    b.set_policy_config(entmtp.Policy.ucb(exploration=0.5))
    b.save(stem + ".bank.json")
    b.close()
    return str(d)


def test_vocab_hash_is_fnv1a_of_the_token_texts(model):
    tokens, _types = tinymodel.tokenizer_vocab(model.info.vocab_size)
    assert model.info.vocab_hash == fnv1a64_of_tokens(tokens)
    assert model.info.load_seconds > 0


def test_renamed_model_finds_its_drafter(tiny, shipped, tmp_path):
    renamed = tmp_path / "downloaded-model-q8.gguf"
    os.symlink(tiny["model"], renamed)
    with entmtp.Model(str(renamed), backend="cpu", threads=1) as m:
        d = m.find_drafter(shipped)
        assert d.heads_path.endswith("my-drafter.hydra.safetensors")
        assert d.bank_path.endswith("my-drafter.hydra.bank.json")
        assert "matched by identity" in d.reason
        assert entmtp.find_drafter(m, "/no/such/dir:" + shipped) == d


def test_other_vocabulary_is_refused(model, shipped, tmp_path):
    d = tmp_path / "other"
    d.mkdir()
    stem = str(d / "other.hydra")
    shutil.copy(os.path.join(shipped, "my-drafter.hydra.safetensors"), stem + ".safetensors")
    write_train_json(stem, "hydra", model.info, vocab_hash=model.info.vocab_hash ^ 1)
    with pytest.raises(entmtp.NotFoundError) as e:
        model.find_drafter(str(d))
    assert "vocabulary hash" in e.value.reason and "other.hydra.safetensors" in e.value.reason
    with pytest.raises(entmtp.NotFoundError, match="no heads"):
        model.find_drafter(str(tmp_path / "empty"))


def test_default_search_path_honours_the_environment(monkeypatch, shipped):
    monkeypatch.setenv("ENTMTP_HEADS_DIR", shipped)
    assert entmtp.default_search_path().split(":")[0] == shipped


def test_bank_default_policy(shipped):
    b = Bank.load(os.path.join(shipped, "my-drafter.hydra.bank.json"))
    assert b.default_policy() == PolicyKind.UCB
    b.close()
    b = Bank()
    b.add_builtin("chain_2")
    assert b.default_policy() is None
    assert entmtp.last_error() == ""
    b.close()


def test_session_for_model_as_the_cli(model, shipped):
    s = Session.for_model(model, search_path=shipped, stop_tokens=[])
    assert s.heads is not None and s.heads.info.kind == entmtp.HeadsKind.HYDRA
    assert s.bank.names() == ["ar", "chain_1", "chain_3"]
    assert s.policy.kind == PolicyKind.UCB and s.policy.config["ucb_exploration"] == pytest.approx(0.5)
    assert "matched by identity" in s.heads_reason and s.bank_reason == "shipped with the heads"
    s.prefill([1, 5, 9, 3])
    out = s.generate(40)
    st = s.stats()
    assert len(out) == st.n_generated == 40
    assert st.mean_accept_length == pytest.approx(st.n_generated / st.n_steps)
    # CPU: each tree's first step is its warm-up
    used = sum(1 for n in s.tree_usage() if n > 0)
    assert st.n_warmup_steps == used
    assert 0 < st.n_warm_generated < st.n_generated
    assert st.warm_tokens_per_second == pytest.approx(
        st.n_warm_generated / (st.decode_seconds - st.warmup_seconds), rel=1e-9)
    # estimated from the bank's figures: an AR step is the "ar" tree's 10 ms
    costs = [1.0, 0.0125 / 0.01, 0.02 / 0.01]
    spent = sum(n * c for n, c in zip(s.tree_usage(), costs))
    assert st.speedup_source == "estimated"
    assert st.speedup == pytest.approx(st.n_generated / spent, rel=1e-5)
    assert st.ar_tokens_per_second == pytest.approx(st.warm_tokens_per_second / st.speedup, rel=1e-9)
    tokens = s.tokens()
    mt = s.measure_ar(16)
    assert s.tokens() == tokens
    assert mt.speedup_source == "measured" and mt.ar_tokens_per_second > 0
    assert mt.speedup == pytest.approx(mt.warm_tokens_per_second / mt.ar_tokens_per_second, rel=1e-9)
    s.reset()
    assert s.stats().speedup_source == "none"
    with pytest.raises(entmtp.StateError):
        s.measure_ar()
    s.close()


def test_session_for_model_without_a_drafter_is_ar(model, tmp_path):
    s = Session.for_model(model, search_path=str(tmp_path))
    assert s.heads is None and s.bank is None and s.drafter is None
    assert "no drafter in" in s.heads_reason
    s.prefill([1, 2, 3])
    s.generate(4)
    assert s.stats().speedup_source == "none"
    s.close()


def test_session_for_model_with_given_heads_and_builtin_trees(model, tiny):
    s = Session.for_model(model, heads=tiny["medusa"], policy="static")
    assert s.heads_reason == "given by heads=" and s.bank.names() == ["medusa_vicuna_7b_stage2"]
    assert "no bank file" in s.bank_reason and s.policy.kind == PolicyKind.STATIC
    s.close()


def run_cli(*args):
    """The console command as pip installs it (entmtp._cli:main), in a child
    Python so its exit code and streams are the command's own."""
    code = "import sys, entmtp._cli; sys.exit(entmtp._cli.main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code] + list(args), capture_output=True, text=True, timeout=300)


def test_console_command_generate(tiny, shipped, tmp_path):
    renamed = tmp_path / "chat.gguf"
    os.symlink(tiny["model"], renamed)
    r = run_cli("generate", "--model", str(renamed), "--heads-path", shipped, "--prompt", "the the",
                "--max-tokens", "24", "--threads", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    err = r.stderr
    assert "-- EntMTP on cpu:" in err and "-- speedup: " in err and "(estimated from the bank's step costs" in err
    assert "my-drafter.hydra.safetensors (hydra, 4 heads): matched by identity" in err
    assert "my-drafter.hydra.bank.json (shipped with the heads); policy ucb" in err
    r = run_cli("generate", "--model", str(renamed), "--heads-path", shipped, "--prompt", "the the",
                "--max-tokens", "24", "--threads", "1", "--json", "--compare-ar")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["speedup_source"] == "measured" and j["speedup"] == pytest.approx(
        j["warm_tokens_per_second"] / j["ar_tokens_per_second"], rel=1e-9)
    assert len(j["tokens"]) == j["n_generated"] and j["mode"] == "entmtp"
    # the model's text, as the library decodes it
    with entmtp.Model(str(renamed), backend="cpu", threads=1) as m:
        assert j["text"] == m.detokenize([t for t in j["tokens"] if not m.is_eog(t)])
    r = run_cli("generate", "--model", str(renamed), "--heads-path", str(tmp_path), "--max-tokens", "4", "--quiet")
    assert r.returncode == 0 and "-- drafter: none (no drafter in" in r.stderr and "-- AR on cpu" in r.stderr
    r = run_cli("generate", "--model", str(renamed), "--max-tokens", "-5")
    assert r.returncode == 2 and "--max-tokens must be positive" in r.stderr
    r = run_cli("generate", "--model", str(tmp_path / "missing.gguf"))
    assert r.returncode == 1 and "missing.gguf" in r.stderr


def test_console_script_is_declared():
    """The wheel's `entmtp` command: the entry point names _cli.main."""
    try:
        from importlib.metadata import entry_points
    except ImportError:  # Python < 3.8
        pytest.skip("importlib.metadata unavailable")
    eps = entry_points()
    scripts = eps.select(group="console_scripts") if hasattr(eps, "select") else eps.get("console_scripts", [])
    found = [e for e in scripts if e.name == "entmtp"]
    if not found:
        pytest.skip("the package is not installed with its metadata here (source tree import)")
    assert found[0].value == "entmtp._cli:main"


REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
SMOLLM2 = os.environ.get("ENTMTP_MODEL") or os.path.join(REPO, ".cache", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.mark.skipif(not os.path.exists(SMOLLM2) or not os.path.isdir(os.path.join(REPO, "heads")),
                    reason="the bundled SmolLM2 (scripts/fetch-model.sh) or the source tree's heads/ is not here")
def test_bundled_model_under_another_name_gets_the_shipped_drafter(tmp_path):
    renamed = tmp_path / "smol.gguf"
    os.symlink(os.path.realpath(SMOLLM2), renamed)
    with entmtp.Model(str(renamed), backend="cpu", threads=2) as m:
        s = Session.for_model(m, search_path=os.path.join(REPO, "heads"), stop_tokens=[])
        assert s.drafter.heads_path.endswith("SmolLM2-135M-Instruct.hydra.safetensors")
        assert s.drafter.bank_path.endswith("SmolLM2-135M-Instruct.hydra.bank.json")
        assert s.policy.kind == PolicyKind.THROUGHPUT  # the shipped bank's default
        prompt = m.tokenize(m.chat_prompt("Name three colours."), parse_special=True)
        s.prefill(prompt)
        got = s.generate(24)
        with Session(m, stop_tokens=[]) as ar:
            ar.prefill(prompt)
            assert got == ar.generate(24, autoregressive=True)  # greedy: lossless
        st = s.stats()
        assert st.speedup_source == "estimated" and st.speedup > 0 and st.mean_accept_length >= 1
        s.close()


def test_installed_package_carries_the_drafters_and_the_command():
    """pip install: the heads of the source tree are in the package (each
    with its identity record) and the `entmtp` command is beside Python."""
    heads = entmtp.drafter.PACKAGE_HEADS_DIR
    if not os.path.isdir(heads):
        pytest.skip("entmtp imported from the source tree: no installed heads")
    files = os.listdir(heads)
    weights = [f for f in files if f.endswith(".safetensors")]
    assert weights, files
    for w in weights:
        stem = w[:-len(".safetensors")]
        with open(os.path.join(heads, stem + ".train.json")) as f:
            ident = json.load(f)["model"]
        assert ident["vocab_hash"].startswith("fnv1a64:") and ident["vocab_size"] > 0
    cmd = os.path.join(os.path.dirname(sys.executable), "entmtp")
    if not os.path.exists(cmd):
        pytest.skip("no console scripts directory beside %s" % sys.executable)
    r = subprocess.run([cmd, "version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("entmtp %s" % entmtp.__version__), r.stdout + r.stderr
