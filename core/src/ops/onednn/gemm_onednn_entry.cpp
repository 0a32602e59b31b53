// gemm_onednn_entry.cpp - libbertx_onednn.so's entry: gemm_onednn.cpp's functions as the table of
// gemm_onednn_table.hpp (everything else in the library is hidden).
#include "ops/onednn/gemm_onednn_table.hpp"

namespace o = bertx::ops::onednn;

extern "C" __attribute__((visibility("default"))) const o::Table* bertx_onednn_table() {
  static const o::Table table{
      o::kTableVersion,
      &o::library,
      &o::sgemm,
      static_cast<void (*)(bool, std::int64_t, std::int64_t, std::int64_t, const void*, const void*, const void*,
                           o::Eltwise, void*)>(&o::matmul),
      &o::batched_matmul,
      &o::local_matmul,
      &o::scratch_bytes,
      &o::run,
      &o::reference_kernels,
      &o::pack,
      static_cast<void (*)(const o::Packed&, std::int64_t, const void*, const void*, o::Eltwise, void*)>(&o::matmul),
      &o::packed_n,
      &o::packed_k,
      &o::packed_bf16,
      &o::gemm_u8s8s32,
      &o::cpu_isa,
      &o::int8_exact_products,
      &o::bf16_matmul,
  };
  return &table;
}
