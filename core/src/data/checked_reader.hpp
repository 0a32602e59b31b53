// checked_reader.hpp - a DatasetReader that checks the batches of the reader it wraps against what the
// trainer relies on: every input id below the model's vocab_size, and a training split that never ends
// (training readers roll over to the next epoch by themselves). Data prepared with another vocabulary than
// the model's would otherwise index past the embedding table (a crash on CUDA, garbage on the CPU) or train
// on the wrong tokens without a word; the check fails at the first batch with one line naming the reader.
// The trainer wraps its training reader in it, so the step itself never looks at token ids.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>
#include <fmt/format.h>

#include "bertx/dataset.hpp"
#include "bertx/error.hpp"

namespace bertx {

class CheckedReader final : public DatasetReader {
 public:
  // reader: the plugin's reader; vocab_size: the model's; name: the [data] type, for the message.
  CheckedReader(std::shared_ptr<DatasetReader> reader, std::int64_t vocab_size, std::string name)
      : reader_(std::move(reader)), vocab_size_(vocab_size), name_(std::move(name)) {}

  void open(const DatasetContext& context) override {
    training_ = context.split == "train";
    reader_->open(context);
  }
  std::optional<Batch> next_batch() override {
    std::optional<Batch> batch = reader_->next_batch();
    if (!batch && training_) throw Error("[data] " + name_ + ": the training reader returned no batch");
    if (!batch) return batch;
    const std::int64_t max_id = batch->at("input_ids").max().item<std::int64_t>();  // CPU tensor: no device sync
    if (max_id >= vocab_size_)
      throw Error(
          fmt::format("[data] {}: token id {} >= the model's vocab_size {}: the data was prepared with another "
                      "vocabulary than the model's (check the vocab file and [model] preset/config)",
                      name_, max_id, vocab_size_));
    return batch;
  }
  std::int64_t epoch() const override { return reader_->epoch(); }
  ReaderPosition position() const override { return reader_->position(); }
  void seek(const ReaderPosition& position) override { reader_->seek(position); }
  std::int64_t samples_per_epoch() const override { return reader_->samples_per_epoch(); }

 private:
  std::shared_ptr<DatasetReader> reader_;
  std::int64_t vocab_size_;
  std::string name_;
  bool training_ = false;  // opened on the "train" split
};

}  // namespace bertx
