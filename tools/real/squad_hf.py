#!/usr/bin/env python3
"""tools/real/squad_hf.py - the transformers side of the real SQuAD side-by-side (docs/accuracy.md section 3).

transformers' examples/pytorch/question-answering/run_qa.py on one CPU process: questions left-stripped,
BertTokenizerFast(question, context, truncation="only_second", max_length, stride = doc_stride overlapping tokens,
overflowing windows, offset mappings); a training window whose context does not hold the answer points at [CLS];
BertForQuestionAnswering (qa_outputs initialised N(0, 0.02)); the shared training loop (hf_train.py: AdamW, linear
warm-up and decay, clipping 1.0, dynamic padding, fp32); postprocess_qa_predictions: the n-best start and end logits
of every window, spans inside the context, end >= start, at most max_answer_length tokens, best start + end score
over the example's windows, the answer = the context's characters under the span's offsets. Writes
predictions.json ({id: answer}) and result.json (steps, train_s, wall_s) to --out; `bertx eval squad` scores it.

  .venv/bin/python tools/real/squad_hf.py --train runs/real/squad/train-articles-0-39.json \
      --eval runs/real/squad/eval-articles-40-47.json --seed 0 --out runs/real/squad/hf-seed0
"""
import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import default_model, encoder_folder, skip  # noqa: E402

try:
    import numpy as np
    import torch
    from transformers import BertForQuestionAnswering, BertTokenizerFast, set_seed

    import hf_train
except ImportError as e:
    skip(f"{e.name} is not installed in {sys.executable} (tools/setup installs tools/requirements-reference.txt)")


def examples_of(path):
    """(id, question, context, first answer text, its start) of every question, in file order."""
    d = json.load(open(path, encoding="utf-8"))
    return [(q["id"], q["question"].lstrip(), p["context"], q["answers"][0]["text"] if q["answers"] else "",
             q["answers"][0]["answer_start"] if q["answers"] else 0)
            for a in d["data"] for p in a["paragraphs"] for q in p["qas"]]


def windows(tok, examples, o):
    return tok([e[1] for e in examples], [e[2] for e in examples], truncation="only_second", max_length=o.max_seq_length,
               stride=o.doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True, padding=False)


def train_features(tok, examples, o):
    """run_qa's prepare_train_features."""
    enc = windows(tok, examples, o)
    out = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        ids = enc["input_ids"][i]
        cls = ids.index(tok.cls_token_id)
        seq = enc.sequence_ids(i)
        _, _, _, text, start_char = examples[enc["overflow_to_sample_mapping"][i]]
        end_char = start_char + len(text)
        s = 0
        while seq[s] != 1:
            s += 1
        e = len(ids) - 1
        while seq[e] != 1:
            e -= 1
        if not (offsets[s][0] <= start_char and offsets[e][1] >= end_char):
            start, end = cls, cls
        else:
            while s < len(offsets) and offsets[s][0] <= start_char:
                s += 1
            while offsets[e][1] >= end_char:
                e -= 1
            start, end = s - 1, e + 1
        out.append({"input_ids": ids, "token_type_ids": enc["token_type_ids"][i], "attention_mask": enc["attention_mask"][i],
                    "start_positions": start, "end_positions": end})
    return out


def predict(model, tok, examples, o):
    """run_qa's prepare_validation_features + postprocess_qa_predictions (SQuAD v1.1: no null answer)."""
    enc = windows(tok, examples, o)
    feats = [{"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i], "attention_mask": enc["attention_mask"][i]}
             for i in range(len(enc["input_ids"]))]
    starts, ends = [], []
    with torch.no_grad():
        for i in range(0, len(feats), o.batch):
            chunk = feats[i:i + o.batch]
            out = model(**hf_train.collate(chunk))
            for j, f in enumerate(chunk):
                n = len(f["input_ids"])
                starts.append(out.start_logits[j, :n].numpy())
                ends.append(out.end_logits[j, :n].numpy())
    by_example = collections.defaultdict(list)
    for i, ex in enumerate(enc["overflow_to_sample_mapping"]):
        by_example[ex].append(i)
    predictions = {}
    for ex, (qid, _, context, _, _) in enumerate(examples):
        best, best_score = "", None
        for i in by_example[ex]:
            seq = enc.sequence_ids(i)
            offsets = [o_ if seq[k] == 1 else None for k, o_ in enumerate(enc["offset_mapping"][i])]
            for s in np.argsort(starts[i])[-1:-o.n_best_size - 1:-1].tolist():
                for e in np.argsort(ends[i])[-1:-o.n_best_size - 1:-1].tolist():
                    if s >= len(offsets) or e >= len(offsets) or offsets[s] is None or offsets[e] is None:
                        continue
                    if e < s or e - s + 1 > o.max_answer_length:
                        continue
                    score = float(starts[i][s] + ends[i][e])
                    if best_score is None or score > best_score:
                        best, best_score = context[offsets[s][0]:offsets[e][1]], score
        predictions[qid] = best
    return predictions


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="SQuAD JSON to fine-tune on")
    ap.add_argument("--eval", required=True, help="SQuAD JSON to predict")
    ap.add_argument("--model", help="checkpoint folder (HF or sentence-transformers layout); default all-MiniLM-L6-v2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seq-length", type=int, default=384)
    ap.add_argument("--doc-stride", type=int, default=128, help="run_qa's: tokens shared by consecutive windows")
    ap.add_argument("--n-best-size", type=int, default=20)
    ap.add_argument("--max-answer-length", type=int, default=30)
    hf_train.add_train_args(ap, epochs=2, lr=5e-5)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads")
    ap.add_argument("--out", required=True, help="folder for predictions.json and result.json")
    o = ap.parse_args()
    torch.set_num_threads(o.threads)
    enc_dir = encoder_folder(o.model or default_model())
    t0 = time.perf_counter()
    set_seed(o.seed)
    tok = BertTokenizerFast.from_pretrained(enc_dir)
    feats = train_features(tok, examples_of(o.train), o)
    print(f"squad_hf: {len(feats)} training windows", flush=True)
    model = BertForQuestionAnswering.from_pretrained(enc_dir)
    steps, train_s = hf_train.train(model, feats, o, o.seed, f"seed {o.seed}")
    predictions = predict(model, tok, examples_of(o.eval), o)
    wall_s = time.perf_counter() - t0
    os.makedirs(o.out, exist_ok=True)
    for name, obj in (("predictions.json", predictions),
                      ("result.json", {"seed": o.seed, "steps": steps, "train_windows": len(feats), "train_s": train_s,
                                       "wall_s": wall_s, "args": vars(o), "torch": torch.__version__})):
        tmp = os.path.join(o.out, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f)
        os.replace(tmp, os.path.join(o.out, name))
    print(json.dumps({"seed": o.seed, "steps": steps, "train_s": train_s, "wall_s": wall_s}))


if __name__ == "__main__":
    main()
