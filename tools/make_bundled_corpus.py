#!/usr/bin/env python3
"""Builds experiments/corpus/python_docs.txt, the small English corpus bundled with bertx.

Source: the docstrings of the Python 3 standard library (Python Software Foundation License v2, which
permits redistribution with its notice; see experiments/corpus/README.md). One document per module:
the module's docstring followed by those of its public classes and functions, whitespace-normalised,
one document per line. Deterministic for a given Python version (modules sorted by name).
Every 20th document (the 20th, 40th, ...) is held out for evaluation into --eval-out.
Usage: /usr/bin/python3 tools/make_bundled_corpus.py [--max-bytes N] \
           --eval-out experiments/corpus/python_docs_eval.txt > experiments/corpus/python_docs.txt
"""
import argparse, importlib, inspect, io, pkgutil, re, sys, contextlib, warnings

SKIP = re.compile(r"^(test|idlelib|tkinter|turtle|lib2to3|ensurepip|antigravity|this|__|_)")


def clean(text):
    text = inspect.cleandoc(text or "")
    lines = [l for l in text.splitlines() if not l.lstrip().startswith((">>>", "...", "|", "$"))]
    text = " ".join(l.strip() for l in lines if l.strip())
    return re.sub(r"\s+", " ", text).strip()


def module_text(name):
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        mod = importlib.import_module(name)
    parts = [clean(mod.__doc__)]
    for attr in sorted(dir(mod)):
        if attr.startswith("_"):
            continue
        obj = getattr(mod, attr, None)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == name:
            parts.append(clean(obj.__doc__))
            if inspect.isclass(obj):
                for meth in sorted(vars(obj)):
                    fn = vars(obj)[meth]
                    if not meth.startswith("_") and inspect.isfunction(fn):
                        parts.append(clean(fn.__doc__))
    return " ".join(p for p in parts if len(p) > 40)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-bytes", type=int, default=3_000_000)
    ap.add_argument("--eval-out", required=True, help="file for the held-out documents (every --eval-every-th)")
    ap.add_argument("--eval-every", type=int, default=20)
    args = ap.parse_args()
    stdlib = [m for m in pkgutil.iter_modules() if m.module_finder.path.startswith(sys.base_prefix)
              and "site-packages" not in m.module_finder.path and "dist-packages" not in m.module_finder.path]
    names = set()
    for m in stdlib:
        if SKIP.match(m.name):
            continue
        names.add(m.name)
        if m.ispkg:
            try:
                pkg = importlib.import_module(m.name)
                for sub in pkgutil.walk_packages(pkg.__path__, m.name + ".", onerror=lambda n: None):
                    if not any(SKIP.match(part) for part in sub.name.split(".")[1:]):
                        names.add(sub.name)
            except Exception:
                pass
    names = sorted(names)
    written = count = 0
    eval_out = open(args.eval_out, "w", encoding="utf-8")
    for name in names:
        try:
            text = module_text(name)
        except Exception:
            continue
        if len(text.split()) < 50:
            continue
        line = text + "\n"
        if written + len(line.encode()) > args.max_bytes:
            break
        count += 1
        (eval_out if count % args.eval_every == 0 else sys.stdout).write(line)
        written += len(line.encode())


if __name__ == "__main__":
    main()
