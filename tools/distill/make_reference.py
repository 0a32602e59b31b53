#!/usr/bin/env python3
"""make_reference.py - the PyTorch reference that tests/golden/test_distill_golden.cpp matches: every distillation
loss of bertx's [distill] (train/distill.hpp) and the student's gradients, computed with transformers' BERT and
torch.nn.functional on the golden model (../shared/golden/model), written to tests/fixtures/distill/reference.safetensors.

Teacher: the golden BertForSequenceClassification (weights.safetensors + cls_head.safetensors), eval mode.
Student: the same config with one layer, started from the teacher's layer 2 (embeddings, pooler and classifier too:
[distill] init_layers = [2]), then its embedding LayerNorm weight x 1.1 and classifier bias + 0.05, eval mode (no dropout) with gradients. Batch: the golden inputs, labels = cls_labels.
Losses (weights below): hard = cross-entropy on the labels; soft = F.kl_div(log_softmax(s/T), softmax(t/T),
"batchmean") * T^2; hidden = MSE(student layer 1, teacher layer 2) (uniform map 1 -> 2); attention = MSE of
q k^T / sqrt(d) (taken from the query/key projections by forward hooks) with masked keys set to 0 on both sides;
embedding = MSE of the embedding outputs.
Second case, narrow.safetensors + narrow_config.json: a 1-layer student half the teacher's width (hidden 32, 4 heads,
intermediate 128), its own random initialisation (seed 0; written as init.<name> for the test to load), and TinyBERT's
learned projection fit_dense = nn.Linear(32, 64) applied to the student's hidden states and embedding output before
their MSE. Run with the project's .venv (torch, transformers, safetensors):
  .venv/bin/python tools/distill/make_reference.py [--golden ../shared/golden/model]
"""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertForSequenceClassification

WEIGHTS = {"hard": 0.5, "soft": 1.0, "hidden": 1.0, "attention": 0.5, "embedding": 2.0}
TEMPERATURE = 2.0
GRADS = [
    "bert.embeddings.position_embeddings.weight",
    "bert.embeddings.LayerNorm.weight",
    "bert.encoder.layer.0.attention.self.query.weight",
    "bert.encoder.layer.0.attention.self.key.weight",
    "bert.encoder.layer.0.attention.self.value.bias",
    "bert.encoder.layer.0.output.dense.weight",
    "bert.pooler.dense.weight",
    "classifier.weight",
    "classifier.bias",
]
NARROW_GRADS = GRADS + ["fit_dense.weight", "fit_dense.bias", "bert.embeddings.word_embeddings.weight"]


def scores_of(model):
    """Forward hooks keeping each layer's q k^T / sqrt(d) (B, h, S, S)."""
    cfg = model.config
    h, d = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    kept, qk = [], {}

    def split(t):
        return t.view(t.size(0), t.size(1), h, d).transpose(1, 2)

    for i, layer in enumerate(model.bert.encoder.layer):
        def on_q(_, __, out, i=i):
            qk[i] = split(out)

        def on_k(_, __, out, i=i):
            kept.append(qk[i] @ split(out).transpose(-1, -2) / math.sqrt(d))

        layer.attention.self.query.register_forward_hook(on_q)
        layer.attention.self.key.register_forward_hook(on_k)
    return kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--golden", default=os.path.join(os.path.dirname(__file__), "../../../shared/golden/model"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/fixtures/distill"))
    a = ap.parse_args()
    with open(os.path.join(a.golden, "config.json")) as f:
        cfg = json.load(f)
    tcfg = BertConfig(**{**cfg, "num_labels": 2})
    scfg = BertConfig(**{**cfg, "num_labels": 2, "num_hidden_layers": 1})
    for c in (tcfg, scfg):
        c._attn_implementation = "eager"
    teacher, student = BertForSequenceClassification(tcfg), BertForSequenceClassification(scfg)
    state = {**load_file(os.path.join(a.golden, "weights.safetensors")),
             **load_file(os.path.join(a.golden, "cls_head.safetensors"))}
    missing = teacher.load_state_dict(state, strict=False).missing_keys
    assert not [k for k in missing if "position_ids" not in k], missing
    init = {k.replace("bert.encoder.layer.1.", "bert.encoder.layer.0."): v for k, v in teacher.state_dict().items()
            if not k.startswith("bert.encoder.layer.0.")}
    student.load_state_dict(init, strict=True)
    with torch.no_grad():  # the student moved off the teacher a little, so the embedding and soft terms are not 0
        student.bert.embeddings.LayerNorm.weight.mul_(1.1)
        student.classifier.bias.add_(0.05)
    teacher.eval(), student.eval()

    inputs = load_file(os.path.join(a.golden, "inputs.safetensors"))
    batch = {k: inputs[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    os.makedirs(a.out, exist_ok=True)
    out = reference(teacher, student, None, batch, inputs["cls_labels"], GRADS)
    save_file(out, os.path.join(a.out, "reference.safetensors"),
              metadata={"weights": json.dumps(WEIGHTS), "temperature": str(TEMPERATURE), "torch": torch.__version__})
    print({k: round(float(v), 6) for k, v in out.items() if k.startswith("loss.")})

    # A student half the teacher's width, with the learned projection (TinyBERT's fit_dense).
    narrow = {**cfg, "num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 128}
    ncfg = BertConfig(**{**narrow, "num_labels": 2})
    ncfg._attn_implementation = "eager"
    torch.manual_seed(0)
    small, fit = BertForSequenceClassification(ncfg), torch.nn.Linear(32, cfg["hidden_size"])
    small.eval()
    init = {f"init.{k}": v.detach().clone() for k, v in small.named_parameters()}
    init.update({f"init.fit_dense.{k}": v.detach().clone() for k, v in fit.named_parameters()})
    out = reference(teacher, small, fit, batch, inputs["cls_labels"], NARROW_GRADS)
    save_file({**init, **out}, os.path.join(a.out, "narrow.safetensors"),
              metadata={"weights": json.dumps(WEIGHTS), "temperature": str(TEMPERATURE), "torch": torch.__version__})
    with open(os.path.join(a.out, "narrow_config.json"), "w") as f:
        json.dump(narrow, f, indent=2)
        f.write("\n")
    print({k: round(float(v), 6) for k, v in out.items() if k.startswith("loss.")})


def reference(teacher, student, fit, batch, labels, grads):
    """Every loss term, the weighted total, the student's logits and the gradients named in `grads`; `fit` maps the
    student's hidden states to the teacher's width (None: the same width)."""
    t_scores, s_scores = scores_of(teacher), scores_of(student)
    with torch.no_grad():
        t = teacher(**batch, output_hidden_states=True)
    s = student(**batch, output_hidden_states=True)
    widen = fit if fit is not None else (lambda x: x)

    T = TEMPERATURE
    masked = (batch["attention_mask"] == 0)[:, None, None, :]
    terms = {
        "hard": F.cross_entropy(s.logits, labels),
        "soft": F.kl_div(F.log_softmax(s.logits / T, -1), F.softmax(t.logits / T, -1), reduction="batchmean") * T * T,
        "hidden": F.mse_loss(widen(s.hidden_states[1]), t.hidden_states[2]),
        "attention": F.mse_loss(s_scores[0].masked_fill(masked, 0), t_scores[1].masked_fill(masked, 0)),
        "embedding": F.mse_loss(widen(s.hidden_states[0]), t.hidden_states[0]),
    }
    total = sum(WEIGHTS[k] * v for k, v in terms.items())
    total.backward()
    params = dict(student.named_parameters())
    if fit is not None:
        params.update({f"fit_dense.{k}": v for k, v in fit.named_parameters()})
    out = {f"loss.{k}": v.detach().reshape(1) for k, v in terms.items()}
    out["loss.total"] = total.detach().reshape(1)
    out["student_logits"] = s.logits.detach()
    for name in grads:
        out[f"grad.{name}"] = params[name].grad.contiguous()
    return out


if __name__ == "__main__":
    main()
