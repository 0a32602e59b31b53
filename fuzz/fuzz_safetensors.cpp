// fuzz_safetensors.cpp - the safetensors reader (core/src/io/safetensors.cpp), a trust boundary: checkpoints,
// golden files and downloaded models. Every accepted file must load; the rest must be a bertx::Error.
#include "fuzz_util.hpp"
#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = bertx::fuzz::write_file("model.safetensors", {reinterpret_cast<const char*>(data), size});
  bertx::fuzz::expect_ok_or_error([&] {
    bertx::MetadataMap meta;
    const bertx::TensorMap t = bertx::load_safetensors(path, &meta);
    std::size_t bytes = 0;
    for (const auto& [name, tensor] : t) bytes += tensor.nbytes();  // every tensor is defined and sized
    if (bytes > size) std::abort();  // tensors tile the data section: never more bytes than the file has
  });
  return 0;
}
