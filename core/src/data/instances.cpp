// instances.cpp - create_instances_from_document, truncate_seq_pair and create_masked_lm_predictions of
// Google's create_pretraining_data.py, on contiguous token ranges of the document store (no copies until
// the instance row is written).
#include "data/instances.hpp"

#include <algorithm>
#include <cmath>

namespace bertx::data {

void Instances::reserve(std::size_t rows, std::size_t tokens) {
  ids.reserve(tokens);
  start.reserve(rows);
  length.reserve(rows);
  b_start.reserve(rows);
  n_masked.reserve(rows);
  random_next.reserve(rows);
  mpos.reserve(rows * static_cast<std::size_t>(max_predictions));
  mids.reserve(rows * static_cast<std::size_t>(max_predictions));
}

int mask_tokens(std::int32_t* tokens, int len, const MaskVocab& v, const MaskOptions& o, Rng& rng,
                std::int32_t* positions, std::int32_t* labels) {
  // Candidate groups: single tokens, or whole words (a piece plus its following "##" pieces).
  thread_local std::vector<std::int32_t> group_start, group_len, order;
  group_start.clear();
  group_len.clear();
  const bool wwm = o.whole_word && !v.continuation.empty();
  for (int i = 0; i < len; ++i) {
    const std::int32_t t = tokens[i];
    if (t == v.cls_id || t == v.sep_id || t == v.pad_id) continue;
    if (wwm && !group_start.empty() && t >= 0 && static_cast<std::size_t>(t) < v.continuation.size() &&
        v.continuation[static_cast<std::size_t>(t)] && group_start.back() + group_len.back() == i) {
      ++group_len.back();
    } else {
      group_start.push_back(i);
      group_len.push_back(1);
    }
  }
  order.resize(group_start.size());
  for (std::size_t g = 0; g < order.size(); ++g) order[g] = static_cast<std::int32_t>(g);

  const int num_to_predict = std::min(
      o.max_predictions, std::max(1, static_cast<int>(std::nearbyint(static_cast<double>(len) * o.masked_lm_prob))));
  int n = 0;
  // Candidates in uniformly random order, as Google's rng.shuffle(cand_indexes) then a loop over them; the
  // permutation is drawn lazily (forward Fisher-Yates), so only the candidates actually visited cost a draw.
  for (std::size_t idx = 0; idx < order.size(); ++idx) {
    if (n >= num_to_predict) break;
    std::swap(order[idx], order[idx + rng.below(order.size() - idx)]);
    const std::int32_t g = order[idx];
    const int glen = group_len[static_cast<std::size_t>(g)];
    if (n + glen > num_to_predict) continue;
    const int start = group_start[static_cast<std::size_t>(g)];
    for (int index = start; index < start + glen; ++index) {
      const std::int32_t original = tokens[index];
      std::int32_t replacement;
      if (rng.uniform() < 0.8)
        replacement = v.mask_id;
      else if (rng.uniform() < 0.5)
        replacement = original;
      else
        replacement = static_cast<std::int32_t>(rng.randint(0, v.size - 1));
      tokens[index] = replacement;
      positions[n] = index;
      labels[n] = original;
      ++n;
    }
  }
  // Sort the predictions by position (insertion sort: at most max_predictions entries).
  for (int i = 1; i < n; ++i) {
    const std::int32_t p = positions[i], l = labels[i];
    int j = i - 1;
    while (j >= 0 && positions[j] > p) {
      positions[j + 1] = positions[j];
      labels[j + 1] = labels[j];
      --j;
    }
    positions[j + 1] = p;
    labels[j + 1] = l;
  }
  return n;
}

int document_repeats(double weight, std::uint64_t seed, int pass, std::size_t doc) {
  const double whole = std::floor(weight);
  const double frac = weight - whole;
  int repeats = static_cast<int>(whole);
  if (frac > 0) {
    Rng r(mix_seed({seed, 0x3E1647ULL, static_cast<std::uint64_t>(pass), doc}));
    if (r.uniform() < frac) ++repeats;
  }
  return repeats;
}

namespace {

struct Range {
  std::uint64_t lo, hi;  // [lo, hi) in Documents::tokens
  std::uint64_t size() const { return hi - lo; }
};

// Google's truncate_seq_pair: drop from the front or the back (coin flip) of the longer side.
void truncate_pair(Range& a, Range& b, std::uint64_t max_tokens, Rng& rng) {
  while (a.size() + b.size() > max_tokens) {
    Range& t = a.size() > b.size() ? a : b;
    if (rng.uniform() < 0.5)
      ++t.lo;
    else
      --t.hi;
  }
}

}  // namespace

void create_instances_from_document(const Documents& docs, std::size_t doc_index, const InstanceOptions& o,
                                    const MaskVocab& vocab, Rng& rng, Instances& out) {
  const auto& ss = docs.sentence_start;
  const std::size_t first = docs.doc_start[doc_index];
  const std::size_t n_sent = docs.doc_sentences(doc_index);
  const std::int64_t max_num_tokens = o.seq_len - 3;
  std::int64_t target = max_num_tokens;
  if (rng.uniform() < o.short_seq_prob) target = rng.randint(2, max_num_tokens);

  const std::size_t P = static_cast<std::size_t>(o.mask.max_predictions);
  std::int64_t i = 0, chunk_begin = 0, current_length = 0;
  while (i < static_cast<std::int64_t>(n_sent)) {
    const std::size_t s = first + static_cast<std::size_t>(i);
    current_length += static_cast<std::int64_t>(ss[s + 1] - ss[s]);
    if (i == static_cast<std::int64_t>(n_sent) - 1 || current_length >= target) {
      const std::int64_t chunk_len = i - chunk_begin + 1;
      std::int64_t a_end = 1;
      if (chunk_len >= 2) a_end = rng.randint(1, chunk_len - 1);
      const std::size_t c0 = first + static_cast<std::size_t>(chunk_begin);
      Range a{ss[c0], ss[c0 + static_cast<std::size_t>(a_end)]}, b{0, 0};
      bool is_random_next = false;
      if (chunk_len == 1 || rng.uniform() < 0.5) {
        is_random_next = true;
        const std::int64_t target_b = target - static_cast<std::int64_t>(a.size());
        std::size_t rd = doc_index;
        for (int tries = 0; tries < 10; ++tries) {
          rd = static_cast<std::size_t>(rng.randint(0, static_cast<std::int64_t>(docs.num_docs()) - 1));
          if (rd != doc_index) break;
        }
        const std::size_t rn = docs.doc_sentences(rd), rfirst = docs.doc_start[rd];
        const std::size_t rstart = static_cast<std::size_t>(rng.randint(0, static_cast<std::int64_t>(rn) - 1));
        b.lo = b.hi = ss[rfirst + rstart];
        for (std::size_t j = rstart; j < rn; ++j) {
          b.hi = ss[rfirst + j + 1];
          if (static_cast<std::int64_t>(b.size()) >= target_b) break;
        }
        i -= chunk_len - a_end;  // put the unused segments back
      } else {
        b = Range{ss[c0 + static_cast<std::size_t>(a_end)], ss[s + 1]};
      }
      truncate_pair(a, b, static_cast<std::uint64_t>(max_num_tokens), rng);

      // [CLS] A [SEP] B [SEP]
      const std::size_t row = out.length.size();
      const std::size_t row_start = out.ids.size();
      out.start.push_back(row_start);
      out.ids.push_back(vocab.cls_id);
      out.ids.insert(out.ids.end(), docs.tokens.begin() + static_cast<std::ptrdiff_t>(a.lo),
                     docs.tokens.begin() + static_cast<std::ptrdiff_t>(a.hi));
      out.ids.push_back(vocab.sep_id);
      const std::size_t b_start = out.ids.size() - row_start;
      out.ids.insert(out.ids.end(), docs.tokens.begin() + static_cast<std::ptrdiff_t>(b.lo),
                     docs.tokens.begin() + static_cast<std::ptrdiff_t>(b.hi));
      out.ids.push_back(vocab.sep_id);
      const std::size_t k = out.ids.size() - row_start;
      out.length.push_back(static_cast<std::uint16_t>(k));
      out.b_start.push_back(static_cast<std::uint16_t>(b_start));
      out.random_next.push_back(is_random_next ? 1 : 0);
      out.mpos.resize((row + 1) * P, 0);
      out.mids.resize((row + 1) * P, 0);
      int n = 0;
      if (!o.dynamic_masking)
        n = mask_tokens(out.ids.data() + row_start, static_cast<int>(k), vocab, o.mask, rng, out.mpos.data() + row * P,
                        out.mids.data() + row * P);
      out.n_masked.push_back(static_cast<std::uint16_t>(n));
      chunk_begin = i + 1;
      current_length = 0;
    }
    ++i;
  }
}

}  // namespace bertx::data
