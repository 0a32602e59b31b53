// test_glue.cpp - GLUE data and metrics without LibTorch: TSV splitting as the official loaders do it
// (quotechar=None), the real MRPC dev sample in ../shared/golden/glue, per-task layouts (CoLA headerless,
// MNLI train/dev widths), errors naming file:line, truncation and token types, submission files, and the
// metrics against reference values derived independently (derivations in the comments; cross-checked with
// plain python3 using other formulas: sklearn's covariance form of Matthews, rank-by-counting for Spearman).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "bertx/error.hpp"
#include "features.hpp"
#include "metrics.hpp"
#include "tasks.hpp"
#include "test_util.hpp"
#include "tsv.hpp"

using namespace bertx;
using bertx::test::error_of;
using namespace bertx::glue;

namespace {

const std::string kGolden = std::string(BERTX_SHARED_DIR) + "/golden/glue/MRPC/dev.tsv";

}  // namespace

TEST_CASE("binary accuracy F1 and Matthews equal hand-derived values") {
  // pred vs gold: TP = 4 (rows 0, 3, 6, 9), FP = 2 (rows 1, 7), FN = 1 (row 4), TN = 3 (rows 2, 5, 8).
  const std::vector<std::int64_t> pred{1, 1, 0, 1, 0, 0, 1, 1, 0, 1}, gold{1, 0, 0, 1, 1, 0, 1, 0, 0, 1};
  CHECK(accuracy(pred, gold) == doctest::Approx(0.7));                  // 7 / 10
  CHECK(f1(pred, gold) == doctest::Approx(8.0 / 11.0).epsilon(1e-12));  // 2TP / (2TP + FP + FN) = 8 / 11
  // (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (12 - 2) / sqrt(6 * 5 * 5 * 4) = 10 / sqrt(600)
  CHECK(matthews(pred, gold) == doctest::Approx(0.408248290463863).epsilon(1e-12));
  // F1 of class 0 instead: TP' = 3, FP' = 1, FN' = 2 -> 6 / 9
  CHECK(f1(pred, gold, 0) == doctest::Approx(6.0 / 9.0).epsilon(1e-12));
}

TEST_CASE("multi-class Matthews equals the covariance form") {
  // predicted counts p = (2, 2, 3), true counts t = (2, 3, 2), correct c = 4 of s = 7:
  // (c s - sum p t) / sqrt((s^2 - sum p^2)(s^2 - sum t^2)) = (28 - 16) / sqrt(32 * 32) = 0.375
  // (python3, cov of one-hot indicators as sklearn defines it: 0.37500000000000006)
  CHECK(matthews({0, 1, 2, 0, 1, 2, 2}, {0, 1, 1, 0, 2, 2, 1}) == doctest::Approx(0.375).epsilon(1e-12));
}

TEST_CASE("Pearson and Spearman with ties equal hand-derived values") {
  const std::vector<double> x{1, 2, 2, 3, 5, 5, 5, 8}, y{2, 1, 4, 3, 7, 5, 5, 9};
  // means 31/8, 36/8; Sxy = 77/2, Sxx = 295/8, Syy = 48 -> 38.5 / sqrt(36.875 * 48) = 38.5 / sqrt(1770)
  CHECK(pearson(x, y) == doctest::Approx(0.9151116754424421).epsilon(1e-12));
  // average ranks: x -> 1, 2.5, 2.5, 4, 6, 6, 6, 8; y -> 2, 1, 4, 3, 7, 5.5, 5.5, 8
  const std::vector<double> rx{1, 2.5, 2.5, 4, 6, 6, 6, 8}, ry{2, 1, 4, 3, 7, 5.5, 5.5, 8};
  CHECK(average_ranks(x) == rx);
  CHECK(average_ranks(y) == ry);
  // doubled ranks: Sxy = 146, Sxx = 158, Syy = 166 -> 146 / sqrt(158 * 166) = 146 / sqrt(26228)
  CHECK(spearman(x, y) == doctest::Approx(0.9015094183400432).epsilon(1e-12));
}

TEST_CASE("undefined metrics are 0 as sklearn reports them") {
  CHECK(f1({0, 0}, {0, 0}) == 0.0);               // no positive anywhere
  CHECK(matthews({1, 1, 1}, {0, 1, 0}) == 0.0);   // constant prediction
  CHECK(pearson({1, 1, 1}, {1, 2, 3}) == 0.0);    // constant input
  CHECK_THROWS_AS(accuracy({1}, {1, 0}), Error);  // sizes differ
}

TEST_CASE("lines split on tabs only: quotes are ordinary characters") {
  // python3: list(csv.reader(io.StringIO(s), delimiter="\t", quotechar=None)) gives exactly these rows.
  CHECK(split_tabs("a\t\"b\"\"\tc") == std::vector<std::string_view>{"a", "\"b\"\"", "c"});
  CHECK(split_tabs("\"x\ty\"\t\"\t\"z") == std::vector<std::string_view>{"\"x", "y\"", "\"", "\"z"});
  CHECK(split_tabs("\"\"\"\t\t\"q \"r\" s") == std::vector<std::string_view>{"\"\"\"", "", "\"q \"r\" s"});
  CHECK(split_tabs("") == std::vector<std::string_view>{""});
}

TEST_CASE("the real MRPC dev sample loads with its quotes intact") {
  const auto ex = load_examples(task("mrpc"), kGolden, /*labelled=*/true);
  REQUIRE(ex.size() == 6);
  std::vector<std::int64_t> labels;
  for (const auto& e : ex) labels.push_back(e.label);
  CHECK(labels == std::vector<std::int64_t>{1, 0, 0, 1, 0, 1});
  CHECK(ex[0].text_a == "He said the foodservice pie business doesn 't fit the company 's long-term growth strategy .");
  CHECK(ex[0].text_b ==
        "\" The foodservice pie business does not fit our long-term growth strategy .");  // an unbalanced quote
  CHECK(ex[1].text_b ==
        "His wife said he was \" 100 percent behind George Bush \" and looked forward to using his years of training "
        "in the war .");
  CHECK(ex[5].index == 5);  // no index column in MRPC dev: the row ordinal
}

TEST_CASE("a row with the wrong column count is an error naming file:line") {
  test::TempDir d;
  test::write_text(d / "dev.tsv",
                   "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n0\t3\t4\ta \"quoted\ttab\" b\tc\n");
  const std::string msg = error_of([&] { load_examples(task("mrpc"), d / "dev.tsv", true); });
  CHECK(msg.find(d / "dev.tsv:3: 6 tab-separated columns, expected 5") != std::string::npos);
  test::write_text(d / "cola.tsv", "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\n");
  CHECK(error_of([&] {
          load_examples(task("cola"), d / "cola.tsv", true);
        }).find(d / "cola.tsv:2: 3 tab-separated columns, expected 4") != std::string::npos);
  test::write_text(d / "bad_label.tsv",
                   "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\nyes\t3\t4\ta\tb\n");
  CHECK(error_of([&] {
          load_examples(task("mrpc"), d / "bad_label.tsv", true);
        }).find(d / "bad_label.tsv:3: label 'yes'") != std::string::npos);
  test::write_text(d / "missing.tsv", "Quality\t#1 String\t#2 String\n");
  CHECK(error_of([&] { load_examples(task("mrpc"), d / "missing.tsv", true); }) ==
        "<no error>");  // only the columns read are required ...
  CHECK(error_of([&] {
          load_examples(task("qqp"), d / "missing.tsv", true);
        }).find(d / "missing.tsv:1: no column 'question1'") != std::string::npos);  // ... and a missing one is named
  test::write_text(d / "sts.tsv",
                   "index\tgenre\tfilename\tyear\told_"
                   "index\tsource1\tsource2\tsentence1\tsentence2\tscore\n0\tg\tf\ty\t0\ts\ts\ta\tb\tfive\n");
  CHECK(error_of([&] {
          load_examples(task("stsb"), d / "sts.tsv", true);
        }).find(d / "sts.tsv:2: score 'five' is not a number") != std::string::npos);
  CHECK(error_of([&] { load_examples(task("mrpc"), d / "absent.tsv", true); }).find(d / "absent.tsv: cannot open") !=
        std::string::npos);
}

TEST_CASE("CoLA is headerless and its test file has an index column, BOM and CRLF are removed") {
  test::TempDir d;
  test::write_text(
      d / "train.tsv",
      "\xEF\xBB\xBFgj04\t1\t\tOur friends won't buy this analysis.\r\ngj04\t0\t*\tThey drank the pub \"dry.\r\n");
  const auto ex = load_examples(task("cola"), d / "train.tsv", true);
  REQUIRE(ex.size() == 2);
  CHECK(ex[0].label == 1);
  CHECK(ex[1].label == 0);
  CHECK(ex[1].text_a == "They drank the pub \"dry.");
  CHECK(ex[0].text_b.empty());
  test::write_text(d / "test.tsv", "index\tsentence\n7\tBill whistled.\n9\tBill \"pushed\n");
  const auto t = load_examples(task("cola"), d / "test.tsv", false);
  REQUIRE(t.size() == 2);
  CHECK(t[1].index == 9);
  CHECK(t[1].text_a == "Bill \"pushed");
  CHECK(t[1].label == -1);
}

TEST_CASE("MNLI train and dev differ in width, the label is the gold_label column") {
  test::TempDir d;
  const std::string parses = "\t(p)\t(h)\t(ROOT p)\t(ROOT h)\t";
  test::write_text(d / "train.tsv",
                   "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_"
                   "parse\tsentence2_parse\t"
                   "sentence1\tsentence2\tlabel1\tgold_label\n0\t1\t1e\tgov" +
                       parses + "He said \"no.\tHe spoke.\tneutral\tneutral\n");
  test::write_text(d / "dev_matched.tsv",
                   "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_"
                   "parse\tsentence2_parse\t"
                   "sentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
                   "4\t1\t1e\tgov" +
                       parses +
                       "A\tB\tneutral\tcontradiction\tcontradiction\tcontradiction\tentailment\tcontradiction\n");
  const auto tr = load_examples(task("mnli"), d / "train.tsv", true);
  REQUIRE(tr.size() == 1);
  CHECK(tr[0].label == 2);  // contradiction, entailment, neutral
  CHECK(tr[0].text_a == "He said \"no.");
  const auto dev = load_examples(task("mnli"), d / "dev_matched.tsv", true, 1);
  REQUIRE(dev.size() == 1);
  CHECK(dev[0].label == 0);
  CHECK(dev[0].index == 4);
  CHECK(dev[0].set == 1);
}

TEST_CASE("pairs truncate the longer side first and token types switch after the first [SEP]") {
  std::vector<std::int32_t> a{1, 2, 3, 4, 5}, b{6, 7};
  truncate_pair(a, b, 5);  // pops a (longer) until 3 + 2 = 5
  CHECK(a == std::vector<std::int32_t>{1, 2, 3});
  CHECK(b == std::vector<std::int32_t>{6, 7});
  std::vector<std::int32_t> c{1, 2}, e{3, 4};
  truncate_pair(c, e, 3);  // equal lengths: b loses first
  CHECK(c == std::vector<std::int32_t>{1, 2});
  CHECK(e == std::vector<std::int32_t>{3});

  // ids: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 the=5 cat=6 sat=7 dog=8 ran=9
  auto vocab = Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "dog", "ran"});
  Tokenizer tok(vocab, TokenizerOptions{});
  Features f = featurize(tok, "The cat sat", "the dog ran", 7);  // 3 + 3 > 7 - 3: b loses "ran" (tie), then a "sat"
  CHECK(f.ids == std::vector<std::int32_t>{2, 5, 6, 3, 5, 8, 3});
  CHECK(f.type_b_from == 4);
  Features s = featurize(tok, "the cat sat the dog ran", "", 6);  // single: 6 - 2 tokens
  CHECK(s.ids == std::vector<std::int32_t>{2, 5, 6, 7, 5, 3});
  CHECK(s.type_b_from == 6);
  const auto all = featurize_all(tok, std::vector<Example>(600, Example{"cat", "dog"}), 8, 3);
  REQUIRE(all.size() == 600);
  CHECK(all[599].ids == std::vector<std::int32_t>{2, 6, 3, 8, 3});
}

TEST_CASE("scores follow each task's GLUE metrics, MNLI scores matched and mismatched apart") {
  auto o = [](std::int64_t set, std::int64_t pred, std::int64_t gold) {
    Outcome x;
    x.set = set, x.label = pred, x.gold = gold, x.labelled = true;
    return x;
  };
  const auto m = score(task("mnli"), {o(0, 1, 1), o(0, 2, 1), o(1, 0, 0), o(1, 2, 2), o(1, 1, 0), o(1, 1, 1)});
  REQUIRE(m.size() == 2);
  CHECK(m.at("accuracy") == doctest::Approx(0.5));      // 1 of 2 matched
  CHECK(m.at("accuracy_mm") == doctest::Approx(0.75));  // 3 of 4 mismatched
  const auto c = score(task("cola"), {o(0, 1, 1), o(0, 0, 0)});
  CHECK(c.size() == 1);
  CHECK(c.at("mcc") == doctest::Approx(1.0));
  const auto r = score(task("mrpc"), {o(0, 1, 1), o(0, 1, 0)});
  CHECK(r.at("accuracy") == doctest::Approx(0.5));
  CHECK(r.at("f1") == doctest::Approx(2.0 / 3.0));  // TP 1, FP 1: 2 / 3
  CHECK(score(task("rte"), {Outcome{}}).empty());   // unlabelled (test) outcomes are not scored
  // ChemProt: micro F1 over the CPR classes, "false" (0) is no relation. Gold 1,2,0,3,0; predicted 1,3,0,0,2:
  // TP 1 (the first), predicted relations 3, gold relations 3 -> 2 * 1 / 6.
  const auto cp = score(task("chemprot"), {o(0, 1, 1), o(0, 3, 2), o(0, 0, 0), o(0, 0, 3), o(0, 2, 0)});
  CHECK(cp.at("micro_f1") == doctest::Approx(1.0 / 3.0));
  CHECK(cp.at("accuracy") == doctest::Approx(0.4));
}

TEST_CASE("submission files carry the names and label texts the GLUE server expects") {
  test::TempDir d;
  auto o = [](std::int64_t index, std::int64_t set, std::int64_t label, double value = 0) {
    Outcome x;
    x.index = index, x.set = set, x.label = label, x.value = value;
    return x;
  };
  const auto files = write_submission(task("mnli"), d.path.string(), {o(0, 0, 1), o(1, 0, 2), o(0, 1, 0)});
  REQUIRE(files.size() == 2);
  CHECK(test::read_text(d / "MNLI-m.tsv") == "index\tprediction\n0\tentailment\n1\tneutral\n");
  CHECK(test::read_text(d / "MNLI-mm.tsv") == "index\tprediction\n0\tcontradiction\n");
  write_submission(task("cola"), d.path.string(), {o(3, 0, 1)});
  CHECK(test::read_text(d / "CoLA.tsv") == "index\tprediction\n3\t1\n");
  write_submission(task("stsb"), d.path.string(), {o(0, 0, -1, 3.14159), o(1, 0, -1, -0.5)});
  CHECK(test::read_text(d / "STS-B.tsv") == "index\tprediction\n0\t3.142\n1\t-0.500\n");
  write_submission(task("qnli"), d.path.string(), {o(0, 0, 1)});
  CHECK(test::read_text(d / "QNLI.tsv") == "index\tprediction\n0\tnot_entailment\n");
  CHECK(task("sst2").submission_files == std::vector<std::string>{"SST-2.tsv"});
  CHECK(error_of([&] { task("squad"); }).find("unknown GLUE task 'squad'") != std::string::npos);
}
