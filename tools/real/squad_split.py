#!/usr/bin/env python3
"""tools/real/squad_split.py - splits the official SQuAD v1.1 dev set by article for the real SQuAD side-by-side
(docs/accuracy.md section 3): articles [0, 40) to fine-tune on, [40, 48) to evaluate. Not the official split (SQuAD's
train set is not here): every figure from it says so. Each file keeps the dataset's version and the articles as
they are; written atomically, so an existing file is complete.

  python3 tools/real/squad_split.py [--dataset ../shared/data/squad/dev-v1.1.json] [--train-articles 40] [--out runs/real/squad]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA  # noqa: E402


def write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=os.path.join(DATA, "squad/dev-v1.1.json"))
    ap.add_argument("--train-articles", type=int, default=40, help="articles [0, N) train, [N, end) evaluate")
    ap.add_argument("--out", default="runs/real/squad")
    o = ap.parse_args()
    d = json.load(open(o.dataset, encoding="utf-8"))
    n = len(d["data"])
    if not 0 < o.train_articles < n:
        sys.exit(f"squad_split: --train-articles {o.train_articles}: {o.dataset} has {n} articles; expected 1..{n - 1}")
    os.makedirs(o.out, exist_ok=True)
    parts = {"train": d["data"][:o.train_articles], "eval": d["data"][o.train_articles:]}
    for name, articles in parts.items():
        first = 0 if name == "train" else o.train_articles
        path = os.path.join(o.out, f"{name}-articles-{first}-{first + len(articles) - 1}.json")
        write(path, {"version": d["version"], "data": articles})
        qs = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
        print(f"{path}: {len(articles)} articles, {qs} questions")


if __name__ == "__main__":
    main()
