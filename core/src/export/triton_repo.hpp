// triton_repo.hpp - a Triton Inference Server model repository for one exported model: NAME/config.pbtxt (the
// onnxruntime back-end, dynamic batching with the knobs `bertx serve` shares with Triton) and NAME/1/model.onnx.
// `tritonserver --model-repository DIR` serves it; its clients speak the same v2 protocol as `bertx serve`.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "export/onnx_bert.hpp"
#include "serve/batcher.hpp"

namespace bertx::exporter {

// config.pbtxt's text. Dims are written without the batch axis (Triton adds it when max_batch_size > 0).
std::string triton_config(const std::string& name, const std::vector<TensorSpec>& inputs,
                          const std::vector<TensorSpec>& outputs, const serve::BatchingOptions& batching,
                          const std::string& comment);

// Writes DIR/NAME whole: `write_model(path)` writes version 1's model.onnx and returns its inputs and outputs;
// the folder is made as DIR/NAME.part and renamed over DIR/NAME when complete. Throws bertx::Error naming the path
// (and a NAME Triton would not take: letters, digits, '_', '-', '.' only).
OnnxExportResult write_triton_repository(const std::string& dir, const std::string& name,
                                         const serve::BatchingOptions& batching, const std::string& comment,
                                         const std::function<OnnxExportResult(const std::string&)>& write_model);

}  // namespace bertx::exporter
