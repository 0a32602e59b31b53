// onnx_graph.hpp - a thin writer over ONNX's own protobuf messages (Debian's libonnx-dev: onnx-ml.pb.h): nodes with
// named outputs, fp32 / int64 initializers, typed graph inputs and outputs. onnx_bert.cpp lays BERT out with it.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

namespace bertx::exporter {

// One node attribute: an int, a float or a list of ints (all BERT's nodes need).
struct Attr {
  std::string name;
  std::variant<std::int64_t, float, std::vector<std::int64_t>> value;
};

class GraphWriter {
 public:
  explicit GraphWriter(onnx::GraphProto* graph) : g_(graph) {}

  // Adds a node `op` named `name` whose one output is also called `name`; returns that output's name.
  std::string op(const std::string& op, const std::string& name, std::initializer_list<std::string> inputs,
                 std::initializer_list<Attr> attrs = {});
  // An fp32 initializer copied from `data` (row-major, `shape`); `transpose` stores a 2-D matrix transposed.
  std::string weight(const std::string& name, const std::vector<std::int64_t>& shape, const float* data,
                     bool transpose = false);
  std::string ints(const std::string& name, const std::vector<std::int64_t>& values);  // 1-D int64 constant
  std::string int_matrix(const std::string& name, const std::vector<std::int64_t>& shape,
                         const std::vector<std::int64_t>& values);      // int64 constant of that shape
  std::string int_scalar(const std::string& name, std::int64_t value);  // rank-0 int64 constant
  std::string float_scalar(const std::string& name, float value);       // rank-0 fp32 constant
  // Graph inputs / outputs; a dim is a number or, when `dim_names[i]` is not empty, that symbolic name.
  void input(const std::string& name, onnx::TensorProto_DataType type, const std::vector<std::string>& dim_names);
  void output(const std::string& name, onnx::TensorProto_DataType type, const std::vector<std::string>& dim_names,
              const std::vector<std::int64_t>& dims);

  std::int64_t parameters() const { return parameters_; }

 private:
  onnx::GraphProto* g_;
  std::int64_t parameters_ = 0;
};

}  // namespace bertx::exporter
