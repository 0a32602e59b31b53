// fuzz_infer_request.cpp - `bertx serve`'s v2 inference request parser and validator (core/src/serve/infer_request.cpp,
// compiled in): what every client's body goes through before the batcher. A rejection must be a RequestError with
// status 400 and a one-line message; an accepted request holds B x S values per input, every one inside its table,
// and its response body re-parses.
#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "serve/infer_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx::serve;
  const ModelLimits limits{512, 2, 64, 8, {"start_logits", "end_logits"}};
  try {
    const InferRequest r = parse_infer_request({reinterpret_cast<const char*>(data), size}, limits);
    const Sequences& s = r.sequences;
    const auto n = static_cast<std::size_t>(s.rows * s.cols);
    if (s.rows < 1 || s.rows > limits.max_batch_size || s.cols < 1 || s.cols > limits.max_positions) std::abort();
    if (s.input_ids.size() != n || s.attention_mask.size() != n || s.token_type_ids.size() != n) std::abort();
    for (std::size_t i = 0; i < n; ++i)
      if (s.input_ids[i] < 0 || s.input_ids[i] >= limits.vocab_size || s.attention_mask[i] < 0 ||
          s.attention_mask[i] > 1 || s.token_type_ids[i] < 0 || s.token_type_ids[i] >= limits.type_vocab_size)
        std::abort();
    OutputTensor o{"start_logits", s.rows, s.cols, std::vector<float>(n, 0.5f), true};
    if (nlohmann::json::parse(infer_response_json("m", r.id, {o}), nullptr, false).is_discarded()) std::abort();
  } catch (const RequestError& e) {
    const std::string m = e.what();
    if (e.status() != 400 || m.empty() || m.find('\n') != std::string::npos) std::abort();
    if (nlohmann::json::parse(error_json(m), nullptr, false).is_discarded()) std::abort();
  }
  return 0;
}
