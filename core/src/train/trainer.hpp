// trainer.hpp - the training loop behind `bertx run` (trainer.cpp reads top to bottom).
#pragma once
#include "host/run.hpp"

namespace bertx {
// Builds model, task, optimizer and data readers from the resolved config, resumes from this phase's
// newest checkpoint when there is one, trains to [train] max_steps (or benchmarks with [bench]).
TrainResult train(RunContext& ctx);
}  // namespace bertx
