// fused_cpu.cpp - see fused_cpu.hpp. The element arithmetic is written once, as templates over the lane
// type T: at::vec::Vectorized<float> for the body of a chunk and float for its last (< Vec::size())
// elements, so both compute the same float32 operations in the same order. A tensor is cut into fixed
// chunks of kChunk elements that at::parallel_for hands to the threads; each chunk keeps its own double
// sums and the sums are added in chunk order. Each chunk copies the data pointers and the broadcast
// scalars into locals first: a float store could otherwise alias them and force a reload per vector.
// This file is compiled with -fno-math-errno and OpenMP (see CMakeLists.txt): otherwise
// Vectorized<float>::sqrt() of a build without ATen's CPU-capability flags is a scalar libm call, and
// at::parallel_for of an OpenMP LibTorch runs on one thread.
#include "fused_cpu.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/record_function.h>
#include <c10/macros/Macros.h>

#include "bertx/error.hpp"

// The per-element lambdas are forced inline (C10_ALWAYS_INLINE cannot follow a lambda's parameters): a
// call per vector would pass the lanes through memory.
#if defined(__GNUC__) || defined(__clang__)
#define BERTX_INLINE_LAMBDA __attribute__((always_inline))
#else
#define BERTX_INLINE_LAMBDA
#endif

namespace bertx::optim::fused {
namespace {

using Vec = at::vec::Vectorized<float>;
constexpr std::int64_t kLanes = Vec::size();
constexpr std::int64_t kChunk = 16384;  // elements per parallel task, a multiple of kLanes
static_assert(kChunk % kLanes == 0);

std::atomic<bool> g_enabled{true};
std::atomic<std::int64_t> g_updates{0};

template <typename T>
C10_ALWAYS_INLINE T load(const float* x, std::int64_t i) {
  if constexpr (std::is_same_v<T, Vec>) return Vec::loadu(x + i);
  else return x[i];
}
C10_ALWAYS_INLINE void store(float* x, std::int64_t i, const Vec& value) { value.store(x + i); }
C10_ALWAYS_INLINE void store(float* x, std::int64_t i, float value) { x[i] = value; }
C10_ALWAYS_INLINE Vec root(const Vec& x) { return x.sqrt(); }
C10_ALWAYS_INLINE float root(float x) { return std::sqrt(x); }

// f.template operator()<Vec>(i) for each full vector of [begin, end), then <float> for each element left.
template <typename F>
C10_ALWAYS_INLINE void each_lane(std::int64_t begin, std::int64_t end, const F& f) {
  std::int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) f.template operator()<Vec>(i);
  for (; i < end; ++i) f.template operator()<float>(i);
}

std::int64_t chunk_count(std::int64_t n) { return (n + kChunk - 1) / kChunk; }

// chunk(c, begin, end) for every fixed chunk c of [0, n), on the intra-op threads.
template <typename F>
void each_chunk(std::int64_t n, const F& chunk) {
  at::parallel_for(0, chunk_count(n), 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t c = first; c < last; ++c) chunk(c, c * kChunk, std::min(n, (c + 1) * kChunk));
  });
}

// Sum of squares (of float32 squares, as in ATen): float lanes, four accumulators in turn (independent
// dependency chains), each taking kPerLane squares per lane before it is added in double.
struct SumSquares {
  static constexpr int kAccumulators = 4, kPerLane = 16;
  Vec lanes[kAccumulators] = {Vec(0.0f), Vec(0.0f), Vec(0.0f), Vec(0.0f)};
  int pending = 0;
  double sum = 0.0;
  C10_ALWAYS_INLINE void add(const Vec& x) {
    Vec& acc = lanes[pending % kAccumulators];
    acc = acc + x * x;
    if (++pending == kAccumulators * kPerLane) flush();
  }
  C10_ALWAYS_INLINE void add(float x) { sum += static_cast<double>(x * x); }
  void flush() {
    for (Vec& acc : lanes) {
      float l[kLanes];
      acc.store(l);
      for (float x : l) sum += x;
      acc = Vec(0.0f);
    }
    pending = 0;
  }
  double total() {
    flush();
    return sum;
  }
};

struct Pointers {
  const float* g;
  float *p, *m, *v;
  explicit Pointers(const Tensors& t)
      : g(t.g.data_ptr<float>()), p(t.p.data_ptr<float>()), m(t.m.data_ptr<float>()), v(t.v.data_ptr<float>()) {}
};

// Moments' scalars as lanes of T (double hyper-parameters cast to float32, as ATen casts a Scalar).
template <typename T>
struct MomentsK {
  T scale, beta1, one_minus_beta1, beta2, one_minus_beta2;
  bool divide;
  explicit MomentsK(const Moments& c)
      : scale(c.grad_scale), beta1(static_cast<float>(c.beta1)), one_minus_beta1(static_cast<float>(1.0 - c.beta1)),
        beta2(static_cast<float>(c.beta2)), one_minus_beta2(static_cast<float>(1.0 - c.beta2)), divide(c.divide_grad) {}

  // Updates m[i] and v[i] from g[i]; returns the new values in m_out, v_out.
  C10_ALWAYS_INLINE void update(const Pointers& x, std::int64_t i, T& m_out, T& v_out) const {
    T g = load<T>(x.g, i);
    g = divide ? g / scale : g * scale;
    m_out = load<T>(x.m, i) * beta1 + one_minus_beta1 * g;
    v_out = load<T>(x.v, i) * beta2 + one_minus_beta2 * g * g;
    store(x.m, i, m_out);
    store(x.v, i, v_out);
  }
};

// DirectionStep's scalars as lanes of T: u of the header's formula.
template <typename T>
struct DirectionK {
  T eps, weight_decay, bias_correction1, bias_correction2;
  bool bias_correct, decay;
  explicit DirectionK(const DirectionStep& d)
      : eps(static_cast<float>(d.eps)), weight_decay(static_cast<float>(d.weight_decay)),
        bias_correction1(static_cast<float>(d.bias_correction1)), bias_correction2(static_cast<float>(d.bias_correction2)),
        bias_correct(d.bias_correction1 != 1.0 || d.bias_correction2 != 1.0), decay(d.weight_decay != 0.0) {}

  C10_ALWAYS_INLINE T operator()(const T& m, const T& v, const T& p) const {
    const T u = bias_correct ? (m / bias_correction1) / (root(v / bias_correction2) + eps) : m / (root(v) + eps);
    return decay ? u + weight_decay * p : u;
  }
};

template <typename T>
struct AdamWK {
  T decay, neg_step_size, bias_correction2_sqrt, eps;
  explicit AdamWK(const AdamWStep& s)
      : decay(static_cast<float>(s.decay)), neg_step_size(static_cast<float>(-s.step_size)),
        bias_correction2_sqrt(static_cast<float>(s.bias_correction2_sqrt)), eps(static_cast<float>(s.eps)) {}
};

// One constants struct K in both lane types; built per chunk as a local.
template <template <typename> class K>
struct Both {
  K<Vec> vec;
  K<float> one;
  template <typename A>
  explicit Both(const A& a) : vec(a), one(a) {}
  template <typename T>
  C10_ALWAYS_INLINE const K<T>& get() const {
    if constexpr (std::is_same_v<T, Vec>) return vec;
    else return one;
  }
};

void check(const Tensors& t, const char* kernel) {
  if (!usable(t))
    throw Error(std::string("fused CPU optimizer kernel ") + kernel +
                ": gradient, parameter and moments must be contiguous float32 CPU tensors of one size (and the "
                "fused kernels enabled); other tensors take the ATen path");
}

// After an in-place update through raw pointers: bump the version counters as ATen's in-place ops do.
void finish(const Tensors& t) {
  for (const at::Tensor* x : {&t.p, &t.m, &t.v}) x->unsafeGetTensorImpl()->bump_version();
  g_updates.fetch_add(1, std::memory_order_relaxed);
}

// f of `p = p - u * f` from the norms (float32 like the reference's 0-dim tensors); see Ratio.
float factor(Ratio ratio, double p_sum_squares, double u_sum_squares, float lr) {
  const float p_norm = static_cast<float>(std::sqrt(p_sum_squares));
  const float u_norm = static_cast<float>(std::sqrt(u_sum_squares));
  if (ratio == Ratio::Lamb) {
    const float weight_norm = p_norm > 10.0f ? 10.0f : p_norm;  // clamp(0, 10); NaN stays NaN
    const float r = (weight_norm == 0.0f || u_norm == 0.0f) ? 1.0f : weight_norm / u_norm;
    return r * lr;
  }
  if (ratio == Ratio::NvLamb) return (p_norm != 0.0f && u_norm != 0.0f) ? (p_norm / u_norm) * lr : lr;
  return lr;
}

}  // namespace

bool usable(const at::Tensor& x) {
  return g_enabled.load(std::memory_order_relaxed) && x.defined() && x.layout() == at::kStrided && x.device().is_cpu() &&
         x.scalar_type() == at::kFloat && x.is_contiguous() && !x.is_inference();
}

bool usable(const Tensors& t) {
  for (const at::Tensor* x : {&t.g, &t.p, &t.m, &t.v})
    if (!usable(*x) || x->numel() != t.p.numel()) return false;
  return true;
}

void set_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

std::int64_t update_count() { return g_updates.load(std::memory_order_relaxed); }

double sum_squares(const at::Tensor& x) {
  if (!usable(x)) throw Error("fused CPU sum of squares: the tensor must be a contiguous float32 CPU tensor");
  RECORD_FUNCTION("bertx::fused_sum_squares", c10::ArrayRef<const c10::IValue>{});
  const float* const data = x.data_ptr<float>();
  const std::int64_t n = x.numel();
  std::vector<double> partial(static_cast<std::size_t>(chunk_count(n)), 0.0);
  each_chunk(n, [&](std::int64_t c, std::int64_t begin, std::int64_t end) {
    const float* const d = data;
    SumSquares s;
    each_lane(begin, end, [&]<typename T>(std::int64_t i) BERTX_INLINE_LAMBDA { s.add(load<T>(d, i)); });
    partial[static_cast<std::size_t>(c)] = s.total();
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

void adamw(const Tensors& t, const Moments& moments, const AdamWStep& step) {
  check(t, "adamw");
  RECORD_FUNCTION("bertx::fused_adamw", c10::ArrayRef<const c10::IValue>{});
  const Pointers ptr(t);
  each_chunk(t.p.numel(), [&](std::int64_t, std::int64_t begin, std::int64_t end) {
    const Pointers x = ptr;
    const Both<MomentsK> mk(moments);
    const Both<AdamWK> ak(step);
    each_lane(begin, end, [&]<typename T>(std::int64_t i) BERTX_INLINE_LAMBDA {
      const AdamWK<T>& a = ak.template get<T>();
      T m, v;
      mk.template get<T>().update(x, i, m, v);
      const T p = load<T>(x.p, i) * a.decay;
      const T denom = root(v) / a.bias_correction2_sqrt + a.eps;
      store(x.p, i, p + a.neg_step_size * m / denom);
    });
  });
  finish(t);
}

void direction(const Tensors& t, const Moments& moments, const DirectionStep& step) {
  check(t, "direction");
  RECORD_FUNCTION("bertx::fused_adam_direction", c10::ArrayRef<const c10::IValue>{});
  const Pointers ptr(t);
  const std::int64_t n = t.p.numel();
  const float lr = static_cast<float>(step.lr);

  if (step.ratio == Ratio::None) {  // one pass: moments, direction, update
    each_chunk(n, [&](std::int64_t, std::int64_t begin, std::int64_t end) {
      const Pointers x = ptr;
      const Both<MomentsK> mk(moments);
      const Both<DirectionK> dk(step);
      const Vec lr_vec(lr);
      const float lr_one = lr;
      each_lane(begin, end, [&]<typename T>(std::int64_t i) BERTX_INLINE_LAMBDA {
        T m, v;
        mk.template get<T>().update(x, i, m, v);
        const T p = load<T>(x.p, i);
        const T u = dk.template get<T>()(m, v, p);
        if constexpr (std::is_same_v<T, Vec>) store(x.p, i, p - u * lr_vec);
        else store(x.p, i, p - u * lr_one);
      });
    });
    finish(t);
    return;
  }

  // Pass 1: moments, and the sums of squares of p (before the update) and u, per chunk.
  std::vector<double> p_partial(static_cast<std::size_t>(chunk_count(n)), 0.0), u_partial(p_partial.size(), 0.0);
  each_chunk(n, [&](std::int64_t c, std::int64_t begin, std::int64_t end) {
    const Pointers x = ptr;
    const Both<MomentsK> mk(moments);
    const Both<DirectionK> dk(step);
    SumSquares ps, us;
    each_lane(begin, end, [&]<typename T>(std::int64_t i) BERTX_INLINE_LAMBDA {
      T m, v;
      mk.template get<T>().update(x, i, m, v);
      const T p = load<T>(x.p, i);
      ps.add(p);
      us.add(dk.template get<T>()(m, v, p));
    });
    p_partial[static_cast<std::size_t>(c)] = ps.total();
    u_partial[static_cast<std::size_t>(c)] = us.total();
  });
  double p_sum = 0.0, u_sum = 0.0;
  for (std::size_t c = 0; c < p_partial.size(); ++c) {
    p_sum += p_partial[c];
    u_sum += u_partial[c];
  }
  const float f = factor(step.ratio, p_sum, u_sum, lr);

  // Pass 2: the same u from the stored moments, and the update.
  each_chunk(n, [&](std::int64_t, std::int64_t begin, std::int64_t end) {
    const Pointers x = ptr;
    const Both<DirectionK> dk(step);
    const Vec f_vec(f);
    const float f_one = f;
    each_lane(begin, end, [&]<typename T>(std::int64_t i) BERTX_INLINE_LAMBDA {
      const T p = load<T>(x.p, i);
      const T u = dk.template get<T>()(load<T>(x.m, i), load<T>(x.v, i), p);
      if constexpr (std::is_same_v<T, Vec>) store(x.p, i, p - u * f_vec);
      else store(x.p, i, p - u * f_one);
    });
  });
  finish(t);
}

}  // namespace bertx::optim::fused
