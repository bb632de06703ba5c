#!/usr/bin/env python3
"""Writes tests/data/tokenizer_spm_tiny.json for tests/unit/test_tokenizer_spm.c:
a tiny SentencePiece BPE model trained here with Llama 2's settings (byte
fallback, identity normalization, dummy prefix, extra whitespace kept, digits
split), its pieces (text, score, llama.cpp token type) and the ids the
`sentencepiece` library gives for the strings of make_tokenizer_fixture.py.
No Llama 2 model is reachable here; this checks the C SentencePiece path
(scores-based merging, byte fallback, space prefix) against the reference
implementation.

The same model is also converted to Hugging Face's tokenizer.json form the way
transformers' LlamaConverter does it (BPE with byte_fallback and fuse_unk,
merges from `generate_merges`, <unk>/<s>/</s> as special added tokens) in its
two variants: "legacy" (normalizer Prepend("\u2581") + Replace(" ", "\u2581"))
and "metaspace" (pre-tokenizer Metaspace(prepend_scheme="first", split=False)).
The merges are stored; where `tokenizers` gives other ids than `sentencepiece`
they are stored as "ids_hf_legacy" / "ids_hf_metaspace" (encoded with special
tokens parsed).

Rerun (from the repository root):
    pip install sentencepiece tokenizers transformers
    python3 tests/python/make_spm_fixture.py [--out tests/data/tokenizer_spm_tiny.json]
"""
import argparse
import json
import os
import sys
import tempfile

import sentencepiece as spm
from tokenizers import AddedToken, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import BPE
from transformers.tokenization_utils_base import generate_merges

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
    pieces = [t["text"] for t in tokens]
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = generate_merges(vocab)
    hf = {}
    for variant in ("legacy", "metaspace"):
        tk = Tokenizer(BPE(vocab, merges, unk_token=pieces[0], fuse_unk=True, byte_fallback=True,
                           dropout=None))
        tk.add_tokens([AddedToken(pieces[i], normalized=False, special=True) for i in range(3)])
        if variant == "legacy":
            tk.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                                  normalizers.Replace(" ", "\u2581")])
        else:
            tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                        split=False)
        hf[variant] = tk
    cases = []
    for s in strings + ["<s>hello", "a</s>b <s> x", "<unk>", "hello<s>world", " <s> "]:
        rec = {"text": s, "ids": sp.encode(s)}
        for variant, tk in hf.items():
            ids = tk.encode(s, add_special_tokens=False).ids
            if ids != rec["ids"]:
                rec["ids_hf_" + variant] = ids
        cases.append(rec)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tokens": tokens, "merges": [list(m) for m in merges], "cases": cases}, f,
                  separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(tokens)} pieces and {len(cases)} strings to {args.out}")


if __name__ == "__main__":
    main()
