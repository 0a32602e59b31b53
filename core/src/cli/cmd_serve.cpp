// cmd_serve.cpp - `bertx serve --model [NAME=]PATH ...`: serves model folders (HF or bertx checkpoints, loaded as
// `bertx forward` loads them) on the KServe v2 / Triton HTTP protocol with dynamic batching, plus text endpoints
// and Prometheus metrics (core/src/serve, docs/serving.md). Prints one start line, serves until SIGTERM/SIGINT,
// finishes the requests in flight and exits 0.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "bertx/execution.hpp"
#include "commands.hpp"
#include "host/plugin_host.hpp"
#include "serve/http_server.hpp"
#include "serve/model_runner.hpp"
#include "serve/text_endpoints.hpp"
#include "train/process_setup.hpp"

namespace fs = std::filesystem;

namespace bertx::cli {

namespace {

struct ServeArgs {
  std::vector<std::string> models;  // [NAME=]PATH, one per --model
  std::vector<std::string> tasks;   // squad | classification | auto: one for all models, or one per --model
  std::string precision = "fp32";   // precision_flag_choices(): fp32 | amp-bf16 (bf16) | int8 on the CPU
  std::string auth_token_file;      // file whose first line is the bearer token; "" for no auth
  int threads = 0;                  // compute threads (0: the CPUs this process may use)
  serve::ServerOptions server;      // host, port, batching, logs
};

// NAME=PATH, or PATH alone: the name is model_name_of(PATH).
std::pair<std::string, std::string> name_and_path(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq != std::string::npos && eq > 0 && arg.find('/') > eq) return {arg.substr(0, eq), arg.substr(eq + 1)};
  return {model_name_of(arg), arg};
}

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("bertx serve: cannot read --auth-token-file " + path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ' || token.back() == '\t')) token.pop_back();
  if (token.empty()) throw Error("bertx serve: --auth-token-file " + path + " has an empty first line");
  return token;
}

void run_serve(ServeArgs& a) {
  const ProcessSettings process = apply_threads(a.threads);  // once, before any forward pass
  if (!a.auth_token_file.empty()) a.server.auth_token = read_token(a.auth_token_file);
  if (a.precision == "bf16")
    if (const std::string w = bf16_emulation_warning(process.cpu_bf16); !w.empty()) spdlog::warn("{}", w);
  PluginHost host;
  host.scan(PluginHost::default_search_path());
  if (a.tasks.size() > 1 && a.tasks.size() != a.models.size())
    throw Error("bertx serve: " + std::to_string(a.tasks.size()) + " --task for " + std::to_string(a.models.size()) +
                " --model (give one --task for all, or one per --model in order)");
  std::vector<serve::Served> served;
  std::string what;
  for (std::size_t i = 0; i < a.models.size(); ++i) {
    auto [name, path] = name_and_path(a.models[i]);
    const std::string task = a.tasks.empty() ? "auto" : a.tasks[a.tasks.size() == 1 ? 0 : i];
    for (const auto& s : served)
      if (s.model.name == name) throw Error("bertx serve: two models named '" + name + "' (use --model NAME=PATH)");
    serve::Served s;
    s.model = serve::load_served_model(host, {name, path, task, a.precision}, a.server.batching.max_batch_size);
    s.text = serve::text_endpoints(host, s.model, a.server.max_request_sequences);
    what += (what.empty() ? "" : ", ") + name + " (" + s.model.task + ", " + path + ")";
    served.push_back(std::move(s));
  }
  const auto& b = a.server.batching;
  serve::run_server(std::move(served), a.server, [&](const std::string& url) {
    spdlog::info(
        "serving {} on {} (KServe v2); dynamic batching: max_batch_size {}, max_queue_delay_us {}, "
        "max_queue_size {}; max_request_sequences {}; {} compute threads, precision {}{}",
        what, url, b.max_batch_size, b.max_queue_delay_us,
        b.max_queue_size ? std::to_string(b.max_queue_size) : "unbounded", a.server.max_request_sequences,
        process.intra_op_threads, a.precision, a.server.auth_token.empty() ? "" : ", bearer token required");
    spdlog::default_logger()->flush();
  });
  spdlog::info("stopped: every request in flight answered");
}

}  // namespace

std::string model_name_of(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  std::string name = p.filename().string();
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
    name = p.parent_path().filename().string();
  return name.empty() ? "model" : name;
}

void add_serve_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "serve model folders on the KServe v2 / Triton HTTP protocol with dynamic batching (docs/serving.md)");
  cmd->add_option("--model", a->models,
                  "[NAME=]PATH: an HF folder with its head, or a bertx checkpoint root/step folder (repeatable)")
      ->required();
  cmd->add_option("--task", a->tasks,
                  "squad | classification | auto (default: the head each folder holds); once for all models or once "
                  "per --model, in order")
      ->check(CLI::IsMember({"squad", "classification", "auto"}));
  cmd->add_option("--host", a->server.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a->server.port, "TCP port (0: any free port, named in the start line)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "compute threads (0: the CPUs this process may use)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-batch-size", a->server.batching.max_batch_size, "sequences per forward pass at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-queue-delay-us", a->server.batching.max_queue_delay_us,
                  "longest wait for a batch to fill, from its oldest request's arrival")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-queue-size", a->server.batching.max_queue_size,
                  "requests waiting per model at most, more get 503 (0: unbounded)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", a->server.body_limit, "request bodies larger than this get 413")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-request-sequences", a->server.max_request_sequences,
                  "text requests (SQuAD contexts, lists) making more sequences than this get 400")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--precision", a->precision, precision_flag_choices() + " (the CPU: fp32, bf16, int8)")
      ->capture_default_str();
  cmd->add_flag("--log-requests", a->server.log_requests, "one JSON line per request on stdout");
  cmd->add_option("--auth-token-file", a->auth_token_file,
                  "file whose first line is the bearer token required on all but /v2/health/*");
  cmd->callback([a, &exit_code] {
    run_serve(*a);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
