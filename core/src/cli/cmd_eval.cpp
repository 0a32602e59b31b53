// cmd_eval.cpp - `bertx eval <scorer> --<option> <value> ...`: scores prediction files with a benchmark's official
// metric, a Scorer from a plugin (bertx/scorer.hpp; e.g. the squad plugin's `squad`: `bertx eval squad --dataset
// D.json --predictions P.json [--version 1.1|2.0] [--na-prob-file N.json] [--na-prob-thresh T]`). Core names no
// benchmark: `--some-key value` (or `--some-key=value`) sets the scorer's option some_key, typed by its schema.
// The scorer's notes go to stderr, one per line, then its result is the last stdout line.
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "bertx/error.hpp"
#include "bertx/scorer.hpp"
#include "commands.hpp"
#include "host/plugin_host.hpp"

namespace bertx::cli {

namespace {

// "na-prob-thresh" -> "na_prob_thresh" (the option's key), and back (the flag a user types).
std::string swap_char(std::string s, char from, char to) {
  for (char& c : s)
    if (c == from) c = to;
  return s;
}
std::string option_key(const std::string& flag) { return swap_char(flag, '-', '_'); }
std::string flag_of(const std::string& key) { return swap_char(key, '_', '-'); }

// The text of one command-line value as the option's schema type (a string within its choices, as the
// experiment-file check requires).
OptionValue typed_value(const std::string& where, const OptionSpec& spec, const std::string& text) {
  if (spec.type == OptionType::String) {
    check_choice(spec.choices, text, where + ": --" + flag_of(spec.key));
    return text;
  }
  try {
    std::size_t used = 0;
    switch (spec.type) {
      case OptionType::Bool:
        if (text == "true") return true;
        if (text == "false") return false;
        break;
      case OptionType::Int: {
        const std::int64_t v = std::stoll(text, &used);
        if (used == text.size()) return v;
        break;
      }
      case OptionType::Float: {
        const double v = std::stod(text, &used);
        if (used == text.size()) return v;
        break;
      }
      default:
        break;
    }
  } catch (const std::exception&) {
  }
  throw Error(where + ": --" + flag_of(spec.key) + " expects " + option_type_name(spec.type) + ", got '" + text + "'");
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::string scorer;
  };
  auto args = std::make_shared<Args>();
  CLI::App* eval = app.add_subcommand(
      "eval",
      "score prediction files with a benchmark's official metric: bertx eval <scorer> --<option> <value> ... "
      "(scorers and their options: `bertx plugins`)");
  eval->add_option("scorer", args->scorer, "scorer name, e.g. squad")->required();
  eval->allow_extras();
  eval->callback([args, eval, &exit_code] {
    const std::string where = "bertx eval " + args->scorer;
    PluginHost host;
    host.scan(PluginHost::default_search_path());
    const BuilderEntry& entry = host.find(Kind::Scorer, args->scorer);
    std::map<std::string, const OptionSpec*> specs;
    for (const auto& o : entry.spec.schema) specs[o.key] = &o;

    std::map<std::string, OptionValue> set;
    const std::vector<std::string> extras = eval->remaining();
    for (std::size_t i = 0; i < extras.size(); ++i) {
      const std::string& a = extras[i];
      if (a.rfind("--", 0) != 0 || a.size() == 2)
        throw Error(where + ": unexpected argument '" + a + "' (options are --<name> <value>)");
      std::string flag = a.substr(2), value;
      const auto eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1), flag.resize(eq);
      } else {
        if (i + 1 >= extras.size()) throw Error(where + ": --" + flag + " needs a value");
        value = extras[++i];
      }
      const auto it = specs.find(option_key(flag));
      if (it == specs.end()) {
        std::string known;
        for (const auto& [k, s] : specs) known += (known.empty() ? "--" : ", --") + flag_of(k);
        throw Error(where + ": unknown option --" + flag + "; expected one of " + known);
      }
      set[it->first] = typed_value(where, *it->second, value);
    }
    for (const auto& o : entry.spec.schema) {
      if (std::holds_alternative<std::monostate>(o.default_value) && !set.count(o.key))
        throw Error(where + ": --" + flag_of(o.key) + " is required (" + o.doc + ")");
    }

    auto scorer = host.create<Scorer>(Kind::Scorer, args->scorer, host.options_for(Kind::Scorer, args->scorer, set));
    ScoreReport report;
    try {
      report = scorer->score();
    } catch (const std::exception& e) {
      // Rethrown as core's own: the plugin's exception object must not outlive its library, unloaded with `host`.
      throw Error(e.what());
    }
    for (const auto& line : report.notes) std::fprintf(stderr, "%s\n", line.c_str());
    std::printf("%s\n", report.result.c_str());
    exit_code = 0;
  });
}

}  // namespace bertx::cli
