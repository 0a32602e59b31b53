// ops_common.hpp - what the ops/*.cpp dispatch files share: the per-call dropout draw and raw pointers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace bertx::ops::detail {

// One 64-bit draw from the default CPU generator (under its lock): a call's mask follows the generator's state.
inline std::uint64_t draw_seed() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

// One call's dropout parameters for the CPU kernels (kernels_cpu.hpp): a fresh seed, the keep threshold (keep
// probability 1 - p as a fraction of 2^32) and the scale 1 / (1 - p). p <= 0: no dropout, nothing drawn.
struct DropoutDraw {
  std::uint64_t seed = 0;
  std::uint32_t threshold = 0;
  float scale = 1;
  explicit DropoutDraw(double p) {
    if (p <= 0) return;
    seed = draw_seed();
    threshold = static_cast<std::uint32_t>(std::min(std::ldexp(1.0 - p, 32), 4294967295.0));
    scale = static_cast<float>(1.0 / (1.0 - p));
  }
};

// An additive attention mask (B or 1, 1, 1, Sk) on the CPU, as attention_softmax takes it, into `rows`: (B or 1, Sk)
// float32 contiguous, or undefined when the mask is. False for any other shape or device (the caller then takes
// LibTorch's composition).
inline bool mask_rows(const at::Tensor& additive_mask, std::int64_t B, std::int64_t Sk, at::Tensor& rows) {
  if (!additive_mask.defined()) {
    rows = at::Tensor();
    return true;
  }
  const at::Tensor& m = additive_mask;
  if (!(m.dim() == 4 && (m.size(0) == B || m.size(0) == 1) && m.size(1) == 1 && m.size(2) == 1 && m.size(3) == Sk &&
        m.device().is_cpu()))
    return false;
  rows = m.to(at::kFloat).reshape({m.size(0), Sk}).contiguous();
  return true;
}

// The one test of whether bertx's CPU kernels (kernels_cpu.hpp, oneDNN) may take a tensor: defined, on the CPU,
// strided, and of dtype `dt` - or, without `dt`, of one of the two dtypes they are written for (float32,
// bfloat16). Each op adds its own shape conditions; anything else takes LibTorch's composition.
inline bool kernel_dtype(at::ScalarType dt) { return dt == at::kFloat || dt == at::kBFloat16; }
inline bool cpu_kernel_input(const at::Tensor& t, at::ScalarType dt) {
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided && t.scalar_type() == dt;
}
inline bool cpu_kernel_input(const at::Tensor& t) {
  return t.defined() && kernel_dtype(t.scalar_type()) && cpu_kernel_input(t, t.scalar_type());
}

// The tensor's data as T* (bf16 as std::uint16_t), nullptr for an undefined tensor.
template <typename T>
T* ptr(const at::Tensor& t) {
  return t.defined() ? reinterpret_cast<T*>(t.data_ptr()) : nullptr;
}

}  // namespace bertx::ops::detail
