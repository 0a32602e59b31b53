// infer_request.hpp - the KServe v2 / Triton HTTP inference request body (JSON tensors) parsed and checked
// against the served model before anything reaches the batcher: inputs input_ids (required), attention_mask and
// token_type_ids, datatype INT64 or INT32, shape [B, S], "data" row-major flat or nested, every id inside its table.
// Also the v2 response and error bodies. No LibTorch, no HTTP: the fuzz target fuzz_infer_request calls it alone.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bertx/error.hpp"

namespace bertx::serve {

// An error the client caused: the HTTP status to answer with and one line for {"error": "..."}.
class RequestError : public Error {
 public:
  RequestError(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// What a request is checked against.
struct ModelLimits {
  std::int64_t vocab_size = 30522;                // input_ids in [0, vocab_size)
  std::int64_t type_vocab_size = 2;               // token_type_ids in [0, type_vocab_size)
  std::int64_t max_positions = 512;               // S <= max_position_embeddings
  std::int64_t max_batch_size = 8;                // B <= max_batch_size (Triton refuses larger batches too)
  std::vector<std::string> outputs = {"logits"};  // the output names a request may ask for
};

// The sequences of one request, row-major B x S each.
struct Sequences {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> input_ids, attention_mask, token_type_ids;  // mask defaults to 1s, types to 0s
};

struct InferRequest {
  std::string id;                    // the request's "id", echoed in the response ("" when absent)
  Sequences sequences;               //
  std::vector<std::string> outputs;  // asked-for outputs in order; empty: every output of the model
};

// Throws RequestError (400) naming the first problem: malformed JSON, an unknown or repeated input, a datatype
// other than INT64/INT32, a shape that is not [B, S] or disagrees with the data or the other inputs, a value
// outside its table, an unknown output.
InferRequest parse_infer_request(std::string_view body, const ModelLimits& limits);

// One output tensor: FP32, shape [rows, cols], row-major.
struct OutputTensor {
  std::string name;
  std::int64_t rows = 0, cols = 0;
  std::vector<float> data;
  bool per_token = false;  // cols is the sequence length (a batch's padding is cut off per request)
};
std::string infer_response_json(const std::string& model, const std::string& id,
                                const std::vector<OutputTensor>& outputs);

// {"error": "<message>"}
std::string error_json(std::string_view message);

}  // namespace bertx::serve
