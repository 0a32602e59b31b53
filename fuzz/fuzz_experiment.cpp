// fuzz_experiment.cpp - experiment TOML with `extends` and --set overrides (core/src/host/config.cpp): load,
// then validate against the host's schemas (run/train/bench; no plugins loaded).
// Input layout: up to four parts separated by lines "#---": a.toml (the experiment), b.toml, c.toml
// (what `extends` can name: "b.toml", ["b.toml", "c.toml"], also cycles), then one --set override a line.
#include <spdlog/spdlog.h>

#include "host/config.hpp"
#include "fuzz_util.hpp"
#include "host/plugin_host.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx;
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  const auto parts = fuzz::split_parts({reinterpret_cast<const char*>(data), size}, "#---", 4);
  static const char* names[] = {"a.toml", "b.toml", "c.toml"};
  for (std::size_t i = 0; i < 3; ++i) std::filesystem::remove(fuzz::temp_dir() / names[i]);
  std::string main_file;
  for (std::size_t i = 0; i < parts.size() && i < 3; ++i) {
    const std::string p = fuzz::write_file(names[i], parts[i]);
    if (i == 0) main_file = p;
  }
  std::vector<std::string> overrides;
  if (parts.size() == 4) {
    std::string_view rest = parts[3];
    while (!rest.empty() && overrides.size() < 8) {
      const std::size_t nl = rest.find('\n');
      overrides.emplace_back(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    }
  }
  fuzz::expect_ok_or_error([&] {
    Experiment exp = Experiment::load(main_file, overrides);
    (void)exp.merged_text();
    PluginHost host;
    ResolvedConfig rc = resolve(exp, host);
    if (rc.text.empty()) std::abort();  // a resolved config always has [run]
  });
  return 0;
}
