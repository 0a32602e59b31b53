// squad_predict.hpp - start/end logits back to answer text, as write_predictions of Google's run_squad.py:
// the n_best_size best start and end indexes of every window, valid pairs only (inside the document part,
// start in a window where it has max context, end >= start, at most max_answer_length pieces), ranked by
// start + end logit; the pieces de-tokenized and projected onto the original words by get_final_text.
// v2.0: the null answer (score of [CLS] in the window where it is lowest) competes; the answer is "" when
// score_null - best non-null score > null_score_diff_threshold, and that difference goes to null_odds.json.
// No LibTorch (logits arrive as float vectors).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bertx/tokenizer.hpp"
#include "squad_data.hpp"

namespace bertx::squad {

struct PredictOptions {
  std::int64_t n_best_size = 20;           // best start / end indexes per window and n-best answers kept
  std::int64_t max_answer_length = 30;     // longest answer in word pieces
  bool version_2_with_negative = false;    // consider the null answer
  double null_score_diff_threshold = 0.0;  // v2.0: predict "" above this null-minus-best score difference
};

// Logits of one window over its max_seq_length positions.
struct WindowLogits {
  std::vector<float> start, end;
};

struct NbestEntry {
  std::string text;
  double probability = 0, start_logit = 0, end_logit = 0;
};

struct Prediction {
  std::string id;
  std::string text;  // the answer ("" for no answer)
  std::vector<NbestEntry> nbest;
  double null_odds = 0;  // v2.0: score_null - best non-null score
};

// get_final_text: `pred_text` (de-tokenized pieces) located in `orig_text` (the original words joined by
// spaces) through BasicTokenizer's character alignment; orig_text itself when the heuristic fails.
std::string get_final_text(const std::string& pred_text, const std::string& orig_text, const Tokenizer& tokenizer);

// Predictions for the examples whose windows all have logits (logits[feature index]; an empty WindowLogits
// means not evaluated), in example order.
std::vector<Prediction> predict(const Dataset& data, const Features& features, const std::vector<WindowLogits>& logits,
                                const Tokenizer& tokenizer, const PredictOptions& options);

// predictions.json (id -> text), nbest_predictions.json (id -> [{text, probability, start_logit,
// end_logit}]) and, for v2.0, null_odds.json (id -> score difference), written into `dir`.
void write_prediction_files(const std::string& dir, const std::vector<Prediction>& predictions,
                            bool version_2_with_negative);

}  // namespace bertx::squad
