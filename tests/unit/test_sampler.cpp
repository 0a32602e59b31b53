// test_sampler.cpp - bertx::Sampler (bertx/sampler.hpp), once for every reader built on it: each epoch's shuffle
// is a permutation that differs across epochs and seeds and equals the orders the readers used before the
// sampler (pinned values), ranks partition each epoch, an evaluation pass yields every row once, and
// seek(position()) anywhere, mid-epoch or at a boundary, replays exactly the following batches. Then the same
// replay through a reader built on it: the glue reader (plugin entry compiled in, no host) on a small TSV.
#include "doctest_torch.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "bertx/sampler.hpp"
#include "plugin_entry.hpp"
#include "test_util.hpp"

using namespace bertx;

namespace {

// The sampler set-ups the readers use: glue / bio_tsv train and eval, squad train, synthetic train and eval.
std::vector<SamplerOptions> setups(std::int64_t rows, std::int64_t batch, int rank, int world) {
  SamplerOptions stream;
  stream.rows = rows, stream.batch_size = batch, stream.rank = rank, stream.world_size = world, stream.seed = 7;
  SamplerOptions epoch = stream;
  epoch.batching = Batching::Epoch, epoch.epoch_seed = EpochSeed::Shift40;
  SamplerOptions batches = epoch;
  batches.shuffle = false, batches.sharding = Sharding::Batches, batches.drop_last = true;
  SamplerOptions shuffled_batches = batches;
  shuffled_batches.shuffle = true, shuffled_batches.drop_last = false;
  return {stream, epoch, batches, shuffled_batches};
}

std::string describe(const SamplerOptions& o) {
  std::ostringstream s;
  s << "rows " << o.rows << " batch " << o.batch_size << " rank " << o.rank << "/" << o.world_size << " shuffle "
    << o.shuffle << " repeat " << o.repeat << " drop_last " << o.drop_last << " sharding "
    << static_cast<int>(o.sharding) << " batching " << static_cast<int>(o.batching);
  return s.str();
}

std::vector<std::vector<std::int64_t>> take(Sampler& s, int n) {
  std::vector<std::vector<std::int64_t>> out;
  for (int i = 0; i < n; ++i) out.push_back(s.next().value().rows);
  return out;
}

// A glue reader through the plugin's registered factory, opened on `dir` (SST-2 layout).
std::shared_ptr<DatasetReader> glue_reader(const std::string& dir, std::int64_t batch, int rank, int world) {
  auto reader = test::make_from_entry<DatasetReader>(
      Kind::Dataset, "glue", "[data] (glue)",
      {{"task", std::string("sst2")},
       {"data_dir", dir},
       {"vocab", std::string(BERTX_SOURCE_DIR) + "/experiments/vocab/bert-base-uncased.txt"}});
  reader->open(DatasetContext{"train", batch, rank, world, 42});
  return reader;
}

std::vector<std::int64_t> example_indexes(const Batch& b) {
  at::Tensor t = b.at("example_index");
  return std::vector<std::int64_t>(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel());
}

}  // namespace

TEST_CASE("an epoch's shuffle is a permutation, differs across epochs and seeds, and keeps the readers' old orders") {
  for (EpochSeed how : {EpochSeed::Golden, EpochSeed::Shift40}) {
    const auto a = shuffled_rows(50, epoch_shuffle_seed(7, 0, how)),
               b = shuffled_rows(50, epoch_shuffle_seed(7, 1, how));
    const auto c = shuffled_rows(50, epoch_shuffle_seed(8, 0, how));
    auto sorted = a;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int64_t> iota(50);
    std::iota(iota.begin(), iota.end(), 0);
    CHECK(sorted == iota);
    CHECK(a != b);
    CHECK(a != c);
    CHECK(a != iota);
  }
  // Computed with the readers' own code before they moved onto the sampler (glue, bio_tsv: Golden; squad: Shift40).
  const std::vector<std::int64_t> epoch0{0, 6, 7, 11, 1, 10, 4, 5, 9, 8, 3, 2};
  CHECK(shuffled_rows(12, epoch_shuffle_seed(42, 0, EpochSeed::Golden)) == epoch0);
  CHECK(shuffled_rows(12, epoch_shuffle_seed(42, 0, EpochSeed::Shift40)) == epoch0);
  CHECK(shuffled_rows(12, epoch_shuffle_seed(42, 1, EpochSeed::Golden)) ==
        std::vector<std::int64_t>{4, 3, 11, 9, 10, 2, 7, 0, 6, 5, 8, 1});
  CHECK(shuffled_rows(12, epoch_shuffle_seed(42, 1, EpochSeed::Shift40)) ==
        std::vector<std::int64_t>{6, 7, 11, 3, 1, 4, 0, 9, 5, 10, 8, 2});
}

TEST_CASE("ranks partition each epoch, and a stream of batches walks the epochs in order") {
  for (const std::int64_t rows : {23, 24, 5}) {
    for (int world : {1, 3}) {
      for (std::size_t k = 0; k < setups(rows, 4, 0, world).size(); ++k) {
        for (std::int64_t e = 0; e < 3; ++e) {
          std::multiset<std::int64_t> seen;
          for (int r = 0; r < world; ++r) {
            Sampler s(setups(rows, 4, r, world)[k]);
            INFO(describe(s.options()) << " epoch " << e);
            for (std::int64_t i = 0; i < s.samples_per_epoch(); ++i) seen.insert(s.row(e, i));
          }
          const SamplerOptions o = setups(rows, 4, 0, world)[k];
          INFO(describe(o) << " epoch " << e);
          CHECK(std::set<std::int64_t>(seen.begin(), seen.end()).size() == seen.size());  // disjoint
          CHECK(static_cast<std::int64_t>(seen.size()) == (o.drop_last ? rows / (world * 4) * world * 4 : rows));
          CHECK((seen.empty() || (*seen.begin() >= 0 && *seen.rbegin() < rows)));
        }
      }
    }
  }
  // Batches in sequence, stream and epoch-bound: the same rows as row(e, i), epoch after epoch.
  for (const SamplerOptions& o : setups(23, 4, 1, 3)) {
    Sampler s(o), ref(o);
    INFO(describe(o));
    std::vector<std::int64_t> got, want;
    for (std::int64_t e = 0; e < 3; ++e)
      for (std::int64_t i = 0; i < ref.samples_per_epoch(); ++i) want.push_back(ref.row(e, i));
    while (got.size() < want.size()) {
      const SampledRows b = s.next().value();
      CHECK(static_cast<std::int64_t>(b.rows.size()) <= o.batch_size);
      got.insert(got.end(), b.rows.begin(), b.rows.end());
    }
    CHECK(got == want);
  }
}

TEST_CASE("an evaluation pass yields this rank's rows once, in order, then nothing") {
  for (int rank : {0, 2}) {
    SamplerOptions o;
    o.rows = 11, o.batch_size = 4, o.rank = rank, o.world_size = 3, o.shuffle = false, o.repeat = false;
    Sampler s(o);
    std::vector<std::int64_t> got;
    while (auto b = s.next()) got.insert(got.end(), b->rows.begin(), b->rows.end());
    std::vector<std::int64_t> want;
    for (std::int64_t k = rank; k < 11; k += 3) want.push_back(k);
    CHECK(got == want);
    CHECK(!s.next());
  }
}

TEST_CASE("seek(position()) anywhere replays exactly the following batches") {
  for (const std::int64_t rows : {23, 16}) {
    for (const SamplerOptions& o : setups(rows, 4, 1, 2)) {
      for (int before : {0, 1, 2, 3, 5, 7}) {
        Sampler a(o);
        take(a, before);
        const ReaderPosition p = a.position();
        const std::int64_t epoch = a.epoch();
        const auto want = take(a, 9);
        Sampler b(o);
        b.seek(p);
        INFO(describe(o) << " after " << before << " batches");
        CHECK(b.position() == p);
        CHECK(b.epoch() == epoch);
        CHECK(take(b, 9) == want);
      }
    }
  }
  Sampler s(setups(23, 4, 0, 1)[0]);
  CHECK(test::error_of([&] { s.seek({{"epoch", 1}}); }) == "[data] sampler: reader position lacks 'sample'");
  CHECK(test::error_of([&] {
          s.seek({{"epoch", -1}, {"sample", 0}});
        }) == "[data] sampler: reader position has epoch = -1 (negative)");
  CHECK(test::error_of([&] {
          Sampler(SamplerOptions{"[data] x", 5, 1, 2, 2});
        }) == "[data] x: rank 2 outside world size 2");
}

TEST_CASE("the glue reader replays the same batches after seek, in the order it always had") {
  test::TempDir d;
  std::ostringstream tsv;
  tsv << "sentence\tlabel\n";
  const char* words[] = {"cat", "dog", "red", "blue", "house", "river", "green", "bird"};
  for (int i = 0; i < 12; ++i)
    tsv << words[i % 8] << " " << words[(i * 3) % 8] << (i % 3 ? " and more" : "") << "\t" << i % 2 << "\n";
  test::write_text(d / "sst2/train.tsv", tsv.str());

  // Seed 42, one batch per epoch: the pinned orders of the first test case.
  auto whole = glue_reader(d / "sst2", 12, 0, 1);
  CHECK(example_indexes(*whole->next_batch()) == std::vector<std::int64_t>{0, 6, 7, 11, 1, 10, 4, 5, 9, 8, 3, 2});
  CHECK(example_indexes(*whole->next_batch()) == std::vector<std::int64_t>{4, 3, 11, 9, 10, 2, 7, 0, 6, 5, 8, 1});
  CHECK(whole->epoch() == 2);

  for (int before : {0, 1, 4, 5}) {  // batch 5 of 4 rows on rank 1 of 2 (6 rows an epoch) spans epochs 2 and 3
    auto a = glue_reader(d / "sst2", 4, 1, 2);
    for (int i = 0; i < before; ++i) a->next_batch();
    const ReaderPosition p = a->position();
    std::vector<Batch> want;
    for (int i = 0; i < 6; ++i) want.push_back(*a->next_batch());
    auto b = glue_reader(d / "sst2", 4, 1, 2);
    b->seek(p);
    INFO("after " << before << " batches");
    CHECK(b->position() == p);
    for (const Batch& w : want) {
      const Batch got = *b->next_batch();
      REQUIRE(got.tensors.size() == w.tensors.size());
      for (const auto& named : w.tensors) CHECK_MESSAGE(at::equal(got.at(named.first), named.second), named.first);
    }
  }
}
