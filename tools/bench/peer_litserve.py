#!/usr/bin/env python3
"""peer_litserve.py - the peer `tools/bench/serve_load` measures `bertx serve` against (#35): transformers' BERT
question answering behind LitServe with its dynamic batching, on the Hugging Face folder bertx writes.

transformers 5 removed the question-answering pipeline the issue names, so the group is answered as that pipeline and
run_qa.py did it: the fast tokenizer cuts each context into windows (max 384 tokens, only the context truncated),
BertForQuestionAnswering (SDPA attention, fp32, torch.inference_mode) runs the windows in batches of --max-batch-size
padded to their longest (dynamic padding), and run_qa's post-processing picks each question's best span (top-20
starts x ends inside the context, end >= start, <= 30 tokens, best start + end logit over its windows). The windows
are bertx's: a window every 128 tokens of context (Google's doc_stride), i.e. transformers' overlap set per question
to room - 128, so both servers compute the same sequences.

POST /predict {"question", "context"} -> {"answer", "score", "start", "end"}. LitServe groups up to --max-batch-size
requests or waits --batch-timeout seconds (its knobs, the counterparts of Triton's max_batch_size and
max_queue_delay_us) and answers the group in one predict call; --threads intra-op threads in its one inference
worker.
  .venv/bin/python tools/bench/peer_litserve.py --model runs/bench-serve/minilm --port 8100
"""
import argparse

import litserve as ls


class QA(ls.LitAPI):
    def __init__(self, folder, threads, **kwargs):
        super().__init__(**kwargs)
        self.folder, self.threads = folder, threads

    def setup(self, device):
        import torch
        from transformers import AutoTokenizer, BertForQuestionAnswering
        torch.set_num_threads(self.threads)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(self.folder)
        self.model = BertForQuestionAnswering.from_pretrained(self.folder, attn_implementation="sdpa").eval()

    def decode_request(self, request):
        return request["question"], request["context"]

    def windows(self, question, context):
        """bertx's windows: 384 tokens at most, a new window every 128 context tokens."""
        room = 384 - 3 - len(self.tok(question, add_special_tokens=False)["input_ids"])
        return self.tok(question, context, truncation="only_second", max_length=384, stride=max(0, room - 128),
                        return_overflowing_tokens=True, return_offsets_mapping=True)

    def predict(self, batch):
        torch = self.torch
        enc = [self.windows(q, c) for q, c in batch]
        rows = [(i, w) for i, e in enumerate(enc) for w in range(len(e["input_ids"]))]  # (question, window)
        starts, ends = [], []
        with torch.inference_mode():
            for k in range(0, len(rows), self.max_batch_size):
                chunk = rows[k:k + self.max_batch_size]
                feats = [{key: enc[i][key][w] for key in ("input_ids", "token_type_ids", "attention_mask")}
                         for i, w in chunk]
                x = self.tok.pad(feats, return_tensors="pt")  # (b, longest)
                out = self.model(**x)
                starts += list(out.start_logits)
                ends += list(out.end_logits)
        best = [None] * len(batch)
        for (i, w), s, e in zip(rows, starts, ends):
            seq, off = enc[i].sequence_ids(w), enc[i]["offset_mapping"][w]
            n = len(seq)
            s, e = s[:n], e[:n]
            for a in torch.topk(s, min(20, n)).indices.tolist():
                for b in torch.topk(e, min(20, n)).indices.tolist():
                    if seq[a] != 1 or seq[b] != 1 or b < a or b - a + 1 > 30:
                        continue
                    score = float(s[a] + e[b])
                    if best[i] is None or score > best[i][0]:
                        best[i] = (score, off[a][0], off[b][1])
        out = []
        for (q, c), b in zip(batch, best):
            score, start, end = b if b else (0.0, 0, 0)
            out.append({"answer": c[start:end], "score": score, "start": start, "end": end})
        return out

    def encode_response(self, output):
        return output


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="Hugging Face folder with a question-answering head")
    ap.add_argument("--port", type=int, default=8100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-batch-size", type=int, default=8)
    ap.add_argument("--batch-timeout", type=float, default=0.002, help="seconds")
    a = ap.parse_args()
    api = QA(a.model, a.threads, max_batch_size=a.max_batch_size, batch_timeout=a.batch_timeout)
    server = ls.LitServer(api, accelerator="cpu", workers_per_device=1, timeout=120)
    server.run(host="127.0.0.1", port=a.port, num_api_servers=1, log_level="warning", generate_client_file=False)


if __name__ == "__main__":
    main()
