// plugin.cpp - the `glue` plugin's entry: GLUE fine-tuning as one library - the glue TSV reader and the
// classification / regression task with GLUE's metrics and submission files.
#include "bertx/plugin.hpp"
#include "components.hpp"

namespace {

void register_glue_plugin(bertx::Registry& registry) {
  bertx::glue::register_reader(registry);
  bertx::glue::register_classification(registry);
}

}  // namespace

BERTX_PLUGIN("glue", "0.1.0", "GLUE fine-tuning: the glue TSV reader and the classification / regression task",
             register_glue_plugin)
