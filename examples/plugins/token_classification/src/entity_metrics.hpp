// entity_metrics.hpp - entity-level precision / recall / F1 of BIO-tagged sequences, as seqeval's
// classification_report(mode="strict", scheme=IOB2) and its micro average.
//
// Strict IOB2: an entity is B-X followed by any number of I-X (same type X) and ends at anything else; an
// I-X that does not continue an entity of type X starts nothing (it is ignored). A predicted entity is
// correct only when sentence, first word, last word and type all equal a gold entity's: a partial overlap
// is a false positive and a false negative. Bare "B" / "I" (BioBERT's single-type NER sets) have the
// empty type. Precision, recall and F1 are 0 when their denominator is 0 (seqeval's zero_division=0).
// Pure C++ (no LibTorch): the plugin's evaluator and the example's unit test use it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ner {

enum class Prefix { O, B, I };

struct Tag {
  Prefix prefix = Prefix::O;
  std::string type;  // "" for O and for bare B / I
};

// "O", "B-X", "I-X", "B", "I". Throws bertx::Error naming the tag for anything else ("E-X", "b-X", "").
Tag parse_tag(const std::string& tag);

struct Entity {
  std::size_t sentence = 0, first = 0, last = 0;  // word positions, inclusive
  std::string type;
  auto operator<=>(const Entity&) const = default;
};

// The strict-IOB2 entities of one sentence's tags.
std::vector<Entity> extract_entities(const std::vector<std::string>& tags, std::size_t sentence = 0);

struct Counts {
  std::int64_t gold = 0, predicted = 0, correct = 0;
  double precision() const { return predicted ? static_cast<double>(correct) / static_cast<double>(predicted) : 0.0; }
  double recall() const { return gold ? static_cast<double>(correct) / static_cast<double>(gold) : 0.0; }
  double f1() const {
    const double p = precision(), r = recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
};

struct EntityReport {
  Counts total;                           // micro average over all types
  std::map<std::string, Counts> by_type;  // every type seen in gold or predictions
  std::int64_t words = 0, words_correct = 0;
  double accuracy() const { return words ? static_cast<double>(words_correct) / static_cast<double>(words) : 0.0; }
};

// Scores predicted against gold tag sequences (one vector per sentence). Throws bertx::Error when the number
// of sentences or a sentence's length differ (naming the sentence), or for an unparsable tag.
EntityReport evaluate(const std::vector<std::vector<std::string>>& gold,
                      const std::vector<std::vector<std::string>>& predicted);

}  // namespace ner
