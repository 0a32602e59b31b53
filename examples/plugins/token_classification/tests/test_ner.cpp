// test_ner.cpp - the example plugin's LibTorch-free parts: strict-IOB2 entity precision / recall / F1 against
// values computed by hand (partial overlaps and type changes are errors, an I- that continues nothing starts
// nothing), CoNLL parsing and its errors, the label map's checks, and first-sub-token features / chunking.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <algorithm>

#include <unistd.h>

#include "bertx/error.hpp"
#include "bio_data.hpp"
#include "entity_metrics.hpp"

using Tags = std::vector<std::vector<std::string>>;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& text) {
    path = std::filesystem::temp_directory_path() /
           ("test_ner_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++) + ".tsv");
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

}  // namespace

TEST_CASE("seqeval's README example: one of two entities right, word accuracy 0.8") {
  const Tags gold{{"O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"}, {"B-PER", "I-PER", "O"}};
  const Tags pred{{"O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"}, {"B-PER", "I-PER", "O"}};
  const auto r = ner::evaluate(gold, pred);
  CHECK(r.total.gold == 2);
  CHECK(r.total.predicted == 2);
  CHECK(r.total.correct == 1);  // MISC starts one word early: a partial overlap is wrong
  CHECK(r.total.precision() == doctest::Approx(0.5));
  CHECK(r.total.recall() == doctest::Approx(0.5));
  CHECK(r.total.f1() == doctest::Approx(0.5));
  CHECK(r.by_type.at("MISC").f1() == 0.0);
  CHECK(r.by_type.at("PER").f1() == 1.0);
  CHECK(r.accuracy() == doctest::Approx(0.8));
}

TEST_CASE("strict IOB2: an I- that continues nothing starts nothing, a type change ends the entity") {
  using E = ner::Entity;
  CHECK(ner::extract_entities({"I-X", "I-X", "O", "B-Y"}) == std::vector<E>{{0, 3, 3, "Y"}});
  CHECK(ner::extract_entities({"B-X", "I-Y", "I-X"}) == std::vector<E>{{0, 0, 0, "X"}});
  CHECK(ner::extract_entities({"B-X", "B-X", "I-X", "O"}, 4) == std::vector<E>{{4, 0, 0, "X"}, {4, 1, 2, "X"}});
  CHECK(ner::extract_entities({"B", "I", "O", "I", "B"}) == std::vector<E>{{0, 0, 1, ""}, {0, 4, 4, ""}});
  CHECK(ner::extract_entities({"O", "O"}).empty());
}

TEST_CASE("micro and per-type scores over several sentences, computed by hand") {
  // Sentence 0: gold X(0-1), Y(3); predicted I-X I-X (nothing) + Y(3)         -> gold 2, predicted 1, correct 1.
  // Sentence 1: gold D(0-1), C(3), D(5); predicted D(0) (too short), C(3-4) (too long), D(5)
  //                                                                        -> gold 3, predicted 3, correct 1.
  // Total: precision 2/4, recall 2/5, F1 = 2 * 0.5 * 0.4 / 0.9 = 4/9.
  const Tags gold{{"B-X", "I-X", "O", "B-Y"}, {"B-D", "I-D", "O", "B-C", "O", "B-D"}};
  const Tags pred{{"I-X", "I-X", "O", "B-Y"}, {"B-D", "O", "O", "B-C", "I-C", "B-D"}};
  const auto r = ner::evaluate(gold, pred);
  CHECK(r.total.gold == 5);
  CHECK(r.total.predicted == 4);
  CHECK(r.total.correct == 2);
  CHECK(r.total.precision() == doctest::Approx(0.5));
  CHECK(r.total.recall() == doctest::Approx(0.4));
  CHECK(r.total.f1() == doctest::Approx(4.0 / 9.0));
  CHECK(r.by_type.at("X").recall() == 0.0);
  CHECK(r.by_type.at("X").precision() == 0.0);  // nothing predicted: 0, not NaN
  CHECK(r.by_type.at("Y").f1() == 1.0);
  CHECK(r.by_type.at("D").f1() == doctest::Approx(0.5));  // gold 2, predicted 2, correct 1
  CHECK(r.by_type.at("C").f1() == 0.0);
  CHECK(r.accuracy() == doctest::Approx(7.0 / 10.0));  // wrong: s0 word 0, s1 words 1 and 4

  // Single-type BioBERT tags (bare B / I): gold 2 entities, one found -> P 1, R 0.5, F1 2/3.
  const auto b = ner::evaluate({{"B", "I", "O", "B"}}, {{"B", "I", "O", "O"}});
  CHECK(b.total.f1() == doctest::Approx(2.0 / 3.0));
  CHECK(ner::evaluate({{"B-X"}}, {{"O"}}).total.f1() == 0.0);
  CHECK(ner::evaluate({{"B-X"}}, {{"B-X"}}).total.f1() == 1.0);
}

TEST_CASE("scoring refuses mismatched inputs and non-BIO tags") {
  CHECK(error_of([] { ner::evaluate({{"O"}}, {}); }) == "entity scores: 1 gold sentences but 0 predicted");
  CHECK(error_of([] {
          ner::evaluate({{"O"}, {"O", "O"}}, {{"O"}, {"O"}});
        }) == "entity scores: sentence 1 has 2 gold tags but 1 predicted");
  CHECK(error_of([] { ner::extract_entities({"E-X"}); }) ==
        "tag 'E-X' is not BIO (expected O, B-TYPE, I-TYPE, B or I)");
  CHECK(error_of([] { ner::extract_entities({"BX"}); }).find("tag 'BX' is not BIO") == 0);
}

TEST_CASE("the label map checks its tags") {
  const ner::LabelMap m({"O", "B-Disease", "I-Disease"});
  CHECK(m.size() == 3);
  CHECK(m.id("I-Disease") == 2);
  CHECK(m.id("B-Chemical") == -1);
  CHECK(error_of([] { ner::LabelMap({"B", "I"}); }) == "labels: \"O\" is missing (the outside tag)");
  CHECK(error_of([] { ner::LabelMap({"O", "B-X"}); }) == "labels: 'B-X' without 'I-X'");
  CHECK(error_of([] { ner::LabelMap({"O", "O"}); }) == "labels: a label is listed twice");
  CHECK(error_of([] { ner::LabelMap({"O", "S-X"}); }).find("tag 'S-X' is not BIO") == 0);
}

TEST_CASE("CoNLL files: tabs or spaces, last column is the tag, DOCSTART and CRLF skipped, errors name file:line") {
  TempFile f("-DOCSTART- -X- O O\r\n\r\nAspirin\tB-Chemical\nrelieves\tO\r\n\n\nfever NN I-NP B-Disease\n");
  const auto s = ner::read_conll(f.path.string(), true);
  REQUIRE(s.size() == 2);
  CHECK(s[0].words == std::vector<std::string>{"Aspirin", "relieves"});
  CHECK(s[0].tags == std::vector<std::string>{"B-Chemical", "O"});
  CHECK(s[0].line == 3);
  CHECK(s[1].words == std::vector<std::string>{"fever"});
  CHECK(s[1].tags == std::vector<std::string>{"B-Disease"});

  TempFile untagged("Aspirin\nrelieves\n");
  CHECK(ner::read_conll(untagged.path.string(), false)[0].tags.empty());
  CHECK(error_of([&] { ner::read_conll(untagged.path.string(), true); }) ==
        untagged.path.string() + ":1: expected 'word<TAB>tag', got one column ('Aspirin')");
  TempFile mixed("Aspirin\tB\nrelieves\n");
  CHECK(error_of([&] { ner::read_conll(mixed.path.string(), false); }) ==
        mixed.path.string() + ":2: an untagged word in a tagged file");
  CHECK(error_of([] { ner::read_conll("/nonexistent/train.tsv", true); }).find("/nonexistent/train.tsv: cannot open") ==
        0);
}

TEST_CASE("features: the label sits on a word's first WordPiece, long sentences become chunks at word boundaries") {
  auto vocab =
      bertx::Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "aspirin", "##ol", "relieves", "fever"});
  const bertx::Tokenizer tok(vocab, bertx::TokenizerOptions{true});
  const ner::LabelMap labels({"O", "B-Chemical", "I-Chemical"});
  const std::vector<ner::Sentence> sentences{
      {{"Aspirinol", "relieves", "aspirinol"}, {"B-Chemical", "O", "I-Chemical"}, 1}};

  const auto one = ner::featurize(tok, sentences, &labels, 16, "f.tsv");
  REQUIRE(one.size() == 1);
  CHECK(one[0].ids == std::vector<std::int32_t>{2, 5, 6, 7, 5, 6, 3});
  CHECK(one[0].labels == std::vector<std::int64_t>{-100, 1, -100, 0, 2, -100, -100});
  CHECK(one[0].word_start == std::vector<std::uint8_t>{0, 1, 0, 1, 1, 0, 0});
  CHECK(one[0].words == 3);

  // Budget 3 pieces per chunk: [aspirin ##ol relieves] [aspirin ##ol].
  const auto two = ner::featurize(tok, sentences, &labels, 5, "f.tsv");
  REQUIRE(two.size() == 2);
  CHECK(two[0].words == 2);
  CHECK(two[1].first_word == 2);
  CHECK(two[1].words == 1);
  CHECK(two[1].labels == std::vector<std::int64_t>{-100, 2, -100, -100});

  const auto unlabelled = ner::featurize(tok, sentences, nullptr, 16, "f.tsv");
  CHECK(std::count(unlabelled[0].labels.begin(), unlabelled[0].labels.end(), -100) == 7);

  const std::vector<ner::Sentence> bad{{{"fever"}, {"B-Disease"}, 7}};
  CHECK(error_of([&] { ner::featurize(tok, bad, &labels, 16, "f.tsv"); }) ==
        "f.tsv:7: tag 'B-Disease' is not in [data] labels (O, B-Chemical, I-Chemical)");
}

TEST_CASE("the bundled synthetic set parses with its label map") {
  const ner::LabelMap labels({"O", "B-Chemical", "I-Chemical", "B-Disease", "I-Disease"});
  for (const char* name : {"train.tsv", "devel.tsv", "test.tsv"}) {
    const auto s = ner::read_conll(std::string(NER_DATA_DIR) + "/" + name, true);
    CHECK(s.size() >= 100);
    std::size_t entities = 0;
    for (const auto& sen : s) {
      for (const auto& t : sen.tags) CHECK(labels.id(t) >= 0);
      entities += ner::extract_entities(sen.tags).size();
    }
    CHECK(entities >= s.size());  // at least one entity per sentence on average
  }
}
