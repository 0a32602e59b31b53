// crc.hpp - the byte table of a reflected CRC-32 for a polynomial: zip's crc32 (0xedb88320, io/pt_archive.cpp)
// and Castagnoli's crc32c (0x82f63b78: TensorFlow's bundles, io/tf_bundle.cpp, LevelDB, and the TFRecord framing of
// TensorBoard's event files, tboard/) are the same loop with another table; crc32c also has the SSE 4.2 instruction.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace bertx {

template <std::uint32_t Poly>
const std::array<std::uint32_t, 256>& crc_table() {
  static const std::array<std::uint32_t, 256> t = [] {
    std::array<std::uint32_t, 256> a{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (Poly & (0u - (c & 1u)));
      a[i] = c;
    }
    return a;
  }();
  return t;
}

// Extends `crc` (not inverted) over n bytes with the table of Poly.
template <std::uint32_t Poly>
std::uint32_t crc_update(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  const auto& t = crc_table<Poly>();
  for (std::size_t i = 0; i < n; ++i) crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

// crc32c (Castagnoli) of n bytes, extending `crc` (a previous result; 0 to start): SSE 4.2 where the CPU has it.
std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc = 0);
// TensorFlow's and LevelDB's mask of a stored crc32c (a crc of data that holds crcs stays meaningful).
inline std::uint32_t mask_crc(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace bertx
