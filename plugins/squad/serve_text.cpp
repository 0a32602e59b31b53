// serve_text.cpp - the squad task's text endpoint (serve_text.hpp). Body: {"question", "context"} or a list of them,
// optional "n_best" (entries of the n-best list to return) and "version_2_with_negative" (allow no answer).
// Answer: {"answer", "score" (its n-best probability), "start", "end" (code point offsets of its first occurrence in
// the context, -1 when not found verbatim), "nbest"}; a list in, {"answers": [...]} out.
#include "serve_text.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"

namespace bertx::squad {

namespace {

using nlohmann::json;

// The windowing of a served model: evaluation's defaults, cut to fit the model's positions.
FeatureOptions window_options(std::int64_t max_positions) {
  FeatureOptions o;
  o.max_seq_length = std::min(o.max_seq_length, max_positions);
  o.doc_stride = std::min(o.doc_stride, o.max_seq_length / 2);
  o.max_query_length = std::min(o.max_query_length, o.max_seq_length / 2);
  return o;
}

class SquadQuery final : public TextQuery {
 public:
  SquadQuery(const json& items, bool list, const Tokenizer& tokenizer, const FeatureOptions& windows,
             PredictOptions options, std::int64_t n_best)
      : tokenizer_(tokenizer), options_(options), n_best_(n_best), list_(list) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      const json& it = items[i];
      const std::string where = list ? "item " + std::to_string(i) + ": " : "";
      if (!it.is_object() || !it.contains("question") || !it["question"].is_string() || !it.contains("context") ||
          !it["context"].is_string())
        throw Error(where + "expected {\"question\": string, \"context\": string}");
      Example ex;
      ex.id = std::to_string(i);
      ex.question = it["question"].get<std::string>();
      ex.paragraph = static_cast<std::int32_t>(data_.paragraphs.size());
      data_.paragraphs.push_back(make_paragraph(it["context"].get<std::string>()));
      data_.examples.push_back(std::move(ex));
    }
    data_.labelled = false;
    features_ = std::make_unique<Features>(data_, tokenizer, windows, /*is_training=*/false);
    const std::int64_t S = windows.max_seq_length;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(S)), types(ids.size()), mask(ids.size());
    for (const Feature& f : features_->features()) {
      features_->write_row(f, ids.data(), types.data(), mask.data());
      const auto n = static_cast<std::size_t>(features_->length(f));
      sequences_.push_back({std::vector<std::int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)),
                            std::vector<std::int32_t>(types.begin(), types.begin() + static_cast<std::ptrdiff_t>(n))});
    }
  }

  const std::vector<TextSequence>& sequences() const override { return sequences_; }

  std::string answer(const std::vector<TextOutputs>& outputs) const override {
    std::vector<WindowLogits> logits(outputs.size());
    for (std::size_t i = 0; i < outputs.size(); ++i)
      logits[i] = {outputs[i].at("start_logits"), outputs[i].at("end_logits")};
    json answers = json::array();
    for (const Prediction& p : predict(data_, *features_, logits, tokenizer_, options_)) {
      const std::string& context = data_.paragraphs[static_cast<std::size_t>(std::stoi(p.id))].context;
      json a{{"answer", p.text}, {"score", 0.0}, {"start", -1}, {"end", -1}};
      for (const auto& n : p.nbest)
        if (n.text == p.text) {
          a["score"] = n.probability;
          break;
        }
      const std::u32string c = utf8_to_u32(context), t = utf8_to_u32(p.text);
      if (const auto at = t.empty() ? std::u32string::npos : c.find(t); at != std::u32string::npos)
        a["start"] = at, a["end"] = at + t.size();
      if (n_best_ > 0) {
        a["nbest"] = json::array();
        for (std::size_t k = 0; k < p.nbest.size() && static_cast<std::int64_t>(k) < n_best_; ++k)
          a["nbest"].push_back({{"text", p.nbest[k].text},
                                {"probability", p.nbest[k].probability},
                                {"start_logit", p.nbest[k].start_logit},
                                {"end_logit", p.nbest[k].end_logit}});
      }
      answers.push_back(std::move(a));
    }
    const json out = list_ ? json{{"answers", answers}} : answers.at(0);
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
  }

 private:
  const Tokenizer& tokenizer_;
  PredictOptions options_;
  std::int64_t n_best_;
  bool list_;
  Dataset data_;
  std::unique_ptr<Features> features_;
  std::vector<TextSequence> sequences_;
};

class SquadText final : public TextHandler {
 public:
  SquadText(const TextSetup& setup, PredictOptions options)
      : tokenizer_(setup.tokenizer), windows_(window_options(setup.max_positions)), options_(options) {}

  std::string endpoint() const override { return "squad"; }

  std::unique_ptr<TextQuery> query(const std::string& body) const override {
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error("malformed JSON in the request body");
    const bool list = j.is_array();
    const json& items = list ? j : json::array({j});
    if (items.empty()) throw Error("an empty list of questions");
    PredictOptions o = options_;
    std::int64_t n_best = 0;
    if (j.is_object() && j.contains("n_best")) {
      if (!j["n_best"].is_number_integer() || j["n_best"].get<std::int64_t>() < 0 ||
          j["n_best"].get<std::int64_t>() > 100)
        throw Error("\"n_best\" must be an integer in [0, 100]");
      n_best = j["n_best"].get<std::int64_t>();
      o.n_best_size = std::max(o.n_best_size, n_best);
    }
    if (j.is_object() && j.contains("version_2_with_negative")) {
      if (!j["version_2_with_negative"].is_boolean()) throw Error("\"version_2_with_negative\" must be a boolean");
      o.version_2_with_negative = j["version_2_with_negative"].get<bool>();
    }
    return std::make_unique<SquadQuery>(items, list, *tokenizer_, windows_, o, n_best);
  }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  FeatureOptions windows_;
  PredictOptions options_;
};

}  // namespace

std::shared_ptr<TextHandler> make_text_handler(const TextSetup& setup, const PredictOptions& options) {
  return std::make_shared<SquadText>(setup, options);
}

}  // namespace bertx::squad
