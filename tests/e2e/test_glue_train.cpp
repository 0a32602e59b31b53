// test_glue_train.cpp - `bertx run` fine-tuning end to end on the CPU: the tiny preset learns a synthetic
// sentence-pair task in MRPC layout (label 1 iff both sentences are about the same topic: an XOR of the two
// sides, so the model must look at both; it sits at chance for ~60 steps, then learns) to >= 95% dev accuracy, and prediction mode writes MRPC.tsv with
// the test file's index column and label names. Also: do_train = false scores given weights only.
#include <doctest/doctest.h>

#include <cstdint>
#include <sstream>

#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;

namespace {

const char* kTopics[2][8] = {{"cat", "dog", "horse", "cow", "sheep", "bird", "fish", "mouse"},
                             {"red", "blue", "green", "yellow", "black", "white", "brown", "pink"}};

struct Pair {
  std::string a, b;
  int label;
};

// Deterministic pairs: topics of A and B drawn independently, 3-6 words each.
std::vector<Pair> make_pairs(int n, std::uint64_t seed) {
  std::uint64_t s = seed;
  auto next = [&](std::uint64_t m) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (s >> 33) % m;
  };
  auto sentence = [&](int topic) {
    std::string out;
    for (std::uint64_t w = 0, len = 3 + next(4); w < len; ++w)
      out += (w ? " " : "") + std::string(kTopics[topic][next(8)]);
    return out;
  };
  std::vector<Pair> v;
  for (int i = 0; i < n; ++i) {
    const int ta = static_cast<int>(next(2)), tb = static_cast<int>(next(2));
    v.push_back({sentence(ta), sentence(tb), ta == tb ? 1 : 0});
  }
  return v;
}

// MRPC layout: train/dev "Quality #1 ID #2 ID #1 String #2 String"; test "index #1 ID #2 ID #1 String #2 String".
void write_mrpc(const std::string& path, const std::vector<Pair>& pairs, bool test) {
  std::ostringstream o;
  o << (test ? "index" : "Quality") << "\t#1 ID\t#2 ID\t#1 String\t#2 String\n";
  for (std::size_t i = 0; i < pairs.size(); ++i)
    o << (test ? static_cast<int>(i) + 100 : pairs[i].label) << '\t' << 2 * i << '\t' << 2 * i + 1 << '\t' << pairs[i].a
      << '\t' << pairs[i].b << '\n';
  test::write_text(path, o.str());
}

std::string experiment(const test::TempDir& d) {
  write_mrpc(d / "data/train.tsv", make_pairs(640, 1), false);
  write_mrpc(d / "data/dev.tsv", make_pairs(200, 2), false);
  write_mrpc(d / "data/test.tsv", make_pairs(100, 3), true);
  test::write_text(
      d / "exp.toml",
      "[run]\nname = \"glue-e2e\"\nseed = 3\nthreads = 1\ndevice = \"cpu\"\noutput_dir = \"" + (d / "out") +
          "\"\nstore = \"" + (d / "runs.db") +
          "\"\n[train]\nepochs = 8\nbatch_size = 32\nlearning_rate = 1e-3\nwarmup_proportion = 0.1\n"
          "decay_power = 1.0\nlog_freq = 20\neval = true\npredict = true\nnum_steps_per_checkpoint = 1000\n"
          "[model]\ntype = \"bert\"\npreset = \"tiny\"\n[optimizer]\ntype = \"adamw\"\n"
          "[task]\ntype = \"classification\"\nglue_task = \"mrpc\"\n"
          "[data]\ntype = \"glue\"\ntask = \"mrpc\"\ndata_dir = \"" +
          (d / "data") +
          "\"\nvocab = \"" BERTX_SOURCE_DIR "/experiments/vocab/bert-base-uncased.txt\"\nmax_seq_length = 32\n");
  return d / "exp.toml";
}

double last_metric(const std::string& store_path, const std::string& name) {
  auto store = RunStore::open(store_path);
  auto runs = store->list_runs();
  REQUIRE(!runs.empty());
  auto rows = store->metrics(runs.front().id, name);
  REQUIRE(!rows.empty());
  return rows.back().value;
}

}  // namespace

TEST_CASE("the tiny model learns a synthetic sentence-pair task and writes the GLUE submission file") {
  test::TempDir d;
  const std::string exp = experiment(d);
  auto r = test::run_command(std::string(BERTX_BIN) + " run " + exp);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const double accuracy = last_metric(d / "runs.db", "eval_accuracy");
  MESSAGE("dev accuracy " << accuracy << ", F1 " << last_metric(d / "runs.db", "eval_f1"));
  CHECK(accuracy >= 0.95);
  CHECK(last_metric(d / "runs.db", "eval_f1") >= 0.9);

  // MRPC.tsv: header, then one row per test example with its index column and label name, mostly right.
  std::istringstream in(test::read_text(d / "out/MRPC.tsv"));
  std::string line;
  REQUIRE(std::getline(in, line));
  CHECK(line == "index\tprediction");
  const auto truth = make_pairs(100, 3);
  int rows = 0, right = 0;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    CHECK(std::stoi(line.substr(0, tab)) == rows + 100);
    const std::string label = line.substr(tab + 1);
    CHECK((label == "0" || label == "1"));
    right += std::stoi(label) == truth[static_cast<std::size_t>(rows)].label;
    ++rows;
  }
  CHECK(rows == 100);
  CHECK(right >= 90);

  // Evaluation only, from the fine-tuned checkpoint: the same dev accuracy, no training steps.
  auto e = test::run_command(
      std::string(BERTX_BIN) + " run " + exp + " --set run.name=glue-eval --set run.output_dir=" + (d / "eval") +
      " --set train.do_train=false --set train.predict=false --set train.from_pretrained=" + (d / "out/bert/phase1"));
  INFO(e.output);
  REQUIRE(e.exit_code == 0);
  auto store = RunStore::open(d / "runs.db");
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 2);
  for (const auto& run : runs)
    if (run.name == "glue-eval")
      CHECK(store->metrics(run.id, "eval_accuracy").back().value == doctest::Approx(accuracy).epsilon(1e-9));
}
