// config.cpp - loads experiment TOML (extends chains, --set overrides) and validates it against schemas.
// toml++ drops source positions when nodes are copied, so positions are kept in a side map keyed by the
// dotted path of each value ("optimizer.lr" -> file:line:column) and merged alongside the tables.
#include "host/config.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "bertx/error.hpp"
#include "host/plugin_host.hpp"

namespace fs = std::filesystem;

namespace bertx {

// ---------------------------------------------------------------------------------------------------------
// [run]

const Fields<RunOptions>& run_fields() {
  using R = RunOptions;
  static const Fields<RunOptions> f{
      field_required("name", &R::name, "experiment name; groups runs in the store"),
      field("seed", &R::seed, "global random seed (data order, init, dropout)"),
      field("output_dir", &R::output_dir, "checkpoints, reports and predictions go below this folder"),
      field("store", &R::store, "SQLite experiment store that records the run"),
      field("threads", &R::threads, "intra-op CPU threads; 0 = one per core"),
      field("device", &R::device, "where to train", {"auto", "cpu", "cuda"}),
      field("description", &R::description, "free text kept with the run"),
      field("dist_backend", &R::dist_backend, "data-parallel backend under a launcher", {"auto", "gloo", "nccl"}),
      field("dist_bucket_mb", &R::dist_bucket_mb, "gradient all-reduce bucket size (MiB)"),
      field("dist_timeout_s", &R::dist_timeout_s, "seconds a rendezvous or collective may wait before the run fails"),
      field("tensorboard", &R::tensorboard, "also write the logged scalars as TensorBoard events in output_dir"),
  };
  return f;
}

Schema run_schema() { return run_fields().schema(); }

RunOptions run_options_from(const Options& o) {
  const RunOptions r = run_fields().read(o);
  if (!(r.dist_bucket_mb > 0))
    throw Error(o.where() + " dist_bucket_mb: must be > 0 (MiB), got " + std::to_string(r.dist_bucket_mb));
  if (r.dist_timeout_s < 1)
    throw Error(o.where() + " dist_timeout_s: must be >= 1 (seconds), got " + std::to_string(r.dist_timeout_s));
  return r;
}

const std::vector<std::pair<std::string, Kind>>& component_sections() {
  static const std::vector<std::pair<std::string, Kind>> sections{
      {"model", Kind::Model}, {"optimizer", Kind::Optimizer}, {"task", Kind::Task}, {"data", Kind::Dataset}};
  return sections;
}

std::string Source::str() const {
  if (!override_text.empty()) return "--set " + override_text;
  if (line > 0) return file + ":" + std::to_string(line) + ":" + std::to_string(column);
  return file;
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = 3;
  for (const auto& c : candidates) {
    std::vector<std::size_t> prev(c.size() + 1), cur(c.size() + 1);
    for (std::size_t j = 0; j <= c.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= word.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= c.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (word[i - 1] == c[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    if (prev[c.size()] < best_d) best_d = prev[c.size()], best = c;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------------------
// Loading and merging

using SourceMap = std::map<std::string, Source>;  // dotted path -> where it was set

struct Experiment::Impl {
  std::string path;
  std::vector<std::string> files;
  std::vector<std::string> overrides;
  toml::table table;
  SourceMap sources;
};

static std::string join_path(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

static void record_sources(const toml::table& t, const std::string& file, const std::string& prefix, SourceMap& out) {
  for (auto&& [k, v] : t) {
    const std::string p = join_path(prefix, k.str());
    const auto& b = v.source().begin;
    // A key's own position is more precise than its value's for tables (header line).
    const auto& kb = k.source().begin;
    out[p] = Source{
        file, static_cast<int>(kb.line ? kb.line : b.line), static_cast<int>(kb.line ? kb.column : b.column), {}};
    if (const auto* sub = v.as_table()) record_sources(*sub, file, p, out);
  }
}

static void erase_prefix(SourceMap& m, const std::string& p) {
  for (auto it = m.lower_bound(p + "."); it != m.end() && it->first.rfind(p + ".", 0) == 0;) it = m.erase(it);
}

// dst <- src (src wins). Tables merge key by key; any other value replaces.
static void merge_into(toml::table& dst, SourceMap& dst_src, const toml::table& src, const SourceMap& src_src,
                       const std::string& prefix) {
  for (auto&& [k, v] : src) {
    const std::string p = join_path(prefix, k.str());
    toml::node* existing = dst.get(k.str());
    if (existing && existing->is_table() && v.is_table()) {
      merge_into(*existing->as_table(), dst_src, *v.as_table(), src_src, p);
    } else {
      const std::string_view key = k.str();  // clang < 16 cannot capture a structured binding
      v.visit([&](const auto& n) { dst.insert_or_assign(key, n); });
      erase_prefix(dst_src, p);
      for (auto it = src_src.lower_bound(p); it != src_src.end(); ++it) {
        if (it->first != p && it->first.rfind(p + ".", 0) != 0) break;
        dst_src[it->first] = it->second;
      }
    }
    if (auto it = src_src.find(p); it != src_src.end()) dst_src[p] = it->second;
  }
}

static void load_into(const std::string& path, std::vector<std::string>& stack, std::vector<std::string>& files,
                      toml::table& out, SourceMap& out_src) {
  std::error_code ec;
  const std::string canon = fs::weakly_canonical(path, ec).string();
  if (std::find(stack.begin(), stack.end(), canon) != stack.end()) {
    std::string chain;
    for (const auto& s : stack) chain += s + " -> ";
    throw Error(path + ": extends cycle: " + chain + canon);
  }
  if (!fs::is_regular_file(path, ec)) throw Error(path + ": experiment file not found");
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                ": TOML syntax error: " + std::string(e.description()));
  }
  SourceMap src;
  record_sources(t, path, "", src);
  files.push_back(path);
  stack.push_back(canon);

  toml::table base;
  SourceMap base_src;
  if (toml::node* ext = t.get("extends")) {
    std::vector<std::string> parents;
    if (auto s = ext->value<std::string>()) {
      parents.push_back(*s);
    } else if (auto* arr = ext->as_array()) {
      for (auto&& e : *arr) {
        auto s2 = e.value<std::string>();
        if (!s2)
          throw Error(src["extends"].str() + ": 'extends' must be a string or an array of strings (relative paths)");
        parents.push_back(*s2);
      }
    } else {
      throw Error(src["extends"].str() + ": 'extends' must be a string or an array of strings (relative paths)");
    }
    const fs::path dir = fs::path(path).parent_path();
    for (const auto& parent : parents) {
      const fs::path pp = fs::path(parent).is_absolute() ? fs::path(parent) : dir / parent;
      if (!fs::is_regular_file(pp, ec))
        throw Error(src["extends"].str() + ": extends '" + parent + "': file not found (looked for " + pp.string() +
                    ")");
      load_into(pp.lexically_normal().string(), stack, files, base, base_src);
    }
    t.erase("extends");
    src.erase("extends");
  }
  merge_into(base, base_src, t, src, "");
  merge_into(out, out_src, base, base_src, "");
  stack.pop_back();
}

static void apply_override(toml::table& root, SourceMap& sources, const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--set " + text + ": expected section.key=value (e.g. --set optimizer.lr=1e-4)");
  const std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty()) throw Error("--set " + text + ": empty component in key '" + key + "'");
    parts.push_back(part);
  }
  if (parts.size() < 2) throw Error("--set " + text + ": key must name a section and a key, e.g. run." + key);

  // The value is TOML ("1e-4", "true", "[0.9, 0.999]", "\"text\""); anything else is taken as a bare string.
  toml::table parsed;
  bool is_toml = true;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    is_toml = false;
  }
  toml::table* t = &root;
  std::string p;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    p = join_path(p, parts[i]);
    toml::node* n = t->get(parts[i]);
    if (!n) {
      t->insert_or_assign(parts[i], toml::table{});
      n = t->get(parts[i]);
      sources[p] = Source{{}, 0, 0, text};
    }
    if (!n->is_table()) throw Error("--set " + text + ": '" + p + "' is a value, not a table");
    t = n->as_table();
  }
  const std::string full = join_path(p, parts.back());
  if (is_toml)
    parsed.get("v")->visit([&](const auto& n) { t->insert_or_assign(parts.back(), n); });
  else
    t->insert_or_assign(parts.back(), value);
  erase_prefix(sources, full);
  sources[full] = Source{{}, 0, 0, text};
}

Experiment::Experiment(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Experiment::Experiment(Experiment&&) noexcept = default;
Experiment& Experiment::operator=(Experiment&&) noexcept = default;
Experiment::~Experiment() = default;

Experiment Experiment::load(const std::string& path, const std::vector<std::string>& overrides) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->overrides = overrides;
  std::vector<std::string> stack;
  load_into(path, stack, impl->files, impl->table, impl->sources);
  for (const auto& o : overrides) apply_override(impl->table, impl->sources, o);
  return Experiment(std::move(impl));
}

const std::string& Experiment::path() const { return impl_->path; }
const std::vector<std::string>& Experiment::files() const { return impl_->files; }
const std::vector<std::string>& Experiment::overrides() const { return impl_->overrides; }
std::vector<std::string> Experiment::sections() const {
  std::vector<std::string> out;
  for (auto&& [k, v] : impl_->table) out.emplace_back(k.str());
  return out;
}
static std::string to_toml(const toml::table& t);
std::string Experiment::merged_text() const { return to_toml(impl_->table); }

// ---------------------------------------------------------------------------------------------------------
// Validation

static const char* toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    default:
      return "date/time";
  }
}

static std::string where_of(const SourceMap& src, const std::string& path, const std::string& fallback) {
  auto it = src.find(path);
  return it != src.end() ? it->second.str() : fallback;
}

// Converts one TOML value to the schema's type; throws naming the spot.
static OptionValue convert(const toml::node& n, const OptionSpec& spec, const std::string& at, const std::string& label,
                           const Source* src) {
  auto bad = [&]() -> Error {
    return Error(at + ": " + label + ": expected " + option_type_name(spec.type) + ", got " + toml_type_name(n) +
                 (spec.doc.empty() ? "" : " (" + spec.doc + ")"));
  };
  switch (spec.type) {
    case OptionType::Bool:
      if (auto v = n.as_boolean()) return v->get();
      throw bad();
    case OptionType::Int:
      if (auto v = n.as_integer()) return static_cast<std::int64_t>(v->get());
      throw bad();
    case OptionType::Float:
      if (auto v = n.as_floating_point()) return v->get();
      if (auto v = n.as_integer()) return static_cast<double>(v->get());
      throw bad();
    case OptionType::String: {
      std::string s;
      if (auto v = n.as_string())
        s = v->get();
      else if (src && !src->override_text.empty())
        s = src->override_text.substr(src->override_text.find('=') + 1);
      else
        throw bad();
      check_choice(spec.choices, s, at + ": " + label);
      return s;
    }
    case OptionType::StringList: {
      const auto* arr = n.as_array();
      if (!arr) throw bad();
      std::vector<std::string> out;
      for (auto&& e : *arr) {
        if (!e.is_string()) throw bad();
        out.push_back(*e.value<std::string>());
      }
      return out;
    }
    case OptionType::FloatList: {
      const auto* arr = n.as_array();
      if (!arr) throw bad();
      std::vector<double> out;
      for (auto&& e : *arr) {
        if (!e.is_number()) throw bad();
        out.push_back(*e.value<double>());
      }
      return out;
    }
  }
  throw bad();
}

static std::vector<std::string> schema_keys(const Schema& s) {
  std::vector<std::string> keys;
  for (const auto& o : s) keys.push_back(o.key);
  return keys;
}

static std::string list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Validates table `t` (at dotted `section`) against `schema`; `ignore` keys are handled by the caller.
static Options validate_table(const toml::table& t, const Schema& schema, const std::string& section,
                              const std::string& label, const SourceMap& src, const std::string& file,
                              const std::set<std::string>& ignore) {
  std::map<std::string, OptionValue> values;
  const auto keys = schema_keys(schema);
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    if (ignore.count(key)) continue;
    const std::string at = where_of(src, section + "." + key, file);
    auto it = std::find_if(schema.begin(), schema.end(), [&](const OptionSpec& o) { return o.key == key; });
    if (it == schema.end()) {
      const std::string hint = closest_match(key, keys);
      throw Error(at + ": unknown key '" + key + "' in " + label +
                  (hint.empty() ? ";" : "; did you mean '" + hint + "'?") +
                  " known keys: " + (keys.empty() ? "none" : list(keys)));
    }
    auto s = src.find(section + "." + key);
    values[key] = convert(v, *it, at, label + " " + key, s == src.end() ? nullptr : &s->second);
  }
  for (const auto& o : schema) {
    if (values.count(o.key)) continue;
    if (std::holds_alternative<std::monostate>(o.default_value))
      throw Error(where_of(src, section, file) + ": " + label + " is missing required key '" + o.key + "' (" +
                  option_type_name(o.type) + ": " + o.doc + ")");
    values[o.key] = o.default_value;
  }
  return Options(label, std::move(values));
}

static void put_value(toml::table& t, const std::string& key, const OptionValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
        } else if constexpr (std::is_same_v<T, std::vector<std::string>> || std::is_same_v<T, std::vector<double>>) {
          toml::array a;
          for (const auto& e : x) a.push_back(e);
          t.insert_or_assign(key, std::move(a));
        } else {
          t.insert_or_assign(key, x);
        }
      },
      v);
}

// Canonical TOML: basic "double-quoted" strings, as people write them.
static std::string to_toml(const toml::table& t) {
  std::ostringstream os;
  os << toml::toml_formatter{t, toml::toml_formatter::default_flags & ~toml::format_flags::allow_literal_strings};
  return os.str();
}

static std::string fnv1a64_hex(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

ResolvedConfig resolve(const Experiment& exp, const PluginHost& host) {
  const auto& impl = exp.impl();
  ResolvedConfig r;
  r.experiment = impl.path;
  r.files = impl.files;
  toml::table canonical;

  std::vector<std::string> known;
  for (const auto& s : host.sections().all()) known.push_back(s.name);
  for (const auto& [name, kind] : component_sections()) known.push_back(name);

  for (auto&& [k, v] : impl.table) {
    const std::string section(k.str());
    const std::string at = where_of(impl.sources, section, impl.path);
    if (std::find(known.begin(), known.end(), section) == known.end()) {
      const std::string hint = closest_match(section, known);
      throw Error(at + ": unknown " + (v.is_table() ? "section [" + section + "]" : "top-level key '" + section + "'") +
                  (hint.empty() ? ";" : "; did you mean [" + hint + "]?") + " known sections: " + list(known));
    }
    if (!v.is_table())
      throw Error(at + ": '" + section + "' must be a table ([" + section + "]), got " + toml_type_name(v));
  }
  const toml::table* run = impl.table.get_as<toml::table>("run");
  if (!run) throw Error(impl.path + ": missing [run] section (it needs at least: name = \"...\")");

  for (const auto& section : host.sections().all()) {
    const std::string& name = section.name;
    const toml::table empty;
    const toml::table* t = impl.table.get_as<toml::table>(name);
    Options o = validate_table(t ? *t : empty, section.schema(), name, "[" + name + "]", impl.sources, impl.path, {});
    toml::table out;
    for (const auto& [key, val] : o.values()) put_value(out, key, val);
    canonical.insert_or_assign(name, std::move(out));
    if (name == "run") r.run = run_options_from(o);
    r.sections[name] = std::move(o);
  }

  for (const auto& [section, kind] : component_sections()) {
    const toml::table* t = impl.table.get_as<toml::table>(section);
    if (!t) continue;
    const std::string at = where_of(impl.sources, section, impl.path);
    const toml::node* type = t->get("type");
    std::string available;
    for (const auto* e : host.entries(kind)) available += (available.empty() ? "" : ", ") + e->spec.name;
    if (available.empty()) available = "none loaded (see `bertx plugins`)";
    if (!type || !type->is_string())
      throw Error(at + ": [" + section + "] needs type = \"<" + kind_name(kind) + " name>\"; available: " + available);
    const std::string name = *type->value<std::string>();
    const BuilderEntry* entry = nullptr;
    try {
      entry = &host.find(kind, name);
    } catch (const Error& e) {
      throw Error(where_of(impl.sources, section + ".type", at) + ": [" + section + "] " + e.what());
    }
    const std::string label = "[" + section + "] (" + kind_name(kind) + " '" + name + "')";
    Options o = validate_table(*t, entry->spec.schema, section, label, impl.sources, impl.path, {"type"});
    toml::table out;
    out.insert_or_assign("type", name);
    for (const auto& [key, val] : o.values()) put_value(out, key, val);
    canonical.insert_or_assign(section, std::move(out));
    r.components[section] = ComponentConfig{kind, section, name, std::move(o)};
  }

  r.text = to_toml(canonical) + "\n";
  r.hash = fnv1a64_hex(r.text);
  return r;
}

const ComponentConfig& component(const ResolvedConfig& config, const std::string& section) {
  auto it = config.components.find(section);
  if (it == config.components.end()) throw Error(config.experiment + ": needs a [" + section + "] section with a type");
  return it->second;
}

}  // namespace bertx
