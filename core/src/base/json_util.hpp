// json_util.hpp - reading optional fields of JSON that bertx did not necessarily write itself (a hand-edited
// or torn file): nlohmann's j.value(key, default) throws type_error when the key holds another type, which
// would surface as nlohmann's message instead of the file's one-line error (found by fuzz_progress).
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace bertx {

// j[key] when j is an object whose `key` holds a string; otherwise `fallback`.
inline std::string string_or(const nlohmann::json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// v as a 64-bit signed integer when it is a JSON integer that fits, else nullopt. nlohmann's get<std::int64_t>()
// casts a float (undefined behaviour out of range, silently truncated in range: fuzz_progress's input "step":
// 2.0e22) and wraps an unsigned integer past 2^63 - 1 to a negative one.
inline std::optional<std::int64_t> int64_of(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

}  // namespace bertx
