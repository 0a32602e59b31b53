// config.hpp - experiment files: TOML with `extends`, `--set` overrides, validation against schemas.
//
// Precedence: schema defaults < parent files (extends chain, left to right) < the file < --set overrides.
// Every value remembers where it came from (file:line:column or "--set key=value"), so every error names
// the spot: syntax errors, unknown sections and keys (with a "did you mean"), wrong types, missing keys.
// The resolved config (all defaults filled) is one canonical TOML text, stored with every run and
// printed by `bertx run --dry-run`.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bertx/options.hpp"
#include "bertx/plugin.hpp"

namespace bertx {

class PluginHost;

// [run]: what every experiment has. Defaults here are the schema defaults (run_fields() in config.cpp).
struct RunOptions {
  std::string name;                     // experiment name (required); groups runs in the store
  std::int64_t seed = 42;               // global random seed (data order, init, dropout)
  std::string output_dir = "runs/out";  // checkpoints, reports and predictions go below this folder
  std::string store = "runs/bertx.db";  // SQLite experiment store that records the run
  std::int64_t threads = 0;             // intra-op CPU threads; 0 = one per core
  std::string device = "auto";          // cpu | cuda | auto (cuda when available)
  std::string description;              // free text kept with the run
  std::string dist_backend = "auto";    // data parallel under a launcher: auto (nccl on CUDA, else gloo) | gloo | nccl
  double dist_bucket_mb = 25.0;         // gradient all-reduce bucket size (MiB)
  std::int64_t dist_timeout_s = 1800;   // a rendezvous or collective waiting longer than this fails the run
  bool tensorboard = true;              // also write the logged scalars as TensorBoard events in output_dir
};
const Fields<RunOptions>& run_fields();
Schema run_schema();
RunOptions run_options_from(const Options& o);  // read + range checks

// Where a value was set: "file:line:column", or "--set key=value" for overrides.
struct Source {
  std::string file;  // file path, or empty for an override
  int line = 0, column = 0;
  std::string override_text;  // "key=value" when set on the command line
  std::string str() const;
};

// The merged TOML of an experiment (extends resolved, overrides applied), not yet validated.
class Experiment {
 public:
  // Throws bertx::Error naming file:line:column (syntax, extends cycles, bad overrides).
  static Experiment load(const std::string& path, const std::vector<std::string>& overrides = {});
  Experiment(Experiment&&) noexcept;
  Experiment& operator=(Experiment&&) noexcept;
  ~Experiment();

  const std::string& path() const;
  const std::vector<std::string>& files() const;      // the file and its extends chain, child first
  const std::vector<std::string>& overrides() const;  // as given
  std::vector<std::string> sections() const;          // top-level keys
  // Raw merged TOML, for diagnostics.
  std::string merged_text() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Experiment(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A validated plugin section, e.g. [optimizer] type = "adamw" ...
struct ComponentConfig {
  Kind kind;
  std::string section;  // "optimizer"
  std::string type;     // "adamw"
  Options options;      // every key of the builder's schema, defaults filled
};

// Top-level sections that name a plugin through their `type` key.
const std::vector<std::pair<std::string, Kind>>& component_sections();

struct ResolvedConfig {
  std::string experiment;          // path as given
  std::vector<std::string> files;  // file + extends chain
  RunOptions run;
  std::map<std::string, Options> sections;            // host sections (run, train, bench, distill), defaults filled
  std::map<std::string, ComponentConfig> components;  // by section name
  std::string text;                                   // canonical TOML of everything above
  std::string hash;                                   // 16 hex digits (FNV-1a 64 of text)
};

// The component section (e.g. "model") of a resolved config; an error naming the experiment when the
// section is absent (every step that builds plugins - training, the dry-run estimate - needs it).
const ComponentConfig& component(const ResolvedConfig& config, const std::string& section);

// Validates every section against the host's schemas and the loaded plugins' schemas.
ResolvedConfig resolve(const Experiment& exp, const PluginHost& host);

// Levenshtein-closest candidate within distance 2, or "" - for "did you mean" hints.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace bertx
