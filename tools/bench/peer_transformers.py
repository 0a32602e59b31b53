"""peer_transformers.py - the Hugging Face transformers peer of tools/bench/compare (imported by peer_bert.py for
--impl transformers): what a user runs today, transformers' own BertForPreTraining / BertForQuestionAnswering
(the release pinned in tools/requirements-reference.txt) on the PyTorch pinned in tools/requirements-torch.txt,
with attn_implementation="sdpa" (torch.nn.functional.scaled_dot_product_attention), optionally under
torch.compile (default mode, inductor). Randomly initialised from a BertConfig of the preset's dimensions (no hub
access), dropout 0.1 as BERT's config has it.

build() wraps the model so that peer_bert.py's timing loop calls it as it calls its own models:
  train: model(input_ids, token_type_ids, attention_mask, masked_lm_labels, next_sentence_label) -> loss
  infer: model(input_ids, token_type_ids, attention_mask) -> (start_logits, end_logits)
"""
import torch
from torch import nn

from transformers import BertConfig, BertForPreTraining, BertForQuestionAnswering


def config(c):
    return BertConfig(vocab_size=c.vocab, hidden_size=c.hidden, num_hidden_layers=c.layers, num_attention_heads=c.heads,
                      intermediate_size=c.intermediate, max_position_embeddings=512, attn_implementation="sdpa")


class PreTraining(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = BertForPreTraining(config(c))

    def forward(self, input_ids, token_type_ids, attention_mask, masked_lm_labels, next_sentence_label):
        # transformers' loss: cross-entropy of the MLM logits over every position (labels -100 ignored) + NSP
        return self.model(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                          labels=masked_lm_labels, next_sentence_label=next_sentence_label).loss


class QuestionAnswering(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = BertForQuestionAnswering(config(c))

    def forward(self, input_ids, token_type_ids, attention_mask):
        out = self.model(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        return out.start_logits, out.end_logits


def build(c, mode, compile_model):
    """The wrapped model (train or eval mode set by the caller); compiled lazily on its first call when asked."""
    model = PreTraining(c) if mode == "train" else QuestionAnswering(c)
    if model.model.config._attn_implementation != "sdpa":
        raise SystemExit(f"peer_transformers: transformers chose attention '{model.model.config._attn_implementation}', "
                         "expected sdpa")
    return torch.compile(model) if compile_model else model
