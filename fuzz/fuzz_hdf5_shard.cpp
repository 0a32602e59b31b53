// fuzz_hdf5_shard.cpp - the pre-training shard reader (core/src/data/hdf5_shard.cpp: inspect_shard,
// read_shard) on well-formed HDF5 files with malformed contents: the fuzzer input describes, for each of
// NVIDIA's six dataset names, whether it exists, its dtype (integers of every width and sign, floats,
// strings), rank (0-3), dimensions and a byte pattern; the target writes that file with the HDF5 C API
// and reads it back. (Raw-byte fuzzing would mostly exercise libhdf5's own parser, not our checks.)
// An accepted shard must have consistent shapes and arrays of exactly those sizes.
#include <hdf5.h>

#include <fuzzer/FuzzedDataProvider.h>

#include "bertx/data/hdf5_shard.hpp"
#include "fuzz_util.hpp"

namespace {

const char* const kNames[] = {"input_ids",           "input_mask",    "segment_ids",
                              "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"};

hid_t dtype(std::uint8_t k) {
  switch (k % 12) {
    case 0:
      return H5T_STD_I8LE;
    case 1:
      return H5T_STD_I16LE;
    case 2:
      return H5T_STD_I32LE;
    case 3:
      return H5T_STD_I64LE;
    case 4:
      return H5T_STD_U8LE;
    case 5:
      return H5T_STD_U32LE;
    case 6:
      return H5T_STD_U64LE;
    case 7:
      return H5T_STD_I32BE;
    case 8:
      return H5T_IEEE_F32LE;
    case 9:
      return H5T_IEEE_F64LE;
    case 10:
      return H5T_C_S1;
    default:
      return H5T_STD_I64BE;
  }
}

// Writes the file the input describes; false when HDF5 refuses it (nothing to test then).
bool write_described(const std::string& path, FuzzedDataProvider& in) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return false;
  bool ok = true;
  for (const char* name : kNames) {
    const std::uint8_t flags = in.ConsumeIntegral<std::uint8_t>();
    if (flags & 0x80) continue;  // absent
    const int rank = flags & 3;
    hsize_t dims[3] = {0, 0, 0}, maxdims[3];
    hsize_t elems = 1;
    bool huge = false;
    for (int r = 0; r < rank; ++r) {
      // Mostly small; sometimes enormous (chunked, nothing stored: only the shape is huge).
      dims[r] = (flags & 0x40) ? in.ConsumeIntegral<std::uint64_t>() >> in.ConsumeIntegralInRange<int>(0, 63)
                               : in.ConsumeIntegralInRange<hsize_t>(0, 9);
      if (dims[r] > 1000000) huge = true;
      maxdims[r] = H5S_UNLIMITED;
      elems = dims[r] ? elems * dims[r] : 0;
    }
    const hid_t type = H5Tcopy(dtype(in.ConsumeIntegral<std::uint8_t>()));
    const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, maxdims);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (rank > 0) {
      hsize_t chunk[3] = {1, 1, 1};
      for (int r = 0; r < rank; ++r) chunk[r] = dims[r] > 0 && dims[r] < 64 ? dims[r] : 64;
      H5Pset_chunk(dcpl, rank, chunk);
    }
    const hid_t d = space < 0 ? -1 : H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0 && !huge && elems <= 4096) {
      std::vector<std::uint8_t> bytes(elems * H5Tget_size(type));
      const std::uint8_t fill = in.ConsumeIntegral<std::uint8_t>();
      for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(fill * (i + 1));
      if (!bytes.empty()) H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
    }
    ok = ok && d >= 0;
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    H5Tclose(type);
  }
  H5Fclose(file);
  return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx;
  FuzzedDataProvider in(data, size);
  const std::string path = (fuzz::temp_dir() / "shard.hdf5").string();
  if (!write_described(path, in)) return 0;
  fuzz::expect_ok_or_error([&] {
    const data::ShardInfo info = data::inspect_shard(path);
    const data::ShardArrays a = data::read_shard(path);
    const auto n = static_cast<std::size_t>(a.n), s = static_cast<std::size_t>(a.seq_len),
               p = static_cast<std::size_t>(a.max_predictions);
    if (a.n != info.n || a.seq_len != info.seq_len || a.max_predictions != info.max_predictions) std::abort();
    if (a.input_ids.size() != n * s || a.input_mask.size() != n * s || a.segment_ids.size() != n * s ||
        a.next_sentence_labels.size() != n || a.masked_lm_positions.size() != n * p || a.masked_lm_ids.size() != n * p)
      std::abort();
  });
  return 0;
}
