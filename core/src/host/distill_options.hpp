// distill_options.hpp - the [distill] section of an experiment (knowledge distillation, train/distill.hpp): the
// teacher and the weight of each loss. A host section (host/sections.cpp) read by the training set-up.
#pragma once
#include <string>
#include <vector>

#include "bertx/options.hpp"

namespace bertx {

struct DistillOptions {
  std::string teacher;              // the teacher's folder or checkpoint; "" = no distillation
  double temperature = 1.0;         // T of the soft targets
  double hard_weight = 0.0;         // the task's loss on the labels
  double soft_weight = 1.0;         // KL to the teacher's head outputs
  double hidden_weight = 0.0;       // hidden-state MSE over mapped layers
  double attention_weight = 0.0;    // attention-score MSE over mapped layers
  double embedding_weight = 0.0;    // embedding-output MSE
  std::vector<double> layer_map;    // teacher layer (1-based) of each student layer; [] = uniform i * Lt / Ls
  std::vector<double> init_layers;  // teacher layers the student's layers start from (DistilBERT); [] = none
};

Schema distill_schema();                                // [distill]
DistillOptions distill_options_from(const Options& o);  // read + range checks naming o.where() and the key

}  // namespace bertx
