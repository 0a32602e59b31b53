// http_server.hpp - `bertx serve`'s HTTP front: the KServe v2 / Triton protocol (health, metadata, infer), the
// text endpoints, /metrics, bearer-token auth and request logs, on one io thread with Boost.Beast (its includes stay
// in http_server.cpp). Inference goes through each model's Batcher; SIGTERM/SIGINT stop accepting, answer what is
// in flight, then return.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "serve/batcher.hpp"
#include "serve/metrics.hpp"
#include "serve/model_runner.hpp"

namespace bertx::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";           // address to listen on
  int port = 8000;                          // TCP port; 0: any free port (the start line says which)
  std::size_t body_limit = 32u << 20;       // request bodies larger than this get 413
  std::int64_t max_request_sequences = 64;  // text requests making more sequences (windows) than this get 400
  std::string auth_token;                   // bearer token required on all but /v2/health/*; "" for none
  bool log_requests = false;                // one JSON line per request on stdout
  BatchingOptions batching;                 // each model's batcher
};

// A text endpoint of a model (POST /v1/models/NAME/<kind>): the request body in, the sequences to run out, and
// then the JSON answer from their outputs. Throws RequestError on a bad body.
struct TextEndpoint {
  std::string kind;  // "classify" or "squad": the last path segment
  // Body -> sequences, and the function that turns their outputs into the JSON response.
  std::function<std::pair<Sequences, std::function<std::string(const std::vector<OutputTensor>&)>>(
      const std::string& body)>
      prepare;
};

struct Served {
  ServedModel model;
  std::vector<TextEndpoint> text;  // the text endpoints this model offers
};

// Listens, serves until SIGTERM/SIGINT, finishes the requests in flight; `started` gets the start line.
void run_server(std::vector<Served> models, const ServerOptions& options,
                const std::function<void(const std::string&)>& started);

}  // namespace bertx::serve
