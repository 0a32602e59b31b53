// entity_metrics.cpp - strict-IOB2 entity extraction and micro / per-type counts (see entity_metrics.hpp).
#include "entity_metrics.hpp"

#include <algorithm>
#include <set>

#include "bertx/error.hpp"

namespace ner {

Tag parse_tag(const std::string& tag) {
  if (tag == "O") return {};
  if ((tag.size() == 1 || (tag.size() > 2 && tag[1] == '-')) && (tag[0] == 'B' || tag[0] == 'I'))
    return {tag[0] == 'B' ? Prefix::B : Prefix::I, tag.size() > 2 ? tag.substr(2) : ""};
  throw bertx::Error("tag '" + tag + "' is not BIO (expected O, B-TYPE, I-TYPE, B or I)");
}

std::vector<Entity> extract_entities(const std::vector<std::string>& tags, std::size_t sentence) {
  std::vector<Entity> out;
  std::size_t i = 0;
  while (i < tags.size()) {
    const Tag t = parse_tag(tags[i]);
    if (t.prefix != Prefix::B) {  // O, or an I that continues nothing: no entity starts here
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    while (end < tags.size()) {
      const Tag n = parse_tag(tags[end]);
      if (n.prefix != Prefix::I || n.type != t.type) break;
      ++end;
    }
    out.push_back({sentence, i, end - 1, t.type});
    i = end;
  }
  return out;
}

EntityReport evaluate(const std::vector<std::vector<std::string>>& gold,
                      const std::vector<std::vector<std::string>>& predicted) {
  if (gold.size() != predicted.size())
    throw bertx::Error("entity scores: " + std::to_string(gold.size()) + " gold sentences but " +
                       std::to_string(predicted.size()) + " predicted");
  EntityReport r;
  for (std::size_t s = 0; s < gold.size(); ++s) {
    if (gold[s].size() != predicted[s].size())
      throw bertx::Error("entity scores: sentence " + std::to_string(s) + " has " + std::to_string(gold[s].size()) +
                         " gold tags but " + std::to_string(predicted[s].size()) + " predicted");
    const auto g = extract_entities(gold[s], s), p = extract_entities(predicted[s], s);
    const std::set<Entity> gold_set(g.begin(), g.end());
    for (const auto& e : g) ++r.by_type[e.type].gold, ++r.total.gold;
    for (const auto& e : p) {
      ++r.by_type[e.type].predicted, ++r.total.predicted;
      if (gold_set.count(e)) ++r.by_type[e.type].correct, ++r.total.correct;
    }
    for (std::size_t w = 0; w < gold[s].size(); ++w) r.words_correct += gold[s][w] == predicted[s][w];
    r.words += static_cast<std::int64_t>(gold[s].size());
  }
  return r;
}

}  // namespace ner
