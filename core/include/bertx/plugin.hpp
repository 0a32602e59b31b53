// bertx/plugin.hpp - the contract between the bertx host and a plugin shared library.
//
// A plugin is a shared library with exactly one exported C entry point, `bertx_plugin_entry`, that returns
// a static `bertx_plugin_info`: the plugin-API version it was compiled for, its name and version, and a
// register function. The host (core/src/host/plugin_host.cpp) dlopens the library with RTLD_NOW|RTLD_LOCAL,
// refuses an API-version mismatch, then calls `register_fn` once with its Registry; the plugin adds one
// builder per component it provides (kind + name + option schema + factory).
//
// Rules:
//  - Write `BERTX_PLUGIN("name", "1.2.0", "what it does", my_register)` in exactly one .cpp of the plugin;
//    `my_register(bertx::Registry&)` calls `registry.add(...)` (or the typed helpers in optimizer.hpp ...).
//  - No exception crosses the boundary: the entry's register trampoline catches everything and returns the
//    message as text; the host wraps every factory call and re-raises failures as bertx::Error naming the
//    plugin. Factories may throw bertx::Error for bad options; it reaches the user as one line.
//  - Ownership: objects a factory returns keep the plugin library loaded (the host ties the library's
//    lifetime to every object), so they may outlive the host's registry.
//  - Threading: register_fn and factories are called from the host's main thread only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "bertx/options.hpp"
#include "bertx/version.hpp"

extern "C" {
// Plain C so the layout does not depend on the compiler's C++ ABI. Never reorder these fields.
struct bertx_plugin_info {
  std::uint32_t api_version;  // BERTX_PLUGIN_API_VERSION at plugin compile time
  const char* name;           // plugin (library) name, e.g. "optimizers"
  const char* version;        // plugin's own version, e.g. "1.0.0"
  const char* description;    // one line
  // Registers the plugin's builders into `registry` (a bertx::Registry*). Returns 0 on success; otherwise
  // writes a NUL-terminated message into err (at most err_len bytes) and returns non-zero.
  int (*register_fn)(void* registry, char* err, std::size_t err_len);
};
}

namespace bertx {

// What a builder builds. The interface for each kind lives in its own header (optimizer.hpp, ...).
enum class Kind { Model, Optimizer, Task, Dataset, Scorer };

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Model:
      return "model";
    case Kind::Optimizer:
      return "optimizer";
    case Kind::Task:
      return "task";
    case Kind::Dataset:
      return "dataset";
    case Kind::Scorer:
      return "scorer";
  }
  return "?";
}

// A type-erased factory: receives its validated options, returns the object (as the kind's interface).
using AnyFactory = std::function<std::shared_ptr<void>(const Options&)>;

struct BuilderSpec {
  Kind kind;
  std::string name;         // unique per kind across all loaded plugins, e.g. "adamw"
  std::string description;  // one line
  Schema schema;            // keys the component's TOML table accepts (besides `type`)
  AnyFactory factory;
};

// Implemented by the host. Plugins only call add().
class Registry {
 public:
  virtual ~Registry() = default;
  virtual void add(BuilderSpec spec) = 0;
};

}  // namespace bertx

// Defines the plugin's exported entry. REGISTER is a function `void(bertx::Registry&)`.
#define BERTX_PLUGIN(NAME, VERSION, DESCRIPTION, REGISTER)                                                \
  static int bertx_plugin_register_trampoline_(void* registry, char* err, std::size_t err_len) noexcept { \
    auto write_err = [&](const char* msg) {                                                               \
      if (err && err_len) {                                                                               \
        std::size_t i = 0;                                                                                \
        for (; msg[i] && i + 1 < err_len; ++i) err[i] = msg[i];                                           \
        err[i] = '\0';                                                                                    \
      }                                                                                                   \
    };                                                                                                    \
    try {                                                                                                 \
      REGISTER(*static_cast<bertx::Registry*>(registry));                                                 \
      return 0;                                                                                           \
    } catch (const std::exception& e) {                                                                   \
      write_err(e.what());                                                                                \
    } catch (...) {                                                                                       \
      write_err("unknown exception");                                                                     \
    }                                                                                                     \
    return 1;                                                                                             \
  }                                                                                                       \
  extern "C" BERTX_EXPORT const bertx_plugin_info* bertx_plugin_entry(void) {                             \
    static const bertx_plugin_info info{BERTX_PLUGIN_API_VERSION, NAME, VERSION, DESCRIPTION,             \
                                        &bertx_plugin_register_trampoline_};                              \
    return &info;                                                                                         \
  }
