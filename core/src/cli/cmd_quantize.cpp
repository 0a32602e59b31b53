// cmd_quantize.cpp - `bertx quantize --model PATH --out DIR`: writes an int8 model folder (io/quantized.hpp): the
// encoder's linear weights as int8 values + per-output-channel scales, every other tensor and file as it was.
// `bertx forward / bench infer / run --precision int8` load it directly (so do fp32 runs, on the dequantized
// weights); an fp32 folder under --precision int8 is quantized on load to the same values.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "base/fs_util.hpp"
#include "bertx/error.hpp"
#include "commands.hpp"
#include "host/model_folder.hpp"
#include "io/quantized.hpp"
#include "io/weights.hpp"

namespace fs = std::filesystem;

namespace bertx::cli {

namespace {

struct QuantizeArgs {
  std::string model;  // model folder (HF, bertx checkpoint step, sentence-transformers: its encoder)
  std::string out;    // the int8 folder to write
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(p.string() + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Bytes of every tensor, or of the linears only (their int8 values and scales once quantized).
double bytes_of(const TensorMap& m, bool linears_only) {
  double n = 0;
  for (const auto& [name, t] : m)
    if (!linears_only || quantized_linear_part(name)) n += static_cast<double>(t.numel() * t.element_size());
  return n;
}

void run_quantize(const QuantizeArgs& a) {
  const std::string enc = encoder_folder(a.model);
  const std::string config = config_file_in(a.model), weights = weights_file_in(a.model);
  if (!fs::is_regular_file(config)) throw Error(a.model + ": no config.json in this model folder");
  const TensorMap tensors = load_safetensors(weights);
  for (const auto& [name, t] : tensors)
    if (t.scalar_type() == at::kChar)
      throw Error(weights + ": tensor '" + name + "' is already int8 (a bertx quantize folder); nothing to do");
  const TensorMap q = quantize_linears(tensors, weights);
  const double fp32_linears = bytes_of(tensors, true), int8_linears = bytes_of(q, true);
  if (fp32_linears == 0) throw Error(weights + ": no encoder linear weight (encoder.layer.N.*.weight) to quantize");
  if (fs::exists(a.out) && !fs::is_directory(a.out)) throw Error("--out " + a.out + ": exists and is not a folder");
  if (fs::exists(a.out) && fs::equivalent(enc, a.out))
    throw Error("--out " + a.out + ": is the source folder; write the int8 folder elsewhere");
  fs::create_directories(a.out);
  // Tokenizer and other files travel as they are; the weights and config are written anew.
  for (const auto& e : fs::directory_iterator(enc)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name == "config.json" || fs::equivalent(e.path(), weights) ||
        e.path().extension() == ".bin")
      continue;
    write_file_atomic((fs::path(a.out) / name).string(), read_text(e.path()));  // vocab, tokenizer, head files
  }
  write_file_atomic((fs::path(a.out) / "config.json").string(), quantized_config_json(read_text(config), config));
  save_safetensors((fs::path(a.out) / "model.safetensors").string(), q,
                   {{"format", "pt"}, {"producer", "bertx quantize"}, {"quant_method", "bertx-int8"}});
  std::cout << fmt::format(
      "wrote {}: {} linear weights int8 ({:.3f} MB -> {:.3f} MB with their scales, {:.2f}x smaller), "
      "model.safetensors {:.3f} MB -> {:.3f} MB\n",
      a.out, std::count_if(q.begin(), q.end(), [](const auto& kv) { return kv.second.scalar_type() == at::kChar; }),
      fp32_linears / 1e6, int8_linears / 1e6, fp32_linears / int8_linears, bytes_of(tensors, false) / 1e6,
      bytes_of(q, false) / 1e6);
}

}  // namespace

void add_quantize_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "write an int8 model folder: encoder linears as int8 + per-channel scales (--precision int8 runs it)");
  cmd->add_option("--model", a->model, "model folder: config.json + model.safetensors (HF, bertx checkpoint step)")
      ->required();
  cmd->add_option("--out", a->out, "the int8 model folder to write")->required();
  cmd->callback([a, &exit_code] {
    run_quantize(*a);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
