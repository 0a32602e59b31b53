// test_data_pipeline.cpp - `data pretrain` end to end on a corpus generated in the test with the real
// bert-base-uncased vocab: statistics in stats.json and in the HDF5 shards (masked ratio, no masked special
// tokens, lengths), byte-identical shards for the same seed (any thread count) and different ones for another
// seed, length bins, dynamic masking, corpus weights, skipped non-UTF-8 lines, and the one-line errors
// (empty corpus, vocab without [MASK], corrupt bz2) through the bertx binary.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "bertx/data/hdf5_shard.hpp"
#include "data/pretrain.hpp"
#include "bertx/rng.hpp"
#include "test_util.hpp"

using namespace bertx;
using namespace bertx::data;
using bertx::test::read_text;
using bertx::test::TempDir;
using bertx::test::write_text;
namespace fs = std::filesystem;

namespace {

const std::string kVocab = std::string(BERTX_SHARED_DIR) + "/golden/tokenizer/vocab.txt";

const std::vector<std::string>& words() {
  static const std::vector<std::string> w = [] {
    std::vector<std::string> out;
    std::ifstream in(kVocab);
    std::string line;
    for (int id = 0; std::getline(in, line); ++id) {
      bool alpha = id >= 1996 && line.size() >= 2;
      for (char c : line) alpha = alpha && c >= 'a' && c <= 'z';
      if (alpha) out.push_back(line);
    }
    return out;
  }();
  return w;
}

// One document per line: `docs` documents of min..max sentences of 5..25 words.
std::string corpus(int docs, int min_sent, int max_sent, std::uint64_t seed) {
  Rng rng(seed);
  const auto& w = words();
  std::string text;
  for (int d = 0; d < docs; ++d) {
    const auto ns = rng.randint(min_sent, max_sent);
    for (int s = 0; s < ns; ++s) {
      const auto nw = rng.randint(5, 25);
      for (int i = 0; i < nw; ++i) {
        std::string word = w[rng.below(w.size())];
        if (i == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
        if (i == 2 && rng.uniform() < 0.1) word = "Dr. Smith";
        if (i == 3 && rng.uniform() < 0.1) word = "3.14";
        text += word + (i + 1 < nw ? " " : ". ");
      }
    }
    text += "\n";
  }
  return text;
}

PretrainOptions options(const std::string& input, const std::string& out) {
  PretrainOptions o;
  o.inputs = {{input, 1.0}};
  o.vocab = kVocab;
  o.out = out;
  o.instances.dupe_factor = 2;
  o.threads = 2;
  return o;
}

nlohmann::json stats(const std::string& dir) { return nlohmann::json::parse(read_text(dir + "/stats.json")); }

}  // namespace

TEST_CASE("pretrain: shards and stats on a generated corpus") {
  TempDir dir;
  write_text(dir / "corpus.txt", corpus(300, 10, 60, 1));
  PretrainOptions o = options(dir / "corpus.txt", dir / "out");
  const PretrainStats st = run_pretrain(o);
  const auto j = stats(dir / "out");
  MESSAGE("instances " << st.instances << ", masked ratio " << st.masked_ratio() << ", NSP random share "
                       << st.random_next_share());
  CHECK(j["documents"] == 300);
  CHECK(j["instances"].get<std::int64_t>() == st.instances);
  CHECK(std::abs(j["masked_ratio"].get<double>() - 0.15) <= 0.01);
  CHECK(std::abs(j["mask_split"]["mask"].get<double>() - 0.8) <= 0.02);
  CHECK(std::abs(j["mask_split"]["random"].get<double>() - 0.1) <= 0.02);
  CHECK(std::abs(j["mask_split"]["kept"].get<double>() - 0.1) <= 0.02);
  CHECK(j["nsp_random_share"].get<double>() > 0.45);
  CHECK(j["nsp_random_share"].get<double>() < 0.65);

  const ShardArrays a = read_shard(dir / "out/shard-00000.hdf5");
  CHECK(a.n == st.instances);
  CHECK(a.seq_len == 128);
  CHECK(a.max_predictions == 20);
  bool ok = true;
  std::int64_t tokens = 0, masked = 0;
  for (std::int64_t r = 0; r < a.n && ok; ++r) {
    int len = 0;
    while (len < 128 && a.input_mask[r * 128 + len]) ++len;
    tokens += len;
    for (int t = len; t < 128; ++t) ok = ok && a.input_ids[r * 128 + t] == 0 && a.input_mask[r * 128 + t] == 0;
    int b = 0;  // first token of segment B; [SEP] ends segment A at b - 1
    while (b < len && a.segment_ids[r * 128 + b] == 0) ++b;
    ok = ok && a.input_ids[r * 128] == 101 && a.input_ids[r * 128 + b - 1] == 102 &&
         a.input_ids[r * 128 + len - 1] == 102;
    for (int m = 0; m < 20; ++m) {
      const std::int32_t p = a.masked_lm_positions[r * 20 + m], label = a.masked_lm_ids[r * 20 + m];
      if (p == 0) continue;
      ++masked;
      // Never a special token (the label is the original); the replacement may be any vocab id, as Google's.
      ok = ok && p < len && p != b - 1 && p != len - 1 && label != 101 && label != 102 && label != 0;
    }
  }
  CHECK(ok);
  CHECK(static_cast<double>(masked) / static_cast<double>(tokens) == doctest::Approx(st.masked_ratio()));
}

TEST_CASE("pretrain: byte-identical for the same seed and any thread count, different for another seed") {
  TempDir dir;
  write_text(dir / "corpus.txt", corpus(120, 5, 40, 2));
  PretrainOptions o = options(dir / "corpus.txt", dir / "a");
  o.shards = 2;
  run_pretrain(o);
  o.out = dir / "b";
  run_pretrain(o);
  o.out = dir / "c";
  o.threads = 1;
  run_pretrain(o);
  o.out = dir / "d";
  o.instances.seed = 99;
  run_pretrain(o);
  for (const char* f : {"shard-00000.hdf5", "shard-00001.hdf5"}) {
    const std::string a = read_text(dir / "a/" + f);
    CHECK(!a.empty());
    CHECK(a == read_text(dir / "b/" + f));
    CHECK(a == read_text(dir / "c/" + f));
    CHECK(a != read_text(dir / "d/" + f));
  }
}

TEST_CASE("pretrain: phase-2 length bins, dynamic masking and whole-word masking") {
  TempDir dir;
  write_text(dir / "corpus.txt", corpus(80, 20, 80, 3));
  PretrainOptions o = options(dir / "corpus.txt", dir / "bins");
  o.instances.seq_len = 512;
  o.instances.mask.max_predictions = 80;
  o.bin_size = 64;
  const PretrainStats st = run_pretrain(o);
  std::int64_t total = 0;
  for (const auto& f : st.files) {
    const ShardArrays a = read_shard(dir / "bins/" + f.name);
    const int bin = std::stoi(f.name.substr(f.name.find("-bin-") + 5, 2));
    CHECK(a.seq_len == std::min(512, (bin + 1) * 64));
    bool in_bin = true;
    for (std::int64_t r = 0; r < a.n; ++r) {
      int len = 0;
      while (len < a.seq_len && a.input_mask[r * a.seq_len + len]) ++len;
      in_bin = in_bin && len > bin * 64 && len <= (bin + 1) * 64;
    }
    CHECK_MESSAGE(in_bin, f.name);
    total += a.n;
  }
  CHECK(total == st.instances);
  CHECK(st.files.size() >= 2);

  o = options(dir / "corpus.txt", dir / "dyn");
  o.instances.dynamic_masking = true;
  run_pretrain(o);
  const ShardArrays d = read_shard(dir / "dyn/shard-00000.hdf5");
  CHECK(d.max_predictions == 0);
  CHECK(std::find(d.input_ids.begin(), d.input_ids.end(), 103) == d.input_ids.end());

  o = options(dir / "corpus.txt", dir / "wwm");
  o.instances.mask.whole_word = true;
  const PretrainStats w = run_pretrain(o);
  CHECK(std::abs(w.masked_ratio() - 0.15) <= 0.015);
}

TEST_CASE("pretrain: Google's blank-line format, corpus weights and skipped non-UTF-8 lines") {
  TempDir dir;
  write_text(dir / "google.txt", "First sentence here.\nSecond sentence here.\n\nAnother document starts.\nIt ends.\n");
  PretrainOptions o = options(dir / "google.txt", dir / "g");
  PretrainStats g = run_pretrain(o);
  CHECK(g.documents == 2);
  CHECK(g.sentences == 4);

  write_text(dir / "a/part.txt", corpus(100, 5, 20, 4));
  write_text(dir / "b.txt", corpus(100, 5, 20, 5) + "Bad \xFF\xFE line.\n" + corpus(1, 3, 3, 6));
  o = options(dir / "a", dir / "mix1");
  o.inputs.push_back({dir / "b.txt", 1.0});
  PretrainStats one = run_pretrain(o);
  CHECK(one.corpus.non_utf8_lines == 1);
  REQUIRE(one.corpus.examples.size() == 1);
  CHECK(one.corpus.examples[0].find("b.txt:101: not UTF-8") != std::string::npos);
  CHECK(stats(dir / "mix1")["skipped"]["non_utf8_lines"] == 1);
  o.out = dir / "mix2";
  o.inputs[1].weight = 3.0;
  PretrainStats three = run_pretrain(o);
  const double ratio = static_cast<double>(three.instances) / static_cast<double>(one.instances);
  CHECK(ratio > 1.8);  // b's 101 documents used 3x instead of 1x: about (100 + 3 * 101) / (100 + 101)
  CHECK(ratio < 2.2);
}

TEST_CASE("pretrain: empty corpus and a vocab without [MASK] are one-line errors naming the file") {
  TempDir dir;
  write_text(dir / "empty.txt", "\n   \n\n");
  CHECK_THROWS_WITH_AS(run_pretrain(options(dir / "empty.txt", dir / "o")),
                       doctest::Contains("empty.txt: empty corpus"), Error);
  write_text(dir / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  write_text(dir / "c.txt", "The the the.\n");
  PretrainOptions o = options(dir / "c.txt", dir / "o");
  o.vocab = dir / "vocab.txt";
  CHECK_THROWS_WITH_AS(run_pretrain(o), doctest::Contains("vocab.txt: no token '[MASK]'"), Error);
  CHECK_THROWS_WITH_AS(run_pretrain(options(dir / "missing.txt", dir / "o")),
                       doctest::Contains("missing.txt: no such file"), Error);
  write_text(dir / "ok.txt", corpus(5, 3, 5, 7));
  run_pretrain(options(dir / "ok.txt", dir / "twice"));
  CHECK_THROWS_WITH_AS(run_pretrain(options(dir / "ok.txt", dir / "twice")),
                       doctest::Contains("twice: already holds 1 file(s) like shard-00000.hdf5"), Error);
}

TEST_CASE("cli: bertx data errors are one line with exit code 2") {
  TempDir dir;
  write_text(dir / "bad.xml.bz2", "BZh91AY&SY this is not really bz2 data at all");
  auto r = bertx::test::run_command(std::string(BERTX_BIN) + " data wikipedia --dump " + (dir / "bad.xml.bz2") +
                                    " --out " + (dir / "w"));
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("bertx: error: " + (dir / "bad.xml.bz2") + ": corrupt bz2 data") != std::string::npos);
  write_text(dir / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  write_text(dir / "c.txt", "The the the.\n");
  r = bertx::test::run_command(std::string(BERTX_BIN) + " data pretrain --input " + (dir / "c.txt") + " --vocab " +
                               (dir / "vocab.txt") + " --out " + (dir / "o"));
  CHECK(r.exit_code == 2);
  CHECK(r.output == "bertx: error: vocab " + (dir / "vocab.txt") + ": no token '[MASK]'\n");
}
