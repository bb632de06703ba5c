"""Bank: building, querying, buffers, files, stored policies and errors."""
import json

import pytest

import entmtp
from entmtp import _ffi

SMALL = [[0], [0, 0], [1]]


def test_create_add_and_query():
    with entmtp.Bank(max_depth=4, topk=10, max_nodes=64) as b:
        assert len(b) == 0 and list(b) == [] and b.names() == []
        assert b.add_tree("small", SMALL) == 0
        assert b.add_builtin("chain_2") == 1
        assert b.add_tree_json("json_tree", "[[0],[1],[2],[0,0]]") == 2
        assert b.add_tree("root_only", []) == 3
        assert len(b) == 4
        assert b.names() == ["small", "chain_2", "json_tree", "root_only"]
        assert b.find("chain_2") == 1 and b.get("chain_2") == 1 and b.get("zzz") is None
        assert "json_tree" in b and "zzz" not in b
        info = b.tree_info("small")
        assert info == b.tree_info(0)
        assert (info.index, info.name, info.n_nodes, info.depth, info.n_paths, info.n_leaves) == \
            (0, "small", 4, 2, 3, 2)
        assert b.tree_info("root_only").n_nodes == 1 and b.tree_info("root_only").depth == 0
        assert [t.name for t in b] == b.names()
        b.set_figures("small", 2.5, 120.0)
        assert b.tree_info(0).mean_accept_length == 2.5 and b.tree_info(0).tokens_per_second == 120.0


def test_create_classmethod_and_defaults():
    b = entmtp.Bank.create()
    b.add_builtin("mc_sim_7b_63")
    t = b.tree_info(0)
    assert t.n_nodes == 64 and t.depth == 4
    assert b.tree_buffers(0).topk == 10
    b.close()
    assert b.closed


def test_tree_buffers_numpy():
    np = pytest.importorskip("numpy")
    b = entmtp.Bank()
    b.add_tree("small", SMALL)
    tb = b.tree_buffers("small")
    assert (tb.n_nodes, tb.depth, tb.n_leaves, tb.topk) == (4, 2, 2, 10)
    assert tb.attn_mask.dtype == np.uint8 and tb.attn_mask.shape == (4, 4)
    assert tb.attn_mask.tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    assert tb.position_ids.tolist() == [0, 1, 1, 2]
    assert tb.parents.tolist() == [-1, 0, 0, 1]
    assert tb.node_ranks.tolist() == [-1, 0, 1, 0]
    # tree_indices: index into [root, head0 top-k, head1 top-k, ...]
    assert tb.tree_indices.tolist() == [0, 1, 2, 1 + 10 + 0]
    assert tb.retrieve_indices.shape == (2, 3)
    assert tb.retrieve_indices.tolist() == [[0, 1, 3], [0, 2, -1]]
    # copies: they survive the bank
    b.close()
    assert tb.parents.tolist() == [-1, 0, 0, 1]


def test_tree_buffers_lists_without_numpy(monkeypatch):
    monkeypatch.setattr(_ffi, "np", None)
    b = entmtp.Bank()
    b.add_tree("small", SMALL)
    tb = b.tree_buffers(0)
    assert tb.attn_mask == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    assert tb.retrieve_indices == [[0, 1, 3], [0, 2, -1]]
    assert tb.parents == [-1, 0, 0, 1] and isinstance(tb.position_ids, list)


@pytest.mark.parametrize("choices, needle", [
    ([[0], [1, 2]], "[1,2]"),             # prefix [1] missing
    ([[0], [0]], "[0]"),                  # duplicate
    ([[0], [10]], "[10]"),                # rank >= topk
    ([[0], [-1]], "[-1]"),                # negative rank
])
def test_invalid_tree_names_the_path(choices, needle):
    b = entmtp.Bank()
    b.add_builtin("chain_1")
    with pytest.raises(entmtp.InvalidTreeError) as ei:
        b.add_tree("bad", choices)
    assert ei.value.status == entmtp.Status.INVALID_TREE
    assert needle in ei.value.message and "bad" in ei.value.message
    assert len(b) == 1  # the bank is unchanged


def test_invalid_tree_limits():
    b = entmtp.Bank(max_depth=2, max_nodes=4)
    with pytest.raises(entmtp.InvalidTreeError, match=r"\[0,0,0\]"):
        b.add_tree("deep", [[0], [0, 0], [0, 0, 0]])
    with pytest.raises(entmtp.InvalidTreeError, match="exceed"):
        b.add_tree("wide", [[0], [1], [2], [3]])
    with pytest.raises(entmtp.InvalidTreeError, match="name"):
        b.add_tree("", [[0]])
    b.add_tree("ok", [[0]])
    with pytest.raises(entmtp.InvalidTreeError, match="ok"):
        b.add_tree("ok", [[1]])
    with pytest.raises(entmtp.InvalidTreeError):
        b.add_tree("notalist", [0, 1])
    with pytest.raises(entmtp.InvalidTreeError, match="int32"):
        b.add_tree("huge", [[1 << 40]])
    with pytest.raises(entmtp.InvalidTreeError, match="JSON"):
        b.add_tree_json("j", "[[0],[0,")
    assert b.names() == ["ok"]


def test_lookup_errors():
    b = entmtp.Bank()
    b.add_builtin("chain_3")
    with pytest.raises(entmtp.NotFoundError, match="nope"):
        b.find("nope")
    with pytest.raises(entmtp.NotFoundError, match="nope"):
        b.add_builtin("nope")
    with pytest.raises(entmtp.OutOfRangeError, match="99"):
        b.tree_info(99)
    with pytest.raises(entmtp.OutOfRangeError):
        b.tree_buffers(-1)
    with pytest.raises(entmtp.OutOfRangeError):
        b.set_figures(5, 1.0, 1.0)


def test_save_and_load_roundtrip(tmp_path):
    b = entmtp.Bank()
    b.add_tree("small", SMALL)
    b.add_builtin("mc_sim_7b_63")
    b.set_figures(1, 3.25, 42.0)
    b.set_policy_config(entmtp.Policy.hysteresis(tau_on=0.3, tau_off=0.1))
    b.set_policy_config(entmtp.Policy.ladder([0.2], trees=[1, 0]))
    path = tmp_path / "bank.json"
    b.save(path)
    doc = json.loads(path.read_text())
    assert [t["name"] for t in doc["trees"]] == ["small", "mc_sim_7b_63"]
    c = entmtp.Bank.load(path)
    assert c.names() == b.names()
    assert c.tree_info(1).mean_accept_length == 3.25
    assert c.tree_buffers(0).n_nodes == 4
    h = entmtp.Policy.from_bank(c, "hysteresis")
    assert h.kind == entmtp.PolicyKind.HYSTERESIS
    assert h.config["tau_on"] == pytest.approx(0.3) and h.config["tau_off"] == pytest.approx(0.1)
    lad = c.policy(entmtp.PolicyKind.LADDER)
    assert lad.config["ladder_trees"] == [1, 0]
    with pytest.raises(entmtp.NotFoundError, match="ucb"):
        c.policy("ucb")


def test_stored_policy_errors():
    b = entmtp.Bank()
    b.add_builtin("chain_1")
    with pytest.raises(entmtp.InvalidConfigError, match="custom"):
        b.set_policy_config(entmtp.Policy.custom(lambda f, n: 0))
    with pytest.raises(entmtp.OutOfRangeError, match="static_tree"):
        b.set_policy_config(entmtp.Policy.static(3))
    with pytest.raises(entmtp.InvalidArgumentError):
        b.set_policy_config("static")


def test_load_errors(tmp_path):
    with pytest.raises(entmtp.IoError, match="missing.json"):
        entmtp.Bank.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"trees": [')
    with pytest.raises(entmtp.FormatError, match="bad.json"):
        entmtp.Bank.load(bad)
    bad.write_text('{"trees": [{"name": "x", "choices": [[0], [2, 1]]}]}')
    with pytest.raises(entmtp.EntmtpError) as ei:
        entmtp.Bank.load(bad)
    assert ei.value.status in (entmtp.Status.FORMAT, entmtp.Status.INVALID_TREE)
    assert "[2,1]" in ei.value.message
    with pytest.raises(entmtp.IoError):
        entmtp.Bank().save(tmp_path / "no" / "such" / "dir.json")


def test_closed_bank_raises_state_error():
    b = entmtp.Bank()
    b.close()
    b.close()  # idempotent
    with pytest.raises(entmtp.StateError, match="closed"):
        len(b)
    assert repr(b) == "<entmtp.Bank closed>"
