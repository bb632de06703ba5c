"""Sessions on the tiny model: the lossless invariant, every call, callbacks,
errors and handle lifetimes."""
import gc

import pytest

import entmtp
from entmtp import Policy, PolicyKind, Session, _ffi

PROMPTS = [[1, 5, 9, 3], [7, 8], [100, 200, 31]]


def ar_reference(model, prompt, n):
    with Session(model, stop_tokens=[]) as s:
        s.prefill(prompt)
        return s.generate(n, autoregressive=True)


def policies():
    return {
        "default": None,
        "static": Policy.static(1),
        "ladder": Policy.ladder([0.05], trees=[0, 1]),
        "hysteresis": Policy.hysteresis(tau_on=0.3, tau_off=0.1),
        "ucb": Policy.ucb(),
        "custom": Policy.custom(lambda f, n: 1 if f.s > 0.01 else 0),
    }


@pytest.mark.parametrize("heads_name", ["medusa", "hydra"])
@pytest.mark.parametrize("policy_name", list(policies()))
def test_greedy_generation_is_lossless(request, model, bank2, heads_name, policy_name):
    heads = request.getfixturevalue(heads_name)
    for prompt in PROMPTS:
        want = ar_reference(model, prompt, 60)
        with Session(model, heads, bank2, stop_tokens=[]) as s:
            pol = policies()[policy_name]
            if pol is not None:
                s.set_policy(pol)
            s.prefill(prompt)
            got = s.generate(60)
            assert got == want, (prompt, policy_name)
            assert s.tokens() == prompt + want
            st = s.stats()
            assert st.n_generated == 60 and st.n_prompt_tokens == len(prompt)
            assert sum(s.tree_usage()) == st.n_steps


@pytest.mark.parametrize("heads_name", ["medusa", "hydra"])
def test_echo_model_accepts_whole_drafts_losslessly(tiny, heads_name):
    # the echo model repeats the last token: with Medusa heads every draft of
    # mc_sim_7b_63 (depth 4) is accepted, 5 tokens per step
    with entmtp.Model(tiny["echo"], backend="cpu") as m, m.load_heads(tiny[heads_name]) as h:
        bank = entmtp.Bank(max_depth=4)
        bank.add_builtin("chain_2")
        bank.add_builtin("mc_sim_7b_63")
        for prompt in ([1, 2, 3], [40, 41], [63]):
            want = ar_reference(m, prompt, 40)
            assert want == [prompt[-1]] * 40
            with Session(m, h, bank, stop_tokens=[]) as s:
                s.set_policy(Policy.static(1))
                s.prefill(prompt)
                assert s.generate(40) == want
                st = s.stats()
                if heads_name == "medusa":  # random Hydra heads do not keep the guess
                    assert (st.n_generated, st.n_steps, st.mean_accept_length) == (40, 8, 5.0)


def test_step_by_step_equals_generate(model, medusa, bank2):
    want = ar_reference(model, PROMPTS[2], 40)
    with Session(model, medusa, bank2, stop_tokens=[]) as s:
        s.set_policy(Policy.static(1))
        s.prefill(PROMPTS[2])
        got, steps = [], []
        while len(got) < 40:
            r = s.step(max_tokens=40 - len(got))
            steps.append(r)
            got += r.tokens
        assert got == want
        for r in steps:
            assert r.tree_index == 1 and r.n_nodes == 64 and 1 <= r.n_tokens <= r.accept_length
            assert 0.0 <= r.p0 <= 1.0 and r.entropy >= 0.0 and r.seconds >= 0.0 and not r.stopped
        assert any(r.n_tokens > 1 for r in steps)
        assert s.tree_usage(1) == len(steps) and s.tree_usage("chain_2") == 0
        with pytest.raises(entmtp.OutOfRangeError, match="index 2"):
            s.tree_usage(2)
        assert s.tree_usage() == [0, len(steps)]
        assert s.step(max_tokens=1).n_tokens == 1
        f = s.features()
        assert f.n_heads == 4 and f.step == len(steps) and 0.0 <= f.s <= 1.0


def test_step_ar_and_no_heads_session(model):
    with Session(model) as s:
        s.prefill([1, 2, 3])
        r = s.step_ar()
        assert r.tree_index == -1 and r.n_tokens == 1 and r.accept_length == 1
        r2 = s.step()  # without heads and bank: a plain AR step
        assert r2.tree_index == -1 and r2.n_tokens == 1
        assert s.tokens() == [1, 2, 3] + r.tokens + r2.tokens
        assert len(s) == 5 and s.tree_usage() == []


@pytest.mark.parametrize("field, bad", [("prompt_activation_bits", 4), ("step_activation_bits", 12)])
def test_activation_bits(model, field, bad):
    # the setting reaches the library: 8 and 16 are taken, other values refused
    for bits in (8, 16):
        with Session(model, stop_tokens=[], **{field: bits}) as s:
            s.prefill([4, 5, 6])
            assert len(s.generate(4, autoregressive=True)) == 4
    with pytest.raises(entmtp.InvalidConfigError, match=field):
        Session(model, **{field: bad})


def test_kv_type(model):
    # "f32" and "bf16" reach the library: the BF16 cache's logits differ a little from the F32 one's
    # (K and V rounded), and greedy AR runs; an unknown name or enum value is refused naming kv_type
    np = pytest.importorskip("numpy")
    logits = {}
    for kv in ("f32", "bf16"):
        with Session(model, stop_tokens=[], kv_type=kv) as s:
            s.prefill([4, 5, 6, 7, 8])
            logits[kv] = np.array(s.logits())
            assert len(s.generate(4, autoregressive=True)) == 4
    diff = np.abs(logits["f32"] - logits["bf16"]).max()
    assert 0 < diff < 0.05
    with pytest.raises(entmtp.InvalidConfigError, match="kv_type"):
        Session(model, kv_type="fp8")
    with pytest.raises(entmtp.InvalidConfigError, match="kv_type = 7"):
        Session(model, kv_type=7)


def test_logits_match_the_greedy_token(model):
    np = pytest.importorskip("numpy")
    with Session(model, stop_tokens=[]) as s:
        with pytest.raises(entmtp.StateError, match="prefill"):
            s.logits()
        s.prefill(np.array([4, 5, 6], dtype=np.int64))
        lg = s.logits()
        assert lg.dtype == np.float32 and lg.shape == (272,)
        assert s.step_ar().tokens == [int(np.argmax(lg))]


def test_logits_list_without_numpy(model, monkeypatch):
    with Session(model) as s:
        s.prefill([4, 5, 6])
        monkeypatch.setattr(_ffi, "np", None)
        lg = s.logits()
        assert isinstance(lg, list) and len(lg) == 272
        assert s.step_ar().tokens == [max(range(272), key=lg.__getitem__)]


def test_on_tokens_callback_and_stop(model, medusa, bank2):
    with Session(model, medusa, bank2, stop_tokens=[]) as s:
        s.set_policy(Policy.static(1))
        s.prefill(PROMPTS[2])
        batches = []
        out = s.generate(30, on_tokens=batches.append)
        assert [t for b in batches for t in b] == out and len(out) == 30
        # returning True stops after that batch
        s.reset()
        s.prefill(PROMPTS[2])
        seen = []
        out = s.generate(30, on_tokens=lambda b: seen.append(b) or True)
        assert len(seen) == 1 and out == seen[0]


def test_on_tokens_exception(model):
    with Session(model, stop_tokens=[]) as s:
        s.prefill([1, 2])

        def cb(batch):
            if len(s.tokens()) >= 5:
                raise ZeroDivisionError("enough")
        with pytest.raises(entmtp.CallbackError) as ei:
            s.generate(20, on_tokens=cb)
        assert isinstance(ei.value.__cause__, ZeroDivisionError)
        assert ei.value.tokens == s.tokens()[2:] and len(ei.value.tokens) == 3
        assert len(s.generate(2, autoregressive=True)) == 2  # the session goes on


def test_stop_tokens(model):
    first = ar_reference(model, [1, 5, 9, 3], 3)
    with Session(model, stop_tokens=[first[1]]) as s:
        s.prefill([1, 5, 9, 3])
        assert s.generate(20) == first[:2]
        s.reset()
        s.prefill([1, 5, 9, 3])
        s.step_ar()
        r = s.step_ar()
        assert r.stopped and r.tokens == [first[1]]


def test_temperature_sampling_is_seeded(model, medusa, bank2):
    def run(seed):
        with Session(model, medusa, bank2, temperature=0.8, seed=seed, stop_tokens=[]) as s:
            s.prefill([1, 2, 3])
            return s.generate(30)
    a, b, c = run(7), run(7), run(8)
    assert a == b and len(a) == 30 and a != c


def test_kv_full(model, medusa, bank2):
    with Session(model, medusa, bank2, kv_capacity=8, stop_tokens=[]) as s:
        with pytest.raises(entmtp.KVFullError, match="do not fit"):
            s.prefill(list(range(1, 10)))
        s.prefill([1, 2, 3, 4])
        with pytest.raises(entmtp.KVFullError) as ei:
            s.generate(100)
        assert len(ei.value.tokens) == 4 and len(s.tokens()) == 8
        with pytest.raises(entmtp.KVFullError) as ei:
            s.step()
        assert ei.value.result.n_tokens == 0
    with Session(model, medusa, bank2, kv_capacity=6, stop_tokens=[]) as s:
        s.set_policy(Policy.static(1))
        s.prefill(PROMPTS[2])
        got = []
        try:
            while True:
                got += s.step().tokens
        except entmtp.KVFullError as e:
            got += e.result.tokens  # the tokens that fit were committed
        assert s.tokens() == PROMPTS[2] + got and len(got) == 3


def test_reset_and_stats(model, medusa, bank2):
    with Session(model, medusa, bank2, stop_tokens=[]) as s:
        s.prefill([1, 2, 3])
        s.generate(10)
        st = s.stats()
        assert st.n_prompt_tokens == 3 and st.n_generated == 10 and st.n_steps >= 1
        assert st.mean_accept_length == pytest.approx(10 / st.n_steps)
        assert st.decode_seconds >= 0 and st.tokens_per_second >= 0 and st.prefill_seconds >= 0
        s.reset()
        assert s.tokens() == [] and s.stats().n_generated == 0 and s.tree_usage() == [0, 0]
        with pytest.raises(entmtp.StateError, match="prefill"):
            s.step()


def test_session_errors(model, medusa, bank2, tiny, tmp_path):
    import tinymodel
    with Session(model, medusa, bank2) as s:
        with pytest.raises(entmtp.StateError, match="prefill"):
            s.step()
        with pytest.raises(entmtp.InvalidArgumentError, match="empty"):
            s.prefill([])
        with pytest.raises(entmtp.OutOfRangeError, match="272"):
            s.prefill([1, 272])
        with pytest.raises(entmtp.OutOfRangeError):
            s.prefill([-1])
        with pytest.raises(entmtp.OutOfRangeError, match="int32"):
            s.prefill([1 << 35])
        with pytest.raises(entmtp.InvalidArgumentError):
            s.prefill(["a"])
        s.prefill([1])
        with pytest.raises(entmtp.InvalidArgumentError, match="max_tokens"):
            s.generate(0)
        with pytest.raises(entmtp.OutOfRangeError, match="static_tree"):
            s.set_policy(Policy.static(2))
        with pytest.raises(TypeError):
            s.set_policy("static")
    with pytest.raises(entmtp.InvalidConfigError, match="temperature"):
        Session(model, temperature=-1.0)
    with pytest.raises(entmtp.InvalidConfigError, match="n_stop_tokens"):
        Session(model, stop_tokens=list(range(entmtp.MAX_STOP_TOKENS + 1)))
    with pytest.raises(entmtp.OutOfRangeError, match="stop_tokens"):
        Session(model, stop_tokens=[5000])
    with Session(model) as s:
        with pytest.raises(entmtp.StateError, match="no bank"):
            s.set_policy(Policy.static())
    # a tree deeper than the heads
    two = tmp_path / "two_heads.safetensors"
    tinymodel.write_medusa(two, n_heads=2)
    with model.load_heads(two) as h2:
        with pytest.raises(entmtp.MismatchError, match="mc_sim_7b_63"):
            Session(model, h2, bank2)
    # heads of another model
    with entmtp.Model(tiny["model"]) as other:
        with other.load_heads(tiny["medusa"]) as h:
            with pytest.raises(entmtp.MismatchError, match="different model"):
                Session(model, h, bank2)
    with pytest.raises(TypeError):
        Session("model")


def test_custom_policy_in_a_session(model, medusa, bank2):
    calls = {"select": 0, "observe": [], "reset": 0}

    def select(f, n):
        calls["select"] += 1
        assert n == 2 and f.n_heads == 4
        return 1

    def reset():
        calls["reset"] += 1

    pol = Policy.custom(select, observe=calls["observe"].append, reset=reset)
    with Session(model, medusa, bank2, stop_tokens=[]) as s:
        s.set_policy(pol)
        assert calls["reset"] == 1 and s.policy is pol
        s.prefill(PROMPTS[2])
        out = s.generate(20)
        assert out == ar_reference(model, PROMPTS[2], 20)
        n_steps = s.stats().n_steps
        assert calls["select"] == n_steps and len(calls["observe"]) == n_steps
        assert all(o.tree_index == 1 and o.n_nodes == 64 for o in calls["observe"])
        assert sum(o.accept_length for o in calls["observe"]) >= 20
        s.reset()
        assert calls["reset"] == 2


@pytest.mark.parametrize("heads_name", ["medusa", "hydra"])
def test_custom_throughput_rule_matches_the_throughput_policy(request, model, heads_name):
    """A custom policy reading expected_accept / expected_seconds makes the
    built-in throughput policy's choice at every step; both are lossless."""
    heads = request.getfixturevalue(heads_name)
    bank = entmtp.Bank(max_depth=4)
    for name in ("chain_1", "chain_2", "chain_4", "mc_sim_7b_63"):
        bank.add_builtin(name)
    seen = []

    def select(f, n):
        assert n == 4 and f.n_trees == 4 and f.n_heads == 4 and f.topk == 10
        assert [row[0] for row in f.head_topk_p] == f.head_p
        assert all(row == sorted(row, reverse=True) for row in f.head_topk_p)
        seen.append(f)
        return max(range(n), key=lambda k: (f.expected_accept[k] / f.expected_seconds[k], -k))

    def run(policy):
        with Session(model, heads, bank, stop_tokens=[], reproducible=True) as s:
            s.set_policy(policy)
            s.prefill(PROMPTS[0])
            trees, out = [], []
            while len(out) < 40:
                r = s.step(40 - len(out))
                trees.append(r.tree_index)
                out += r.tokens
            return out, trees

    want = ar_reference(model, PROMPTS[0], 40)
    out_t, trees_t = run(Policy(PolicyKind.THROUGHPUT))
    out_c, trees_c = run(Policy.custom(select))
    assert out_t == want and out_c == want
    assert trees_c == trees_t
    assert len(seen) == len(trees_c)
    bank.close()


def test_custom_policy_exception_fails_the_step(model, medusa, bank2):
    def select(f, n):
        raise RuntimeError("policy crashed")
    with Session(model, medusa, bank2) as s:
        s.set_policy(Policy.custom(select))
        s.prefill([1, 2, 3])
        with pytest.raises(entmtp.CallbackError) as ei:
            s.step()
        assert ei.value.status == entmtp.Status.CALLBACK
        assert isinstance(ei.value.__cause__, RuntimeError)
        assert ei.value.result.n_tokens == 0 and s.tokens() == [1, 2, 3]
        with pytest.raises(entmtp.CallbackError) as ei:
            s.generate(5)
        assert ei.value.tokens == []
        s.set_policy(None)  # back to the static policy on tree 0
        assert s.policy is None and len(s.generate(3)) == 3

    def observe(o):
        raise ValueError("observer crashed")
    with Session(model, medusa, bank2) as s:
        s.set_policy(Policy.custom(lambda f, n: 0, observe=observe))
        s.prefill([1, 2, 3])
        with pytest.raises(entmtp.CallbackError) as ei:
            s.step()
        assert isinstance(ei.value.__cause__, ValueError)
        assert ei.value.result.n_tokens >= 1  # the step itself went through
        assert len(s.tokens()) == 3 + ei.value.result.n_tokens


# ------------------------------------------------------------- lifetimes

def test_session_keeps_its_model_heads_bank_and_policy_alive(tiny):
    def make():
        m = entmtp.Model(tiny["model"])
        h = m.load_heads(tiny["medusa"])
        b = entmtp.Bank(max_depth=4)
        b.add_builtin("chain_2")
        b.add_builtin("mc_sim_7b_63")
        s = Session(m, h, b, stop_tokens=[])
        s.set_policy(Policy.custom(lambda f, n: 1))
        return s
    s = make()
    gc.collect()
    s.prefill([1, 2, 3])
    assert len(s.generate(10)) == 10
    assert s.model.info.vocab_size == 272 and s.heads.n_heads == 4 and len(s.bank) == 2
    del s
    gc.collect()


def test_closing_a_parent_closes_the_session(tiny):
    m = entmtp.Model(tiny["model"])
    h = m.load_heads(tiny["medusa"])
    b = entmtp.Bank(max_depth=4)
    b.add_builtin("chain_2")
    s1 = Session(m, h, b)
    s2 = Session(m)
    b.close()
    assert s1.closed and not s2.closed and not h.closed
    with pytest.raises(entmtp.StateError, match="Session is closed"):
        s1.prefill([1])
    m.close()
    assert s2.closed and h.closed and m.closed
    assert repr(s1) == "<entmtp.Session closed>" and repr(h) == "<entmtp.Heads closed>"


def test_closing_a_policy_detaches_it(model, medusa, bank2):
    pol = Policy.static(1)
    s = Session(model, medusa, bank2, stop_tokens=[])
    s.set_policy(pol)
    s.prefill([1, 2, 3])
    assert s.step().tree_index == 1
    pol.close()
    assert s.policy is None and not s.closed
    assert s.step().tree_index == 0  # the default static policy on tree 0
    # a policy that outlives its session is still usable
    pol2 = Policy.static(1)
    s.set_policy(pol2)
    s.close()
    assert pol2.select(0.0, 2) == 1
    # replacing a policy: the old one no longer detaches the session on close
    s3 = Session(model, medusa, bank2)
    a, b = Policy.static(1), Policy.static(0)
    s3.set_policy(a)
    s3.set_policy(b)
    a.close()
    assert s3.policy is b
    s3.close()


def test_garbage_collected_cycles_free_in_a_safe_order(tiny):
    for _ in range(3):
        m = entmtp.Model(tiny["model"])
        h = m.load_heads(tiny["hydra"])
        b = entmtp.Bank(max_depth=4)
        b.add_builtin("chain_2")
        pol = Policy.custom(lambda f, n: 0)
        s = Session(m, h, b)
        s.set_policy(pol)
        # cycles through every wrapper
        m.cycle, h.cycle, b.cycle, pol.cycle, s.cycle = s, s, s, s, (m, h, b, pol)
        del m, h, b, pol, s
        gc.collect()


def test_context_managers(tiny):
    with entmtp.Model(tiny["model"]) as m, m.load_heads(tiny["medusa"]) as h, \
            entmtp.Bank(max_depth=4) as b, Policy.hysteresis(0.3, 0.1) as p:
        b.add_builtin("chain_2")
        b.add_builtin("chain_3")
        with Session.create(m, h, b, stop_tokens=[]) as s:
            s.set_policy(p)
            s.prefill([1, 2])
            assert len(s.generate(5)) == 5
        assert s.closed
    assert m.closed and h.closed and b.closed and p.closed
