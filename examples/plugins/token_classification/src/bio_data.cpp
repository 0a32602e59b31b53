// bio_data.cpp - CoNLL / BIO TSV parsing, the label map and first-sub-token features (see bio_data.hpp).
#include "bio_data.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "bertx/error.hpp"
#include "entity_metrics.hpp"

namespace ner {

namespace {

std::vector<std::string> columns(const std::string& line) {
  std::vector<std::string> out;
  if (line.find('\t') != std::string::npos) {
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, '\t')) out.push_back(c);
    while (!out.empty() && out.back().empty()) out.pop_back();  // trailing tabs
  } else {
    std::stringstream ss(line);
    std::string c;
    while (ss >> c) out.push_back(c);
  }
  return out;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

std::vector<Sentence> read_conll(const std::string& path, bool require_labels) {
  std::ifstream in(path);
  if (!in)
    throw bertx::Error(
        path +
        ": cannot open (expected a CoNLL-style file: one 'word<TAB>tag' per line, blank line between sentences)");
  std::vector<Sentence> out;
  Sentence cur;
  auto flush = [&] {
    if (!cur.words.empty()) out.push_back(std::move(cur));
    cur = Sentence{};
  };
  std::string line;
  std::int64_t n = 0;
  int labelled = -1;  // unknown / 0 / 1 for the whole file
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (blank(line)) {
      flush();
      continue;
    }
    auto cols = columns(line);
    if (cols.front().rfind("-DOCSTART-", 0) == 0) {
      flush();
      continue;
    }
    const int has_tag = cols.size() >= 2;
    if (!has_tag && require_labels)
      throw bertx::Error(path + ":" + std::to_string(n) + ": expected 'word<TAB>tag', got one column ('" +
                         cols.front() + "')");
    if (labelled >= 0 && has_tag != labelled)
      throw bertx::Error(path + ":" + std::to_string(n) + ": " +
                         (has_tag ? "a tagged word in an untagged file" : "an untagged word in a tagged file"));
    labelled = has_tag;
    if (cur.words.empty()) cur.line = n;
    cur.words.push_back(cols.front());
    if (has_tag) cur.tags.push_back(cols.back());
  }
  flush();
  return out;
}

LabelMap::LabelMap(std::vector<std::string> labels) : labels_(std::move(labels)) {
  const std::set<std::string> all(labels_.begin(), labels_.end());
  if (all.size() != labels_.size()) throw bertx::Error("labels: a label is listed twice");
  if (!all.count("O")) throw bertx::Error("labels: \"O\" is missing (the outside tag)");
  for (const auto& l : labels_) {
    const Tag t = parse_tag(l);  // throws for a non-BIO label
    if (t.prefix == Prefix::O) continue;
    const std::string other = std::string(t.prefix == Prefix::B ? "I" : "B") + (t.type.empty() ? "" : "-" + t.type);
    if (!all.count(other)) throw bertx::Error("labels: '" + l + "' without '" + other + "'");
  }
}

std::int64_t LabelMap::id(const std::string& tag) const {
  auto it = std::find(labels_.begin(), labels_.end(), tag);
  return it == labels_.end() ? -1 : static_cast<std::int64_t>(it - labels_.begin());
}

std::vector<Chunk> featurize(const bertx::Tokenizer& tokenizer, const std::vector<Sentence>& sentences,
                             const LabelMap* labels, std::int64_t max_seq_length, const std::string& where) {
  if (max_seq_length < 3)
    throw bertx::Error("max_seq_length must be at least 3, got " + std::to_string(max_seq_length));
  const auto budget = static_cast<std::size_t>(max_seq_length - 2);  // pieces per chunk between [CLS] and [SEP]
  const bertx::Vocab& vocab = tokenizer.vocab();
  std::vector<Chunk> out;
  std::vector<std::int32_t> pieces;
  for (std::size_t s = 0; s < sentences.size(); ++s) {
    const Sentence& sen = sentences[s];
    auto open = [&](std::size_t first) {
      Chunk c;
      c.sentence = s, c.first_word = first;
      c.ids = {vocab.cls_id()}, c.labels = {kIgnore}, c.word_start = {0};
      return c;
    };
    auto close = [&](Chunk& c) {
      c.ids.push_back(vocab.sep_id()), c.labels.push_back(kIgnore), c.word_start.push_back(0);
      out.push_back(std::move(c));
    };
    Chunk c = open(0);
    for (std::size_t w = 0; w < sen.words.size(); ++w) {
      pieces.clear();
      tokenizer.encode(sen.words[w], pieces);
      if (pieces.empty()) pieces.push_back(vocab.unk_id());
      if (pieces.size() > budget) pieces.resize(budget);  // one very long word: keep what fits
      if (c.words > 0 && c.ids.size() - 1 + pieces.size() > budget) {
        close(c);
        c = open(w);
      }
      std::int64_t label = kIgnore;
      if (labels != nullptr && !sen.tags.empty()) {
        label = labels->id(sen.tags[w]);
        if (label < 0) {
          std::string known;
          for (const auto& l : labels->names()) known += (known.empty() ? "" : ", ") + l;
          throw bertx::Error(where + ":" + std::to_string(sen.line + static_cast<std::int64_t>(w)) + ": tag '" +
                             sen.tags[w] + "' is not in [data] labels (" + known + ")");
        }
      }
      for (std::size_t p = 0; p < pieces.size(); ++p) {
        c.ids.push_back(pieces[p]);
        c.labels.push_back(p == 0 ? label : kIgnore);
        c.word_start.push_back(p == 0);
      }
      ++c.words;
    }
    close(c);
  }
  return out;
}

}  // namespace ner
