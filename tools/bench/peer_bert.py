#!/usr/bin/python3
"""peer_bert.py - the PyTorch (Python) side of tools/bench/compare: BERT written the way the peers write it.

Run by tools/bench/compare with the PyTorch of .venv (tools/requirements-torch.txt: the LibTorch bertx's default
build links). Two faithful re-implementations (written here, no code copied) of the 2022 peers:
  --impl hf      Hugging Face transformers 4.26 BertForPreTraining / BertForQuestionAnswering: eager
                 attention (matmul, scale, additive mask, softmax, dropout, matmul), the MLM decoder over all
                 positions with labels = -100 elsewhere, CrossEntropyLoss.
  --impl nvidia  NVIDIA DeepLearningExamples PyTorch modeling.py: the same encoder with the jit-scripted
                 bias+GELU of its LinearActivation, and the MLM head only on the masked positions
                 (index_select of the non-ignored labels), as its BertPretrainingCriterion expects.
and, through peer_transformers.py, transformers itself:
  --impl transformers  transformers' BertForPreTraining / BertForQuestionAnswering with SDPA attention; with
                 --compile under torch.compile (default mode); the compile time (the warm-up steps' excess over
                 the steady step) is reported apart as compile_s and excluded from the timed steps.
Modes: `train` (one pre-training step: forward + MLM/NSP loss + backward + torch.optim.AdamW step) and
`infer` (SQuAD span logits under no_grad, eval mode). Prints one JSON object as its last line:
sequences_per_second, step_ms_median, peak_rss_mb, flops_per_step (matmuls, 2 per multiply-add,
training = 3 x forward) and, for infer, latency percentiles.
"""
import argparse
import itertools
import json
import math
import resource
import statistics
import time

import torch
from torch import nn
import torch.nn.functional as F

PRESETS = {  # name: (layers, hidden, heads, intermediate, vocab)
    "tiny": (2, 128, 2, 512, 30522),
    "bert-base-uncased": (12, 768, 12, 3072, 30522),
    "bert-large-uncased": (24, 1024, 16, 4096, 30522),
}


@torch.jit.script
def bias_gelu(bias, y):  # NVIDIA's fused bias + exact GELU
    x = bias + y
    return x * 0.5 * (1.0 + torch.erf(x / 1.41421))


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm that casts its input to its weights' dtype: LibTorch 1.13's CPU autocast leaves layer_norm
    alone and its kernel rejects a bf16 input with fp32 weights (HF's code as written fails there with
    "expected scalar type BFloat16 but found Float"). bertx's model does the same cast."""

    def forward(self, x):
        return super().forward(x.to(self.weight.dtype))


class LinearActivation(nn.Linear):  # NVIDIA: Linear whose bias is added inside the scripted GELU
    def forward(self, x):
        return bias_gelu(self.bias, F.linear(x, self.weight, None))


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab, c.hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(512, c.hidden)
        self.token_type_embeddings = nn.Embedding(2, c.hidden)
        self.LayerNorm = LayerNorm(c.hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(512).expand((1, -1)))

    def forward(self, input_ids, token_type_ids):
        positions = self.position_ids[:, : input_ids.size(1)]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids) + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(x))


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.head_size = c.heads, c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x):
        return x.view(x.size()[:-1] + (self.heads, self.head_size)).permute(0, 2, 1, 3)

    def forward(self, hidden, mask):
        q = self.transpose_for_scores(self.query(hidden))
        k = self.transpose_for_scores(self.key(hidden))
        v = self.transpose_for_scores(self.value(hidden))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size) + mask
        probs = self.dropout(nn.functional.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (self.heads * self.head_size,))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = SelfAttention(c)
        self.attention_dense = nn.Linear(c.hidden, c.hidden)
        self.attention_norm = LayerNorm(c.hidden, eps=1e-12)
        self.intermediate = LinearActivation(c.hidden, c.intermediate) if c.nvidia else nn.Linear(c.hidden, c.intermediate)
        self.output = nn.Linear(c.intermediate, c.hidden)
        self.output_norm = LayerNorm(c.hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.nvidia = c.nvidia

    def forward(self, x, mask):
        a = self.attention_norm(self.dropout(self.attention_dense(self.attention(x, mask))) + x)
        i = self.intermediate(a) if self.nvidia else F.gelu(self.intermediate(a))
        return self.output_norm(self.dropout(self.output(i)) + a)


class Bert(nn.Module):
    def __init__(self, c, pooler=True):
        super().__init__()
        self.embeddings = Embeddings(c)
        self.layer = nn.ModuleList([Layer(c) for _ in range(c.layers)])
        self.pooler = nn.Linear(c.hidden, c.hidden) if pooler else None

    def forward(self, input_ids, token_type_ids, attention_mask):
        # HF's extended attention mask: (B, 1, 1, S), 0 where attended, dtype min where padded.
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layer:
            x = layer(x, mask)
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None
        return x, pooled


class BertForPreTraining(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.bert = Bert(c)
        self.transform = LinearActivation(c.hidden, c.hidden) if c.nvidia else nn.Linear(c.hidden, c.hidden)
        self.transform_norm = LayerNorm(c.hidden, eps=1e-12)
        self.decoder = nn.Linear(c.hidden, c.vocab, bias=False)
        self.decoder.weight = self.bert.embeddings.word_embeddings.weight  # tied
        self.decoder_bias = nn.Parameter(torch.zeros(c.vocab))
        self.seq_relationship = nn.Linear(c.hidden, 2)

    def forward(self, input_ids, token_type_ids, attention_mask, masked_lm_labels, next_sentence_label):
        seq, pooled = self.bert(input_ids, token_type_ids, attention_mask)
        if self.c.nvidia:  # only the masked positions reach the head
            index = torch.nonzero(masked_lm_labels.view(-1) != -100, as_tuple=False).squeeze(-1)
            seq = torch.index_select(seq.reshape(-1, seq.size(-1)), 0, index)
            labels = torch.index_select(masked_lm_labels.view(-1), 0, index)
        else:
            labels = masked_lm_labels.view(-1)
        h = self.transform(seq) if self.c.nvidia else F.gelu(self.transform(seq))
        scores = self.decoder(self.transform_norm(h)) + self.decoder_bias
        mlm = F.cross_entropy(scores.view(-1, self.c.vocab).float(), labels, ignore_index=-100)
        nsp = F.cross_entropy(self.seq_relationship(pooled).float(), next_sentence_label)
        return mlm + nsp


class BertForQuestionAnswering(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bert = Bert(c, pooler=False)
        self.qa_outputs = nn.Linear(c.hidden, 2)

    def forward(self, input_ids, token_type_ids, attention_mask):
        seq, _ = self.bert(input_ids, token_type_ids, attention_mask)
        start, end = self.qa_outputs(seq).split(1, dim=-1)
        return start.squeeze(-1), end.squeeze(-1)


def matmul_flops(c, batch, seq, preds, mode):
    """Matmul FLOPs of one step as this implementation executes it (2 per multiply-add)."""
    L, H, I, V, S = c.layers, c.hidden, c.intermediate, c.vocab, seq
    layer = 2 * S * H * 3 * H + 2 * 2 * S * S * H + 2 * S * H * H + 2 * 2 * S * H * I
    if mode == "infer":
        return batch * (L * layer + 2 * S * H * 2)
    P = preds if c.nvidia else S
    forward = L * layer + 2 * H * H + 2 * H * 2 + 2 * P * H * H + 2 * P * H * V
    return 3 * batch * forward


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", choices=["hf", "nvidia", "transformers"], required=True)
    ap.add_argument("--compile", action="store_true", help="--impl transformers: torch.compile the model (default mode)")
    ap.add_argument("--mode", choices=["train", "infer"], default="train")
    ap.add_argument("--model", choices=sorted(PRESETS), default="bert-base-uncased")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--max-preds", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "amp-bf16"], default="fp32")
    ap.add_argument("--half-weights", action="store_true", help="infer: convert the weights to bf16 once (LayerNorm stays fp32)")
    ap.add_argument("--lengths", help="infer: file of real tokens per sequence (one per line); batches cycle through them, "
                                      "right-padded to --seq-len as run_qa.py's pad_to_max_length does")
    ap.add_argument("--dynamic-padding", action="store_true",
                    help="infer with --lengths: pad each batch to its longest sequence only (run_qa.py --pad_to_max_length False)")
    a = ap.parse_args()
    if a.mode == "train" and (a.lengths or a.dynamic_padding):
        ap.error("--lengths / --dynamic-padding are for --mode infer")
    if a.compile and a.impl != "transformers":
        ap.error("--compile is for --impl transformers")
    if a.warmup < 1:
        ap.error("--warmup: at least 1 (the first step compiles or warms the allocator)")

    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    L, H, A, I, V = PRESETS[a.model]
    c = argparse.Namespace(layers=L, hidden=H, heads=A, intermediate=I, vocab=V, nvidia=a.impl == "nvidia")
    if a.impl == "transformers":
        from peer_transformers import build
    else:
        build = lambda c, mode, compile_model: (BertForPreTraining if mode == "train" else BertForQuestionAnswering)(c)
    B, S = a.batch, a.seq_len
    ids = torch.randint(999, V, (B, S))
    types = (torch.arange(S) >= S // 2).long().expand(B, S).contiguous()
    attention = torch.ones(B, S, dtype=torch.long)
    autocast = a.precision == "amp-bf16"

    if a.mode == "train":
        model = build(c, "train", a.compile).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
        labels = torch.full((B, S), -100, dtype=torch.long)
        for b in range(B):  # max_preds positions per sequence, as the pre-training data has them
            positions = torch.randperm(S - 2)[: a.max_preds] + 1
            labels[b, positions] = ids[b, positions]
        nsp = torch.randint(0, 2, (B,))

        def step():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = model(ids, types, attention, labels, nsp)
            loss.backward()
            optimizer.step()
    else:
        lengths = [int(x) for x in open(a.lengths).read().split()] if a.lengths else [S]
        if not lengths or min(lengths) < 1 or max(lengths) > S:
            ap.error(f"--lengths {a.lengths}: expected lengths in [1, {S}]")
        batches, flops = [], 0
        for i in range(len(lengths) // math.gcd(len(lengths), B)):  # batch i: lengths i*B .. i*B+B-1 (mod n), as bertx
            n = torch.tensor([lengths[(i * B + b) % len(lengths)] for b in range(B)])
            pos = torch.arange(S)[None, :]
            mask = (pos < n[:, None]).long()
            batch = (torch.randint(999, V, (B, S)) * mask, (pos >= (n // 3)[:, None]).long() * mask, mask)
            T = int(n.max()) if a.dynamic_padding else S
            batches.append(tuple(t[:, :T].contiguous() for t in batch))
            flops += matmul_flops(c, B, T, 0, "infer")
        flops_per_step = flops / len(batches)
        model = build(c, "infer", a.compile).eval()
        if a.half_weights:  # model.to(torch.bfloat16) but for the norms, as bertx's --half-weights
            for name, p in model.named_parameters():
                if "norm" not in name.lower():
                    p.data = p.data.to(torch.bfloat16)

        cycle = itertools.count()

        def step():
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                model(*batches[next(cycle) % len(batches)])

    warm_ms = []
    for _ in range(a.warmup):
        t0 = time.perf_counter()
        step()
        warm_ms.append((time.perf_counter() - t0) * 1e3)
    ms = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    median = statistics.median(ms)
    q = sorted(ms)

    def pct(p):
        pos = p * (len(q) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(q) - 1)
        return q[lo] + (q[hi] - q[lo]) * (pos - lo)

    out = {"impl": a.impl + ("-compile" if a.compile else ""), "mode": a.mode, "torch": torch.__version__,
           "compile_s": max(0.0, sum(warm_ms) - len(warm_ms) * median) / 1e3 if a.compile else 0.0, "sequences_per_second": B * 1e3 / median, "step_ms_median": median,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
           "flops_per_step": flops_per_step if a.mode == "infer" else matmul_flops(c, B, S, a.max_preds, a.mode)}
    if a.mode == "infer":
        out.update({"latency_ms_avg": statistics.fmean(ms), "latency_ms_p50": pct(0.5), "latency_ms_p90": pct(0.9),
                    "latency_ms_p99": pct(0.99)})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
