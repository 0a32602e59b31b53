// test_cli.cpp - the `bertx` binary as a user runs it: --version, run --dry-run of the bundled default
// experiment, one-line errors with file:line, plugins listing, runs list/show over a recorded store.
#include <doctest/doctest.h>

#include "bertx/version.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using bertx::test::run_command;

static const std::string kBertx = BERTX_BIN;
static const std::string kSrc = BERTX_SOURCE_DIR;

TEST_CASE("bertx --version names the plugin API and LibTorch versions") {
  auto r = run_command(kBertx + " --version");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("plugin API " + std::to_string(BERTX_PLUGIN_API_VERSION)) != std::string::npos);
  CHECK(r.output.find("LibTorch ") != std::string::npos);
}

TEST_CASE("the bundled default experiment validates and prints its resolved config") {
  auto r = run_command(kBertx + " run " + kSrc + "/experiments/tiny_pretrain.toml --dry-run --set run.seed=123");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("# config hash ") != std::string::npos);
  CHECK(r.output.find("[run]") != std::string::npos);
  CHECK(r.output.find("seed = 123") != std::string::npos);
}

TEST_CASE("a bad experiment fails with one line naming file:line and exit code 2") {
  bertx::test::TempDir d;
  bertx::test::write_text(d / "bad.toml", "[run]\nname = \"x\"\nthreads = \"many\"\n");
  auto r = run_command(kBertx + " run " + (d / "bad.toml") + " --dry-run");
  CHECK(r.exit_code == 2);
  CHECK(r.output == "bertx: error: " + (d / "bad.toml") +
                        ":3:1: [run] threads: expected integer, got string (intra-op CPU threads; 0 = one per core)\n");
}

TEST_CASE("bertx plugins shows loaded plugins with path and version, and refused ones with a reason") {
  auto r = run_command("BERTX_PLUGIN_PATH=" + std::string(BERTX_TEST_PLUGIN_DIR) + " " + kBertx + " plugins -v");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("test_plugin 1.2.3 (API " + std::to_string(BERTX_PLUGIN_API_VERSION) + ")") != std::string::npos);
  CHECK(r.output.find("optimizer test_sgd: plain SGD for tests") != std::string::npos);
  CHECK(r.output.find("lr_scale (float, default 1): multiplies the learning rate") != std::string::npos);
  CHECK(r.output.find("refused:") != std::string::npos);
  CHECK(r.output.find("not a bertx plugin") != std::string::npos);
  CHECK(r.output.find("rebuild the plugin") != std::string::npos);
}

TEST_CASE("a plugin library in the current directory is not loaded and bertx plugins says where each came from") {
  bertx::test::TempDir d;
  std::filesystem::copy_file(std::string(BERTX_TEST_PLUGIN_DIR) + "/libbertx_test_good.so",
                             d / "libbertx_test_good.so");
  auto here = run_command("cd " + d.path.string() + " && " + kBertx + " plugins");
  INFO(here.output);
  CHECK(here.exit_code == 0);
  CHECK(here.output.find("test_plugin") == std::string::npos);
  CHECK(here.output.find("never the current directory") != std::string::npos);
  CHECK(here.output.find("/libbertx_model_bert.so  (from the folder beside libbertx_core)") != std::string::npos);

  auto dot = run_command("cd " + d.path.string() + " && BERTX_PLUGIN_PATH=. " + kBertx + " plugins");
  CHECK(dot.exit_code == 2);
  CHECK(dot.output.find("bertx: error: $BERTX_PLUGIN_PATH entry '.' is not an absolute path") == 0);

  auto named = run_command("BERTX_PLUGIN_PATH=" + d.path.string() + " " + kBertx + " plugins");
  INFO(named.output);
  CHECK(named.output.find("test_plugin 1.2.3 (API " + std::to_string(BERTX_PLUGIN_API_VERSION) + ")  " +
                          (d / "libbertx_test_good.so") + "  (from the $BERTX_PLUGIN_PATH)") != std::string::npos);
}

TEST_CASE("bertx runs list and show read what the store recorded") {
  bertx::test::TempDir d;
  {
    auto store = bertx::RunStore::open(d / "s.db");
    bertx::NewRun nr;
    nr.name = "listed";
    nr.seed = 5;
    nr.config = "[run]\nname = \"listed\"\n";
    nr.config_hash = "00000000deadbeef";
    const auto id = store->begin_run(nr);
    store->log_metrics(id, 1, {{"loss", 3.0}});
    store->log_metrics(id, 2, {{"loss", 2.0}});
    store->finish_run(id, bertx::RunStatus::Finished);
  }
  auto list = run_command(kBertx + " runs --store " + (d / "s.db") + " list");
  INFO(list.output);
  CHECK(list.exit_code == 0);
  CHECK(list.output.find("listed") != std::string::npos);
  CHECK(list.output.find("finished") != std::string::npos);
  CHECK(list.output.find("1 run(s)") != std::string::npos);
  auto none = run_command(kBertx + " runs --store " + (d / "s.db") + " list --status failed");
  CHECK(none.output.find("0 run(s)") != std::string::npos);
  auto show = run_command(kBertx + " runs --store " + (d / "s.db") + " show 1");
  INFO(show.output);
  CHECK(show.exit_code == 0);
  CHECK(show.output.find("deadbeef") != std::string::npos);
  CHECK(show.output.find("loss") != std::string::npos);
  CHECK(show.output.find("n=2") != std::string::npos);
  auto missing = run_command(kBertx + " runs --store " + (d / "s.db") + " show 99");
  CHECK(missing.exit_code == 2);
  CHECK(missing.output.find("no run with id 99") != std::string::npos);
}
