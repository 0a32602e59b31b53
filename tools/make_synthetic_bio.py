#!/usr/bin/env python3
"""make_synthetic_bio.py - writes the bundled synthetic NER set (BioBERT's BC5CDR layout: train.tsv,
devel.tsv, test.tsv; one 'word<TAB>tag' per line, a blank line between sentences) that the example
token-classification plugin's end-to-end test fine-tunes on.

Sentences are filler words (tag O) with one to three entities: a Chemical or a Disease, each a head word
from a fixed class vocabulary (B-) optionally followed by a class-specific tail word (I-), so a small model
from random weights can learn it: the tags follow from the words. Several words split into more than one
WordPiece in bert-base-uncased's vocab (first-sub-token labelling is exercised). Deterministic (seed 29).

    python3 tools/make_synthetic_bio.py [--out examples/plugins/token_classification/data]
"""
import argparse
import os
import random

CHEMICALS = ["aspirin", "ibuprofen", "cisplatin", "morphine", "insulin", "caffeine", "lithium", "heparin",
             "warfarin", "dopamine", "penicillin", "tamoxifen", "metformin", "cocaine", "nicotine", "ketamine",
             "codeine", "haloperidol", "paracetamol", "doxorubicin"]
CHEMICAL_TAILS = ["hydrochloride", "sulfate", "sodium", "acetate", "phosphate", "citrate", "chloride", "tartrate"]
DISEASES = ["hepatitis", "diabetes", "asthma", "nephrotoxicity", "cardiomyopathy", "hypertension", "leukemia",
            "arrhythmia", "seizures", "pneumonia", "psoriasis", "anemia", "fibrosis", "carcinoma", "melanoma",
            "epilepsy", "migraine", "neuropathy", "hypotension", "dementia"]
DISEASE_TAILS = ["syndrome", "disorder", "mellitus", "failure", "injury", "infection", "toxicity", "lesions"]
FILLERS = ["the", "patient", "was", "treated", "with", "for", "and", "after", "developed", "induced", "by", "in",
           "of", "rats", "mice", "patients", "dose", "high", "low", "received", "showed", "no", "signs", "daily",
           "week", "study", "associated", "risk", "increased", "reduced", "during", "therapy", "cases", "we",
           "report", "a", "use", "chronic", "acute", "following"]
SIZES = {"train.tsv": 800, "devel.tsv": 200, "test.tsv": 200}


def entity(rng, kind):
    heads, tails = (CHEMICALS, CHEMICAL_TAILS) if kind == "Chemical" else (DISEASES, DISEASE_TAILS)
    words = [(rng.choice(heads), "B-" + kind)]
    if rng.random() < 0.35:
        words.append((rng.choice(tails), "I-" + kind))
    return words


def fillers(rng, lo, hi):
    return [(rng.choice(FILLERS), "O") for _ in range(rng.randint(lo, hi))]


def sentence(rng):
    out = fillers(rng, 0, 3)
    for i in range(rng.randint(1, 3)):
        out += entity(rng, rng.choice(["Chemical", "Disease"]))
        out += fillers(rng, 1, 4)  # entities never touch: each is separated by at least one O word
    return out + [(".", "O")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "examples", "plugins",
                                                   "token_classification", "data"))
    ap.add_argument("--seed", type=int, default=29)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    for name, n in SIZES.items():
        lines = []
        for _ in range(n):
            lines += [f"{w}\t{t}" for w, t in sentence(rng)] + [""]
        path = os.path.join(args.out, name)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(path + ".tmp", path)
        print(f"{path}: {n} sentences")


if __name__ == "__main__":
    main()
