// features.cpp - Google's convert_single_example for GLUE, minus padding (the reader pads each batch).
#include "features.hpp"

#include <algorithm>
#include <thread>

namespace bertx::glue {

void truncate_pair(std::vector<std::int32_t>& a, std::vector<std::int32_t>& b, std::size_t max_total) {
  while (a.size() + b.size() > max_total) (a.size() > b.size() ? a : b).pop_back();
}

Features featurize(const Tokenizer& tokenizer, std::string_view a, std::string_view b, std::int64_t max_seq_length) {
  std::vector<std::int32_t> ta = tokenizer.encode(a), tb;
  const auto max_len = static_cast<std::size_t>(max_seq_length);
  if (!b.empty()) {
    tb = tokenizer.encode(b);
    truncate_pair(ta, tb, max_len - 3);
  } else if (ta.size() > max_len - 2) {
    ta.resize(max_len - 2);
  }
  const Vocab& v = tokenizer.vocab();
  Features f;
  f.ids.reserve(ta.size() + tb.size() + 3);
  f.ids.push_back(v.cls_id());
  f.ids.insert(f.ids.end(), ta.begin(), ta.end());
  f.ids.push_back(v.sep_id());
  f.type_b_from = static_cast<std::int32_t>(f.ids.size());
  if (!b.empty()) {
    f.ids.insert(f.ids.end(), tb.begin(), tb.end());
    f.ids.push_back(v.sep_id());
  }
  return f;
}

std::vector<Features> featurize_all(const Tokenizer& tokenizer, const std::vector<Example>& examples,
                                    std::int64_t max_seq_length, int threads) {
  std::vector<Features> out(examples.size());
  const std::size_t n = examples.size(),
                    workers = std::clamp<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), 1,
                                                      std::max<std::size_t>(n / 256, 1));
  auto work = [&](std::size_t w) {
    for (std::size_t i = w; i < n; i += workers)
      out[i] = featurize(tokenizer, examples[i].text_a, examples[i].text_b, max_seq_length);
  };
  std::vector<std::thread> pool;
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace bertx::glue
