"""Fixtures: a tiny random model, heads and a bank written once per run."""
import gc
import os

import pytest

import entmtp


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """Paths of the tiny model files (tinymodel.py). Needs the `gguf` package
    (run_tests.sh installs it); without it the model tests are skipped, and
    reported as such."""
    try:
        import tinymodel
        import gguf  # noqa: F401
    except ImportError as e:
        pytest.skip("tiny model writer unavailable: %s (pip install gguf numpy)" % e)
    return tinymodel.write_all(str(tmp_path_factory.mktemp("tiny")))


@pytest.fixture(scope="session")
def model(tiny):
    m = entmtp.Model(tiny["model"], backend="cpu", threads=1)
    yield m
    m.close()


@pytest.fixture(scope="session")
def medusa(model, tiny):
    return model.load_heads(tiny["medusa"])


@pytest.fixture(scope="session")
def hydra(model, tiny):
    return model.load_heads(tiny["hydra"])


@pytest.fixture
def bank2():
    """chain_2 (index 0) and mc_sim_7b_63 (index 1), as in the examples."""
    b = entmtp.Bank(max_depth=4)
    b.add_builtin("chain_2")
    b.add_builtin("mc_sim_7b_63")
    yield b
    b.close()


@pytest.fixture(autouse=True)
def _collect():
    yield
    gc.collect()  # run finalizers inside the test that made the garbage


def env_paths():
    return os.environ.get("ENTMTP_TINY_MODEL"), os.environ.get("ENTMTP_TINY_HEADS")
