// test_data_reader.cpp - the hdf5_pretraining reader (plugin entry compiled in, no host): two ranks see
// disjoint samples that cover the epoch, resume from a saved position yields exactly the batches of an
// uninterrupted run (static and dynamic masking), NVIDIA conventions of the batch tensors, length bins,
// dynamic masks that change per epoch, the one-pass eval split, and clear errors.
#include "doctest_torch.hpp"

#include <set>
#include <string>
#include <vector>

#include "bertx/dataset.hpp"
#include "bertx/plugin.hpp"
#include "bertx/data/hdf5_shard.hpp"
#include "bertx/rng.hpp"
#include "plugin_entry.hpp"
#include "test_util.hpp"

using namespace bertx;
using bertx::test::TempDir;

namespace {

constexpr std::int32_t kCls = 101, kSep = 102, kMask = 103;

// Builds the reader through the plugin's registered factory, schema defaults + overrides.
std::shared_ptr<DatasetReader> make(const std::map<std::string, OptionValue>& overrides) {
  return test::make_from_entry<DatasetReader>(Kind::Dataset, "hdf5_pretraining", "[data] (hdf5_pretraining)",
                                              overrides);
}

// A shard of `rows` samples; sample g (global id) has input_ids [CLS, 5000+g, words..., SEP, words..., SEP].
void write_test_shard(const std::string& path, int first_id, int rows, int S, int P, std::uint64_t seed) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  data::ShardArrays a;
  a.resize(rows, S, P);
  Rng rng(seed);
  for (int r = 0; r < rows; ++r) {
    const int len = static_cast<int>(rng.randint(std::max(6, S / 2 + 1), S));
    const int b = len / 2;
    std::int32_t* ids = a.input_ids.data() + r * S;
    for (int t = 0; t < len; ++t) {
      ids[t] = static_cast<std::int32_t>(rng.randint(1996, 29000));
      a.input_mask[r * S + t] = 1;
      a.segment_ids[r * S + t] = t >= b ? 1 : 0;
    }
    ids[0] = kCls, ids[1] = 5000 + first_id + r, ids[b - 1] = kSep, ids[len - 1] = kSep;
    for (int m = 0; m < P && m < 3; ++m) {  // static masks at positions 2, 3, 4
      a.masked_lm_positions[r * P + m] = 2 + m;
      a.masked_lm_ids[r * P + m] = ids[2 + m];
      ids[2 + m] = kMask;
    }
    a.next_sentence_labels[r] = static_cast<std::int8_t>(r % 2);
  }
  data::write_shard(path, a);
}

std::vector<std::int64_t> sample_ids(const Batch& b) {
  std::vector<std::int64_t> out;
  at::Tensor ids = b.at("input_ids");
  for (std::int64_t i = 0; i < ids.size(0); ++i) out.push_back(ids[i][1].item<std::int64_t>());
  return out;
}

DatasetContext ctx(std::int64_t batch, int rank = 0, int world = 1, const std::string& split = "train") {
  DatasetContext c;
  c.split = split;
  c.batch_size = batch;
  c.rank = rank;
  c.world_size = world;
  c.seed = 42;
  return c;
}

bool same_batch(const Batch& a, const Batch& b) {
  if (a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [k, v] : a.tensors)
    if (!b.has(k) || !at::equal(v, b.at(k))) return false;
  return true;
}

std::string vocab_path() { return std::string(BERTX_SHARED_DIR) + "/golden/tokenizer/vocab.txt"; }

}  // namespace

TEST_CASE("reader: two ranks see disjoint samples that together cover the epoch") {
  TempDir dir;
  write_test_shard(dir / "shards/a.hdf5", 0, 40, 32, 5, 1);
  write_test_shard(dir / "shards/b.hdf5", 40, 50, 32, 5, 2);
  write_test_shard(dir / "shards/c.hdf5", 90, 38, 32, 5, 3);
  std::vector<std::set<std::int64_t>> seen(2);
  std::vector<std::vector<std::int64_t>> order(2);
  for (int rank = 0; rank < 2; ++rank) {
    auto r = make({{"dir", dir / "shards"}});
    r->open(ctx(4, rank, 2));
    CHECK(r->samples_per_epoch() == 64);
    for (int b = 0; b < 16; ++b) {
      CHECK(r->epoch() == 0);
      auto batch = r->next_batch();
      REQUIRE(batch.has_value());
      for (auto id : sample_ids(*batch)) {
        seen[rank].insert(id);
        order[rank].push_back(id);
      }
    }
    CHECK(r->epoch() == 1);
    std::vector<std::int64_t> next;
    for (int b = 0; b < 16; ++b)
      for (auto id : sample_ids(*r->next_batch())) next.push_back(id);
    CHECK(next != order[rank]);  // reshuffled for epoch 1
  }
  CHECK(seen[0].size() == 64);
  CHECK(seen[1].size() == 64);
  std::set<std::int64_t> all(seen[0]);
  all.insert(seen[1].begin(), seen[1].end());
  CHECK(all.size() == 128);  // disjoint and covering
  CHECK(*all.begin() == 5000);
  CHECK(*all.rbegin() == 5127);
}

TEST_CASE("reader: resume from a saved position yields the batches of an uninterrupted run") {
  TempDir dir;
  write_test_shard(dir / "shards/a.hdf5", 0, 70, 32, 5, 4);
  write_test_shard(dir / "shards/b.hdf5", 70, 58, 32, 5, 5);
  for (bool dynamic : {false, true}) {
    std::map<std::string, OptionValue> opts{{"dir", dir / "shards"}, {"prefetch", std::int64_t{3}}};
    if (dynamic) opts["dynamic_masking"] = true, opts["vocab"] = vocab_path();
    auto a = make(opts);
    a->open(ctx(5));
    for (int i = 0; i < 7; ++i) a->next_batch();
    const ReaderPosition saved = a->position();
    CHECK(saved.at("epoch") == 0);
    CHECK(saved.at("batch") == 7);
    CHECK(saved.at("sample") == 35);
    std::vector<Batch> expected;
    for (int i = 0; i < 30; ++i) expected.push_back(*a->next_batch());  // crosses into epoch 1 (25 per epoch)
    auto b = make(opts);
    b->open(ctx(5));
    b->seek(saved);
    bool same = true;
    for (int i = 0; i < 30; ++i) same = same && same_batch(expected[static_cast<std::size_t>(i)], *b->next_batch());
    CHECK_MESSAGE(same, (dynamic ? "dynamic" : "static"));
    CHECK(b->epoch() == 1);
    CHECK(b->position() == a->position());
  }
}

TEST_CASE("reader: batch tensors follow NVIDIA's conventions") {
  TempDir dir;
  write_test_shard(dir / "shards/a.hdf5", 0, 16, 24, 6, 6);
  auto r = make({{"dir", dir / "shards"}});
  r->open(ctx(8));
  Batch b = *r->next_batch();
  for (const char* k : {"input_ids", "token_type_ids", "attention_mask", "masked_lm_positions", "masked_lm_ids",
                        "masked_lm_labels", "next_sentence_labels"}) {
    REQUIRE_MESSAGE(b.has(k), k);
    CHECK_MESSAGE((b.at(k).scalar_type() == at::kLong), k);
  }
  CHECK(b.at("input_ids").sizes().vec() == std::vector<std::int64_t>{8, 24});
  CHECK(b.at("masked_lm_positions").sizes().vec() == std::vector<std::int64_t>{8, 6});
  CHECK(b.at("next_sentence_labels").sizes().vec() == std::vector<std::int64_t>{8});
  at::Tensor pos = b.at("masked_lm_positions"), ids = b.at("masked_lm_ids"), labels = b.at("masked_lm_labels");
  CHECK(at::equal(labels, at::where(pos.gt(0), ids, at::full_like(ids, -100))));
  CHECK(labels.ne(-100).sum(1).eq(3).all().item<bool>());  // 3 masks per row, 3 padded slots
  CHECK(at::equal(b.at("attention_mask").sum(1).gt(0), at::ones({8}, at::kBool)));
}

TEST_CASE("reader: length bins - a batch comes from one bin and is padded to its length only") {
  TempDir dir;
  write_test_shard(dir / "shards/s-bin-00.hdf5", 0, 48, 64, 4, 7);
  write_test_shard(dir / "shards/s-bin-01.hdf5", 48, 32, 128, 4, 8);
  auto r = make({{"dir", dir / "shards"}});
  r->open(ctx(8));
  CHECK(r->samples_per_epoch() == 80);
  std::set<std::int64_t> widths, ids;
  for (int i = 0; i < 10; ++i) {
    Batch b = *r->next_batch();
    const std::int64_t w = b.at("input_ids").size(1);
    widths.insert(w);
    for (auto id : sample_ids(b)) {
      CHECK((w == 64 ? id < 5048 : id >= 5048));
      ids.insert(id);
    }
  }
  CHECK(widths == std::set<std::int64_t>{64, 128});
  CHECK(ids.size() == 80);
}

TEST_CASE("reader: dynamic masking masks anew each epoch and never [CLS]/[SEP]/padding") {
  TempDir dir;
  data::ShardArrays a;
  write_test_shard(dir / "static.hdf5", 0, 8, 40, 5, 9);
  a = data::read_shard(dir / "static.hdf5");  // unmask, drop the masked_lm datasets: a dynamic shard
  for (std::int64_t r = 0; r < a.n; ++r)
    for (int m = 0; m < 3; ++m) a.input_ids[r * 40 + a.masked_lm_positions[r * 5 + m]] = a.masked_lm_ids[r * 5 + m];
  a.max_predictions = 0;
  std::filesystem::create_directories(dir / "dyn");
  data::write_shard(dir / "dyn/a.hdf5", a);
  auto r = make(
      {{"dir", dir / "dyn"}, {"dynamic_masking", true}, {"vocab", vocab_path()}, {"max_predictions", std::int64_t{6}}});
  r->open(ctx(8));
  std::vector<at::Tensor> masks;
  for (int epoch = 0; epoch < 2; ++epoch) {
    Batch b = *r->next_batch();
    at::Tensor ids = b.at("input_ids"), pos = b.at("masked_lm_positions"), labels = b.at("masked_lm_labels");
    CHECK(pos.sizes().vec() == std::vector<std::int64_t>{8, 6});
    for (std::int64_t i = 0; i < 8; ++i) {
      const std::int64_t len = b.at("attention_mask")[i].sum().item<std::int64_t>();
      std::int64_t n = 0;
      for (std::int64_t m = 0; m < 6; ++m) {
        const std::int64_t p = pos[i][m].item<std::int64_t>();
        if (p == 0) continue;
        ++n;
        CHECK(p < len);
        const std::int64_t original = labels[i][m].item<std::int64_t>();
        CHECK(original != kCls);
        CHECK(original != kSep);
        CHECK(original != 0);
      }
      CHECK(n == std::min<std::int64_t>(6, static_cast<std::int64_t>(std::nearbyint(len * 0.15))));
    }
    // Same samples in both epochs (one batch of 8 = the whole data), keyed by their restored id.
    at::Tensor restored = ids.clone();
    for (std::int64_t i = 0; i < 8; ++i)
      for (std::int64_t m = 0; m < 6; ++m)
        if (pos[i][m].item<std::int64_t>() > 0) restored[i][pos[i][m]] = labels[i][m];
    at::Tensor key = restored.select(1, 1).argsort();
    masks.push_back(ids.index_select(0, key).eq(kMask));
    CHECK(at::equal(restored.index_select(0, key).select(1, 1), at::arange(5000, 5008, at::kLong)));
  }
  CHECK_FALSE(at::equal(masks[0], masks[1]));
}

TEST_CASE("reader: the eval split is one ordered pass split across ranks") {
  TempDir dir;
  write_test_shard(dir / "train/a.hdf5", 0, 16, 16, 3, 10);
  write_test_shard(dir / "eval/a.hdf5", 0, 11, 16, 3, 11);
  std::vector<std::int64_t> all;
  for (int rank = 0; rank < 2; ++rank) {
    auto r = make({{"dir", dir / "train"}, {"eval_dir", dir / "eval"}});
    r->open(ctx(4, rank, 2, "eval"));
    std::int64_t n = 0;
    while (auto b = r->next_batch()) {
      for (auto id : sample_ids(*b)) all.push_back(id), ++n;
    }
    CHECK_FALSE(r->next_batch().has_value());
    CHECK(n == r->samples_per_epoch());
  }
  std::sort(all.begin(), all.end());
  std::vector<std::int64_t> want;
  for (int i = 0; i < 11; ++i) want.push_back(5000 + i);
  CHECK(all == want);
}

TEST_CASE("reader: missing folders and shards without masks are clear errors") {
  TempDir dir;
  auto r = make({{"dir", dir / "nothing"}});
  CHECK_THROWS_WITH_AS(r->open(ctx(4)), doctest::Contains("nothing: no such folder of HDF5 shards"), Error);
  write_test_shard(dir / "empty/readme.txt", 0, 1, 8, 1, 1);
  auto e = make({{"dir", dir / "empty"}});
  CHECK_THROWS_WITH_AS(e->open(ctx(4)), doctest::Contains("no HDF5 shards"), Error);
  data::ShardArrays a;
  a.resize(4, 8, 0);
  std::filesystem::create_directories(dir / "dyn");
  data::write_shard(dir / "dyn/x.hdf5", a);
  auto s = make({{"dir", dir / "dyn"}});
  CHECK_THROWS_WITH_AS(s->open(ctx(2)), doctest::Contains("x.hdf5: no masked_lm_positions"), Error);
  CHECK_THROWS_WITH_AS(make({{"dir", dir / "dyn"}, {"dynamic_masking", true}}), doctest::Contains("needs vocab"),
                       Error);
  auto small = make({{"dir", dir / "dyn"}, {"dynamic_masking", true}, {"vocab", vocab_path()}});
  CHECK_THROWS_WITH_AS(small->open(ctx(8)), doctest::Contains("no full batch"), Error);
}

TEST_CASE("reader: a masked_lm_positions value outside the sequence is an error naming the file and row") {
  TempDir dir;
  write_test_shard(dir / "bad/a.hdf5", 0, 4, 16, 3, 5);
  data::ShardArrays a = data::read_shard(dir / "bad/a.hdf5");
  a.masked_lm_positions[2 * 3 + 1] = 99;  // row 2, second prediction
  data::write_shard(dir / "bad/a.hdf5", a);
  auto r = make({{"dir", dir / "bad"}});
  r->open(ctx(4));
  CHECK_THROWS_WITH_AS(r->next_batch(),
                       doctest::Contains("a.hdf5: row 2: masked_lm_positions holds 99, outside the sequence [0, 16)"),
                       Error);
}
