"""Every policy in isolation, the custom (Python) policy and config errors."""
import gc
import struct

import pytest

import entmtp
from entmtp import Features, Outcome, Policy, PolicyKind


def next_f32(x):
    """The next float32 above float32(x): thresholds and s are float in C."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return struct.unpack("<f", struct.pack("<I", bits + 1))[0]


def picks(policy, s_values, n_trees):
    return [policy.select(Features(s=s), n_trees) for s in s_values]


def test_kind_names():
    for k in PolicyKind:
        assert entmtp.kind_from_name(entmtp.kind_name(k)) == k
    assert entmtp.kind_name(PolicyKind.UCB) == "ucb"
    assert entmtp.kind_from_name("dynamic") == PolicyKind.DYNAMIC
    assert entmtp.kind_from_name("throughput") == PolicyKind.THROUGHPUT
    with pytest.raises(entmtp.NotFoundError, match="bandit"):
        entmtp.kind_from_name("bandit")
    assert Policy("ladder", thresholds=[0.5]).kind == PolicyKind.LADDER
    with pytest.raises(entmtp.InvalidArgumentError, match="policy kind"):
        Policy("bandit")


def test_static():
    p = Policy.static(2)
    assert p.kind == PolicyKind.STATIC and p.kind_name == "static"
    assert picks(p, [0.0, 0.5, 1.0], 3) == [2, 2, 2]
    assert p.config == {"kind": "static", "static_tree": 2}
    p.validate(3)
    with pytest.raises(entmtp.OutOfRangeError, match="static_tree"):
        p.validate(2)
    with pytest.raises(entmtp.OutOfRangeError, match="outside the bank"):
        p.select(0.5, 2)
    with pytest.raises(entmtp.InvalidConfigError, match="static_tree"):
        Policy.static(-1)


def test_ladder_bin_edges():
    p = Policy.ladder([0.1, 0.5])  # bins: s <= 0.1 | 0.1 < s <= 0.5 | s > 0.5
    s = [-1.0, 0.0, 0.1, next_f32(0.1), 0.3, 0.5, next_f32(0.5), 1.0]
    assert picks(p, s, 3) == [0, 0, 0, 1, 1, 1, 2, 2]
    assert p.config["thresholds"] == [pytest.approx(0.1), pytest.approx(0.5)]
    q = Policy.ladder([0.1, 0.5], trees=[2, 0, 1])
    assert picks(q, [0.05, 0.2, 0.9], 3) == [2, 0, 1]
    with pytest.raises(entmtp.OutOfRangeError, match=r"ladder_trees\[0\]"):
        q.validate(2)
    with pytest.raises(entmtp.InvalidArgumentError, match="not finite"):
        p.select(float("nan"), 3)
    # no thresholds: one bin
    assert picks(Policy.ladder([]), [0.0, 1.0], 1) == [0, 0]


@pytest.mark.parametrize("kw, needle", [
    ({"thresholds": [0.5, 0.1]}, "thresholds[1]"),
    ({"thresholds": [0.1, 0.1]}, "thresholds[1]"),
    ({"thresholds": [float("inf")]}, "not finite"),
    ({"thresholds": [0.1], "trees": [0, -1]}, "ladder_trees[1]"),
])
def test_ladder_bad_config(kw, needle):
    with pytest.raises(entmtp.InvalidConfigError) as ei:
        Policy.ladder(**kw)
    assert needle in ei.value.message


def test_ladder_bad_config_caught_in_python():
    with pytest.raises(entmtp.InvalidConfigError, match="at most 15"):
        Policy.ladder([i / 100 for i in range(16)])
    with pytest.raises(entmtp.InvalidConfigError, match="need 3 trees"):
        Policy.ladder([0.1, 0.2], trees=[0, 1])


def test_hysteresis_does_not_flap():
    p = Policy.hysteresis(tau_on=0.3, tau_off=0.1)  # conservative 0, aggressive 1
    s = [0.05, 0.2, 0.3, 0.35, 0.2, 0.15, 0.11, 0.31, 0.1, 0.2, 0.29, 0.3, 0.31, 0.0]
    want = [0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0]
    assert picks(p, s, 2) == want
    # values oscillating strictly between tau_off and tau_on never switch
    p.reset()
    assert picks(p, [0.12, 0.28] * 20, 2) == [0] * 40
    assert picks(p, [0.5] + [0.12, 0.28] * 20, 2) == [1] * 41
    p.reset()  # back to conservative
    assert p.select(0.2, 2) == 0


def test_hysteresis_trees_and_config_errors():
    p = Policy.hysteresis(0.5, 0.5, conservative=2, aggressive=0)
    assert picks(p, [0.4, 0.6, 0.5, 0.51], 3) == [2, 0, 2, 0]
    with pytest.raises(entmtp.InvalidConfigError, match="tau_off"):
        Policy.hysteresis(tau_on=0.1, tau_off=0.3)
    with pytest.raises(entmtp.InvalidConfigError, match="tau_on"):
        Policy.hysteresis(tau_on=float("nan"), tau_off=0.1)
    with pytest.raises(entmtp.InvalidConfigError, match="aggressive_tree"):
        Policy.hysteresis(0.3, 0.1, aggressive=-2)
    with pytest.raises(entmtp.OutOfRangeError, match="aggressive_tree"):
        Policy.hysteresis(0.3, 0.1).validate(1)


def test_ucb_tries_every_arm_then_settles():
    p = Policy.ucb(exploration=0.5)
    accept = {0: 1, 1: 4, 2: 2}  # arm 1 is clearly best
    first, counts = [], [0, 0, 0]
    for step in range(300):
        k = p.select(Features(s=0.0), 3)
        if step < 3:
            first.append(k)
        if step >= 200:
            counts[k] += 1
        p.observe(Outcome(tree_index=k, accept_length=accept[k], draft_length=2))
    assert sorted(first) == [0, 1, 2]  # every arm once before exploiting
    assert counts[1] >= 90, counts
    # reset forgets the statistics: every arm is tried again
    p.reset()
    again = []
    for _ in range(3):
        k = p.select(0.0, 3)
        again.append(k)
        p.observe(tree_index=k, accept_length=1)
    assert sorted(again) == [0, 1, 2]


def test_ucb_length_penalty_prefers_short_drafts():
    p = Policy.ucb(exploration=0.0, length_penalty=1.0)
    # same accept length, tree 0 drafts 1 token and tree 1 drafts 8
    draft = {0: 1, 1: 8}
    for _ in range(50):
        k = p.select(0.0, 2)
        p.observe(Outcome(tree_index=k, accept_length=2, draft_length=draft[k]))
    assert p.select(0.0, 2) == 0


def test_ucb_errors():
    p = Policy.ucb()
    with pytest.raises(entmtp.OutOfRangeError, match="never selected"):
        p.observe(Outcome(tree_index=0, accept_length=1))
    p.select(0.0, 2)
    with pytest.raises(entmtp.InvalidArgumentError, match="accept_length"):
        p.observe(Outcome(tree_index=0, accept_length=0))
    with pytest.raises(entmtp.InvalidConfigError, match="ucb_exploration"):
        Policy.ucb(exploration=-1.0)
    with pytest.raises(entmtp.InvalidConfigError, match="ucb_length_penalty"):
        Policy.ucb(length_penalty=float("inf"))


def test_custom_callbacks_see_features_and_outcomes():
    seen, outcomes, resets = [], [], []

    def select(features, n_trees):
        seen.append((features, n_trees))
        return 1 if features.s > 0.5 else 0

    p = Policy.custom(select, observe=outcomes.append, reset=lambda: resets.append(1))
    f = Features(s=0.7, p0=0.9, head_p=[0.8, 0.6], g=[0.72, 0.43], entropy=1.5,
                 last_accept_length=3, accept_length_ema=2.5, step=7)
    assert p.select(f, 4) == 1
    got, n = seen[-1]
    assert n == 4 and got.n_heads == 2 and got.step == 7 and got.last_accept_length == 3
    assert got.s == pytest.approx(0.7) and got.head_p == pytest.approx([0.8, 0.6])
    assert got.g == pytest.approx([0.72, 0.43]) and got.entropy == pytest.approx(1.5)
    assert p.select(0.2, 4) == 0
    p.observe(Outcome(tree_index=1, accept_length=3, n_nodes=10, draft_length=4, seconds=0.5))
    assert outcomes == [Outcome(tree_index=1, accept_length=3, n_nodes=10, draft_length=4, seconds=0.5)]
    p.reset()
    assert resets == [1]
    assert p.kind == PolicyKind.CUSTOM and p.config == {"kind": "custom"}


def test_custom_select_exception_becomes_callback_error():
    class Boom(Exception):
        pass

    def select(features, n_trees):
        raise Boom("no tree for you")

    p = Policy.custom(select)
    with pytest.raises(entmtp.CallbackError) as ei:
        p.select(0.5, 2)
    e = ei.value
    assert e.status == entmtp.Status.CALLBACK
    assert isinstance(e.__cause__, Boom) and "no tree for you" in e.message
    # the policy still works afterwards, and the error does not linger
    p2 = Policy.custom(lambda f, n: n - 1)
    assert p2.select(0.5, 3) == 2


def test_custom_select_bad_return_values():
    with pytest.raises(entmtp.OutOfRangeError, match="chose tree 5"):
        Policy.custom(lambda f, n: 5).select(0.0, 2)
    with pytest.raises(entmtp.OutOfRangeError, match="-1"):
        Policy.custom(lambda f, n: -1).select(0.0, 2)
    with pytest.raises(entmtp.CallbackError) as ei:
        Policy.custom(lambda f, n: "zero").select(0.0, 2)
    assert isinstance(ei.value.__cause__, TypeError)
    with pytest.raises(entmtp.CallbackError) as ei:
        Policy.custom(lambda f, n: 1 << 40).select(0.0, 2)
    assert isinstance(ei.value.__cause__, OverflowError)


def test_custom_observe_and_reset_exceptions():
    def observe(o):
        raise ValueError("observe failed")

    def reset():
        raise RuntimeError("reset failed")

    p = Policy.custom(lambda f, n: 0, observe=observe, reset=reset)
    with pytest.raises(entmtp.CallbackError) as ei:
        p.observe(tree_index=0, accept_length=1)
    assert isinstance(ei.value.__cause__, ValueError)
    with pytest.raises(entmtp.CallbackError) as ei:
        p.reset()
    assert isinstance(ei.value.__cause__, RuntimeError)
    assert p.select(0.0, 1) == 0


def test_custom_callback_is_kept_alive():
    def make():
        state = {"calls": 0}

        def select(f, n):
            state["calls"] += 1
            return state["calls"] % n
        return Policy.custom(select)

    p = make()
    gc.collect()
    assert [p.select(0.0, 3) for _ in range(4)] == [1, 2, 0, 1]


def test_custom_config_errors():
    with pytest.raises(entmtp.InvalidConfigError, match="select"):
        Policy(PolicyKind.CUSTOM)  # no select callback
    with pytest.raises(entmtp.InvalidConfigError, match="callable"):
        Policy.custom(42)
    with pytest.raises(entmtp.InvalidConfigError, match="unknown"):
        Policy("static", no_such_field=1)


def test_features_limits():
    with pytest.raises(entmtp.InvalidArgumentError, match="at most 16"):
        Policy.static().select(Features(head_p=[0.5] * 17, g=[0.5] * 17), 1)
    with pytest.raises(entmtp.InvalidArgumentError, match="same length"):
        Policy.static().select(Features(head_p=[0.5], g=[]), 1)
    with pytest.raises(entmtp.InvalidArgumentError):
        Policy.static().select("0.5", 1)


def test_custom_sees_every_rank_and_the_outlook():
    seen = []
    p = Policy.custom(lambda f, n: seen.append(f) or 0)
    f = Features(s=0.5, p0=0.5, head_p=[0.6, 0.3], g=[0.3, 0.09],
                 head_topk_p=[[0.6, 0.2, 0.1], [0.3, 0.25, 0.2]],
                 expected_accept=[1.0, 1.5], expected_seconds=[0.01, 0.02])
    assert f.topk == 3 and f.n_heads == 2
    assert p.select(f, 2) == 0
    got = seen[-1]
    assert got.topk == 3 and got.n_trees == 2
    assert got.head_topk_p == [pytest.approx([0.6, 0.2, 0.1]), pytest.approx([0.3, 0.25, 0.2])]
    assert got.expected_accept == pytest.approx([1.0, 1.5])
    assert got.expected_seconds == pytest.approx([0.01, 0.02])
    # without them: empty ranks, no outlook
    assert p.select(0.5, 2) == 0
    assert seen[-1].head_topk_p == [] and seen[-1].topk == 0
    assert seen[-1].expected_accept is None and seen[-1].expected_seconds is None


def test_throughput_reads_the_outlook_of_the_features():
    p = Policy(PolicyKind.THROUGHPUT)
    # 1.0, 1.333 and 1.0 tokens per second: the middle tree
    f = Features(expected_accept=[1.0, 2.0, 3.0], expected_seconds=[1.0, 1.5, 3.0])
    assert p.select(f, 3) == 1
    with pytest.raises(entmtp.InvalidArgumentError, match="features.n_trees = 3"):
        p.select(f, 2)
    with pytest.raises(entmtp.StateError, match="expected_accept"):
        p.select(0.5, 3)  # no outlook


@pytest.mark.parametrize("kw, needle", [
    ({"head_topk_p": [[0.5]]}, "one row per head"),
    ({"head_p": [0.5], "g": [0.5], "head_topk_p": [[0.5, 0.1], [0.4]]}, "one row per head"),
    ({"head_p": [0.5], "g": [0.5], "head_topk_p": [[0.1] * 65]}, "one row per head"),
    ({"expected_accept": [1.0]}, "both or neither"),
    ({"expected_accept": [1.0], "expected_seconds": [0.1, 0.2]}, "same count"),
    ({"expected_accept": [1.0], "expected_seconds": [0.1], "n_trees": 2}, "same count"),
])
def test_features_outlook_errors(kw, needle):
    with pytest.raises(entmtp.InvalidArgumentError, match=needle):
        Policy.static().select(Features(**kw), 1)


def test_context_manager_and_close():
    with Policy.static() as p:
        assert p.select(0.0, 1) == 0
    assert p.closed
    with pytest.raises(entmtp.StateError):
        p.select(0.0, 1)
