// cmd_eval.cpp - `bertx eval squad --dataset D.json --predictions P.json [--version 1.1|2.0]
// [--na-prob-file N.json] [--na-prob-thresh T]`: the official SQuAD evaluation (bertx/squad_eval.hpp).
// The last stdout line is the JSON object evaluate-v1.1.py / evaluate-v2.0.py prints (v2.0 prints it
// indented; here it is on one line, same keys, same values); v1.1's notes on unanswered questions and on
// a dataset version other than "1.1" go to stderr as the script writes them.
#include <cstdio>
#include <memory>
#include <string>

#include "bertx/error.hpp"
#include "bertx/squad_eval.hpp"
#include "commands.hpp"

namespace bertx::cli {

void add_eval_command(CLI::App& app, int& exit_code) {
  CLI::App* eval = app.add_subcommand("eval", "score prediction files with a benchmark's official metrics");
  eval->require_subcommand(1);
  struct Args {
    std::string dataset, predictions, version, na_prob_file;
    double na_prob_thresh = 1.0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = eval->add_subcommand("squad", "SQuAD v1.1 / v2.0 exact match and F1, as evaluate-v1.1.py / evaluate-v2.0.py");
  cmd->add_option("--dataset", args->dataset, "SQuAD JSON (dev-v1.1.json, dev-v2.0.json)")->required();
  cmd->add_option("--predictions", args->predictions, "JSON object: question id -> answer text")->required();
  cmd->add_option("--version", args->version, "metric version; default: from the dataset's \"version\" (v2.0 if it holds 2.0)")
      ->check(CLI::IsMember({"1.1", "2.0"}));
  cmd->add_option("--na-prob-file", args->na_prob_file, "v2.0: question id -> no-answer score (null_odds.json)");
  cmd->add_option("--na-prob-thresh", args->na_prob_thresh, "v2.0: predict \"\" when the no-answer score exceeds this (default 1.0)");
  cmd->callback([args, &exit_code] {
    const squad::GoldSet gold = squad::load_gold(args->dataset);
    const auto predictions = squad::load_predictions(args->predictions);
    const std::string version = !args->version.empty() ? args->version
                                : gold.version.find("2.0") != std::string::npos ? "2.0" : "1.1";
    squad::Result result;
    if (version == "1.1") {
      if (!args->na_prob_file.empty()) throw Error("bertx eval squad: --na-prob-file is a v2.0 option (version is 1.1)");
      if (gold.version != "1.1")
        std::fprintf(stderr, "Evaluation expects v-1.1, but got dataset with v-%s\n", gold.version.c_str());
      std::vector<std::string> unanswered;
      result = squad::evaluate_v1(gold, predictions, &unanswered);
      for (const auto& line : unanswered) std::fprintf(stderr, "%s\n", line.c_str());
    } else {
      const squad::NaProbs na = args->na_prob_file.empty() ? squad::NaProbs{} : squad::load_na_probs(args->na_prob_file);
      result = squad::evaluate_v2(gold, predictions, args->na_prob_file.empty() ? nullptr : &na, args->na_prob_thresh,
                                  "predictions " + args->predictions);
    }
    std::printf("%s\n", result.json().c_str());
    exit_code = 0;
  });
}

}  // namespace bertx::cli
