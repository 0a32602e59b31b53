// checkpoint.cpp - crash-safe checkpoint folders: a folder named by its step exists only when complete.
#include "train/checkpoint.hpp"

#include <algorithm>
#include <filesystem>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include "bertx/error.hpp"
#include "base/fs_util.hpp"
#include "io/weights.hpp"

namespace fs = std::filesystem;

namespace bertx {

TensorMap rng_state() { return {{"cpu", at::detail::getDefaultCPUGenerator().get_state()}}; }

void restore_rng(const TensorMap& rng) {
  auto it = rng.find("cpu");
  if (it == rng.end()) throw Error("checkpoint rng.safetensors: no 'cpu' generator state");
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(it->second);
}

void save_checkpoint(const std::string& root, Model& model, Optimizer& optimizer, const Progress& progress,
                     std::int64_t keep) {
  const std::string final_dir = checkpoint_dir(root, progress.step), tmp = final_dir + ".tmp";
  std::error_code ec;
  try {
    fs::remove_all(tmp, ec);
    fs::create_directories(tmp);
    save_safetensors(tmp + "/model.safetensors", parameters_of(model.module()), {{"format", "pt"}});
    TensorMap opt;
    for (const auto& [k, v] : optimizer.state_dict()) opt[k] = v.detach().to(at::kCPU).clone();
    save_safetensors(tmp + "/optimizer.safetensors", opt);
    save_safetensors(tmp + "/rng.safetensors", rng_state());
    write_file_atomic(tmp + "/progress.json", progress_json(progress));
    fsync_dir(tmp);
    if (fs::exists(final_dir, ec)) remove_checkpoint_dir(final_dir, ec);  // a re-run of the same step replaces it
    fs::rename(tmp, final_dir);
    fsync_dir(root);
  } catch (const std::exception& e) {
    // A full disk or a read-only folder: nothing of this step stays behind (its space is freed), the older
    // checkpoints were not touched, and the run stops with one line saying so.
    fs::remove_all(tmp, ec);
    throw Error("checkpoint of step " + std::to_string(progress.step) + " not written to " + final_dir +
                " (the newest complete checkpoint is kept): " + e.what());
  }

  std::vector<std::int64_t> steps;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const auto ends_with = [&](const char* suffix) {
      return name.size() > 4 && name.compare(name.size() - 4, 4, suffix) == 0;
    };
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
      steps.push_back(std::stoll(name));
    else if (ends_with(".tmp") || ends_with(".old"))
      fs::remove_all(e.path(), ec);  // left by a killed process
  }
  std::sort(steps.rbegin(), steps.rend());
  for (std::size_t i = static_cast<std::size_t>(keep); i < steps.size(); ++i)
    remove_checkpoint_dir(checkpoint_dir(root, steps[i]), ec);
}

LoadedCheckpoint load_checkpoint(const std::string& dir) {
  LoadedCheckpoint c;
  c.progress = read_progress(dir + "/progress.json");
  c.model = load_safetensors(dir + "/model.safetensors");
  c.optimizer = load_safetensors(dir + "/optimizer.safetensors");
  c.rng = load_safetensors(dir + "/rng.safetensors");
  return c;
}

}  // namespace bertx
