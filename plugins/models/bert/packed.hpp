// packed.hpp - the unpadded ("packed") encoder path (issue #12). A padded batch (B, S) with T real tokens
// (attention_mask 1) runs its linears, GELU, LayerNorms and dropout on a (T, H) matrix instead of (B*S, H),
// and attention per sequence over that sequence's own tokens - what NVIDIA's unpadded FasterTransformer /
// FlashAttention varlen paths do. SQuAD windows (seq 384) are ~40-60% padding, phase-2 pre-training
// instances often end early, so the work saved is the padding fraction.
//
// Exactness: a real token's output equals the padded computation's up to float summation order (a padded
// key's additive mask is dtype-min, so its softmax weight is exactly 0 there too). Outputs at padded
// positions are zeros here, where the padded computation returns values nobody should read; Bert::encode
// therefore packs only when no consumer reads them (see bert.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace bertx::bert {

// (B, S) 0/1 mask -> (B, 1, 1, S) additive attention mask: 0 where attended, float's lowest where padded (HF's
// extended attention mask). The padded path and the packed path's batched attention both use it.
at::Tensor additive_attention_mask(const at::Tensor& mask);

class Packing {
 public:
  // A plan for this CPU mask (B, S) of 0/1, or nullopt when fewer than min_padding of the positions are
  // padding (packing then costs more than it saves) or a sequence has no real token.
  static std::optional<Packing> plan(const at::Tensor& mask, double min_padding);

  std::int64_t tokens() const { return static_cast<std::int64_t>(offsets_.back()); }  // T
  // Rows of the real tokens: x (B, S, ...) -> (T, ...), in batch then position order.
  at::Tensor pack(const at::Tensor& x) const;
  // Each real token's position within its sequence (T,), for the position embeddings.
  const at::Tensor& positions() const { return positions_; }
  // (T, H) -> (B, S, H), zeros at padded positions.
  at::Tensor unpack(const at::Tensor& x) const;
  // Multi-head attention of each sequence over its own tokens: q, k, v (T, H) with `heads` heads -> context (T, H).
  // Per sequence, or batched over the padded (B, S, H) layout with the mask (one call instead of B small ones) where
  // the batch's sequences are similar in length (B S^2 <= kPaddedAttentionWaste x sum of L^2) or short on average
  // (mean L <= kPerSequenceMinMeanLength).
  at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads,
                       double dropout_p) const;

 private:
  at::Tensor index_;                   // (T,) flat position b * S + s of each real token
  at::Tensor positions_;               // (T,) s of each real token
  std::vector<std::int64_t> offsets_;  // (B + 1) first packed row of each sequence, then T
  std::int64_t batch_ = 0, seq_ = 0;
  at::Tensor additive_mask_;  // (B, 1, 1, S) 0 / dtype-min when attention runs padded, else undefined
};

// Batched padded attention is chosen while its score work B S^2 is at most this multiple of the per-sequence
// work sum L^2. Measured on 2 cores (all-MiniLM-L6-v2 on MRPC, batch 32, ~53 tokens, B S^2 / sum L^2 ~ 2.1):
// the 32 per-sequence calls ran attention 80 -> 160 ms a step, 5x the padded call's time per score element;
// SQuAD windows (ratio ~4-5 at S 384) stay per sequence, where each call is large.
inline constexpr double kPaddedAttentionWaste = 3.0;
// ... or while the mean length is at most this: short calls are overhead, whatever the ratio (CoLA: ~11 tokens,
// ratio 2.6-5.1).
inline constexpr double kPerSequenceMinMeanLength = 32.0;

}  // namespace bertx::bert
