// test_squad_eval_golden.cpp - parity of bertx's SQuAD evaluation (plugins/squad/squad_eval.hpp, `bertx eval
// squad`) with the official evaluate-v1.1.py / evaluate-v2.0.py on ../shared/golden/squad (MANIFEST.md
// "squad/"): normalize_answer cases, (gold, pred) pairs, per-question scores, and the CLI results of every
// recorded run (v1.1; v2.0 without na-prob file and with thresholds 1.0, 0.0, -1.0), to 1e-9.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "squad_eval.hpp"
#include "test_util.hpp"

using json = nlohmann::ordered_json;  // keeps the scripts' key order
namespace sq = bertx::squad;

namespace {

const std::string kDir = std::string(BERTX_SHARED_DIR) + "/golden/squad";

const json& expected() {
  static const json j = json::parse(bertx::test::read_text(kDir + "/expected.json"));
  return j;
}

// Every key of the official result, same order and values (to 1e-9), no extra keys.
void check_result(const sq::Result& got, const json& want) {
  REQUIRE(got.fields.size() == want.size());
  std::size_t i = 0;
  for (const auto& [k, v] : want.items()) {
    INFO("key " << k);
    CHECK(got.fields[i].first == k);
    CHECK(std::abs(got.fields[i].second.value - v.get<double>()) <= 1e-9);
    CHECK(got.fields[i].second.integer == v.is_number_integer());
    ++i;
  }
}

// The last non-empty line of a command's output.
std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const std::size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace

TEST_CASE("normalize_answer and get_tokens equal the official scripts on every golden case") {
  REQUIRE_MESSAGE(std::filesystem::exists(kDir + "/expected.json"), "golden data missing: " << kDir);
  const json& cases = expected().at("normalize_answer");
  REQUIRE(cases.size() >= 30);
  for (const auto& c : cases) {
    const std::string input = c.at("input").get<std::string>();
    INFO("input '" << input << "'");
    CHECK(sq::normalize_answer(input) == c.at("v1.1").get<std::string>());
    CHECK(sq::normalize_answer(input) == c.at("v2.0").get<std::string>());
    CHECK(sq::answer_tokens(input) == c.at("v2.0_tokens").get<std::vector<std::string>>());
  }
}

TEST_CASE("exact match and F1 of (gold, prediction) pairs equal both scripts") {
  for (const auto& p : expected().at("f1_pairs")) {
    const std::string gold = p.at("gold").get<std::string>(), pred = p.at("pred").get<std::string>();
    INFO("gold '" << gold << "' pred '" << pred << "'");
    CHECK(sq::exact_match_v1(pred, gold) == p.at("v1.1_em").get<bool>());
    CHECK(std::abs(sq::f1_v1(pred, gold) - p.at("v1.1_f1").get<double>()) <= 1e-12);
    CHECK(sq::exact_v2(gold, pred) == p.at("v2.0_exact").get<int>());
    CHECK(std::abs(sq::f1_v2(gold, pred) - p.at("v2.0_f1").get<double>()) <= 1e-12);
  }
}

TEST_CASE("per-question scores equal the scripts' (max over gold answers)") {
  const sq::GoldSet v1 = sq::load_gold(kDir + "/dev-v1.1-subset.json");
  const auto preds1 = sq::load_predictions(kDir + "/predictions-v1.1.json");
  const json& per1 = expected().at("v1.1").at("per_question");
  REQUIRE(per1.size() == v1.questions.size());
  for (const auto& q : v1.questions) {
    INFO("v1.1 question " << q.id);
    const json& want = per1.at(q.id);
    if (want.contains("missing")) {
      CHECK(preds1.count(q.id) == 0);
      continue;
    }
    // Score one question alone: the dataset-level evaluate over a one-question set.
    const sq::Result r = sq::evaluate_v1(sq::GoldSet{"", "1.1", {q}}, preds1);
    CHECK(std::abs(r.at("exact_match") - (want.at("exact_match").get<bool>() ? 100.0 : 0.0)) <= 1e-9);
    CHECK(std::abs(r.at("f1") - 100.0 * want.at("f1").get<double>()) <= 1e-9);
  }

  const sq::GoldSet v2 = sq::load_gold(kDir + "/dev-v2.0-subset.json");
  const auto preds2 = sq::load_predictions(kDir + "/predictions-v2.0.json");
  const json& per2 = expected().at("v2.0").at("per_question");
  REQUIRE(per2.size() == v2.questions.size());
  for (const auto& q : v2.questions) {
    INFO("v2.0 question " << q.id);
    const json& want = per2.at(q.id);
    CHECK(q.answers.empty() != want.at("has_ans").get<bool>());
    const sq::Result r = sq::evaluate_v2(sq::GoldSet{"", "v2.0", {q}}, preds2);
    CHECK(std::abs(r.at("exact") - 100.0 * want.at("exact").get<double>()) <= 1e-9);
    CHECK(std::abs(r.at("f1") - 100.0 * want.at("f1").get<double>()) <= 1e-9);
  }
}

TEST_CASE("v1.1 dataset result and stderr equal evaluate-v1.1.py") {
  const json& cli = expected().at("v1.1").at("cli");
  std::vector<std::string> unanswered;
  const sq::Result r = sq::evaluate_v1(sq::load_gold(kDir + "/dev-v1.1-subset.json"),
                                       sq::load_predictions(kDir + "/predictions-v1.1.json"), &unanswered);
  check_result(r, cli.at("result"));
  std::string stderr_text;
  for (const auto& l : unanswered) stderr_text += l + "\n";
  CHECK(stderr_text == cli.at("stderr").get<std::string>());
  // Python prints the same digits: compare the text of the line too.
  CHECK(r.json() + "\n" == cli.at("stdout").get<std::string>());
}

TEST_CASE("v2.0 results of every recorded run equal evaluate-v2.0.py") {
  const sq::GoldSet gold = sq::load_gold(kDir + "/dev-v2.0-subset.json");
  const auto preds = sq::load_predictions(kDir + "/predictions-v2.0.json");
  const sq::NaProbs na = sq::load_na_probs(kDir + "/null_odds-v2.0.json");
  const json& runs = expected().at("v2.0").at("cli_runs");
  REQUIRE(runs.size() == 4);
  for (const auto& run : runs) {
    INFO("run " << run.at("name").get<std::string>());
    const auto argv = run.at("argv").get<std::vector<std::string>>();
    bool with_na = false;
    double thresh = 1.0;
    for (std::size_t i = 0; i < argv.size(); ++i) {
      if (argv[i] == "--na-prob-file") with_na = true;
      if (argv[i] == "--na-prob-thresh") thresh = std::stod(argv.at(i + 1));
    }
    const sq::Result r = sq::evaluate_v2(gold, preds, with_na ? &na : nullptr, thresh);
    check_result(r, run.at("result"));
    // json.dumps(indent=2) of the same object: same numbers as text.
    CHECK(nlohmann::ordered_json::parse(r.json()).dump(2) + "\n" == run.at("stdout").get<std::string>());
  }
}

TEST_CASE("bertx eval squad prints the official result as its last line") {
  const json& cli1 = expected().at("v1.1").at("cli");
  auto r1 = bertx::test::run_command(std::string(BERTX_BIN) + " eval squad --dataset " + kDir +
                                     "/dev-v1.1-subset.json --predictions " + kDir + "/predictions-v1.1.json");
  INFO(r1.output);
  REQUIRE(r1.exit_code == 0);
  CHECK(last_line(r1.output) + "\n" == cli1.at("stdout").get<std::string>());
  CHECK(r1.output.find("Unanswered question f8a7c2ed64befec7ec9c5ea0a will receive score 0.") != std::string::npos);

  for (const auto& run : expected().at("v2.0").at("cli_runs")) {
    INFO("run " << run.at("name").get<std::string>());
    const auto argv = run.at("argv").get<std::vector<std::string>>();
    std::string cmd = std::string(BERTX_BIN) + " eval squad --dataset " + kDir + "/" + argv.at(1) + " --predictions " +
                      kDir + "/" + argv.at(2);
    for (std::size_t i = 3; i < argv.size(); ++i)
      cmd += " " + (argv[i] == "null_odds-v2.0.json" ? kDir + "/" + argv[i] : argv[i]);
    auto r = bertx::test::run_command(cmd);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    // Same keys in the same order, same numbers: the script's indented output re-indented from ours.
    CHECK(nlohmann::ordered_json::parse(last_line(r.output)).dump(2) + "\n" == run.at("stdout").get<std::string>());
  }
}

TEST_CASE("bad SQuAD inputs fail with one line naming the file and question") {
  bertx::test::TempDir d;
  bertx::test::write_text(
      d / "data.json",
      R"({"version": "1.1", "data": [{"paragraphs": [{"qas": [{"id": "q1", "answers": [{"text": "x"}]}, {"id": "q2"}]}]}]})");
  bertx::test::write_text(d / "pred.json", R"({"q1": 3})");
  CHECK_THROWS_WITH_AS(sq::load_gold(d / "data.json"), doctest::Contains("question q2: missing field 'answers'"),
                       bertx::Error);
  CHECK_THROWS_WITH_AS(sq::load_predictions(d / "pred.json"), doctest::Contains("question q1 is not a string"),
                       bertx::Error);
  CHECK_THROWS_WITH_AS(sq::load_gold(d / "nope.json"), doctest::Contains("nope.json: cannot open"), bertx::Error);
  // An integer na-prob past 2^63 - 1 stays that large and positive (as Python's int), not wrapped to -1.
  bertx::test::write_text(d / "na.json", R"({"q1": 18446744073709551615, "q2": 2, "q3": 0.5})");
  const sq::NaProbs na = sq::load_na_probs(d / "na.json");
  REQUIRE(na.size() == 3);
  CHECK(na[0].second.value == doctest::Approx(18446744073709551615.0));
  CHECK(na[0].second.integer);
  CHECK(na[1].second.value == 2.0);
  CHECK(na[1].second.integer);
  CHECK_FALSE(na[2].second.integer);
  auto r = bertx::test::run_command(std::string(BERTX_BIN) + " eval squad --dataset " + (d / "data.json") +
                                    " --predictions " + (d / "pred.json"));
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("data.json") != std::string::npos);
  // A metric version outside the scorer's choices is refused (not scored as another version).
  auto v =
      bertx::test::run_command(std::string(BERTX_BIN) + " eval squad --dataset " + kDir +
                               "/dev-v1.1-subset.json --predictions " + kDir + "/predictions-v1.1.json --version 3.0");
  INFO(v.output);
  CHECK(v.exit_code == 2);
  CHECK(v.output.find("--version: '3.0' is not one of: \"\", 1.1, 2.0") != std::string::npos);
}

TEST_CASE("python_float_repr writes Python's repr") {
  CHECK(sq::python_float_repr(50.0) == "50.0");
  CHECK(sq::python_float_repr(100.0) == "100.0");
  CHECK(sq::python_float_repr(0.1) == "0.1");
  CHECK(sq::python_float_repr(-0.5321) == "-0.5321");
  CHECK(sq::python_float_repr(1e-5) == "1e-05");
  CHECK(sq::python_float_repr(0.0001) == "0.0001");
  CHECK(sq::python_float_repr(1e16) == "1e+16");
  CHECK(sq::python_float_repr(1234567890123456.0) == "1234567890123456.0");
  CHECK(sq::python_float_repr(1.5e300) == "1.5e+300");
  CHECK(sq::python_float_repr(2.0 / 3.0) == "0.6666666666666666");
}
