// main.cpp - the `bertx` command line: dispatches to the subcommands in cmd_*.cpp.
// User errors (bertx::Error) print as one line "bertx: error: ..." and exit 2.
#include <cstdio>
#include <iostream>

#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "bertx/version.hpp"
#include "base/build_info.hpp"
#include "commands.hpp"
#include "train/process_setup.hpp"

int main(int argc, char** argv) {
  bertx::prepare_process(argc, argv);  // malloc settings; re-exec once with OMP_WAIT_POLICY=PASSIVE (process_setup.hpp)
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  CLI::App app{"bertx: pre-train and fine-tune BERT models (LibTorch), with every run recorded"};
  app.require_subcommand(1);
  app.set_version_flag("--version", bertx::bertx_version() + " (plugin API " +
                                        std::to_string(BERTX_PLUGIN_API_VERSION) + ", LibTorch " +
                                        bertx::torch_version() + ", git " + bertx::git_revision() + ")");
  int exit_code = 0;
  bertx::cli::add_run_command(app, exit_code);
  bertx::cli::add_plugins_command(app, exit_code);
  bertx::cli::add_runs_command(app, exit_code);
  bertx::cli::add_forward_command(app, exit_code);
  bertx::cli::add_quantize_command(app, exit_code);
  bertx::cli::add_data_command(app, exit_code);
  bertx::cli::add_encode_command(app, exit_code);
  bertx::cli::add_bench_command(app, exit_code);
  bertx::cli::add_launch_command(app, exit_code);
  bertx::cli::add_eval_command(app, exit_code);
  bertx::cli::add_sweep_command(app, exit_code);
  bertx::cli::add_convert_command(app, exit_code);
  bertx::cli::add_serve_command(app, exit_code);
  bertx::cli::add_export_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const bertx::Error& e) {
    std::fprintf(stderr, "bertx: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bertx: internal error: %s\n", e.what());
    return 3;
  }
  return exit_code;
}
