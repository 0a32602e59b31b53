// fuzz_squad.cpp - SQuAD v1.1/v2.0 JSON (plugins/squad/squad_data.cpp, compiled into this target):
// read the file, then cut it into features (answer spans mapped from characters to word pieces, windows)
// with a small vocabulary and small windows. The first byte picks the options (training or not, v2.0 or
// not), the rest is the file.
#include "fuzz_util.hpp"
#include "squad_data.hpp"

namespace {

const bertx::Tokenizer& tokenizer() {
  static const bertx::Tokenizer tok = [] {
    std::vector<std::string> t{"[PAD]", "[UNK]", "[CLS]", "[SEP]",  "[MASK]", "the",
                               "what",  "is",    "of",    "denver", "broncos"};
    for (char c = 'a'; c <= 'z'; ++c) {
      t.emplace_back(1, c);
      t.push_back(std::string("##") + c);
    }
    for (char c : std::string("0123456789.,?!'\"()-")) t.emplace_back(1, c);
    bertx::TokenizerOptions o;
    return bertx::Tokenizer::unchecked(bertx::Vocab::from_tokens(std::move(t)), o);
  }();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx;
  if (size < 1) return 0;
  squad::ReadOptions o;
  o.is_training = data[0] & 1;
  o.version_2_with_negative = data[0] & 2;
  const std::string path = fuzz::write_file("squad.json", {reinterpret_cast<const char*>(data) + 1, size - 1});
  fuzz::expect_ok_or_error([&] {
    squad::Dataset d = squad::read_dataset(path, o);
    for (const squad::Example& e : d.examples) {  // every example points at a paragraph and words that exist
      if (e.paragraph < 0 || static_cast<std::size_t>(e.paragraph) >= d.paragraphs.size()) std::abort();
      if (o.is_training && !e.is_impossible && (e.start_word < 0 || e.end_word < e.start_word)) std::abort();
    }
    squad::FeatureOptions fo;
    // Strides from 8 (a stride of 1 is legal but makes one window per piece: quadratic max-context flags,
    // seconds per input, which is the algorithm's cost - Google's too - not a finding).
    fo.max_seq_length = 24 + (data[0] >> 4);
    fo.doc_stride = 8 + ((data[0] >> 2) & 3) * 4;
    fo.max_query_length = 6;
    const squad::Features f(d, tokenizer(), fo, o.is_training);
    std::vector<std::int64_t> ids(fo.max_seq_length), types(fo.max_seq_length), mask(fo.max_seq_length);
    for (const squad::Feature& x : f.features()) {
      f.write_row(x, ids.data(), types.data(), mask.data());
      const std::int64_t len = f.length(x);
      if (len > fo.max_seq_length || x.start_position > x.end_position || x.end_position >= len) std::abort();
      for (std::int64_t p = 0; p < len; ++p) {
        (void)f.word_at(x, p);
        (void)f.id_at(x, p);
        (void)f.is_max_context(x, p);
      }
    }
  });
  return 0;
}
