#!/usr/bin/env python3
"""Writes tests/data/tokenizer_smollm2.jsonl: varied strings and the token ids
the reference tokenizer (Hugging Face `tokenizers`, built from the GGUF's own
vocabulary and merges, configured like SmolLM2's tokenizer.json) gives them.

usage: make_tokenizer_fixture.py MODEL.gguf OUT.jsonl
Needs: pip install gguf tokenizers
"""
import json
import random
import sys

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers


def field_strings(r, name):
    f = r.fields[name]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def reference_tokenizer(path):
    r = GGUFReader(path)
    tokens = field_strings(r, "tokenizer.ggml.tokens")
    merges = field_strings(r, "tokenizer.ggml.merges")
    ttype = r.fields["tokenizer.ggml.token_type"]
    types = [int(ttype.parts[i][0]) for i in ttype.data]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    tok.add_special_tokens(specials)
    return tok


def strings():
    fixed = [
        "", " ", "  ", "\n", "\n\n", "\t", " \t\n ", "Hello world! 123", "Hello, world.", "hello   world",
        "It's a test; they're here, we've done, I'm sure, you'll see, he'd go.", "DON'T SHOUT",
        "3.14159 + 2.71828 = 5.85987", "1234567890", "x1y2z3", "version 10.2.3-beta", "$1,000,000.00",
        "def fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\n",
        "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
        "for (let i = 0; i < 10; i++) { console.log(i); }", "SELECT * FROM users WHERE id = 7;",
        "fn main() { let v: Vec<u32> = (0..5).collect(); }", "<div class=\"a\">text</div>",
        "naïve café résumé", "Ünïcödé ßtraße", "日本語のテキストです。", "中文字符和标点，测试！", "한국어 텍스트",
        "Привет, мир!", "مرحبا بالعالم", "שלום עולם", "ελληνικά γράμματα", "emoji 🙂🚀🎉 end",
        "👨‍👩‍👧‍👦 family", "combining e\u0301 and a\u0308", "zero\u200bwidth", "tabs\tand\tmore\ttabs",
        "trailing spaces   ", "   leading spaces", "multiple\n\n\nnewlines", "\r\nwindows\r\nlines",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "a<|im_end|>b",
        "<file_sep>path/to/file.py", "math: ∑ x² ≤ ∞, α β γ", "١٢٣ Arabic-Indic digits", "Ⅻ roman numeral ½",
        "URL https://example.com/a?b=c&d=e#f", "email someone@example.org", "!!!???...,,,;;;", "a" * 50,
        "The quick brown fox jumps over the lazy dog.", "    indented code block", "--flag=value -x",
    ]
    rng = random.Random(1234)
    words = ["the", "model", "token", "tree", "draft", "verify", "accept", "Hydra", "Medusa", "GPU", "cache",
             "42", "3.5", "x", "λ", "über", "東京", "🙂", "don't", "we'll", "\n", "\t", "  ", "(", ")", "{", "}",
             "==", "->", "#", "//", "'s", "'T", "1999", "0x1F"]
    gen = []
    for _ in range(250):
        n = rng.randint(1, 14)
        parts = []
        for _ in range(n):
            w = rng.choice(words)
            sep = rng.choice([" ", "", "  ", "\n", " "])
            parts.append(w + sep)
        gen.append("".join(parts))
    return fixed + gen


def main():
    tok = reference_tokenizer(sys.argv[1])
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        for s in strings():
            ids = tok.encode(s, add_special_tokens=False).ids
            out.write(json.dumps({"text": s, "ids": ids}, ensure_ascii=False) + "\n")
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
