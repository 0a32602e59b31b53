// squad_predict.cpp - write_predictions and get_final_text of Google's run_squad.py (see squad_predict.hpp).
// Ties sort as Python's stable sorted(..., reverse=True) does: equal scores keep their original order.
#include "squad_predict.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "squad_eval.hpp"

namespace bertx::squad {

namespace {

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// Python's s.replace(from, to): every non-overlapping occurrence, left to right.
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

// _strip_spaces: the text without ' ' and, for each kept character, its index in the text.
std::pair<std::u32string, std::vector<std::size_t>> strip_spaces(const std::u32string& text) {
  std::pair<std::u32string, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == U' ') continue;
    out.first.push_back(text[i]);
    out.second.push_back(i);
  }
  return out;
}

// _get_best_indexes: indexes of the n largest logits, ties in index order.
std::vector<std::int64_t> best_indexes(const std::vector<float>& logits, std::int64_t n) {
  std::vector<std::int64_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
  });
  if (static_cast<std::int64_t>(idx.size()) > n) idx.resize(static_cast<std::size_t>(n));
  return idx;
}

struct Prelim {
  std::int32_t feature;  // index among the example's windows
  std::int64_t start, end;
  double start_logit, end_logit;
};

constexpr double kNoNullScore = 1000000;  // run_squad's initial score_null ("large and positive")

}  // namespace

std::string get_final_text(const std::string& pred_text, const std::string& orig_text, const Tokenizer& tokenizer) {
  const std::u32string tok = utf8_to_u32(join(tokenizer.basic_tokenize(orig_text)));
  const std::u32string pred = utf8_to_u32(pred_text), orig = utf8_to_u32(orig_text);
  const std::size_t start = tok.find(pred);
  if (start == std::u32string::npos || pred.empty()) return orig_text;
  const std::size_t end = start + pred.size() - 1;
  const auto [orig_ns, orig_ns_to_s] = strip_spaces(orig);
  const auto [tok_ns, tok_ns_to_s] = strip_spaces(tok);
  if (orig_ns.size() != tok_ns.size()) return orig_text;
  // tok_s_to_ns: position in tok -> position without spaces (absent for spaces).
  std::map<std::size_t, std::size_t> tok_s_to_ns;
  for (std::size_t i = 0; i < tok_ns_to_s.size(); ++i) tok_s_to_ns[tok_ns_to_s[i]] = i;
  const auto& orig_map = orig_ns_to_s;  // clang < 16 cannot capture a structured binding
  auto project = [&](std::size_t s) -> std::optional<std::size_t> {
    auto it = tok_s_to_ns.find(s);
    if (it == tok_s_to_ns.end() || it->second >= orig_map.size()) return std::nullopt;
    return orig_map[it->second];
  };
  const auto orig_start = project(start);
  if (!orig_start) return orig_text;
  const auto orig_end = project(end);
  if (!orig_end) return orig_text;
  if (*orig_end < *orig_start) return "";  // orig_text[a:b+1] with b < a
  return u32_to_utf8(std::u32string_view(orig).substr(*orig_start, *orig_end - *orig_start + 1));
}

std::vector<Prediction> predict(const Dataset& data, const Features& features, const std::vector<WindowLogits>& logits,
                                const Tokenizer& tokenizer, const PredictOptions& opt) {
  const Vocab& vocab = tokenizer.vocab();
  std::vector<Prediction> out;
  for (std::size_t e = 0; e < data.examples.size(); ++e) {
    const Example& ex = data.examples[e];
    const ExampleWindows& w = features.windows(static_cast<std::int32_t>(e));
    const auto n_windows = static_cast<std::int32_t>(w.spans.size());
    bool complete = true;
    for (std::int32_t k = 0; k < n_windows; ++k)
      complete = complete && static_cast<std::size_t>(w.first_feature + k) < logits.size() &&
                 !logits[static_cast<std::size_t>(w.first_feature + k)].start.empty();
    if (!complete) continue;

    std::vector<Prelim> prelim;
    double score_null = kNoNullScore, null_start = 0, null_end = 0;
    std::int32_t min_null_feature = 0;
    for (std::int32_t k = 0; k < n_windows; ++k) {
      const Feature& f = features.features()[static_cast<std::size_t>(w.first_feature + k)];
      const WindowLogits& l = logits[static_cast<std::size_t>(w.first_feature + k)];
      if (opt.version_2_with_negative) {
        const double null_score = static_cast<double>(l.start[0]) + static_cast<double>(l.end[0]);
        if (null_score < score_null) {
          score_null = null_score;
          min_null_feature = k;
          null_start = l.start[0];
          null_end = l.end[0];
        }
      }
      const std::int64_t n_tokens = features.length(f);
      for (std::int64_t s : best_indexes(l.start, opt.n_best_size))
        for (std::int64_t t : best_indexes(l.end, opt.n_best_size)) {
          if (s >= n_tokens || t >= n_tokens) continue;
          if (features.word_at(f, s) < 0 || features.word_at(f, t) < 0) continue;
          if (!features.is_max_context(f, s)) continue;
          if (t < s || t - s + 1 > opt.max_answer_length) continue;
          prelim.push_back({k, s, t, l.start[static_cast<std::size_t>(s)], l.end[static_cast<std::size_t>(t)]});
        }
    }
    if (opt.version_2_with_negative && n_windows > 0) prelim.push_back({min_null_feature, 0, 0, null_start, null_end});
    std::stable_sort(prelim.begin(), prelim.end(), [](const Prelim& a, const Prelim& b) {
      return a.start_logit + a.end_logit > b.start_logit + b.end_logit;
    });

    Prediction p;
    p.id = ex.id;
    std::set<std::string> seen;
    const Paragraph& para = data.paragraphs[static_cast<std::size_t>(ex.paragraph)];
    for (const Prelim& pr : prelim) {
      if (static_cast<std::int64_t>(p.nbest.size()) >= opt.n_best_size) break;
      std::string text;
      if (pr.start > 0) {  // a non-null answer
        const Feature& f = features.features()[static_cast<std::size_t>(w.first_feature + pr.feature)];
        std::vector<std::string> pieces;
        for (std::int64_t i = pr.start; i <= pr.end; ++i) pieces.push_back(vocab.token(features.id_at(f, i)));
        std::string tok_text = replace_all(replace_all(join(pieces), " ##", ""), "##", "");
        tok_text = join(python_split(tok_text));  // strip() + " ".join(split())
        std::vector<std::string> orig_words(para.doc_tokens.begin() + features.word_at(f, pr.start),
                                            para.doc_tokens.begin() + features.word_at(f, pr.end) + 1);
        text = get_final_text(tok_text, join(orig_words), tokenizer);
        if (!seen.insert(text).second) continue;
      } else {
        seen.insert("");
      }
      p.nbest.push_back({text, 0, pr.start_logit, pr.end_logit});
    }
    if (opt.version_2_with_negative && !seen.count("") && n_windows > 0)
      p.nbest.push_back({"", 0, null_start, null_end});
    if (p.nbest.empty()) p.nbest.push_back({"empty", 0, 0, 0});  // run_squad's nonce for "no valid span"

    // _compute_softmax over start + end logits.
    double max_score = -INFINITY, total = 0;
    for (const auto& n : p.nbest) max_score = std::max(max_score, n.start_logit + n.end_logit);
    for (auto& n : p.nbest) total += (n.probability = std::exp(n.start_logit + n.end_logit - max_score));
    for (auto& n : p.nbest) n.probability /= total;

    if (!opt.version_2_with_negative) {
      p.text = p.nbest[0].text;
    } else {
      const NbestEntry* best_non_null = nullptr;
      for (const auto& n : p.nbest)
        if (!n.text.empty()) {
          best_non_null = &n;
          break;
        }
      // No non-null candidate at all (run_squad fails there): no answer, with the "large" null score.
      p.null_odds = best_non_null ? score_null - best_non_null->start_logit - best_non_null->end_logit : kNoNullScore;
      p.text = best_non_null && p.null_odds <= opt.null_score_diff_threshold ? best_non_null->text : "";
    }
    out.push_back(std::move(p));
  }
  return out;
}

void write_prediction_files(const std::string& dir, const std::vector<Prediction>& predictions,
                            bool version_2_with_negative) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  nlohmann::ordered_json answers = nlohmann::ordered_json::object(), nbest = nlohmann::ordered_json::object(),
                         odds = nlohmann::ordered_json::object();
  for (const auto& p : predictions) {
    answers[p.id] = p.text;
    auto& list = nbest[p.id] = nlohmann::ordered_json::array();
    for (const auto& n : p.nbest)
      list.push_back({{"text", n.text},
                      {"probability", n.probability},
                      {"start_logit", n.start_logit},
                      {"end_logit", n.end_logit}});
    if (version_2_with_negative) odds[p.id] = p.null_odds;
  }
  auto write = [&](const std::string& name, const nlohmann::ordered_json& j) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream f(path, std::ios::binary);
    f << j.dump(4) << "\n";
    if (!f) throw Error("SQuAD predictions: cannot write " + path);
  };
  write("predictions.json", answers);
  write("nbest_predictions.json", nbest);
  if (version_2_with_negative) write("null_odds.json", odds);
}

}  // namespace bertx::squad
