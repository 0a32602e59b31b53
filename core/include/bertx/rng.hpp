// bertx/rng.hpp - the seeded random numbers that bertx's data code and plugins share: splitmix64 (shuffles,
// synthetic samples), mix_seed (a seed derived from a tuple such as (seed, pass, document)) and Rng
// (xoshiro256**, the streams of masking and sampling). Our own generators, not std::*_distribution (whose
// output differs between standard libraries), so every order and sample is the same on every platform.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <utility>

namespace bertx {

// Advances `state` and returns the next 64 random bits (Steele, Lea and Flood's SplitMix64).
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A seed derived from a tuple: mix_seed({run_seed, epoch, sample}) differs for every tuple.
inline std::uint64_t mix_seed(std::initializer_list<std::uint64_t> parts) {
  std::uint64_t h = 0x6A09E667F3BCC909ULL;
  for (std::uint64_t p : parts) {
    std::uint64_t s = h ^ (p + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
    h = splitmix64(s);
  }
  return h;
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) { reseed(seed); }
  void reseed(std::uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits (Python's random.random()).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift with rejection: unbiased).
  std::uint64_t below(std::uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }
  // Uniform integer in [a, b] inclusive (Python's random.randint(a, b)), a <= b.
  std::int64_t randint(std::int64_t a, std::int64_t b) {
    return a + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(b - a) + 1));
  }
  // Fisher-Yates, back to front (Python's random.shuffle).
  template <class It>
  void shuffle(It first, It last) {
    const auto n = last - first;
    for (auto i = n - 1; i > 0; --i) {
      const auto j = static_cast<decltype(i)>(below(static_cast<std::uint64_t>(i) + 1));
      using std::swap;
      swap(first[i], first[j]);
    }
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace bertx
