// components.hpp - the glue plugin's components, one registration function each: the `glue` TSV reader
// (reader.cpp) and the `classification` task (classification.cpp), which scores with the GLUE metrics
// (metrics.cpp) and writes submission files by the task table (tasks.cpp). plugin.cpp's one BERTX_PLUGIN
// entry registers both; they form one plugin because the task reads the reader's example ids and task table.
#pragma once
#include "bertx/plugin.hpp"

namespace bertx::glue {

void register_reader(Registry& registry);          // dataset "glue"
void register_classification(Registry& registry);  // task "classification"

}  // namespace bertx::glue
