// test_plugins.cpp - the plugin host loads, refuses and builds as promised; experiment tables are
// validated against a plugin's schema.
#include "doctest_torch.hpp"

#include <ATen/ATen.h>

#include "bertx/optimizer.hpp"
#include "host/config.hpp"
#include "host/plugin_host.hpp"
#include "test_util.hpp"

#include <filesystem>
namespace fs = std::filesystem;

using namespace bertx;
using bertx::test::error_of;

static const std::string kDir = BERTX_TEST_PLUGIN_DIR;
static std::string lib(const std::string& name) { return kDir + "/lib" + name + ".so"; }

TEST_CASE("a good plugin is loaded, its optimizer is built from options and used") {
  PluginHost host;
  const LoadedPlugin& p = host.load(lib("bertx_test_good"));
  CHECK(p.name == "test_plugin");
  CHECK(p.version == "1.2.3");
  CHECK(p.api_version == BERTX_PLUGIN_API_VERSION);
  REQUIRE(host.entries(Kind::Optimizer).size() == 2);
  CHECK(host.find(Kind::Optimizer, "test_sgd").plugin->name == "test_plugin");

  auto opt = host.create<Optimizer>(Kind::Optimizer, "test_sgd",
                                    Options("[optimizer]", {{"lr_scale", 0.5}, {"verbose", false}}));
  at::Tensor w = at::tensor({1.0f, 2.0f, 3.0f}).requires_grad_(true);
  w.mutable_grad() = at::tensor({1.0f, -2.0f, 4.0f});
  opt->add_param_group(ParamGroup{{"w"}, {w}, 0.0});
  opt->step(0.1);  // w -= 0.1 * 0.5 * grad
  CHECK(w.allclose(at::tensor({0.95f, 2.1f, 2.8f})));
  CHECK(opt->state_dict().at("step").item<std::int64_t>() == 1);
}

TEST_CASE("built objects keep their plugin library loaded after the host is gone") {
  std::shared_ptr<Optimizer> opt;
  {
    PluginHost host;
    host.load(lib("bertx_test_good"));
    opt = host.create<Optimizer>(Kind::Optimizer, "test_sgd",
                                 Options("[optimizer]", {{"lr_scale", 1.0}, {"verbose", false}}));
  }
  at::Tensor w = at::ones({2}).requires_grad_(true);
  w.mutable_grad() = at::ones({2});
  opt->add_param_group(ParamGroup{{"w"}, {w}, 0.0});
  opt->step(1.0);  // would crash if the library had been unloaded
  CHECK(w.abs().sum().item<float>() == doctest::Approx(0.0));
}

TEST_CASE("a plugin built for another API version is refused, naming both versions") {
  PluginHost host;
  const std::string msg = error_of([&] { host.load(lib("bertx_test_wrong_api")); });
  CHECK(msg.find("libbertx_test_wrong_api.so") != std::string::npos);
  CHECK(msg.find("plugin API version " + std::to_string(BERTX_PLUGIN_API_VERSION + 99)) != std::string::npos);
  CHECK(msg.find("this bertx speaks version " + std::to_string(BERTX_PLUGIN_API_VERSION)) != std::string::npos);
  CHECK(host.plugins().empty());
}

TEST_CASE("a shared library that is not a plugin is refused") {
  PluginHost host;
  const std::string msg = error_of([&] { host.load(lib("bertx_test_not_a_plugin")); });
  CHECK(msg.find("not a bertx plugin") != std::string::npos);
  CHECK(msg.find("bertx_plugin_entry") != std::string::npos);
}

TEST_CASE("a file that is not a shared library is refused with the loader's reason") {
  test::TempDir dir;
  test::write_text(dir / "libfake.so", "this is text, not ELF");
  PluginHost host;
  const std::string msg = error_of([&] { host.load(dir / "libfake.so"); });
  CHECK(msg.find("cannot load shared library") != std::string::npos);
  CHECK(msg.find("libfake.so") != std::string::npos);
}

TEST_CASE("a register function that throws is contained and leaves no builders behind") {
  PluginHost host;
  const std::string msg = error_of([&] { host.load(lib("bertx_test_bad_register")); });
  CHECK(msg.find("failed to register: cannot find my data files") != std::string::npos);
  CHECK(host.entries(Kind::Task).empty());
  CHECK(host.plugins().empty());
}

TEST_CASE("scanning a folder loads the good plugin and records every refusal") {
  PluginHost host;
  host.scan({kDir});
  REQUIRE(host.plugins().size() == 1);
  CHECK(host.plugins()[0]->name == "test_plugin");
  CHECK(host.problems().size() == 3);
}

TEST_CASE("unknown names list the available ones and factory errors name the plugin") {
  PluginHost host;
  host.load(lib("bertx_test_good"));
  CHECK(error_of([&] { host.find(Kind::Optimizer, "adamx"); }) ==
        "unknown optimizer 'adamx'; available: test_sgd, test_throwing");
  CHECK(error_of([&] { host.find(Kind::Model, "bert"); }).find("unknown model 'bert'; available: none") == 0);
  CHECK(error_of([&] { host.create_any(Kind::Optimizer, "test_throwing", Options()); }) ==
        "optimizer 'test_throwing' (plugin test_plugin): lr_scale must be positive");
}

TEST_CASE("the search path adds $BERTX_PLUGIN_PATH folders but never the current folder") {
  setenv("BERTX_PLUGIN_PATH", "/opt/a::/opt/b:", 1);
  const auto path = PluginHost::default_search_path();
  const auto folders = PluginHost::search_folders();
  unsetenv("BERTX_PLUGIN_PATH");
  REQUIRE(!path.empty());
  CHECK(fs::weakly_canonical(path.front()) ==
        fs::weakly_canonical(BERTX_BUILD_PLUGIN_DIR));  // beside build/lib/libbertx_core.so
  CHECK(folders.front().origin == "folder beside libbertx_core");
  CHECK(std::find(path.begin(), path.end(), "/opt/a") != path.end());
  CHECK(std::find(path.begin(), path.end(), "/opt/b") != path.end());
  CHECK(folders.back().origin == "$BERTX_PLUGIN_PATH");
  CHECK(std::find(path.begin(), path.end(), "") == path.end());
  // "." or a relative folder would load whatever the current directory holds: refused by name.
  for (const char* relative : {".", "plugins", "./x"}) {
    setenv("BERTX_PLUGIN_PATH", (std::string("/opt/a:") + relative).c_str(), 1);
    const std::string msg = error_of([] { PluginHost::default_search_path(); });
    unsetenv("BERTX_PLUGIN_PATH");
    CHECK(msg.rfind(std::string("$BERTX_PLUGIN_PATH entry '") + relative +
                        "' is not an absolute path: plugins are never loaded",
                    0) == 0);
  }
}

TEST_CASE("experiment tables are validated against the plugin's schema") {
  PluginHost host;
  host.load(lib("bertx_test_good"));
  test::TempDir dir;
  const std::string f = dir / "exp.toml";

  test::write_text(f, "[run]\nname = \"t\"\n[optimizer]\ntype = \"test_sgd\"\nlr_scale = 2\n");
  ResolvedConfig rc = resolve(Experiment::load(f), host);
  REQUIRE(rc.components.count("optimizer") == 1);
  CHECK(rc.components.at("optimizer").type == "test_sgd");
  CHECK(rc.components.at("optimizer").options.get_float("lr_scale") == 2.0);  // integer accepted as float
  CHECK(rc.components.at("optimizer").options.get_bool("verbose") == false);  // default filled
  CHECK(rc.text.find("lr_scale = 2.0") != std::string::npos);

  test::write_text(f, "[run]\nname = \"t\"\n[optimizer]\ntype = \"test_sgd\"\nlr_scael = 2\n");
  CHECK(error_of([&] { resolve(Experiment::load(f), host); }) ==
        f + ":5:1: unknown key 'lr_scael' in [optimizer] (optimizer 'test_sgd'); did you mean 'lr_scale'? known keys: "
            "lr_scale, verbose");

  test::write_text(f, "[run]\nname = \"t\"\n[optimizer]\ntype = \"test_sgd\"\nverbose = \"yes\"\n");
  CHECK(error_of([&] { resolve(Experiment::load(f), host); }).find(f + ":5:") == 0);
  CHECK(error_of([&] { resolve(Experiment::load(f), host); }).find("verbose: expected boolean, got string") !=
        std::string::npos);

  test::write_text(f, "[run]\nname = \"t\"\n[optimizer]\ntype = \"sgd\"\n");
  CHECK(error_of([&] { resolve(Experiment::load(f), host); }) ==
        f + ":4:1: [optimizer] unknown optimizer 'sgd'; available: test_sgd, test_throwing");

  test::write_text(f, "[run]\nname = \"t\"\n[optimizer]\ntype = \"test_sgd\"\n");
  CHECK(error_of([&] { resolve(Experiment::load(f, {"optimizer.lr_scale=fast"}), host); }) ==
        "--set optimizer.lr_scale=fast: [optimizer] (optimizer 'test_sgd') lr_scale: expected float, got string "
        "(multiplies the learning rate)");
}
