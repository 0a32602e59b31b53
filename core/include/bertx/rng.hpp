// bertx/rng.hpp - splitmix64, the one seeded mixer that bertx's data code and plugins share (shuffles,
// synthetic samples, seeds derived from tuples). Our own generator, not std::*_distribution (whose output
// differs between standard libraries), so every order and sample is the same on every platform.
#pragma once
#include <cstdint>

namespace bertx {

// Advances `state` and returns the next 64 random bits (Steele, Lea and Flood's SplitMix64).
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace bertx
