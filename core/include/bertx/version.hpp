// bertx/version.hpp - version numbers of bertx and of its plugin API.
// A plugin records the BERTX_PLUGIN_API_VERSION it was compiled against; the host refuses any other.
#pragma once

#define BERTX_VERSION_STRING "0.1.0"

// Bump whenever a public plugin header changes layout or meaning (plugin.hpp, options.hpp, optimizer.hpp...).
// The installed CMake package exposes it as ${BERTX_PLUGIN_API_VERSION}; the host refuses a plugin whose
// bertx_plugin_info.api_version differs, naming both versions.
// History: 2: Batch::padding_unread; 3: Model::prepare_gradients; 4: Kind::Scorer, Task::predictions_per_sequence;
// 5: Model::prepare(ExecutionPolicy) (bertx/execution.hpp); 6: Task::text_handler (TextHandler, TextQuery: bertx
// serve's text endpoints); 7: distillation: Task::heads, StepOutput::outputs, EncoderOutput::attention_scores.
#define BERTX_PLUGIN_API_VERSION 7u

// Symbols a shared library must export (the plugin entry) or that cross the boundary (error types).
#define BERTX_EXPORT __attribute__((visibility("default")))
