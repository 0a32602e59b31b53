// dist_worker.cpp - one rank of the multi-process DataParallel tests (test_data_parallel.cpp starts two
// with RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT set, Gloo over 127.0.0.1). Each scenario
// checks its own results against references computed here in-process and exits 0 when they hold;
// a failed check prints "FAIL: ..." and exits 1.
//   dist_worker grads <bucket_mb>   broadcast, bucketed averaging, accumulation, unused parameters,
//                                   agreement, and K SGD steps == one process with 2x accumulation
//   dist_worker mismatch            rank 1 builds another model: broadcast_parameters must refuse
//   dist_worker peer-dies           rank 1 leaves after joining: rank 0's collective must fail, not hang
//   dist_worker alone               (started as rank 0 of 2 only) the rendezvous times out naming rank 1
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

#include "bertx/error.hpp"
#include "dist/data_parallel.hpp"

using bertx::DataParallel;
using torch::Tensor;

namespace {

struct FailError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
#define EXPECT(cond, what) \
  if (!(cond)) throw FailError(std::string(what) + " [" #cond "]")

struct NetImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, extra{nullptr};
  Tensor frozen;
  explicit NetImpl(int hidden = 16) {
    fc1 = register_module("fc1", torch::nn::Linear(8, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 4));
    extra = register_module("extra", torch::nn::Linear(4, 4));  // used only when asked
    frozen = register_parameter("frozen", torch::ones({3}), /*requires_grad=*/false);
  }
  Tensor forward(const Tensor& x /* (B, 8) */, bool use_extra) {
    Tensor y = fc2(torch::tanh(fc1(x)));  // (B, 4)
    return use_extra ? y + 0.5 * extra(y) : y;
  }
};
TORCH_MODULE(Net);

// The micro-batch `micro` of rank `rank` at step `step`: the same on every process.
Tensor loss_of(Net& net, int step, int rank, int micro, bool use_extra = false) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(1000 * step + 10 * rank + micro + 1));
  Tensor x = at::randn({6, 8}, gen);  // (B, 8)
  Tensor y = at::randn({6, 4}, gen);  // (B, 4)
  return torch::mse_loss(net->forward(x, use_extra), y);
}

void clear_grads(Net& net) {
  for (auto& p : net->parameters()) p.mutable_grad() = Tensor();
}

std::vector<Tensor> grads_of(Net& net) {
  std::vector<Tensor> g;
  for (auto& p : net->parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  return g;
}

double max_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); }

// Average over ranks of each rank's local gradients of `backward_rank(net, r)`, computed here with
// sync off (the hooks do nothing): the reference the all-reduce must reproduce.
template <typename F>
std::vector<Tensor> reference(Net& net, DataParallel& dp, F backward_rank) {
  dp.set_sync(false);
  std::vector<Tensor> sum;
  for (int r = 0; r < dp.world_size(); ++r) {
    clear_grads(net);
    backward_rank(r);
    auto g = grads_of(net);
    if (sum.empty())
      sum = g;
    else
      for (std::size_t i = 0; i < g.size(); ++i)
        if (g[i].defined()) sum[i] = sum[i].defined() ? sum[i] + g[i] : g[i];
  }
  for (auto& s : sum)
    if (s.defined()) s = s / dp.world_size();
  clear_grads(net);
  return sum;
}

void expect_grads(Net& net, const std::vector<Tensor>& want, const std::string& what) {
  auto params = net->named_parameters();
  for (std::size_t i = 0; i < want.size(); ++i) {
    const Tensor& got = params[i].value().grad();
    const std::string name = what + ": " + params[i].key();
    if (!want[i].defined()) {
      EXPECT(!got.defined(), name + " should have no gradient");
      continue;
    }
    EXPECT(got.defined(), name + " has no gradient");
    EXPECT(max_diff(got, want[i]) < 1e-6, name + " differs from the reference average");
  }
}

int grads(double bucket_mb) {
  const auto rv = bertx::rendezvous_from_env();
  torch::manual_seed(100 + static_cast<std::uint64_t>(rv.rank));  // ranks start from different weights
  Net net;
  torch::manual_seed(100);
  Net rank0;  // what rank 0 started from
  std::vector<Tensor> params;
  std::vector<std::string> names;
  for (auto& item : net->named_parameters()) {
    names.push_back(item.key());
    params.push_back(item.value());
  }
  auto dp = DataParallel::create(rv, "gloo", at::kCPU, bucket_mb, 60);
  EXPECT(dp->world_size() == 2 && dp->backend() == "gloo", "two ranks over gloo");
  EXPECT(dp->hosts().size() == 2, "every rank's host is known");
  if (rv.rank == 1) EXPECT(max_diff(net->fc1->weight, rank0->fc1->weight) > 0, "rank 1 starts from other weights");
  dp->broadcast_parameters(params, names);
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT(torch::equal(params[i], rank0->parameters()[i]), "after the broadcast " + names[i] + " equals rank 0's");

  dp->attach(params, names);
  const auto layout = dp->bucket_layout();
  std::printf("rank %d: %zu bucket(s)\n", rv.rank, layout.size());
  EXPECT(layout.front().front() == static_cast<int>(params.size()) - 1, "buckets start with the last parameter");
  if (bucket_mb < 1e-4)
    EXPECT(layout.size() == 6, "a bucket smaller than a tensor: one bucket per tensor");  // frozen has none
  if (bucket_mb > 1) EXPECT(layout.size() == 1, "a bucket larger than everything: one bucket");

  // 1. One synchronised backward: the average of the ranks' gradients; `extra` unused everywhere.
  auto want = reference(net, *dp, [&](int r) { loss_of(net, 0, r, 0).backward(); });
  dp->set_sync(true);
  loss_of(net, 0, rv.rank, 0).backward();
  dp->finish_gradient_sync();
  expect_grads(net, want, "one micro-batch");
  // `extra` (unused) sits in the first bucket of the initial layout: nothing could start during backward.
  EXPECT(dp->last_sync_stats().launched_in_backward == 0, "the unused first bucket held back the rest");
  const auto rebuilt = dp->bucket_layout();
  for (int i : rebuilt.back())
    EXPECT(names[i].starts_with("extra.") || rebuilt.size() == 1, "unused parameters move to the last bucket");

  // 2. Accumulation: sync off for micro-batch 0, on for 1 -> average of each rank's sum.
  clear_grads(net);
  want = reference(net, *dp, [&](int r) {
    loss_of(net, 1, r, 0).backward();
    loss_of(net, 1, r, 1).backward();
  });
  dp->set_sync(false);
  loss_of(net, 1, rv.rank, 0).backward();
  dp->set_sync(true);
  loss_of(net, 1, rv.rank, 1).backward();
  dp->finish_gradient_sync();
  expect_grads(net, want, "two micro-batches");
  const auto stats = dp->last_sync_stats();
  std::printf("rank %d: %d of %d bucket(s) launched during backward\n", rv.rank, stats.launched_in_backward,
              stats.buckets);
  if (stats.buckets > 1) EXPECT(stats.launched_in_backward >= 1, "buckets of used parameters start during backward");
  if (bucket_mb < 1e-4)
    EXPECT(stats.launched_in_backward == 4, "every bucket but the two unused ones starts during backward");

  // 3. `extra` used on rank 0 only: its gradient counts as zeros on rank 1, and both ranks get it.
  clear_grads(net);
  want = reference(net, *dp, [&](int r) { loss_of(net, 2, r, 0, r == 0).backward(); });
  dp->set_sync(true);
  loss_of(net, 2, rv.rank, 0, rv.rank == 0).backward();
  dp->finish_gradient_sync();
  expect_grads(net, want, "a parameter used on one rank");

  // 4. Agreement.
  EXPECT(dp->all_true(true), "all_true(true)");
  EXPECT(!dp->all_true(rv.rank == 0), "one false vote");
  EXPECT(dp->all_average(static_cast<double>(rv.rank)) == 0.5, "all_average");
  const auto avg = dp->all_average(std::vector<double>{1.0 * rv.rank, 10.0 + rv.rank});
  EXPECT(avg.size() == 2 && avg[0] == 0.5 && avg[1] == 10.5, "all_average of a vector");

  // 5. K SGD steps: two ranks x batch B == one process x batch B with 2x accumulation.
  Net single;
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i) single->parameters()[i].copy_(params[i]);
  }
  const double lr = 0.1;
  for (int step = 10; step < 13; ++step) {
    clear_grads(net);
    dp->set_sync(true);
    loss_of(net, step, rv.rank, 0).backward();
    dp->finish_gradient_sync();
    clear_grads(single);
    for (int r = 0; r < 2; ++r) (loss_of(single, step, r, 0) / 2.0).backward();
    torch::NoGradGuard no_grad;
    for (auto* model : {&net, &single})
      for (auto& p : (*model)->parameters())
        if (p.grad().defined()) p.sub_(lr * p.grad());
  }
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT(max_diff(params[i], single->parameters()[i]) < 1e-6, "after 3 steps " + names[i] + " matches one process");
  dp->barrier();
  std::printf("rank %d: grads ok\n", rv.rank);
  return 0;
}

int mismatch() {
  const auto rv = bertx::rendezvous_from_env();
  Net net(rv.rank == 0 ? 16 : 17);
  auto dp = DataParallel::create(rv, "gloo", at::kCPU, 25, 60);
  try {
    dp->broadcast_parameters(net->parameters());
  } catch (const bertx::Error& e) {
    std::printf("rank %d: refused: %s\n", rv.rank, e.what());
    EXPECT(std::string(e.what()).find("the ranks built different models") != std::string::npos,
           "the message names the problem");
    return 0;
  }
  throw FailError("broadcast_parameters accepted different models");
}

int peer_dies() {
  const auto rv = bertx::rendezvous_from_env();
  auto dp = DataParallel::create(rv, "gloo", at::kCPU, 25, 5);
  if (rv.rank == 1) std::_Exit(0);  // gone without a word
  try {
    for (int i = 0; i < 100; ++i) dp->barrier();
  } catch (const bertx::Error& e) {
    std::printf("rank 0: %s\n", e.what());
    EXPECT(std::string(e.what()).starts_with("rank 0 ("), "the message names the rank");
    EXPECT(std::string(e.what()).find("barrier failed") != std::string::npos, "the message names the collective");
    return 0;
  }
  throw FailError("a barrier with a dead peer succeeded");
}

int alone() {
  const auto rv = bertx::rendezvous_from_env();
  try {
    DataParallel::create(rv, "gloo", at::kCPU, 25, 2);
  } catch (const bertx::Error& e) {
    std::printf("rank 0: %s\n", e.what());
    EXPECT(std::string(e.what()).find("timed out after 2 s: 1/2 ranks joined, missing rank(s) 1") != std::string::npos,
           "the timeout lists the missing rank");
    return 0;
  }
  throw FailError("a rendezvous without rank 1 succeeded");
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "grads") return grads(argc > 2 ? std::stod(argv[2]) : 25.0);
    if (scenario == "mismatch") return mismatch();
    if (scenario == "peer-dies") return peer_dies();
    if (scenario == "alone") return alone();
    std::fprintf(stderr, "usage: dist_worker grads <bucket_mb> | mismatch | peer-dies | alone\n");
    return 2;
  } catch (const FailError& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: unexpected error: %s\n", e.what());
  }
  return 1;
}
