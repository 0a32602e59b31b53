// fuzz_pt_archive.cpp - the torch.save zip + restricted pickle reader (core/src/io/pt_archive.cpp) and NVIDIA-name
// mapping (interop_names.cpp): ckpt_N.pt files come from elsewhere. The input is the file; every tensor record
// the archive accepts has its storage read (crc32 and size checked); the rest must be bertx::Error.
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.hpp"
#include "io/interop_names.hpp"
#include "io/pt_archive.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = bertx::fuzz::write_file("ckpt_1.pt", {reinterpret_cast<const char*>(data), size});
  bertx::fuzz::expect_ok_or_error([&] {
    const bertx::pt::Archive a(path);
    for (const auto& t : a.tensors()) {
      if (t.sizes.size() != t.strides.size()) std::abort();
      bertx::fuzz::expect_ok_or_error([&] { bertx::interop::from_nvidia(t.name, "fuzz"); });
      bertx::fuzz::expect_ok_or_error([&] {
        if (a.storage_bytes(t).size() > size) std::abort();  // a storage is never bigger than the file
      });
    }
  });
  return 0;
}
