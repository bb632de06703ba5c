#!/usr/bin/env python3
"""Writes tests/data/tokenizer_smollm2.jsonl: token ids of a few hundred varied
strings under SmolLM2-135M-Instruct's tokenizer, computed by Hugging Face
`tokenizers` (the reference), for tests/unit/test_tokenizer_real.c.

No model hub is reachable here, so the reference tokenizer is rebuilt from the
GGUF's own vocabulary and merges, configured like SmolLM2's tokenizer.json:
BPE (no unk token, no byte fallback), pre-tokenizer
Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False,
use_regex=True)], ByteLevel decoder, and the control tokens (token_type 3:
<|endoftext|>, <|im_start|>, ...) as special added tokens.

Rerun (from the repository root):
    pip install gguf tokenizers jinja2
    python3 tests/python/make_tokenizer_fixture.py \
        [--model "$(bash scripts/fetch-model.sh)"] [--out tests/data/tokenizer_smollm2.jsonl] \
        [--save-tokenizer-json /tmp/smollm2-tokenizer.json]

Records, one JSON object a line:
  {"meta": {...}}                       vocabulary facts read from the GGUF
  {"text": s, "ids": [...]}             encode(s) with special tokens parsed, no BOS;
      "ids_raw": [...]                  (only if different) special-token text as plain text
      "ids_gpt2": [...]                 (only if different) the same vocabulary with the plain
                                        GPT-2 pre-tokenizer (ByteLevel(use_regex=True) alone)
      "ids_llama3": [...]               (only if different) with Llama 3's: Split(LLAMA3_PATTERN,
                                        isolated) + ByteLevel(use_regex=False), ignore_merges
      "decoded": s2                     (only if different from s) decode(ids), when bytes
                                        without a token were dropped
  {"chat": {"system": s|null, "user": u, "text": prompt, "ids": [...]}}
      prompt = the GGUF's chat_template rendered with jinja2 (as transformers does:
      trim_blocks, lstrip_blocks) for [system?, user] with add_generation_prompt=True
"""
import argparse
import json
import os
import random
import sys

import jinja2
from gguf import GGUFReader
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


# Llama 3's pre-tokenizer regex (its tokenizer.json Split pattern)
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def build_reference(reader, with_specials=True, pre="smollm"):
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = field(reader, "tokenizer.ggml.merges")
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges],
                     unk_token=None, fuse_unk=False, byte_fallback=False,
                     ignore_merges=(pre == "llama-bpe"))
    tk = Tokenizer(bpe)
    if pre == "smollm":
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    elif pre == "gpt2":
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre == "llama-bpe":
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tk.decoder = decoders.ByteLevel()
    if with_specials:
        tk.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                               for i in range(len(tokens)) if types[i] == 3])
    return tk


def texts():
    out = [
        "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\t\n\t",
        "Hello world! 123", "Hello, we can use", "The capital of France is",
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
        "Hello", "hello", "HELLO", " Hello", "Hello ", "  Hello  ", "Hello\nWorld",
        "a  b", "a   b", "a\t\tb", "a \t b", "abc   ", "   abc", "x  \n\n y", "end.\n\n\nNext",
        "I'm", "don't", "they'll", "we've", "she'd", "it's", "You're", "CAN'T", "I'M",
        "O'Neil's", "rock 'n' roll", "'s", "'", "''", "'''", "'tis", "y'all'd've",
        "0", "7", "42", "123", "2024", "3.14159", "1,000,000", "2024-11-22", "12:30:45",
        "+1 (555) 123-4567", "x1y2z3", "v1.2.3-rc4", "0x1F", "1e-10", "-273.15", "100%",
        "$19.99", "€5", "1st 2nd 3rd 4th", "a1 b22 c333 d4444", " 1", "  12", "a 1",
        "\u0661\u0662\u0663", "\u00bd", "\u216b", "x\u00b2 + y\u00b2", "\u2460\u2461",
        "\u4e00\u4e8c\u4e09", "\u0967\u0968\u0969",
        "\u4f60\u597d\uff0c\u4e16\u754c", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
        "\uc548\ub155\ud558\uc138\uc694", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
        "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440",
        "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
        "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
        "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
        "Caf\u00e9 d\u00e9j\u00e0 vu.", "na\u00efve co\u00f6perate", "Stra\u00dfe", "\u00c5ngstr\u00f6m",
        "e\u0301", "A\u0308", "cafe\u0301", "\u0301", "a\u0300\u0301\u0302", "\ufb01",
        "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b",
        "\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",
        "\U0001f1eb\U0001f1f7", "I \u2764\ufe0f NY", "\U0001f680 launch \U0001f680\U0001f680",
        "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522", "\u211d\u207f",
        "\u03a9 \u2248 \u221e", "\u2192 \u21d2 \u2200x \u2203y", "\u00a9 \u00ae \u2122",
        "\u2014 \u2013 \u2026", "\u201cquoted\u201d \u2018single\u2019", "\u00ab\u00bb \u2039\u203a",
        "\u00a0", "a\u00a0b", "\u3000", "a\u3000b", "\u2028", "a\u2029b", "\u200b", "a\u200bb",
        "\u0085", "a\u0085b", "\u000b", "\u000c", "a\u000bb\u000cc", "\u2009thin\u2009space",
        "\u1680ogham", "\u202fnarrow", "\u205fmath", "\ufeffBOM", "\u00ad", "soft\u00adhyphen",
        "\x7f", "\x1b[31mred\x1b[0m", "a\x04b", "!\x04?", "\x06\x13\x14", "x\x16y\x1dz",
        "\u00c0\u00c1", "\u00f1\u00f2\u00f5", "\U00010348", "\U00020000\U0002a6d6",
        "!!!", "...", "?!", "!?", "@#$%^&*()", "<>", "<<>>", "->", "=>", "::", "//", "/*", "*/",
        "#include <stdio.h>", "</s>", "<s>", "[INST]", "[/INST]", "<unk>", "<pad>",
        "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nHello<|im_end|>",
        "<|im_start|><|im_end|>", "<|im_start", "im_start|>", "<|im_end|>x<|im_start|>",
        "<|endoftext|><|endoftext|>", "<jupyter_code>print(1)", "<repo_name>foo/bar<file_sep>x.py",
        "<gh_stars>10", "text<empty_output>text", "< |im_start| >", "<|IM_START|>",
        " <|im_start|> ", "<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>assistant\n",
        "<|im_end|>\n", "a<|endoftext|>b", "<<|im_start|>>", "<|im_start|>|>",
        "int main(void) {\n    printf(\"hello\\n\");\n    return 0;\n}\n",
        "def f(x):\n    return x ** 2  # square\n",
        "for i in range(10):\n\tprint(i)\n",
        "class Foo:\n    def __init__(self):\n        self.x = [1, 2, 3]\n",
        "const add = (a, b) => a + b;\nconsole.log(add(1, 2));",
        "fn main() {\n    let v: Vec<u32> = (0..10).collect();\n    println!(\"{:?}\", v);\n}",
        "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
        "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
        "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
        "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\"; done",
        "\\begin{equation} E = mc^2 \\end{equation}", "$\\frac{a}{b}$",
        "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
        "# Title\n\n- item 1\n- item 2\n\n```python\nprint('x')\n```\n",
        "if (a && b || !c) { x += 1; } else { y -= 2; }",
        "    indented\n        more\n\tTab",
        "https://example.com/path?q=1&r=two#frag", "user@example.com",
        "C:\\Users\\name\\file.txt", "/usr/local/bin/python3",
        "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        " " * 64, "\n" * 20, "\t" * 9, "ab" * 40, "1234567890" * 5, "!?" * 30,
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
        "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud "
        "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.",
        "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! the_quick.brown",
        "Supercalifragilisticexpialidocious antidisestablishmentarianism",
        "Mixed\u4e2d\u6587and English\u6df7\u5408", "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059\u3002",
        "\u0422\u0435\u0441\u0442 123 test", "\u00bfQu\u00e9 tal? \u00a1Bien!",
    ]
    # deterministic random mixtures
    rng = random.Random(20261122)
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
            + list("  \t\n.,;:!?'\"-_()[]{}<>/\\|@#$%^&*+=~`")
            + ["\u00e9", "\u00fc", "\u00df", "\u4e2d", "\u6587", "\u3042", "\u0416", "\u03bb",
               "\u0661", "\u00bd", "\u0301", "\U0001f600", "\u2014", "\u00a0", "\u3000", "'s",
               "'ll", "<|im_end|>", "\r\n", "  ", "\u0e01", "\u05d0", "\u0928\u094d"])
    for k in range(120):
        n = rng.randint(1, 40)
        out.append("".join(rng.choice(pool) for _ in range(n)))
    words = ["the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for",
             "on", "are", "as", "with", "his", "they", "I", "at", "be", "this", "have", "from",
             "token", "izer", "speculative", "decoding", "Medusa", "Hydra", "GPU", "llama"]
    for k in range(40):
        n = rng.randint(2, 15)
        sep = rng.choice([" ", "  ", "\n", ", ", " - ", "\t"])
        out.append(sep.join(rng.choice(words) for _ in range(n)))
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


def render_chat(template, system, user):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    msgs = ([{"role": "system", "content": system}] if system is not None else [])
    msgs.append({"role": "user", "content": user})
    return env.from_string(template).render(messages=msgs, add_generation_prompt=True,
                                            bos_token="<|im_start|>", eos_token="<|im_end|>")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/tokenizer_smollm2.jsonl"))
    ap.add_argument("--save-tokenizer-json", default=None,
                    help="also save the reference tokenizer as a tokenizer.json")
    args = ap.parse_args()
    if not os.path.exists(args.model):
        sys.exit(f"{args.model}: not found (run scripts/fetch-model.sh)")
    reader = GGUFReader(args.model)
    tk = build_reference(reader)
    tk_raw = build_reference(reader, with_specials=False)
    tk_gpt2 = build_reference(reader, pre="gpt2")
    tk_l3 = build_reference(reader, pre="llama-bpe")
    if args.save_tokenizer_json:
        tk.save(args.save_tokenizer_json)
    tokens = field(reader, "tokenizer.ggml.tokens")
    template = field(reader, "tokenizer.chat_template")
    meta = {
        "n_vocab": len(tokens),
        "n_merges": len(field(reader, "tokenizer.ggml.merges")),
        "model": field(reader, "tokenizer.ggml.model"),
        "pre": field(reader, "tokenizer.ggml.pre"),
        "bos": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "unk": int(field(reader, "tokenizer.ggml.unknown_token_id")),
        "pad": int(field(reader, "tokenizer.ggml.padding_token_id")),
        "add_bos": bool(field(reader, "tokenizer.ggml.add_bos_token")),
        "n_control": sum(1 for t in field(reader, "tokenizer.ggml.token_type") if t == 3),
    }
    n = 0
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(json.dumps({"meta": meta}) + "\n")
        for s in texts():
            ids = tk.encode(s, add_special_tokens=False).ids
            rec = {"text": s, "ids": ids}
            raw = tk_raw.encode(s, add_special_tokens=False).ids
            if raw != ids:
                rec["ids_raw"] = raw
            for key, other in (("ids_gpt2", tk_gpt2), ("ids_llama3", tk_l3)):
                o = other.encode(s, add_special_tokens=False).ids
                if o != ids:
                    rec[key] = o
            dec = tk.decode(ids, skip_special_tokens=False)
            if dec != s:
                rec["decoded"] = dec
            f.write(json.dumps(rec) + "\n")
            n += 1
        for system, user in [(None, "What is the capital of France?"),
                             ("You are a pirate. Answer in pirate speak.",
                              "Explain speculative decoding in one sentence \U0001f600"),
                             (None, "Write a C function:\n\nint add(int a, int b);\n")]:
            text = render_chat(template, system, user)
            ids = tk.encode(text, add_special_tokens=False).ids
            f.write(json.dumps({"chat": {"system": system, "user": user, "text": text,
                                         "ids": ids}}) + "\n")
    print(f"wrote {n} strings and 3 chat prompts to {args.out}")


if __name__ == "__main__":
    main()
