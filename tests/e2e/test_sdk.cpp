// test_sdk.cpp - the plugin SDK end to end, as a user outside the bertx tree meets it: `cmake --install` into a
// prefix, the example token-classification plugin (examples/plugins/token_classification) configured and
// built out of tree against that prefix (find_package(bertx) + bertx_add_plugin), its own unit tests (entity
// F1 against hand-computed values) run through its CTest, the installed `bertx plugins` listing it from
// $BERTX_PLUGIN_PATH (and its own plugins from the prefix, none from the build tree), a plugin built for
// another API version refused naming both versions, and a tiny NER fine-tune on the bundled synthetic BIO set
// reaching entity F1 >= 0.9; the BioBERT recipes (experiments/biobert) pass --dry-run. The prefix and the example's build folder live under the build tree
// (sdk-test/), so a rerun rebuilds only what changed (and ccache serves the rest).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "bertx/version.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

const std::string kBuild = BERTX_BUILD_DIR;
const std::string kSource = BERTX_SOURCE_DIR;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

test::CommandResult run(const std::string& cmd) {
  auto r = test::run_command("(" + cmd + ")");
  INFO(cmd);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return r;
}

// `cmake -S src -B build` against `prefix`, as a user configures a plugin, with the tree's compiler and its ccache
// launcher (hashing paths relative to the source tree, so a CI clone elsewhere reuses the objects compiled before).
void configure(const std::string& src, const std::string& build, const std::string& prefix) {
  std::string joined = CXX_LAUNCHER;
  std::replace(joined.begin(), joined.end(), '|', ';');
  const std::string& launcher = joined;
  run(std::string(CMAKE_COMMAND) + " -S " + quoted(src) + " -B " + quoted(build) + " -G " + quoted(CMAKE_GENERATOR) +
      " -DCMAKE_MAKE_PROGRAM=" + quoted(CMAKE_MAKE_PROGRAM) + " -DCMAKE_CXX_COMPILER=" + quoted(CMAKE_CXX_COMPILER) +
      (launcher.empty() ? "" : " -DCMAKE_CXX_COMPILER_LAUNCHER=" + quoted(launcher)) +
      " -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH=" + quoted(prefix));
  run(std::string(CMAKE_COMMAND) + " --build " + quoted(build) + " -j 2");
}

double last_metric(const std::string& store_path, const std::string& name) {
  auto store = RunStore::open(store_path);
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  auto rows = store->metrics(runs.front().id, name);
  REQUIRE(!rows.empty());
  return rows.back().value;
}

}  // namespace

TEST_CASE("an out-of-tree plugin built against the installed SDK loads, trains and scores") {
  const std::string root = kBuild + "/sdk-test", prefix = root + "/prefix", ner = root + "/token_classification";
  const std::string example = kSource + "/examples/plugins/token_classification";

  // 1. Install, then configure and build the example against the prefix only (no path into the bertx tree).
  // (Installing over an earlier install keeps unchanged files' times, so the example rebuilds only what changed.)
  run(std::string(CMAKE_COMMAND) + " --install " + quoted(kBuild) + " --prefix " + quoted(prefix));
  CHECK(fs::exists(prefix + "/include/bertx/plugin.hpp"));
  CHECK(fs::exists(prefix + "/lib/cmake/bertx/bertxConfig.cmake"));
  CHECK(fs::exists(prefix + "/lib/bertx/plugins/libbertx_model_bert.so"));
  configure(example, ner, prefix);
  REQUIRE(fs::exists(ner + "/plugins/libbertx_token_classification.so"));

  // 2. The example's own tests: entity precision / recall / F1 against hand-computed values, parsing, features.
  const auto unit = run(std::string(CTEST_COMMAND) + " --test-dir " + quoted(ner) + " --output-on-failure");
  CHECK(unit.output.find("100% tests passed") != std::string::npos);

  // 3. The installed bertx lists the plugin from $BERTX_PLUGIN_PATH and its own from the prefix.
  const std::string bertx = prefix + "/bin/bertx";
  const auto listing = run("BERTX_PLUGIN_PATH=" + quoted(ner + "/plugins") + " " + quoted(bertx) + " plugins").output;
  INFO(listing);
  CHECK(listing.find("token_classification 0.1.0 (API " + std::to_string(BERTX_PLUGIN_API_VERSION) + ")  " +
                     fs::weakly_canonical(ner + "/plugins/libbertx_token_classification.so").string()) !=
        std::string::npos);
  CHECK(listing.find("task token_classification: ") != std::string::npos);
  CHECK(listing.find("dataset bio_tsv: ") != std::string::npos);
  CHECK(listing.find(fs::weakly_canonical(prefix + "/lib/bertx/plugins/libbertx_model_bert.so").string()) !=
        std::string::npos);
  CHECK(listing.find(kBuild + "/lib/bertx/plugins") == std::string::npos);  // never the build tree's plugins
  CHECK(listing.find("refused:") == std::string::npos);

  // 4. A plugin built for another API version, dropped into a folder on the path, is refused naming both versions.
  test::TempDir d;
  fs::create_directories(d / "wrong");
  fs::copy_file(BERTX_TEST_PLUGIN_DIR "/libbertx_test_wrong_api.so", d / "wrong/libbertx_test_wrong_api.so");
  const auto refused = run("BERTX_PLUGIN_PATH=" + quoted(d / "wrong") + " " + quoted(bertx) + " plugins").output;
  CHECK(refused.find("refused:") != std::string::npos);
  CHECK(refused.find("was built for plugin API version " + std::to_string(BERTX_PLUGIN_API_VERSION + 99) +
                     " but this bertx speaks version " + std::to_string(BERTX_PLUGIN_API_VERSION)) !=
        std::string::npos);

  // 5. A tiny NER fine-tune on the bundled synthetic BIO set (random initial weights): entity F1 >= 0.9.
  const auto train =
      run("cd " + quoted(kSource) + " && BERTX_PLUGIN_PATH=" + quoted(ner + "/plugins") + " " + quoted(bertx) +
          " run examples/plugins/token_classification/tiny_ner.toml --set run.output_dir=" + quoted(d / "out") +
          " --set run.store=" + quoted(d / "runs.db"));
  const double f1 = last_metric(d / "runs.db", "eval_f1");
  MESSAGE("entity F1 " << f1 << ", precision " << last_metric(d / "runs.db", "eval_precision") << ", recall "
                       << last_metric(d / "runs.db", "eval_recall") << ", Chemical "
                       << last_metric(d / "runs.db", "eval_f1_Chemical") << ", Disease "
                       << last_metric(d / "runs.db", "eval_f1_Disease"));
  CHECK(f1 >= 0.9);
  CHECK(last_metric(d / "runs.db", "eval_test_f1") >= 0.9);  // the labelled test split, scored while predicting
  // predict = true: the test split's predictions in CoNLL layout (word, gold, predicted), one block per sentence.
  std::istringstream in(test::read_text(d / "out/test_token_predictions.tsv"));
  std::string line;
  int sentences = 0, words = 0, right = 0;
  bool open = false;
  while (std::getline(in, line)) {
    if (line.empty()) {
      sentences += open, open = false;
      continue;
    }
    open = true;
    const auto a = line.find('\t'), b = line.rfind('\t');
    REQUIRE(a != b);
    ++words, right += line.substr(a + 1, b - a - 1) == line.substr(b + 1);
  }
  CHECK(sentences == 200);
  CHECK(right >= 0.9 * words);

  // 6. The BioBERT recipes resolve against the installed plugins + the example (schema, extends, memory estimate).
  for (const char* recipe : {"pretrain_pubmed", "ner", "re", "qa"}) {
    const auto dry = run("cd " + quoted(kSource) + " && BERTX_PLUGIN_PATH=" + quoted(ner + "/plugins") + " " +
                         quoted(bertx) + " run experiments/biobert/" + recipe + ".toml --dry-run");
    CHECK(dry.output.find("# memory estimate per device") != std::string::npos);
  }
}

// The in-tree plugins as a user builds them: plugins/ configured on its own against an installed bertx whose own
// plugins are removed, so nothing of the bertx tree but the plugin sources is used. They load, and a few steps of
// pre-training (bert + pretraining + optimizers), GLUE (classification + glue) and SQuAD (squad) log the same losses
// as the tree's own build of the same plugins.
TEST_CASE("the in-tree plugins build against the installed SDK alone and train as the tree's build does") {
  const std::string root = kBuild + "/sdk-test", prefix = root + "/prefix-bare", out = root + "/plugins-sdk";
  run(std::string(CMAKE_COMMAND) + " --install " + quoted(kBuild) + " --prefix " + quoted(prefix));
  fs::remove_all(prefix + "/lib/bertx/plugins");  // the SDK alone: no plugin of the tree's build
  configure(kSource + "/plugins", out, prefix);

  const std::string bertx = prefix + "/bin/bertx", path = "BERTX_PLUGIN_PATH=" + quoted(out + "/plugins") + " ";
  const auto listing = run(path + quoted(bertx) + " plugins").output;
  INFO(listing);
  for (const char* lib : {"model_bert", "optimizers", "pretraining", "glue", "squad"})
    CHECK(listing.find(fs::weakly_canonical(out + "/plugins/libbertx_" + std::string(lib) + ".so").string()) !=
          std::string::npos);
  CHECK(listing.find("refused:") == std::string::npos);

  // The same short runs with the SDK-built plugins and with the tree's build: the logged losses agree.
  test::TempDir d;
  test::write_text(d / "pretrain.toml",
                   "[run]\nname = \"sdk\"\nthreads = 1\ndevice = \"cpu\"\n[train]\nmax_steps = 3\nbatch_size = 4\n"
                   "log_freq = 1\n[model]\ntype = \"bert\"\npreset = \"tiny\"\n[optimizer]\ntype = \"nvlamb\"\n"
                   "[task]\ntype = \"pretraining\"\n[data]\ntype = \"synthetic\"\nvocab_size = 1100\nseq_len = 32\n"
                   "max_predictions = 5\nsamples_per_epoch = 40\n");
  const std::vector<std::pair<std::string, std::string>> jobs{
      {"pretrain", quoted(d / "pretrain.toml")},
      {"glue",
       "experiments/tiny_finetune.toml --set train.from_pretrained= --set train.epochs=0 "
       "--set train.max_steps=3 --set train.log_freq=1 --set train.eval=false"},
      {"squad",
       "experiments/squad_cpu_smoke.toml --set train.epochs=0 --set train.max_steps=3 --set train.log_freq=1 "
       "--set train.eval=false"}};
  for (const auto& [name, args] : jobs) {
    for (const char* side : {"sdk", "tree"}) {
      const std::string exe = std::string(side) == "sdk" ? path + quoted(bertx) : quoted(kBuild + "/bin/bertx");
      run("cd " + quoted(kSource) + " && " + exe + " run " + args + " --set run.threads=1 --set run.output_dir=" +
          quoted(d / (name + "-" + side)) + " --set run.store=" + quoted(d / (name + "-" + side + ".db")));
    }
    const auto sdk = RunStore::open(d / (name + "-sdk.db")), tree = RunStore::open(d / (name + "-tree.db"));
    const auto a = sdk->metrics(sdk->list_runs().front().id, "loss"),
               b = tree->metrics(tree->list_runs().front().id, "loss");
    INFO(name);
    REQUIRE(a.size() == 3);
    REQUIRE(b.size() == a.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].value == doctest::Approx(b[i].value).epsilon(1e-5));
  }
}
