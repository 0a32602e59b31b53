// test_tokenizer_golden.cpp - parity with google-research/bert tokenization.py (FullTokenizer, uncased,
// max_input_chars_per_word 200) on ../shared/golden/tokenizer: 3590 lines of real and tricky text whose
// basic tokens, word pieces and ids the reference produced (see MANIFEST.md "tokenizer/").
// No known differences: utf8proc's Unicode 15 tables differ from the reference's 14.0 only on characters
// new in 15.0, and none is in the inputs.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertx/tokenizer.hpp"
#include "test_util.hpp"

namespace {

const std::string kDir = std::string(BERTX_SHARED_DIR) + "/golden/tokenizer";

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace

TEST_CASE("tokenizer matches tokenization.py on every golden line") {
  REQUIRE_MESSAGE(std::filesystem::exists(kDir + "/tokens.jsonl"), "golden data missing: " << kDir);
  const auto summary = nlohmann::json::parse(bertx::test::read_text(kDir + "/summary.json"));
  const bertx::Tokenizer tok(bertx::Vocab::load(kDir + "/vocab.txt"), bertx::TokenizerOptions{});

  // inputs.txt is split on '\n' only (lines hold \r, \v, \f, U+0085, U+2028, U+2029, NUL).
  const std::string inputs = bertx::test::read_text(kDir + "/inputs.txt");
  std::vector<std::string> lines;
  for (std::size_t pos = 0; pos < inputs.size();) {
    std::size_t nl = inputs.find('\n', pos);
    if (nl == std::string::npos) nl = inputs.size();
    lines.push_back(inputs.substr(pos, nl - pos));
    pos = nl + 1;
  }
  REQUIRE(lines.size() == summary.at("lines").get<std::size_t>());
  REQUIRE(lines.size() == 3590);

  std::ifstream jsonl(kDir + "/tokens.jsonl", std::ios::binary);
  std::string row;
  std::size_t n = 0, matching = 0, pieces = 0, unks = 0;
  while (std::getline(jsonl, row)) {
    const auto j = nlohmann::json::parse(row);
    const std::size_t line = j.at("line").get<std::size_t>();
    REQUIRE(line == n);
    const std::string& text = lines.at(line);
    REQUIRE(j.at("text").get<std::string>() == text);
    const auto basic = j.at("basic_tokens").get<std::vector<std::string>>();
    const auto tokens = j.at("tokens").get<std::vector<std::string>>();
    const auto ids = j.at("ids").get<std::vector<std::int32_t>>();
    const auto got_basic = tok.basic_tokenize(text);
    const auto got_tokens = tok.tokenize(text);
    const auto got_ids = tok.encode(text);
    INFO("line " << line << " (" << j.at("source").get<std::string>() << "): " << text);
    CHECK_MESSAGE(got_basic == basic, "basic tokens: got [" << join(got_basic) << "], want [" << join(basic) << "]");
    CHECK_MESSAGE(got_tokens == tokens, "pieces: got [" << join(got_tokens) << "], want [" << join(tokens) << "]");
    CHECK(got_ids == ids);
    matching += got_basic == basic && got_tokens == tokens && got_ids == ids;
    pieces += ids.size();
    for (auto id : ids) unks += id == tok.vocab().unk_id();
    ++n;
  }
  MESSAGE(matching << "/" << n << " golden lines match");
  CHECK(n == lines.size());
  CHECK(matching == n);
  CHECK(pieces == summary.at("wordpieces").get<std::size_t>());
  CHECK(unks == summary.at("unk_pieces").get<std::size_t>());
}
