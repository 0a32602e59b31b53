// text_endpoints.hpp - the text endpoints of a served model (POST /v1/models/NAME/classify | squad): request text
// tokenized and cut into sequences, and their logits post-processed, by the model's task plugin through the public
// text interface (bertx/task.hpp: Task::text_handler), so serving answers exactly as `bertx run` evaluates.
#pragma once
#include <vector>

#include "serve/http_server.hpp"

namespace bertx {
class PluginHost;
}

namespace bertx::serve {

// The endpoints `model` offers: none when its folder has no vocab.txt or no task plugin offers text handling. A
// request whose text makes more than max_request_sequences sequences (SQuAD windows, list entries) is refused (400)
// before any of them is built: one request cannot hold the model, or its memory, for minutes.
std::vector<TextEndpoint> text_endpoints(PluginHost& host, const ServedModel& model,
                                         std::int64_t max_request_sequences);

}  // namespace bertx::serve
