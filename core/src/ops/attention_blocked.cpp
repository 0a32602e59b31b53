// attention_blocked.cpp - multi-head attention for inference on the CPU without any (B, h, S, S) tensor: one task
// per (sequence, head), at::parallel_for over them; each copies its head's q, k, v into dense (S, d) tiles and
// then, per block of query rows,
//   x = q k^T                          (rows, S) float32, stays in the core's L2 (rows <= 256)
//   e = exp(x * scale + mask - max)    bf16, rounded once; sum in float32        (kernels_cpu: softmax_row_exp)
//   context = (e v) / sum              (rows, d) float32, divided and rounded into (B, S, H) in place
// The products are oneDNN matmuls on dense tiles (its brgemm kernels; the strided heads of attention_strided.cpp get
// gemm:jit, ~1.6x slower), each run by its own thread with a scratchpad of its own (gemm_onednn.hpp: Local).
// Why: in BERT-base SQuAD inference (S 384) the batched path wrote and re-read 28 MB of scores per layer and
// spent ~15 ms a layer in attention; this path keeps them in cache.
#include "ops/attention_blocked.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <ATen/Parallel.h>

#include "ops/onednn/gemm_onednn.hpp"
#include "ops/cpu/kernels_cpu.hpp"
#include "ops/ops_common.hpp"

namespace bertx::ops::detail {

namespace {

constexpr std::int64_t kMaxBlockRows = 256;  // (256, 512) float32 scores = 512 KB: half a Zen 4 / Sapphire Rapids L2

// The query-row blocks of S rows: equal sizes of at most kMaxBlockRows, the last one possibly shorter.
struct Blocks {
  std::int64_t rows, count, last;
  explicit Blocks(std::int64_t S) {
    count = (S + kMaxBlockRows - 1) / kMaxBlockRows;
    rows = (S + count - 1) / count;
    last = S - (count - 1) * rows;
  }
};

// The four products a head needs: scores and context, for a full block and for the last one.
struct Products {
  std::shared_ptr<const onednn::Local> scores, context, scores_last, context_last;
  std::size_t scratch = 0;
  Products(bool bf16, const Blocks& blk, std::int64_t S, std::int64_t d) {
    scores = onednn::local_matmul(bf16, blk.rows, S, d, /*b_transposed=*/true, /*c_f32=*/true);  // q k^T
    context = onednn::local_matmul(bf16, blk.rows, d, S, false, true);                           // e v
    scores_last = blk.last == blk.rows ? scores : onednn::local_matmul(bf16, blk.last, S, d, true, true);
    context_last = blk.last == blk.rows ? context : onednn::local_matmul(bf16, blk.last, d, S, false, true);
    for (const auto* p : {&scores, &context, &scores_last, &context_last})
      scratch = std::max(scratch, onednn::scratch_bytes(**p));
  }
};

// One thread's buffers, reused over its tasks.
template <typename T>
struct Tiles {
  std::vector<T> q, k, v;             // (S, d) each
  std::vector<std::uint16_t> e;       // (rows, S) bf16 probabilities (empty for float32: x serves)
  std::vector<float> x, out, sums;    // (rows, S) scores, then their exp; (rows, d) e v; (rows) sums of e
  std::vector<unsigned char> buffer;  // the oneDNN scratchpad, at `scratch` aligned to 64 bytes (a cache line)
  void* scratch;
  Tiles(std::int64_t S, std::int64_t d, std::int64_t rows, std::size_t scratch_bytes)
      : q(S * d),
        k(S * d),
        v(S * d),
        e(sizeof(T) == 2 ? rows * S : 0),
        x(rows * S),
        out(rows * d),
        sums(rows),
        buffer(scratch_bytes + 64) {
    std::size_t space = buffer.size();
    scratch = buffer.data();
    std::align(64, scratch_bytes, scratch, space);
  }
};

// (S, d) head `head` of sequence b of t (B, S, H), row stride t.stride(1), into a dense tile.
template <typename T>
void gather(const at::Tensor& t, std::int64_t b, std::int64_t head, std::int64_t d, T* tile) {
  const std::int64_t S = t.size(1), rs = t.stride(1);
  const T* src = ptr<const T>(t) + b * t.stride(0) + head * d;
  for (std::int64_t s = 0; s < S; ++s) std::memcpy(tile + s * d, src + s * rs, static_cast<std::size_t>(d) * sizeof(T));
}

template <typename T>
at::Tensor run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads,
               const at::Tensor& mask, double scale) {
  constexpr bool bf16 = sizeof(T) == 2;
  const std::int64_t B = q.size(0), S = q.size(1), H = q.size(2), d = H / heads;
  const Blocks blk(S);
  const Products mm(bf16, blk, S, d);
  const at::Tensor zeros = mask.defined() ? at::Tensor() : at::zeros({1, S}, q.options().dtype(at::kFloat));
  const at::Tensor& m = mask.defined() ? mask : zeros;
  const bool per_sequence = m.size(0) == B && B > 1;
  at::Tensor context = at::empty({B, S, H}, q.options());
  const auto sc = static_cast<float>(scale);
  at::parallel_for(0, B * heads, 1, [&](std::int64_t begin, std::int64_t end) {
    Tiles<T> t(S, d, blk.rows, mm.scratch);
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t b = task / heads, head = task % heads;
      gather(q, b, head, d, t.q.data());  // (S, d) each
      gather(k, b, head, d, t.k.data());
      gather(v, b, head, d, t.v.data());
      const float* mrow = ptr<const float>(m) + (per_sequence ? b * S : 0);  // (S)
      for (std::int64_t i = 0; i < blk.count; ++i) {
        const bool last = i + 1 == blk.count;
        const std::int64_t r0 = i * blk.rows, rows = last ? blk.last : blk.rows;
        onednn::run(last ? *mm.scores_last : *mm.scores, t.q.data() + r0 * d, t.k.data(), t.x.data(),
                    t.scratch);  // (rows, S)
        for (std::int64_t r = 0; r < rows; ++r)
          t.sums[r] = cpu::softmax_row_exp(t.x.data() + r * S, mrow, sc, S, bf16 ? t.e.data() + r * S : nullptr);
        const void* e = bf16 ? static_cast<const void*>(t.e.data()) : static_cast<const void*>(t.x.data());
        onednn::run(last ? *mm.context_last : *mm.context, e, t.v.data(), t.out.data(), t.scratch);  // (rows, d)
        T* dst = ptr<T>(context) + (b * S + r0) * H + head * d;
        for (std::int64_t r = 0; r < rows; ++r) cpu::scale_row(t.out.data() + r * d, 1.0f / t.sums[r], d, dst + r * H);
      }
    }
  });
  return context;
}

}  // namespace

at::Tensor attention_blocked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads,
                             const at::Tensor& mask, double scale) {
  return q.scalar_type() == at::kBFloat16 ? run<std::uint16_t>(q, k, v, heads, mask, scale)
                                          : run<float>(q, k, v, heads, mask, scale);
}

}  // namespace bertx::ops::detail
