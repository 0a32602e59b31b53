#!/usr/bin/env python3
"""tools/distill/distill_hf.py - the PyTorch side of the distillation side-by-side (docs/distillation.md): the same
distillation as experiments/distill/mrpc.toml, written with transformers and torch.nn.functional, on the same teacher.

Teacher: a bertx checkpoint of all-MiniLM-L6-v2 fine-tuned on MRPC (experiments/real/mrpc_minilm.toml's run: its
model.safetensors has Hugging Face's names), as BertForSequenceClassification in eval mode, no gradients.
Student: the same config with 3 layers, started from the teacher's layers 2, 4, 6 with its embeddings, pooler and
classifier (DistilBERT-style, bertx's init_layers), dropout 0.1, trained by tools/real/hf_train.py's loop (the GLUE
side-by-side's: seeded sampler, dynamic padding, AdamW without decay on biases / LayerNorm, linear warm-up 10% then
decay, clipping 1.0, fp32) with loss = 0.5 cross-entropy + KL(teacher || student) at T = 2 times T^2 (kl_div,
batchmean) + sum over student layers i of MSE(student layer i, teacher layer 2i). Dev accuracy / F1 by GLUE's
definitions; wall time per seed from reading the data to the dev metrics.

  .venv/bin/python tools/distill/distill_hf.py --teacher runs/real/mrpc_minilm/bert/finetune --seeds 0-4 \
      --out runs/distill/hf_mrpc.json
"""
import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "real"))
from common import DATA, default_model, encoder_folder, glue_examples, skip, stats  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast, set_seed

    import hf_train
    from finetune_hf import encode, glue_metrics, predict
except ImportError as e:
    skip(f"{e.name} is not installed in {sys.executable} (tools/setup installs tools/requirements-reference.txt)")


def teacher_weights(path):
    """model.safetensors of a bertx checkpoint root (its newest step), step folder, or file."""
    if os.path.isfile(path):
        return path
    direct = os.path.join(path, "model.safetensors")
    if os.path.isfile(direct):
        return direct
    steps = sorted((int(os.path.basename(d)), d) for d in glob.glob(os.path.join(path, "[0-9]*")))
    if not steps:
        skip(f"no checkpoint in {path} (run experiments/real/mrpc_minilm.toml first)")
    return os.path.join(steps[-1][1], "model.safetensors")


def run_seed(o, seed, enc_dir, task_dir, teacher_state):
    t0 = time.perf_counter()
    set_seed(seed)
    tok = BertTokenizerFast.from_pretrained(enc_dir)
    train = encode(tok, glue_examples(task_dir, "mrpc", "train"), o.max_len)
    dev = encode(tok, glue_examples(task_dir, "mrpc", "dev"), o.max_len)
    cfg = BertConfig.from_pretrained(enc_dir, num_labels=2)
    teacher = BertForSequenceClassification(cfg)
    teacher.load_state_dict(teacher_state, strict=False)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    layers = [int(x) for x in o.init_layers.split(",")]
    student = BertForSequenceClassification(BertConfig.from_pretrained(enc_dir, num_labels=2, num_hidden_layers=len(layers)))
    init = {}
    for k, v in teacher.state_dict().items():
        if k.startswith("bert.encoder.layer."):
            j = int(k.split(".")[3])
            if j + 1 in layers:
                init[k.replace(f"bert.encoder.layer.{j}.", f"bert.encoder.layer.{layers.index(j + 1)}.", 1)] = v
        else:
            init[k] = v
    student.load_state_dict(init, strict=False)
    T = o.temperature

    def loss_fn(model, batch):
        with torch.no_grad():
            t = teacher(**{k: v for k, v in batch.items() if k != "labels"}, output_hidden_states=True)
        s = model(**batch, output_hidden_states=True)
        soft = F.kl_div(F.log_softmax(s.logits / T, -1), F.softmax(t.logits / T, -1), reduction="batchmean") * T * T
        hidden = sum(F.mse_loss(s.hidden_states[i + 1], t.hidden_states[layers[i]]) for i in range(len(layers)))
        return o.hard_weight * s.loss + o.soft_weight * soft + o.hidden_weight * hidden

    steps, train_s = hf_train.train(student, train, o, seed, f"seed {seed}", loss_fn)
    pred, gold = predict(student, dev, o.batch)
    return {"seed": seed, "steps": steps, **glue_metrics("mrpc", pred, gold), "train_s": train_s,
            "wall_s": time.perf_counter() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", required=True, help="the bertx teacher: checkpoint root, step folder or .safetensors")
    ap.add_argument("--model", help="the teacher's architecture and tokenizer folder; default all-MiniLM-L6-v2")
    ap.add_argument("--data", default=os.path.join(DATA, "glue"), help="folder with MRPC/")
    ap.add_argument("--seeds", default="0-4")
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--init-layers", default="2,4,6", help="teacher layers the student starts from (1-based)")
    ap.add_argument("--temperature", type=float, default=2.0)
    ap.add_argument("--hard-weight", type=float, default=0.5)
    ap.add_argument("--soft-weight", type=float, default=1.0)
    ap.add_argument("--hidden-weight", type=float, default=1.0)
    hf_train.add_train_args(ap, epochs=3, lr=5e-5)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads")
    ap.add_argument("--out", help="JSON file for the per-seed results and statistics")
    o = ap.parse_args()
    task_dir = os.path.join(o.data, "MRPC")
    if not os.path.isdir(task_dir):
        skip(f"no GLUE data at {task_dir}")
    torch.set_num_threads(o.threads)
    enc_dir = encoder_folder(o.model or default_model())
    teacher_state = load_file(teacher_weights(o.teacher))
    results = []
    for seed in hf_train.seed_list(o.seeds):
        r = run_seed(o, seed, enc_dir, task_dir, teacher_state)
        print(json.dumps(r), flush=True)
        results.append(r)
    names = [k for k in results[0] if k not in ("seed", "steps")]
    summary = {k: stats([r[k] for r in results]) for k in names}
    for k in names:
        print(f"{k:>10} mean {summary[k]['mean']:.4f} std {summary[k]['std']:.4f}")
    if o.out:
        os.makedirs(os.path.dirname(os.path.abspath(o.out)), exist_ok=True)
        tmp = o.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"teacher": o.teacher, "args": vars(o), "torch": torch.__version__, "runs": results,
                       "stats": summary}, f, indent=1)
        os.replace(tmp, o.out)


if __name__ == "__main__":
    main()
