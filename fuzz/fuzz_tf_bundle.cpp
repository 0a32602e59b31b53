// fuzz_tf_bundle.cpp - the TensorFlow tensor-bundle reader (core/src/io/tf_bundle.cpp) and Google-name mapping
// (interop_names.cpp): Google BERT / BioBERT checkpoints are downloaded files. Input: a 4-byte little-endian
// length N, N bytes of <prefix>.index, the rest <prefix>.data-00000-of-00001. Every entry the index accepts is
// read (size and crc32c checked) and its name mapped; the rest must be bertx::Error.
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.hpp"
#include "io/interop_names.hpp"
#include "io/tf_bundle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::size_t n =
      std::min<std::size_t>(size - 4, data[0] | data[1] << 8 | data[2] << 16 | std::size_t{data[3]} << 24);
  const char* p = reinterpret_cast<const char*>(data) + 4;
  bertx::fuzz::write_file("ckpt.index", {p, n});
  bertx::fuzz::write_file("ckpt.data-00000-of-00001", {p + n, size - 4 - n});
  bertx::fuzz::expect_ok_or_error([&] {
    const bertx::tf::Bundle b((bertx::fuzz::temp_dir() / "ckpt").string());
    for (const auto& e : b.entries()) {
      bertx::fuzz::expect_ok_or_error([&] { bertx::interop::from_tf(e.name, "fuzz"); });
      bertx::fuzz::expect_ok_or_error([&] {
        if (b.read(e).size() != e.size) std::abort();  // read returns exactly the entry's bytes
      });
    }
  });
  return 0;
}
