#!/usr/bin/env python3
"""tools/real/squad_train_parity.py - bertx's SQuAD fine-tuning step by step against transformers, on a real
checkpoint and real SQuAD text: the same windows, the same initial weights, the same recipe, dropout off, so two
correct implementations give the same loss at every step and the same weights at the end (float32 rounding aside).

What it holds equal, and how:
  - the windows and labels: questions from a SQuAD v1.1 file (default ../shared/data's dev set, in file order) whose
    question + context fit one window of --max-seq-length and whose answer is a whole sequence of word pieces
    (BertTokenizerFast's labelled pieces == the tokenized answer). There bertx's run_squad features and run_qa's
    offset-based ones are the same; they differ (by design of the two recipes) only for an answer inside a piece,
    e.g. "gold" in `"golden`, where run_squad labels the whole whitespace word and run_qa the piece under the
    characters;
  - the weights: a copy of the checkpoint with dropout set to 0 in config.json and a qa_outputs head drawn once
    (N(0, 0.02), --seed) into its model.safetensors, which both sides load;
  - the batches: one batch holds every selected window (batch = --questions), so each step sees the same batch
    whatever order a sampler draws;
  - the recipe: experiments/real/squad_minilm.toml's (AdamW lr 5e-5, eps 1e-8, weight decay 0.01 except biases and
    LayerNorm, clipping 1.0, linear warm-up over 10% then decay), --steps steps (a multiple of 10: bertx warms up
    over 0.1 x steps as NVIDIA's warmup_linear, a fraction allowed, Trainer over ceil(0.1 x steps)); the span loss
    (CE(start) + CE(end)) / 2 over each window's real tokens, as bertx's default (transformers' own loss also
    counts the batch's padding positions: the loss below masks them, the rest is BertForQuestionAnswering).
Checks: |loss_bertx - loss_hf| <= --tol-loss at every step; the weight updates (final - initial) agree globally,
||u_bertx - u_hf|| / ||u_hf|| <= --tol-update. Prints a line per step and a JSON summary; exit 0 when both pass,
1 when one fails, 77 (ctest's skip) without the reference packages, checkpoint or data.

  .venv/bin/python tools/real/squad_train_parity.py [--bertx build/bin/bertx] [--questions 32] [--steps 20]
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, ROOT, default_model, encoder_folder, skip  # noqa: E402

try:
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import BertForQuestionAnswering, BertTokenizerFast, get_linear_schedule_with_warmup
    from transformers.utils import logging as hf_logging

    import hf_train
    import squad_hf
except ImportError as e:
    skip(f"{e.name} is not installed in {sys.executable} (tools/setup installs tools/requirements-reference.txt)")

RECIPE = "experiments/real/squad_minilm.toml"
LR, EPS, WEIGHT_DECAY, WARMUP = 5e-5, 1e-8, 0.01, 0.1  # the recipe's values (RECIPE and glue_minilm.toml)


def select(tok, path, n, o):
    """The first n (paragraph, question) pairs of `path` whose features both recipes build alike (module doc)."""
    chosen = []
    for article in json.load(open(path, encoding="utf-8"))["data"]:
        for p in article["paragraphs"]:
            for q in p["qas"]:
                if len(chosen) == n:
                    return chosen
                if not q.get("answers"):
                    continue
                a = q["answers"][0]
                ex = [(q["id"], q["question"].lstrip(), p["context"], a["text"], a["answer_start"])]
                f = squad_hf.train_features(tok, ex, o)
                if len(f) != 1 or f[0]["start_positions"] == 0:
                    continue  # several windows, or the answer outside the window
                s, e = f[0]["start_positions"], f[0]["end_positions"]
                if tok.convert_ids_to_tokens(f[0]["input_ids"][s:e + 1]) == tok.tokenize(a["text"]):
                    chosen.append((p["context"], {"id": q["id"], "question": q["question"], "answers": [a]}))
    return chosen


def prepare(model_dir, work, seed):
    """work/model: the checkpoint with dropout 0 and a drawn qa_outputs head; returns its initial weights."""
    out = os.path.join(work, "model")
    os.makedirs(out)
    for name in os.listdir(model_dir):
        if os.path.isfile(os.path.join(model_dir, name)) and name not in ("model.safetensors", "config.json"):
            shutil.copy(os.path.join(model_dir, name), out)
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    cfg["hidden_dropout_prob"] = cfg["attention_probs_dropout_prob"] = 0.0
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    weights = load_file(os.path.join(model_dir, "model.safetensors"))
    g = torch.Generator().manual_seed(seed)
    weights["qa_outputs.weight"] = torch.randn(2, cfg["hidden_size"], generator=g) * 0.02
    weights["qa_outputs.bias"] = torch.zeros(2)
    save_file(weights, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    return out, weights


def run_bertx(o, model, data, work):
    """bertx's losses per step and its final weights."""
    out = os.path.join(work, "bertx")
    cmd = [o.bertx, "run", os.path.join(ROOT, RECIPE), "--set", f"train.from_pretrained={model}",
           "--set", f"model.config={model}/config.json", "--set", f"data.vocab={model}/vocab.txt",
           "--set", f"data.train_file={data}", "--set", f"data.eval_file={data}", "--set", "train.eval=false",
           "--set", f"train.epochs={o.steps}", "--set", f"train.batch_size={o.questions}", "--set", "train.log_freq=1",
           "--set", f"data.max_seq_length={o.max_seq_length}", "--set", f"run.seed={o.seed}",
           "--set", f"run.output_dir={out}", "--set", f"run.store={work}/runs.db"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        sys.exit(f"squad_train_parity: bertx run failed ({p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    losses = [json.loads(line)["metrics"]["loss"] for line in open(os.path.join(out, "report.jsonl"))
              if json.loads(line).get("type") == "step"]
    final = os.path.join(out, "bert", "squad", str(o.steps), "model.safetensors")
    return losses, load_file(final)


def run_hf(o, model, feats):
    """transformers' losses per step (masked span loss, module doc) and its final weights (bertx's names)."""
    m = BertForQuestionAnswering.from_pretrained(model)
    opt = hf_train.adamw(m, LR, WEIGHT_DECAY, EPS)
    sched = get_linear_schedule_with_warmup(opt, math.ceil(WARMUP * o.steps), o.steps)
    batch = hf_train.collate(feats)
    start, end = batch.pop("start_positions"), batch.pop("end_positions")
    padding = batch["attention_mask"] == 0  # (B, S)
    m.train()
    losses = []
    for _ in range(o.steps):
        out = m(**batch)
        s, e = out.start_logits.masked_fill(padding, -math.inf), out.end_logits.masked_fill(padding, -math.inf)
        loss = (torch.nn.functional.cross_entropy(s, start) + torch.nn.functional.cross_entropy(e, end)) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, {n: p.detach() for n, p in m.named_parameters()}


def update_difference(initial, bx, hf):
    """||u_bertx - u_hf|| / ||u_hf|| over every trained tensor, u = final - initial (checkpoint names)."""
    num = den = 0.0
    for name, w in hf.items():
        key = name[len("bert."):] if name.startswith("bert.") else name
        b = bx[name] if name in bx else bx[key]
        num += float((b - w).double().norm() ** 2)
        den += float((w - initial[key]).double().norm() ** 2)
    return math.sqrt(num / den)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bertx", default=os.path.join(ROOT, "build/bin/bertx"))
    ap.add_argument("--model", help="checkpoint folder (HF or sentence-transformers layout); default all-MiniLM-L6-v2")
    ap.add_argument("--squad", default=os.path.join(DATA, "squad/dev-v1.1.json"), help="SQuAD v1.1 JSON to take questions from")
    ap.add_argument("--questions", type=int, default=32, help="windows in the one batch")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--max-seq-length", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0, help="the qa_outputs draw and bertx's run seed")
    ap.add_argument("--tol-loss", type=float, default=1e-4, help="max |loss difference| at any step")
    ap.add_argument("--tol-update", type=float, default=1e-3, help="max global relative difference of the weight updates")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    o = ap.parse_args()
    o.doc_stride = 128
    if abs(WARMUP * o.steps - round(WARMUP * o.steps)) > 1e-9:
        # bertx's linear schedule is NVIDIA's warmup_linear (warm-up over 0.1 x steps, a fraction allowed);
        # transformers' Trainer warms up over ceil(0.1 x steps): they agree when that product is whole.
        sys.exit(f"squad_train_parity: --steps {o.steps}: use a multiple of {round(1 / WARMUP)} (whole warm-up steps on both sides)")
    if not os.path.exists(o.squad):
        skip(f"no SQuAD file at {o.squad}")
    if not os.access(o.bertx, os.X_OK):
        sys.exit(f"squad_train_parity: {o.bertx} is not an executable (build bertx first)")
    torch.set_num_threads(o.threads)
    hf_logging.set_verbosity_error()
    src = encoder_folder(o.model or default_model())
    tok = BertTokenizerFast.from_pretrained(src)
    chosen = select(tok, o.squad, o.questions, o)
    if len(chosen) < o.questions:
        sys.exit(f"squad_train_parity: {o.squad}: only {len(chosen)} questions qualify, {o.questions} asked")
    with tempfile.TemporaryDirectory(prefix="squad_train_parity.") as work:
        data = os.path.join(work, "train.json")
        paragraphs = [{"context": c, "qas": [q]} for c, q in chosen]
        json.dump({"version": "1.1", "data": [{"title": "parity", "paragraphs": paragraphs}]}, open(data, "w"))
        model, initial = prepare(src, work, o.seed)
        feats = squad_hf.train_features(tok, squad_hf.examples_of(data), o)
        bx_losses, bx_final = run_bertx(o, model, data, work)
        hf_losses, hf_final = run_hf(o, model, feats)
        if len(bx_losses) != o.steps:
            sys.exit(f"squad_train_parity: bertx logged {len(bx_losses)} steps, {o.steps} expected")
        print(f"{len(feats)} windows of {o.squad} (mean {sum(len(f['input_ids']) for f in feats) / len(feats):.0f} tokens), "
              f"one batch, {o.steps} steps, dropout off")
        print(f"{'step':>4} {'bertx loss':>12} {'hf loss':>12} {'|diff|':>9}")
        for i, (b, h) in enumerate(zip(bx_losses, hf_losses), 1):
            print(f"{i:>4} {b:>12.6f} {h:>12.6f} {abs(b - h):>9.2e}")
        max_diff = max(abs(b - h) for b, h in zip(bx_losses, hf_losses))
        upd = update_difference(initial, bx_final, hf_final)
    ok = max_diff <= o.tol_loss and upd <= o.tol_update
    print(json.dumps({"windows": len(feats), "steps": o.steps, "first_loss": hf_losses[0], "last_loss": hf_losses[-1],
                      "max_loss_diff": max_diff, "update_rel_diff": upd, "pass": ok}))
    print(("PASS" if ok else "FAIL") + f": max |loss diff| {max_diff:.2e} (<= {o.tol_loss:g}), weight updates differ by "
          f"{upd:.2e} relative (<= {o.tol_update:g})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
