#!/usr/bin/env python3
"""Builds experiments/data/tiny_pairs/{train,dev}.tsv: a small sentence-pair set in GLUE's MRPC layout made
from the bundled corpus (experiments/corpus/python_docs.txt), for the README's first command (pre-train
the tiny BERT, then fine-tune it: experiments/tiny_finetune.toml).

Task (a toy paraphrase detection, MRPC's question): label 1 iff sentence B is a shortened copy of
sentence A (each word of A dropped with probability 0.3, one pair of neighbouring words swapped); else B
is a sentence of another document (label 0); half each. Documents are split at sentence ends (". ", "? ", "! " before a capital letter); sentences of 6 to
40 words are used. Train and dev pairs draw their A sentences from disjoint halves of every document.
Deterministic: random.Random(seed) with a fixed seed (same bytes on every run of the same corpus).
Usage: python3 tools/make_tiny_pairs.py [--train 2000] [--dev 400] [--seed 13]
"""
import argparse, os, random, re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sentences(doc):
    parts = re.split(r"(?<=[.?!])\s+(?=[A-Z])", doc.strip())
    return [s for s in parts if 6 <= len(s.split()) <= 40 and "\t" not in s]


def pairs(docs, n, rng, half):
    out = []
    usable = [i for i, d in enumerate(docs) if len(d) >= 4]
    for k in range(n):
        d = rng.choice(usable)
        side = docs[d][: len(docs[d]) // 2] if half == 0 else docs[d][len(docs[d]) // 2 :]
        a = rng.choice(side)
        if k % 2 == 0:  # a shortened, lightly reordered copy of A
            words = [w for w in a.split() if rng.random() >= 0.3] or a.split()[:1]
            if len(words) >= 2:
                i = rng.randrange(len(words) - 1)
                words[i], words[i + 1] = words[i + 1], words[i]
            b = " ".join(words)
            label = 1
        else:
            other = rng.choice([i for i in usable if i != d])
            b = rng.choice(docs[other])
            label = 0
        out.append((label, a, b))
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
    p.add_argument("--corpus", default=os.path.join(ROOT, "experiments/corpus/python_docs.txt"))
    p.add_argument("--out", default=os.path.join(ROOT, "experiments/data/tiny_pairs"))
    args = p.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        docs = [sentences(line) for line in f if line.strip()]
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    write(os.path.join(args.out, "train.tsv"), pairs(docs, args.train, rng, 0), 100000)
    write(os.path.join(args.out, "dev.tsv"), pairs(docs, args.dev, rng, 1), 900000)


if __name__ == "__main__":
    main()
