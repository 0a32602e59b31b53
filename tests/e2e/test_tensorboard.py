#!/usr/bin/env python3
# test_tensorboard.py - bertx's TensorBoard event files read back by TensorBoard's own reader (tensorboard's
# EventAccumulator, the .venv's pinned release): a tiny fine-tuning (random weights, 6 steps, loss every 2, eval every
# 3, checkpoints at 3 and 6) is run, its step-6 checkpoint removed and the run continued to 8 (a restart from step 3
# that logs steps 4-6 again: the reader must drop the stopped process's 4 and 6), then `bertx runs export --format
# tensorboard` writes the store's rows again. In the run's folder and in the export, every scalar TensorBoard reads
# equals the store's value (as the float32 TensorBoard keeps), no step twice, none missing.
# Usage: test_tensorboard.py --bertx build/bin/bertx --source . ; exits 77 (skipped) without tensorboard.
import argparse
import glob
import math
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator
except ImportError as e:
    print("skipped: the tensorboard package is not in this Python (%s); tools/setup puts it in .venv" % e)
    sys.exit(77)

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0] if math.isfinite(v) else v


def read_tensorboard(folder):
    acc = EventAccumulator(folder, size_guidance={SCALARS: 0})  # 0: keep every point, no sampling
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def read_store(db, run_id):
    con = sqlite3.connect(db)
    out = {}
    for step, name, value in con.execute("SELECT step, name, value FROM metrics WHERE run_id = ? ORDER BY step",
                                         (run_id,)):
        out.setdefault(name, []).append((step, value if value is not None else float("nan")))
    con.close()
    return out


def same(tb, store, where):
    check(sorted(tb) == sorted(store), "%s: the tags are the store's metrics (%s)" % (where, ", ".join(sorted(store))))
    n = bad = 0
    for name, rows in store.items():
        got = tb.get(name, [])
        steps = [s for s, _ in got]
        if steps != [s for s, _ in rows]:
            check(False, "%s: %s at steps %s, the store has %s" % (where, name, steps, [s for s, _ in rows]))
            continue
        for (_, a), (_, b) in zip(got, rows):
            n += 1
            if not (a == f32(b) or (math.isnan(a) and math.isnan(b))):
                bad += 1
                print("  %s %s: tensorboard %r, store %r" % (where, name, a, b))
    check(n > 0 and bad == 0, "%s: %d scalars, each equal to the store's value as float32" % (where, n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bertx", required=True)
    ap.add_argument("--source", default=".")
    a = ap.parse_args()
    bertx = os.path.abspath(a.bertx)
    tmp = tempfile.mkdtemp(prefix="bertx_tb_")
    try:
        out, db = os.path.join(tmp, "run"), os.path.join(tmp, "runs.db")
        common = ["--set", "run.output_dir=" + out, "--set", "run.store=" + db, "--set", "train.from_pretrained=",
                  "--set", "train.epochs=0", "--set", "train.log_freq=2", "--set", "train.eval_freq=3", "--set",
                  "train.num_steps_per_checkpoint=3", "--set", "train.keep_checkpoints=3", "--set", "run.threads=1",
                  "--set", "train.predict=false"]

        def run(steps):
            r = subprocess.run([bertx, "run", "experiments/tiny_finetune.toml", "--set", "train.max_steps=%d" % steps]
                               + common, cwd=a.source, capture_output=True, text=True)
            check(r.returncode == 0, "bertx run tiny_finetune to step %d (%s)" % (steps, r.stderr.strip()[-400:]))

        run(6)
        step6 = os.path.join(out, "bert", "finetune", "6")  # <output_dir>/<model type>/<phase>/<step>
        check(os.path.isdir(step6), "the run wrote its step-6 checkpoint (%s)" % step6)
        shutil.rmtree(step6, ignore_errors=True)
        run(8)
        files = sorted(glob.glob(os.path.join(out, "events.out.tfevents.*")))
        check(len(files) == 2, "two event files in the run's folder, one a process (%s)" % [os.path.basename(f) for f in files])

        con = sqlite3.connect(db)
        ids = [r[0] for r in con.execute("SELECT id FROM runs")]
        con.close()
        check(len(ids) == 1, "one run record, continued (%s)" % ids)
        store = read_store(db, ids[0])
        check("loss" in store and [s for s, _ in store["loss"]] == [2, 4, 6, 8], "the store's loss at steps 2, 4, 6, 8 (%s)"
              % store.get("loss"))
        same(read_tensorboard(out), store, "the run's own event files")

        tb = os.path.join(tmp, "tb")
        for attempt in (1, 2):  # a second export replaces the first, it does not add a file
            r = subprocess.run([bertx, "runs", "--store", db, "export", "--format", "tensorboard", "--out", tb],
                               capture_output=True, text=True)
            check(r.returncode == 0, "runs export --format tensorboard, time %d (%s)" % (attempt, r.stderr.strip()))
        folders = sorted(os.listdir(tb))
        check(len(folders) == 1 and folders[0].startswith("run%d-tiny-finetune-seed42" % ids[0]),
              "one folder per run, named by id, name and seed (%s)" % folders)
        if folders:
            check(len(glob.glob(os.path.join(tb, folders[0], "events.out.tfevents.*"))) == 1,
                  "the export's folder holds one event file after two exports")
            same(read_tensorboard(os.path.join(tb, folders[0])), store, "runs export --format tensorboard")

        r = subprocess.run([bertx, "runs", "--store", db, "export", "--format", "tensorboard"], capture_output=True,
                           text=True)
        check(r.returncode != 0 and "--out FOLDER is required" in r.stderr, "tensorboard without --out: one-line error")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
