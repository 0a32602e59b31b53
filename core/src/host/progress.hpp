// progress.hpp - checkpoint folders and their progress.json, without LibTorch (the run life cycle reads
// them to continue the same run record on resume).
//
// Layout: <output_dir>/<model type>/<phase>/<step>/{model,optimizer,rng}.safetensors + progress.json,
// written as <step>.tmp/ and renamed when complete, so a folder named by a number is always whole.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace bertx {

struct ResolvedConfig;

constexpr const char* kCheckpointMagic = "bertx-checkpoint";
constexpr int kCheckpointFormat = 1;

struct Progress {
  std::int64_t step = 0;                       // optimizer steps done
  std::string phase;                           // [train] phase
  std::int64_t epoch = 0;                      // data epoch
  std::map<std::string, std::int64_t> reader;  // DatasetReader::position()
  std::int64_t run_id = 0;                     // run store id of the run that wrote it
  double loss_scale = 1.0;                     // dynamic loss scale
  std::int64_t good_steps = 0;                 // loss scaler's steps since the last back-off
  std::int64_t skipped_steps = 0;              // steps skipped for non-finite gradients so far
  std::string config_hash;                     // resolved config hash at write time
};

// <output_dir>/<model type>/<phase>
std::string checkpoint_root(const ResolvedConfig& config);
// Complete step folders under root (a step number with progress.json; "<step>.tmp" and "<step>.old" are
// not), ascending.
std::vector<std::int64_t> checkpoint_steps(const std::string& root);
// Largest complete step folder under root, if any.
std::optional<std::int64_t> latest_checkpoint(const std::string& root);
// Deletes a checkpoint folder so that it disappears at once: renamed to "<step>.old" first (ignored by
// resume and from_pretrained; save_checkpoint deletes leftovers), then removed. A process killed halfway
// leaves no step folder with files missing.
void remove_checkpoint_dir(const std::string& dir, std::error_code& ec);
std::string checkpoint_dir(const std::string& root, std::int64_t step);

std::string progress_json(const Progress& p);
// Throws bertx::Error naming the file: not JSON, wrong magic, newer format, missing or ill-typed key.
Progress read_progress(const std::string& path);

// The run to continue: progress of the newest checkpoint of this config's phase when [train] resume is
// "auto", else nothing.
std::optional<Progress> resumable(const ResolvedConfig& config);

}  // namespace bertx
