// cmd_run.cpp - `bertx run FILE [--set k=v ...] [--dry-run]`: resolve, validate, (train), record.
#include <iostream>
#include <thread>

#include <ATen/Parallel.h>

#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "commands.hpp"
#include "host/config.hpp"
#include "host/plugin_host.hpp"
#include "train/process_setup.hpp"
#include "host/run.hpp"
#include "train/memory_estimate.hpp"
#include "train/trainer.hpp"

namespace bertx::cli {

// Loads every plugin on the search path; refused libraries are warnings, not errors.
static void load_plugins(PluginHost& host) {
  host.scan(PluginHost::default_search_path());
  for (const auto& p : host.problems()) spdlog::warn("plugin refused: {}", p);
}

void add_run_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::string file;
    std::vector<std::string> sets;
    bool dry_run = false;
    std::int64_t seq_len = 0;
    double device_memory_gb = 0;
    std::int64_t sweep_id = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("run", "train from an experiment file");
  cmd->add_option("file", args->file, "experiment TOML file")->required();
  cmd->add_option("--set", args->sets, "override a value: section.key=value (repeatable)");
  cmd->add_flag("--dry-run", args->dry_run,
                "validate, print the fully resolved config and the memory estimate per device, then exit");
  cmd->add_option("--seq-len", args->seq_len, "dry run: sequence length for the memory estimate (default: from [data])")
      ->check(CLI::PositiveNumber);
  cmd->add_option(
         "--device-memory-gb", args->device_memory_gb,
         "dry run: device memory for the largest-batch estimate (default: 80 on CUDA, physical RAM on the CPU)")
      ->check(CLI::PositiveNumber);
  auto* sweep =
      cmd->add_option("--sweep-id", args->sweep_id, "link the run to this sweep (set by `bertx sweep` for its seeds)");
  cmd->callback([args, sweep, &exit_code] {
    Experiment exp = Experiment::load(args->file, args->sets);
    PluginHost host;
    load_plugins(host);
    ResolvedConfig rc = resolve(exp, host);
    if (args->dry_run) {
      std::cout << "# bertx dry run of " << rc.experiment;
      if (rc.files.size() > 1) {
        std::cout << " (extends:";
        for (std::size_t i = 1; i < rc.files.size(); ++i) std::cout << " " << rc.files[i];
        std::cout << ")";
      }
      std::cout << "\n# config hash " << rc.hash << "; overrides: " << args->sets.size() << "\n" << rc.text;
      bool trainable = true;
      for (const auto& [section, kind] : component_sections()) trainable = trainable && rc.components.count(section);
      apply_threads(static_cast<int>(rc.run.threads));
      if (trainable)
        std::cout << "\n" << format_memory_estimate(estimate_memory(rc, host, args->seq_len, args->device_memory_gb));
      else
        std::cout << "\n# memory estimate: needs [model], [optimizer], [task] and [data] sections\n";
      exit_code = 0;
      return;
    }
    for (const auto& [section, kind] : component_sections())
      if (!rc.components.count(section))
        throw Error(args->file + ": training needs a [" + section + "] section with type = \"<" + kind_name(kind) +
                    " name>\"");
    exit_code =
        execute_run(rc, host, &train, sweep->count() ? std::optional<std::int64_t>(args->sweep_id) : std::nullopt);
  });
}

}  // namespace bertx::cli
