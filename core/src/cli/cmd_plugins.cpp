// cmd_plugins.cpp - `bertx plugins [--verbose]`: the search path, what loaded (path, version, which search
// folder it came from), what it provides, the host's own sections, and every refused library with the reason.
#include <iostream>

#include "commands.hpp"
#include "host/plugin_host.hpp"

namespace bertx::cli {

static std::string show_default(const OptionValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return "(required)";
        else if constexpr (std::is_same_v<T, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>)
          return "\"" + x + "\"";
        else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>) {
          std::ostringstream os;
          os << x;
          return os.str();
        } else {
          std::ostringstream os;
          os << "[";
          for (std::size_t i = 0; i < x.size(); ++i) os << (i ? ", " : "") << x[i];
          os << "]";
          return os.str();
        }
      },
      v);
}

static void show_options(const Schema& schema, const char* indent) {
  for (const auto& o : schema)
    std::cout << indent << o.key << " (" << option_type_name(o.type) << ", default " << show_default(o.default_value)
              << "): " << o.doc << "\n";
}

void add_plugins_command(CLI::App& app, int& exit_code) {
  auto verbose = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("plugins", "list plugin libraries, what they provide, and refused ones");
  cmd->add_flag("-v,--verbose", *verbose, "also list every option with its type, default and meaning");
  cmd->callback([verbose, &exit_code] {
    PluginHost host;
    const auto folders = PluginHost::search_folders();
    host.scan(PluginHost::default_search_path());
    std::cout << "search path (beside libbertx_core, beside the executable, $BERTX_PLUGIN_PATH; never the current "
                 "directory):\n";
    for (const auto& f : folders) std::cout << "  " << f.dir << "  (" << f.origin << ")\n";
    std::cout << "plugins:\n";
    for (const auto& p : host.plugins()) {
      std::cout << "  " << p->name << " " << p->version << " (API " << p->api_version << ")  " << p->path
                << "  (from the " << PluginHost::origin_of(p->path, folders) << ")\n";
      for (const auto* e : host.all_entries()) {
        if (e->plugin != p) continue;
        std::cout << "    " << kind_name(e->spec.kind) << " " << e->spec.name << ": " << e->spec.description << "\n";
        if (*verbose) show_options(e->spec.schema, "      ");
      }
    }
    if (host.plugins().empty()) std::cout << "  (none)\n";
    std::cout << "host sections (read by bertx itself):\n";
    for (const auto& s : host.sections().all()) {
      std::cout << "  [" << s.name << "]: " << s.description << "\n";
      if (*verbose) show_options(s.schema(), "    ");
    }
    if (!host.problems().empty()) {
      std::cout << "refused:\n";
      for (const auto& p : host.problems()) std::cout << "  " << p << "\n";
    }
    exit_code = 0;
  });
}

}  // namespace bertx::cli
