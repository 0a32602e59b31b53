// plugin_entry.hpp - for tests that compile a plugin's entry in (no host): builds one of its registered components
// (by kind and name) through the factory, with the schema's defaults and the given overrides, as the host would.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bertx/error.hpp"
#include "bertx/plugin.hpp"

extern "C" const bertx_plugin_info* bertx_plugin_entry(void);

namespace bertx::test {

struct RecordingRegistry : Registry {
  std::vector<BuilderSpec> specs;
  void add(BuilderSpec spec) override { specs.push_back(std::move(spec)); }
};

// T: the component's interface (DatasetReader, ...); (kind, name) picks it among the plugin's components;
// `where` names its table in errors, e.g. "[data] (glue)".
template <class T>
std::shared_ptr<T> make_from_entry(Kind kind, const std::string& name, const std::string& where,
                                   const std::map<std::string, OptionValue>& overrides) {
  RecordingRegistry reg;
  char err[256] = {0};
  if (bertx_plugin_entry()->register_fn(&reg, err, sizeof err) != 0)
    throw Error(std::string("plugin entry failed: ") + err);
  const BuilderSpec* spec = nullptr;
  for (const auto& s : reg.specs)
    if (s.kind == kind && s.name == name) spec = &s;
  if (!spec) throw Error("plugin entry registered no " + std::string(kind_name(kind)) + " '" + name + "'");
  std::map<std::string, OptionValue> values;
  for (const auto& o : spec->schema) values[o.key] = o.default_value;
  for (const auto& [k, v] : overrides) values[k] = v;
  std::shared_ptr<void> any = spec->factory(Options(where, values));
  return std::shared_ptr<T>(any, static_cast<T*>(any.get()));
}

}  // namespace bertx::test
