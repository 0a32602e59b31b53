// gemm_onednn.cpp - oneDNN's dnnl_sgemm behind gemm_onednn.hpp (BERTX_HAVE_ONEDNN), or nothing without it.
#include "ops/gemm_onednn.hpp"

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "bertx/error.hpp"

#if BERTX_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
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

namespace {

using Key = std::tuple<bool, std::int64_t, std::int64_t, std::int64_t, bool, Eltwise>;  // bf16, M, N, K, bias, act

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::matmul make_matmul(const Key& key) {
  using dnnl::memory;
  const auto [bf16, M, N, K, bias, act] = key;
  const memory::data_type dt = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::desc x_md({M, K}, dt, memory::format_tag::ab), w_md({K, N}, dt, memory::format_tag::ba),  // w (N, K) row-major
      b_md = bias ? memory::desc({1, N}, dt, memory::format_tag::ab) : memory::desc(), y_md({M, N}, dt, memory::format_tag::ab);
  dnnl::primitive_attr attr;
  if (act != Eltwise::none) {
    const dnnl::algorithm alg = act == Eltwise::gelu_erf    ? dnnl::algorithm::eltwise_gelu_erf
                                : act == Eltwise::gelu_tanh ? dnnl::algorithm::eltwise_gelu_tanh
                                                            : dnnl::algorithm::eltwise_relu;
    dnnl::post_ops post;
    post.append_eltwise(1.0f, alg, 0.0f, 0.0f);
    attr.set_post_ops(post);
  }
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(x_md, w_md, b_md, y_md), attr, cpu_engine()));
}

}  // namespace

void matmul(bool bf16, std::int64_t M, std::int64_t N, std::int64_t K, const void* x, const void* w, const void* bias, Eltwise act,
            void* y) {
  static std::mutex mutex;
  static std::map<Key, dnnl::matmul> cache;  // ~1 KB per primitive; cleared when a long run of distinct M fills it
  const Key key{bf16, M, N, K, bias != nullptr, act};
  dnnl::matmul prim;
  try {
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = cache.find(key);
      if (it == cache.end()) {
        if (cache.size() >= 512) cache.clear();
        it = cache.emplace(key, make_matmul(key)).first;
      }
      prim = it->second;
    }
    using dnnl::memory;
    const memory::data_type dt = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const dnnl::engine& engine = cpu_engine();
    dnnl::stream stream(engine);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory({{M, K}, dt, memory::format_tag::ab}, engine, const_cast<void*>(x))},
        {DNNL_ARG_WEIGHTS, memory({{K, N}, dt, memory::format_tag::ba}, engine, const_cast<void*>(w))},
        {DNNL_ARG_DST, memory({{M, N}, dt, memory::format_tag::ab}, engine, y)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory({{1, N}, dt, memory::format_tag::ab}, engine, const_cast<void*>(bias)));
    prim.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(std::string("oneDNN matmul failed (M ") + std::to_string(M) + ", N " + std::to_string(N) + ", K " + std::to_string(K) +
                (bf16 ? ", bf16" : ", float32") + "): " + e.what());
  }
}

#else

bool available() { return false; }
std::string library() { return ""; }
void sgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*, std::int64_t, float, float*,
           std::int64_t) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): ops::linear takes LibTorch's GEMM");
}
void matmul(bool, std::int64_t, std::int64_t, std::int64_t, const void*, const void*, const void*, Eltwise, void*) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): ops::linear takes LibTorch's GEMM");
}

#endif

}  // namespace bertx::ops::onednn
