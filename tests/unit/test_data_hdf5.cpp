// test_data_hdf5.cpp - NVIDIA-layout HDF5 shards: a file written here with the HDF5 C API exactly as NVIDIA's
// create_pretraining_data.py writes it (i4/i1 datasets, gzip) is read back exactly; int64 files (LDDL, older
// scripts) too; bertx's own writer round-trips, writes NVIDIA's dtypes and the same bytes for the same data;
// a file with a missing dataset or float data is a one-line error naming the file and the dataset.
#include <doctest/doctest.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bertx/error.hpp"
#include "bertx/data/hdf5_shard.hpp"
#include "bertx/rng.hpp"
#include "test_util.hpp"

using namespace bertx;
using namespace bertx::data;
using bertx::test::read_text;
using bertx::test::TempDir;

namespace {

template <class T>
void put(hid_t file, const char* name, hid_t file_type, hid_t mem_type, const std::vector<T>& v, hsize_t rows,
         hsize_t cols) {
  hsize_t dims[2] = {rows, cols};
  hid_t space = H5Screate_simple(cols ? 2 : 1, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hsize_t chunk[2] = {std::min<hsize_t>(rows, 7), cols};
  H5Pset_chunk(dcpl, cols ? 2 : 1, chunk);
  H5Pset_deflate(dcpl, 4);
  hid_t d = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(d >= 0);
  REQUIRE(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
}

// Random but valid-looking content for n instances.
ShardArrays sample_arrays(std::int64_t n, int S, int P, std::uint64_t seed) {
  ShardArrays a;
  a.resize(n, S, P);
  Rng rng(seed);
  for (std::int64_t i = 0; i < n; ++i) {
    const int len = static_cast<int>(rng.randint(5, S));
    const int b = static_cast<int>(rng.randint(2, len - 2));
    for (int t = 0; t < len; ++t) {
      a.input_ids[i * S + t] = static_cast<std::int32_t>(rng.randint(0, 30521));
      a.input_mask[i * S + t] = 1;
      a.segment_ids[i * S + t] = t >= b ? 1 : 0;
    }
    const int m = static_cast<int>(rng.randint(1, P));
    for (int k = 0; k < m; ++k) {
      a.masked_lm_positions[i * P + k] = k + 1;
      a.masked_lm_ids[i * P + k] = static_cast<std::int32_t>(rng.randint(999, 30521));
    }
    a.next_sentence_labels[i] = static_cast<std::int8_t>(rng.randint(0, 1));
  }
  return a;
}

void write_nvidia(const std::string& path, const ShardArrays& a, bool int64) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const auto N = static_cast<hsize_t>(a.n), S = static_cast<hsize_t>(a.seq_len),
             P = static_cast<hsize_t>(a.max_predictions);
  if (!int64) {  // create_pretraining_data.py: 'i4' ids and positions, 'i1' mask, segments and labels
    put(f, "input_ids", H5T_STD_I32LE, H5T_NATIVE_INT32, a.input_ids, N, S);
    put(f, "input_mask", H5T_STD_I8LE, H5T_NATIVE_INT8, a.input_mask, N, S);
    put(f, "segment_ids", H5T_STD_I8LE, H5T_NATIVE_INT8, a.segment_ids, N, S);
    put(f, "masked_lm_positions", H5T_STD_I32LE, H5T_NATIVE_INT32, a.masked_lm_positions, N, P);
    put(f, "masked_lm_ids", H5T_STD_I32LE, H5T_NATIVE_INT32, a.masked_lm_ids, N, P);
    put(f, "next_sentence_labels", H5T_STD_I8LE, H5T_NATIVE_INT8, a.next_sentence_labels, N, 0);
  } else {
    auto wide = [](const auto& v) { return std::vector<std::int64_t>(v.begin(), v.end()); };
    put(f, "input_ids", H5T_STD_I64LE, H5T_NATIVE_INT64, wide(a.input_ids), N, S);
    put(f, "input_mask", H5T_STD_I64LE, H5T_NATIVE_INT64, wide(a.input_mask), N, S);
    put(f, "segment_ids", H5T_STD_I64LE, H5T_NATIVE_INT64, wide(a.segment_ids), N, S);
    put(f, "masked_lm_positions", H5T_STD_I64LE, H5T_NATIVE_INT64, wide(a.masked_lm_positions), N, P);
    put(f, "masked_lm_ids", H5T_STD_I64LE, H5T_NATIVE_INT64, wide(a.masked_lm_ids), N, P);
    put(f, "next_sentence_labels", H5T_STD_I64LE, H5T_NATIVE_INT64, wide(a.next_sentence_labels), N, 0);
  }
  H5Fclose(f);
}

void check_equal(const ShardArrays& a, const ShardArrays& b) {
  CHECK(a.n == b.n);
  CHECK(a.seq_len == b.seq_len);
  CHECK(a.max_predictions == b.max_predictions);
  CHECK(a.input_ids == b.input_ids);
  CHECK(a.input_mask == b.input_mask);
  CHECK(a.segment_ids == b.segment_ids);
  CHECK(a.masked_lm_positions == b.masked_lm_positions);
  CHECK(a.masked_lm_ids == b.masked_lm_ids);
  CHECK(a.next_sentence_labels == b.next_sentence_labels);
}

std::string dtype_of(const std::string& path, const char* name) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  hid_t t = H5Dget_type(d);
  std::string s = std::to_string(H5Tget_size(t)) + (H5Tget_sign(t) == H5T_SGN_2 ? "s" : "u");
  hid_t p = H5Dget_create_plist(d);
  bool gzip = false;
  for (int i = 0; i < H5Pget_nfilters(p); ++i) {
    unsigned flags = 0;
    std::size_t n = 0;
    gzip = gzip ||
           H5Pget_filter2(p, static_cast<unsigned>(i), &flags, &n, nullptr, 0, nullptr, nullptr) == H5Z_FILTER_DEFLATE;
  }
  H5Pclose(p);
  H5Tclose(t);
  H5Dclose(d);
  H5Fclose(f);
  return s + (gzip ? "+gzip" : "");
}

}  // namespace

TEST_CASE("hdf5: a shard in NVIDIA's layout written with the HDF5 C API reads back exactly") {
  TempDir dir;
  const ShardArrays a = sample_arrays(23, 128, 20, 1);
  write_nvidia(dir / "nvidia.hdf5", a, false);
  const ShardInfo info = inspect_shard(dir / "nvidia.hdf5");
  CHECK(info.n == 23);
  CHECK(info.seq_len == 128);
  CHECK(info.max_predictions == 20);
  check_equal(read_shard(dir / "nvidia.hdf5"), a);
  write_nvidia(dir / "int64.hdf5", a, true);
  check_equal(read_shard(dir / "int64.hdf5"), a);
}

TEST_CASE("hdf5: bertx's writer uses NVIDIA's dtypes and round-trips") {
  TempDir dir;
  const ShardArrays a = sample_arrays(3000, 64, 10, 2);  // several chunks and a partial edge chunk
  write_shard(dir / "own.hdf5", a, {4, 2});
  check_equal(read_shard(dir / "own.hdf5"), a);
  CHECK(dtype_of(dir / "own.hdf5", "input_ids") == "4s+gzip");
  CHECK(dtype_of(dir / "own.hdf5", "input_mask") == "1s+gzip");
  CHECK(dtype_of(dir / "own.hdf5", "segment_ids") == "1s+gzip");
  CHECK(dtype_of(dir / "own.hdf5", "masked_lm_positions") == "4s+gzip");
  CHECK(dtype_of(dir / "own.hdf5", "masked_lm_ids") == "4s+gzip");
  CHECK(dtype_of(dir / "own.hdf5", "next_sentence_labels") == "1s+gzip");
  write_shard(dir / "again.hdf5", a, {4, 1});
  CHECK(read_text(dir / "own.hdf5") == read_text(dir / "again.hdf5"));
  write_shard(dir / "plain.hdf5", a, {0, 1});
  check_equal(read_shard(dir / "plain.hdf5"), a);
  ShardArrays empty;
  empty.resize(0, 64, 10);
  write_shard(dir / "empty.hdf5", empty);
  CHECK(read_shard(dir / "empty.hdf5").n == 0);
}

TEST_CASE("hdf5: a dynamic-masking shard has no masked_lm datasets") {
  TempDir dir;
  ShardArrays a = sample_arrays(10, 32, 5, 3);
  a.max_predictions = 0;
  a.masked_lm_positions.clear();
  a.masked_lm_ids.clear();
  write_shard(dir / "dyn.hdf5", a);
  const ShardArrays b = read_shard(dir / "dyn.hdf5");
  CHECK(b.max_predictions == 0);
  CHECK(b.input_ids == a.input_ids);
}

TEST_CASE("hdf5: bad files are one-line errors naming the file and the dataset") {
  TempDir dir;
  const ShardArrays a = sample_arrays(4, 16, 4, 4);
  hid_t f = H5Fcreate((dir / "missing.hdf5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  put(f, "input_ids", H5T_STD_I32LE, H5T_NATIVE_INT32, a.input_ids, 4, 16);
  H5Fclose(f);
  CHECK_THROWS_WITH_AS(read_shard(dir / "missing.hdf5"), doctest::Contains("missing.hdf5: no dataset 'input_mask'"),
                       Error);
  f = H5Fcreate((dir / "float.hdf5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<float> fl(a.input_ids.begin(), a.input_ids.end());
  put(f, "input_ids", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, fl, 4, 16);
  H5Fclose(f);
  CHECK_THROWS_WITH_AS(inspect_shard(dir / "float.hdf5"),
                       doctest::Contains("float.hdf5: dataset 'input_ids' does not hold integers"), Error);
  bertx::test::write_text(dir / "text.hdf5", "not hdf5");
  CHECK_THROWS_WITH_AS(inspect_shard(dir / "text.hdf5"), doctest::Contains("text.hdf5: not an HDF5 file"), Error);
  CHECK_THROWS_WITH_AS(inspect_shard(dir / "none.hdf5"), doctest::Contains("none.hdf5: no such file"), Error);
}
