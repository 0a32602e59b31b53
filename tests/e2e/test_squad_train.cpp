// test_squad_train.cpp - `bertx run` fine-tunes the tiny BERT (preset "tiny", random weights) with the
// squad task and reader on a synthetic span-extraction set whose rule is learnable: the answer is the one
// colour in a paragraph of filler words, with its modifier when there is one ("dark red"); v2.0 adds
// paragraphs without a colour (no answer). The held-out split must reach F1 >= 90, the prediction files must
// cover it, and `bertx eval squad` on those files must give the metrics the run logged.
#include <doctest/doctest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertx/rng.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using nlohmann::json;

namespace {

// `n` one-question paragraphs; v2: 30% have no colour (is_impossible).
json synthetic_squad(int n, std::uint64_t seed, bool v2, const std::string& prefix) {
  static const std::vector<std::string> filler{
      "the",   "a",       "house",   "river", "stone",  "walked", "over",    "under",  "quickly",
      "small", "large",   "old",     "city",  "road",   "near",   "far",     "and",    "with",
      "tree",  "bird",    "dog",     "cat",   "man",    "woman",  "child",   "boat",   "sea",
      "hill",  "morning", "evening", "bread", "window", "garden", "village", "market", "bridge"};
  static const std::vector<std::string> colours{"red",   "blue",  "green", "yellow", "purple", "orange",
                                                "white", "black", "brown", "pink",   "grey"};
  static const std::vector<std::string> mods{"dark", "light", "bright", "pale"};
  static const std::vector<std::string> questions{"What colour is mentioned?", "Which colour appears in the text?",
                                                  "Name the colour.", "What is the colour?"};
  std::uint64_t s = seed;
  auto pick = [&](const std::vector<std::string>& v) { return v[bertx::splitmix64(s) % v.size()]; };
  json data = json::array();
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> words;
    const int len = 12 + static_cast<int>(bertx::splitmix64(s) % 29);
    for (int w = 0; w < len; ++w) words.push_back(pick(filler));
    const bool impossible = v2 && bertx::splitmix64(s) % 10 < 3;
    std::string answer = pick(colours);
    if (bertx::splitmix64(s) % 10 < 3) answer = pick(mods) + " " + answer;
    const auto pos = static_cast<std::size_t>(bertx::splitmix64(s) % static_cast<std::uint64_t>(len + 1));
    if (!impossible) words.insert(words.begin() + static_cast<std::ptrdiff_t>(pos), answer);
    words[0][0] = static_cast<char>(std::toupper(words[0][0]));  // "Dark red" when it opens the paragraph
    std::string context;
    std::size_t start = 0;
    for (std::size_t w = 0; w < words.size(); ++w) {
      if (w) context += " ";
      if (w == pos) start = context.size();
      context += words[w];
    }
    context += ".";
    json answers = json::array();
    if (!impossible) answers.push_back({{"text", context.substr(start, answer.size())}, {"answer_start", start}});
    json qa = {{"id", prefix + std::to_string(i)}, {"question", pick(questions)}, {"answers", answers}};
    if (v2) qa["is_impossible"] = impossible;
    data.push_back({{"title", prefix + std::to_string(i)},
                    {"paragraphs", json::array({{{"context", context}, {"qas", json::array({qa})}}})}});
  }
  return {{"version", v2 ? "v2.0" : "1.1"}, {"data", data}};
}

std::string experiment(const bertx::test::TempDir& d, bool v2) {
  bertx::test::write_text(d / "train.json", synthetic_squad(1200, 1, v2, "train-").dump());
  bertx::test::write_text(d / "eval.json", synthetic_squad(120, 2, v2, "eval-").dump());
  bertx::test::write_text(
      d / "exp.toml",
      "[run]\nname = \"squad-e2e\"\nseed = 1\nthreads = 1\ndevice = \"cpu\"\noutput_dir = \"" + (d / "out") +
          "\"\nstore = \"" + (d / "runs.db") +
          "\"\n[train]\nepochs = 1\nbatch_size = 16\nlearning_rate = 1e-3\nwarmup_proportion = 0.1\n"
          "decay_power = 1.0\nlog_freq = 25\neval = true\npredict = true\nnum_steps_per_checkpoint = 1000\n"
          "[model]\ntype = \"bert\"\npreset = \"tiny\"\n[optimizer]\ntype = \"adamw\"\n[task]\ntype = \"squad\"\n"
          "[data]\ntype = \"squad\"\ntrain_file = \"" +
          (d / "train.json") + "\"\neval_file = \"" + (d / "eval.json") + "\"\nvocab = \"" + BERTX_SOURCE_DIR +
          "/experiments/vocab/bert-base-uncased.txt\"\nversion_2_with_negative = " + (v2 ? "true" : "false") +
          "\nmax_seq_length = 64\ndoc_stride = 32\nmax_query_length = 16\n");
  return d / "exp.toml";
}

double logged(const std::string& store_path, const std::string& name) {
  auto store = bertx::RunStore::open(store_path);
  const auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  const auto rows = store->metrics(runs[0].id, name);
  REQUIRE_MESSAGE(rows.size() == 1, name);
  return rows[0].value;
}

json last_json_line(const std::string& output) {
  std::string s = output;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return json::parse(s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1));
}

void check_prediction_files(const bertx::test::TempDir& d, bool v2) {
  const json preds = json::parse(bertx::test::read_text(d / "out/predictions.json"));
  const json nbest = json::parse(bertx::test::read_text(d / "out/nbest_predictions.json"));
  CHECK(preds.size() == 120);
  CHECK(nbest.size() == 120);
  for (const auto& [id, list] : nbest.items()) {
    INFO("question " << id);
    CHECK(preds.contains(id));
    REQUIRE(!list.empty());
    CHECK(list.size() <= 20);
    double total = 0;
    for (const auto& e : list) total += e.at("probability").get<double>();
    CHECK(std::abs(total - 1.0) < 1e-6);
    if (!v2) CHECK(list[0].at("text") == preds.at(id));
  }
  CHECK(std::filesystem::exists(d / "out/null_odds.json") == v2);
}

}  // namespace

TEST_CASE("fine-tuning the tiny model on synthetic SQuAD v1.1 reaches F1 >= 90 on held-out questions") {
  bertx::test::TempDir d;
  auto r = bertx::test::run_command(std::string(BERTX_BIN) + " run " + experiment(d, false));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const double f1 = logged(d / "runs.db", "eval_f1"), em = logged(d / "runs.db", "eval_exact_match");
  MESSAGE("synthetic v1.1: eval F1 " << f1 << ", exact match " << em);
  CHECK(f1 >= 90.0);
  check_prediction_files(d, false);
  // The official-equivalent CLI on the written files gives the logged metrics.
  auto e = bertx::test::run_command(std::string(BERTX_BIN) + " eval squad --dataset " + (d / "eval.json") +
                                    " --predictions " + (d / "out/predictions.json"));
  INFO(e.output);
  REQUIRE(e.exit_code == 0);
  const json got = last_json_line(e.output);
  CHECK(got.at("f1").get<double>() == doctest::Approx(f1).epsilon(1e-12));
  CHECK(got.at("exact_match").get<double>() == doctest::Approx(em).epsilon(1e-12));
}

TEST_CASE("fine-tuning on synthetic SQuAD v2.0 (30% unanswerable) reaches F1 >= 90 and writes null odds") {
  bertx::test::TempDir d;
  auto r = bertx::test::run_command(std::string(BERTX_BIN) + " run " + experiment(d, true));
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const double f1 = logged(d / "runs.db", "eval_f1"), best_f1 = logged(d / "runs.db", "eval_best_f1");
  MESSAGE("synthetic v2.0: eval F1 " << f1 << ", HasAns F1 " << logged(d / "runs.db", "eval_HasAns_f1") << ", NoAns F1 "
                                     << logged(d / "runs.db", "eval_NoAns_f1") << ", best F1 " << best_f1);
  CHECK(f1 >= 90.0);
  check_prediction_files(d, true);
  auto e = bertx::test::run_command(std::string(BERTX_BIN) + " eval squad --dataset " + (d / "eval.json") +
                                    " --predictions " + (d / "out/predictions.json") + " --na-prob-file " +
                                    (d / "out/null_odds.json") + " --na-prob-thresh 0.0");
  INFO(e.output);
  REQUIRE(e.exit_code == 0);
  const json got = last_json_line(e.output);
  CHECK(got.at("f1").get<double>() == doctest::Approx(f1).epsilon(1e-12));
  CHECK(got.at("best_f1").get<double>() == doctest::Approx(best_f1).epsilon(1e-12));
}

TEST_CASE(
    "[task] loss_over_padding: the first loss is over all 64 positions (~ln 64), by default over the real tokens") {
  // At initialisation the tiny model's span logits are nearly flat, so each cross-entropy is ~ln(positions it
  // softmaxes over): ln 64 = 4.16 with the padding (run_squad, HF), ~ln 35 over the synthetic windows' real tokens.
  auto first_loss = [](bool over_padding) {
    bertx::test::TempDir d;
    auto r = bertx::test::run_command(std::string(BERTX_BIN) + " run " + experiment(d, false) +
                                      " --set train.epochs=0 --set train.max_steps=1 --set train.log_freq=1 --set "
                                      "train.eval=false --set train.predict=false"
                                      " --set task.loss_over_padding=" +
                                      (over_padding ? "true" : "false"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return logged(d / "runs.db", "loss");
  };
  const double all = first_loss(true), real = first_loss(false);
  MESSAGE("first step loss: over all positions " << all << ", over real tokens " << real);
  CHECK(std::abs(all - std::log(64.0)) < 0.25);
  CHECK(real < all - 0.3);
}
