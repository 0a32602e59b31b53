// plugin_entry.hpp - for tests that compile a plugin's entry in (no host): builds its one registered component
// through the factory, with the schema's defaults and the given overrides, as the host would.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bertx/plugin.hpp"

extern "C" const bertx_plugin_info* bertx_plugin_entry(void);

namespace bertx::test {

struct RecordingRegistry : Registry {
  std::vector<BuilderSpec> specs;
  void add(BuilderSpec spec) override { specs.push_back(std::move(spec)); }
};

// T: the component's interface (DatasetReader, ...); `where` names its table in errors, e.g. "[data] (glue)".
template <class T>
std::shared_ptr<T> make_from_entry(const std::string& where, const std::map<std::string, OptionValue>& overrides) {
  RecordingRegistry reg;
  char err[256] = {0};
  if (bertx_plugin_entry()->register_fn(&reg, err, sizeof err) != 0) throw Error(std::string("plugin entry failed: ") + err);
  if (reg.specs.size() != 1) throw Error("plugin entry registered " + std::to_string(reg.specs.size()) + " components, expected 1");
  std::map<std::string, OptionValue> values;
  for (const auto& o : reg.specs[0].schema) values[o.key] = o.default_value;
  for (const auto& [k, v] : overrides) values[k] = v;
  std::shared_ptr<void> any = reg.specs[0].factory(Options(where, values));
  return std::shared_ptr<T>(any, static_cast<T*>(any.get()));
}

}  // namespace bertx::test
