// components.hpp - the pretraining plugin's components, one registration function each: the `pretraining` task
// (task.cpp), the `hdf5_pretraining` reader of NVIDIA-layout shards (plugin.cpp, reader.cpp) and the `synthetic`
// reader (synthetic.cpp). plugin.cpp's one BERTX_PLUGIN entry registers all three; they form one plugin because
// they share one batch layout (masked_lm_positions / masked_lm_labels / next_sentence_labels).
#pragma once
#include "bertx/plugin.hpp"

namespace bertx::pretraining {

void register_task(Registry& registry);         // task "pretraining"
void register_hdf5_reader(Registry& registry);  // dataset "hdf5_pretraining"
void register_synthetic(Registry& registry);    // dataset "synthetic"

}  // namespace bertx::pretraining
