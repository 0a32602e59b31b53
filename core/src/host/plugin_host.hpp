// plugin_host.hpp - finds, loads and registers plugin shared libraries (Boost.DLL), and builds components.
//
// Search path, in order: bertx/plugins beside libbertx_core.so (build/lib/bertx/plugins in the build tree,
// <prefix>/<libdir>/bertx/plugins installed), <exe>/../lib/bertx/plugins when that differs, then every folder
// of $BERTX_PLUGIN_PATH (colon-separated, absolute paths only; empty entries skipped). Never the current
// directory, nor a folder relative to it. Each *.so
// found is loaded with RTLD_NOW|RTLD_LOCAL; a library without `bertx_plugin_entry`, with another plugin
// API version, or whose register function fails is refused with a one-line reason (kept in problems()).
// Components are looked up by (kind, name); an unknown name lists the available ones.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bertx/plugin.hpp"
#include "host/sections.hpp"

namespace bertx {

struct LoadedPlugin {
  std::string name, version, description, path;
  std::uint32_t api_version = 0;
  std::shared_ptr<void> library;  // the boost::dll::shared_library, kept alive by every built object
};

struct BuilderEntry {
  BuilderSpec spec;
  std::shared_ptr<const LoadedPlugin> plugin;  // who registered it
};

class PluginHost : public Registry {
 public:
  // Holds the host's own experiment sections from the start (register_host_sections, sections.hpp).
  PluginHost();
  ~PluginHost() override;

  // A search folder and where it comes from: "folder beside libbertx_core", "folder beside the executable"
  // or "$BERTX_PLUGIN_PATH".
  struct SearchFolder {
    std::string dir, origin;
  };
  // The default search folders (see above), existing or not. Throws bertx::Error for a $BERTX_PLUGIN_PATH
  // entry that is not an absolute path ("." included): nothing is loaded relative to the current directory.
  static std::vector<SearchFolder> search_folders();
  static std::vector<std::string> default_search_path();
  // The origin of the search folder that holds a loaded library ("" when none does, e.g. load() by path).
  static std::string origin_of(const std::string& library_path, const std::vector<SearchFolder>& folders);

  // Loads every *.so in each folder (sorted by name). Refusals are recorded, not thrown.
  void scan(const std::vector<std::string>& folders);
  // Loads one library; throws bertx::Error with the reason if it is refused.
  const LoadedPlugin& load(const std::string& path);

  const std::vector<std::shared_ptr<const LoadedPlugin>>& plugins() const { return plugins_; }
  // One line per refused library: "<path>: <reason>".
  const std::vector<std::string>& problems() const { return problems_; }

  // Registry: called by plugins during load(). Duplicate (kind, name) is refused.
  void add(BuilderSpec spec) override;

  // Throws bertx::Error "unknown optimizer 'x'; available: a, b" when absent.
  const BuilderEntry& find(Kind kind, const std::string& name) const;
  std::vector<const BuilderEntry*> entries(Kind kind) const;
  std::vector<const BuilderEntry*> all_entries() const;

  // Options for a builder from code (not from an experiment file): schema defaults, then `set`.
  // Throws bertx::Error for a key the schema does not declare.
  Options options_for(Kind kind, const std::string& name, const std::map<std::string, OptionValue>& set = {}) const;

  // Builds a component. Exceptions from the factory become bertx::Error naming the plugin.
  // The returned pointer keeps the plugin library loaded for as long as it lives.
  std::shared_ptr<void> create_any(Kind kind, const std::string& name, const Options& options) const;
  template <class T>
  std::shared_ptr<T> create(Kind kind, const std::string& name, const Options& options) const {
    std::shared_ptr<void> any = create_any(kind, name, options);
    return std::shared_ptr<T>(any, static_cast<T*>(any.get()));
  }

  // The experiment sections the host reads itself ([run], [train], [bench]).
  const SectionRegistry& sections() const { return sections_; }

  // JSON array [{name, version, path}] of loaded plugins, for the run record.
  std::string plugins_json() const;

 private:
  std::vector<std::shared_ptr<const LoadedPlugin>> plugins_;
  std::vector<std::string> problems_;
  std::map<std::pair<Kind, std::string>, BuilderEntry> builders_;
  std::shared_ptr<const LoadedPlugin> loading_;  // the plugin whose register_fn is running
  SectionRegistry sections_;
};

}  // namespace bertx
