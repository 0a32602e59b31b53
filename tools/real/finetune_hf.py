#!/usr/bin/env python3
"""tools/real/finetune_hf.py - the Hugging Face side of the GLUE side-by-side (docs/accuracy.md, section 2).

A plain transformers fine-tuning, as run_glue.py / Trainer do it on one CPU process: BertForSequenceClassification
from the checkpoint (classifier initialised N(0, 0.02), dropout 0.1), BertTokenizerFast with pair truncation
'longest_first' to --max-len, dynamic padding to the longest sequence of each batch (DataCollatorWithPadding: the
faster of run_glue's two paddings on a CPU), a seeded RandomSampler, AdamW (no decay on biases and LayerNorm
weights, Trainer's eps 1e-8), linear warm-up over ceil(warmup x steps) then linear decay to 0, global gradient-norm
clipping at 1.0, fp32. Dev metrics by the official definitions: accuracy and F1 of the positive class (MRPC),
Matthews correlation (CoLA). One seed after another in this process; each seed's wall time runs from reading the
data to the dev metrics (the Python imports, once, are left out). Prints a line per seed, the statistics over the
seeds, and writes every figure to --out as JSON.

  .venv/bin/python tools/real/finetune_hf.py --task mrpc --seeds 0-4 --out runs/real/hf_mrpc.json
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, default_model, encoder_folder, glue_examples, skip, stats  # noqa: E402

try:
    import torch
    from transformers import BertForSequenceClassification, BertTokenizerFast, set_seed

    import hf_train
except ImportError as e:
    skip(f"{e.name} is not installed in {sys.executable} (tools/setup installs tools/requirements-reference.txt)")


def glue_metrics(task, pred, gold):
    """GLUE's definitions: accuracy + F1 (MRPC), Matthews correlation (CoLA), over the whole dev set."""
    tp = sum(p == 1 and g == 1 for p, g in zip(pred, gold))
    tn = sum(p == 0 and g == 0 for p, g in zip(pred, gold))
    fp = sum(p == 1 and g == 0 for p, g in zip(pred, gold))
    fn = sum(p == 0 and g == 1 for p, g in zip(pred, gold))
    out = {"accuracy": (tp + tn) / len(gold)}
    if task == "mrpc":
        out["f1"] = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    if task == "cola":
        den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        out["mcc"] = (tp * tn - fp * fn) / den if den else 0.0
    return out


def encode(tok, examples, max_len):
    firsts = [a for a, _, _ in examples]
    seconds = [b for _, b, _ in examples]
    enc = tok(firsts, seconds if seconds[0] is not None else None, truncation=True, max_length=max_len)
    return [{"input_ids": i, "token_type_ids": t, "attention_mask": m, "labels": y}
            for i, t, m, (_, _, y) in zip(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"], examples)]


def predict(model, features, batch_size):
    """The classifier's predicted class and the gold label of every feature, in order (no gradients)."""
    pred, gold = [], []
    with torch.no_grad():
        for i in range(0, len(features), batch_size):
            batch = hf_train.collate(features[i:i + batch_size])
            gold += batch.pop("labels").tolist()
            pred += model(**batch).logits.argmax(-1).tolist()
    return pred, gold


def run_seed(o, seed, enc_dir, task_dir):
    t0 = time.perf_counter()
    set_seed(seed)
    tok = BertTokenizerFast.from_pretrained(enc_dir)
    train = encode(tok, glue_examples(task_dir, o.task, "train"), o.max_len)
    dev = encode(tok, glue_examples(task_dir, o.task, "dev"), o.max_len)
    model = BertForSequenceClassification.from_pretrained(enc_dir, num_labels=2)
    steps, train_s = hf_train.train(model, train, o, seed, f"seed {seed}")
    pred, gold = predict(model, dev, o.batch)
    return {"seed": seed, "steps": steps, **glue_metrics(o.task, pred, gold), "train_s": train_s, "wall_s": time.perf_counter() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", choices=["mrpc", "cola"], required=True)
    ap.add_argument("--model", help="checkpoint folder (HF or sentence-transformers layout); default all-MiniLM-L6-v2")
    ap.add_argument("--data", default=os.path.join(DATA, "glue"), help="folder with MRPC/ and CoLA/")
    ap.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 1,3")
    ap.add_argument("--max-len", type=int, default=128)
    hf_train.add_train_args(ap, epochs=3, lr=2e-5)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads")
    ap.add_argument("--out", help="JSON file for the per-seed results and statistics")
    o = ap.parse_args()
    task_dir = os.path.join(o.data, {"mrpc": "MRPC", "cola": "CoLA"}[o.task])
    if not os.path.isdir(task_dir):
        skip(f"no GLUE data at {task_dir}")
    torch.set_num_threads(o.threads)
    enc_dir = encoder_folder(o.model or default_model())
    results = []
    for seed in hf_train.seed_list(o.seeds):
        r = run_seed(o, seed, enc_dir, task_dir)
        print(json.dumps(r), flush=True)
        results.append(r)
    names = [k for k in results[0] if k not in ("seed", "steps")]
    summary = {k: stats([r[k] for r in results]) for k in names}
    print(f"{'':6}" + "".join(f"{k:>12}" for k in names))
    for label in ("mean", "std", "min", "max"):
        print(f"{label:6}" + "".join(f"{summary[k][label]:12.4f}" for k in names))
    if o.out:
        os.makedirs(os.path.dirname(os.path.abspath(o.out)), exist_ok=True)
        tmp = o.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"task": o.task, "model": enc_dir, "args": vars(o), "torch": torch.__version__,
                       "threads": torch.get_num_threads(), "runs": results, "stats": summary}, f, indent=1)
        os.replace(tmp, o.out)


if __name__ == "__main__":
    main()
