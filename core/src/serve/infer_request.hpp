// infer_request.hpp - the KServe v2 / Triton HTTP inference request body parsed and checked against the served
// model before anything reaches the batcher: inputs input_ids (required), attention_mask and token_type_ids,
// datatype INT64 or INT32, shape [B, S], values row-major as JSON "data" (flat or nested) or, with Triton's binary
// tensor data extension (what tritonclient sends by default), as little-endian bytes after the JSON header, every id
// inside its table. Also the v2 response (JSON or binary outputs) and error bodies. No LibTorch, no HTTP: the fuzz
// target fuzz_infer_request calls it alone.
#pragma once
#include <cstdint>
#include <optional>
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

// An output the request names: "parameters": {"binary_data": true} asks for its values as raw bytes.
struct RequestedOutput {
  std::string name;
  bool binary = false;
};

struct InferRequest {
  std::string id;                        // the request's "id", echoed in the response ("" when absent)
  Sequences sequences;                   //
  std::vector<RequestedOutput> outputs;  // asked-for outputs in order; empty: every output of the model
  bool binary_output = false;            // "parameters": {"binary_data_output": true}: unnamed outputs as bytes
};

// `json_size` is the Inference-Header-Content-Length header when the request has one: the body's first json_size
// bytes are the JSON, the rest the binary inputs in input order, each "parameters": {"binary_data_size": n}.
// Throws RequestError (400) naming the first problem: malformed JSON, an unknown or repeated input, a datatype
// other than INT64/INT32, a shape that is not [B, S] or disagrees with the data or the other inputs, binary sizes
// that do not add up to the bytes sent, a value outside its table, an unknown output.
InferRequest parse_infer_request(std::string_view body, const ModelLimits& limits,
                                 std::optional<std::size_t> json_size = std::nullopt);

// One output tensor: FP32, shape [rows, cols], row-major.
struct OutputTensor {
  std::string name;
  std::int64_t rows = 0, cols = 0;
  std::vector<float> data;
  bool per_token = false;  // cols is the sequence length (a batch's padding is cut off per request)
};
// The response body: JSON "data" for each output, or for those marked binary (binary[i]; empty: none) the JSON
// header with "binary_data_size" followed by the float32 values' little-endian bytes in output order. json_size
// is set when any output is binary: the Inference-Header-Content-Length the response carries.
struct InferResponse {
  std::string body;
  std::optional<std::size_t> json_size;
};
InferResponse infer_response(const std::string& model, const std::string& id, const std::vector<OutputTensor>& outputs,
                             const std::vector<bool>& binary = {});

// {"error": "<message>"}
std::string error_json(std::string_view message);

}  // namespace bertx::serve
