// instances.hpp - Google's create_pretraining_data.py algorithm on token ids: sentence-pair instances
// ([CLS] A [SEP] B [SEP]) with 50% random next sentence, and masked-LM predictions (15%, 80/10/10,
// optional whole-word masking). Each (pass, document) unit draws from its own generator seeded by
// (seed, pass, document, repeat), so the output is the same for any number of threads.
#pragma once
#include <cstdint>
#include <vector>

#include "bertx/data/masking.hpp"
#include "bertx/rng.hpp"
#include "data/corpus.hpp"
#include "data/huge_vector.hpp"

namespace bertx::data {

struct InstanceOptions {
  std::int32_t seq_len = 128;    // max tokens per instance incl. [CLS] and two [SEP]
  double short_seq_prob = 0.1;   // probability of a random shorter target length
  int dupe_factor = 5;           // passes over the corpus (each with new pairs and masks)
  MaskOptions mask;              // masked-LM settings
  bool dynamic_masking = false;  // store instances unmasked (the reader masks them per epoch)
  std::uint64_t seed = 12345;    // everything derives from it
};

// Instances back to back: row i has tokens ids[start[i], start[i] + length[i]), segment B starting at
// b_start[i], and predictions mpos/mids[i*max_predictions, +n_masked[i]) (zero padded to max_predictions).
struct Instances {
  std::int32_t seq_len = 0, max_predictions = 0;
  huge_vector<std::int32_t> ids, mpos, mids;
  huge_vector<std::uint64_t> start;
  std::vector<std::uint16_t> length, b_start, n_masked;
  std::vector<std::uint8_t> random_next;

  std::size_t size() const { return length.size(); }
  void init(std::int32_t seq, std::int32_t preds) { seq_len = seq, max_predictions = preds; }
  const std::int32_t* row(std::size_t i) const { return ids.data() + start[i]; }
  void reserve(std::size_t rows, std::size_t tokens);
};

// Instances of one document, as create_instances_from_document (all documents are candidates for the
// random next segment). Appends to `out`.
void create_instances_from_document(const Documents& docs, std::size_t doc_index, const InstanceOptions& options,
                                    const MaskVocab& vocab, Rng& rng, Instances& out);

// How many times document `doc` is used in pass `pass`: floor(weight) plus one more with probability
// frac(weight), decided by a generator seeded from (seed, pass, doc).
int document_repeats(double weight, std::uint64_t seed, int pass, std::size_t doc);

// The generator of unit (pass, doc, repeat).
inline Rng unit_rng(std::uint64_t seed, int pass, std::size_t doc, int repeat) {
  return Rng(
      mix_seed({seed, 0x1D57A7CEULL, static_cast<std::uint64_t>(pass), doc, static_cast<std::uint64_t>(repeat)}));
}

}  // namespace bertx::data
