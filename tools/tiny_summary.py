#!/usr/bin/env python3
"""tools/tiny_summary.py - the last lines of the default job (tools/run_tiny): the median dev accuracy of the tiny
fine-tuning sweeps, from the pre-trained weights and from random ones, read from the run store by
`bertx runs table` (the newest run of each seed), and the margin between them.

  python3 tools/tiny_summary.py BERTX STORE SEEDS PRETRAINED_NAME RANDOM_NAME     (SEEDS: e.g. 0-2)
"""
import json
import statistics
import subprocess
import sys


def seed_range(text):
    lo, _, hi = text.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


def accuracies(bertx, store, name, seeds):
    p = subprocess.run([bertx, "runs", "--store", store, "table", "--experiment", name, "--metric", "eval_accuracy",
                        "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"tiny_summary: {name}: {p.stderr.strip()}")
    newest = {}
    for row in json.loads(p.stdout)["rows"]:
        if row["seed"] in seeds and row["run"] > newest.get(row["seed"], (-1, 0))[0]:
            newest[row["seed"]] = (row["run"], row["values"]["eval_accuracy"])
    if set(newest) != seeds:
        sys.exit(f"tiny_summary: {name}: no finished eval_accuracy for seed(s) {sorted(seeds - set(newest))} in {store}")
    return [newest[s][1] for s in sorted(seeds)]


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    bertx, store, seeds, pretrained, random_ = sys.argv[1:]
    seeds = seed_range(seeds)
    pre, rnd = accuracies(bertx, store, pretrained, seeds), accuracies(bertx, store, random_, seeds)
    fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)
    print(f"fine-tuning dev accuracy, median of {len(seeds)} seeds: from the tiny pre-training "
          f"{statistics.median(pre):.3f} ({fmt(pre)}), from random weights {statistics.median(rnd):.3f} ({fmt(rnd)}): "
          f"pre-training {statistics.median(pre) - statistics.median(rnd):+.3f}")


if __name__ == "__main__":
    main()
