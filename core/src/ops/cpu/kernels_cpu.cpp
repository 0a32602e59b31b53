// kernels_cpu.cpp - see kernels_cpu.hpp. Loops are written for the auto-vectoriser (the hottest few directly on
// sixteen-lane vectors, Lanes below): reductions keep 16
// independent accumulators (no -ffast-math needed), exp is a branch-free Cephes-style polynomial (~1 ulp
// on [-87, 88]), bf16 <-> float are bit operations. On x86-64 the hot functions are cloned for AVX-512,
// AVX2 and the baseline; the loader picks one per CPU (GCC/clang target_clones, an ifunc).
#include "ops/cpu/kernels_cpu.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "bertx/simd.hpp"  // BERTX_CLONES, BERTX_INLINE (helpers inline so each clone compiles them for its ISA)

namespace bertx::ops::cpu {

namespace {

constexpr int kLanes = 16;  // independent accumulators per reduction

// The helpers taking and returning Lanes are always inlined: no call passes a vector across an ABI boundary, so
// GCC's note that the baseline clone would pass them differently does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// Sixteen float32 lanes (GCC/clang vector extension): the loops below are written on them directly where the
// auto-vectoriser's code for the lane-array form spills and reloads constants every iteration.
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));

inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bf16_to_float(std::uint16_t b) { return bits_to_float(static_cast<std::uint32_t>(b) << 16); }
inline std::uint16_t float_to_bf16(float f) {  // round to nearest even; NaN stays a (quiet) NaN
  const std::uint32_t u = float_to_bits(f);
  const auto rounded = static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  return f != f ? std::uint16_t{0x7FC0} : rounded;  // a select, not a branch: the loops stay vectorised
}

// exp(x) for x <= 0 mostly (softmax arguments); exact 0 below -87.3, +inf above 88.7 is not needed here.
inline float exp_poly(float x) {
  const bool underflow = x < -87.3f;
  x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // Cody-Waite: x - n ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = bits_to_float(static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23);
  return underflow ? 0.0f : y * scale;
}

inline std::uint32_t mix32(std::uint32_t h) {  // murmur3's finaliser
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

inline std::uint32_t hash(std::uint32_t s0, std::uint32_t s1, std::uint64_t index) {
  const std::uint32_t lo = static_cast<std::uint32_t>(index), hi = static_cast<std::uint32_t>(index >> 32);
  return mix32(mix32(lo * 0x9E3779B1u ^ s0) ^ (hi * 0x7FEB352Du) ^ s1);
}

// Compares and selects (`a > b ? a : b`) on sixteen lanes are native only where vectors are 512 bits wide: in a
// clone for 256-bit vectors (AVX2, the baseline) GCC 12 turns each into sixteen scalar compares and branches (the
// arithmetic splits into two 256-bit halves fine). So the loops that select run on Half (eight lanes, two per
// Lanes) unless wide_vectors(): the CPUs whose clone is the x86-64-v4 one, where Lanes are native. Both forms give
// bit-identical results (the same lanes, the same order of the final sum).
using Half = float __attribute__((vector_size(kLanes / 2 * sizeof(float))));

inline bool wide_vectors() {
#if defined(__x86_64__)
  static const bool wide = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return wide;
#else
  return false;
#endif
}

// max(z(j)) over j in [0, C) with kLanes running maxima in vectors of V (GCC's vector extension: the vectoriser
// leaves a lane-array max loop scalar, 16 vmaxss per 16 elements). lanes(j): the kLanes values from j on;
// one(j): the value at j (the tail). A NaN is skipped, as `z > m ? z : m`.
template <typename V, typename Lanes16, typename One>
BERTX_INLINE float running_max_as(std::int64_t C, Lanes16&& lanes, One&& one) {
  constexpr int kParts = sizeof(Lanes) / sizeof(V), kWidth = kLanes / kParts;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  V mx[kParts];
  for (int p = 0; p < kParts; ++p)
    for (int k = 0; k < kWidth; ++k) mx[p][k] = kMinusInf;
  const std::int64_t body = C - C % kLanes;
  for (std::int64_t j = 0; j < body; j += kLanes) {
    const Lanes v = lanes(j);
    V part[kParts];
    std::memcpy(part, &v, sizeof v);
    for (int p = 0; p < kParts; ++p) mx[p] = part[p] > mx[p] ? part[p] : mx[p];
  }
  float m = kMinusInf;
  for (int p = 0; p < kParts; ++p)
    for (int k = 0; k < kWidth; ++k) m = mx[p][k] > m ? mx[p][k] : m;
  for (std::int64_t j = body; j < C; ++j) {
    const float z = one(j);
    m = z > m ? z : m;
  }
  return m;
}

template <typename Lanes16, typename One>
BERTX_INLINE float running_max(std::int64_t C, Lanes16&& lanes, One&& one) {
  return wide_vectors() ? running_max_as<Lanes>(C, lanes, one) : running_max_as<Half>(C, lanes, one);
}

BERTX_INLINE Lanes lanes_at(const float* x) {
  Lanes v;
  std::memcpy(&v, x, sizeof v);
  return v;
}

// max(x[0..C)).
BERTX_INLINE float max_of(const float* x, std::int64_t C) {
  return running_max(
      C, [&](std::int64_t j) { return lanes_at(x + j); }, [&](std::int64_t j) { return x[j]; });
}

BERTX_CLONES RowStats row_forward(const float* x, std::int64_t C) {
  float sum[kLanes] = {}, raw[kLanes] = {};
  const float m = max_of(x, C);
  const std::int64_t body = C - C % kLanes;
  for (std::int64_t j = 0; j < body; j += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      sum[k] += exp_poly(x[j + k] - m);
      raw[k] += x[j + k];  // NaN / inf detector
    }
  double s = 0, r = 0;
  for (int k = 0; k < kLanes; ++k) s += sum[k], r += raw[k];
  for (std::int64_t j = body; j < C; ++j) s += exp_poly(x[j] - m), r += x[j];
  std::int64_t arg = 0;
  while (arg < C && !(x[arg] == m)) ++arg;
  if (arg == C) arg = 0;
  const float log_sum = std::isfinite(r) ? static_cast<float>(std::log(s)) : std::numeric_limits<float>::quiet_NaN();
  return {m, log_sum, arg};
}

BERTX_CLONES void row_backward(const float* x, std::int64_t C, float m, float log_sum, std::int64_t label, float scale,
                               float* grad) {
  for (std::int64_t j = 0; j < C; ++j) grad[j] = exp_poly((x[j] - m) - log_sum) * scale;
  if (log_sum != log_sum)
    for (std::int64_t j = 0; j < C; ++j) grad[j] = log_sum;
  grad[label] -= scale;
}

BERTX_CLONES void widen(const std::uint16_t* x, float* out, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = bf16_to_float(x[j]);
}

BERTX_CLONES void narrow(const float* x, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = float_to_bf16(x[j]);
}

inline float load(float v) { return v; }
inline float load(std::uint16_t v) { return bf16_to_float(v); }
inline void store(float v, float* out) { *out = v; }
inline void store(float v, std::uint16_t* out) { *out = float_to_bf16(v); }

template <typename Tx, typename Tr, typename Ty>
BERTX_INLINE void dropout_loop(const Tx* x, const Tr* residual, Ty* y, std::uint8_t* mask, std::int64_t n,
                               std::uint64_t offset, std::uint64_t seed, std::uint32_t threshold, float scale) {
  const auto s0 = static_cast<std::uint32_t>(seed), s1 = static_cast<std::uint32_t>(seed >> 32);
  // Two loops rather than a test per element: each one vectorises on its own.
  if (residual)
    for (std::int64_t j = 0; j < n; ++j) {
      const bool keep = hash(s0, s1, offset + static_cast<std::uint64_t>(j)) < threshold;
      mask[j] = keep;
      store(load(residual[j]) + load(x[j]) * (keep ? scale : 0.0f),
            y + j);  // x * 0 keeps a NaN visible, as at::dropout
    }
  else
    for (std::int64_t j = 0; j < n; ++j) {
      const bool keep = hash(s0, s1, offset + static_cast<std::uint64_t>(j)) < threshold;
      mask[j] = keep;
      store(load(x[j]) * (keep ? scale : 0.0f), y + j);
    }
}

// z = x * scale + mask into scratch; returns max(z).
template <typename T>
BERTX_INLINE float scaled_masked(const T* x, const float* mask, float scale, std::int64_t C, float* z) {
  if (mask)
    for (std::int64_t j = 0; j < C; ++j) z[j] = load(x[j]) * scale + mask[j];
  else
    for (std::int64_t j = 0; j < C; ++j) z[j] = load(x[j]) * scale;
  return max_of(z, C);
}

// e = exp(z - m) in place; returns the sum.
BERTX_INLINE float exp_sum(float* z, float m, std::int64_t C) {
  float acc[kLanes] = {};
  const std::int64_t body = C - C % kLanes;
  for (std::int64_t j = 0; j < body; j += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += (z[j + k] = exp_poly(z[j + k] - m));
  float s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  for (std::int64_t j = body; j < C; ++j) s += (z[j] = exp_poly(z[j] - m));
  return s;
}

template <typename T, typename Tp>
BERTX_INLINE void softmax_forward(const T* x, const float* mask, float scale, std::int64_t C, Tp* probs, Tp* out,
                                  std::uint8_t* keep, std::uint64_t offset, std::uint64_t seed, std::uint32_t threshold,
                                  float dscale, float* z) {
  const float m = scaled_masked(x, mask, scale, C, z);
  const float inv = 1.0f / exp_sum(z, m, C);  // m is finite unless the whole row is -inf or NaN: then NaN, as softmax
  if (!out) {
    for (std::int64_t j = 0; j < C; ++j) store(z[j] * inv, probs + j);
    return;
  }
  const auto s0 = static_cast<std::uint32_t>(seed), s1 = static_cast<std::uint32_t>(seed >> 32);
  for (std::int64_t j = 0; j < C; ++j) {
    const float p = z[j] * inv;
    const bool k = hash(s0, s1, offset + static_cast<std::uint64_t>(j)) < threshold;
    keep[j] = k;
    store(p, probs + j);
    store(p * (k ? dscale : 0.0f), out + j);
  }
}

template <typename T>
BERTX_INLINE void softmax_backward(const T* dout, const T* probs, const std::uint8_t* keep, float dscale, float scale,
                                   std::int64_t C, T* grad, float* dp) {
  if (keep)
    for (std::int64_t j = 0; j < C; ++j) dp[j] = load(dout[j]) * (keep[j] ? dscale : 0.0f);
  else
    for (std::int64_t j = 0; j < C; ++j) dp[j] = load(dout[j]);
  float acc[kLanes] = {};
  const std::int64_t body = C - C % kLanes;
  for (std::int64_t j = 0; j < body; j += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += dp[j + k] * load(probs[j + k]);
  float s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  for (std::int64_t j = body; j < C; ++j) s += dp[j] * load(probs[j]);
  for (std::int64_t j = 0; j < C; ++j) store(load(probs[j]) * (dp[j] - s) * scale, grad + j);
}

// Sum of x[0..n) with kLanes accumulators.
BERTX_INLINE float sum_of(const float* x, std::int64_t n) {
  float acc[kLanes] = {};
  const std::int64_t body = n - n % kLanes;
  for (std::int64_t j = 0; j < body; j += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += x[j + k];
  float s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  for (std::int64_t j = body; j < n; ++j) s += x[j];
  return s;
}

template <typename Tx>
BERTX_INLINE NormStats add_norm_forward(const Tx* x, const float* residual, const float* gamma, const float* beta,
                                        float eps, std::int64_t H, float* sum, float* y, std::uint16_t* y16,
                                        std::uint8_t* keep, std::uint64_t offset, std::uint64_t seed,
                                        std::uint32_t threshold, float scale) {
  float* s = sum ? sum : y;
  const std::int64_t body = H - H % kLanes;
  float total;
  if (keep) {
    dropout_loop(x, residual, s, keep, H, offset, seed, threshold, scale);  // s = residual + dropout(x)
    total = sum_of(s, H);
  } else {  // s = residual + x and its sum in one pass, summed as sum_of sums (the same bits)
    float acc[kLanes] = {};
    for (std::int64_t j = 0; j < body; j += kLanes)
      for (int k = 0; k < kLanes; ++k) acc[k] += (s[j + k] = residual[j + k] + load(x[j + k]));
    total = 0;
    for (int k = 0; k < kLanes; ++k) total += acc[k];
    for (std::int64_t j = body; j < H; ++j) total += (s[j] = residual[j] + load(x[j]));
  }
  const float mean = total / static_cast<float>(H);
  float acc[kLanes] = {};
  for (std::int64_t j = 0; j < body; j += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += (s[j + k] - mean) * (s[j + k] - mean);
  float var = 0;
  for (int k = 0; k < kLanes; ++k) var += acc[k];
  for (std::int64_t j = body; j < H; ++j) var += (s[j] - mean) * (s[j] - mean);
  const float rstd = 1.0f / std::sqrt(var / static_cast<float>(H) + eps);
  if (y16)  // the bf16 copy the next GEMM reads, rounded in the same pass
    for (std::int64_t j = 0; j < H; ++j) y16[j] = float_to_bf16(y[j] = (s[j] - mean) * rstd * gamma[j] + beta[j]);
  else
    for (std::int64_t j = 0; j < H; ++j) y[j] = (s[j] - mean) * rstd * gamma[j] + beta[j];
  return {mean, rstd};
}

template <typename Tx>
BERTX_INLINE void add_norm_backward(const float* dy, const float* s, NormStats st, const float* gamma, std::int64_t H,
                                    const std::uint8_t* keep, float scale, float* ds, Tx* dx, float* dgamma,
                                    float* dbeta) {
  float a[kLanes] = {}, b[kLanes] = {};  // sums of g and g * xhat
  const std::int64_t body = H - H % kLanes;
  for (std::int64_t j = 0; j < body; j += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const float xhat = (s[j + k] - st.mean) * st.rstd, g = dy[j + k] * gamma[j + k];
      a[k] += g;
      b[k] += g * xhat;
    }
  float sa = 0, sb = 0;
  for (int k = 0; k < kLanes; ++k) sa += a[k], sb += b[k];
  for (std::int64_t j = body; j < H; ++j) {
    const float xhat = (s[j] - st.mean) * st.rstd, g = dy[j] * gamma[j];
    sa += g;
    sb += g * xhat;
  }
  const float ma = sa / static_cast<float>(H), mb = sb / static_cast<float>(H);
  for (std::int64_t j = 0; j < H; ++j) {
    const float xhat = (s[j] - st.mean) * st.rstd;
    ds[j] = st.rstd * (dy[j] * gamma[j] - ma - xhat * mb);
    dgamma[j] += dy[j] * xhat;
    dbeta[j] += dy[j];
  }
  if (!dx) return;
  if (keep)
    for (std::int64_t j = 0; j < H; ++j) store(ds[j] * (keep[j] ? scale : 0.0f), dx + j);
  else
    for (std::int64_t j = 0; j < H; ++j) store(ds[j], dx + j);
}

}  // namespace

BERTX_CLONES void softmax_row_forward(const float* x, const float* mask, float scale, std::int64_t C, float* probs,
                                      float* out, std::uint8_t* keep, std::uint64_t offset, std::uint64_t seed,
                                      std::uint32_t keep_threshold, float dropout_scale, float* scratch) {
  softmax_forward(x, mask, scale, C, probs, out, keep, offset, seed, keep_threshold, dropout_scale, scratch);
}

BERTX_CLONES void softmax_row_forward(const std::uint16_t* x, const float* mask, float scale, std::int64_t C,
                                      std::uint16_t* probs, std::uint16_t* out, std::uint8_t* keep,
                                      std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold,
                                      float dropout_scale, float* scratch) {
  softmax_forward(x, mask, scale, C, probs, out, keep, offset, seed, keep_threshold, dropout_scale, scratch);
}

// max(x * scale + mask) over the row.
BERTX_INLINE float scaled_masked_max(const float* x, const float* mask, float scale, std::int64_t C) {
  return running_max(
      C, [&](std::int64_t j) { return lanes_at(x + j) * scale + lanes_at(mask + j); },
      [&](std::int64_t j) { return x[j] * scale + mask[j]; });
}

// exp(x) for x <= 0 (softmax arguments; NaN stays NaN), 0 below -87.3: exp_poly's polynomial with n = round(x / ln 2)
// taken from a magic-number add (1.5 * 2^23 leaves round(x log2 e) in the low mantissa bits), 2^n built from the same
// bits. V: Lanes or Half (wide_vectors above).
template <typename V>
BERTX_INLINE V exp_nonpositive(V x0) {
  typedef std::uint32_t VBits __attribute__((vector_size(sizeof(V))));
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const V zero = {}, floor = zero - 87.3f;
  const V x = x0 < floor ? floor : x0;  // -inf included; NaN lanes compare false and stay NaN
  const V big = x * 1.44269504088896341f + kMagic;
  const V n = big - kMagic;
  const V r = x - n * 0.693359375f + n * 2.12194440e-4f;
  V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const V y = p * r * r + r + 1.0f;
  VBits e;  // 2^n = (n + 127) << 23, n in big's low mantissa bits
  std::memcpy(&e, &big, sizeof e);
  e = (e << 23) + (127u << 23);
  V scale;
  std::memcpy(&scale, &e, sizeof scale);
  return x0 < floor ? zero : y * scale;
}

// softmax_row_exp's loop on vectors of V: x[j] = exp(x[j] * scale + mask[j] - m) over the whole-Lanes body; returns
// the body's sum (lanes in order) and leaves j at the tail.
template <typename V>
BERTX_INLINE float exp_rows_as(float* x, const float* mask, float scale, float m, std::int64_t C, std::int64_t& j) {
  constexpr int kParts = sizeof(Lanes) / sizeof(V), kWidth = kLanes / kParts;
  V acc[kParts] = {};
  for (; j + kLanes <= C; j += kLanes) {
    const Lanes z = lanes_at(x + j) * scale + lanes_at(mask + j) - m;
    V part[kParts];
    std::memcpy(part, &z, sizeof z);
    for (int p = 0; p < kParts; ++p) {
      const V e = exp_nonpositive(part[p]);
      acc[p] += e;
      std::memcpy(x + j + p * kWidth, &e, sizeof e);
    }
  }
  float s = 0;
  for (int p = 0; p < kParts; ++p)
    for (int k = 0; k < kWidth; ++k) s += acc[p][k];
  return s;
}

BERTX_CLONES float softmax_row_exp(float* x, const float* mask, float scale, std::int64_t C, std::uint16_t* e) {
  const float m = scaled_masked_max(x, mask, scale, C);
  std::int64_t j = 0;
  float s = wide_vectors() ? exp_rows_as<Lanes>(x, mask, scale, m, C, j) : exp_rows_as<Half>(x, mask, scale, m, C, j);
  for (; j < C; ++j) s += (x[j] = exp_poly(x[j] * scale + mask[j] - m));
  if (e)  // a pass of its own: fused into the loop above, the narrowing shuffle cost more than this re-read from L1
    for (j = 0; j < C; ++j) e[j] = float_to_bf16(x[j]);
  return s;
}

BERTX_CLONES void scale_row(const float* x, float scale, std::int64_t n, std::uint16_t* y) {
  for (std::int64_t j = 0; j < n; ++j) y[j] = float_to_bf16(x[j] * scale);
}

BERTX_CLONES void scale_row(const float* x, float scale, std::int64_t n, float* y) {
  for (std::int64_t j = 0; j < n; ++j) y[j] = x[j] * scale;
}

BERTX_CLONES void softmax_row_backward(const float* dout, const float* probs, const std::uint8_t* keep,
                                       float dropout_scale, float scale, std::int64_t C, float* grad, float* scratch) {
  softmax_backward(dout, probs, keep, dropout_scale, scale, C, grad, scratch);
}

BERTX_CLONES void softmax_row_backward(const std::uint16_t* dout, const std::uint16_t* probs, const std::uint8_t* keep,
                                       float dropout_scale, float scale, std::int64_t C, std::uint16_t* grad,
                                       float* scratch) {
  softmax_backward(dout, probs, keep, dropout_scale, scale, C, grad, scratch);
}

RowStats ce_row_forward(const float* x, std::int64_t C) { return row_forward(x, C); }

RowStats ce_row_forward(const std::uint16_t* x, std::int64_t C, float* scratch) {
  widen(x, scratch, C);
  return row_forward(scratch, C);
}

void ce_row_backward(const float* x, std::int64_t C, RowStats st, std::int64_t label, float scale, float* grad) {
  row_backward(x, C, st.max, st.log_sum, label, scale, grad);
}

void ce_row_backward(const std::uint16_t* x, std::int64_t C, RowStats st, std::int64_t label, float scale,
                     std::uint16_t* grad, float* scratch) {
  widen(x, scratch, C);
  row_backward(scratch, C, st.max, st.log_sum, label, scale,
               scratch);  // in place: each element is read before it is written
  narrow(scratch, grad, C);
}

BERTX_CLONES void dropout(const float* x, const float* residual, float* y, std::uint8_t* mask, std::int64_t n,
                          std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold, float scale) {
  dropout_loop(x, residual, y, mask, n, offset, seed, keep_threshold, scale);
}

BERTX_CLONES void dropout(const std::uint16_t* x, const std::uint16_t* residual, std::uint16_t* y, std::uint8_t* mask,
                          std::int64_t n, std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold,
                          float scale) {
  dropout_loop(x, residual, y, mask, n, offset, seed, keep_threshold, scale);
}

BERTX_CLONES void dropout(const std::uint16_t* x, const float* residual, float* y, std::uint8_t* mask, std::int64_t n,
                          std::uint64_t offset, std::uint64_t seed, std::uint32_t keep_threshold, float scale) {
  dropout_loop(x, residual, y, mask, n, offset, seed, keep_threshold, scale);
}

BERTX_CLONES void masked_scale(const float* g, const std::uint8_t* mask, float scale, float* out, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = g[j] * (mask[j] ? scale : 0.0f);
}

BERTX_CLONES void masked_scale(const std::uint16_t* g, const std::uint8_t* mask, float scale, std::uint16_t* out,
                               std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = float_to_bf16(bf16_to_float(g[j]) * (mask[j] ? scale : 0.0f));
}

BERTX_CLONES void masked_scale(const float* g, const std::uint8_t* mask, float scale, std::uint16_t* out,
                               std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) out[j] = float_to_bf16(g[j] * (mask[j] ? scale : 0.0f));
}

BERTX_CLONES NormStats add_norm_row_forward(const float* x, const float* residual, const float* gamma,
                                            const float* beta, float eps, std::int64_t H, float* sum, float* y,
                                            std::uint16_t* y16, std::uint8_t* keep, std::uint64_t offset,
                                            std::uint64_t seed, std::uint32_t keep_threshold, float scale) {
  return add_norm_forward(x, residual, gamma, beta, eps, H, sum, y, y16, keep, offset, seed, keep_threshold, scale);
}

BERTX_CLONES NormStats add_norm_row_forward(const std::uint16_t* x, const float* residual, const float* gamma,
                                            const float* beta, float eps, std::int64_t H, float* sum, float* y,
                                            std::uint16_t* y16, std::uint8_t* keep, std::uint64_t offset,
                                            std::uint64_t seed, std::uint32_t keep_threshold, float scale) {
  return add_norm_forward(x, residual, gamma, beta, eps, H, sum, y, y16, keep, offset, seed, keep_threshold, scale);
}

BERTX_CLONES void add_norm_row_backward(const float* dy, const float* sum, NormStats st, const float* gamma,
                                        std::int64_t H, const std::uint8_t* keep, float scale, float* d_sum, float* dx,
                                        float* dgamma, float* dbeta) {
  add_norm_backward(dy, sum, st, gamma, H, keep, scale, d_sum, dx, dgamma, dbeta);
}

BERTX_CLONES void add_norm_row_backward(const float* dy, const float* sum, NormStats st, const float* gamma,
                                        std::int64_t H, const std::uint8_t* keep, float scale, float* d_sum,
                                        std::uint16_t* dx, float* dgamma, float* dbeta) {
  add_norm_backward(dy, sum, st, gamma, H, keep, scale, d_sum, dx, dgamma, dbeta);
}

BERTX_CLONES bool all_finite(const float* x, std::int64_t n) {
  float acc[kLanes] = {};
  const std::int64_t body = n - n % kLanes;
  for (std::int64_t j = 0; j < body; j += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += x[j + k] * 0.0f;
  float s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  for (std::int64_t j = body; j < n; ++j) s += x[j] * 0.0f;
  return s == 0.0f;
}

BERTX_CLONES bool all_finite(const std::uint16_t* x, std::int64_t n) {
  std::uint16_t bad = 0;  // any element with all exponent bits set
  for (std::int64_t j = 0; j < n; ++j) bad |= static_cast<std::uint16_t>((x[j] & 0x7F80u) == 0x7F80u);
  return bad == 0;
}

std::uint32_t dropout_hash(std::uint64_t seed, std::uint64_t index) {
  return hash(static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32), index);
}

}  // namespace bertx::ops::cpu
