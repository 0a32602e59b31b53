// plugin.cpp - the `pretraining` plugin's entry: BERT pre-training as one library - the MLM + NSP task, the
// hdf5_pretraining reader (NVIDIA-layout HDF5 shards, static or dynamic masking) and the synthetic reader.
#include "bertx/dataset.hpp"
#include "bertx/plugin.hpp"
#include "components.hpp"
#include "reader.hpp"

void bertx::pretraining::register_hdf5_reader(Registry& registry) {
  using namespace bertx::hdf5_pretraining;
  bertx::add_dataset(
      registry, "hdf5_pretraining",
      "BERT pre-training batches from NVIDIA-layout HDF5 shards (static or dynamic masking, length bins)",
      reader_schema(), [](const bertx::Options& o) { return make_reader(reader_config(o)); });
}

namespace {

void register_pretraining_plugin(bertx::Registry& registry) {
  bertx::pretraining::register_task(registry);
  bertx::pretraining::register_hdf5_reader(registry);
  bertx::pretraining::register_synthetic(registry);
}

}  // namespace

BERTX_PLUGIN("pretraining", "0.1.0", "BERT pre-training: the MLM + NSP task, HDF5 shard and synthetic readers",
             register_pretraining_plugin)
