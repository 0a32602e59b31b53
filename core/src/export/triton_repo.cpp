// triton_repo.cpp - see triton_repo.hpp. The config is Triton's protobuf text format written by hand: a dozen
// fixed fields, no need for Triton's model_config.proto here.
#include "export/triton_repo.hpp"

#include <filesystem>
#include <sstream>

#include "base/fs_util.hpp"
#include "bertx/error.hpp"

namespace fs = std::filesystem;

namespace bertx::exporter {

namespace {

void tensors(std::ostringstream& o, const char* field, const std::vector<TensorSpec>& specs) {
  o << field << " [\n";
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    o << "  {\n    name: \"" << s.name << "\"\n    data_type: " << s.triton_type << "\n    dims: [ ";
    for (std::size_t d = 1; d < s.dims.size(); ++d) o << (d > 1 ? ", " : "") << s.dims[d];
    o << " ]\n  }" << (i + 1 < specs.size() ? "," : "") << "\n";
  }
  o << "]\n";
}

}  // namespace

std::string triton_config(const std::string& name, const std::vector<TensorSpec>& inputs,
                          const std::vector<TensorSpec>& outputs, const serve::BatchingOptions& batching,
                          const std::string& comment) {
  std::ostringstream o;
  o << "# " << comment << "\n";
  o << "name: \"" << name << "\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: " << batching.max_batch_size << "\n";
  tensors(o, "input", inputs);
  tensors(o, "output", outputs);
  o << "dynamic_batching {\n  max_queue_delay_microseconds: " << batching.max_queue_delay_us << "\n";
  if (batching.max_queue_size > 0)
    o << "  default_queue_policy {\n    max_queue_size: " << batching.max_queue_size << "\n  }\n";
  o << "}\n";
  return o.str();
}

OnnxExportResult write_triton_repository(const std::string& dir, const std::string& name,
                                         const serve::BatchingOptions& batching, const std::string& comment,
                                         const std::function<OnnxExportResult(const std::string&)>& write_model) {
  if (name.empty() ||
      name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.") !=
          std::string::npos ||
      name == "." || name == "..")
    throw Error("--name '" + name + "': a Triton model name is letters, digits, '_', '-' and '.' only");
  if (batching.max_batch_size < 1) throw Error("--max-batch-size must be at least 1");
  require_writable_dir(dir, "--out");
  const fs::path final_dir = fs::path(dir) / name, part = fs::path(dir) / (name + ".part");
  std::error_code ec;
  fs::remove_all(part, ec);
  fs::create_directories(part / "1", ec);
  if (ec) throw Error((part / "1").string() + ": cannot create (" + ec.message() + ")");
  OnnxExportResult r = write_model((part / "1" / "model.onnx").string());
  write_file_atomic((part / "config.pbtxt").string(), triton_config(name, r.inputs, r.outputs, batching, comment));
  fs::remove_all(final_dir, ec);
  fs::rename(part, final_dir, ec);
  if (ec) throw Error(final_dir.string() + ": cannot move the exported model into place (" + ec.message() + ")");
  fsync_dir(dir);
  return r;
}

}  // namespace bertx::exporter
