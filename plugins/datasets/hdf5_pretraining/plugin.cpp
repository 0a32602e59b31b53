// plugin.cpp - the `datasets_hdf5` plugin: registers the hdf5_pretraining dataset reader with the host.
#include "bertx/dataset.hpp"
#include "bertx/plugin.hpp"
#include "reader.hpp"

namespace {

void register_datasets(bertx::Registry& registry) {
  using namespace bertx::hdf5_pretraining;
  bertx::add_dataset(registry, "hdf5_pretraining",
                     "BERT pre-training batches from NVIDIA-layout HDF5 shards (static or dynamic masking, length bins)",
                     reader_schema(), [](const bertx::Options& o) { return make_reader(reader_config(o)); });
}

}  // namespace

BERTX_PLUGIN("datasets_hdf5", "0.1.0", "HDF5 pre-training shards (NVIDIA layout) reader", register_datasets)
