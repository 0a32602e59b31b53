// progress.cpp - progress.json (magic + format version first, as every bertx file format) and the
// checkpoint folder index.
#include "host/progress.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "host/config.hpp"
#include "base/json_util.hpp"
#include "host/train_options.hpp"

namespace fs = std::filesystem;

namespace bertx {

std::string checkpoint_root(const ResolvedConfig& config) {
  const std::string model = config.components.count("model") ? config.components.at("model").type : "model";
  const std::string phase =
      config.sections.count("train") ? train_fields().read(config.sections.at("train")).phase : TrainOptions{}.phase;
  return (fs::path(config.run.output_dir) / model / phase).string();
}

std::string checkpoint_dir(const std::string& root, std::int64_t step) {
  return (fs::path(root) / std::to_string(step)).string();
}

std::vector<std::int64_t> checkpoint_steps(const std::string& root) {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return steps;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.size() > 18 || name.find_first_not_of("0123456789") != std::string::npos)
      continue;  // skips .tmp/.old
    if (!fs::is_regular_file(e.path() / "progress.json", ec)) continue;
    steps.push_back(std::stoll(name));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<std::int64_t> latest_checkpoint(const std::string& root) {
  const std::vector<std::int64_t> steps = checkpoint_steps(root);
  if (steps.empty()) return std::nullopt;
  return steps.back();
}

void remove_checkpoint_dir(const std::string& dir, std::error_code& ec) {
  const std::string old = dir + ".old";
  fs::remove_all(old, ec);
  fs::rename(dir, old, ec);
  if (ec) return;
  fs::remove_all(old, ec);
}

std::string progress_json(const Progress& p) {
  nlohmann::ordered_json j;
  j["magic"] = kCheckpointMagic;
  j["format_version"] = kCheckpointFormat;
  j["step"] = p.step;
  j["phase"] = p.phase;
  j["epoch"] = p.epoch;
  j["reader"] = p.reader;
  j["run_id"] = p.run_id;
  j["loss_scale"] = p.loss_scale;
  j["good_steps"] = p.good_steps;
  j["skipped_steps"] = p.skipped_steps;
  j["config_hash"] = p.config_hash;
  return j.dump(2) + "\n";
}

Progress read_progress(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read checkpoint progress file");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (string_or(j, "magic") != kCheckpointMagic)
    throw Error(path + ": not a bertx checkpoint progress file (magic \"" + kCheckpointMagic + "\" missing)");
  auto get = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) throw Error(path + ": missing key '" + key + "'");
    return j[key];
  };
  auto get_int = [&](const char* key) { return int64_at(get(key), path, key); };
  Progress p;
  try {
    const std::int64_t format = get_int("format_version");
    if (format > kCheckpointFormat)
      throw Error(path + ": checkpoint format " + std::to_string(format) + " is newer than this bertx reads (" +
                  std::to_string(kCheckpointFormat) + ")");
    p.step = get_int("step");
    p.phase = get("phase").get<std::string>();
    p.epoch = get_int("epoch");
    const nlohmann::json& reader = get("reader");
    if (!reader.is_object()) throw Error(path + ": key 'reader' must be an object, got " + reader.dump());
    for (const auto& [name, value] : reader.items()) p.reader[name] = int64_at(value, path, "reader." + name);
    p.run_id = get_int("run_id");
    p.loss_scale = get("loss_scale").get<double>();
    p.good_steps = get_int("good_steps");
    p.skipped_steps = get_int("skipped_steps");
    p.config_hash = get("config_hash").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": ill-typed value (" + std::string(e.what()) + ")");
  }
  return p;
}

std::optional<Progress> resumable(const ResolvedConfig& config) {
  if (!config.sections.count("train") || train_fields().read(config.sections.at("train")).resume != Resume::Auto)
    return std::nullopt;
  const std::string root = checkpoint_root(config);
  auto step = latest_checkpoint(root);
  if (!step) return std::nullopt;
  return read_progress((fs::path(checkpoint_dir(root, *step)) / "progress.json").string());
}

}  // namespace bertx
