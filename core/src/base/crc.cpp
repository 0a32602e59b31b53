// crc.cpp - crc32c: the SSE 4.2 instruction where the CPU has it (checked once), the table loop elsewhere.
#include "base/crc.hpp"

#include <cstring>

namespace bertx {

namespace {

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc32c_hw(const unsigned char* p, std::size_t n, std::uint32_t c) {
  std::uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = __builtin_ia32_crc32di(c64, v);
  }
  c = static_cast<std::uint32_t>(c64);
  for (; n; --n, ++p) c = __builtin_ia32_crc32qi(c, *p);
  return c;
}
#endif

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
#if defined(__x86_64__)
  static const bool hw = __builtin_cpu_supports("sse4.2");
  if (hw) return ~crc32c_hw(p, n, c);
#endif
  return ~crc_update<0x82f63b78u>(c, p, n);
}

}  // namespace bertx
