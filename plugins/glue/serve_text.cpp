// serve_text.cpp - the classification task's text endpoint (serve_text.hpp). Body: {"text", "text_pair"?} or a list
// of them. Answer: {"label", "label_id", "probabilities"} (softmax over the logits; labels from the served folder's
// config.json id2label, else the GLUE task's, else the class id), or {"score"} for regression; a list in,
// {"predictions": [...]} out.
#include "serve_text.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "features.hpp"

namespace bertx::glue {

namespace {

using nlohmann::json;

class ClassifyQuery final : public TextQuery {
 public:
  ClassifyQuery(std::vector<TextSequence> seqs, const std::vector<std::string>& labels, bool regression, bool list)
      : seqs_(std::move(seqs)), labels_(labels), regression_(regression), list_(list) {}

  const std::vector<TextSequence>& sequences() const override { return seqs_; }

  std::string answer(const std::vector<TextOutputs>& outputs) const override {
    json predictions = json::array();
    for (const auto& o : outputs) {
      const std::vector<float>& logits = o.at("logits");
      if (regression_) {
        predictions.push_back({{"score", logits.at(0)}});
        continue;
      }
      const float top = *std::max_element(logits.begin(), logits.end());
      std::vector<double> p;
      double total = 0;
      for (float l : logits) total += p.emplace_back(std::exp(static_cast<double>(l - top)));
      for (double& x : p) x /= total;
      const auto best = static_cast<std::size_t>(std::max_element(p.begin(), p.end()) - p.begin());
      predictions.push_back({{"label", best < labels_.size() ? labels_[best] : std::to_string(best)},
                             {"label_id", best},
                             {"probabilities", p}});
    }
    const json out = list_ ? json{{"predictions", predictions}} : predictions.at(0);
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
  }

 private:
  std::vector<TextSequence> seqs_;
  const std::vector<std::string>& labels_;
  bool regression_, list_;
};

class ClassifyText final : public TextHandler {
 public:
  ClassifyText(const TextSetup& setup, const TaskSpec& spec)
      : tokenizer_(setup.tokenizer),
        max_seq_length_(std::min<std::int64_t>(128, setup.max_positions)),  // the glue reader's default
        labels_(setup.labels.empty() ? spec.labels : setup.labels),
        regression_(spec.regression()) {}

  std::string endpoint() const override { return "classify"; }

  std::unique_ptr<TextQuery> query(const std::string& body) const override {
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error("malformed JSON in the request body");
    const bool list = j.is_array();
    const json& items = list ? j : json::array({j});
    if (items.empty()) throw Error("an empty list of texts");
    std::vector<TextSequence> seqs;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const json& it = items[i];
      const std::string where = list ? "item " + std::to_string(i) + ": " : "";
      if (!it.is_object() || !it.contains("text") || !it["text"].is_string() ||
          (it.contains("text_pair") && !it["text_pair"].is_string()))
        throw Error(where + "expected {\"text\": string, \"text_pair\": string (optional)}");
      const std::string pair = it.contains("text_pair") ? it["text_pair"].get<std::string>() : std::string();
      const Features f = featurize(*tokenizer_, it["text"].get<std::string>(), pair, max_seq_length_);
      TextSequence s{f.ids, std::vector<std::int32_t>(f.ids.size(), 0)};
      std::fill(s.token_type_ids.begin() + f.type_b_from, s.token_type_ids.end(), 1);
      seqs.push_back(std::move(s));
    }
    return std::make_unique<ClassifyQuery>(std::move(seqs), labels_, regression_, list);
  }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::int64_t max_seq_length_;
  std::vector<std::string> labels_;
  bool regression_;
};

}  // namespace

std::shared_ptr<TextHandler> make_text_handler(const TextSetup& setup, const TaskSpec& spec) {
  return std::make_shared<ClassifyText>(setup, spec);
}

}  // namespace bertx::glue
