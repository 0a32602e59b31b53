// checkpoint.hpp - save/load a training checkpoint folder atomically (<step>.tmp/ -> fsync -> rename),
// keeping the newest N. Contents: model.safetensors (HF names), optimizer.safetensors, rng.safetensors,
// progress.json (train/progress.hpp).
#pragma once
#include <string>

#include "bertx/model.hpp"
#include "bertx/optimizer.hpp"
#include "io/safetensors.hpp"
#include "host/progress.hpp"

namespace bertx {

// Writes root/<step>/ and deletes all but the newest `keep` step folders (and stale .tmp folders).
void save_checkpoint(const std::string& root, Model& model, Optimizer& optimizer, const Progress& progress,
                     std::int64_t keep);

struct LoadedCheckpoint {
  TensorMap model, optimizer, rng;
  Progress progress;
};
LoadedCheckpoint load_checkpoint(const std::string& dir);

// Restores the CPU RNG (and CUDA's when present) from the rng tensors of a checkpoint.
TensorMap rng_state();
void restore_rng(const TensorMap& rng);

}  // namespace bertx
