// fused_kernels.cpp - see fused_kernels.hpp. Plain loops for the auto-vectoriser, built with -O3
// -fno-math-errno (sqrt becomes vsqrtps), -fno-trapping-math and -ffp-contract=off (no fused multiply-adds:
// each clone rounds every operation as the ATen sequence does; see CMakeLists.txt). The optimizer's
// run-time switches (divide the gradient, bias correction, weight decay) become template flags, chosen once
// per call outside the loops, so that the loops have no selects: a select would compute both of its sides,
// and divisions and square roots are what these loops spend their time on. Sums of squares keep kLanes
// float accumulators (vectorised without reassociating) flushed into double lanes every kPerLane squares.
#include "fused_kernels.hpp"

#include <algorithm>
#include <cmath>

#include "bertx/simd.hpp"  // BERTX_CLONES, BERTX_INLINE

namespace bertx::optim::fused::kernels {
namespace {

constexpr std::int64_t kLanes = 32;                 // float accumulators: 2 zmm, 4 ymm or 8 xmm registers
constexpr std::int64_t kPerLane = 16;               // squares per float lane before it goes into its double lane
constexpr std::int64_t kBlock = kLanes * kPerLane;  // elements per flush (and per u buffer of the LAMB pass)

// A sum of squares in kLanes double lanes plus a scalar tail, added up in a fixed order.
struct Squares {
  double lanes[kLanes] = {};
  double tail = 0.0;

  // x[0, n) with n <= kBlock: float32 squares (as ATen's norm of a float tensor squares) in float lanes.
  BERTX_INLINE void add(const float* x, std::int64_t n) {
    float acc[kLanes] = {};
    const std::int64_t body = n - n % kLanes;
    for (std::int64_t j = 0; j < body; j += kLanes)
      for (std::int64_t k = 0; k < kLanes; ++k) acc[k] += x[j + k] * x[j + k];
    for (std::int64_t k = 0; k < kLanes; ++k) lanes[k] += static_cast<double>(acc[k]);
    for (std::int64_t j = body; j < n; ++j) tail += static_cast<double>(x[j] * x[j]);
  }
  BERTX_INLINE double total() const {
    double s = 0.0;
    for (std::int64_t k = 0; k < kLanes; ++k) s += lanes[k];
    return s + tail;
  }
};

// The scaled gradient g' and the new moments; m and v hold the old moments on entry.
template <bool Divide>
BERTX_INLINE void moments(float g, float& m, float& v, const MomentScalars& s) {
  const float scaled = Divide ? g / s.scale : g * s.scale;
  m = m * s.beta1 + s.one_minus_beta1 * scaled;
  v = v * s.beta2 + s.one_minus_beta2 * scaled * scaled;
}

// u of DirectionScalars' formula.
template <bool BiasCorrect, bool Decay>
BERTX_INLINE float direction_of(float m, float v, float p, const DirectionScalars& d) {
  const float u =
      BiasCorrect ? (m / d.bias_correction1) / (std::sqrt(v / d.bias_correction2) + d.eps) : m / (std::sqrt(v) + d.eps);
  return Decay ? u + d.weight_decay * p : u;
}

// The loops take the arrays and scalars by value: locals that a float store cannot alias, so the scalars
// stay in registers.
template <bool Divide>
BERTX_INLINE void adamw_loop(const Arrays a, const MomentScalars s, const AdamWScalars w, std::int64_t begin,
                             std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) {
    float m = a.m[i], v = a.v[i];
    moments<Divide>(a.g[i], m, v, s);
    a.m[i] = m;
    a.v[i] = v;
    const float p = a.p[i] * w.decay;
    a.p[i] = p + w.neg_step_size * m / (std::sqrt(v) / w.bias_correction2_sqrt + w.eps);
  }
}

template <bool Divide, bool BiasCorrect, bool Decay>
struct UpdateLoop {
  BERTX_INLINE static void run(const Arrays a, const MomentScalars s, const DirectionScalars d, float lr,
                               std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      float m = a.m[i], v = a.v[i];
      moments<Divide>(a.g[i], m, v, s);
      a.m[i] = m;
      a.v[i] = v;
      const float p = a.p[i];
      a.p[i] = p - direction_of<BiasCorrect, Decay>(m, v, p, d) * lr;
    }
  }
};

template <bool Divide, bool BiasCorrect, bool Decay>
struct MomentsLoop {
  BERTX_INLINE static SquareSums run(const Arrays a, const MomentScalars s, const DirectionScalars d,
                                     std::int64_t begin, std::int64_t end) {
    Squares ps, us;
    float u[kBlock];
    for (std::int64_t b = begin; b < end; b += kBlock) {
      const std::int64_t n = std::min(kBlock, end - b);
      for (std::int64_t j = 0; j < n; ++j) {
        const std::int64_t i = b + j;
        float m = a.m[i], v = a.v[i];
        moments<Divide>(a.g[i], m, v, s);
        a.m[i] = m;
        a.v[i] = v;
        u[j] = direction_of<BiasCorrect, Decay>(m, v, a.p[i], d);
      }
      ps.add(a.p + b, n);
      us.add(u, n);
    }
    return {ps.total(), us.total()};
  }
};

template <bool BiasCorrect, bool Decay>
BERTX_INLINE void apply_loop(const Arrays a, const DirectionScalars d, float f, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) {
    const float p = a.p[i];
    a.p[i] = p - direction_of<BiasCorrect, Decay>(a.m[i], a.v[i], p, d) * f;
  }
}

// Loop<divide, bias_correct, decay>::run(args...) with the three switches as compile-time flags.
template <template <bool, bool, bool> class Loop, typename... A>
BERTX_INLINE auto with_flags(bool divide, bool bias_correct, bool decay, const A&... args) {
  if (divide) {
    if (bias_correct) return decay ? Loop<true, true, true>::run(args...) : Loop<true, true, false>::run(args...);
    return decay ? Loop<true, false, true>::run(args...) : Loop<true, false, false>::run(args...);
  }
  if (bias_correct) return decay ? Loop<false, true, true>::run(args...) : Loop<false, true, false>::run(args...);
  return decay ? Loop<false, false, true>::run(args...) : Loop<false, false, false>::run(args...);
}

}  // namespace

BERTX_CLONES double sum_squares(const float* x, std::int64_t begin, std::int64_t end) {
  Squares s;
  for (std::int64_t b = begin; b < end; b += kBlock) s.add(x + b, std::min(kBlock, end - b));
  return s.total();
}

BERTX_CLONES void adamw(const Arrays& a, const MomentScalars& ms, const AdamWScalars& as, std::int64_t begin,
                        std::int64_t end) {
  if (ms.divide)
    adamw_loop<true>(a, ms, as, begin, end);
  else
    adamw_loop<false>(a, ms, as, begin, end);
}

BERTX_CLONES void direction_update(const Arrays& a, const MomentScalars& ms, const DirectionScalars& ds, float lr,
                                   std::int64_t begin, std::int64_t end) {
  with_flags<UpdateLoop>(ms.divide, ds.bias_correct, ds.decay, a, ms, ds, lr, begin, end);
}

BERTX_CLONES SquareSums direction_moments(const Arrays& a, const MomentScalars& ms, const DirectionScalars& ds,
                                          std::int64_t begin, std::int64_t end) {
  return with_flags<MomentsLoop>(ms.divide, ds.bias_correct, ds.decay, a, ms, ds, begin, end);
}

BERTX_CLONES void direction_apply(const Arrays& a, const DirectionScalars& ds, float f, std::int64_t begin,
                                  std::int64_t end) {
  if (ds.bias_correct) {
    if (ds.decay)
      apply_loop<true, true>(a, ds, f, begin, end);
    else
      apply_loop<true, false>(a, ds, f, begin, end);
  } else if (ds.decay) {
    apply_loop<false, true>(a, ds, f, begin, end);
  } else {
    apply_loop<false, false>(a, ds, f, begin, end);
  }
}

}  // namespace bertx::optim::fused::kernels
