// task.hpp - the `token_classification` task (NER): a per-token linear head on the encoder's last layer.
#pragma once
#include <cstdint>
#include <memory>

#include "bertx/task.hpp"

namespace ner {

struct TaskConfig {
  std::int64_t num_labels = 0;  // size of [data] labels (checked against the reader at evaluation)
  std::string predictions = "token_predictions.tsv";  // file written into the run's output folder when predicting
};

std::shared_ptr<bertx::Task> make_task(const TaskConfig& config);

}  // namespace ner
