// commands.hpp - each `bertx <command>` registers itself on the CLI11 app; main.cpp only dispatches.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace bertx::cli {
// Each sets `exit_code` when its command runs. Errors are thrown as bertx::Error (main prints them).
void add_run_command(CLI::App& app, int& exit_code);
void add_plugins_command(CLI::App& app, int& exit_code);
void add_runs_command(CLI::App& app, int& exit_code);
// `runs table|plot|export|gc` (cmd_runs_history.cpp), added by add_runs_command under `runs`.
void add_runs_history_commands(CLI::App& runs, std::shared_ptr<std::string> store_path, int& exit_code);
void add_forward_command(CLI::App& app, int& exit_code);
void add_quantize_command(CLI::App& app, int& exit_code);  // cmd_quantize.cpp
// `data wikipedia|pretrain` (cmd_data.cpp); `bench data` (also cmd_data.cpp) is added by add_bench_command.
void add_data_command(CLI::App& app, int& exit_code);
void add_bench_data_command(CLI::App& bench, int& exit_code);
void add_encode_command(CLI::App& app, int& exit_code);
// `bench` with one subcommand per benchmark (tokenizer, data; model to come).
void add_bench_command(CLI::App& app, int& exit_code);
// `bench model` (cmd_bench_model.cpp): training-step throughput of a model preset on synthetic data.
void add_bench_model_command(CLI::App& bench, int& exit_code);
// `bench inference` (cmd_bench_inference.cpp): forward-pass sequences/s and latency percentiles.
void add_bench_inference_command(CLI::App& bench, int& exit_code);
// `bench store` (cmd_bench_store.cpp): run history queries on a synthetic 10^3-run, 10^7-row store.
void add_bench_store_command(CLI::App& bench, int& exit_code);
// `bertx sweep` (cmd_sweep.cpp): one run per seed, local child processes or a SLURM array job.
void add_sweep_command(CLI::App& app, int& exit_code);
// `bertx launch` (spawn and supervise local ranks) and `bertx launch-check` (cluster set-up check).
void add_launch_command(CLI::App& app, int& exit_code);
// `bertx eval squad` (cmd_eval.cpp): official benchmark metrics on prediction files.
void add_eval_command(CLI::App& app, int& exit_code);
// `bertx convert SRC OUT` (cmd_convert.cpp): Google TF / NVIDIA .pt / HF checkpoints to a Hugging Face folder.
void add_convert_command(CLI::App& app, int& exit_code);
// `bertx serve` (cmd_serve.cpp): models on the KServe v2 / Triton HTTP protocol with dynamic batching.
void add_serve_command(CLI::App& app, int& exit_code);
// The name a model folder is served / exported under when none is given: the folder's, or its parent's for a
// checkpoint step folder ("runs/x/1200" -> "x"); "model" when there is none (cmd_serve.cpp).
std::string model_name_of(const std::string& path);
// `bertx export onnx` (cmd_export.cpp): a model folder as ONNX + a Triton model repository.
void add_export_command(CLI::App& app, int& exit_code);
}  // namespace bertx::cli
