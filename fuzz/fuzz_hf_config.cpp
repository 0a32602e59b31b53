// fuzz_hf_config.cpp - Hugging Face config.json of a model folder (plugins/models/bert/config.cpp,
// compiled into this target): parse, validate, and write back what was accepted (it must parse again).
#include "config.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx;
  fuzz::expect_ok_or_error([&] {
    const EncoderConfig c = bert::parse_hf_config({reinterpret_cast<const char*>(data), size}, "config.json");
    const EncoderConfig again = bert::parse_hf_config(bert::hf_config_json(c), "written config.json");
    if (again.hidden_size != c.hidden_size || again.vocab_size != c.vocab_size || again.hidden_act != c.hidden_act)
      std::abort();  // the writer must round-trip what the reader accepted
  });
  return 0;
}
