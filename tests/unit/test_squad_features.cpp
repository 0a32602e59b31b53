// test_squad_features.cpp - run_squad feature creation (plugins/squad/squad_data.cpp) on the real
// SQuAD dev subsets of ../shared/golden/squad with the real bert-base-uncased vocab: every answerable
// training example's answer span, read back from its window's word pieces and projected onto the context
// (get_final_text), equals the gold answer after official normalisation; windows cover the document with
// exactly one max-context window per piece; the question is cut to max_query_length; bad files fail with
// the file and id (or are skipped with the id, as run_squad skips unrecoverable answers).
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "bertx/error.hpp"
#include "squad_eval.hpp"
#include "squad_data.hpp"
#include "squad_predict.hpp"
#include "test_util.hpp"

namespace sq = bertx::squad;

namespace {

const std::string kSquad = std::string(BERTX_SHARED_DIR) + "/golden/squad";
const std::string kVocab = std::string(BERTX_SHARED_DIR) + "/golden/tokenizer/vocab.txt";

const bertx::Tokenizer& tokenizer() {
  static const bertx::Tokenizer tok(bertx::Vocab::load(kVocab), bertx::TokenizerOptions{});
  return tok;
}

// The text of a window's answer span [start, end], as write_predictions rebuilds it.
std::string span_text(const sq::Dataset& d, const sq::Features& f, const sq::Feature& feat, std::int64_t start,
                      std::int64_t end) {
  std::string pieces;
  for (std::int64_t i = start; i <= end; ++i)
    pieces += (i > start ? " " : "") + tokenizer().vocab().token(f.id_at(feat, i));
  std::string tok_text;
  for (std::size_t pos = 0; pos < pieces.size();) {  // " ##" then "##" removed, as run_squad
    if (pieces.compare(pos, 3, " ##") == 0)
      pos += 3;
    else if (pieces.compare(pos, 2, "##") == 0)
      pos += 2;
    else
      tok_text += pieces[pos++];
  }
  const auto& para =
      d.paragraphs[static_cast<std::size_t>(d.examples[static_cast<std::size_t>(feat.example)].paragraph)];
  std::string orig;
  for (std::int32_t w = f.word_at(feat, start); w <= f.word_at(feat, end); ++w)
    orig += (orig.empty() ? "" : " ") + para.doc_tokens[static_cast<std::size_t>(w)];
  return sq::get_final_text(tok_text, orig, tokenizer());
}

struct Counts {
  int examples = 0, answerable = 0, checked = 0, windows = 0;
};

Counts check_file(const std::string& file, bool v2, sq::FeatureOptions opts) {
  sq::Dataset d = sq::read_dataset(file, sq::ReadOptions{true, v2});
  CHECK(d.skipped.empty());  // the golden subsets' answers all match their contexts
  const sq::Features f(d, tokenizer(), opts, true);
  Counts c;
  c.examples = static_cast<int>(d.examples.size());
  for (std::size_t e = 0; e < d.examples.size(); ++e) {
    const sq::Example& ex = d.examples[e];
    const sq::ExampleWindows& w = f.windows(static_cast<std::int32_t>(e));
    INFO("question " << ex.id);
    CHECK(static_cast<std::int64_t>(w.query_ids.size()) <= opts.max_query_length);
    // Windows cover every piece; each piece is max-context in exactly one window.
    const auto& para = d.paragraphs[static_cast<std::size_t>(ex.paragraph)];
    std::vector<int> max_ctx(para.piece_ids.size(), 0);
    bool answer_fits = false;
    for (std::size_t k = 0; k < w.spans.size(); ++k) {
      const sq::Feature& feat = f.features()[static_cast<std::size_t>(w.first_feature) + k];
      CHECK(f.length(feat) <= opts.max_seq_length);
      const std::int64_t doc_offset = static_cast<std::int64_t>(w.query_ids.size()) + 2;
      for (std::int64_t pos = doc_offset; pos < doc_offset + feat.span_length; ++pos)
        if (f.is_max_context(feat, pos)) ++max_ctx[static_cast<std::size_t>(feat.span_start + pos - doc_offset)];
      if (!ex.is_impossible && w.answer_start_piece >= feat.span_start &&
          w.answer_end_piece < feat.span_start + feat.span_length) {
        answer_fits = true;
        REQUIRE(feat.start_position > 0);
        CHECK(feat.end_position >= feat.start_position);
        CHECK(sq::normalize_answer(span_text(d, f, feat, feat.start_position, feat.end_position)) ==
              sq::normalize_answer(ex.orig_answer_text));
        ++c.checked;
      } else {
        CHECK(feat.start_position == 0);  // [CLS]: no answer in this window
        CHECK(feat.end_position == 0);
      }
      ++c.windows;
    }
    for (int n : max_ctx) CHECK(n == 1);
    if (!ex.is_impossible) {
      ++c.answerable;
      CHECK(answer_fits);  // the answers here are shorter than a window
    }
  }
  return c;
}

}  // namespace

TEST_CASE("every training answer maps to word pieces that read back as the gold answer (v1.1, 384/128)") {
  REQUIRE_MESSAGE(std::filesystem::exists(kSquad + "/dev-v1.1-subset.json"), "golden data missing: " << kSquad);
  const Counts c = check_file(kSquad + "/dev-v1.1-subset.json", false, sq::FeatureOptions{});
  CHECK(c.examples == 26);
  CHECK(c.checked == 26);  // one window each at 384 tokens
  MESSAGE("v1.1: " << c.checked << " answers checked in " << c.windows << " windows");
}

TEST_CASE("the same with short windows (64 tokens, stride 16, question <= 12 pieces) and v2.0 unanswerables") {
  const sq::FeatureOptions small{64, 16, 12};
  const Counts c1 = check_file(kSquad + "/dev-v1.1-subset.json", false, small);
  CHECK(c1.windows > 3 * c1.examples);  // the paragraphs span several windows
  CHECK(c1.checked > c1.answerable);    // answers seen in more than one window each
  const Counts c2 = check_file(kSquad + "/dev-v2.0-subset.json", true, small);
  CHECK(c2.examples == 58);
  CHECK(c2.answerable == 26);
  MESSAGE("64-token windows: v1.1 " << c1.checked << " answer windows of " << c1.windows << ", v2.0 " << c2.checked
                                    << " of " << c2.windows);
}

TEST_CASE("_improve_answer_span narrows a whole-word span to the answer's pieces") {
  // "(1854" -> pieces "(" "1854": the answer "1854" starts inside the word.
  bertx::test::TempDir dir;
  bertx::test::write_text(dir / "d.json", R"({"data": [{"paragraphs": [{"context": "Built in (1854) by the Normans.",
    "qas": [{"id": "q1", "question": "When?", "answers": [{"text": "1854", "answer_start": 10}]}]}]}]})");
  sq::Dataset d = sq::read_dataset(dir / "d.json", sq::ReadOptions{true, false});
  const sq::Features f(d, tokenizer(), sq::FeatureOptions{}, true);
  const sq::Feature& feat = f.features().at(0);
  CHECK(feat.end_position == feat.start_position);
  CHECK(tokenizer().vocab().token(f.id_at(feat, feat.start_position)) == "1854");
  CHECK(span_text(d, f, feat, feat.start_position, feat.end_position) == "1854");
}

TEST_CASE("bad SQuAD files: errors name the file and id, mismatched answers are counted skips") {
  bertx::test::TempDir dir;
  auto file = [&](const std::string& name, const std::string& qas) {
    bertx::test::write_text(
        dir / name, R"({"data": [{"paragraphs": [{"context": "The Normans came from Normandy in France.", "qas": [)" +
                        qas + "]}]}]}");
    return dir / name;
  };
  const std::string ok = R"({"id": "a1", "question": "Where?", "answers": [{"text": "France", "answer_start": 34}]})";
  const std::string dup = file("dup.json", ok + "," + ok);
  CHECK_THROWS_WITH_AS(sq::read_dataset(dup, {}), doctest::Contains("dup.json: question a1: duplicate id"),
                       bertx::Error);
  const std::string missing = file("missing.json", R"({"id": "a2", "answers": []})");
  CHECK_THROWS_WITH_AS(sq::read_dataset(missing, {}),
                       doctest::Contains("missing.json: question a2: missing field 'question'"), bertx::Error);
  const std::string no_answer = file("noans.json", R"({"id": "a3", "question": "Q?", "answers": []})");
  CHECK_THROWS_WITH_AS(sq::read_dataset(no_answer, {true, false}),
                       doctest::Contains("question a3: no answer for training"), bertx::Error);
  CHECK_THROWS_WITH_AS(sq::read_dataset(no_answer, {true, true}),
                       doctest::Contains("question a3: missing field 'is_impossible'"), bertx::Error);
  CHECK_NOTHROW(sq::read_dataset(no_answer, {false, false}));  // evaluation reads no answer positions
  // 2^64 - 1: a JSON integer, but not an int64 (get<int64> wrapped it to -1, then skipped it as "-1 outside").
  const std::string huge = file("huge.json", R"({"id": "a4", "question": "Q?", "answers": [{"text": "France",
      "answer_start": 18446744073709551615}]})");
  CHECK_THROWS_WITH_AS(sq::read_dataset(huge, {true, false}),
                       doctest::Contains("question a4: answer 0: field 'answer_start' is not a 64-bit integer, got "
                                         "18446744073709551615"),
                       bertx::Error);

  // A wrong offset (points at "Normandy") and an offset past the end: skipped with their ids, others kept.
  const std::string bad =
      file("bad.json", ok + R"(, {"id": "b1", "question": "Q?", "answers": [{"text": "France", "answer_start": 22}]},
      {"id": "b2", "question": "Q?", "answers": [{"text": "France", "answer_start": 400}]},
      {"id": "b3", "question": "Q?", "answers": [{"text": "France", "answer_start": 9223372036854775807}]})");
  const sq::Dataset d = sq::read_dataset(bad, {true, false});
  REQUIRE(d.examples.size() == 1);
  CHECK(d.examples[0].id == "a1");
  REQUIRE(d.skipped.size() == 3);
  CHECK(d.skipped[0].id == "b1");
  CHECK(d.skipped[0].reason.find("not found") != std::string::npos);
  CHECK(d.skipped[1].id == "b2");
  CHECK(d.skipped[1].reason.find("outside the context") != std::string::npos);
  // The largest int64 offset: refused without computing offset + length (signed overflow, undefined; UBSan in asan).
  CHECK(d.skipped[2].id == "b3");
  CHECK(d.skipped[2].reason.find("outside the context") != std::string::npos);
}

TEST_CASE("get_final_text projects de-tokenized pieces onto the original words") {
  const auto& tok = tokenizer();
  CHECK(sq::get_final_text("steve smith", "Steve Smith's", tok) == "Steve Smith");
  CHECK(sq::get_final_text("france", "France.", tok) == "France");
  CHECK(sq::get_final_text("1854", "(1854–1856)", tok) == "1854");
  CHECK(sq::get_final_text("cafe", "Café", tok) == "Café");          // accents stripped, same length
  CHECK(sq::get_final_text("normandy", "Rouen,", tok) == "Rouen,");  // not found: the original words
}

TEST_CASE("predict: best valid span by start + end logit, max-context windows, max_answer_length, v2.0 null answer") {
  bertx::test::TempDir dir;
  bertx::test::write_text(
      dir / "p.json",
      R"({"data": [{"paragraphs": [{"context": "Rollo led the Normans, who settled in Normandy around 911 and later conquered England.",
    "qas": [{"id": "p1", "question": "Who?", "answers": [{"text": "Rollo", "answer_start": 0}]}]}]}]})");
  sq::Dataset d = sq::read_dataset(dir / "p.json", {});
  const sq::FeatureOptions opts{16, 4, 4};  // several windows of 11 document pieces
  const sq::Features f(d, tokenizer(), opts, false);
  const auto& feats = f.features();
  REQUIRE(feats.size() > 2);
  const auto& para = d.paragraphs[0];
  // The sequence position of document piece `piece` in window `k`, or -1 when outside it.
  auto pos_of = [&](std::size_t k, std::int32_t piece) -> std::int64_t {
    const auto& ft = feats[k];
    if (piece < ft.span_start || piece >= ft.span_start + ft.span_length) return -1;
    return static_cast<std::int64_t>(f.windows(0).query_ids.size()) + 2 + piece - ft.span_start;
  };
  auto piece_of_word = [&](const std::string& w) {
    for (std::size_t i = 0; i < para.doc_tokens.size(); ++i)
      if (para.doc_tokens[i] == w) return para.word_to_piece[i];
    FAIL("no word " << w);
    return -1;
  };
  const std::int32_t normandy = piece_of_word("Normandy"), year = piece_of_word("911");
  std::vector<sq::WindowLogits> logits(feats.size());
  for (auto& l : logits) {
    l.start.assign(static_cast<std::size_t>(opts.max_seq_length), 0.0f);
    l.end.assign(static_cast<std::size_t>(opts.max_seq_length), 0.0f);
  }
  // "Normandy" scores 5 + 5 in every window that holds it; only its max-context window may answer.
  for (std::size_t k = 0; k < feats.size(); ++k)
    if (pos_of(k, normandy) >= 0) {
      logits[k].start[static_cast<std::size_t>(pos_of(k, normandy))] = 5;
      logits[k].end[static_cast<std::size_t>(pos_of(k, normandy))] = 5;
    }
  sq::PredictOptions po;
  auto preds = sq::predict(d, f, logits, tokenizer(), po);
  REQUIRE(preds.size() == 1);
  CHECK(preds[0].text == "Normandy");
  CHECK(preds[0].nbest.size() <= 20);
  CHECK(preds[0].nbest[0].start_logit == 5.0);

  // A higher-scoring span "Normandy around 911" (3 pieces, in Normandy's max-context window): rejected
  // with max_answer_length 2, chosen with 3.
  for (std::size_t k = 0; k < feats.size(); ++k)
    if (pos_of(k, year) >= 0) logits[k].end[static_cast<std::size_t>(pos_of(k, year))] = 9;
  po.max_answer_length = 2;
  CHECK(sq::predict(d, f, logits, tokenizer(), po)[0].text == "Normandy");
  po.max_answer_length = 3;
  const auto long_pred = sq::predict(d, f, logits, tokenizer(), po)[0];
  CHECK(long_pred.text == "Normandy around 911");
  CHECK(long_pred.nbest.at(1).text == "Normandy");  // the n-best keeps the runner-up
  for (std::size_t k = 0; k < feats.size(); ++k)
    if (pos_of(k, year) >= 0) logits[k].end[static_cast<std::size_t>(pos_of(k, year))] = 0;

  // v2.0: the null score (start[0] + end[0], lowest over windows) against the best span.
  po.version_2_with_negative = true;
  for (auto& l : logits) l.start[0] = l.end[0] = 6;  // null 12 > span 10 in every window
  auto v2 = sq::predict(d, f, logits, tokenizer(), po);
  CHECK(v2[0].text == "");
  CHECK(v2[0].null_odds == doctest::Approx(12.0 - 10.0));
  po.null_score_diff_threshold = 2.5;  // the difference 2 is now below the threshold
  CHECK(sq::predict(d, f, logits, tokenizer(), po)[0].text == "Normandy");
  logits[0].start[0] = 1;  // one window with a low null score sets score_null = 1 + 6
  po.null_score_diff_threshold = 0;
  v2 = sq::predict(d, f, logits, tokenizer(), po);
  CHECK(v2[0].text == "Normandy");
  CHECK(v2[0].null_odds == doctest::Approx(7.0 - 10.0));
}
