#!/usr/bin/env python3
"""Writes tests/data/tokenizer_spm_tiny.json for tests/unit/test_tokenizer_spm.c:
a tiny SentencePiece BPE model trained here with Llama 2's settings (byte
fallback, identity normalization, dummy prefix, extra whitespace kept, digits
split), its pieces (text, score, llama.cpp token type) and the ids the
`sentencepiece` library gives for the strings of make_tokenizer_fixture.py.
No Llama 2 model is reachable here; this checks the C SentencePiece path
(scores-based merging, byte fallback, space prefix) against the reference
implementation.

Rerun (from the repository root):
    pip install sentencepiece
    python3 tests/python/make_spm_fixture.py [--out tests/data/tokenizer_spm_tiny.json]
"""
import argparse
import json
import os
import sys
import tempfile

import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_fixture import ROOT, texts  # noqa: E402

EXTRA = """Speculative decoding drafts several tokens with cheap heads and verifies
them with one forward pass of the base model. Medusa heads predict tokens at
fixed offsets; Hydra heads also see the tokens drafted before them. A tree of
candidates is verified at once with a tree attention mask, and the longest
accepted path is kept. The tokenizer turns text into ids and back: 12345 words,
    indented lines, tabs\tand  double  spaces, don't, it's, we'll.
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/tokenizer_spm_tiny.json"))
    args = ap.parse_args()
    strings = texts()
    corpus = [t for t in strings if t.strip()] + EXTRA.split("\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "corpus.txt")
        with open(path, "w", encoding="utf-8") as f:
            for t in corpus:
                f.write(t.replace("\n", " ").replace("\r", " ") + "\n")
        prefix = os.path.join(tmp, "tiny")
        spm.SentencePieceTrainer.train(
            input=path, model_prefix=prefix, vocab_size=800, model_type="bpe",
            byte_fallback=True, normalization_rule_name="identity", add_dummy_prefix=True,
            remove_extra_whitespaces=False, split_digits=True, allow_whitespace_only_pieces=True,
            character_coverage=0.99, num_threads=1, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    tokens = []
    for i in range(sp.get_piece_size()):
        ty = 1
        if sp.is_unknown(i):
            ty = 2
        elif sp.is_control(i):
            ty = 3
        elif sp.is_byte(i):
            ty = 6
        elif sp.is_unused(i):
            ty = 5
        tokens.append({"text": sp.id_to_piece(i), "score": sp.get_score(i), "type": ty})
    cases = [{"text": s, "ids": sp.encode(s)} for s in strings]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tokens": tokens, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(tokens)} pieces and {len(cases)} strings to {args.out}")


if __name__ == "__main__":
    main()
