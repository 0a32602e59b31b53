// bertx/data/masking.hpp - masked-LM masking of one instance as Google's create_pretraining_data.py does it
// (15% of the tokens, 80% [MASK] / 10% kept / 10% random id, optional whole-word masking). Public because two
// owners share the one implementation: `bertx data` masks instances when it writes static-masking shards
// (core/src/data/instances.cpp) and the hdf5_pretraining reader plugin masks per epoch (dynamic masking).
// Library bertx_data (SDK target bertx::data); no LibTorch.
#pragma once
#include <cstdint>
#include <vector>

#include "bertx/rng.hpp"

namespace bertx::data {

// What masking needs to know about the vocabulary.
struct MaskVocab {
  std::int32_t cls_id = 101, sep_id = 102, mask_id = 103, pad_id = 0;  // never masked ([MASK] replaces); bert-base ids
  std::int32_t size = 30522;                                           // random replacements are drawn from [0, size)
  std::vector<std::uint8_t> continuation;  // 1 for "##" pieces (whole-word masking); may be empty otherwise
};

struct MaskOptions {
  std::int32_t max_predictions = 20;  // cap on masked positions per instance
  double masked_lm_prob = 0.15;       // fraction of tokens (incl. [CLS]/[SEP]) to predict, rounded half-even
  bool whole_word = false;            // mask all pieces of a word together
};

// Masks tokens[0, len) in place (never [CLS], [SEP] or [PAD]); writes the masked positions (ascending) and
// their original ids into positions/labels (room for max_predictions) and returns how many. Google's
// create_masked_lm_predictions: candidates in random order, 80% [MASK] / 10% kept / 10% random id, whole
// words skipped when they would exceed the count. One deliberate difference: a "##" piece right after
// [CLS]/[SEP] (a segment truncated mid-word) starts its own word instead of joining the previous segment's.
int mask_tokens(std::int32_t* tokens, int len, const MaskVocab& vocab, const MaskOptions& options, Rng& rng,
                std::int32_t* positions, std::int32_t* labels);

}  // namespace bertx::data
