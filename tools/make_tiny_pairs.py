#!/usr/bin/env python3
"""Builds experiments/data/tiny_pairs/{train,dev}.tsv: a small sentence-pair set in GLUE's MRPC layout made
from the bundled corpus, for the README's first command (pre-train the tiny BERT, then fine-tune it:
experiments/tiny_finetune.toml, three seeds from the pre-trained weights and three from random ones).

Task (discourse coherence, what next-sentence pre-training teaches): label 1 iff sentence B is the sentence
that follows sentence A in the same document; else B is a sentence of another document (label 0); half each.
Training pairs come from the pre-training corpus (experiments/corpus/python_docs.txt), dev pairs from the
held-out documents (python_docs_eval.txt) the pre-training never reads, so the dev accuracy measures what
transfers. Documents are split at sentence ends (". ", "? ", "! " before a capital letter); pairs use sentences
of 6 to 40 words; no positive pair is drawn twice. Deterministic: random.Random(seed) with a fixed seed (same
bytes on every run of the same corpus).
Usage: python3 tools/make_tiny_pairs.py [--train 2000] [--dev 400] [--seed 13]
"""
import argparse, os, random, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "experiments/corpus")


def sentences(doc):
    return re.split(r"(?<=[.?!])\s+(?=[A-Z])", doc.strip())


def usable(s):
    return 6 <= len(s.split()) <= 40 and "\t" not in s


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        return [sentences(line) for line in f if line.strip()]


def pairs(docs, n, rng, path):
    """n pairs, n // 2 of them consecutive sentences (label 1), the rest A + another document's sentence (0)."""
    consecutive = [(d, i) for d, doc in enumerate(docs) for i in range(len(doc) - 1)
                   if usable(doc[i]) and usable(doc[i + 1])]
    n_pos = n // 2
    if len(consecutive) < n_pos:
        sys.exit(f"make_tiny_pairs: {path} has {len(consecutive)} consecutive sentence pairs, {n_pos} needed")
    out = [(1, docs[d][i], docs[d][i + 1]) for d, i in rng.sample(consecutive, n_pos)]
    pool = [(d, s) for d, doc in enumerate(docs) for s in doc if usable(s)]
    for _ in range(n - n_pos):
        d, a = rng.choice(pool)
        b = rng.choice([s for e, s in pool if e != d])
        out.append((0, a, b))
    rng.shuffle(out)
    return out


def write(path, rows, first_id):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
        for i, (label, a, b) in enumerate(rows):
            f.write(f"{label}\t{first_id + 2 * i}\t{first_id + 2 * i + 1}\t{a}\t{b}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=2000)
    p.add_argument("--dev", type=int, default=400)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--corpus", default=os.path.join(CORPUS, "python_docs.txt"), help="training pairs' documents")
    p.add_argument("--dev-corpus", default=os.path.join(CORPUS, "python_docs_eval.txt"), help="dev pairs' documents")
    p.add_argument("--out", default=os.path.join(ROOT, "experiments/data/tiny_pairs"))
    args = p.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    write(os.path.join(args.out, "train.tsv"), pairs(read_docs(args.corpus), args.train, rng, args.corpus), 100000)
    write(os.path.join(args.out, "dev.tsv"), pairs(read_docs(args.dev_corpus), args.dev, rng, args.dev_corpus), 900000)


if __name__ == "__main__":
    main()
