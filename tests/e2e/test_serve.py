#!/usr/bin/env python3
# test_serve.py - `bertx serve` end to end on the golden tiny model (127.0.0.1, ephemeral ports, Python stdlib only):
# v2 infer logits equal `bertx forward`'s (1e-5), every bad input gets its 4xx and the server keeps serving, a full
# queue gets 503 + Retry-After, concurrent requests share forward passes (nv_inference_exec_count < requests),
# health/metadata/metrics/auth/request logs, the text endpoints (classify equals softmax of v2 logits on the same
# tokens; squad answers from the context, a long one windowed into several sequences of one batch), and SIGTERM with a
# request in flight answers it and exits 0.
# Usage: test_serve.py --bertx build/bin/bertx --model ../shared/golden/model [--source .] (also serves a checkpoint)
import argparse
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        raw = b[8 + n + lo:8 + n + hi]
        fmt = {"I64": "q", "F32": "f", "I32": "i"}[v["dtype"]]
        vals = list(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw))
        out[k] = (v["shape"], vals)
    return out


def rows(shape, flat):
    return [flat[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]


class Server:
    def __init__(self, bertx, args, cwd=None):
        self.proc = subprocess.Popen([bertx, "serve", "--port", "0", "--threads", "1"] + args,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
        self.lines = []
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.url = "http://127.0.0.1:" + m.group(1)
                threading.Thread(target=self._drain, daemon=True).start()
                return
        raise RuntimeError("bertx serve did not start:\n" + "".join(self.lines))

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def request(self, method, path, body=None, headers=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)
        except (ConnectionError, urllib.error.URLError) as e:
            return -1, str(e), {}

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def tensor(name, shape, data, datatype="INT64"):
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


def metric(text, name, model):
    m = re.search(r"^%s\{model=\"%s\",version=\"1\"\} (\d+)$" % (name, model), text, re.M)
    return int(m.group(1)) if m else -1


def checkpoint(bertx, source, tmp):
    """A bertx checkpoint root (2 steps of the SQuAD CPU smoke experiment) is served with the head and vocab of its
    run's config.toml: v2 infer and the squad text endpoint answer."""
    out = os.path.join(tmp, "run")
    r = subprocess.run([bertx, "run", "experiments/squad_cpu_smoke.toml", "--set", "run.output_dir=" + out, "--set",
                        "run.store=" + os.path.join(tmp, "runs.db"), "--set", "train.max_steps=2", "--set", "train.epochs=0", "--set",
                        "train.eval=false", "--set", "train.predict=false", "--set", "run.threads=1"],
                       cwd=source, capture_output=True, text=True)
    check(r.returncode == 0, "bertx run squad_cpu_smoke, 2 steps (%s)" % r.stderr.strip()[-300:])
    if r.returncode != 0:
        return
    c = Server(bertx, ["--model", "ckpt=" + os.path.join(out, "bert", "squad")], cwd=source)
    st, text, _ = c.request("GET", "/v2/models/ckpt")
    check(st == 200 and json.loads(text)["parameters"]["task"] == "squad", "checkpoint root: squad head (%s)" % text)
    st, text, _ = c.request("POST", "/v2/models/ckpt/infer", {"inputs": [tensor("input_ids", [1, 4], [101, 2054, 102,
                                                                                                    102])]})
    check(st == 200, "checkpoint root: v2 infer (%d %s)" % (st, text[:200]))
    st, text, _ = c.request("POST", "/v1/models/ckpt/squad", {"question": "What sat?", "context": "The cat sat."})
    check(st == 200 and "answer" in json.loads(text), "checkpoint root: squad text with the run's vocab (%d %s)" %
          (st, text[:200]))
    check(c.stop() == 0, "checkpoint server: SIGTERM -> exit 0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bertx", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--source", help="the repository (its SQuAD smoke experiment makes a checkpoint to serve)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bertx_serve_")
    inputs = read_safetensors(os.path.join(a.model, "inputs.safetensors"))
    shape, ids = inputs["input_ids"]
    _, mask = inputs["attention_mask"]
    _, types = inputs["token_type_ids"]
    ref = {}
    for head in ("classification", "qa"):
        out = os.path.join(tmp, head + ".safetensors")
        r = subprocess.run([a.bertx, "forward", "--model", a.model, "--inputs", os.path.join(a.model, "inputs.safetensors"),
                            "--out", out, "--head", head], capture_output=True, text=True)
        check(r.returncode == 0, "bertx forward --head " + head + " " + r.stderr.strip())
        ref.update(read_safetensors(out))
    # The golden model folder with a small whole-word vocab (the model has 512 ids), for the text endpoints.
    folder = os.path.join(tmp, "model")
    os.mkdir(folder)
    for f in ("config.json", "weights.safetensors", "qa_head.safetensors", "cls_head.safetensors"):
        os.symlink(os.path.abspath(os.path.join(a.model, f)), os.path.join(folder, f))
    words = ("the cat sat on mat a dog ran in park who what where did see ate fish red blue green house tree big "
             "small one two three is was and of to it").split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "?", ".", ","] + words
    open(os.path.join(folder, "vocab.txt"), "w").write("\n".join(vocab) + "\n")
    token = os.path.join(tmp, "token")
    open(token, "w").write("s3cret\n")
    auth = {"Authorization": "Bearer s3cret"}
    s = Server(a.bertx, ["--model", "cls=" + folder, "--task", "classification", "--model", "qa=" + folder,
                         "--task", "squad", "--max-batch-size", "8", "--max-queue-delay-us",
                         "200000", "--max-body-bytes", "100000", "--max-request-sequences", "16",
                         "--auth-token-file", token, "--log-requests"])
    print("".join(s.lines), end="")
    check("max_batch_size 8, max_queue_delay_us 200000" in "".join(s.lines), "the start line names the batching")
    body = {"id": "r1", "inputs": [tensor("input_ids", shape, rows(shape, ids)), tensor("attention_mask", shape, mask),
                                   tensor("token_type_ids", shape, types, "INT32")]}
    st, text, _ = s.request("POST", "/v2/models/cls/infer", body, auth)
    check(st == 200, "v2 infer on cls: 200 (%d %s)" % (st, text[:200]))
    if st == 200:
        out = json.loads(text)
        logits = out["outputs"][0]
        check(out["id"] == "r1" and logits["name"] == "logits" and logits["shape"] == ref["logits"][0],
              "logits shape %s" % logits["shape"])
        diff = max(abs(x - y) for x, y in zip(logits["data"], ref["logits"][1]))
        check(diff <= 1e-5, "classification logits equal bertx forward's (max diff %.2e)" % diff)
    st, text, _ = s.request("POST", "/v2/models/qa/versions/1/infer", body, auth)
    check(st == 200, "v2 infer on qa: 200 (%d %s)" % (st, text[:200]))
    if st == 200:
        got = {o["name"]: o for o in json.loads(text)["outputs"]}
        for name in ("start_logits", "end_logits"):
            diff = max(abs(x - y) for x, y, m in zip(got[name]["data"], ref[name][1], mask) if m)
            check(got[name]["shape"] == shape and diff <= 1e-5,
                  "%s equal bertx forward's at real tokens (max diff %.2e)" % (name, diff))
    # Bad requests: each its status and a one-line {"error"}; the server keeps serving.
    one = [tensor("input_ids", [1, 4], [2, 5, 7, 3])]
    bad = [
        ("malformed JSON", "/v2/models/cls/infer", b"{\"inputs\": [", 400),
        ("no input_ids", "/v2/models/cls/infer", {"inputs": [tensor("attention_mask", [1, 4], [1, 1, 1, 1])]}, 400),
        ("misnamed input", "/v2/models/cls/infer", {"inputs": [tensor("input_idz", [1, 4], [2, 5, 7, 3])]}, 400),
        ("FP32 datatype", "/v2/models/cls/infer", {"inputs": [tensor("input_ids", [1, 4], [2, 5, 7, 3], "FP32")]}, 400),
        ("3-d shape", "/v2/models/cls/infer", {"inputs": [tensor("input_ids", [1, 2, 2], [2, 5, 7, 3])]}, 400),
        ("data disagrees with shape", "/v2/models/cls/infer", {"inputs": [tensor("input_ids", [1, 5], [2, 5, 7, 3])]},
         400),
        ("id outside the vocabulary", "/v2/models/cls/infer", {"inputs": [tensor("input_ids", [1, 4], [2, 5, 512, 3])]},
         400),
        ("batch over max_batch_size", "/v2/models/cls/infer", {"inputs": [tensor("input_ids", [9, 1], [2] * 9)]}, 400),
        ("unknown model", "/v2/models/nope/infer", {"inputs": one}, 404),
        ("body over the limit", "/v2/models/cls/infer", b"{\"inputs\": [" + b" " * 200000 + b"]}", 413),
    ]
    for what, path, payload, want in bad:
        raw = payload if isinstance(payload, bytes) else None
        st, text, _ = s.request("POST", path, None if raw else payload, auth, raw)
        try:
            err = json.loads(text).get("error", "")
        except ValueError:
            err = ""
        check(st == want and err and "\n" not in err, "%s -> %d (%d %s)" % (what, want, st, err))
    st, _, hdrs = s.request("POST", "/v2/models/cls/infer", {"inputs": one})
    check(st == 401 and "Bearer" in hdrs.get("WWW-Authenticate", ""), "no bearer token -> 401 (%d)" % st)
    for path in ("/v2/health/live", "/v2/health/ready"):
        st, _, _ = s.request("GET", path)
        check(st == 200, "GET %s without a token -> 200 (%d)" % (path, st))
    st, text, _ = s.request("GET", "/v2/models/cls", headers=auth)
    meta = json.loads(text) if st == 200 else {}
    check(st == 200 and [i["name"] for i in meta["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"]
          and meta["outputs"][0]["shape"] == [-1, ref["logits"][0][1]], "model metadata (%d %s)" % (st, text[:200]))
    st, text, _ = s.request("GET", "/v2/models/qa/ready", headers=auth)
    check(st == 200 and json.loads(text)["ready"], "model ready")
    # Batching: 8 concurrent one-sequence requests inside one 200 ms window share forward passes.
    _, before, _ = s.request("GET", "/metrics", headers=auth)
    results = []

    def one_request():
        results.append(s.request("POST", "/v2/models/cls/infer", {"inputs": one}, auth)[0])

    threads = [threading.Thread(target=one_request) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _, after, _ = s.request("GET", "/metrics", headers=auth)
    execs = metric(after, "nv_inference_exec_count", "cls") - metric(before, "nv_inference_exec_count", "cls")
    count = metric(after, "nv_inference_count", "cls") - metric(before, "nv_inference_count", "cls")
    check(results == [200] * 8 and count == 8 and 1 <= execs < 8,
          "8 concurrent requests ran in %d forward passes (%s)" % (execs, results))
    check(metric(after, "nv_inference_request_failure", "cls") >= 8 and
          "bertx_inference_request_latency_seconds_bucket" in after and "nv_inference_queue_duration_us" in after,
          "metrics: failures counted, latency histogram, queue duration")
    # Text endpoints: classify's probabilities are the softmax of v2's logits on the same tokens.
    text, pair = "the cat sat on the mat", "a dog ran in the park"
    ids_ = [2] + [vocab.index(w) for w in text.split()] + [3] + [vocab.index(w) for w in pair.split()] + [3]
    tt = [0] * (len(text.split()) + 2) + [1] * (len(pair.split()) + 1)
    st, text_out, _ = s.request("POST", "/v1/models/cls/classify", {"text": text, "text_pair": pair}, auth)
    st2, v2_out, _ = s.request("POST", "/v2/models/cls/infer", {"inputs": [tensor("input_ids", [1, len(ids_)], ids_),
                                                                         tensor("token_type_ids", [1, len(tt)], tt)]}, auth)
    if st == 200 and st2 == 200:
        probs = json.loads(text_out)["probabilities"]
        logits = json.loads(v2_out)["outputs"][0]["data"]
        e = [pow(2.718281828459045, x - max(logits)) for x in logits]
        diff = max(abs(p - x / sum(e)) for p, x in zip(probs, e))
        check(diff < 1e-5 and "label" in json.loads(text_out), "classify = softmax(v2 logits) (%.2e)" % diff)
    else:
        check(False, "classify / v2 infer: %d %s / %d %s" % (st, text_out[:200], st2, v2_out[:200]))
    st, text_out, _ = s.request("POST", "/v1/models/cls/classify", [{"text": "red house"}, {"text": "big tree"}], auth)
    check(st == 200 and len(json.loads(text_out)["predictions"]) == 2, "classify a list (%d %s)" % (st, text_out[:200]))
    st, text_out, _ = s.request("POST", "/v1/models/cls/classify", {"txt": "x"}, auth)
    check(st == 400, "classify without text -> 400 (%d %s)" % (st, text_out))
    _, m0, _ = s.request("GET", "/metrics", headers=auth)
    context = " ".join(["the cat sat on the mat and the dog ran in the park ."] * 8)
    st, text_out, _ = s.request("POST", "/v1/models/qa/squad",
                                {"question": "where did the dog run ?", "context": context, "n_best": 3}, auth)
    _, m1, _ = s.request("GET", "/metrics", headers=auth)
    windows = metric(m1, "nv_inference_count", "qa") - metric(m0, "nv_inference_count", "qa")
    execs = metric(m1, "nv_inference_exec_count", "qa") - metric(m0, "nv_inference_exec_count", "qa")
    if st == 200:
        ans = json.loads(text_out)
        check(ans["answer"] and context[ans["start"]:ans["end"]] == ans["answer"] and len(ans["nbest"]) <= 3 and
              0 < ans["score"] <= 1, "squad answer from the context at its offsets (%s)" % text_out[:300])
        check(windows > 1 and execs == 1, "a long context: %d windows in %d forward pass" % (windows, execs))
    else:
        check(False, "squad text endpoint: %d %s" % (st, text_out[:300]))
    # A context of ~50 windows (under the body limit) is refused before any forward pass, in one line; still serving.
    _, m0, _ = s.request("GET", "/metrics", headers=auth)
    huge = " ".join(["the cat sat on the mat and the dog ran in the park ."] * 200)
    st, text_out, _ = s.request("POST", "/v1/models/qa/squad", {"question": "where ?", "context": huge}, auth)
    err = json.loads(text_out).get("error", "") if st == 400 else ""
    _, m1, _ = s.request("GET", "/metrics", headers=auth)
    check(st == 400 and "more than --max-request-sequences 16" in err and "\n" not in err and
          metric(m1, "nv_inference_count", "qa") == metric(m0, "nv_inference_count", "qa"),
          "an over-long context -> 400 naming --max-request-sequences, nothing run (%d %s)" % (st, err))
    st, _, _ = s.request("POST", "/v1/models/qa/squad", {"question": "where did the dog run ?", "context": context},
                         auth)
    check(st == 200, "still answering after it (%d)" % st)
    logs = [json.loads(l) for l in s.lines if l.startswith("{")]
    check(any(l.get("status") == 413 for l in logs) and any(l.get("batch_sequences", 0) > 1 for l in logs),
          "--log-requests: one JSON line per request (%d lines)" % len(logs))
    check(s.stop() == 0, "SIGTERM -> exit 0")

    # A queue of one: a second request while the first waits gets 503 + Retry-After; SIGTERM while the first is in
    # flight still answers it, then exits 0.
    q = Server(a.bertx, ["--model", folder, "--max-queue-size", "1", "--max-queue-delay-us", "1500000"])
    name = "model"
    first = []
    t = threading.Thread(target=lambda: first.append(q.request("POST", "/v2/models/%s/infer" % name, {"inputs": one})))
    t.start()
    time.sleep(0.5)
    st, text, hdrs = q.request("POST", "/v2/models/%s/infer" % name, {"inputs": one})
    check(st == 503 and hdrs.get("Retry-After") == "1", "queue full -> 503 + Retry-After (%d %s)" % (st, text))
    q.proc.send_signal(signal.SIGTERM)
    t.join()
    check(first and first[0][0] == 200, "the request in flight at SIGTERM is answered (%s)" % (first[0][0] if first else None))
    rc = q.proc.wait(timeout=60)
    check(rc == 0, "SIGTERM with a request in flight -> exit 0 (%d)" % rc)
    if a.source:
        checkpoint(a.bertx, a.source, tmp)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
