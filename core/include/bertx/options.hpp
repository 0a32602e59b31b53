// bertx/options.hpp - typed options for plugins and host sections, declared once as a schema.
//
// A plugin declares the keys its TOML table accepts (type, default, one-line doc); the host checks the
// experiment file against that schema (unknown key, wrong type, missing required key are errors that
// name file:line:column) and hands the plugin an `Options` with every key present (defaults filled in).
// The field binder at the end (Fields<S>) derives that schema, the reading of `Options` into a typed
// struct S and the values of an S from one list of fields, so that each option is declared once: its
// default and comment in S's member initialiser, its key and doc in the list.
// Header-only so that plugins need no bertx library to link against.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "bertx/error.hpp"

namespace bertx {

enum class OptionType { Bool, Int, Float, String, StringList, FloatList };

inline const char* option_type_name(OptionType t) {
  switch (t) {
    case OptionType::Bool:
      return "boolean";
    case OptionType::Int:
      return "integer";
    case OptionType::Float:
      return "float";
    case OptionType::String:
      return "string";
    case OptionType::StringList:
      return "array of strings";
    case OptionType::FloatList:
      return "array of floats";
  }
  return "?";
}

// monostate = "no default": the key is required.
using OptionValue = std::variant<std::monostate, bool, std::int64_t, double, std::string, std::vector<std::string>,
                                 std::vector<double>>;

struct OptionSpec {
  std::string key;                   // TOML key inside the plugin's table
  OptionType type;                   // expected TOML type (an integer is accepted where a float is expected)
  OptionValue default_value;         // std::monostate => required
  std::string doc;                   // one line, shown by `bertx plugins --verbose` and in errors
  std::vector<std::string> choices;  // for String: the allowed values (empty = any)
};

using Schema = std::vector<OptionSpec>;

// Shorthands for schema declarations: opt_int("seed", 42, "random seed").
inline OptionSpec opt_bool(std::string k, bool d, std::string doc) {
  return {std::move(k), OptionType::Bool, d, std::move(doc), {}};
}
inline OptionSpec opt_int(std::string k, std::int64_t d, std::string doc) {
  return {std::move(k), OptionType::Int, d, std::move(doc), {}};
}
inline OptionSpec opt_float(std::string k, double d, std::string doc) {
  return {std::move(k), OptionType::Float, d, std::move(doc), {}};
}
inline OptionSpec opt_string(std::string k, std::string d, std::string doc, std::vector<std::string> choices = {}) {
  return {std::move(k), OptionType::String, std::move(d), std::move(doc), std::move(choices)};
}
inline OptionSpec opt_floats(std::string k, std::vector<double> d, std::string doc) {
  return {std::move(k), OptionType::FloatList, std::move(d), std::move(doc), {}};
}
inline OptionSpec opt_strings(std::string k, std::vector<std::string> d, std::string doc) {
  return {std::move(k), OptionType::StringList, std::move(d), std::move(doc), {}};
}
inline OptionSpec opt_required(std::string k, OptionType t, std::string doc) {
  return {std::move(k), t, std::monostate{}, std::move(doc), {}};
}

// The allowed values of a String option as errors list them ("a, b"; an empty choice shows as "").
inline std::string choices_text(const std::vector<std::string>& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "" : ", ") + (c.empty() ? std::string("\"\"") : c);
  return out;
}

// Throws "<at>: 'x' is not one of: a, b" unless `value` is among `choices` (empty: any value).
inline void check_choice(const std::vector<std::string>& choices, const std::string& value, const std::string& at) {
  for (const auto& c : choices)
    if (c == value) return;
  if (!choices.empty()) throw Error(at + ": '" + value + "' is not one of: " + choices_text(choices));
}

// Validated values of one table. `where` names the table for error messages ("[optimizer] (adamw)").
class Options {
 public:
  Options() = default;
  Options(std::string where, std::map<std::string, OptionValue> values)
      : where_(std::move(where)), values_(std::move(values)) {}

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  bool get_bool(const std::string& key) const { return get<bool>(key, OptionType::Bool); }
  std::int64_t get_int(const std::string& key) const { return get<std::int64_t>(key, OptionType::Int); }
  double get_float(const std::string& key) const { return get<double>(key, OptionType::Float); }
  const std::string& get_string(const std::string& key) const { return get<std::string>(key, OptionType::String); }
  const std::vector<std::string>& get_strings(const std::string& key) const {
    return get<std::vector<std::string>>(key, OptionType::StringList);
  }
  const std::vector<double>& get_floats(const std::string& key) const {
    return get<std::vector<double>>(key, OptionType::FloatList);
  }
  const std::map<std::string, OptionValue>& values() const { return values_; }
  const std::string& where() const { return where_; }

 private:
  template <class T>
  const T& get(const std::string& key, OptionType t) const {
    auto it = values_.find(key);
    if (it == values_.end())
      throw Error(where_ + ": option '" + key + "' is not declared in the schema (plugin bug: declare it)");
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    throw Error(where_ + ": option '" + key + "' read as " + option_type_name(t) +
                " but declared otherwise (plugin bug)");
  }
  std::string where_;
  std::map<std::string, OptionValue> values_;
};

// ---------------------------------------------------------------------------------------------------------
// Enum options. An enum E becomes a string option whose choices are its names, from one table declared
// next to E and found by argument-dependent lookup:
//   enum class Precision { Fp32, Tf32, Amp, AmpBf16 };
//   inline const EnumNames<Precision>& option_names(Precision) {
//     static const EnumNames<Precision> n{{Precision::Fp32, "fp32"}, ...};
//     return n;
//   }
// The table's order is the order of the choices in the schema (and in error messages).

template <class E>
using EnumNames = std::vector<std::pair<E, std::string>>;

template <class E>
std::vector<std::string> enum_choices() {
  std::vector<std::string> out;
  for (const auto& entry : option_names(E{})) out.push_back(entry.second);
  return out;
}

// The option name of v ("amp-bf16"); for log lines and the values of a struct.
template <class E>
const std::string& enum_name(E v) {
  for (const auto& entry : option_names(E{}))
    if (entry.first == v) return entry.second;
  throw Error("enum value " + std::to_string(static_cast<long long>(v)) + " has no option name (bertx bug)");
}

// The value named `name`; an error "<where> <key>: 'x' is not one of: a, b" (the message the schema
// check gives) otherwise.
template <class E>
E enum_from_name(const std::string& name, const std::string& where, const std::string& key) {
  for (const auto& entry : option_names(E{}))
    if (entry.second == name) return entry.first;
  check_choice(enum_choices<E>(), name, where + " " + key);  // throws: the name is none of them
  throw Error(where + " " + key + ": enum without option names (bertx bug)");
}

// ---------------------------------------------------------------------------------------------------------
// Field binder. One list of fields of a struct S gives its schema, its reading from validated Options and
// the option values of an S (the TOML values a resolved config stores):
//   static const Fields<TrainOptions>& fields() {
//     static const Fields<TrainOptions> f{
//         field("max_steps", &TrainOptions::max_steps, "optimizer steps of this phase"),
//         field("precision", &TrainOptions::precision, "numeric precision"),       // an enum
//         field("device", &RunOptions::device, "where to train", {"auto", "cpu", "cuda"}),  // string choices
//         field_required("name", &RunOptions::name, "experiment name")};
//     return f;
//   }
//   Schema s = fields().schema();  TrainOptions t = fields().read(options);  auto v = fields().values(t);
// Defaults come from a default-constructed S; the option type from the member's C++ type: bool, any other
// integer (Int), double (Float), std::string, std::vector<std::string>, std::vector<double>, or an enum
// with option_names (a String with those choices). Range checks stay as code after read().

namespace options_detail {

template <class T, class = void>
struct Codec;  // OptionType of T, T -> OptionValue, Options -> T

template <>
struct Codec<bool> {
  static constexpr OptionType type = OptionType::Bool;
  static OptionValue to(bool v) { return v; }
  static bool from(const Options& o, const std::string& k) { return o.get_bool(k); }
  static std::vector<std::string> choices() { return {}; }
};
template <class T>
struct Codec<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static constexpr OptionType type = OptionType::Int;
  static OptionValue to(T v) { return static_cast<std::int64_t>(v); }
  static T from(const Options& o, const std::string& k) { return static_cast<T>(o.get_int(k)); }
  static std::vector<std::string> choices() { return {}; }
};
template <>
struct Codec<double> {
  static constexpr OptionType type = OptionType::Float;
  static OptionValue to(double v) { return v; }
  static double from(const Options& o, const std::string& k) { return o.get_float(k); }
  static std::vector<std::string> choices() { return {}; }
};
template <>
struct Codec<std::string> {
  static constexpr OptionType type = OptionType::String;
  static OptionValue to(const std::string& v) { return v; }
  static std::string from(const Options& o, const std::string& k) { return o.get_string(k); }
  static std::vector<std::string> choices() { return {}; }
};
template <>
struct Codec<std::vector<std::string>> {
  static constexpr OptionType type = OptionType::StringList;
  static OptionValue to(const std::vector<std::string>& v) { return v; }
  static std::vector<std::string> from(const Options& o, const std::string& k) { return o.get_strings(k); }
  static std::vector<std::string> choices() { return {}; }
};
template <>
struct Codec<std::vector<double>> {
  static constexpr OptionType type = OptionType::FloatList;
  static OptionValue to(const std::vector<double>& v) { return v; }
  static std::vector<double> from(const Options& o, const std::string& k) { return o.get_floats(k); }
  static std::vector<std::string> choices() { return {}; }
};
template <class E>
struct Codec<E, std::enable_if_t<std::is_enum_v<E>>> {
  static constexpr OptionType type = OptionType::String;
  static OptionValue to(E v) { return enum_name(v); }
  static E from(const Options& o, const std::string& k) { return enum_from_name<E>(o.get_string(k), o.where(), k); }
  static std::vector<std::string> choices() { return enum_choices<E>(); }
};

}  // namespace options_detail

// One option of S: its spec (default filled in by Fields) and how to read it into / take it from an S.
template <class S>
struct Field {
  OptionSpec spec;
  bool required = false;                         // no default: the key must be set
  std::function<void(const Options&, S&)> read;  // Options -> the member(s)
  std::function<OptionValue(const S&)> value;    // the member(s) -> the option's value
};

// A member of S. `choices` (std::string members only) lists the allowed values; an enum has its names.
template <class S, class T>
Field<S> field(std::string key, T S::*member, std::string doc, std::vector<std::string> choices = {}) {
  using C = options_detail::Codec<T>;
  if (choices.empty()) choices = C::choices();
  const std::string k = key;
  return Field<S>{OptionSpec{std::move(key), C::type, std::monostate{}, std::move(doc), std::move(choices)}, false,
                  [member, k](const Options& o, S& s) { s.*member = C::from(o, k); },
                  [member](const S& s) { return C::to(s.*member); }};
}

// A member of a member of S (e.g. &SquadDataConfig::features, &FeatureOptions::max_seq_length).
template <class S, class M, class T>
Field<S> field(std::string key, M S::*outer, T M::*inner, std::string doc) {
  using C = options_detail::Codec<T>;
  const std::string k = key;
  return Field<S>{OptionSpec{std::move(key), C::type, std::monostate{}, std::move(doc), C::choices()}, false,
                  [outer, inner, k](const Options& o, S& s) { (s.*outer).*inner = C::from(o, k); },
                  [outer, inner](const S& s) { return C::to((s.*outer).*inner); }};
}

// A member without a default: the experiment must set the key.
template <class S, class T>
Field<S> field_required(std::string key, T S::*member, std::string doc, std::vector<std::string> choices = {}) {
  Field<S> f = field(std::move(key), member, std::move(doc), std::move(choices));
  f.required = true;
  return f;
}

// An option that is not one member (e.g. "betas" = [beta1, beta2]): its type and both directions by hand.
template <class S>
Field<S> field_custom(std::string key, OptionType type, std::string doc, std::function<void(const Options&, S&)> read,
                      std::function<OptionValue(const S&)> value) {
  return Field<S>{OptionSpec{std::move(key), type, std::monostate{}, std::move(doc), {}}, false, std::move(read),
                  std::move(value)};
}

template <class S>
class Fields {
 public:
  Fields(std::initializer_list<Field<S>> fields) : fields_(fields) {
    const S defaults{};
    for (auto& f : fields_)
      if (!f.required) f.spec.default_value = f.value(defaults);
  }

  // The schema, in the list's order (the order `bertx plugins --verbose` and "known keys" show).
  Schema schema() const {
    Schema out;
    for (const auto& f : fields_) out.push_back(f.spec);
    return out;
  }

  // A default-constructed S with every field read from `o` (validated: every key present).
  S read(const Options& o) const {
    S s{};
    for (const auto& f : fields_) f.read(o, s);
    return s;
  }

  // The option values of `s`, by key: read(Options(where, values(s))) gives back s's fields.
  std::map<std::string, OptionValue> values(const S& s) const {
    std::map<std::string, OptionValue> out;
    for (const auto& f : fields_) out[f.spec.key] = f.value(s);
    return out;
  }

  const std::vector<Field<S>>& fields() const { return fields_; }

 private:
  std::vector<Field<S>> fields_;
};

}  // namespace bertx
