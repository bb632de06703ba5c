#!/usr/bin/env python3
"""How much can any tree schedule gain over the best static tree? A bound,
trajectory-exact, from every position of held-out answers.

simulate.py replays the steps one traced generation took, so a rule's
choices cannot move where the next step starts. Here every position of
every answer is known instead: selfdistill.py (tools/train_heads) stores the
base model's greedy answers with the hidden state before each token, and
this script runs the Hydra heads on them (teacher-forced, which is exact
along the accepted path) to get, at each position p and head level d, the
heads' top-k probabilities and the rank of the token greedy decoding emits
there (or none in the top k). A step at p with tree T then accepts the
longest root path of T that follows those ranks, and the next step starts
after it: static trees, an oracle and every rule below walk the same
answers exactly as the engine would, at the cost table's prices (verify[n]
AR steps for n nodes plus `head` per Hydra level run).

Rules (all Bayes-style: a tree is worth E - bar * cost, E from node
probabilities calibrated per level, rank and probability bin on --train):
  oracle      the tree of the accepted length, knowing it
  free peek   every level's probabilities known at no cost, best bank tree:
              an upper bound for policies that read the heads (bar swept)
  paid peek   the chain rule of the engine (emt_outlook_deeper_may_pay):
              run level j only while a deeper chain may pay, paying each
              level run; bar = the long-run rate, or the step's best ratio
  probe       as paid peek, levels' probabilities from a logistic probe on
              the head's output vector and its top-k (--probe; scikit-learn)

  python3 tools/train_heads/selfdistill.py --model M.gguf --split calib \\
      --n code=60 --n chat=60 --n math=60 --max-new 128 --work /tmp/b/cal
  python3 tools/train_heads/selfdistill.py --model M.gguf --split eval --seed 123 \\
      --n code=20 --n chat=20 --n math=20 --max-new 128 --work /tmp/b/eval
  python3 tools/policy_sim/bound.py --model M.gguf --heads H.safetensors \\
      --bank B.bank.json --train /tmp/b/cal/shards/calib --eval /tmp/b/eval/shards/eval

docs/results.md ("How far scheduling can go") has the figures for the
bundled model.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "train_heads"))
from backbone import load_embeddings  # noqa: E402
from train import Distilled, Heads, head_input  # noqa: E402

TOPK = 4
BINS = np.array([0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01])


def load_heads(path):
    from safetensors.torch import load_file
    st = load_file(path)
    n = 1 + max(int(k.split(".")[1]) for k in st if k.startswith("hydra_mlp."))
    hidden = st["hydra_mlp.0.0.linear.bias"].numel()
    heads = Heads("hydra", n, 1, hidden)
    heads.load_state_dict({f"blocks.{i}.0.{name}": st[f"hydra_mlp.{i}.0.{name}"].float()
                           for i in range(n)
                           for name in ("linear.weight", "linear.bias", "res_connection.weight",
                                        "res_connection.bias")})
    vocab = st["draft_vocab"].long() if "draft_vocab" in st else None
    return heads.eval(), vocab


def answer_spans(shard_dir):
    """(start, end, task) of each answer, in Distilled's flattened order."""
    spans, n = [], 0
    for f in sorted(glob.glob(os.path.join(shard_dir, "*.pt"))):
        for s in torch.load(f):
            k = len(s["answer"])
            if k >= 2:
                spans.append((n, n + k, s["task"]))
                n += k
    return spans


@torch.no_grad()
def tables(ds, heads, embed, lm_head, vocab, keep_vectors):
    """Per position and level: top-k probabilities q, the greedy token's
    rank (-1: not in the top k; -2: past the answer), head output vectors."""
    n, levels = len(ds), len(heads.blocks)
    rows = lm_head if vocab is None else lm_head[vocab]
    q = np.zeros((n, levels, TOPK), np.float32)
    rank = np.full((n, levels), -2, np.int64)
    vec = np.zeros((n, levels, rows.shape[1]), np.float16) if keep_vectors else None
    pos = torch.arange(n)
    for d in range(levels):
        at = pos[pos + 1 + d < ds.end]
        for b in range(0, len(at), 2048):
            p = at[b:b + 2048]
            r = heads.blocks[d](head_input("hydra", d, ds, p, embed))
            top = torch.softmax(r @ rows.T, -1).topk(TOPK, -1)
            ids = top.indices if vocab is None else vocab[top.indices]
            hit = ids == ds.tokens[p + 1 + d][:, None]
            rank[p.numpy(), d] = torch.where(hit.any(1), hit.float().argmax(1), -1).numpy()
            q[p.numpy(), d] = top.values.numpy()
            if keep_vectors:
                vec[p.numpy(), d] = r.half().numpy()
    return q, rank, vec


def chain(depth):
    """The rank-0 chain of `depth` nodes below the root, as rank paths."""
    return {(0,) * i for i in range(1, depth + 1)}


def chain_reach(rank):
    """Per level d: the positions where the rank-0 chain reached level d
    (every level before it passed) inside the answer."""
    out, reach = [], np.ones(len(rank), bool)
    for d in range(rank.shape[1]):
        out.append(reach & (rank[:, d] > -2))
        reach &= rank[:, d] == 0
    return out


def prob_bin(q):
    return np.minimum(np.searchsorted(BINS, q, side="right"), len(BINS) - 1)


def calibrate(q, rank):
    """P(node of level d, rank r is the greedy token | its parent was), by
    probability bin, fitted where the rank-0 chain reached level d; returns
    the calibrated probabilities of q's shape [positions, levels, TOPK]."""
    levels = q.shape[1]
    hit = np.ones((levels, TOPK, len(BINS)))
    seen = np.full((levels, TOPK, len(BINS)), 2.0)
    for d, at in enumerate(chain_reach(rank)):
        for r in range(TOPK):
            b = prob_bin(q[at, d, r])
            np.add.at(seen, (d, r, b), 1)
            np.add.at(hit, (d, r, b), rank[at, d] == r)
    table = hit / seen
    return lambda qq: table[np.arange(levels)[None, :, None], np.arange(TOPK)[None, None, :], prob_bin(qq)]


def chain_pass_rates(rank):
    """Mean pass rate of each level along the rank-0 chain."""
    return [float((rank[at, d] == 0).mean()) for d, at in enumerate(chain_reach(rank))]


class Walk:
    """Steps through every answer of one task as the engine would."""

    def __init__(self, spans, rank, verify, head):
        self.spans, self.rank, self.verify, self.head = spans, rank, verify, head

    def accepted(self, p, tree):
        path = ()
        for d in range(self.rank.shape[1]):
            r = self.rank[p, d]
            if r < 0 or path + (int(r),) not in tree:
                break
            path += (int(r),)
        return len(path)

    def run(self, choose):
        """choose(p) -> (tree as a set of rank paths, node count, levels run)"""
        tokens = cost = 0.0
        for a, b, _ in self.spans:
            p = a
            while p < b:
                tree, nodes, levels = choose(p)
                acc = self.accepted(p, tree)
                tokens += 1 + acc
                cost += self.verify(nodes) + self.head * levels
                p += 1 + acc
        return tokens / cost


def path_prob(P, path):
    v = 1.0
    for d, r in enumerate(path):
        v *= P[d, r]
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--heads", required=True, help="Hydra heads (.safetensors)")
    ap.add_argument("--bank", required=True, help="bank whose trees are the static rows and the choices")
    ap.add_argument("--train", required=True, help="selfdistill shard folder to calibrate on")
    ap.add_argument("--eval", required=True, help="selfdistill shard folder to walk")
    ap.add_argument("--verify", default="1,1.23,1.45,1.68,1.94",
                    help="AR steps per verify of 1, 2, ... nodes (then the last step per node)")
    ap.add_argument("--head", type=float, default=0.037, help="AR steps per Hydra level")
    ap.add_argument("--probe", action="store_true", help="also a logistic probe on the head vectors")
    ap.add_argument("--plot", metavar="PNG", help="bar chart of each task's gains (matplotlib)")
    a = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    vt = [float(x) for x in a.verify.split(",")]
    verify = lambda n: vt[n - 1] if n <= len(vt) else vt[-1] + (n - len(vt)) * (vt[-1] - vt[-2])

    embed, lm_head = load_embeddings(a.model)
    heads, vocab = load_heads(a.heads)
    train, held = Distilled(a.train), Distilled(a.eval)
    q_tr, rank_tr, vec_tr = tables(train, heads, embed, lm_head, vocab, a.probe)
    q, rank, vec = tables(held, heads, embed, lm_head, vocab, a.probe)
    levels = q.shape[1]
    cal = calibrate(q_tr, rank_tr)
    rates = chain_pass_rates(rank_tr)
    bank = json.load(open(a.bank))
    trees = [(t["name"], {tuple(c) for c in t["choices"]}, len(t["choices"]) + 1,
              max((len(c) for c in t["choices"]), default=0)) for t in bank["trees"]]
    P_all = cal(q)  # calibrated node probabilities [positions, levels, TOPK]

    chain_p = P_all[:, :, 0]
    if a.probe:
        from sklearn.linear_model import LogisticRegression

        def feats(qq, vv, d):
            v = vv[:, d].astype(np.float32)
            v = v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-6)
            x = np.clip(qq[:, d, :2], 1e-4, 1 - 1e-4)
            return np.concatenate([np.log(x / (1 - x)), v], 1)

        probe = np.zeros((len(q), levels))
        for d, at in enumerate(chain_reach(rank_tr)):
            m = LogisticRegression(C=0.005, max_iter=3000).fit(feats(q_tr, vec_tr, d)[at], rank_tr[at, d] == 0)
            probe[:, d] = m.predict_proba(feats(q, vec, d))[:, 1]

    def static(tree):
        _, paths, nodes, depth = tree
        return lambda p: (paths, nodes, depth)

    def free_peek(bar):
        def choose(p):
            best = None
            for _, paths, nodes, depth in trees:
                v = 1 + sum(path_prob(P_all[p], c) for c in paths) - bar * (verify(nodes) + a.head * depth)
                if best is None or v > best[0]:
                    best = (v, paths, nodes, depth)
            return best[1:]
        return choose

    def paid_peek(probs, bar):
        """bar > 0: E - bar * cost; bar == 0: the step's best ratio"""
        def value(e, cost):
            return e - bar * cost if bar > 0 else e / cost

        def choose(p):
            P, e, run, best = 1.0, 1.0, 0, (value(1.0, verify(1)), 0)
            for j in range(levels):
                # may a deeper chain pay? unknown levels pass at their mean rate
                pr, ee, look = P, e, False
                for jj in range(j, levels):
                    pr *= rates[jj]
                    ee += pr
                    if value(ee, verify(jj + 2) + a.head * (jj + 1)) > best[0]:
                        look = True
                        break
                if not look:
                    break
                run = j + 1
                P *= probs[p, j]
                e += P
                v = value(e, verify(j + 2) + a.head * (j + 1))
                if v > best[0]:
                    best = (v, j + 1)
            d = best[1]
            return chain(d), d + 1, run
        return choose

    spans_all = answer_spans(a.eval)
    figure = {}  # task -> {row: best gain over the bars, %}
    print(f"bound: {len(q_tr)} calibration positions, {len(q)} held-out positions; "
          f"chain pass rates {', '.join(f'{r:.3f}' for r in rates)}; verify {a.verify}, head {a.head}")
    for task in sorted({t for _, _, t in spans_all}):
        walk = Walk([s for s in spans_all if s[2] == task], rank, verify, a.head)
        st = {t[0]: walk.run(static(t)) for t in trees}
        best_name = max(st, key=st.get)
        best = st[best_name]
        gain = lambda v: f"{100 * (v / best - 1):+.1f}%"
        full_chain = chain(levels)

        def oracle_choice(p):
            m = walk.accepted(p, full_chain)
            return chain(m), 1 + m, m
        oracle = walk.run(oracle_choice)
        print(f"{task}: best static {best_name} {best:.4f} tokens per AR step "
              f"({', '.join(f'{k} {v:.3f}' for k, v in st.items())})")
        print(f"  oracle chain            {gain(oracle)}")
        bars = (1.0, 1.1, 1.2, 1.3, 1.4, 1.5)
        rows = {"free peek": [walk.run(free_peek(b)) for b in bars],
                "paid peek": [walk.run(paid_peek(chain_p, b)) for b in bars]}
        if a.probe:
            rows["probe"] = [walk.run(paid_peek(probe, b)) for b in bars]
        ratio = walk.run(paid_peek(chain_p, 0))
        for name, got in rows.items():
            print(f"  {name + ',':10s} bar " + "  ".join(f"{b}: {gain(v)}" for b, v in zip(bars, got))
                  + (f"  ratio: {gain(ratio)}" if name == "paid peek" else ""))
        figure[task] = {"paid peek (the engine's chain rule)": 100 * (max(rows["paid peek"]) / best - 1),
                        "free peek (every level known at no cost)": 100 * (max(rows["free peek"]) / best - 1),
                        "oracle": 100 * (oracle / best - 1)}
    if a.plot:
        plot(figure, a.plot, f"verify {a.verify}, head {a.head} AR steps; {len(q)} held-out positions")


def plot(figure, path, note):
    """Grouped bars: each task's best gain per rule over its best static tree."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tasks = list(figure)
    names = list(figure[tasks[0]])
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        xs = [t + (i - (len(names) - 1) / 2) * width for t in range(len(tasks))]
        vals = [figure[t][name] for t in tasks]
        ax.bar(xs, vals, width, label=name)
        for x, v in zip(xs, vals):
            ax.annotate(f"{v:+.1f}%", (x, v), ha="center", va="bottom", fontsize=8)
    ax.axhline(5, color="k", linestyle="--", linewidth=0.8, label="issue 19's goal: +5%")
    top = max(v for t in tasks for v in figure[t].values())
    ax.set_ylim(min(0, min(v for t in tasks for v in figure[t].values())) * 1.2, top * 1.4)
    ax.set_xlim(-0.5, len(tasks) - 0.5)
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks)
    ax.set_ylabel("gain over the best static tree (%)")
    ax.set_title("What a tree schedule can gain with these heads", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", ncol=2, frameon=False)
    fig.text(0.01, 0.01, note, fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=120)
    print(f"bound: wrote {path}")


if __name__ == "__main__":
    main()
