// json_util.hpp - reading optional fields of JSON that bertx did not necessarily write itself (a hand-edited
// or torn file): nlohmann's j.value(key, default) throws type_error when the key holds another type, which
// would surface as nlohmann's message instead of the file's one-line error (found by fuzz_progress). Integers:
// int64_of, in the public bertx/json.hpp (plugins read config.json and SQuAD files with it).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "bertx/json.hpp"  // int64_of

namespace bertx {

// j[key] when j is an object whose `key` holds a string; otherwise `fallback`.
inline std::string string_or(const nlohmann::json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace bertx
