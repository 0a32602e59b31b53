// plugin_host.cpp - loads plugin libraries with Boost.DLL and keeps the (kind, name) -> builder registry.
// Every refusal is one line naming the library and what is wrong, so `bertx plugins` can show it.
#include "host/plugin_host.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <nlohmann/json.hpp>

#include "bertx/error.hpp"

namespace fs = std::filesystem;
namespace dll = boost::dll;

namespace bertx {

PluginHost::PluginHost() { register_host_sections(sections_); }

PluginHost::~PluginHost() {
  // Builders hold std::function objects whose code lives in the plugin libraries: drop them first.
  builders_.clear();
}

std::vector<PluginHost::SearchFolder> PluginHost::search_folders() {
  // The plugin folder lies beside the core library, wherever that is: build/lib/libbertx_core.so ->
  // build/lib/bertx/plugins; <prefix>/<libdir>/libbertx_core.so -> <prefix>/<libdir>/bertx/plugins. So the build
  // tree's binaries never load installed plugins and an installed bertx never loads the build tree's.
  std::vector<SearchFolder> dirs;
  auto add = [&](const fs::path& dir, const char* origin) {
    std::error_code ec;
    const fs::path canon = fs::weakly_canonical(dir, ec);
    for (const auto& d : dirs)
      if (fs::weakly_canonical(d.dir, ec) == canon) return;
    dirs.push_back({dir.lexically_normal().string(), origin});
  };
  std::error_code ec;
  const fs::path core = dll::this_line_location(ec);
  if (!ec) add(core.parent_path() / "bertx" / "plugins", "folder beside libbertx_core");
  const fs::path exe = dll::program_location(ec);
  if (!ec) add(exe.parent_path().parent_path() / "lib" / "bertx" / "plugins", "folder beside the executable");
  if (const char* env = std::getenv("BERTX_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':')) {
      if (item.empty()) continue;
      if (!fs::path(item).is_absolute())  // "." or "plugins" would load whatever the current directory holds
        throw Error("$BERTX_PLUGIN_PATH entry '" + item +
                    "' is not an absolute path: plugins are never loaded from the current "
                    "directory or a folder relative to it (write the full path, e.g. $PWD/" +
                    item + ")");
      dirs.push_back({item, "$BERTX_PLUGIN_PATH"});
    }
  }
  return dirs;
}

std::vector<std::string> PluginHost::default_search_path() {
  std::vector<std::string> dirs;
  for (const auto& f : search_folders()) dirs.push_back(f.dir);
  return dirs;
}

std::string PluginHost::origin_of(const std::string& library_path, const std::vector<SearchFolder>& folders) {
  std::error_code ec;
  const fs::path parent = fs::weakly_canonical(library_path, ec).parent_path();
  for (const auto& f : folders)
    if (fs::weakly_canonical(f.dir, ec) == parent) return f.origin;
  return "";
}

void PluginHost::scan(const std::vector<std::string>& folders) {
  for (const auto& folder : folders) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) continue;
    std::vector<fs::path> libs;
    for (const auto& e : fs::directory_iterator(folder, ec))
      if (e.is_regular_file() && e.path().extension() == ".so") libs.push_back(e.path());
    std::sort(libs.begin(), libs.end());
    for (const auto& lib : libs) {
      try {
        load(lib.string());
      } catch (const Error& e) {
        problems_.push_back(e.what());
      }
    }
  }
}

const LoadedPlugin& PluginHost::load(const std::string& path) {
  std::error_code ec;
  const std::string canon = fs::weakly_canonical(path, ec).string();
  for (const auto& p : plugins_)
    if (p->path == canon) return *p;  // already loaded (same folder listed twice)

  auto lib = std::make_shared<dll::shared_library>();
  dll::fs::error_code load_ec;
  lib->load(canon, dll::load_mode::rtld_now | dll::load_mode::rtld_local, load_ec);
  if (load_ec) {
    const char* why = dlerror();  // Boost.DLL's own error code only says "bad file descriptor"
    throw Error(path + ": cannot load shared library: " + (why ? why : load_ec.message()));
  }
  if (!lib->has("bertx_plugin_entry"))
    throw Error(path + ": not a bertx plugin (no exported symbol bertx_plugin_entry; build it with BERTX_PLUGIN(...))");

  using EntryFn = const bertx_plugin_info*();
  const bertx_plugin_info* info = lib->get<EntryFn>("bertx_plugin_entry")();
  if (info == nullptr) throw Error(path + ": bertx_plugin_entry returned null");
  if (info->api_version != BERTX_PLUGIN_API_VERSION)
    throw Error(path + ": plugin '" + (info->name ? info->name : "?") + "' was built for plugin API version " +
                std::to_string(info->api_version) + " but this bertx speaks version " +
                std::to_string(BERTX_PLUGIN_API_VERSION) + "; rebuild the plugin against this bertx SDK");
  if (info->name == nullptr || info->version == nullptr || info->register_fn == nullptr)
    throw Error(path + ": malformed plugin info (null name, version or register function)");
  for (const auto& p : plugins_)
    if (p->name == info->name) throw Error(path + ": plugin name '" + p->name + "' is already loaded from " + p->path);

  auto plugin = std::make_shared<LoadedPlugin>();
  plugin->name = info->name;
  plugin->version = info->version;
  plugin->description = info->description ? info->description : "";
  plugin->path = canon;
  plugin->api_version = info->api_version;
  plugin->library = lib;

  // Register into a staging map so a failing plugin leaves nothing behind.
  auto before = builders_;
  loading_ = plugin;
  char err[1024] = {0};
  int rc = info->register_fn(static_cast<Registry*>(this), err, sizeof err);
  loading_.reset();
  if (rc != 0) {
    builders_ = std::move(before);
    throw Error(path + ": plugin '" + plugin->name + "' failed to register: " + (err[0] ? err : "no message"));
  }
  plugins_.push_back(plugin);
  return *plugins_.back();
}

void PluginHost::add(BuilderSpec spec) {
  if (!loading_) throw Error("Registry::add called outside plugin registration");
  if (spec.name.empty() || !spec.factory)
    throw Error(std::string("a ") + kind_name(spec.kind) + " builder needs a name and a factory");
  auto key = std::make_pair(spec.kind, spec.name);
  auto it = builders_.find(key);
  if (it != builders_.end())
    throw Error(std::string(kind_name(spec.kind)) + " '" + spec.name + "' is already provided by plugin '" +
                it->second.plugin->name + "' (" + it->second.plugin->path + ")");
  for (const auto& o : spec.schema)
    if (o.key == "type")
      throw Error(std::string(kind_name(spec.kind)) + " '" + spec.name + "' declares option 'type', which is reserved");
  builders_.emplace(key, BuilderEntry{std::move(spec), loading_});
}

std::vector<const BuilderEntry*> PluginHost::entries(Kind kind) const {
  std::vector<const BuilderEntry*> out;
  for (const auto& [key, e] : builders_)
    if (key.first == kind) out.push_back(&e);
  return out;
}

std::vector<const BuilderEntry*> PluginHost::all_entries() const {
  std::vector<const BuilderEntry*> out;
  for (const auto& [key, e] : builders_) out.push_back(&e);
  return out;
}

const BuilderEntry& PluginHost::find(Kind kind, const std::string& name) const {
  auto it = builders_.find({kind, name});
  if (it != builders_.end()) return it->second;
  std::string available;
  for (const auto* e : entries(kind)) available += (available.empty() ? "" : ", ") + e->spec.name;
  throw Error(std::string("unknown ") + kind_name(kind) + " '" + name + "'; available: " +
              (available.empty() ? "none (no plugin provides one; see `bertx plugins`)" : available));
}

Options PluginHost::options_for(Kind kind, const std::string& name,
                                const std::map<std::string, OptionValue>& set) const {
  const BuilderEntry& e = find(kind, name);
  std::map<std::string, OptionValue> values;
  for (const auto& o : e.spec.schema) values[o.key] = o.default_value;
  for (const auto& [k, v] : set) {
    if (!values.count(k)) throw Error(std::string(kind_name(kind)) + " '" + name + "' has no option '" + k + "'");
    values[k] = v;
  }
  return Options(std::string("[") + kind_name(kind) + "] (" + name + ")", std::move(values));
}

std::shared_ptr<void> PluginHost::create_any(Kind kind, const std::string& name, const Options& options) const {
  const BuilderEntry& e = find(kind, name);
  std::shared_ptr<void> object;
  try {
    object = e.spec.factory(options);
  } catch (const std::exception& ex) {
    throw Error(std::string(kind_name(kind)) + " '" + name + "' (plugin " + e.plugin->name + "): " + ex.what());
  } catch (...) {
    throw Error(std::string(kind_name(kind)) + " '" + name + "' (plugin " + e.plugin->name + "): unknown exception");
  }
  if (!object)
    throw Error(std::string(kind_name(kind)) + " '" + name + "' (plugin " + e.plugin->name + ") built nothing");
  // The object's deleter runs before the library handle is released (members destroyed in reverse order).
  struct Holder {
    std::shared_ptr<void> library;
    std::shared_ptr<void> object;
  };
  auto holder = std::make_shared<Holder>(Holder{e.plugin->library, object});
  return std::shared_ptr<void>(holder, object.get());
}

std::string PluginHost::plugins_json() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : plugins_) arr.push_back({{"name", p->name}, {"version", p->version}, {"path", p->path}});
  return arr.dump();
}

}  // namespace bertx
