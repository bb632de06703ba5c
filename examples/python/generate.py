#!/usr/bin/env python3
"""A complete EntMTP program in Python: load a model and heads, build a bank
of two trees, attach the hysteresis policy and generate (the same as
examples/c/generate.c). Install the bindings first: pip install bindings/python

usage: generate.py MODEL HEADS [PROMPT_IDS...]
       generate.py MODEL HEADS --prompt TEXT   (needs a model with a tokenizer)
       generate.py --bank-demo                 (no model: shows trees and a policy)
"""
import argparse
import sys

import entmtp


def bank_demo():
    with entmtp.Bank() as bank:
        bank.add_tree("small", [[0], [0, 0], [1]])
        bank.add_builtin("mc_sim_7b_63")
        for t in bank:
            print("tree %d: %-14s %3d nodes, depth %d, %d leaves"
                  % (t.index, t.name, t.n_nodes, t.depth, t.n_leaves))
        # an invalid tree is an exception with the library's message, never a crash
        try:
            bank.add_tree("bad", [[0], [1, 2]])  # path [1,2] lacks its prefix [1]
        except entmtp.InvalidTreeError as e:
            print("invalid tree -> %s: %s" % (e.status_name, e.message))
        with entmtp.Policy.hysteresis(tau_on=0.2, tau_off=0.05) as policy:
            for s in (0.01, 0.3, 0.1, 0.04):
                print("s = %.2f -> tree %d" % (s, policy.select(s, len(bank))))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("heads", nargs="?")
    ap.add_argument("prompt_ids", nargs="*", type=int)
    ap.add_argument("--prompt", help="prompt text (tokenized with the model's tokenizer)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--bank-demo", action="store_true")
    args = ap.parse_args(argv)
    print("EntMTP %s (bindings generated from header %d.%d.%d)"
          % ((entmtp.version(),) + entmtp.HEADER_VERSION))
    if args.bank_demo:
        return bank_demo()
    if not args.model or not args.heads:
        ap.print_usage(sys.stderr)
        return 2
    try:
        with entmtp.Model(args.model) as model, model.load_heads(args.heads) as heads:
            bank = entmtp.Bank(max_depth=heads.n_heads)
            bank.add_builtin("chain_2")
            bank.add_builtin("mc_sim_7b_63")
            policy = entmtp.Policy.hysteresis(tau_on=0.3, tau_off=0.1)
            session = entmtp.Session(model, heads, bank)
            session.set_policy(policy)
            if args.prompt is not None:
                prompt = model.tokenize(args.prompt, add_special=True)  # the BOS etc. the model asks for
            else:
                prompt = args.prompt_ids or [1, 2, 3, 4]
            session.prefill(prompt)
            print("tokens:", end="", flush=True)
            out = session.generate(args.max_tokens,
                                   on_tokens=lambda batch: print("", *batch, end="", flush=True))
            print()
            if args.prompt is not None:
                print("text: %r" % model.detokenize(out))
            st = session.stats()
            print("%d tokens in %d steps, mean accept length %.2f, tree usage %s"
                  % (st.n_generated, st.n_steps, st.mean_accept_length,
                     dict(zip(bank.names(), session.tree_usage()))))
            # every handle is released here, sessions first (the `with` blocks and
            # the garbage collector both free in a safe order)
    except entmtp.EntmtpError as e:
        print("%s: %s" % (e.status_name, e.message), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
