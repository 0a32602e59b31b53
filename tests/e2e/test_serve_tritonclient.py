#!/usr/bin/env python3
# test_serve_tritonclient.py - `bertx serve` driven by Triton's own Python client (tritonclient[http] from PyPI,
# pinned in tools/requirements-reference.txt), used as its documentation shows, so that existing clients work
# unchanged: health, server and model metadata, and inference with tritonclient's defaults (inputs and outputs as
# binary tensor data, Inference-Header-Content-Length), INT32 and INT64 inputs, JSON inputs and outputs, outputs
# asked for by name in any order and mixed binary/JSON, a version in the path, concurrent async_infer calls; each
# result equal to `bertx forward` on the golden model (1e-5); errors arrive as InferenceServerException with the
# server's one-line reason and status.
# Usage: test_serve_tritonclient.py --bertx build/bin/bertx --model ../shared/golden/model  (exit 77: no tritonclient)
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_serve import FAILURES, Server, check, read_safetensors  # noqa: E402 (the server fixture, shared)

try:
    import numpy as np
    import tritonclient.http as triton
    from tritonclient.utils import InferenceServerException
except ImportError as e:
    print("skipped: %s (tools/setup installs tools/requirements-reference.txt into .venv)" % e)
    sys.exit(77)


def inputs_of(ids, mask, types, datatype, binary):
    out = []
    for name, values in (("input_ids", ids), ("attention_mask", mask), ("token_type_ids", types)):
        t = triton.InferInput(name, list(values.shape), datatype)
        t.set_data_from_numpy(values.astype(np.int32 if datatype == "INT32" else np.int64), binary_data=binary)
        out.append(t)
    return out


def max_diff(got, want, mask=None):
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return float(d[mask.astype(bool)].max() if mask is not None else d.max())


def refused(call, status, words):
    """call() must raise InferenceServerException with this HTTP status and a one-line message containing words."""
    try:
        call()
    except InferenceServerException as e:
        msg = e.message() or ""
        return str(e.status()) == str(status) and words in msg and "\n" not in msg, "%s %s" % (e.status(), msg)
    return False, "no exception"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bertx", required=True)
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bertx_triton_")
    golden = read_safetensors(os.path.join(a.model, "inputs.safetensors"))
    shape = golden["input_ids"][0]
    ids, mask, types = (np.array(golden[k][1], dtype=np.int64).reshape(shape)
                        for k in ("input_ids", "attention_mask", "token_type_ids"))
    ref = {}
    for head in ("classification", "qa"):
        out = os.path.join(tmp, head + ".safetensors")
        r = subprocess.run([a.bertx, "forward", "--model", a.model, "--inputs", os.path.join(a.model, "inputs.safetensors"),
                            "--out", out, "--head", head], capture_output=True, text=True)
        check(r.returncode == 0, "bertx forward --head %s %s" % (head, r.stderr.strip()))
        ref.update({k: np.array(v, dtype=np.float32).reshape(s) for k, (s, v) in read_safetensors(out).items()})
    if FAILURES:
        return 1
    s = Server(a.bertx, ["--model", "cls=" + a.model, "--task", "classification", "--model", "qa=" + a.model,
                         "--task", "squad", "--max-batch-size", "8", "--max-queue-delay-us", "20000"])
    c = triton.InferenceServerClient(url=s.url.replace("http://", ""), concurrency=8)
    check(c.is_server_live() and c.is_server_ready(), "is_server_live / is_server_ready")
    check(c.is_model_ready("cls") and c.is_model_ready("qa", "1") and not c.is_model_ready("nope"),
          "is_model_ready: cls, qa version 1, not an unknown model")
    meta = c.get_server_metadata()
    check("binary_tensor_data" in meta.get("extensions", []), "server metadata lists binary_tensor_data (%s)" % meta)
    mm = c.get_model_metadata("qa")
    check([i["name"] for i in mm["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"] and
          sorted(o["name"] for o in mm["outputs"]) == ["end_logits", "start_logits"], "model metadata (%s)" % mm)

    # tritonclient's defaults: binary INT64 inputs, no outputs named -> every output as binary data.
    res = c.infer("cls", inputs_of(ids, mask, types, "INT64", True), request_id="t1")
    outs = res.get_response()["outputs"]
    check(res.get_response().get("id") == "t1" and "binary_data_size" in outs[0].get("parameters", {}),
          "default infer: outputs came back as binary data (%s)" % outs)
    d = max_diff(res.as_numpy("logits"), ref["logits"])
    check(res.as_numpy("logits").shape == ref["logits"].shape and d <= 1e-5,
          "default infer (binary INT64): logits equal bertx forward's (max diff %.2e)" % d)
    # INT32 binary inputs, version 1 in the path, outputs named in reverse order, end binary and start as JSON.
    res = c.infer("qa", inputs_of(ids, mask, types, "INT32", True), model_version="1",
                  outputs=[triton.InferRequestedOutput("end_logits", binary_data=True),
                           triton.InferRequestedOutput("start_logits", binary_data=False)])
    outs = res.get_response()["outputs"]
    check([o["name"] for o in outs] == ["end_logits", "start_logits"] and "data" in outs[1] and "data" not in outs[0],
          "outputs in the asked order, end_logits binary and start_logits JSON")
    for name in ("start_logits", "end_logits"):
        d = max_diff(res.as_numpy(name), ref[name], mask)
        check(d <= 1e-5, "qa (binary INT32, version 1): %s equal bertx forward's at real tokens (%.2e)" % (name, d))
    # Plain JSON both ways.
    res = c.infer("cls", inputs_of(ids, mask, types, "INT64", False),
                  outputs=[triton.InferRequestedOutput("logits", binary_data=False)])
    d = max_diff(res.as_numpy("logits"), ref["logits"])
    check("data" in res.get_response()["outputs"][0] and d <= 1e-5, "JSON inputs and outputs: logits (%.2e)" % d)
    # Concurrent requests of one row each (async_infer on the client's 8 connections) share forward passes.
    pending = [c.async_infer("cls", inputs_of(ids[i:i + 1], mask[i:i + 1], types[i:i + 1], "INT64", True))
               for i in range(shape[0]) for _ in range(4)]
    results = [p.get_result() for p in pending]
    worst = max(max_diff(r.as_numpy("logits")[0], ref["logits"][i // 4]) for i, r in enumerate(results))
    check(worst <= 1e-5, "%d concurrent async_infer rows: logits equal bertx forward's (max diff %.2e)" %
          (len(results), worst))

    # Errors: the server's status and one-line reason reach the client's exception.
    bad_ids = ids.copy()
    bad_ids[0, 1] = 100000
    ok, what = refused(lambda: c.infer("cls", inputs_of(bad_ids, mask, types, "INT64", True)), 400, "vocabulary")
    check(ok, "an id outside the vocabulary -> 400 (%s)" % what)
    ok, what = refused(lambda: c.infer("nope", inputs_of(ids, mask, types, "INT64", True)), 404, "nope")
    check(ok, "an unknown model -> 404 (%s)" % what)
    ok, what = refused(lambda: c.infer("cls", inputs_of(ids, mask, types, "INT64", True),
                                       outputs=[triton.InferRequestedOutput("start_logits")]), 400, "unknown output")
    check(ok, "an output the head does not have -> 400 (%s)" % what)
    ok, what = refused(lambda: c.infer("cls", inputs_of(ids, mask, types, "INT64", True),
                                       request_compression_algorithm="gzip"), 415, "Content-Encoding")
    check(ok, "a gzip-compressed request -> 415 (%s)" % what)
    # Binary framing a client got wrong, sent raw: each a 400 naming what does not add up.
    head = json.dumps({"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1, 3],
                                   "parameters": {"binary_data_size": 24}}]}).encode()
    blob = np.array([2, 9, 3], dtype=np.int64).tobytes()
    for what, body, length, words in (
            ("a header length past the body", head + blob, len(head) + 100, "exceeds the body"),
            ("binary_data_size short of the shape", head.replace(b"24", b"16") + blob[:16], len(head), "needs 24"),
            ("bytes no input claims", head + blob + b"\0" * 8, len(head), "no input's binary_data_size claims"),
            ("a header length that is not a number", head + blob, "12x", "must be a byte count")):
        st, text, _ = s.request("POST", "/v2/models/cls/infer", raw=body,
                                headers={"Inference-Header-Content-Length": str(length)})
        err = json.loads(text).get("error", "") if st == 400 else text
        check(st == 400 and words in err, "%s -> 400 (%d %s)" % (what, st, err))
    res = c.infer("cls", inputs_of(ids, mask, types, "INT64", True))
    check(max_diff(res.as_numpy("logits"), ref["logits"]) <= 1e-5, "the server still serves after the errors")
    c.close()
    check(s.stop() == 0, "SIGTERM -> exit 0")
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
