// finite.cpp - bertx::ops::all_finite (ops.hpp): the training step's non-finite gradient check as one read-only
// pass per tensor (LibTorch 1.13 has no CPU kernel for _amp_foreach_non_finite_check_and_unscale_; a norm per
// tensor also squares and sums every element).
#include <atomic>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "bertx/ops.hpp"
#include "ops/cpu/kernels_cpu.hpp"
#include "ops/ops_common.hpp"

namespace bertx::ops {

bool all_finite(const std::vector<at::Tensor>& tensors) {
  RECORD_FUNCTION("bertx::ops::all_finite", std::vector<c10::IValue>());
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    const bool fused = detail::cpu_kernel_input(t) && t.is_contiguous();
    if (!fused) {
      if (!t.isfinite().all().item<bool>()) return false;
      continue;
    }
    std::atomic<bool> ok{true};
    const bool bf16 = t.scalar_type() == at::kBFloat16;
    at::parallel_for(0, t.numel(), 1 << 16, [&](std::int64_t b, std::int64_t e) {
      const bool chunk = bf16 ? cpu::all_finite(detail::ptr<const std::uint16_t>(t) + b, e - b)
                              : cpu::all_finite(detail::ptr<const float>(t) + b, e - b);
      if (!chunk) ok.store(false, std::memory_order_relaxed);
    });
    if (!ok.load()) return false;
  }
  return true;
}

}  // namespace bertx::ops
