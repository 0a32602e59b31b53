// squad_eval.hpp - SQuAD scoring identical to the official evaluate-v1.1.py and evaluate-v2.0.py:
// answer normalisation (Python's str.lower, string.punctuation removal, \b(a|an|the)\b with Unicode word
// characters, str.split on Unicode whitespace), exact match, token F1, max over the gold answers, and
// v2.0's HasAns/NoAns split, no-answer threshold and best thresholds. Scores are summed left to right in
// dataset order as the scripts do (Python 3.11's sum), so results equal theirs to the last bit.
// No LibTorch: used by the squad plugin's scorer (`bertx eval squad`) and task evaluator, and the tests.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bertx/version.hpp"

namespace bertx::squad {

// normalize_answer of both scripts (they are the same function).
BERTX_EXPORT std::string normalize_answer(std::string_view s);
// v2.0's get_tokens: [] for "", else normalize_answer(s).split(); v1.1 splits normalize_answer(s) too.
BERTX_EXPORT std::vector<std::string> answer_tokens(std::string_view s);

// Python's str.split(): split on runs of Unicode whitespace (str.isspace), no empty pieces.
BERTX_EXPORT std::vector<std::string> python_split(std::string_view s);

// evaluate-v1.1.py: exact_match_score(prediction, ground_truth) and f1_score (0 when nothing is shared,
// so two empty answers score 0).
BERTX_EXPORT bool exact_match_v1(std::string_view prediction, std::string_view gold);
BERTX_EXPORT double f1_v1(std::string_view prediction, std::string_view gold);
// evaluate-v2.0.py: compute_exact(a_gold, a_pred), compute_f1 (1 when both are empty).
BERTX_EXPORT int exact_v2(std::string_view gold, std::string_view prediction);
BERTX_EXPORT double f1_v2(std::string_view gold, std::string_view prediction);

// A JSON number as Python holds it: an int stays an int when printed (a threshold read from the na-prob
// file, a total), a float prints as Python's repr.
struct Number {
  double value = 0.0;
  bool integer = false;  // print as an integer (value is then integral)
};

// Python's repr(float) (shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16, ".0" on integers).
BERTX_EXPORT std::string python_float_repr(double x);

// The official scripts' result: keys in their order, values as json.dumps writes them.
struct Result {
  std::vector<std::pair<std::string, Number>> fields;
  // Throws bertx::Error when `key` is absent.
  double at(const std::string& key) const;
  // json.dumps(result) on one line: {"exact": 51.724137931034484, "f1": ..., "total": 58}.
  std::string json() const;
};

struct GoldQuestion {
  std::string id;
  std::vector<std::string> answers;  // answer texts in file order; empty = unanswerable (v2.0)
};

// The questions of a SQuAD file in dataset order (data[].paragraphs[].qas[]).
struct GoldSet {
  std::string path;     // for messages
  std::string version;  // the file's "version" field ("1.1", "v2.0"); "" when absent
  std::vector<GoldQuestion> questions;
};

// Throws bertx::Error naming the file (and question id) on unreadable JSON or missing fields.
BERTX_EXPORT GoldSet load_gold(const std::string& path);
// qid -> predicted answer (json.load: a key given twice keeps its last value). Non-string value: error.
BERTX_EXPORT std::map<std::string, std::string> load_predictions(const std::string& path);
// qid -> no-answer score (the --na-prob-file), ints kept as ints; the file's key order is kept because the
// best-threshold search breaks ties by it (a stable sort).
using NaProbs = std::vector<std::pair<std::string, Number>>;
BERTX_EXPORT NaProbs load_na_probs(const std::string& path);

// evaluate-v1.1.py's evaluate(): {exact_match, f1}. Each question without a prediction scores 0 and adds
// "Unanswered question <id> will receive score 0." to `unanswered` (the script prints it on stderr).
BERTX_EXPORT Result evaluate_v1(const GoldSet& gold, const std::map<std::string, std::string>& predictions,
                                std::vector<std::string>* unanswered = nullptr);

// evaluate-v2.0.py's main(): {exact, f1, total, HasAns_*, NoAns_*} and, with na_probs, best_exact,
// best_exact_thresh, best_f1, best_f1_thresh. A question is predicted unanswerable when its na-prob >
// na_prob_thresh. A question without a prediction (or without an na-prob when given) is an error naming
// the file and id (the official script stops with a KeyError there).
BERTX_EXPORT Result evaluate_v2(const GoldSet& gold, const std::map<std::string, std::string>& predictions,
                                const NaProbs* na_probs = nullptr, double na_prob_thresh = 1.0,
                                const std::string& predictions_name = "predictions");

}  // namespace bertx::squad
