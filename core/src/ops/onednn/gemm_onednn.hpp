// gemm_onednn.hpp - row-major float32 GEMM from oneDNN (dnnl_sgemm) for ops::linear's CPU path. No LibTorch.
// Why: Debian's LibTorch sends float32 GEMMs to the system BLAS, and a machine may pin OpenBLAS to older
// kernels (this one: OPENBLAS_CORETYPE=Haswell, AVX2); oneDNN - already loaded by LibTorch for its bf16
// matmuls - picks its own JIT kernels for the CPU it runs on (AVX-512 here: 1.5-4x OpenBLAS-Haswell at BERT-base
// shapes, docs/performance.md). Built only when CMake finds oneDNN (libdnnl-dev); otherwise available() is false.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace bertx::ops::onednn {

// True when bertx was built with oneDNN.
bool available();

// "oneDNN 2.6.3 (dnnl_sgemm, OpenMP)" or "" when not built with it.
std::string library();

// C (M, N) = op(A) op(B) + beta C, row-major; op(X) = X^T when trans_X. lda/ldb/ldc: row strides in elements.
// M, N, K >= 1. Runs on the calling thread's OpenMP thread count. Throws bertx::Error on a oneDNN failure.
void sgemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda,
           const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);

enum class Eltwise { none, gelu_erf, gelu_tanh, relu };

// Inference linear: y (M, N) = act(x (M, K) w^T + bias), x / w (N, K) / bias (N) / y row-major, all bfloat16
// (bf16) or all float32; bias may be null. One oneDNN matmul primitive with bias and activation fused (the
// activation on the float32 accumulator, before the output is rounded). Primitives are kept per (shape, dtype,
// bias, act) in a bounded process-wide cache (packed inference batches differ in M). M, N, K >= 1.
void matmul(bool bf16, std::int64_t M, std::int64_t N, std::int64_t K, const void* x, const void* w, const void* bias,
            Eltwise act, void* y);

// Batched over two leading dimensions (b0, b1): C = A B with A (b0, b1, M, K), B (b0, b1, K, N), C (b0, b1, M, N),
// all bf16 or all float32, each read or written through its own four strides (elements; the last dimension
// need not be the contiguous one): attention's heads are read in place from (B, S, H) layouts and written back
// to one. Primitives kept per (dims, strides, dtype) as for matmul().
struct Strides {
  std::int64_t a[4], b[4], c[4];
};
// f32_out: C is float32 while A and B are bf16 (accumulated in float32, never rounded to bf16).
void batched_matmul(bool bf16, std::int64_t b0, std::int64_t b1, std::int64_t M, std::int64_t N, std::int64_t K,
                    const void* A, const void* B, void* C, const Strides& strides, bool f32_out = false);

// A matmul for one thread of a parallel region, several running at once (blocked attention, one head per task):
// C (M, N) = A (M, K) B with A and C dense row-major, B (K, N) dense row-major or, b_transposed, given as its
// (N, K) row-major transpose. A, B bf16 (bf16) or float32; C float32 when c_f32, else A's dtype. Dense operands
// let oneDNN pick its brgemm kernels (strided heads get gemm:jit, ~1.6x slower). The caller owns the scratchpad
// (oneDNN's own is shared between threads): at least scratch_bytes() at `scratch`, aligned to 64 bytes. Inside an
// OpenMP parallel region oneDNN runs the product on the calling thread. Cached per shape as matmul(). M, N, K >= 1.
struct Local;
std::shared_ptr<const Local> local_matmul(bool bf16, std::int64_t M, std::int64_t N, std::int64_t K, bool b_transposed,
                                          bool c_f32);
std::size_t scratch_bytes(const Local& mm);
void run(const Local& mm, const void* A, const void* B, void* C, void* scratch);

// How many matmul primitives oneDNN resolved to its reference kernel so far in this process (each one also logs
// a warning): 0 is the expected value; more means a shape or stride oneDNN's JIT kernels refuse.
std::int64_t reference_kernels();

// A weight (N, K) converted to float32 / bf16 and reordered once into the blocked layout oneDNN's matmul picks for
// it (the layout depends on N, K and the dtype, not on M). Owns its buffer.
struct Packed;
// w (N, K) row-major, float32 or bf16 (w_bf16); packed to bf16 when bf16, else float32. N, K >= 1.
std::shared_ptr<const Packed> pack(bool bf16, std::int64_t N, std::int64_t K, const void* w, bool w_bf16);
// matmul() above with a packed weight: x, bias, y in the packed weight's dtype. Returns its N, K, dtype below.
void matmul(const Packed& w, std::int64_t M, const void* x, const void* bias, Eltwise act, void* y);
std::int64_t packed_n(const Packed& w);
std::int64_t packed_k(const Packed& w);
bool packed_bf16(const Packed& w);

// int8 GEMM (gemm_onednn_int8.cpp): C (M, N) int32 = (A - a_zero) B^T, A (M, K) uint8 row-major (lda), B (N, K)
// int8 row-major (ldb: a linear's weight as stored), C row-major (ldc). oneDNN's dnnl_gemm_u8s8s32 (its JIT kernels
// for the CPU: AMX-INT8 / AVX512-VNNI / AVX-VNNI / AVX2). Without VNNI or AMX the x86 u8 x s8 products pair into
// saturating 16-bit sums: callers keep A - a_zero within +-63 there (int8_levels()). M, N, K >= 1.
void gemm_u8s8s32(std::int64_t M, std::int64_t N, std::int64_t K, const std::uint8_t* A, std::int64_t lda,
                  std::uint8_t a_zero, const std::int8_t* B, std::int64_t ldb, std::int32_t* C, std::int64_t ldc);

// The instruction set oneDNN's kernels use on this CPU ("avx2", "avx512_core_vnni", "avx512_core_amx", ...), "" when
// not built with oneDNN.
std::string cpu_isa();
// True when that ISA multiplies u8 x s8 without a saturating 16-bit intermediate (VNNI or AMX).
bool int8_exact_products();
// True when oneDNN has bf16 matmuls on this CPU (2.6: AVX-512 and up; none on AVX2-only CPUs such as AMD EPYC Rome or
// Milan): callers take LibTorch's bf16 path (or pack float32) where it is false. Probed once per process.
bool bf16_matmul();

}  // namespace bertx::ops::onednn
