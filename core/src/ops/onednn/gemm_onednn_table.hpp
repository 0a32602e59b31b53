// gemm_onednn_table.hpp - the functions of gemm_onednn.hpp as one table of pointers, the interface between
// bertx_ops and libbertx_onednn.so in a build against the PyPI LibTorch.
// Why a separate library: the wheel's libtorch_cpu carries oneDNN 3.x and exports its template instantiations
// (the call_once thunks of gemm_info_t::jit_init among them); loaded plainly, Debian's libdnnl.so.2 binds to
// those and its dnnl_sgemm returns dnnl_unimplemented. libbertx_onednn.so (gemm_onednn.cpp + its entry) is
// opened with RTLD_DEEPBIND, which makes it and the Debian oneDNN it loads resolve their own symbols first.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ops/onednn/gemm_onednn.hpp"

namespace bertx::ops::onednn {

inline constexpr int kTableVersion = 2;  // bumped with any change below; the loader refuses another

struct Table {
  int version;
  std::string (*library)();
  void (*sgemm)(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
                std::int64_t, float, float*, std::int64_t);
  void (*matmul)(bool, std::int64_t, std::int64_t, std::int64_t, const void*, const void*, const void*, Eltwise, void*);
  void (*batched_matmul)(bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, const void*,
                         const void*, void*, const Strides&, bool);
  std::shared_ptr<const Local> (*local_matmul)(bool, std::int64_t, std::int64_t, std::int64_t, bool, bool);
  std::size_t (*scratch_bytes)(const Local&);
  void (*run)(const Local&, const void*, const void*, void*, void*);
  std::int64_t (*reference_kernels)();
  std::shared_ptr<const Packed> (*pack)(bool, std::int64_t, std::int64_t, const void*, bool);
  void (*matmul_packed)(const Packed&, std::int64_t, const void*, const void*, Eltwise, void*);
  std::int64_t (*packed_n)(const Packed&);
  std::int64_t (*packed_k)(const Packed&);
  bool (*packed_bf16)(const Packed&);
  void (*gemm_u8s8s32)(std::int64_t, std::int64_t, std::int64_t, const std::uint8_t*, std::int64_t, std::uint8_t,
                       const std::int8_t*, std::int64_t, std::int32_t*, std::int64_t);
  std::string (*cpu_isa)();
  bool (*int8_exact_products)();
  bool (*bf16_matmul)();
};

}  // namespace bertx::ops::onednn

// The one symbol libbertx_onednn.so exports.
extern "C" const bertx::ops::onednn::Table* bertx_onednn_table();
