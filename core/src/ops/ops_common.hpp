// ops_common.hpp - what the ops/*.cpp dispatch files share: the per-call dropout seed and raw pointers.
#pragma once
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

// The tensor's data as T* (bf16 as std::uint16_t), nullptr for an undefined tensor.
template <typename T>
T* ptr(const at::Tensor& t) {
  return t.defined() ? reinterpret_cast<T*>(t.data_ptr()) : nullptr;
}

}  // namespace bertx::ops::detail
