// bertx/options.hpp - typed options for plugins and host sections, declared once as a schema.
//
// A plugin declares the keys its TOML table accepts (type, default, one-line doc); the host checks the
// experiment file against that schema (unknown key, wrong type, missing required key are errors that
// name file:line:column) and hands the plugin an `Options` with every key present (defaults filled in).
// Header-only so that plugins need no bertx library to link against.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "bertx/error.hpp"

namespace bertx {

enum class OptionType { Bool, Int, Float, String, StringList, FloatList };

inline const char* option_type_name(OptionType t) {
  switch (t) {
    case OptionType::Bool: return "boolean";
    case OptionType::Int: return "integer";
    case OptionType::Float: return "float";
    case OptionType::String: return "string";
    case OptionType::StringList: return "array of strings";
    case OptionType::FloatList: return "array of floats";
  }
  return "?";
}

// monostate = "no default": the key is required.
using OptionValue =
    std::variant<std::monostate, bool, std::int64_t, double, std::string, std::vector<std::string>, std::vector<double>>;

struct OptionSpec {
  std::string key;                   // TOML key inside the plugin's table
  OptionType type;                   // expected TOML type (an integer is accepted where a float is expected)
  OptionValue default_value;         // std::monostate => required
  std::string doc;                   // one line, shown by `bertx plugins --verbose` and in errors
  std::vector<std::string> choices;  // for String: the allowed values (empty = any)
};

using Schema = std::vector<OptionSpec>;

// Shorthands for schema declarations: opt_int("seed", 42, "random seed").
inline OptionSpec opt_bool(std::string k, bool d, std::string doc) { return {std::move(k), OptionType::Bool, d, std::move(doc), {}}; }
inline OptionSpec opt_int(std::string k, std::int64_t d, std::string doc) { return {std::move(k), OptionType::Int, d, std::move(doc), {}}; }
inline OptionSpec opt_float(std::string k, double d, std::string doc) { return {std::move(k), OptionType::Float, d, std::move(doc), {}}; }
inline OptionSpec opt_string(std::string k, std::string d, std::string doc, std::vector<std::string> choices = {}) {
  return {std::move(k), OptionType::String, std::move(d), std::move(doc), std::move(choices)};
}
inline OptionSpec opt_floats(std::string k, std::vector<double> d, std::string doc) { return {std::move(k), OptionType::FloatList, std::move(d), std::move(doc), {}}; }
inline OptionSpec opt_strings(std::string k, std::vector<std::string> d, std::string doc) { return {std::move(k), OptionType::StringList, std::move(d), std::move(doc), {}}; }
inline OptionSpec opt_required(std::string k, OptionType t, std::string doc) { return {std::move(k), t, std::monostate{}, std::move(doc), {}}; }

// Validated values of one table. `where` names the table for error messages ("[optimizer] (adamw)").
class Options {
 public:
  Options() = default;
  Options(std::string where, std::map<std::string, OptionValue> values) : where_(std::move(where)), values_(std::move(values)) {}

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  bool get_bool(const std::string& key) const { return get<bool>(key, OptionType::Bool); }
  std::int64_t get_int(const std::string& key) const { return get<std::int64_t>(key, OptionType::Int); }
  double get_float(const std::string& key) const { return get<double>(key, OptionType::Float); }
  const std::string& get_string(const std::string& key) const { return get<std::string>(key, OptionType::String); }
  const std::vector<std::string>& get_strings(const std::string& key) const {
    return get<std::vector<std::string>>(key, OptionType::StringList);
  }
  const std::vector<double>& get_floats(const std::string& key) const { return get<std::vector<double>>(key, OptionType::FloatList); }
  const std::map<std::string, OptionValue>& values() const { return values_; }
  const std::string& where() const { return where_; }

 private:
  template <class T>
  const T& get(const std::string& key, OptionType t) const {
    auto it = values_.find(key);
    if (it == values_.end())
      throw Error(where_ + ": option '" + key + "' is not declared in the schema (plugin bug: declare it)");
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    throw Error(where_ + ": option '" + key + "' read as " + option_type_name(t) + " but declared otherwise (plugin bug)");
  }
  std::string where_;
  std::map<std::string, OptionValue> values_;
};

}  // namespace bertx
