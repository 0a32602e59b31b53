// squad_eval.cpp - the official SQuAD v1.1 / v2.0 evaluation, reimplemented line for line (see
// squad_eval.hpp). Python's Unicode behaviour comes from utf8proc: str.lower (simple lower-case
// mapping, plus U+0130 -> "i\u0307" and the Final_Sigma rule), re's Unicode \w (str.isalnum or '_') and
// str.split's whitespace (str.isspace). utf8proc's tables are Unicode 13-15 where Python 3.11 has 14.0:
// only characters new in one of them differ.
#include "squad_eval.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"

namespace bertx::squad {

namespace {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &c);
    if (n <= 0) {  // invalid UTF-8 (JSON input never has it): one U+FFFD per bad byte
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(static_cast<char32_t>(c));
    i += static_cast<std::size_t>(n);
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }

// str.isspace: bidirectional class WS, B or S, or category Zs (Unicode 14; this list is stable).
bool is_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680)
    return true;
  return (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// re's \w on str patterns: str.isalnum() (categories L*, Nd, Nl, No) or '_'.
bool is_word(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// Unicode "Cased" (Lowercase or Uppercase or Lt): utf8proc has no Other_Lowercase/Other_Uppercase, so
// letters with a case mapping plus the few caseless ones (checked against Python 3.11 over all code points).
bool is_cased(char32_t c) {
  const auto cat = category(c);
  if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return true;
  const auto i = static_cast<utf8proc_int32_t>(c);
  if (utf8proc_tolower(i) != i || utf8proc_toupper(i) != i) return true;
  return c == 0xAA || c == 0xBA || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
         (c >= 0x1F170 && c <= 0x1F189);
}

// Unicode "Case_Ignorable": Mn, Me, Cf, Lm, Sk, or Word_Break MidLetter / MidNumLet / Single_Quote.
bool is_case_ignorable(char32_t c) {
  switch (category(c)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  static const std::set<char32_t> mid{0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,  0x5F4,  0x2018, 0x2019,
                                      0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  return mid.count(c) != 0;
}

// str.lower(): full lower-case mapping (the only multi-character one is U+0130) and Final_Sigma as CPython's
// handle_capital_sigma: cased case-ignorable* SIGMA !(case-ignorable* cased) -> U+03C2.
std::u32string python_lower(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char32_t c = s[i];
    if (c < 0x80) {
      out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (c == 0x130) {
      out += U"i\u0307";
    } else if (c == 0x3A3) {
      std::size_t j = i;
      while (j > 0 && is_case_ignorable(s[j - 1])) --j;
      bool final_sigma = j > 0 && is_cased(s[j - 1]);
      if (final_sigma) {
        std::size_t k = i + 1;
        while (k < s.size() && is_case_ignorable(s[k])) ++k;
        final_sigma = k == s.size() || !is_cased(s[k]);
      }
      out.push_back(final_sigma ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

// string.punctuation: the 32 ASCII punctuation characters.
bool is_ascii_punct(char32_t c) {
  return c < 0x80 && ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126));
}

// str.split() of decoded text.
std::vector<std::string> split_u32(const std::u32string& t) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  for (char32_t c : t) {
    if (is_space(c)) {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      append_utf8(cur, c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(cur));
  return words;
}

// normalize_answer up to and including .split(): lower -> remove_punc -> remove_articles -> split.
std::vector<std::string> normalized_words(std::string_view text) {
  std::u32string s = python_lower(decode(text));
  s.erase(std::remove_if(s.begin(), s.end(), is_ascii_punct), s.end());
  // re.sub(r'\b(a|an|the)\b', ' ', s): a maximal run of word characters equal to a / an / the becomes ' '.
  std::u32string t;
  t.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (!is_word(s[i])) {
      t.push_back(s[i++]);
      continue;
    }
    std::size_t j = i;
    while (j < s.size() && is_word(s[j])) ++j;
    const std::u32string_view run(s.data() + i, j - i);
    if (run == U"a" || run == U"an" || run == U"the")
      t.push_back(U' ');
    else
      t.append(run);
    i = j;
  }
  return split_u32(t);
}

// Counter(a) & Counter(b), summed.
std::size_t common_count(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::unordered_map<std::string_view, std::int64_t> counts;
  for (const auto& w : a) ++counts[w];
  std::size_t same = 0;
  for (const auto& w : b) {
    auto it = counts.find(w);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  return same;
}

double f1_of(std::size_t same, std::size_t pred_len, std::size_t gold_len) {
  const double precision = 1.0 * static_cast<double>(same) / static_cast<double>(pred_len);
  const double recall = 1.0 * static_cast<double>(same) / static_cast<double>(gold_len);
  return (2 * precision * recall) / (precision + recall);
}

nlohmann::json read_json(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string(what) + " " + path + ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string(what) + " " + path + ": not valid JSON (" + e.what() + ")");
  }
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error(where + ": missing field '" + key + "'");
  return j.at(key);
}

std::string python_number(const Number& n) {
  if (n.integer) return std::to_string(static_cast<std::int64_t>(n.value));
  return python_float_repr(n.value);
}

Number as_float(double v) { return Number{v, false}; }
Number as_int(std::int64_t v) { return Number{static_cast<double>(v), true}; }

}  // namespace

std::string normalize_answer(std::string_view s) {
  std::string out;
  for (const auto& w : normalized_words(s)) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::vector<std::string> python_split(std::string_view s) { return split_u32(decode(s)); }

std::vector<std::string> answer_tokens(std::string_view s) {
  if (s.empty()) return {};
  return normalized_words(s);
}

bool exact_match_v1(std::string_view prediction, std::string_view gold) {
  return normalize_answer(prediction) == normalize_answer(gold);
}

double f1_v1(std::string_view prediction, std::string_view gold) {
  const auto p = normalized_words(prediction), g = normalized_words(gold);
  const std::size_t same = common_count(p, g);
  if (same == 0) return 0;
  return f1_of(same, p.size(), g.size());
}

int exact_v2(std::string_view gold, std::string_view prediction) {
  return normalize_answer(gold) == normalize_answer(prediction) ? 1 : 0;
}

double f1_v2(std::string_view gold, std::string_view prediction) {
  const auto g = answer_tokens(gold), p = answer_tokens(prediction);
  if (g.empty() || p.empty()) return g == p ? 1 : 0;
  const std::size_t same = common_count(g, p);
  if (same == 0) return 0;
  return f1_of(same, p.size(), g.size());
}

std::string python_float_repr(double x) {
  if (std::isnan(x)) return "NaN";  // json.dumps spellings
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);  // shortest round-trip
  const std::string sci(buf, r.ptr);
  const std::size_t e_pos = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (std::size_t i = negative ? 1 : 0; i < e_pos; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  const int exp = std::stoi(sci.substr(e_pos + 1));  // decimal exponent of the first digit
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {  // Python's repr switches to exponent notation outside 1e-4 <= |x| < 1e16
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + e;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  const auto int_len = static_cast<std::size_t>(exp + 1);
  if (digits.size() <= int_len) return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

double Result::at(const std::string& key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return v.value;
  throw Error("SQuAD result has no field '" + key + "'");
}

std::string Result::json() const {
  std::string s = "{";
  for (const auto& [k, v] : fields)
    s += (s.size() > 1 ? ", " : "") + nlohmann::json(k).dump() + ": " + python_number(v);
  return s + "}";
}

GoldSet load_gold(const std::string& path) {
  const nlohmann::json j = read_json(path, "SQuAD dataset");
  GoldSet g;
  g.path = path;
  if (j.is_object() && j.contains("version") && j.at("version").is_string())
    g.version = j.at("version").get<std::string>();
  const auto& data = field(j, "data", "SQuAD dataset " + path);
  if (!data.is_array()) throw Error("SQuAD dataset " + path + ": 'data' is not an array");
  for (const auto& article : data)
    for (const auto& paragraph : field(article, "paragraphs", "SQuAD dataset " + path))
      for (const auto& qa : field(paragraph, "qas", "SQuAD dataset " + path)) {
        const auto& id = field(qa, "id", "SQuAD dataset " + path + ": a question");
        if (!id.is_string()) throw Error("SQuAD dataset " + path + ": a question id is not a string: " + id.dump());
        GoldQuestion q{id.get<std::string>(), {}};
        const std::string where = "SQuAD dataset " + path + ": question " + q.id;
        for (const auto& a : field(qa, "answers", where)) {
          const auto& text = field(a, "text", where + ": an answer");
          if (!text.is_string()) throw Error(where + ": an answer text is not a string");
          q.answers.push_back(text.get<std::string>());
        }
        g.questions.push_back(std::move(q));
      }
  return g;
}

std::map<std::string, std::string> load_predictions(const std::string& path) {
  const nlohmann::json j = read_json(path, "SQuAD predictions");
  if (!j.is_object()) throw Error("SQuAD predictions " + path + ": expected a JSON object {question id: answer text}");
  std::map<std::string, std::string> out;
  for (const auto& [id, v] : j.items()) {
    if (!v.is_string())
      throw Error("SQuAD predictions " + path + ": the answer for question " + id + " is not a string: " + v.dump());
    out[id] = v.get<std::string>();
  }
  return out;
}

NaProbs load_na_probs(const std::string& path) {
  // The key order matters (stable sort ties), so parse into an ordered_json.
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("SQuAD na-prob file " + path + ": cannot open");
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("SQuAD na-prob file " + path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error("SQuAD na-prob file " + path + ": expected a JSON object {question id: number}");
  NaProbs out;
  std::unordered_map<std::string, std::size_t> index;  // json.load: a repeated key keeps its first place, last value
  for (const auto& [id, v] : j.items()) {
    if (!v.is_number())
      throw Error("SQuAD na-prob file " + path + ": the value for question " + id + " is not a number: " + v.dump());
    // As a double either way (not get<int64>: an integer past 2^63 - 1, which Python keeps, wrapped to a negative).
    const Number n{v.get<double>(), !v.is_number_float()};
    auto [it, fresh] = index.emplace(id, out.size());
    if (fresh)
      out.emplace_back(id, n);
    else
      out[it->second].second = n;
  }
  return out;
}

Result evaluate_v1(const GoldSet& gold, const std::map<std::string, std::string>& predictions,
                   std::vector<std::string>* unanswered) {
  double f1 = 0, exact_match = 0, total = 0;
  for (const auto& q : gold.questions) {
    total += 1;
    auto it = predictions.find(q.id);
    if (it == predictions.end()) {
      if (unanswered) unanswered->push_back("Unanswered question " + q.id + " will receive score 0.");
      continue;
    }
    // metric_max_over_ground_truths (max() of an empty list raises in Python: a question needs answers).
    if (q.answers.empty())
      throw Error("SQuAD dataset " + gold.path + ": question " + q.id + " has no answers (v1.1 needs one)");
    bool em = false;
    double best_f1 = 0;
    for (std::size_t i = 0; i < q.answers.size(); ++i) {
      em = em || exact_match_v1(it->second, q.answers[i]);
      const double f = f1_v1(it->second, q.answers[i]);
      best_f1 = i == 0 ? f : std::max(best_f1, f);
    }
    exact_match += em ? 1 : 0;
    f1 += best_f1;
  }
  if (total == 0) throw Error("SQuAD dataset " + gold.path + ": no questions");
  return Result{{{"exact_match", as_float(100.0 * exact_match / total)}, {"f1", as_float(100.0 * f1 / total)}}};
}

namespace {

// find_best_thresh: walk the questions by ascending na-prob, counting what predicting "no answer" for all
// below the threshold would score.
std::pair<double, Number> best_threshold(const std::vector<std::string>& order,
                                         const std::unordered_map<std::string, double>& scores,
                                         const std::unordered_map<std::string, bool>& has_ans,
                                         const std::map<std::string, std::string>& preds,
                                         const std::unordered_map<std::string, Number>& na) {
  double num_no_ans = 0;
  for (const auto& [k, v] : has_ans) num_no_ans += v ? 0 : 1;
  double cur = num_no_ans, best = cur;
  Number best_thresh = as_float(0.0);
  for (const auto& qid : order) {
    auto s = scores.find(qid);
    if (s == scores.end()) continue;
    double diff;
    if (has_ans.at(qid))
      diff = s->second;
    else
      diff = preds.at(qid).empty() ? 0 : -1;
    cur += diff;
    if (cur > best) {
      best = cur;
      best_thresh = na.at(qid);
    }
  }
  return {100.0 * best / static_cast<double>(scores.size()), best_thresh};
}

}  // namespace

Result evaluate_v2(const GoldSet& gold, const std::map<std::string, std::string>& predictions, const NaProbs* na_probs,
                   double na_prob_thresh, const std::string& predictions_name) {
  // Python dicts keyed by qid: insertion order is the first occurrence, the value the last one.
  std::vector<std::string> qids;
  std::unordered_map<std::string, bool> has_ans;
  std::unordered_map<std::string, double> exact_raw, f1_raw;
  for (const auto& q : gold.questions) {
    const bool any = !q.answers.empty();
    if (has_ans.emplace(q.id, any).second)
      qids.push_back(q.id);
    else
      has_ans[q.id] = any;
    std::vector<std::string> answers;
    for (const auto& a : q.answers)
      if (!normalize_answer(a).empty()) answers.push_back(a);
    if (answers.empty()) answers.push_back("");
    auto p = predictions.find(q.id);
    if (p == predictions.end())
      throw Error("SQuAD " + predictions_name + ": no prediction for question " + q.id + " of " + gold.path +
                  " (evaluate-v2.0.py needs one for every question)");
    double em = 0, f1 = 0;
    for (std::size_t i = 0; i < answers.size(); ++i) {
      const double e = exact_v2(answers[i], p->second), f = f1_v2(answers[i], p->second);
      em = i == 0 ? e : std::max(em, e);
      f1 = i == 0 ? f : std::max(f1, f);
    }
    exact_raw[q.id] = em;
    f1_raw[q.id] = f1;
  }
  if (qids.empty()) throw Error("SQuAD dataset " + gold.path + ": no questions");

  std::unordered_map<std::string, Number> na;
  if (na_probs) {
    for (const auto& [k, v] : *na_probs) na[k] = v;
  } else {
    for (const auto& [k, v] : predictions) na[k] = as_float(0.0);
  }
  // apply_no_ans_threshold
  auto thresholded = [&](const std::unordered_map<std::string, double>& raw) {
    std::unordered_map<std::string, double> out;
    for (const auto& qid : qids) {
      auto it = na.find(qid);
      if (it == na.end()) throw Error("SQuAD na-prob file: no value for question " + qid + " of " + gold.path);
      out[qid] = it->second.value > na_prob_thresh ? (has_ans.at(qid) ? 0.0 : 1.0) : raw.at(qid);
    }
    return out;
  };
  const auto exact_t = thresholded(exact_raw), f1_t = thresholded(f1_raw);
  Result r;
  auto eval_dict = [&](const std::string& prefix, bool want_has_ans, bool all) {
    double e = 0, f = 0;
    std::int64_t total = 0;
    for (const auto& qid : qids) {
      if (!all && has_ans.at(qid) != want_has_ans) continue;
      e += exact_t.at(qid);
      f += f1_t.at(qid);
      ++total;
    }
    if (total == 0) return;  // the script leaves out an empty HasAns / NoAns part
    r.fields.emplace_back(prefix + "exact", as_float(100.0 * e / static_cast<double>(total)));
    r.fields.emplace_back(prefix + "f1", as_float(100.0 * f / static_cast<double>(total)));
    r.fields.emplace_back(prefix + "total", as_int(total));
  };
  eval_dict("", false, true);
  eval_dict("HasAns_", true, false);
  eval_dict("NoAns_", false, false);
  if (na_probs) {
    // sorted(na_probs, key=na_probs.get): stable, so ties keep the file's order.
    std::vector<std::size_t> idx(na_probs->size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return (*na_probs)[a].second.value < (*na_probs)[b].second.value;
    });
    std::vector<std::string> order;
    for (std::size_t i : idx) order.push_back((*na_probs)[i].first);
    const auto [best_exact, exact_thresh] = best_threshold(order, exact_raw, has_ans, predictions, na);
    const auto [best_f1, f1_thresh] = best_threshold(order, f1_raw, has_ans, predictions, na);
    r.fields.emplace_back("best_exact", as_float(best_exact));
    r.fields.emplace_back("best_exact_thresh", exact_thresh);
    r.fields.emplace_back("best_f1", as_float(best_f1));
    r.fields.emplace_back("best_f1_thresh", f1_thresh);
  }
  return r;
}

}  // namespace bertx::squad
