"""tools/real/hf_train.py - the transformers training loop the side-by-side scripts share (finetune_hf.py for GLUE,
squad_hf.py for SQuAD), as Trainer runs it on one CPU process: a seeded RandomSampler over pre-tokenized features,
dynamic padding to the longest sequence of each batch (DataCollatorWithPadding), AdamW without decay on biases and
LayerNorm weights, linear warm-up over ceil(warmup x steps) then linear decay to 0 (get_linear_schedule_with_warmup),
global gradient-norm clipping at 1.0, fp32. A progress line every --log-freq steps with the mean loss since the last
line (as bertx logs it), rate and ETA.
"""
import math
import time

import torch
from transformers import get_linear_schedule_with_warmup

PADDED = ("input_ids", "token_type_ids", "attention_mask")


def collate(features):
    """Pads input_ids / token_type_ids / attention_mask to the batch's longest sequence; other keys are stacked."""
    S = max(len(f["input_ids"]) for f in features)
    batch = {k: torch.tensor([f[k] + [0] * (S - len(f[k])) for f in features]) for k in PADDED}
    for k in features[0]:
        if k not in PADDED:
            batch[k] = torch.tensor([f[k] for f in features])
    return batch


def add_train_args(ap, epochs, lr):
    """The recipe flags, with the defaults both sides of a comparison take."""
    ap.add_argument("--epochs", type=float, default=epochs)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=float, default=0.1, help="warm-up proportion of the steps")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--log-freq", type=int, default=50)


def adamw(model, lr, weight_decay, eps):
    """torch's AdamW as Trainer sets it up: no weight decay on biases and LayerNorm weights."""
    no_decay = ("bias", "LayerNorm.weight")
    groups = [{"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": weight_decay},
              {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=eps)


def train(model, features, o, seed, tag, loss_fn=None):
    """Fine-tunes `model` on `features` (dicts with the model's labels) for o.epochs; returns the seconds it took.
    loss_fn(model, batch) -> the loss to minimise (default: the model's own, model(**batch).loss)."""
    optimizer = adamw(model, o.lr, o.weight_decay, o.eps)
    loader = torch.utils.data.DataLoader(features, batch_size=o.batch, shuffle=True, collate_fn=collate,
                                         generator=torch.Generator().manual_seed(seed))
    steps = math.ceil(len(loader) * o.epochs)
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(o.warmup * steps), steps)
    model.train()
    step, t0, interval = 0, time.perf_counter(), []
    while step < steps:
        for batch in loader:
            loss = loss_fn(model, batch) if loss_fn else model(**batch).loss
            interval.append(loss.item())
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % o.log_freq == 0 or step == steps:
                rate = step / (time.perf_counter() - t0)
                # the mean over the steps since the last line, as bertx logs its loss
                print(f"  {tag} step {step}/{steps} loss {sum(interval) / len(interval):.4f} {rate:.2f} steps/s, "
                      f"ETA {(steps - step) / rate:.0f} s", flush=True)
                interval = []
            if step == steps:
                break
    model.eval()
    return steps, time.perf_counter() - t0


def seed_list(text):
    """'0-4' or '1,3'."""
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]
