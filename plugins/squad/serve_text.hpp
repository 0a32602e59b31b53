// serve_text.hpp - the squad task's text endpoint for `bertx serve` (POST /v1/models/NAME/squad): question + context
// windowed with doc_stride exactly as evaluation windows the dev set (Features), the windows' logits post-processed
// by the same write_predictions (squad_predict.hpp).
#pragma once
#include <memory>

#include "bertx/task.hpp"
#include "squad_predict.hpp"

namespace bertx::squad {

std::shared_ptr<TextHandler> make_text_handler(const TextSetup& setup, const PredictOptions& options);

}  // namespace bertx::squad
