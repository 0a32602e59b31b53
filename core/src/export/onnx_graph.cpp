// onnx_graph.cpp - see onnx_graph.hpp. Initializers carry raw little-endian bytes (raw_data), as every exporter
// writes them; a transposed matrix is copied column by column.
#include "export/onnx_graph.hpp"

#include <cstring>

namespace bertx::exporter {

namespace {

void set_attr(onnx::NodeProto* node, const Attr& a) {
  onnx::AttributeProto* p = node->add_attribute();
  p->set_name(a.name);
  if (const auto* i = std::get_if<std::int64_t>(&a.value)) {
    p->set_type(onnx::AttributeProto_AttributeType_INT);
    p->set_i(*i);
  } else if (const auto* f = std::get_if<float>(&a.value)) {
    p->set_type(onnx::AttributeProto_AttributeType_FLOAT);
    p->set_f(*f);
  } else {
    p->set_type(onnx::AttributeProto_AttributeType_INTS);
    for (std::int64_t v : std::get<std::vector<std::int64_t>>(a.value)) p->add_ints(v);
  }
}

template <class T>
onnx::TensorProto* constant(onnx::GraphProto* g, const std::string& name, onnx::TensorProto_DataType type,
                            const std::vector<std::int64_t>& shape, const T* data, std::size_t n) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (std::int64_t d : shape) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(data), n * sizeof(T)));
  return t;
}

void set_type(onnx::ValueInfoProto* v, const std::string& name, onnx::TensorProto_DataType type,
              const std::vector<std::string>& dim_names, const std::vector<std::int64_t>& dims) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  for (std::size_t i = 0; i < dim_names.size(); ++i) {
    onnx::TensorShapeProto_Dimension* d = shape->add_dim();
    if (!dim_names[i].empty())
      d->set_dim_param(dim_names[i]);
    else
      d->set_dim_value(dims.at(i));
  }
}

}  // namespace

std::string GraphWriter::op(const std::string& op, const std::string& name, std::initializer_list<std::string> inputs,
                            std::initializer_list<Attr> attrs) {
  onnx::NodeProto* n = g_->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& in : inputs) n->add_input(in);
  n->add_output(name);
  for (const Attr& a : attrs) set_attr(n, a);
  return name;
}

std::string GraphWriter::weight(const std::string& name, const std::vector<std::int64_t>& shape, const float* data,
                                bool transpose) {
  std::size_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  parameters_ += static_cast<std::int64_t>(n);
  if (!transpose) {
    constant(g_, name, onnx::TensorProto_DataType_FLOAT, shape, data, n);
    return name;
  }
  const std::int64_t rows = shape.at(0), cols = shape.at(1);  // (out, in) -> stored (in, out)
  std::vector<float> t(n);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) t[static_cast<std::size_t>(c * rows + r)] = data[r * cols + c];
  constant(g_, name, onnx::TensorProto_DataType_FLOAT, {cols, rows}, t.data(), n);
  return name;
}

std::string GraphWriter::ints(const std::string& name, const std::vector<std::int64_t>& values) {
  constant(g_, name, onnx::TensorProto_DataType_INT64, {static_cast<std::int64_t>(values.size())}, values.data(),
           values.size());
  return name;
}

std::string GraphWriter::int_matrix(const std::string& name, const std::vector<std::int64_t>& shape,
                                    const std::vector<std::int64_t>& values) {
  constant(g_, name, onnx::TensorProto_DataType_INT64, shape, values.data(), values.size());
  return name;
}

std::string GraphWriter::int_scalar(const std::string& name, std::int64_t value) {
  constant(g_, name, onnx::TensorProto_DataType_INT64, {}, &value, 1);
  return name;
}

std::string GraphWriter::float_scalar(const std::string& name, float value) {
  constant(g_, name, onnx::TensorProto_DataType_FLOAT, {}, &value, 1);
  return name;
}

void GraphWriter::input(const std::string& name, onnx::TensorProto_DataType type,
                        const std::vector<std::string>& dim_names) {
  set_type(g_->add_input(), name, type, dim_names, {});
}

void GraphWriter::output(const std::string& name, onnx::TensorProto_DataType type,
                         const std::vector<std::string>& dim_names, const std::vector<std::int64_t>& dims) {
  set_type(g_->add_output(), name, type, dim_names, dims);
}

}  // namespace bertx::exporter
