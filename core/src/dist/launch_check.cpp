// launch_check.cpp - `bertx launch-check`: join the job described by the launcher's environment, then
// check the collectives bertx training relies on (all-reduce, broadcast + checksum, agreement) and
// time a one-value all-reduce (latency) and a large one (bandwidth). Rank 0 prints the summary; any failure
// is a one-line error naming the rank.
#include "dist/launch_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include "bertx/error.hpp"
#include "dist/data_parallel.hpp"

namespace bertx {

int run_launch_check(const LaunchCheckOptions& o) {
  const Rendezvous rv = rendezvous_from_env();
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
    throw Error("--device " + o.device + ": expected auto, cpu or cuda");
  if (o.size_mb <= 0) throw Error(fmt::format("--size-mb {}: expected > 0", o.size_mb));
  const bool cuda = o.device == "cuda" || (o.device == "auto" && torch::cuda::is_available());
  if (cuda && !torch::cuda::is_available()) throw Error("--device cuda: no CUDA device is available to this LibTorch");
  const at::Device device = DataParallel::device_for(rv, cuda ? at::Device(at::kCUDA) : at::Device(at::kCPU));

  auto dp = DataParallel::create(rv, o.backend, device, 25, o.timeout_s);
  std::printf("rank %d/%d joined from %s (local rank %d/%d, %s, device %s)\n", rv.rank, rv.world_size,
              dp->hosts()[rv.rank].c_str(), rv.local_rank, rv.local_world_size, rv.launcher.c_str(),
              device.str().c_str());
  std::fflush(stdout);
  if (rv.rank == o.fail_rank) {
    std::fprintf(stderr, "bertx: error: rank %d: failing on purpose (--fail-rank %d)\n", rv.rank, o.fail_rank);
    std::fflush(nullptr);
    std::_Exit(3);  // at once, like a crash: no orderly leave of the process group
  }

  // 1. all-reduce: the sum of rank + 1 over ranks is w (w + 1) / 2.
  const double w = rv.world_size;
  const double sum = dp->all_average(static_cast<double>(rv.rank + 1)) * w;
  if (std::abs(sum - w * (w + 1) / 2) > 1e-9)
    throw Error(fmt::format("rank {}: all-reduce returned {} instead of {}", rv.rank, sum, w * (w + 1) / 2));

  // 2. broadcast: different random tensors per rank become rank 0's, checked by checksum inside.
  at::manual_seed(1000 + static_cast<std::uint64_t>(rv.rank));
  std::vector<at::Tensor> params{at::randn({257, 33}, at::TensorOptions().device(device)),  // (257, 33)
                                 at::randn({1000}, at::TensorOptions().device(device))};    // (1000,)
  dp->broadcast_parameters(params, {"check.a", "check.b"});

  // 3. agreement: one rank voting false makes all_true false everywhere.
  if (dp->all_true(true) != true || dp->all_true(rv.rank != rv.world_size - 1) != false)
    throw Error(fmt::format("rank {}: all_true disagrees with the votes", rv.rank));

  // 4. latency: the median of 20 one-value all-reduces (the agreement collectives every step runs).
  std::vector<double> round_trips;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    dp->all_true(true);
    round_trips.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(round_trips.begin(), round_trips.end());
  const double latency = round_trips[round_trips.size() / 2];

  // 5. bandwidth: averaged gradients of one size_mb "parameter" (the path training uses).
  const auto numel = static_cast<std::int64_t>(o.size_mb * 1048576.0 / 4.0);
  at::Tensor big = at::zeros({numel}, at::TensorOptions().device(device)).set_requires_grad(true);  // (numel,) fp32
  dp->attach({big}, {"check.bandwidth"});
  big.mutable_grad() = at::full({numel}, static_cast<float>(rv.rank + 1), big.options());
  dp->finish_gradient_sync();  // warm-up
  const int iterations = 5;
  dp->barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) dp->finish_gradient_sync();
  if (device.is_cuda()) torch::cuda::synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;
  // Averaging a constant keeps it: (w + 1) / 2 after every round.
  const double expect = (w + 1) / 2;
  if (std::abs(big.grad()[0].item<double>() - expect) > 1e-4 ||
      std::abs(big.grad()[numel - 1].item<double>() - expect) > 1e-4)
    throw Error(
        fmt::format("rank {}: averaged gradient {} instead of {}", rv.rank, big.grad()[0].item<double>(), expect));
  dp->barrier();

  if (rv.rank == 0) {
    std::map<std::string, std::vector<int>> by_host;
    for (int r = 0; r < rv.world_size; ++r) by_host[dp->hosts()[r]].push_back(r);
    std::string hosts;
    for (const auto& [h, ranks] : by_host)
      hosts += fmt::format("{}{} ({} rank(s))", hosts.empty() ? "" : ", ", h, ranks.size());
    const double bytes = static_cast<double>(numel) * 4.0;
    std::printf("launch-check: %d rank(s) on %zu host(s): %s; backend %s, device %s\n", rv.world_size, by_host.size(),
                hosts.c_str(), dp->backend().c_str(), device.type() == at::kCUDA ? "cuda" : "cpu");
    std::printf("launch-check: all-reduce sum %.0f (expected %.0f), broadcast checksums equal, agreement ok\n", sum,
                w * (w + 1) / 2);
    std::printf("launch-check: latency (one-value all-reduce, median of %zu): %.3f ms\n", round_trips.size(),
                latency * 1e3);
    std::printf("launch-check: gradient all-reduce of %.1f MiB: %.2f ms, bus bandwidth %.2f GB/s\n", bytes / 1048576.0,
                seconds * 1e3, rv.world_size > 1 ? bytes * 2.0 * (w - 1) / w / seconds / 1e9 : 0.0);
    std::printf("launch-check: OK\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace bertx
