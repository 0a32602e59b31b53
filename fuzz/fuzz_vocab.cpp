// fuzz_vocab.cpp - vocab.txt (core/src/text/tokenizer.cpp, Vocab::load), then WordPiece with that vocabulary:
// a downloaded vocab can hold anything (invalid UTF-8, CR, duplicates, huge tokens, no [UNK]).
// Input layout: the vocab file, optionally followed by a line "#---" and text to tokenize with it.
#include <spdlog/spdlog.h>

#include "bertx/tokenizer.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx;
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  const auto parts = fuzz::split_parts({reinterpret_cast<const char*>(data), size}, "#---", 2);
  const std::string path = fuzz::write_file("vocab.txt", parts[0]);
  const std::string_view text =
      parts.size() > 1 ? parts[1] : std::string_view("Hello, world! unaffable [UNK] naïve 日本");
  fuzz::expect_ok_or_error([&] {
    auto vocab = Vocab::load(path);
    for (bool lower : {true, false}) {
      TokenizerOptions o;
      o.do_lower_case = lower;
      const Tokenizer tok = Tokenizer::unchecked(vocab, o);
      for (std::int32_t id : tok.encode(text))
        if (id < 0 || id >= vocab->size()) std::abort();  // every id indexes the vocabulary
    }
  });
  return 0;
}
