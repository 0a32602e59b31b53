// serve_text.hpp - the classification task's text endpoint for `bertx serve` (POST /v1/models/NAME/classify):
// text (and text_pair) featurized exactly as the glue reader featurizes a TSV row (features.hpp), the logits turned
// into a label and class probabilities (regression: the score).
#pragma once
#include <memory>

#include "bertx/task.hpp"
#include "tasks.hpp"

namespace bertx::glue {

std::shared_ptr<TextHandler> make_text_handler(const TextSetup& setup, const TaskSpec& spec);

}  // namespace bertx::glue
