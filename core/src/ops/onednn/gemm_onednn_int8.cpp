// gemm_onednn_int8.cpp - oneDNN's integer GEMM (dnnl_gemm_u8s8s32), the ISA it runs on and whether it has bf16
// matmuls there, for the int8 linears
// of ops::linear (gemm_onednn.hpp); stubs that throw without oneDNN (BERTX_HAVE_ONEDNN).
// Why the BLAS-like call and not a matmul primitive with packed weights: oneDNN 2.6 has brgemm int8 matmuls only
// from AVX512-VNNI up; on AVX2 its matmul primitive calls this same GEMM, so one code path serves every x86 CPU.
#include <string>

#include "bertx/error.hpp"
#include "ops/onednn/gemm_onednn.hpp"

#if BERTX_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace bertx::ops::onednn {

#if BERTX_HAVE_ONEDNN

void gemm_u8s8s32(std::int64_t M, std::int64_t N, std::int64_t K, const std::uint8_t* A, std::int64_t lda,
                  std::uint8_t a_zero, const std::int8_t* B, std::int64_t ldb, std::int32_t* C, std::int64_t ldc) {
  const std::int32_t no_offset = 0;
  // Row-major C = (A - a_zero) op(B) with op(B) = B^T: B (N, K) is the (K, N) matrix transposed.
  const dnnl_status_t status =
      dnnl_gemm_u8s8s32('N', 'T', 'F', M, N, K, 1.0f, A, lda, a_zero, B, ldb, 0, 0.0f, C, ldc, &no_offset);
  if (status != dnnl_success)
    throw Error("oneDNN dnnl_gemm_u8s8s32 failed with status " + std::to_string(static_cast<int>(status)) + " (M " +
                std::to_string(M) + ", N " + std::to_string(N) + ", K " + std::to_string(K) + ")");
}

std::string cpu_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

bool int8_exact_products() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return isa == dnnl_cpu_isa_avx2_vnni || isa == dnnl_cpu_isa_avx512_core_vnni ||
         isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

bool bf16_matmul() {
  static const bool ok = [] {
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const auto bf16 = dnnl::memory::data_type::bf16;
    try {
      const dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(dnnl::memory::desc({64, 64}, bf16, dnnl::memory::format_tag::ab),
                             dnnl::memory::desc({64, 64}, bf16, dnnl::memory::format_tag::any),
                             dnnl::memory::desc({64, 64}, bf16, dnnl::memory::format_tag::ab)),
          engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

#else

bool bf16_matmul() { return false; }
void gemm_u8s8s32(std::int64_t, std::int64_t, std::int64_t, const std::uint8_t*, std::int64_t, std::uint8_t,
                  const std::int8_t*, std::int64_t, std::int32_t*, std::int64_t) {
  throw Error("int8 GEMM: bertx was built without oneDNN (libdnnl-dev)");
}
std::string cpu_isa() { return ""; }
bool int8_exact_products() { return false; }

#endif

}  // namespace bertx::ops::onednn
