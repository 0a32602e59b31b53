#!/usr/bin/env python3
# make_fixtures.py - writes tests/fixtures/interop: one tiny random BERT (transformers' BertForPreTraining) saved by
# the real producers of each foreign format bertx reads, and transformers' outputs on a fixed input to compare with.
#
#   reference/       config.json, model.safetensors, vocab.txt (save_pretrained), inputs.safetensors and
#                    expected.safetensors (transformers' hidden states, pooled output, MLM and NSP logits, eval mode)
#   google/          bert_config.json, vocab.txt, bert_model.ckpt.{index,data-00000-of-00001}: Google's release
#                    layout, written by tf.compat.v1.train.Saver with Google's variable names (run_pretraining.py)
#   biobert_v1.1_pubmed/  model.ckpt-1000000.* + `checkpoint` + adam_m/adam_v slots + global_step (BioBERT's layout)
#   tf2_object/      a tf.train.Checkpoint (object-based names), which bertx must refuse
#   nvidia/          ckpt_8.pt as DeepLearningExamples' run_pretraining.py saves it: {"model": state_dict (dense_act
#                    names, vocab padded to a multiple of 8), "optimizer", "master params", "files", "epoch",
#                    "data_loader": a Python object}, bert_config.json (the unpadded vocab_size), vocab.txt
#   nvidia_module/   ckpt_8.pt: a bare state dict with DistributedDataParallel's "module." prefix
# and the fuzz seeds fuzz/corpus/{tf_bundle,pt_archive}/seed-* (a few hundred bytes each, same producers).
#
# Two interpreters: the repo's .venv (torch, transformers) and a separate one with TensorFlow (never the repo's
# .venv; CI does not install TensorFlow, it only reads the committed files). Used to write the committed fixtures
# (2026-12-06): torch 2.11.0, transformers 5.25.0, tensorflow-cpu 2.21.0, Python 3.11.
#   .venv/bin/python tools/interop/make_fixtures.py --tf-python /tmp/tfenv/bin/python
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "interop")
SEEDS = os.path.join(ROOT, "fuzz", "corpus")  # small seeds for fuzz/fuzz_tf_bundle.cpp and fuzz_pt_archive.cpp
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"tok{i}" for i in range(94)]  # 99: not a multiple of 8
CONFIG = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, max_position_embeddings=64, type_vocab_size=2, hidden_act="gelu",
              hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02)


def google_names(sd):
    """HF BertForPreTraining state dict -> {Google TF name: numpy array} (kernels transposed), as Google's BERT."""
    out = {}
    for k, v in sd.items():
        if k.startswith("cls.predictions.decoder") or "position_ids" in k:
            continue
        a = v.detach().numpy()
        if k == "cls.predictions.bias":
            out["cls/predictions/output_bias"] = a
            continue
        if k == "cls.seq_relationship.weight":
            out["cls/seq_relationship/output_weights"] = a
            continue
        if k == "cls.seq_relationship.bias":
            out["cls/seq_relationship/output_bias"] = a
            continue
        parts = k.split(".")
        name = []
        i = 0
        while i < len(parts):
            if parts[i] == "layer" and i + 1 < len(parts) and parts[i + 1].isdigit():
                name.append(f"layer_{parts[i + 1]}")
                i += 2
                continue
            name.append(parts[i])
            i += 1
        leaf = name.pop()
        if name[-1].endswith("_embeddings"):
            pass  # bert/embeddings/word_embeddings
        elif name[-1] == "LayerNorm":
            name.append("gamma" if leaf == "weight" else "beta")
        elif leaf == "weight":
            name.append("kernel")
            a = a.T.copy()
        else:
            name.append("bias")
        out["/".join(name)] = a
    return out


def nvidia_state_dict(sd, pad_to):
    """HF names -> NVIDIA modeling.py names (dense_act), vocab-sized tensors padded to pad_to rows, _metadata kept."""
    import collections
    import torch
    out = collections.OrderedDict()
    for k, v in sd.items():
        if "position_ids" in k or k == "cls.predictions.decoder.bias":  # NVIDIA's decoder has no bias of its own
            continue
        n = (k.replace("intermediate.dense.", "intermediate.dense_act.").replace("pooler.dense.", "pooler.dense_act.")
             .replace("transform.dense.", "transform.dense_act."))
        if k in ("bert.embeddings.word_embeddings.weight", "cls.predictions.bias"):
            pad = torch.randn((pad_to - v.shape[0],) + tuple(v.shape[1:])) * 0.02
            v = torch.cat([v, pad])
        out[n] = v
    out["cls.predictions.decoder.weight"] = out["bert.embeddings.word_embeddings.weight"]  # tied, one storage
    out._metadata = getattr(sd, "_metadata", None)
    return out


class PretrainingDataLoader:  # stands in for the DataLoader run_pretraining.py pickles into the checkpoint
    def __init__(self):
        self.files = ["shard_0.hdf5"]
        self.batch_size = 4


def pack_bundle(prefix, seed):
    """fuzz_tf_bundle's input: 4-byte little-endian length of the .index, the .index, the data shard."""
    with open(prefix + ".index", "rb") as f:
        index = f.read()
    with open(prefix + ".data-00000-of-00001", "rb") as f:
        data = f.read()
    os.makedirs(os.path.join(SEEDS, "tf_bundle"), exist_ok=True)
    with open(os.path.join(SEEDS, "tf_bundle", "seed-" + seed), "wb") as f:
        f.write(len(index).to_bytes(4, "little") + index + data)


def torch_side(tf_python):
    import collections
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(1234)
    model = BertForPreTraining(BertConfig(**CONFIG)).eval()
    with torch.no_grad():  # untrained LayerNorms are 1/0: randomise them so a swapped gamma/beta would show
        for n, p in model.named_parameters():
            if "LayerNorm" in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    ref = os.path.join(OUT, "reference")
    os.makedirs(ref, exist_ok=True)
    model.save_pretrained(ref, safe_serialization=True)
    for d in ("reference", "google", "biobert_v1.1_pubmed", "nvidia", "nvidia_module"):
        os.makedirs(os.path.join(OUT, d), exist_ok=True)
        with open(os.path.join(OUT, d, "vocab.txt"), "w") as f:
            f.write("\n".join(VOCAB) + "\n")
    for d in ("google", "biobert_v1.1_pubmed", "nvidia", "nvidia_module"):
        with open(os.path.join(OUT, d, "bert_config.json"), "w") as f:
            json.dump(CONFIG, f, indent=2)

    g = torch.Generator().manual_seed(7)
    ids = torch.randint(5, len(VOCAB), (2, 10), generator=g)
    ids[:, 0] = 2
    ids[0, 9] = 3
    ids[1, 6] = 3
    ids[1, 7:] = 0
    mask = (ids != 0).long()
    types = torch.zeros_like(ids)
    types[0, 5:] = 1
    inputs = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
    save_file(inputs, os.path.join(ref, "inputs.safetensors"))
    with torch.no_grad():
        o = model(**inputs, output_hidden_states=True)
        pooled = model.bert(**inputs).pooler_output
    expected = {f"hidden_states.{i}": h.contiguous() for i, h in enumerate(o.hidden_states)}
    expected.update(sequence_output=o.hidden_states[-1].clone(), pooled_output=pooled.contiguous(),
                    mlm_logits=o.prediction_logits.contiguous(), nsp_logits=o.seq_relationship_logits.contiguous())
    save_file(expected, os.path.join(ref, "expected.safetensors"), metadata={
        "producer": f"transformers {__import__('transformers').__version__}, torch {torch.__version__}"})

    sd = model.state_dict()
    pad = (len(VOCAB) + 7) // 8 * 8
    nv = nvidia_state_dict(sd, pad)
    opt = torch.optim.AdamW(model.parameters())
    import argparse as ap
    torch.save({"model": nv, "optimizer": opt.state_dict(), "master params": [p.detach().clone() for p in
                model.parameters()][:2], "files": [0, "shard_0.hdf5"], "epoch": 1, "phase2": False,
                "data_loader": PretrainingDataLoader(), "args": ap.Namespace(seed=42, fp16=True)},
               os.path.join(OUT, "nvidia", "ckpt_8.pt"))
    module_sd = type(nv)(("module." + k, v) for k, v in nv.items())
    torch.save(module_sd, os.path.join(OUT, "nvidia_module", "ckpt_8.pt"))

    small = collections.OrderedDict()
    big = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    small["module.bert.pooler.dense_act.weight"] = big[1:3, :2]  # a strided view of a shared storage
    small["module.bert.embeddings.word_embeddings.weight"] = big
    small["module.cls.predictions.bias"] = torch.zeros(4, dtype=torch.float16)
    os.makedirs(os.path.join(SEEDS, "pt_archive"), exist_ok=True)
    torch.save({"model": small, "epoch": 1, "files": [0, "a.hdf5"], "args": ap.Namespace(fp16=True)},
               os.path.join(SEEDS, "pt_archive", "seed-nvidia_small"))

    import numpy as np
    npz = os.path.join(OUT, "google_names.npz")
    np.savez(npz, **google_names(sd))
    try:
        subprocess.run([tf_python, os.path.abspath(__file__), "--tf-side", npz], check=True)
        subprocess.run([tf_python, os.path.abspath(__file__), "--tf-side", "tf2"], check=True)
    finally:
        os.remove(npz)


def tf_side(npz):
    import numpy as np
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()

    def save(folder, prefix, slots, step):
        graph = tf.Graph()
        os.makedirs(os.path.join(OUT, folder), exist_ok=True)
        with graph.as_default():
            for name, a in arrays.items():
                tf.compat.v1.get_variable(name, initializer=tf.constant(a))
                if slots:  # the optimizer's slots as run_pretraining.py's AdamWeightDecayOptimizer names them
                    tf.compat.v1.get_variable(name + "/adam_m", initializer=tf.zeros_like(a))
                    tf.compat.v1.get_variable(name + "/adam_v", initializer=tf.zeros_like(a))
            gs = tf.compat.v1.train.get_or_create_global_step()
            saver = tf.compat.v1.train.Saver()
            with tf.compat.v1.Session() as s:
                s.run(tf.compat.v1.global_variables_initializer())
                s.run(gs.assign(step or 0))
                cwd = os.getcwd()
                os.chdir(os.path.join(OUT, folder))  # the `checkpoint` file then names it relatively
                try:
                    saver.save(s, prefix, global_step=step, write_meta_graph=False)
                finally:
                    os.chdir(cwd)

    arrays = {"bert/embeddings/LayerNorm/gamma": np.ones(3, np.float32),
              "bert/encoder/layer_0/output/dense/kernel": np.arange(6, dtype=np.float32).reshape(2, 3)}
    save("seed_tmp", "bert_model.ckpt", slots=True, step=None)
    pack_bundle(os.path.join(OUT, "seed_tmp", "bert_model.ckpt"), "google_small")
    shutil.rmtree(os.path.join(OUT, "seed_tmp"))
    arrays = dict(np.load(npz))
    save("google", "bert_model.ckpt", slots=False, step=None)
    os.remove(os.path.join(OUT, "google", "checkpoint"))  # Google's zips ship no `checkpoint` file
    save("biobert_v1.1_pubmed", "model.ckpt", slots=True, step=1000000)



def tf2_side():
    import numpy as np
    import tensorflow as tf
    os.makedirs(os.path.join(OUT, "tf2_object"), exist_ok=True)
    enc = tf.Module()
    enc.kernel = tf.Variable(np.ones((4, 4), np.float32))
    tf.train.Checkpoint(encoder=enc).write(os.path.join(OUT, "tf2_object", "ckpt"))
    pack_bundle(os.path.join(OUT, "tf2_object", "ckpt"), "tf2_object")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--tf-python", help="a Python with tensorflow (not the repo's .venv)")
    p.add_argument("--tf-side", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.tf_side == "tf2":
        tf2_side()
    elif a.tf_side:
        tf_side(a.tf_side)
    elif a.tf_python:
        torch_side(a.tf_python)
    else:
        sys.exit("make_fixtures.py: --tf-python PATH is required (a Python with tensorflow, e.g. /tmp/tfenv/bin/python)")
