#!/usr/bin/env python3
"""Mean accept length of drafters in EntMTP itself (`entmtp generate`) on
held-out prompts (the eval split of tools/prompts), greedy, one tree for
all: by default the EAGLE-3 drafter and the shipped Hydra heads on a
depth-3 chain. Every run is also checked against greedy AR's tokens.

  python3 tools/train_heads/measure_eagle3.py --cli build/release/entmtp \\
      --drafter heads/SmolLM2-135M-Instruct.eagle3 \\
      --drafter heads/SmolLM2-135M-Instruct.hydra.safetensors --tree chain_3 --n 6
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", default=None, help="default: the bundled model")
    ap.add_argument("--drafter", action="append", required=True, help="heads file or EAGLE-3 directory (repeatable)")
    ap.add_argument("--tree", default="chain_3")
    ap.add_argument("--tasks", default="code,chat,math")
    ap.add_argument("--n", type=int, default=6, help="prompts per task")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=123, help="prompt sampling seed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args()
    model = a.model or subprocess.run(["bash", os.path.join(ROOT, "scripts/fetch-model.sh")], check=True,
                                      capture_output=True, text=True).stdout.strip()
    base = [a.cli, "generate", "--model", model, "--max-tokens", str(a.max_tokens), "--threads", str(a.threads),
            "--json", "--quiet"]
    results = {}
    for task in a.tasks.split(","):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tools/prompts/make_prompts.py"), "--task", task,
                              "--split", "eval", "--n", str(a.n), "--seed", str(a.seed)],
                             check=True, capture_output=True, text=True).stdout
        prompts = [json.loads(line)["prompt"] for line in out.splitlines() if line.strip()]
        for p in prompts:
            ar = json.loads(subprocess.run(base + ["--ar", "--prompt", p], check=True, capture_output=True,
                                           text=True).stdout)
            for d in a.drafter:
                r = json.loads(subprocess.run(base + ["--heads", d, "--tree", a.tree, "--prompt", p], check=True,
                                              capture_output=True, text=True).stdout)
                if r["tokens"] != ar["tokens"]:
                    sys.exit(f"measure: {d} on {task}: greedy output differs from AR's")
                acc = results.setdefault(os.path.basename(os.path.normpath(d)), {}).setdefault(task, [0, 0])
                acc[0] += len(r["tokens"])
                acc[1] += len(r["tokens"]) / r["mean_accept_length"]
    table = {d: {t: round(n / s, 3) for t, (n, s) in per.items()} for d, per in results.items()}
    print(f"mean accept length, tree {a.tree}, {a.n} held-out prompts per task, {a.max_tokens} tokens, greedy "
          "(every run equal to AR):")
    for d, per in table.items():
        print(f"  {d}: " + "  ".join(f"{t} {v:.3f}" for t, v in per.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tree": a.tree, "prompts_per_task": a.n, "max_tokens": a.max_tokens, "accept_length": table},
                      f, indent=1)


if __name__ == "__main__":
    main()
