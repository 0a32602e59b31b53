// data_parallel.hpp - multi-process data parallelism on LibTorch's c10d (NCCL for CUDA, Gloo for CPU),
// the C++ counterpart of torch DDP + the seeds' allreduce_post_accumulation. One object per process.
//
// Use (the trainer's step):
//   auto dp = DataParallel::create(rendezvous_from_env(), "auto", device);  // after model.to(device)
//   dp->broadcast_parameters(params, names);   // rank 0's weights everywhere, checked equal
//   dp->attach(params);                        // buckets + autograd hooks (once)
//   for each optimizer step:
//     for micro in 0..accumulation-1:
//       dp->set_sync(micro == accumulation - 1);   // only the last micro-batch communicates
//       loss.backward();                           // ready buckets are all-reduced during backward
//     dp->finish_gradient_sync();              // wait, average, write back into param.grad()
//     finite = dp->all_true(scaler.unscale_and_check(grads));
// With world_size 1 nothing is communicated and every call is a cheap no-op.
// Only this header is seen by the trainer: c10d stays inside data_parallel.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "host/rendezvous.hpp"

namespace bertx {

class DataParallel {
 public:
  // Joins the job: TCPStore rendezvous at master_addr:master_port (rank 0 serves it; while waiting,
  // rank 0 prints which ranks joined and which are missing, and every rank gives up after timeout_s
  // with that list), then a process group. backend: "auto" (NCCL for a CUDA device, else Gloo) |
  // "gloo" | "nccl". device: where gradients live (use device_for() to pick the rank's GPU); CUDA
  // devices also become the current device. bucket_mb: gradient bucket size in MiB. timeout_s: the
  // rendezvous and every collective fail with a bertx::Error after this long instead of hanging.
  static std::unique_ptr<DataParallel> create(const Rendezvous& rendezvous, const std::string& backend,
                                              at::Device device, double bucket_mb = 25, int timeout_s = 1800);
  // The device a rank should train on: for CUDA, cuda:<local_rank>, or cuda:0 when the scheduler shows
  // each rank just one GPU (an error when a node shows fewer GPUs than ranks); otherwise `wanted`.
  static at::Device device_for(const Rendezvous& rendezvous, at::Device wanted);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const;
  int world_size() const;
  int local_rank() const;
  const std::string& backend() const;             // "gloo" | "nccl" | "none" (world size 1)
  const std::vector<std::string>& hosts() const;  // host name of every rank, index = rank

  // Copies rank 0's values into `params` (and buffers passed alongside) on every rank, then checks
  // shapes and contents agree everywhere (exact integer checksums); a mismatch throws, naming the
  // first differing tensor (names[i] when given, else "#i").
  void broadcast_parameters(const std::vector<at::Tensor>& params, const std::vector<std::string>& names = {});

  // Registers the gradient hooks and lays out the buckets: parameters in reverse order (the order
  // backward produces them), one dtype per bucket, ~bucket_mb each (a larger tensor gets its own).
  // Call once, after the parameters have their final device and dtype. Parameters without
  // requires_grad are skipped.
  void attach(const std::vector<at::Tensor>& params, const std::vector<std::string>& names = {});

  // true: the next backward all-reduces gradients as they become ready (the last micro-batch of an
  // accumulation window). false (default): hooks do nothing and gradients accumulate locally.
  void set_sync(bool sync);
  bool sync() const;

  // Completes the step's all-reduce: gradients that were not ready during the synchronised backward
  // (unused parameters, or set_sync(true) never called) are sent now - their local .grad() or zeros -
  // then every bucket is awaited and param.grad() becomes the average over ranks. A parameter with
  // no gradient on any rank keeps an undefined grad. Same call on every rank, every optimizer step.
  void finish_gradient_sync();

  // Agreement and metrics across ranks (each a blocking collective: call on every rank, same order).
  bool all_true(bool local);  // e.g. "all gradients finite"
  double all_average(double local);
  std::vector<double> all_average(const std::vector<double>& local);  // one collective for many
  void barrier();

  // Parameter indices (into attach()'s list) of each bucket, in launch order. Set by attach() (reverse
  // parameter order), then once more after the first finish_gradient_sync(): the order in which rank 0
  // saw gradients arrive, parameters without one last.
  std::vector<std::vector<int>> bucket_layout() const;

  // The last finished step: its buckets and how many of them were launched during backward (the
  // overlap; the rest were sent by finish_gradient_sync).
  struct SyncStats {
    int buckets = 0;
    int launched_in_backward = 0;
  };
  SyncStats last_sync_stats() const;

  struct Impl;

 private:
  explicit DataParallel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bertx
