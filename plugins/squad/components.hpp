// components.hpp - the squad plugin's components besides the task and reader (task.cpp registers those and
// holds the plugin's BERTX_PLUGIN entry): the `squad` scorer (scorer.cpp), the official evaluation that both
// `bertx eval squad` and the task's evaluator use (squad_eval.hpp).
#pragma once
#include "bertx/plugin.hpp"

namespace bertx::squad {

void register_scorer(Registry& registry);  // scorer "squad"

}  // namespace bertx::squad
