// bertx/json.hpp - reading integers from JSON that bertx did not write itself (config.json, SQuAD files, progress
// files): nlohmann's get<std::int64_t>() casts a float (undefined behaviour out of range, silently truncated in
// range) and wraps an unsigned integer past 2^63 - 1 to a negative one (found by fuzz_progress). Header-only; a
// plugin including it links nlohmann_json itself (the SDK's libraries do not export it).
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"

namespace bertx {

// v as a 64-bit signed integer when it is a JSON integer that fits, else nullopt.
inline std::optional<std::int64_t> int64_of(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

// int64_of(v), or bertx::Error "<where>: key '<key>' must be a 64-bit integer, got <v>".
inline std::int64_t int64_at(const nlohmann::json& v, const std::string& where, const std::string& key) {
  const std::optional<std::int64_t> i = int64_of(v);
  if (!i) throw Error(where + ": key '" + key + "' must be a 64-bit integer, got " + v.dump());
  return *i;
}

}  // namespace bertx
