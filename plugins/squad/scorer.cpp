// scorer.cpp - the `squad` scorer: `bertx eval squad --dataset D.json --predictions P.json [--version 1.1|2.0]
// [--na-prob-file N.json] [--na-prob-thresh T]`, the official SQuAD evaluation (squad_eval.hpp) behind the
// Scorer interface (bertx/scorer.hpp). The result is the JSON object evaluate-v1.1.py / evaluate-v2.0.py prints
// (v2.0 prints it indented; here it is on one line, same keys, same values); v1.1's notes on unanswered
// questions and on a dataset version other than "1.1" are the report's notes, as the script writes them.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bertx/error.hpp"
#include "bertx/scorer.hpp"
#include "components.hpp"
#include "squad_eval.hpp"

namespace {

using namespace bertx;

struct SquadScorerConfig {
  std::string dataset, predictions, version, na_prob_file;
  double na_prob_thresh = 1.0;
};

class SquadScorer final : public Scorer {
 public:
  explicit SquadScorer(SquadScorerConfig c) : cfg_(std::move(c)) {}

  ScoreReport score() override {
    const squad::GoldSet gold = squad::load_gold(cfg_.dataset);
    const auto predictions = squad::load_predictions(cfg_.predictions);
    const std::string version = !cfg_.version.empty()                           ? cfg_.version
                                : gold.version.find("2.0") != std::string::npos ? "2.0"
                                                                                : "1.1";
    ScoreReport report;
    squad::Result result;
    if (version == "1.1") {
      if (!cfg_.na_prob_file.empty()) throw Error("bertx eval squad: --na-prob-file is a v2.0 option (version is 1.1)");
      if (gold.version != "1.1")
        report.notes.push_back("Evaluation expects v-1.1, but got dataset with v-" + gold.version);
      std::vector<std::string> unanswered;
      result = squad::evaluate_v1(gold, predictions, &unanswered);
      report.notes.insert(report.notes.end(), unanswered.begin(), unanswered.end());
    } else {
      const squad::NaProbs na = cfg_.na_prob_file.empty() ? squad::NaProbs{} : squad::load_na_probs(cfg_.na_prob_file);
      result = squad::evaluate_v2(gold, predictions, cfg_.na_prob_file.empty() ? nullptr : &na, cfg_.na_prob_thresh,
                                  "predictions " + cfg_.predictions);
    }
    report.result = result.json();
    return report;
  }

 private:
  SquadScorerConfig cfg_;
};

const Fields<SquadScorerConfig>& scorer_fields() {
  using C = SquadScorerConfig;
  static const Fields<SquadScorerConfig> f{
      field_required("dataset", &C::dataset, "SQuAD JSON (dev-v1.1.json, dev-v2.0.json)"),
      field_required("predictions", &C::predictions, "JSON object: question id -> answer text"),
      field("version", &C::version, "metric version; default: from the dataset's \"version\" (v2.0 if it holds 2.0)",
            {"", "1.1", "2.0"}),
      field("na_prob_file", &C::na_prob_file, "v2.0: question id -> no-answer score (null_odds.json)"),
      field("na_prob_thresh", &C::na_prob_thresh, "v2.0: predict \"\" when the no-answer score exceeds this")};
  return f;
}

}  // namespace

void bertx::squad::register_scorer(Registry& registry) {
  add_scorer(registry, "squad", "SQuAD v1.1 / v2.0 exact match and F1, as evaluate-v1.1.py / evaluate-v2.0.py",
             scorer_fields().schema(),
             [](const Options& o) { return std::make_shared<SquadScorer>(scorer_fields().read(o)); });
}
