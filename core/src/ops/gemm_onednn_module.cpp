// gemm_onednn_module.cpp - gemm_onednn.hpp in a build against the PyPI LibTorch: every call goes to
// libbertx_onednn.so (gemm_onednn.cpp + Debian's oneDNN), opened once beside libbertx_ops.so with RTLD_DEEPBIND
// (gemm_onednn_table.hpp says why). A library that is missing or fails to open leaves available() false, with
// one warning naming it and the reason: the linears then take LibTorch's GEMM, as in a build without oneDNN.
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "ops/onednn/gemm_onednn_table.hpp"

namespace bertx::ops::onednn {

namespace {

const Table* open_table() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<const void*>(&open_table), &self) == 0 || !self.dli_fname) return nullptr;
  const std::string path = (std::filesystem::path(self.dli_fname).parent_path() / BERTX_ONEDNN_MODULE).string();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);  // kept open for the process
  if (!lib) {
    spdlog::warn("oneDNN GEMMs off, LibTorch's used instead: cannot open {}: {}", path, dlerror());
    return nullptr;
  }
  using Entry = const Table* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(lib, "bertx_onednn_table"));
  const Table* t = entry ? entry() : nullptr;
  if (!t || t->version != kTableVersion) {
    spdlog::warn("oneDNN GEMMs off, LibTorch's used instead: {} has no table of version {}", path, kTableVersion);
    return nullptr;
  }
  return t;
}

const Table* table_or_null() {
  static const Table* const t = open_table();
  return t;
}

const Table& table() {
  const Table* t = table_or_null();
  if (!t)
    throw Error("oneDNN GEMMs are unavailable in this process (" BERTX_ONEDNN_MODULE
                " did not load): callers check available()");
  return *t;
}

}  // namespace

bool available() { return table_or_null() != nullptr; }
std::string library() {
  return available() ? table().library() + " (Debian's, loaded RTLD_DEEPBIND beside LibTorch's)" : "";
}

void sgemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda,
           const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  table().sgemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
void matmul(bool bf16, std::int64_t M, std::int64_t N, std::int64_t K, const void* x, const void* w, const void* bias,
            Eltwise act, void* y) {
  table().matmul(bf16, M, N, K, x, w, bias, act, y);
}
void batched_matmul(bool bf16, std::int64_t b0, std::int64_t b1, std::int64_t M, std::int64_t N, std::int64_t K,
                    const void* A, const void* B, void* C, const Strides& strides, bool f32_out) {
  table().batched_matmul(bf16, b0, b1, M, N, K, A, B, C, strides, f32_out);
}
std::shared_ptr<const Local> local_matmul(bool bf16, std::int64_t M, std::int64_t N, std::int64_t K, bool b_transposed,
                                          bool c_f32) {
  return table().local_matmul(bf16, M, N, K, b_transposed, c_f32);
}
std::size_t scratch_bytes(const Local& mm) { return table().scratch_bytes(mm); }
void run(const Local& mm, const void* A, const void* B, void* C, void* scratch) { table().run(mm, A, B, C, scratch); }
std::int64_t reference_kernels() { return available() ? table().reference_kernels() : 0; }
std::shared_ptr<const Packed> pack(bool bf16, std::int64_t N, std::int64_t K, const void* w, bool w_bf16) {
  return table().pack(bf16, N, K, w, w_bf16);
}
void matmul(const Packed& w, std::int64_t M, const void* x, const void* bias, Eltwise act, void* y) {
  table().matmul_packed(w, M, x, bias, act, y);
}
std::int64_t packed_n(const Packed& w) { return table().packed_n(w); }
std::int64_t packed_k(const Packed& w) { return table().packed_k(w); }
bool packed_bf16(const Packed& w) { return table().packed_bf16(w); }
void gemm_u8s8s32(std::int64_t M, std::int64_t N, std::int64_t K, const std::uint8_t* A, std::int64_t lda,
                  std::uint8_t a_zero, const std::int8_t* B, std::int64_t ldb, std::int32_t* C, std::int64_t ldc) {
  table().gemm_u8s8s32(M, N, K, A, lda, a_zero, B, ldb, C, ldc);
}
std::string cpu_isa() { return available() ? table().cpu_isa() : ""; }
bool int8_exact_products() { return available() && table().int8_exact_products(); }
bool bf16_matmul() { return available() && table().bf16_matmul(); }

}  // namespace bertx::ops::onednn
