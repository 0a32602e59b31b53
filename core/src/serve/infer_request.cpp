// infer_request.cpp - the v2 inference request (JSON, or JSON + binary tensors) parsed and checked; the v2 response
// and error bodies.
#include "serve/infer_request.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "bertx/json.hpp"

namespace bertx::serve {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& message) { throw RequestError(400, message); }

// A JSON value as the client sent it, cut to 64 characters for a one-line error.
std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 61) + "..." : s;
}

struct InputSpec {
  const char* name;
  std::vector<std::int64_t> Sequences::*field;
  std::int64_t ModelLimits::*upper;  // values in [0, limit); nullptr: 0 or 1
};
constexpr InputSpec kInputs[] = {{"input_ids", &Sequences::input_ids, &ModelLimits::vocab_size},
                                 {"attention_mask", &Sequences::attention_mask, nullptr},
                                 {"token_type_ids", &Sequences::token_type_ids, &ModelLimits::type_vocab_size}};

// One integer of an INT64/INT32 tensor (JSON integers only: no floats, booleans or strings).
std::int64_t integer(const json& v, const std::string& where, bool int32) {
  const std::optional<std::int64_t> x = int64_of(v);
  if (!x) bad(where + ": expected integers in \"data\", got " + brief(v));
  if (int32 && (*x < INT32_MIN || *x > INT32_MAX))
    bad(where + ": integer " + std::to_string(*x) + " out of INT32 range");
  return *x;
}

// "data" row-major: flat (B*S integers) or nested (B arrays of S integers).
std::vector<std::int64_t> read_data(const json& data, const std::string& where, std::int64_t B, std::int64_t S,
                                    bool int32) {
  if (!data.is_array()) bad(where + ": \"data\" must be an array");
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(B * S));
  const bool nested = !data.empty() && data.front().is_array();
  if (!nested) {
    if (static_cast<std::int64_t>(data.size()) != B * S)
      bad(where + ": \"data\" has " + std::to_string(data.size()) + " values, shape [" + std::to_string(B) + ", " +
          std::to_string(S) + "] needs " + std::to_string(B * S));
    for (const auto& v : data) out.push_back(integer(v, where, int32));
    return out;
  }
  if (static_cast<std::int64_t>(data.size()) != B)
    bad(where + ": \"data\" has " + std::to_string(data.size()) + " rows, shape needs " + std::to_string(B));
  for (const auto& row : data) {
    if (!row.is_array() || static_cast<std::int64_t>(row.size()) != S)
      bad(where + ": every row of \"data\" must be an array of " + std::to_string(S) + " integers");
    for (const auto& v : row) out.push_back(integer(v, where, int32));
  }
  return out;
}

static_assert(std::endian::native == std::endian::little, "the binary tensor extension's bytes are little-endian");

// The bytes of one input under the binary tensor data extension: B*S values of 4 (INT32) or 8 (INT64) bytes.
std::vector<std::int64_t> read_binary(std::string_view bytes, bool int32) {
  const std::size_t width = int32 ? 4 : 8, n = bytes.size() / width;
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (int32) {
      std::int32_t v;
      std::memcpy(&v, bytes.data() + i * width, width);
      out[i] = v;
    } else {
      std::memcpy(&out[i], bytes.data() + i * width, width);
    }
  }
  return out;
}

// "parameters" of an input or output: an object whose keys are all in `known`.
const json* parameters(const json& obj, std::initializer_list<const char*> known, const std::string& where) {
  auto it = obj.find("parameters");
  if (it == obj.end()) return nullptr;
  if (!it->is_object()) bad(where + ": \"parameters\" must be an object");
  for (const auto& item : it->items()) {
    const std::string& k = item.key();
    if (std::none_of(known.begin(), known.end(), [&k](const char* n) { return k == n; }))
      bad(where + ": parameter '" + k.substr(0, 64) + "' is not supported by bertx serve");
  }
  return &*it;
}

std::int64_t dim(const json& shape, std::size_t i, const std::string& where) {
  const json& d = shape[i];
  if (!d.is_number_integer() || d.get<std::int64_t>() < 1)
    bad(where + ": \"shape\" must be [B, S] with positive integers");
  return d.get<std::int64_t>();
}

const json& member(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) bad(where + ": no \"" + key + "\"");
  return *it;
}

}  // namespace

InferRequest parse_infer_request(std::string_view body, const ModelLimits& limits,
                                 std::optional<std::size_t> json_size) {
  if (json_size && *json_size > body.size())
    bad("Inference-Header-Content-Length " + std::to_string(*json_size) + " exceeds the body's " +
        std::to_string(body.size()) + " bytes");
  std::string_view binary = json_size ? body.substr(*json_size) : std::string_view{};
  if (json_size) body = body.substr(0, *json_size);
  const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad("malformed JSON in the request body");
  if (!j.is_object()) bad("the request body must be a JSON object with \"inputs\"");
  InferRequest r;
  if (auto it = j.find("id"); it != j.end()) {
    if (!it->is_string()) bad("\"id\" must be a string");
    r.id = it->get<std::string>();
  }
  const json& inputs = member(j, "inputs", "request");
  if (!inputs.is_array() || inputs.empty()) bad("\"inputs\" must be a non-empty array");
  Sequences& s = r.sequences;
  std::vector<bool> seen(std::size(kInputs), false);
  for (const auto& in : inputs) {
    if (!in.is_object()) bad("every entry of \"inputs\" must be an object");
    const json& name = member(in, "name", "input");
    if (!name.is_string()) bad("input \"name\" must be a string");
    const std::string n = name.get<std::string>();
    const auto spec =
        std::find_if(std::begin(kInputs), std::end(kInputs), [&](const InputSpec& k) { return n == k.name; });
    if (spec == std::end(kInputs))
      bad("unknown input '" + n.substr(0, 64) + "'; expected input_ids, attention_mask, token_type_ids");
    const auto k = static_cast<std::size_t>(spec - std::begin(kInputs));
    if (seen[k]) bad("input '" + n + "' given twice");
    seen[k] = true;
    const std::string where = "input '" + n + "'";
    const json& type = member(in, "datatype", where);
    if (!type.is_string() || (type != "INT64" && type != "INT32"))
      bad(where + ": datatype must be INT64 or INT32, got " + brief(type));
    const json& shape = member(in, "shape", where);
    if (!shape.is_array() || shape.size() != 2) bad(where + ": \"shape\" must be [B, S], got " + brief(shape));
    const std::int64_t B = dim(shape, 0, where), S = dim(shape, 1, where);
    if (B > limits.max_batch_size)
      bad(where + ": batch size " + std::to_string(B) + " exceeds the model's max batch size " +
          std::to_string(limits.max_batch_size));
    if (S > limits.max_positions)
      bad(where + ": sequence length " + std::to_string(S) + " exceeds the model's " +
          std::to_string(limits.max_positions) + " positions");
    if (s.rows == 0) {
      s.rows = B, s.cols = S;
    } else if (s.rows != B || s.cols != S) {
      bad(where + ": shape [" + std::to_string(B) + ", " + std::to_string(S) + "] differs from the other inputs' [" +
          std::to_string(s.rows) + ", " + std::to_string(s.cols) + "]");
    }
    const bool int32 = type == "INT32";
    std::vector<std::int64_t> values;
    const json* params = parameters(in, {"binary_data_size"}, where);
    if (params && params->contains("binary_data_size")) {
      if (!json_size) bad(where + ": binary_data_size without an Inference-Header-Content-Length header");
      if (in.contains("data")) bad(where + ": both \"data\" and binary_data_size");
      const std::optional<std::int64_t> size = int64_of((*params)["binary_data_size"]);
      const std::int64_t expected = B * S * (int32 ? 4 : 8);
      if (!size || *size != expected)
        bad(where + ": binary_data_size " + brief((*params)["binary_data_size"]) + ", shape [" + std::to_string(B) +
            ", " + std::to_string(S) + "] of " + (int32 ? "INT32" : "INT64") + " needs " + std::to_string(expected));
      if (static_cast<std::size_t>(expected) > binary.size())
        bad(where + ": binary_data_size " + std::to_string(expected) + " runs past the " +
            std::to_string(binary.size()) + " bytes left after the JSON header");
      values = read_binary(binary.substr(0, static_cast<std::size_t>(expected)), int32);
      binary.remove_prefix(static_cast<std::size_t>(expected));
    } else {
      values = read_data(member(in, "data", where), where, B, S, int32);
    }
    const std::int64_t upper = spec->upper ? limits.*(spec->upper) : 2;
    for (const std::int64_t v : values)
      if (v < 0 || v >= upper)
        bad(where + ": value " + std::to_string(v) + " outside [0, " + std::to_string(upper) + ")" +
            (spec->upper == &ModelLimits::vocab_size ? " (the vocabulary)" : ""));
    s.*(spec->field) = std::move(values);
  }
  if (!seen[0]) bad("no input 'input_ids' (INT64 [B, S])");
  if (!binary.empty())
    bad(std::to_string(binary.size()) + " bytes after the JSON header that no input's binary_data_size claims");
  const auto n = static_cast<std::size_t>(s.rows * s.cols);
  if (s.attention_mask.empty()) s.attention_mask.assign(n, 1);
  if (s.token_type_ids.empty()) s.token_type_ids.assign(n, 0);
  if (auto it = j.find("outputs"); it != j.end()) {
    if (!it->is_array()) bad("\"outputs\" must be an array");
    for (const auto& o : *it) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        bad("every entry of \"outputs\" must be an object with a \"name\"");
      const std::string name = o["name"].get<std::string>();
      if (std::find(limits.outputs.begin(), limits.outputs.end(), name) == limits.outputs.end()) {
        std::string known;
        for (const auto& k : limits.outputs) known += (known.empty() ? "" : ", ") + k;
        bad("unknown output '" + name.substr(0, 64) + "'; the model has " + known);
      }
      RequestedOutput out{name, false};
      if (const json* params = parameters(o, {"binary_data"}, "output '" + name + "'");
          params && params->contains("binary_data")) {
        if (!(*params)["binary_data"].is_boolean()) bad("output '" + name + "': binary_data must be true or false");
        out.binary = (*params)["binary_data"].get<bool>();
      }
      r.outputs.push_back(std::move(out));
    }
  }
  if (auto it = j.find("parameters"); it != j.end()) {  // request parameters: others (priority, custom) ignored
    if (!it->is_object()) bad("\"parameters\" must be an object");
    if (auto b = it->find("binary_data_output"); b != it->end()) {
      if (!b->is_boolean()) bad("binary_data_output must be true or false");
      r.binary_output = b->get<bool>();
    }
  }
  return r;
}

InferResponse infer_response(const std::string& model, const std::string& id, const std::vector<OutputTensor>& outputs,
                             const std::vector<bool>& binary) {
  json j{{"model_name", model}, {"model_version", "1"}, {"outputs", json::array()}};
  if (!id.empty()) j["id"] = id;
  std::string bytes;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const OutputTensor& o = outputs[i];
    json t{{"name", o.name}, {"datatype", "FP32"}, {"shape", json::array({o.rows, o.cols})}};
    if (i < binary.size() && binary[i]) {
      const std::size_t n = o.data.size() * sizeof(float);
      t["parameters"] = {{"binary_data_size", n}};
      bytes.append(reinterpret_cast<const char*>(o.data.data()), n);
    } else {
      t["data"] = o.data;
    }
    j["outputs"].push_back(std::move(t));
  }
  InferResponse r{j.dump(), std::nullopt};
  if (std::any_of(binary.begin(), binary.end(), [](bool b) { return b; })) {
    r.json_size = r.body.size();
    r.body += bytes;
  }
  return r;
}

std::string error_json(std::string_view message) {
  return json{{"error", std::string(message)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace bertx::serve
