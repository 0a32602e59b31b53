// test_tokenizer.cpp - hand-written WordPiece cases (tiny vocabs from Vocab::from_tokens): text cleaning,
// lower-casing with accents / final sigma / U+0130, CJK and punctuation splits, "##" continuations, the
// 200-char word limit, vocab loading (vocab.txt and tokenizer.json), the casing check and concurrent use. Parity with Google's
// tokenization.py over real text is tests/golden/test_tokenizer_golden.cpp.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "bertx/tokenizer.hpp"
#include "test_util.hpp"

using bertx::Tokenizer;
using bertx::TokenizerOptions;
using bertx::Vocab;
using Strings = std::vector<std::string>;

namespace {

std::shared_ptr<const Vocab> tiny_vocab() {
  return Vocab::from_tokens({"[PAD]", "[UNK]",  "[CLS]", "[SEP]", "[MASK]",   "hello", "world", "un",
                             "##aff", "##able", "##s",   "a",     "##a",      "b",     "##b",   "!",
                             ",",     ".",      "ab",    "中",    "文",       "σ",     "ς",     "ο",
                             "##ο",   "##δ",    "##ς",   "##σ",   "istanbul", "é",     "##é",   "Hello"});
}

Tokenizer lower_tok(std::int32_t max_chars = 200) {
  TokenizerOptions o;
  o.max_input_chars_per_word = max_chars;
  return Tokenizer::unchecked(tiny_vocab(), o);
}

Tokenizer cased_tok() {
  TokenizerOptions o;
  o.do_lower_case = false;
  return Tokenizer::unchecked(tiny_vocab(), o);
}

std::string repeat(const std::string& s, int n) {
  std::string r;
  for (int i = 0; i < n; ++i) r += s;
  return r;
}

}  // namespace

TEST_CASE("lower-casing strips accents and splits punctuation") {
  const auto t = lower_tok();
  CHECK(t.basic_tokenize("Héllo  WORLD!") == Strings{"hello", "world", "!"});
  CHECK(t.tokenize("Héllo  WORLD!") == Strings{"hello", "world", "!"});
  CHECK(t.encode("Héllo  WORLD!") == std::vector<std::int32_t>{5, 6, 15});
  CHECK(t.basic_tokenize("a.b,c!!") == Strings{"a", ".", "b", ",", "c", "!", "!"});
  // Unicode punctuation (P*) splits; symbols (S*) do not.
  CHECK(t.basic_tokenize("«x»y—z") == Strings{"«", "x", "»", "y", "—", "z"});
  CHECK(t.basic_tokenize("a+b$c") == Strings{"a", "+", "b", "$", "c"});  // ASCII 33-47 etc. are punctuation
  CHECK(t.basic_tokenize("a€b") == Strings{"a€b"});
  // Combining marks (Mn) are dropped after NFD; a token of marks only vanishes.
  CHECK(t.basic_tokenize("e\xcc\x81 \xcc\x81\xcc\x82 x") == Strings{"e", "x"});
}

TEST_CASE("cased mode keeps case and accents") {
  const auto t = cased_tok();
  CHECK(t.basic_tokenize("Héllo WORLD!") == Strings{"Héllo", "WORLD", "!"});
  CHECK(t.tokenize("Hello hello") == Strings{"Hello", "hello"});
}

TEST_CASE("Python lower-casing: final sigma and dotted capital I") {
  const auto t = lower_tok();
  CHECK(t.basic_tokenize("ΟΔΟΣ Σ ΣΟ ΟΣ.") == Strings{"οδος", "σ", "σο", "ος", "."});
  CHECK(t.tokenize("ΟΔΟΣ") == Strings{"ο", "##δ", "##ο", "##ς"});
  CHECK(t.basic_tokenize("İSTANBUL") == Strings{"istanbul"});  // U+0130 -> "i" + U+0307 (Mn, dropped)
}

TEST_CASE("text cleaning: controls dropped and whitespace as in tokenization.py") {
  const auto t = lower_tok();
  CHECK(t.basic_tokenize(std::string("a\0b", 3)) == Strings{"ab"});  // NUL dropped
  CHECK(t.basic_tokenize("a\x0b"
                         "b\x0c"
                         "c\x1f"
                         "d") == Strings{"abcd"});  // Cc, not whitespace
  CHECK(t.basic_tokenize("a\xc2\x85"
                         "b") == Strings{"ab"});  // U+0085 is Cc
  CHECK(t.basic_tokenize("a\xe2\x80\x8b"
                         "b") == Strings{"ab"});  // U+200B (Cf)
  CHECK(t.basic_tokenize("a\xef\xbf\xbd"
                         "b") == Strings{"ab"});  // U+FFFD
  CHECK(t.basic_tokenize("a\tb\r\nc\xc2\xa0"
                         "d\xe3\x80\x80"
                         "e") == Strings{"a", "b", "c", "d", "e"});
  CHECK(t.basic_tokenize("a\xe2\x80\xa8"
                         "b\xe2\x80\xa9"
                         "c") == Strings{"a", "b", "c"});            // U+2028/9: str.split()
  CHECK(t.basic_tokenize("he\xffl\xe2\x82lo") == Strings{"hello"});  // invalid UTF-8 bytes are ignored
  CHECK(t.basic_tokenize("").empty());
  CHECK(t.encode(" \t\r\n ").empty());
}

TEST_CASE("CJK ideographs become words of their own") {
  const auto t = lower_tok();
  CHECK(t.basic_tokenize("ab中文cd") == Strings{"ab", "中", "文", "cd"});
  CHECK(t.tokenize("ab中文") == Strings{"ab", "中", "文"});
  // Kana and Hangul are not in _is_chinese_char's blocks.
  CHECK(t.basic_tokenize("aカナb") == Strings{"aカナb"});
  TokenizerOptions o;
  o.tokenize_chinese_chars = false;
  CHECK(Tokenizer::unchecked(tiny_vocab(), o).basic_tokenize("ab中文cd") == Strings{"ab中文cd"});
}

TEST_CASE("WordPiece: greedy longest match with ## continuations") {
  const auto t = lower_tok();
  CHECK(t.tokenize("unaffable") == Strings{"un", "##aff", "##able"});
  CHECK(t.encode("unaffable") == std::vector<std::int32_t>{7, 8, 9});
  CHECK(t.tokenize("abab") == Strings{"ab", "##a", "##b"});
  CHECK(t.tokenize("unaffablex hello") == Strings{"[UNK]", "hello"});  // one bad piece: the word is [UNK]
  CHECK(t.tokenize("[MASK]") == Strings{"[UNK]", "[UNK]", "[UNK]"});   // no special-token handling
  std::vector<std::int32_t> ids{42};
  t.encode_word("unaffable  hello", ids);  // appends; splits on whitespace only, no lower-casing
  CHECK(ids == std::vector<std::int32_t>{42, 7, 8, 9, 5});
}

TEST_CASE("WordPiece: a one-byte first piece then a continuation (fuzz find: index start - 2 wrapped)") {
  // Found at once by fuzz_vocab on its seed (fuzz/corpus/vocab/seed-golden_cut): with start == 1 the "##" was
  // written at p[start - 2] computed in size_t, p + SIZE_MAX (undefined behaviour; UBSan flags it in the asan
  // preset). Cased and uncased encode paths.
  const auto v = Vocab::from_tokens({"[PAD]", "[UNK]", "a", "##b", "##c", "x"});
  for (bool lower : {true, false}) {
    TokenizerOptions o;
    o.do_lower_case = lower;
    const Tokenizer t = Tokenizer::unchecked(v, o);
    CHECK(t.encode("ab abc x") == std::vector<std::int32_t>{2, 3, 2, 3, 4, 5});
    std::vector<std::int32_t> ids;
    t.encode_word("abc", ids);
    CHECK(ids == std::vector<std::int32_t>{2, 3, 4});
  }
}

TEST_CASE("words longer than max_input_chars_per_word become [UNK] counting characters") {
  const auto t = lower_tok();
  const auto w200 = t.encode(repeat("a", 200));
  REQUIRE(w200.size() == 200);
  CHECK(w200.front() == 11);
  CHECK(w200.back() == 12);
  CHECK(t.tokenize(repeat("a", 201)) == Strings{"[UNK]"});
  const auto c = cased_tok();                       // lower-casing would strip the accent
  CHECK(c.encode(repeat("é", 200)).size() == 200);  // 400 bytes but 200 characters
  CHECK(c.tokenize(repeat("é", 201)) == Strings{"[UNK]"});
  CHECK(lower_tok(3).tokenize("aaa aaaa") == Strings{"a", "##a", "##a", "[UNK]"});
}

TEST_CASE("vocab files: ids are line numbers and lines are stripped") {
  bertx::test::TempDir d;
  bertx::test::write_text(d / "v.txt", "[PAD]\r\n  [UNK] \r\nhello\r\n\xe3\x80\x80world\n##s");
  const auto v = Vocab::load(d / "v.txt");
  CHECK(v->size() == 5);
  CHECK(v->find("[UNK]") == 1);
  CHECK(v->find("world") == 3);
  CHECK(v->find("##s") == 4);  // last line without '\n'
  CHECK(v->token(2) == "hello");
  CHECK(v->pad_id() == 0);
  CHECK(v->unk_id() == 1);
  CHECK(v->cls_id() == -1);
  CHECK(v->find("nope") == -1);
  CHECK(v->max_token_bytes() == 5);
  CHECK_THROWS_WITH_AS(v->id("[MASK]"), ("vocab " + (d / "v.txt") + ": no token '[MASK]'").c_str(), bertx::Error);

  bertx::test::write_text(d / "dup.txt", "[UNK]\nx\ny\nx\n");
  CHECK(Vocab::load(d / "dup.txt")->find("x") == 3);  // as load_vocab's dict: the later line wins

  CHECK_THROWS_WITH_AS(Vocab::load(d / "missing.txt"),
                       ("vocab " + (d / "missing.txt") + ": cannot open (No such file or directory)").c_str(),
                       bertx::Error);
  CHECK_THROWS_WITH_AS(Vocab::load(d.path.string()), doctest::Contains("is a directory"), bertx::Error);
  bertx::test::write_text(d / "empty.txt", "\n");
  CHECK_THROWS_WITH_AS(Vocab::load(d / "empty.txt"), ("vocab " + (d / "empty.txt") + ": file is empty").c_str(),
                       bertx::Error);
}

TEST_CASE("a tokenizer.json (transformers 5 saves no vocab.txt) gives the vocab.txt it was made from") {
  bertx::test::TempDir d;
  const std::string txt = std::string(BERTX_SOURCE_DIR) + "/experiments/vocab/bert-base-uncased.txt";
  const auto ref = Vocab::load(txt);
  // The tokenizers library's layout, ids deliberately out of order in the map.
  nlohmann::json map = nlohmann::json::object();
  for (std::int32_t i = ref->size() - 1; i >= 0; --i) map[ref->token(i)] = i;
  nlohmann::json j = {{"version", "1.0"},
                      {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
                      {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", map}}}};
  bertx::test::write_text(d / "tokenizer.json", j.dump(2));
  const auto v = Vocab::load(d / "tokenizer.json");
  REQUIRE(v->size() == ref->size());
  CHECK(v->tokens() == ref->tokens());
  CHECK(v->mask_id() == ref->mask_id());
  CHECK(v->find("\"") == ref->find("\""));
  // What is not a WordPiece map is refused in one line naming the file.
  j["model"]["type"] = "BPE";
  bertx::test::write_text(d / "bpe.json", j.dump());
  CHECK_THROWS_WITH_AS(Vocab::load(d / "bpe.json"), doctest::Contains("a tokenizer.json of a 'BPE' model"),
                       bertx::Error);
  bertx::test::write_text(d / "gap.json", R"({"model": {"type": "WordPiece", "vocab": {"[PAD]": 0, "[UNK]": 2}}})");
  CHECK_THROWS_WITH_AS(Vocab::load(d / "gap.json"), doctest::Contains("token '[UNK]' has id 2; the 2 ids must be 0..1"),
                       bertx::Error);
  bertx::test::write_text(d / "bad.json", "{\"model\": ");
  CHECK_THROWS_WITH_AS(Vocab::load(d / "bad.json"), doctest::Contains("nor valid JSON"), bertx::Error);
}

TEST_CASE("a tokenizer refuses a vocab whose casing contradicts do_lower_case") {
  const auto uncased = Vocab::from_tokens({"[UNK]", "the", "in"});
  const auto cased = Vocab::from_tokens({"[UNK]", "the", "The", "In"});
  CHECK(!uncased->looks_cased());
  CHECK(cased->looks_cased());
  TokenizerOptions lower, keep;
  keep.do_lower_case = false;
  CHECK_NOTHROW(Tokenizer(uncased, lower));
  CHECK_NOTHROW(Tokenizer(cased, keep));
  CHECK_THROWS_WITH_AS(Tokenizer(cased, lower),
                       doctest::Contains("looks cased (it has capitalised words such as 'The') but do_lower_case "
                                         "is true"),
                       bertx::Error);
  CHECK_THROWS_WITH_AS(Tokenizer(uncased, keep), doctest::Contains("looks uncased"), bertx::Error);
  CHECK_NOTHROW(Tokenizer::unchecked(cased, lower));
  CHECK_THROWS_WITH_AS(Tokenizer(Vocab::from_tokens({"a"}), lower), doctest::Contains("no token '[UNK]'"),
                       bertx::Error);
}

TEST_CASE("concurrent encodes agree with one thread") {
  const auto t = lower_tok();
  std::vector<std::string> lines;
  const char* words[] = {"Héllo",          "world!", "unaffable", "中文", "ΟΔΟΣ", "abab",
                         "x\xe2\x80\xa8y", "a.b",    "İ",         "zzz",  "\t",   "ÉÉ"};
  for (int i = 0; i < 400; ++i) {
    std::string line;
    for (int k = 0; k <= i % 23; ++k) line += std::string(words[(i * 7 + k * 5) % 12]) + (k % 3 ? " " : "");
    line += repeat("a", i % 210);
    lines.push_back(line);
  }
  std::vector<std::vector<std::int32_t>> expect;
  for (const auto& l : lines) expect.push_back(t.encode(l));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> pool;
  for (int th = 0; th < 4; ++th)
    pool.emplace_back([&, th] {
      for (int rep = 0; rep < 20; ++rep)
        for (std::size_t i = 0; i < lines.size(); ++i) {
          const std::size_t j = (i + static_cast<std::size_t>(th) * 97) % lines.size();
          if (t.encode(lines[j]) != expect[j]) ++mismatches[static_cast<std::size_t>(th)];
        }
    });
  for (auto& p : pool) p.join();
  CHECK(mismatches == std::vector<int>{0, 0, 0, 0});
}
