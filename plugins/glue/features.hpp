// features.hpp - sentence (pair) -> WordPiece ids as Google's convert_single_example: [CLS] A [SEP] (B [SEP]),
// token type 0 up to and including the first [SEP], 1 after; a pair longer than max_seq_length - 3 is cut
// by dropping the last token of the longer side (B on ties), a single sentence to max_seq_length - 2.
// Pure C++ (the tokenizer is in libbertx_core): shared by the reader plugin and the tests.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "bertx/tokenizer.hpp"
#include "tasks.hpp"

namespace bertx::glue {

struct Features {
  std::vector<std::int32_t> ids;  // [CLS] A [SEP] (B [SEP]), unpadded
  std::int32_t type_b_from = 0;   // first position of token type 1 (== ids.size() for a single sentence)
};

// Google's _truncate_seq_pair: pops the last token of the longer list (b when equal) until they fit.
void truncate_pair(std::vector<std::int32_t>& a, std::vector<std::int32_t>& b, std::size_t max_total);

// b "" = single sentence. max_seq_length >= 4 (checked by the reader).
Features featurize(const Tokenizer& tokenizer, std::string_view a, std::string_view b, std::int64_t max_seq_length);

// All examples, tokenized on `threads` threads (order kept).
std::vector<Features> featurize_all(const Tokenizer& tokenizer, const std::vector<Example>& examples,
                                    std::int64_t max_seq_length, int threads);

}  // namespace bertx::glue
