// history/compare.cpp - see compare.hpp.
#include "history/compare.hpp"

#include <cmath>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "bertx/error.hpp"
#include "store/store.hpp"

namespace bertx::history {

namespace {

void flatten(const toml::table& t, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [k, v] : t) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* sub = v.as_table()) {
      flatten(*sub, key, out);
      continue;
    }
    std::ostringstream os;
    v.visit([&](const auto& node) { os << node; });
    out[key] = os.str();
  }
}

std::string describe(const RunRecord& r) {
  return "run " + std::to_string(r.id) + " (" + r.name + ", seed " + std::to_string(r.seed) + ", " +
         run_status_name(r.status) + ")";
}

std::string g6(double v) {
  if (std::isnan(v)) return "nan";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::map<std::string, std::string> flatten_toml(const std::string& text, const std::string& what) {
  std::map<std::string, std::string> out;
  try {
    flatten(toml::parse(text), "", out);
  } catch (const toml::parse_error& e) {
    throw Error(what + ": config is not TOML (" + std::string(e.description()) + ")");
  }
  return out;
}

std::string compare_runs(const RunStore& store, std::int64_t ida, std::int64_t idb, Format format) {
  const auto a = store.get_run(ida), b = store.get_run(idb);
  for (const auto& [id, r] : {std::pair{ida, &a}, std::pair{idb, &b}})
    if (!*r)
      throw Error("runs compare: no run with id " + std::to_string(id) + " in " + store.path() +
                  " (see bertx runs list)");
  const std::string A = "run " + std::to_string(ida), B = "run " + std::to_string(idb);

  // Recorded facts that differ.
  auto dur = [](const RunRecord& r) { return r.ended_at > 0 ? g6(r.ended_at - r.started_at) + " s" : "-"; };
  const std::vector<std::tuple<std::string, std::string, std::string>> facts_all = {
      {"name", a->name, b->name},
      {"status", run_status_name(a->status), run_status_name(b->status)},
      {"seed", std::to_string(a->seed), std::to_string(b->seed)},
      {"experiment", a->experiment, b->experiment},
      {"config hash", a->config_hash, b->config_hash},
      {"duration", dur(*a), dur(*b)},
      {"host", a->host, b->host},
      {"world size", std::to_string(a->world_size), std::to_string(b->world_size)},
      {"bertx", a->bertx_version, b->bertx_version},
      {"LibTorch", a->torch_version, b->torch_version},
      {"git", a->git_rev, b->git_rev},
      {"plugins", a->plugins, b->plugins}};
  std::vector<std::vector<std::string>> facts = {{"", A, B}};
  for (const auto& [k, x, y] : facts_all)
    if (x != y) facts.push_back({k, x, y});

  const auto ca = flatten_toml(a->config, A), cb = flatten_toml(b->config, B);
  std::set<std::string> keys;
  for (const auto& [k, v] : ca) keys.insert(k);
  for (const auto& [k, v] : cb) keys.insert(k);
  std::vector<std::vector<std::string>> config = {{"key", A, B}};
  for (const auto& k : keys) {
    const std::string x = ca.count(k) ? ca.at(k) : "(unset)", y = cb.count(k) ? cb.at(k) : "(unset)";
    if (x != y) config.push_back({k, x, y});
  }

  std::map<std::string, std::pair<std::optional<double>, std::optional<double>>> metrics;
  for (const auto& m : store.metric_summary(ida)) metrics[m.name].first = m.last;
  for (const auto& m : store.metric_summary(idb)) metrics[m.name].second = m.last;
  std::vector<std::vector<std::string>> mrows = {{"metric", A, B, "B - A"}};
  for (const auto& [name, v] : metrics)
    mrows.push_back({name, v.first ? g6(*v.first) : "-", v.second ? g6(*v.second) : "-",
                     v.first && v.second ? g6(*v.second - *v.first) : "-"});

  if (format == Format::Json) {
    nlohmann::json j;
    j["a"] = ida;
    j["b"] = idb;
    auto rows_json = [](const std::vector<std::vector<std::string>>& rows) {
      nlohmann::json out = nlohmann::json::object();
      for (std::size_t i = 1; i < rows.size(); ++i) out[rows[i][0]] = {rows[i][1], rows[i][2]};
      return out;
    };
    j["facts"] = rows_json(facts);
    j["config"] = rows_json(config);
    j["metrics"] = nlohmann::json::object();
    for (const auto& [name, v] : metrics) {
      auto val = [](std::optional<double> x) {
        return x && std::isfinite(*x) ? nlohmann::json(*x) : nlohmann::json(nullptr);
      };
      j["metrics"][name] = {{"a", val(v.first)},
                            {"b", val(v.second)},
                            {"diff", v.first && v.second ? val(*v.second - *v.first) : nlohmann::json(nullptr)}};
    }
    return j.dump(2) + "\n";
  }
  std::string out = describe(*a) + "  vs  " + describe(*b) + "\n";
  out += "\nrecorded (" + std::to_string(facts.size() - 1) + " difference(s)):\n" +
         text_grid(facts, {false, false, false});
  out += "\nconfig (" + std::to_string(config.size() - 1) + " of " + std::to_string(keys.size()) + " keys differ):\n" +
         (config.size() > 1 ? text_grid(config, {false, false, false}) : "  (identical)\n");
  out += "\nmetrics (value at the last logged step):\n" + text_grid(mrows, {false, true, true, true});
  return out;
}

}  // namespace bertx::history
