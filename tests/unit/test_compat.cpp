// test_compat.cpp - the LibTorch version shims: attention against a hand-written reference, autocast
// switching matmuls to bf16 on the CPU and back; how the loader put LibTorch and bertx together.
#include "doctest_torch.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "bertx/compat.hpp"

TEST_CASE("compat::attention equals softmax(q k^T / sqrt(d) + mask) v computed by hand") {
  at::manual_seed(0);
  const int64_t B = 2, H = 3, S = 5, D = 4;
  at::Tensor q = at::randn({B, H, S, D}), k = at::randn({B, H, S, D}), v = at::randn({B, H, S, D});
  // Second sequence has its last two keys padded.
  at::Tensor keep = at::ones({B, S});
  keep[1][3] = 0;
  keep[1][4] = 0;
  at::Tensor mask = ((1 - keep) * -10000.0f).view({B, 1, 1, S});
  at::Tensor out = bertx::compat::attention(q, k, v, mask, 0.0);
  REQUIRE(out.sizes() == at::IntArrayRef({B, H, S, D}));

  auto qa = q.accessor<float, 4>(), ka = k.accessor<float, 4>(), va = v.accessor<float, 4>();
  auto ma = mask.accessor<float, 4>();
  auto oa = out.accessor<float, 4>();
  double max_err = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        double scores[S], mx = -1e30, sum = 0;
        for (int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += qa[b][h][i][d] * ka[b][h][j][d];
          scores[j] = s / std::sqrt(double(D)) + ma[b][0][0][j];
          mx = std::max(mx, scores[j]);
        }
        for (int64_t j = 0; j < S; ++j) sum += (scores[j] = std::exp(scores[j] - mx));
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < S; ++j) o += scores[j] / sum * va[b][h][j][d];
          max_err = std::max(max_err, std::abs(o - oa[b][h][i][d]));
        }
      }
  MESSAGE("fused path: " << bertx::compat::kFusedAttention << ", max abs error " << max_err);
  CHECK(max_err < 1e-5);
}

TEST_CASE("compat autocast turns CPU matmuls into bf16 inside the scope only") {
  at::Tensor a = at::randn({8, 8}), b = at::randn({8, 8});
  {
    bertx::compat::AutocastScope scope(at::kCPU, at::kBFloat16);
    CHECK((at::mm(a, b).scalar_type() == at::kBFloat16));
  }
  CHECK((at::mm(a, b).scalar_type() == at::kFloat));
}

// The link-line guards of cmake/BertxTorch.cmake, as the loader applied them to this test (linked as bertx is):
// one OpenMP runtime mapped (LibTorch's and bertx's parallel regions share one thread pool) and the C++
// library's own functions bound to libstdc++, not to the copies LibTorch 2.x wheels export.
TEST_CASE("the process maps one OpenMP runtime and binds libstdc++'s functions to libstdc++") {
  at::parallel_for(0, 64, 1, [](int64_t, int64_t) {});  // LibTorch's pool up: its runtime is mapped by now
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> runtimes;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string file = line.substr(slash), base = file.substr(file.rfind('/') + 1);
    if (base.rfind("libgomp", 0) == 0 || base.rfind("libiomp", 0) == 0 || base.rfind("libomp", 0) == 0)
      runtimes.insert(std::filesystem::canonical(file).string());
  }
  INFO("OpenMP runtimes: " << doctest::toString(std::vector<std::string>(runtimes.begin(), runtimes.end())));
  CHECK(runtimes.size() == 1);

  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&);
  const auto remove_all = static_cast<RemoveAll>(&std::filesystem::remove_all);
  Dl_info info{};
  REQUIRE(dladdr(reinterpret_cast<const void*>(remove_all), &info) != 0);
  INFO("std::filesystem::remove_all bound to " << info.dli_fname);
  CHECK(std::string(info.dli_fname).find("libstdc++") != std::string::npos);
}
