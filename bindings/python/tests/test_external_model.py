"""The lossless invariant on model files named by the environment (for example
the ones CTest's test_engine_lossless writes: build/tests/tmp/lossless_tiny.gguf
and lossless_medusa.safetensors). Skipped, and reported so, when unset."""
import os

import pytest

import entmtp

MODEL = os.environ.get("ENTMTP_TINY_MODEL")
HEADS = os.environ.get("ENTMTP_TINY_HEADS")


@pytest.mark.skipif(not MODEL or not HEADS, reason="ENTMTP_TINY_MODEL / ENTMTP_TINY_HEADS not set")
def test_external_model_is_lossless():
    with entmtp.Model(MODEL, backend="cpu") as m, m.load_heads(HEADS) as h:
        bank = entmtp.Bank(max_depth=h.n_heads)
        bank.add_builtin("chain_2" if h.n_heads >= 2 else "chain_1")
        if h.n_heads >= 4:
            bank.add_builtin("mc_sim_7b_63")
        prompt = [1, 5, 9, 3]
        with entmtp.Session(m, stop_tokens=[]) as ar:
            ar.prefill(prompt)
            want = ar.generate(48, autoregressive=True)
        for k in range(len(bank)):
            with entmtp.Session(m, h, bank, stop_tokens=[]) as s:
                s.set_policy(entmtp.Policy.static(k))
                s.prefill(prompt)
                assert s.generate(48) == want, bank.tree_info(k).name
