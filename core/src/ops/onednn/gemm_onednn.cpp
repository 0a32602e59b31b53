// gemm_onednn.cpp - oneDNN's dnnl_sgemm behind gemm_onednn.hpp (BERTX_HAVE_ONEDNN), or nothing without it.
#include "ops/onednn/gemm_onednn.hpp"

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <atomic>

#include <spdlog/spdlog.h>

#include "bertx/error.hpp"

#if BERTX_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace bertx::ops::onednn {

#if BERTX_HAVE_ONEDNN

bool available() { return true; }

std::string library() {
  const dnnl_version_t* v = dnnl_version();
  const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                        : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                             : "threadpool/TBB";
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " (dnnl_sgemm, " + runtime + ")";
}

void sgemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda,
           const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  if (status != dnnl_success)
    throw Error("oneDNN dnnl_sgemm failed with status " + std::to_string(static_cast<int>(status)) + " (M " +
                std::to_string(M) + ", N " + std::to_string(N) + ", K " + std::to_string(K) + ")");
}

namespace {

using Key = std::tuple<bool, std::int64_t, std::int64_t, std::int64_t, bool, Eltwise,
                       bool>;  // bf16, M, N, K, bias, act, packed

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Row-major x (M, K) / y (M, N) / bias (1, N), and w (N, K) row-major = (K, N) in layout "ba".
dnnl::memory::data_type dtype(bool bf16) { return bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32; }
dnnl::memory::desc plain(std::int64_t rows, std::int64_t cols, bool bf16, bool transposed = false) {
  return dnnl::memory::desc({rows, cols}, dtype(bf16),
                            transposed ? dnnl::memory::format_tag::ba : dnnl::memory::format_tag::ab);
}

std::atomic<std::int64_t> reference_count{0};

// The primitive for pd, after a look at the kernel oneDNN chose: its reference kernel ("ref:...") runs ~100x
// slower than the JIT ones and oneDNN picks it silently (2.6 does for zero batch strides), so a warning names it.
dnnl::matmul checked(const dnnl::matmul::primitive_desc& pd, std::int64_t M, std::int64_t N, std::int64_t K,
                     bool bf16) {
  const std::string impl = pd.impl_info_str();
  if (impl.rfind("ref", 0) == 0) {
    ++reference_count;
    spdlog::warn(
        "oneDNN runs a {} matmul (M {}, N {}, K {}) on its reference kernel '{}', ~100x slower than its JIT kernels",
        bf16 ? "bf16" : "float32", M, N, K, impl);
  }
  return dnnl::matmul(pd);
}

// w_md: the weights' layout (plain "ba", or a packed one).
dnnl::matmul make_matmul(const Key& key, const dnnl::memory::desc& w_md) {
  using dnnl::memory;
  const auto [bf16, M, N, K, bias, act, packed] = key;
  const memory::data_type dt = dtype(bf16);
  const memory::desc x_md({M, K}, dt, memory::format_tag::ab),
      b_md = bias ? memory::desc({1, N}, dt, memory::format_tag::ab) : memory::desc(),
      y_md({M, N}, dt, memory::format_tag::ab);
  dnnl::primitive_attr attr;
  if (act != Eltwise::none) {
    const dnnl::algorithm alg = act == Eltwise::gelu_erf    ? dnnl::algorithm::eltwise_gelu_erf
                                : act == Eltwise::gelu_tanh ? dnnl::algorithm::eltwise_gelu_tanh
                                                            : dnnl::algorithm::eltwise_relu;
    dnnl::post_ops post;
    post.append_eltwise(1.0f, alg, 0.0f, 0.0f);
    attr.set_post_ops(post);
  }
  return checked(dnnl::matmul::primitive_desc(dnnl::matmul::desc(x_md, w_md, b_md, y_md), attr, cpu_engine()), M, N, K,
                 bf16);
}

// The primitive for key, built by make() on first use; ~1 KB each, cleared when a long run of distinct shapes
// (packed batches differ in M) fills it. Throws dnnl::error when oneDNN has no kernel for it.
template <typename K, typename Make>
auto cached(const K& key, Make&& make) {
  static std::mutex mutex;
  static std::map<K, decltype(make())> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= 512) cache.clear();
    it = cache.emplace(key, make()).first;
  }
  return it->second;
}

dnnl::matmul primitive(const Key& key, const dnnl::memory::desc& w_md) {
  return cached(key, [&] { return make_matmul(key, w_md); });
}

void run(const dnnl::matmul& prim, const Key& key, const void* x, const dnnl::memory& w, const void* bias, void* y) {
  const auto [bf16, M, N, K, with_bias, act, packed] = key;
  const dnnl::engine& engine = cpu_engine();
  dnnl::stream stream(engine);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(plain(M, K, bf16), engine, const_cast<void*>(x))},
      {DNNL_ARG_WEIGHTS, w},
      {DNNL_ARG_DST, dnnl::memory(plain(M, N, bf16), engine, y)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plain(1, N, bf16), engine, const_cast<void*>(bias)));
  prim.execute(stream, args);
  stream.wait();
}

[[noreturn]] void fail(const char* what, std::int64_t M, std::int64_t N, std::int64_t K, bool bf16,
                       const dnnl::error& e) {
  throw Error(std::string("oneDNN ") + what + " failed (M " + std::to_string(M) + ", N " + std::to_string(N) + ", K " +
              std::to_string(K) + (bf16 ? ", bf16" : ", float32") + "): " + e.what());
}

}  // namespace

void matmul(bool bf16, std::int64_t M, std::int64_t N, std::int64_t K, const void* x, const void* w, const void* bias,
            Eltwise act, void* y) {
  const Key key{bf16, M, N, K, bias != nullptr, act, false};
  try {
    const dnnl::memory::desc w_md = plain(K, N, bf16, /*transposed=*/true);
    run(primitive(key, w_md), key, x, dnnl::memory(w_md, cpu_engine(), const_cast<void*>(w)), bias, y);
  } catch (const dnnl::error& e) {
    fail("matmul", M, N, K, bf16, e);
  }
}

void batched_matmul(bool bf16, std::int64_t b0, std::int64_t b1, std::int64_t M, std::int64_t N, std::int64_t K,
                    const void* A, const void* B, void* C, const Strides& st, bool f32_out) {
  using dnnl::memory;
  const memory::desc a_md({b0, b1, M, K}, dtype(bf16), {st.a[0], st.a[1], st.a[2], st.a[3]}),
      b_md({b0, b1, K, N}, dtype(bf16), {st.b[0], st.b[1], st.b[2], st.b[3]}),
      c_md({b0, b1, M, N}, dtype(bf16 && !f32_out), {st.c[0], st.c[1], st.c[2], st.c[3]});
  const std::vector<std::int64_t> key{bf16,    f32_out, b0,      b1,      M,       N,       K,
                                      st.a[0], st.a[1], st.a[2], st.a[3], st.b[0], st.b[1], st.b[2],
                                      st.b[3], st.c[0], st.c[1], st.c[2], st.c[3]};
  try {
    const dnnl::matmul prim = cached(key, [&] {
      return checked(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), cpu_engine()), M, N, K, bf16);
    });
    const dnnl::engine& engine = cpu_engine();
    dnnl::stream stream(engine);
    prim.execute(stream, {{DNNL_ARG_SRC, memory(a_md, engine, const_cast<void*>(A))},
                          {DNNL_ARG_WEIGHTS, memory(b_md, engine, const_cast<void*>(B))},
                          {DNNL_ARG_DST, memory(c_md, engine, C)}});
    stream.wait();
  } catch (const dnnl::error& e) {
    fail("batched matmul", M, N, K, bf16, e);
  }
}

std::int64_t reference_kernels() { return reference_count.load(); }

struct Local {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, c;
  std::size_t scratch;  // bytes
  std::int64_t M, N, K;
  bool bf16;
};

std::shared_ptr<const Local> local_matmul(bool bf16, std::int64_t M, std::int64_t N, std::int64_t K, bool b_transposed,
                                          bool c_f32) {
  using Key = std::tuple<bool, std::int64_t, std::int64_t, std::int64_t, bool, bool>;
  try {
    return cached(Key{bf16, M, N, K, b_transposed, c_f32}, [&] {
      const dnnl::memory::desc a = plain(M, K, bf16), b = plain(K, N, bf16, b_transposed),
                               c = plain(M, N, bf16 && !c_f32);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
      return std::make_shared<const Local>(
          Local{checked(pd, M, N, K, bf16), a, b, c, pd.scratchpad_desc().get_size(), M, N, K, bf16});
    });
  } catch (const dnnl::error& e) {
    fail("local matmul", M, N, K, bf16, e);
  }
}

std::size_t scratch_bytes(const Local& mm) { return mm.scratch; }

void run(const Local& mm, const void* A, const void* B, void* C, void* scratch) {
  try {
    const dnnl::engine& engine = cpu_engine();
    dnnl::stream stream(engine);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(mm.a, engine, const_cast<void*>(A))},
                                               {DNNL_ARG_WEIGHTS, dnnl::memory(mm.b, engine, const_cast<void*>(B))},
                                               {DNNL_ARG_DST, dnnl::memory(mm.c, engine, C)}};
    if (mm.scratch > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(dnnl::memory::desc({static_cast<std::int64_t>(mm.scratch)}, dnnl::memory::data_type::u8,
                                                   dnnl::memory::format_tag::a),
                                engine, scratch));
    mm.prim.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail("local matmul", mm.M, mm.N, mm.K, mm.bf16, e);
  }
}

struct Packed {
  dnnl::memory weights;  // (K, N) in oneDNN's blocked layout, its own buffer
  std::int64_t N, K;
  bool bf16;
};

std::shared_ptr<const Packed> pack(bool bf16, std::int64_t N, std::int64_t K, const void* w, bool w_bf16) {
  try {
    const dnnl::engine& engine = cpu_engine();
    // The layout oneDNN picks for these weights (a nominal M: the choice depends on N, K and the dtype).
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(plain(1024, K, bf16), dnnl::memory::desc({K, N}, dtype(bf16), dnnl::memory::format_tag::any),
                           plain(1024, N, bf16)),
        engine);
    auto packed = std::make_shared<Packed>(Packed{dnnl::memory(pd.weights_desc(), engine), N, K, bf16});
    dnnl::memory src(plain(K, N, w_bf16, /*transposed=*/true), engine, const_cast<void*>(w));
    dnnl::stream stream(engine);
    dnnl::reorder(src, packed->weights)
        .execute(stream, src, packed->weights);  // dtype conversion and layout in one pass
    stream.wait();
    return packed;
  } catch (const dnnl::error& e) {
    fail("weight packing", 0, N, K, bf16, e);
  }
}

void matmul(const Packed& w, std::int64_t M, const void* x, const void* bias, Eltwise act, void* y) {
  const Key key{w.bf16, M, w.N, w.K, bias != nullptr, act, true};
  dnnl::matmul prim;
  try {
    prim = primitive(key, w.weights.get_desc());
  } catch (const dnnl::error&) {  // no kernel takes the packed layout at this M: unpack into a row-major copy
    std::unique_ptr<char[]> buffer(new char[plain(w.K, w.N, w.bf16, true).get_size()]);
    try {
      dnnl::memory row_major(plain(w.K, w.N, w.bf16, true), cpu_engine(), buffer.get());
      dnnl::stream stream(cpu_engine());
      dnnl::reorder(w.weights, row_major).execute(stream, const_cast<dnnl::memory&>(w.weights), row_major);
      stream.wait();
    } catch (const dnnl::error& e) {
      fail("weight unpacking", M, w.N, w.K, w.bf16, e);
    }
    matmul(w.bf16, M, w.N, w.K, x, buffer.get(), bias, act, y);
    return;
  }
  try {
    run(prim, key, x, w.weights, bias, y);
  } catch (const dnnl::error& e) {
    fail("matmul", M, w.N, w.K, w.bf16, e);
  }
}

std::int64_t packed_n(const Packed& w) { return w.N; }
std::int64_t packed_k(const Packed& w) { return w.K; }
bool packed_bf16(const Packed& w) { return w.bf16; }

#else

bool available() { return false; }
std::string library() { return ""; }
void sgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*, std::int64_t,
           float, float*, std::int64_t) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): ops::linear takes LibTorch's GEMM");
}
void matmul(bool, std::int64_t, std::int64_t, std::int64_t, const void*, const void*, const void*, Eltwise, void*) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): ops::linear takes LibTorch's GEMM");
}
void batched_matmul(bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, const void*,
                    const void*, void*, const Strides&, bool) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): no batched matmul");
}
std::int64_t reference_kernels() { return 0; }
struct Local {};
std::shared_ptr<const Local> local_matmul(bool, std::int64_t, std::int64_t, std::int64_t, bool, bool) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): no local matmul");
}
std::size_t scratch_bytes(const Local&) { return 0; }
void run(const Local&, const void*, const void*, void*, void*) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): no local matmul");
}
struct Packed {};
std::shared_ptr<const Packed> pack(bool, std::int64_t, std::int64_t, const void*, bool) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): no packed weights");
}
void matmul(const Packed&, std::int64_t, const void*, const void*, Eltwise, void*) {
  throw Error("bertx was built without oneDNN (libdnnl-dev): no packed weights");
}
std::int64_t packed_n(const Packed&) { return 0; }
std::int64_t packed_k(const Packed&) { return 0; }
bool packed_bf16(const Packed&) { return false; }

#endif

}  // namespace bertx::ops::onednn
