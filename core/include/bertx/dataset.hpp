// bertx/dataset.hpp - the DatasetReader plugin interface: batches for training and evaluation.
//
// A reader is built from its [data] table, then open()ed with the run's context (split, micro-batch size,
// data-parallel rank/world size, seed). Training readers repeat: next_batch() rolls over to the next
// epoch by itself (reshuffled with a seed derived from (seed, epoch)); evaluation readers return
// std::nullopt after one pass. position()/seek() make resume exact: after seek(p) the reader yields the
// very batches an uninterrupted run would have yielded after reaching p.
// Threading: next_batch() is called from the training thread only; readers may prefetch on their own
// background threads (and must join them in the destructor).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "bertx/batch.hpp"
#include "bertx/plugin.hpp"

namespace bertx {

struct DatasetContext {
  std::string split = "train";   // "train" (repeats, shuffled) or "eval" (one pass, in order)
  std::int64_t batch_size = 32;  // sequences per micro-batch on this rank
  int rank = 0;                  // data-parallel rank; ranks see disjoint samples
  int world_size = 1;            // number of data-parallel ranks
  std::uint64_t seed = 42;       // run seed: shuffling and dynamic masking derive from it
};

// Position of a reader, stored in checkpoints (progress.json). Keys are reader-defined integers,
// e.g. {"epoch": 1, "shard": 3, "sample": 1200}.
using ReaderPosition = std::map<std::string, std::int64_t>;

class DatasetReader {
 public:
  virtual ~DatasetReader() = default;
  // Throws bertx::Error naming the file at fault (missing shards, wrong dataset names or dtypes).
  virtual void open(const DatasetContext& context) = 0;
  // The next micro-batch (CPU tensors, names as in batch.hpp), or nullopt at the end of an eval pass.
  virtual std::optional<Batch> next_batch() = 0;
  virtual std::int64_t epoch() const = 0;
  virtual ReaderPosition position() const = 0;
  virtual void seek(const ReaderPosition& position) = 0;
  // Samples this rank sees per epoch (for epoch-based schedules and progress); -1 if unknown.
  virtual std::int64_t samples_per_epoch() const = 0;
};

template <class F>
void add_dataset(Registry& registry, std::string name, std::string description, Schema schema, F make) {
  registry.add(BuilderSpec{Kind::Dataset, std::move(name), std::move(description), std::move(schema),
                           [make](const Options& o) -> std::shared_ptr<void> {
                             std::shared_ptr<DatasetReader> p = make(o);
                             return p;
                           }});
}

}  // namespace bertx
