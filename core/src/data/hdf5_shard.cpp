// hdf5_shard.cpp - HDF5 C API reading/writing of NVIDIA-layout shards, with parallel deflate of chunks.
#include "bertx/data/hdf5_shard.hpp"

#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <type_traits>

#include "bertx/error.hpp"
#include "bertx/parallel.hpp"

namespace bertx::data {

void ShardArrays::resize(std::int64_t rows, std::int32_t seq, std::int32_t preds) {
  n = rows, seq_len = seq, max_predictions = preds;
  const auto ns = static_cast<std::size_t>(rows) * static_cast<std::size_t>(seq);
  const auto np = static_cast<std::size_t>(rows) * static_cast<std::size_t>(preds);
  input_ids.assign(ns, 0);
  input_mask.assign(ns, 0);
  segment_ids.assign(ns, 0);
  masked_lm_positions.assign(np, 0);
  masked_lm_ids.assign(np, 0);
  next_sentence_labels.assign(static_cast<std::size_t>(rows), 0);
}

namespace {

// Closes an HDF5 handle with the right function when it goes out of scope.
struct Handle {
  hid_t id = H5I_INVALID_HID;
  herr_t (*close)(hid_t) = nullptr;
  Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id >= 0 && close) close(id);
  }
  operator hid_t() const { return id; }
  bool ok() const { return id >= 0; }
};

// HDF5 prints its own error stack by default; bertx reports one line instead.
void quiet_hdf5() {
  static const bool once = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)once;
}

Error h5_error(const std::string& path, const std::string& what) { return Error(path + ": " + what); }

void write_dataset(hid_t file, const std::string& path, const char* name, hid_t file_type, std::size_t elem,
                   const ShardSource& src, ShardField field, std::int64_t cols, const ShardWriteOptions& o) {
  const std::int64_t rows = src.n;
  const int rank = cols > 0 ? 2 : 1;
  hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(std::max<std::int64_t>(cols, 1))};
  Handle space(H5Screate_simple(rank, dims, nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(dcpl, 0);  // no timestamps: the same data gives the same bytes
  const std::size_t row_elems = static_cast<std::size_t>(std::max<std::int64_t>(cols, 1));
  // ~256 KiB of raw data per chunk.
  const auto chunk_rows = static_cast<std::size_t>(std::clamp<std::int64_t>(
      static_cast<std::int64_t>((256u << 10) / (row_elems * elem)), 1, std::max<std::int64_t>(rows, 1)));
  const bool compressed = rows > 0 && o.gzip_level > 0;
  const bool shuffle = compressed && o.shuffle && elem > 1;
  if (compressed) {
    hsize_t cdims[2] = {chunk_rows, row_elems};
    H5Pset_chunk(dcpl, rank, cdims);
    if (shuffle) H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, static_cast<unsigned>(o.gzip_level));
  }
  Handle dset(H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
  if (!dset.ok()) throw h5_error(path, std::string("cannot create dataset '") + name + "'");
  if (rows == 0) return;
  const hid_t mem_type = elem == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT8;
  if (!compressed) {
    std::vector<char> all(static_cast<std::size_t>(rows) * row_elems * elem);
    src.fill(field, 0, rows, all.data());
    if (H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()) < 0)
      throw h5_error(path, std::string("cannot write dataset '") + name + "'");
    return;
  }
  // Fill and deflate chunks in parallel (zlib format, as HDF5's deflate filter), then store them in order.
  const std::size_t n_chunks = (static_cast<std::size_t>(rows) + chunk_rows - 1) / chunk_rows;
  const std::size_t chunk_bytes = chunk_rows * row_elems * elem;
  const std::size_t batch = 64;
  std::vector<std::vector<Bytef>> packed(std::min(batch, n_chunks));
  for (std::size_t base = 0; base < n_chunks; base += batch) {
    const std::size_t count = std::min(batch, n_chunks - base);
    parallel_for(count, o.threads, [&](std::size_t k) {
      const std::size_t c = base + k;
      // Reused per thread: fresh large buffers cost a page fault per 4 KiB.
      thread_local std::vector<Bytef> rowbuf, raw;
      rowbuf.assign(chunk_bytes, 0);  // edge chunks are stored full size, zero padded
      const auto first = static_cast<std::int64_t>(c * chunk_rows);
      src.fill(field, first, std::min<std::int64_t>(static_cast<std::int64_t>(chunk_rows), rows - first),
               rowbuf.data());
      const Bytef* in = rowbuf.data();
      if (shuffle) {  // HDF5's shuffle filter: byte j of element i goes to j * elements + i
        raw.resize(chunk_bytes);
        const std::size_t elems = chunk_bytes / elem;
        for (std::size_t j = 0; j < elem; ++j) {
          Bytef* dst = raw.data() + j * elems;
          for (std::size_t i = 0; i < elems; ++i) dst[i] = rowbuf[i * elem + j];
        }
        in = raw.data();
      }
      uLongf len = compressBound(chunk_bytes);
      if (packed[k].size() < len) packed[k].resize(len);
      if (compress2(packed[k].data(), &len, in, chunk_bytes, o.gzip_level) != Z_OK)
        throw h5_error(path, std::string("deflate failed for dataset '") + name + "'");
      packed[k].resize(len);
    });
    for (std::size_t k = 0; k < count; ++k) {
      hsize_t offset[2] = {(base + k) * chunk_rows, 0};
      if (H5Dwrite_chunk(dset, H5P_DEFAULT, 0, offset, packed[k].size(), packed[k].data()) < 0)
        throw h5_error(path, std::string("cannot write a chunk of dataset '") + name + "'");
    }
  }
}

// Dataset shape and integer check; rank 0 when absent.
struct DsetShape {
  int rank = 0;
  hsize_t dims[2] = {0, 0};
};

DsetShape shape_of(hid_t file, const std::string& path, const char* name, bool required) {
  DsetShape s;
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) {
    if (required)
      throw h5_error(path, std::string("no dataset '") + name + "' (not a pre-training shard in NVIDIA's layout)");
    return s;
  }
  Handle d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!d.ok()) throw h5_error(path, std::string("cannot open dataset '") + name + "'");
  Handle t(H5Dget_type(d), H5Tclose);
  if (H5Tget_class(t) != H5T_INTEGER)
    throw h5_error(path, std::string("dataset '") + name + "' does not hold integers (expected int8..int64)");
  Handle sp(H5Dget_space(d), H5Sclose);
  s.rank = H5Sget_simple_extent_ndims(sp);
  if (s.rank < 1 || s.rank > 2)
    throw h5_error(path, std::string("dataset '") + name + "' has rank " + std::to_string(s.rank));
  H5Sget_simple_extent_dims(sp, s.dims, nullptr);
  return s;
}

ShardInfo inspect_open(hid_t file, const std::string& path) {
  const DsetShape ids = shape_of(file, path, "input_ids", true);
  const DsetShape mask = shape_of(file, path, "input_mask", true);
  const DsetShape seg = shape_of(file, path, "segment_ids", true);
  const DsetShape nsp = shape_of(file, path, "next_sentence_labels", true);
  const DsetShape pos = shape_of(file, path, "masked_lm_positions", false);
  const DsetShape mid = shape_of(file, path, "masked_lm_ids", false);
  auto same2 = [&](const DsetShape& s, const char* name) {
    if (s.rank != 2 || s.dims[0] != ids.dims[0] || s.dims[1] != ids.dims[1])
      throw h5_error(path, std::string("dataset '") + name + "' shape differs from input_ids (" +
                               std::to_string(ids.dims[0]) + ", " + std::to_string(ids.dims[1]) + ")");
  };
  if (ids.rank != 2) throw h5_error(path, "dataset 'input_ids' must be 2-D (N, seq_len)");
  same2(mask, "input_mask");
  same2(seg, "segment_ids");
  if (nsp.dims[0] != ids.dims[0] || (nsp.rank == 2 && nsp.dims[1] != 1))
    throw h5_error(path, "dataset 'next_sentence_labels' must have shape (N,) with N = " + std::to_string(ids.dims[0]));
  if ((pos.rank == 0) != (mid.rank == 0))
    throw h5_error(path, "has only one of 'masked_lm_positions' and 'masked_lm_ids'");
  ShardInfo info;
  info.n = static_cast<std::int64_t>(ids.dims[0]);
  info.seq_len = static_cast<std::int32_t>(ids.dims[1]);
  if (pos.rank != 0) {
    if (pos.rank != 2 || mid.rank != 2 || pos.dims[0] != ids.dims[0] || mid.dims[0] != ids.dims[0] ||
        pos.dims[1] != mid.dims[1])
      throw h5_error(path,
                     "datasets 'masked_lm_positions' and 'masked_lm_ids' must both have shape (N, max_predictions)");
    info.max_predictions = static_cast<std::int32_t>(pos.dims[1]);
  }
  return info;
}

template <class T>
void read_dataset(hid_t file, const std::string& path, const char* name, hid_t mem_type, std::vector<T>& out) {
  Handle d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!d.ok() || (!out.empty() && H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0))
    throw h5_error(path, std::string("cannot read dataset '") + name + "' (corrupt file?)");
}

}  // namespace

void write_shard(const std::string& path, const ShardSource& src, const ShardWriteOptions& o) {
  quiet_hdf5();
  const std::string tmp = path + ".tmp";
  {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) throw h5_error(tmp, "cannot create HDF5 file");
    try {
      const std::int64_t S = src.seq_len, P = src.max_predictions;
      write_dataset(file, tmp, "input_ids", H5T_STD_I32LE, 4, src, ShardField::InputIds, S, o);
      write_dataset(file, tmp, "input_mask", H5T_STD_I8LE, 1, src, ShardField::InputMask, S, o);
      write_dataset(file, tmp, "segment_ids", H5T_STD_I8LE, 1, src, ShardField::SegmentIds, S, o);
      if (P > 0) {
        write_dataset(file, tmp, "masked_lm_positions", H5T_STD_I32LE, 4, src, ShardField::MaskedLmPositions, P, o);
        write_dataset(file, tmp, "masked_lm_ids", H5T_STD_I32LE, 4, src, ShardField::MaskedLmIds, P, o);
      }
      write_dataset(file, tmp, "next_sentence_labels", H5T_STD_I8LE, 1, src, ShardField::NextSentenceLabels, 0, o);
      if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) throw h5_error(tmp, "flush failed");
    } catch (...) {
      std::remove(tmp.c_str());
      throw;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw h5_error(path, "rename from .tmp failed");
}

void write_shard(const std::string& path, const ShardArrays& a, const ShardWriteOptions& o) {
  ShardSource src;
  src.n = a.n;
  src.seq_len = a.seq_len;
  src.max_predictions = a.max_predictions;
  src.fill = [&a](ShardField f, std::int64_t first, std::int64_t count, void* out) {
    auto copy = [&](const auto& v, std::int64_t width) {
      using T = typename std::decay_t<decltype(v)>::value_type;
      std::memcpy(out, v.data() + first * width, static_cast<std::size_t>(count * width) * sizeof(T));
    };
    switch (f) {
      case ShardField::InputIds:
        copy(a.input_ids, a.seq_len);
        break;
      case ShardField::InputMask:
        copy(a.input_mask, a.seq_len);
        break;
      case ShardField::SegmentIds:
        copy(a.segment_ids, a.seq_len);
        break;
      case ShardField::MaskedLmPositions:
        copy(a.masked_lm_positions, a.max_predictions);
        break;
      case ShardField::MaskedLmIds:
        copy(a.masked_lm_ids, a.max_predictions);
        break;
      case ShardField::NextSentenceLabels:
        copy(a.next_sentence_labels, 1);
        break;
    }
  };
  write_shard(path, src, o);
}

ShardInfo inspect_shard(const std::string& path) {
  quiet_hdf5();
  if (!std::filesystem::is_regular_file(path)) throw h5_error(path, "no such file");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) throw h5_error(path, "not an HDF5 file (or corrupt)");
  return inspect_open(file, path);
}

ShardArrays read_shard(const std::string& path) {
  quiet_hdf5();
  if (!std::filesystem::is_regular_file(path)) throw h5_error(path, "no such file");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) throw h5_error(path, "not an HDF5 file (or corrupt)");
  const ShardInfo info = inspect_open(file, path);
  ShardArrays a;
  a.resize(info.n, info.seq_len, info.max_predictions);
  read_dataset(file, path, "input_ids", H5T_NATIVE_INT32, a.input_ids);
  read_dataset(file, path, "input_mask", H5T_NATIVE_INT8, a.input_mask);
  read_dataset(file, path, "segment_ids", H5T_NATIVE_INT8, a.segment_ids);
  read_dataset(file, path, "next_sentence_labels", H5T_NATIVE_INT8, a.next_sentence_labels);
  if (a.has_masks()) {
    read_dataset(file, path, "masked_lm_positions", H5T_NATIVE_INT32, a.masked_lm_positions);
    read_dataset(file, path, "masked_lm_ids", H5T_NATIVE_INT32, a.masked_lm_ids);
  }
  return a;
}

}  // namespace bertx::data
