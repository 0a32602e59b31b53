// fuzz_infer_request.cpp - `bertx serve`'s v2 inference request parser and validator (core/src/serve/infer_request.cpp,
// compiled in): what every client's body goes through before the batcher. A rejection must be a RequestError with
// status 400 and a one-line message; an accepted request holds B x S values per input, every one inside its table,
// and its response body re-parses (JSON, and binary: the header part alone). An input "#N\n<body>" gives the
// parser Inference-Header-Content-Length N (the binary tensor extension), any other input is a plain JSON body.
#include <charconv>

#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "serve/infer_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx::serve;
  const ModelLimits limits{512, 2, 64, 8, {"start_logits", "end_logits"}};
  std::string_view body(reinterpret_cast<const char*>(data), size);
  std::optional<std::size_t> json_size;
  if (body.size() > 2 && body[0] == '#') {
    const std::size_t nl = body.find('\n');
    std::size_t n = 0;
    if (nl != std::string_view::npos && nl > 1 && nl < 8 &&
        std::from_chars(body.data() + 1, body.data() + nl, n).ptr == body.data() + nl) {
      json_size = n;
      body.remove_prefix(nl + 1);
    }
  }
  try {
    const InferRequest r = parse_infer_request(body, limits, json_size);
    const Sequences& s = r.sequences;
    const auto n = static_cast<std::size_t>(s.rows * s.cols);
    if (s.rows < 1 || s.rows > limits.max_batch_size || s.cols < 1 || s.cols > limits.max_positions) std::abort();
    if (s.input_ids.size() != n || s.attention_mask.size() != n || s.token_type_ids.size() != n) std::abort();
    for (std::size_t i = 0; i < n; ++i)
      if (s.input_ids[i] < 0 || s.input_ids[i] >= limits.vocab_size || s.attention_mask[i] < 0 ||
          s.attention_mask[i] > 1 || s.token_type_ids[i] < 0 || s.token_type_ids[i] >= limits.type_vocab_size)
        std::abort();
    OutputTensor o{"start_logits", s.rows, s.cols, std::vector<float>(n, 0.5f), true};
    const InferResponse text = infer_response("m", r.id, {o}), bytes = infer_response("m", r.id, {o}, {true});
    if (text.json_size || nlohmann::json::parse(text.body, nullptr, false).is_discarded()) std::abort();
    if (!bytes.json_size || bytes.body.size() != *bytes.json_size + n * sizeof(float) ||
        nlohmann::json::parse(bytes.body.substr(0, *bytes.json_size), nullptr, false).is_discarded())
      std::abort();
  } catch (const RequestError& e) {
    const std::string m = e.what();
    if (e.status() != 400 || m.empty() || m.find('\n') != std::string::npos) std::abort();
    if (nlohmann::json::parse(error_json(m), nullptr, false).is_discarded()) std::abort();
  }
  return 0;
}
