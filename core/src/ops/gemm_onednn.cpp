// gemm_onednn.cpp - oneDNN's dnnl_sgemm behind gemm_onednn.hpp (BERTX_HAVE_ONEDNN), or nothing without it.
#include "ops/gemm_onednn.hpp"

#include <string>

#include "bertx/error.hpp"

#if BERTX_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace bertx::ops::onednn {

#if BERTX_HAVE_ONEDNN

bool available() { return true; }

std::string library() {
  const dnnl_version_t* v = dnnl_version();
  const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential" : "threadpool/TBB";
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (dnnl_sgemm, " +
         runtime + ")";
}

void sgemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda,
           const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  if (status != dnnl_success)
    throw Error("oneDNN dnnl_sgemm failed with status " + std::to_string(static_cast<int>(status)) + " (M " + std::to_string(M) +
                ", N " + std::to_string(N) + ", K " + std::to_string(K) + ")");
}

#else

bool available() { return false; }
std::string library() { return ""; }
void sgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*, std::int64_t, float, float*,
           std::int64_t) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): ops::linear takes LibTorch's GEMM");
}

#endif

}  // namespace bertx::ops::onednn
