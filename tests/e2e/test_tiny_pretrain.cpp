// test_tiny_pretrain.cpp - the learning check of the bundled default: experiments/tiny_pretrain.toml on the
// bundled corpus, prepared as tools/run_tiny prepares it, with its default steps and seed, must lower the
// MLM loss by at least 30% (held-out eval loss at the end vs the first step's training loss) and raise the
// MLM accuracy past the unigram stage (measured at 1,200 steps: 10.3 -> 5.81 held-out, -44%; held-out accuracy
// 0.143, the unigram stage ~0.05-0.07). A real training run on the CPU (~3.5 minutes on 2 Xeon cores, 7.4-10.4 on
// 2 AVX2-only EPYC cores): label slow, alone on the cores (tests/CMakeLists.txt says why).
#include <doctest/doctest.h>

#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;

static const std::string kBertx = BERTX_BIN;
static const std::string kSrc = BERTX_SOURCE_DIR;

static void prepare(const std::string& corpus, const std::string& out, int dupe, int seed) {
  auto r =
      test::run_command(kBertx + " data pretrain --input " + kSrc + "/experiments/corpus/" + corpus + " --vocab " +
                        kSrc + "/experiments/vocab/bert-base-uncased.txt --seq-len 128 --max-preds 20 --dupe-factor " +
                        std::to_string(dupe) + " --seed " + std::to_string(seed) + " --out " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

TEST_CASE("the tiny default pre-training lowers the MLM loss by at least 30 percent") {
  test::TempDir d;
  prepare("python_docs.txt", d / "train", 5, 12345);  // the same arguments as tools/run_tiny
  prepare("python_docs_eval.txt", d / "eval", 2, 54321);
  auto r = test::run_command(kBertx + " run " + kSrc + "/experiments/tiny_pretrain.toml --set run.output_dir=" +
                             (d / "out") + " --set run.store=" + (d / "runs.db") + " --set data.dir=" + (d / "train") +
                             " --set data.eval_dir=" + (d / "eval") + " --set train.log_freq=1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto store = RunStore::open(d / "runs.db");
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Finished);
  const auto train_loss = store->metrics(runs[0].id, "mlm_loss");
  const auto eval_loss = store->metrics(runs[0].id, "eval_mlm_loss");
  const auto eval_acc = store->metrics(runs[0].id, "eval_mlm_accuracy");
  const auto train_acc = store->metrics(runs[0].id, "mlm_accuracy");
  REQUIRE(train_loss.size() >= 100);
  REQUIRE(eval_loss.size() >= 2);  // every 400 steps and at the end
  const double first = train_loss.front().value, last_eval = eval_loss.back().value;
  MESSAGE("MLM loss: first step " << first << ", held-out at step " << eval_loss.back().step << ": " << last_eval
                                  << "; held-out MLM accuracy " << eval_acc.back().value);
  CHECK(first > 9.5);  // ~ln(30522) = 10.3 at initialisation
  CHECK(last_eval <= 0.7 * first);
  CHECK(eval_acc.back().value > train_acc.front().value + 0.1);  // measured: 0.0 -> 0.143
}
