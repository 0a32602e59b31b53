// squad_data.cpp - read_squad_examples and convert_examples_to_features of Google's run_squad.py
// (see squad_data.hpp), with the paragraph tokenized once for all its questions.
#include "squad_data.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "bertx/json.hpp"
#include "squad_eval.hpp"

namespace bertx::squad {

std::u32string utf8_to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + static_cast<std::size_t>(n) > s.size()) {  // invalid byte (not from valid JSON text)
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]) & 0x3F);
    out.push_back(c);
    i += static_cast<std::size_t>(n);
  }
  return out;
}

std::string u32_to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

namespace {

using nlohmann::json;

// run_squad's is_whitespace (not Python's isspace: U+00A0 and friends stay inside words).
bool squad_space(char32_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F; }

const json& need(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error(where + ": missing field '" + key + "'");
  return j.at(key);
}

std::string need_string(const json& j, const char* key, const std::string& where) {
  const json& v = need(j, key, where);
  if (!v.is_string()) throw Error(where + ": field '" + key + "' is not a string");
  return v.get<std::string>();
}

// Splits the context into doc_tokens; char_to_word[i] = doc_tokens index of code point i (-1 before the first).
void split_context(const std::u32string& context, std::vector<std::string>& words,
                   std::vector<std::int32_t>& char_to_word) {
  std::u32string cur;
  bool prev_space = true;
  char_to_word.reserve(context.size());
  for (char32_t c : context) {
    if (squad_space(c)) {
      prev_space = true;
    } else {
      if (prev_space && !cur.empty()) {
        words.push_back(u32_to_utf8(cur));
        cur.clear();
      }
      cur.push_back(c);
      prev_space = false;
    }
    char_to_word.push_back(static_cast<std::int32_t>(words.size() + (cur.empty() ? 0 : 1)) - 1);
  }
  if (!cur.empty()) words.push_back(u32_to_utf8(cur));
}

}  // namespace

Paragraph make_paragraph(std::string context, std::vector<std::int32_t>* char_to_word) {
  Paragraph para;
  para.context = std::move(context);
  std::vector<std::int32_t> chars;
  split_context(utf8_to_u32(para.context), para.doc_tokens, char_to_word ? *char_to_word : chars);
  return para;
}

Dataset read_dataset(const std::string& path, const ReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("SQuAD file " + path + ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error("SQuAD file " + path + ": not valid JSON (" + e.what() + ")");
  }
  Dataset d;
  d.path = path;
  const std::string file = "SQuAD file " + path;
  if (j.is_object() && j.contains("version") && j.at("version").is_string())
    d.version = j.at("version").get<std::string>();
  const json& data = need(j, "data", file);
  if (!data.is_array()) throw Error(file + ": 'data' is not an array");
  std::unordered_set<std::string> ids;
  for (std::size_t a = 0; a < data.size(); ++a) {
    const std::string article_where = file + ": data[" + std::to_string(a) + "]";
    const json& paragraphs = need(data[a], "paragraphs", article_where);
    for (std::size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string para_where = article_where + ".paragraphs[" + std::to_string(p) + "]";
      std::vector<std::int32_t> char_to_word;
      Paragraph para = make_paragraph(need_string(paragraphs[p], "context", para_where), &char_to_word);
      const auto para_index = static_cast<std::int32_t>(d.paragraphs.size());
      for (const json& qa : need(paragraphs[p], "qas", para_where)) {
        Example ex;
        ex.id = need_string(qa, "id", para_where + ": a question");
        const std::string where = file + ": question " + ex.id;
        if (!ids.insert(ex.id).second) throw Error(where + ": duplicate id");
        ex.question = need_string(qa, "question", where);
        ex.paragraph = para_index;
        if (qa.contains("answers")) {
          const json& answers = qa.at("answers");
          if (!answers.is_array()) throw Error(where + ": field 'answers' is not an array");
          for (const json& ans : answers) ex.answers.push_back(need_string(ans, "text", where + ": an answer"));
        } else {
          d.labelled = false;
        }
        if (options.version_2_with_negative && (options.is_training || qa.contains("is_impossible"))) {
          const json& imp = need(qa, "is_impossible", where);
          if (!imp.is_boolean()) throw Error(where + ": field 'is_impossible' is not a boolean");
          ex.is_impossible = imp.get<bool>();
        }
        if (options.is_training && !ex.is_impossible) {
          const json& answers = need(qa, "answers", where);
          if (answers.empty())
            throw Error(where + ": no answer for training" +
                        std::string(options.version_2_with_negative
                                        ? " and is_impossible is false"
                                        : " (a SQuAD v2.0 file? set version_2_with_negative = true)"));
          const json& first = answers.at(0);  // run_squad wants exactly one; extra (dev set) answers are ignored
          ex.orig_answer_text = need_string(first, "text", where + ": answer 0");
          const json& start = need(first, "answer_start", where + ": answer 0");
          const std::optional<std::int64_t> answer_start = int64_of(start);  // not get<int64>: wraps past 2^63 - 1
          if (!answer_start)
            throw Error(where + ": answer 0: field 'answer_start' is not a 64-bit integer, got " + start.dump());
          const std::int64_t offset = *answer_start;
          const auto length = static_cast<std::int64_t>(utf8_to_u32(ex.orig_answer_text).size());
          if (length == 0) {
            d.skipped.push_back({ex.id, "empty answer text"});
            continue;
          }
          // Not offset + length > size: an offset near 2^63 would overflow.
          if (offset < 0 || offset > static_cast<std::int64_t>(char_to_word.size()) - length) {
            d.skipped.push_back({ex.id, "answer_start " + std::to_string(offset) + " + answer length " +
                                            std::to_string(length) + " outside the context (" +
                                            std::to_string(char_to_word.size()) + " characters)"});
            continue;
          }
          ex.start_word = char_to_word[static_cast<std::size_t>(offset)];
          ex.end_word = char_to_word[static_cast<std::size_t>(offset + length - 1)];
          // Only answers whose text is recovered from the document words are kept (run_squad's check).
          std::string actual;
          for (std::int32_t w = std::max(ex.start_word, 0); w <= ex.end_word; ++w)
            actual += (actual.empty() ? "" : " ") + para.doc_tokens[static_cast<std::size_t>(w)];
          std::string cleaned;
          for (const auto& w : python_split(ex.orig_answer_text)) cleaned += (cleaned.empty() ? "" : " ") + w;
          if (ex.start_word < 0 || actual.find(cleaned) == std::string::npos) {
            d.skipped.push_back({ex.id, "answer '" + ex.orig_answer_text + "' not found at answer_start " +
                                            std::to_string(offset) + " (context words there: '" + actual + "')"});
            continue;
          }
        }
        d.examples.push_back(std::move(ex));
      }
      d.paragraphs.push_back(std::move(para));
    }
  }
  return d;
}

std::pair<std::int32_t, std::int32_t> improve_answer_span(const std::vector<std::int32_t>& doc, std::int32_t start,
                                                          std::int32_t end, const std::vector<std::int32_t>& answer) {
  const auto n = static_cast<std::int32_t>(answer.size());
  for (std::int32_t s = start; s <= end; ++s)
    for (std::int32_t e = end; e >= s; --e)
      if (e - s + 1 == n && std::equal(answer.begin(), answer.end(), doc.begin() + s)) return {s, e};
  return {start, end};
}

Features::Features(Dataset& data, const Tokenizer& tok, const FeatureOptions& options, bool is_training)
    : data_(&data), cls_(tok.vocab().id("[CLS]")), sep_(tok.vocab().id("[SEP]")), options_(options) {
  if (options.max_query_length < 1 || options.doc_stride < 1 || options.max_seq_length < options.max_query_length + 4)
    throw Error("[data] squad: need max_query_length >= 1, doc_stride >= 1 and max_seq_length >= max_query_length + 4");
  for (Paragraph& p : data.paragraphs) {
    p.word_to_piece.reserve(p.doc_tokens.size());
    for (std::size_t w = 0; w < p.doc_tokens.size(); ++w) {
      p.word_to_piece.push_back(static_cast<std::int32_t>(p.piece_ids.size()));
      const std::size_t before = p.piece_ids.size();
      tok.encode(p.doc_tokens[w], p.piece_ids);
      p.piece_to_word.insert(p.piece_to_word.end(), p.piece_ids.size() - before, static_cast<std::int32_t>(w));
    }
  }
  std::vector<std::int32_t> answer_ids;
  windows_.reserve(data.examples.size());
  for (std::size_t e = 0; e < data.examples.size(); ++e) {
    const Example& ex = data.examples[e];
    const Paragraph& p = data.paragraphs[static_cast<std::size_t>(ex.paragraph)];
    ExampleWindows w;
    tok.encode(ex.question, w.query_ids);
    if (static_cast<std::int64_t>(w.query_ids.size()) > options.max_query_length)
      w.query_ids.resize(static_cast<std::size_t>(options.max_query_length));
    const auto pieces = static_cast<std::int32_t>(p.piece_ids.size());
    if (is_training && !ex.is_impossible) {
      w.answer_start_piece = p.word_to_piece[static_cast<std::size_t>(ex.start_word)];
      w.answer_end_piece = ex.end_word + 1 < static_cast<std::int32_t>(p.doc_tokens.size())
                               ? p.word_to_piece[static_cast<std::size_t>(ex.end_word + 1)] - 1
                               : pieces - 1;
      answer_ids.clear();
      tok.encode(ex.orig_answer_text, answer_ids);
      std::tie(w.answer_start_piece, w.answer_end_piece) =
          improve_answer_span(p.piece_ids, w.answer_start_piece, w.answer_end_piece, answer_ids);
    }
    // Sliding windows: -3 for [CLS], [SEP], [SEP].
    const auto max_doc =
        static_cast<std::int32_t>(options.max_seq_length - static_cast<std::int64_t>(w.query_ids.size()) - 3);
    for (std::int32_t start = 0; start < pieces;) {
      const std::int32_t length = std::min(pieces - start, max_doc);
      w.spans.emplace_back(start, length);
      if (start + length == pieces) break;
      start += std::min(length, static_cast<std::int32_t>(options.doc_stride));
    }
    w.first_feature = static_cast<std::int32_t>(features_.size());
    const auto doc_offset = static_cast<std::int32_t>(w.query_ids.size()) + 2;
    for (std::size_t s = 0; s < w.spans.size(); ++s) {
      Feature f;
      f.example = static_cast<std::int32_t>(e);
      f.span_index = static_cast<std::int32_t>(s);
      std::tie(f.span_start, f.span_length) = w.spans[s];
      if (is_training && !ex.is_impossible) {
        const std::int32_t doc_end = f.span_start + f.span_length - 1;
        if (w.answer_start_piece >= f.span_start && w.answer_end_piece <= doc_end) {
          f.start_position = w.answer_start_piece - f.span_start + doc_offset;
          f.end_position = w.answer_end_piece - f.span_start + doc_offset;
        }
      }
      features_.push_back(f);
    }
    windows_.push_back(std::move(w));
  }
}

std::int64_t Features::length(const Feature& f) const {
  return static_cast<std::int64_t>(windows(f.example).query_ids.size()) + f.span_length + 3;
}

std::int32_t Features::id_at(const Feature& f, std::int64_t pos) const {
  const auto& q = windows(f.example).query_ids;
  const auto nq = static_cast<std::int64_t>(q.size());
  if (pos == 0) return cls_;
  if (pos <= nq) return q[static_cast<std::size_t>(pos - 1)];
  if (pos == nq + 1 || pos == nq + 2 + f.span_length) return sep_;
  const Paragraph& p =
      data_->paragraphs[static_cast<std::size_t>(data_->examples[static_cast<std::size_t>(f.example)].paragraph)];
  return p.piece_ids.at(static_cast<std::size_t>(f.span_start + pos - nq - 2));
}

void Features::write_row(const Feature& f, std::int64_t* input_ids, std::int64_t* token_type_ids,
                         std::int64_t* attention_mask) const {
  const std::int64_t n = length(f), S = options_.max_seq_length, doc_offset = n - f.span_length - 1;
  for (std::int64_t i = 0; i < S; ++i) {
    const bool real = i < n;
    input_ids[i] = real ? id_at(f, i) : 0;
    token_type_ids[i] = real && i >= doc_offset ? 1 : 0;  // the document and the last [SEP]
    attention_mask[i] = real ? 1 : 0;
  }
}

std::int32_t Features::word_at(const Feature& f, std::int64_t pos) const {
  const auto doc_offset = static_cast<std::int64_t>(windows(f.example).query_ids.size()) + 2;
  if (pos < doc_offset || pos >= doc_offset + f.span_length) return -1;
  const Paragraph& p =
      data_->paragraphs[static_cast<std::size_t>(data_->examples[static_cast<std::size_t>(f.example)].paragraph)];
  return p.piece_to_word.at(static_cast<std::size_t>(f.span_start + pos - doc_offset));
}

bool Features::is_max_context(const Feature& f, std::int64_t pos) const {
  const ExampleWindows& w = windows(f.example);
  const auto doc_offset = static_cast<std::int64_t>(w.query_ids.size()) + 2;
  if (pos < doc_offset || pos >= doc_offset + f.span_length) return false;
  const std::int64_t piece = f.span_start + pos - doc_offset;
  // _check_is_max_context: score = min(left, right) + 0.01 * length; the first best window wins.
  double best_score = 0;
  std::int64_t best = -1;
  for (std::size_t s = 0; s < w.spans.size(); ++s) {
    const auto [start, length] = w.spans[s];
    const std::int64_t end = start + length - 1;
    if (piece < start || piece > end) continue;
    const double score = static_cast<double>(std::min(piece - start, end - piece)) + 0.01 * length;
    if (best < 0 || score > best_score) {
      best_score = score;
      best = static_cast<std::int64_t>(s);
    }
  }
  return best == f.span_index;
}

}  // namespace bertx::squad
