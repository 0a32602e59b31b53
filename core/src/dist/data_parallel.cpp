// data_parallel.cpp - DataParallel on c10d: parameter broadcast with a checksum check, bucketed gradient
// all-reduce and agreement collectives over the process group process_group.cpp joins.
//
// How gradients overlap the backward pass: attach() adds a post-hook to every parameter's
// AccumulateGrad node (torch::autograd::impl::grad_accumulator(param)->add_post_hook), the mechanism
// torch DDP's Reducer uses, in 1.13 and 2.x alike. It fires once per backward, after the incoming
// gradient was accumulated into param.grad(), so reading param.grad() there sees the whole
// accumulation window. With sync off the hook returns at once (local accumulation). With sync on it
// copies the gradient into its bucket's flat buffer; when a bucket's last member arrives the bucket is
// divided by the world size and all-reduced asynchronously (Gloo worker threads / the NCCL stream)
// while autograd keeps computing earlier layers. Buckets launch strictly in bucket order (a ready
// bucket waits for the ones before it), so every rank issues the same collectives in the same order.
// After the first synchronised step the buckets are rebuilt once in the order rank 0 saw gradients
// arrive, with parameters that got none placed last (as DDP does), so an unused parameter (the pooler
// when fine-tuning) does not hold back every bucket after it.
// finish_gradient_sync() fills in members that never became ready (their .grad() or zeros), launches
// what is left plus a small "which parameters have a gradient anywhere" reduction, waits, and writes
// the averages back into param.grad().
#include "dist/data_parallel.hpp"

#include <algorithm>
#include <mutex>

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/cuda.h>

#include "bertx/error.hpp"
#include "dist/process_group.hpp"

namespace bertx {

using c10d_compat::Group;
using c10d_compat::Work;

namespace {

// The bit pattern of a tensor's elements as integers of the same width (exact, order-free checksums).
at::Tensor bits_of(const at::Tensor& t) {
  switch (t.element_size()) {
    case 8:
      return t.view(at::kLong);
    case 4:
      return t.view(at::kInt);
    case 2:
      return t.view(at::kShort);
    default:
      return t.view(at::kByte);
  }
}

constexpr std::int64_t kChecksumMask = (std::int64_t{1} << 62) - 1;  // keeps -x representable

}  // namespace

// --- state ------------------------------------------------------------------------------------------
struct Bucket {
  std::vector<int> members;           // parameter indices, in launch order
  std::vector<std::int64_t> offsets;  // element offset of each member in `flat`
  at::Tensor flat;                    // (numel,) persistent buffer, the members' wire dtype and device
  int pending = 0;                    // members not yet copied into `flat` this step
  c10::intrusive_ptr<Work> work;      // the all-reduce in flight
};

struct DataParallel::Impl {
  Rendezvous rv;
  std::string backend = "none";
  at::Device device{at::kCPU};
  at::Device scalar_device{at::kCPU};  // small agreement tensors: CUDA for NCCL, else CPU
  std::int64_t bucket_bytes = 25 << 20;
  int timeout_s = 1800;
  std::vector<std::string> hosts;
  std::vector<std::string> addresses;  // every rank's address towards the master: errors name the peer behind one
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Group> group;
  // The dtype a tensor travels in: Gloo has no bf16 (and sums fp16 in fp16), so half tensors go as fp32
  // there (exact for a broadcast, more accurate for a sum); NCCL takes them as they are.
  at::ScalarType wire_dtype(at::ScalarType t) const {
    return backend == "gloo" && (t == at::kBFloat16 || t == at::kHalf) ? at::kFloat : t;
  }

  // attach()
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::vector<int> bucket_of, slot_of;  // per parameter (-1: no gradient expected)
  std::vector<Bucket> buckets;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<std::uintptr_t> hook_keys;

  // per step, guarded by `mu` (CUDA backward runs hooks on autograd's device thread)
  std::mutex mu;
  bool sync = false;
  std::vector<char> ready;
  std::size_t next_bucket = 0;
  std::string hook_error;
  std::vector<int> ready_order;  // first synchronised step: the order gradients arrived in
  bool rebuilt = false;
  int launched_in_backward = 0;  // this step's buckets started from the hooks
  SyncStats last_stats;

  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(std::int64_t{timeout_s} * 1000); }
  std::string name_of(std::size_t i) const { return i < names.size() ? "'" + names[i] + "'" : "#" + std::to_string(i); }

  // Every collective goes through here: failures and timeouts become one-line errors naming this rank.
  void wait(const c10::intrusive_ptr<Work>& work, const std::string& what) const {
    try {
      work->wait(timeout());
    } catch (const std::exception& e) {
      const std::string cause = one_line(e);
      throw Error(fmt::format(
          "rank {} ({}): {} failed ({} backend, timeout {} s; another rank probably stopped or hangs, or the network "
          "to it is down): {}{}",
          rv.rank, hosts.empty() ? this_host() : hosts[rv.rank], what, backend, timeout_s, cause,
          name_peers(cause, addresses, hosts, rv.rank)));
    }
  }
  c10::intrusive_ptr<Work> allreduce(at::Tensor t, c10d::ReduceOp op, const std::string& what) {
    std::vector<at::Tensor> v{std::move(t)};
    c10d::AllreduceOptions o;
    o.reduceOp = op;
    try {
      return group->allreduce(v, o);
    } catch (const std::exception& e) {
      throw Error(fmt::format("rank {}: {} could not start ({} backend): {}", rv.rank, what, backend, one_line(e)));
    }
  }
  void allreduce_now(const at::Tensor& t, c10d::ReduceOp op, const std::string& what) {
    wait(allreduce(t, op, what), what);
  }

  void build_buckets(const std::vector<int>& order);
  void rebuild_buckets_once();
  void copy_in(int i, const at::Tensor& grad);  // under mu
  void launch_ready_buckets();                  // under mu
  void on_gradient_ready(int i);
};

// --- construction -----------------------------------------------------------------------------------
DataParallel::DataParallel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DataParallel::~DataParallel() {
  for (std::size_t i = 0; i < impl_->accumulators.size(); ++i)
    if (impl_->accumulators[i]) impl_->accumulators[i]->del_post_hook(impl_->hook_keys[i]);
}

at::Device DataParallel::device_for(const Rendezvous& rv, at::Device wanted) {
  if (!wanted.is_cuda()) return wanted;
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (count == 1) return at::Device(at::kCUDA, 0);  // the scheduler bound one GPU to this rank
  if (rv.local_rank >= count)
    throw Error(fmt::format(
        "rank {}: local rank {} needs GPU {} but this node shows {} CUDA device(s) (CUDA_VISIBLE_DEVICES, or too "
        "many ranks per node)",
        rv.rank, rv.local_rank, rv.local_rank, count));
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rv.local_rank));
}

std::unique_ptr<DataParallel> DataParallel::create(const Rendezvous& rv, const std::string& backend, at::Device device,
                                                   double bucket_mb, int timeout_s) {
  if (backend != "auto" && backend != "gloo" && backend != "nccl")
    throw Error("backend \"" + backend + "\": expected auto, gloo or nccl");
  if (bucket_mb <= 0) throw Error(fmt::format("bucket_mb = {}: expected a size > 0 (MiB)", bucket_mb));
  if (timeout_s <= 0) throw Error(fmt::format("timeout = {} s: expected > 0", timeout_s));
  auto impl = std::make_unique<Impl>();
  impl->rv = rv;
  impl->device = device;
  impl->bucket_bytes = std::max<std::int64_t>(1, static_cast<std::int64_t>(bucket_mb * 1024.0 * 1024.0));
  impl->timeout_s = timeout_s;
  if (device.is_cuda() && device.has_index()) c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
  if (rv.world_size == 1) {
    impl->hosts = {this_host()};
    return std::unique_ptr<DataParallel>(new DataParallel(std::move(impl)));
  }
  impl->backend = backend == "auto" ? (device.is_cuda() ? "nccl" : "gloo") : backend;
  if (impl->backend == "nccl" && !device.is_cuda())
    throw Error("backend \"nccl\" needs a CUDA device, not " + device.str() +
                ": use backend \"gloo\" (or \"auto\") on the CPU");
  impl->scalar_device = impl->backend == "nccl" ? device : at::Device(at::kCPU);
  JoinedGroup joined = join_process_group(rv, impl->backend, timeout_s);
  impl->store = joined.store;
  impl->group = joined.group;
  impl->hosts = std::move(joined.hosts);
  impl->addresses = std::move(joined.addresses);
  auto dp = std::unique_ptr<DataParallel>(new DataParallel(std::move(impl)));
  dp->barrier();  // the group works end to end before anyone trains
  return dp;
}

int DataParallel::rank() const { return impl_->rv.rank; }
int DataParallel::world_size() const { return impl_->rv.world_size; }
int DataParallel::local_rank() const { return impl_->rv.local_rank; }
const std::string& DataParallel::backend() const { return impl_->backend; }
const std::vector<std::string>& DataParallel::hosts() const { return impl_->hosts; }

// --- parameters -------------------------------------------------------------------------------------
void DataParallel::broadcast_parameters(const std::vector<at::Tensor>& params, const std::vector<std::string>& names) {
  Impl& d = *impl_;
  if (d.rv.world_size == 1) return;
  at::NoGradGuard no_grad;
  auto name = [&](std::size_t i) { return i < names.size() ? "'" + names[i] + "'" : "#" + std::to_string(i); };
  // [x, -x] under MAX gives max and -min in one collective: equal everywhere iff max == min.
  auto agree = [&](const at::Tensor& local /* (n,) int64 */, const std::string& what) {
    at::Tensor both = at::cat({local, -local}).to(d.scalar_device);  // (2n,)
    d.allreduce_now(both, c10d::ReduceOp::MAX, what);
    both = both.cpu().contiguous();
    const std::int64_t n = local.numel();
    const auto* v = both.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i)
      if (v[i] != -v[n + i]) return i;
    return std::int64_t{-1};
  };

  // 1. The same model everywhere: count, sizes and a hash of shapes and dtypes.
  // FNV-1a in unsigned arithmetic (the product wraps; in int64 that overflow was undefined behaviour, found by
  // the asan preset), masked to 62 bits so that -x stays representable.
  std::int64_t numel = 0;
  constexpr auto mask = static_cast<std::uint64_t>(kChecksumMask);
  std::uint64_t h = 1469598103934665603ULL & mask;
  auto mix = [&h](std::int64_t x) { h = ((h ^ static_cast<std::uint64_t>(x)) * 1099511628211ULL) & mask; };
  for (const auto& p : params) {
    numel += p.numel();
    for (auto s : p.sizes()) mix(s);
    mix(static_cast<std::int64_t>(p.scalar_type()));
  }
  const auto shape_hash = static_cast<std::int64_t>(h);
  const at::Tensor shape =
      at::tensor(std::vector<std::int64_t>{static_cast<std::int64_t>(params.size()), numel, shape_hash});
  if (agree(shape, "the model-shape check") >= 0)
    throw Error(fmt::format(
        "rank {}: the ranks built different models ({} tensors, {} values, shape hash {:x} here): check that every "
        "rank runs the same experiment and bertx version",
        d.rv.rank, params.size(), numel, shape_hash));

  // 2. Broadcast from rank 0 in flat chunks of one dtype and device, about bucket_bytes each.
  for (std::size_t first = 0; first < params.size();) {
    std::size_t last = first + 1;
    std::int64_t bytes = params[first].numel() * static_cast<std::int64_t>(params[first].element_size());
    while (last < params.size() && params[last].scalar_type() == params[first].scalar_type() &&
           params[last].device() == params[first].device() &&
           bytes + params[last].numel() * static_cast<std::int64_t>(params[last].element_size()) <= d.bucket_bytes)
      bytes += params[last].numel() * static_cast<std::int64_t>(params[last++].element_size());
    std::vector<at::Tensor> pieces;
    for (std::size_t i = first; i < last; ++i) pieces.push_back(params[i].detach().reshape(-1));
    std::vector<at::Tensor> flat{at::cat(pieces).to(d.wire_dtype(params[first].scalar_type()))};  // (sum of numel,)
    c10d::BroadcastOptions o;
    o.rootRank = 0;
    c10::intrusive_ptr<Work> work;
    try {
      work = d.group->broadcast(flat, o);
    } catch (const std::exception& e) {
      throw Error(fmt::format("rank {}: broadcast of parameters {}.. could not start: {}", d.rv.rank, name(first),
                              one_line(e)));
    }
    d.wait(work, "broadcast of parameters from " + name(first));
    if (d.rv.rank != 0) {
      std::int64_t off = 0;
      for (std::size_t i = first; i < last; ++i) {
        params[i].copy_(flat[0].narrow(0, off, params[i].numel()).view(params[i].sizes()));
        off += params[i].numel();
      }
    }
    first = last;
  }

  // 3. Check: exact integer checksums (plain and position-weighted sums of the bit patterns).
  std::vector<at::Tensor> sums;
  for (const auto& p : params) {
    at::Tensor b = bits_of(p.detach()).reshape(-1).to(at::kLong);              // (numel,)
    at::Tensor w = at::arange(p.numel(), b.options()).remainder(7919).add(1);  // (numel,)
    sums.push_back(b.sum().bitwise_and(kChecksumMask).cpu());
    sums.push_back(b.mul(w).sum().bitwise_and(kChecksumMask).cpu());
  }
  if (sums.empty()) return;
  const std::int64_t bad = agree(at::stack(sums), "the parameter checksum check");
  if (bad >= 0)
    throw Error(
        fmt::format("rank {}: parameter {} differs between ranks after the broadcast from rank 0 (checksum mismatch)",
                    d.rv.rank, name(static_cast<std::size_t>(bad / 2))));
}

namespace {
class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(DataParallel::Impl* impl, int index) : impl_(impl), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override;

 private:
  DataParallel::Impl* impl_;
  int index_;
};
}  // namespace

// Lays out the buckets for parameters in `order` (launch order): one dtype and device per bucket, a
// bucket closed when the next tensor would overflow it (a larger tensor gets a bucket of its own).
void DataParallel::Impl::build_buckets(const std::vector<int>& order) {
  buckets.clear();
  std::int64_t bytes = 0;
  for (int i : order) {
    const at::Tensor& p = params[i];
    const std::int64_t size = p.numel() * static_cast<std::int64_t>(p.element_size());
    const bool fresh = buckets.empty() || bytes + size > bucket_bytes ||
                       buckets.back().flat.scalar_type() != wire_dtype(p.scalar_type()) ||
                       buckets.back().flat.device() != p.device();
    if (fresh) {
      buckets.emplace_back();
      buckets.back().flat = at::empty({0}, p.options().dtype(wire_dtype(p.scalar_type())));
      bytes = 0;
    }
    Bucket& b = buckets.back();
    bucket_of[i] = static_cast<int>(buckets.size()) - 1;
    slot_of[i] = static_cast<int>(b.members.size());
    b.offsets.push_back(b.members.empty() ? 0 : b.offsets.back() + params[b.members.back()].numel());
    b.members.push_back(i);
    bytes += size;
  }
  for (Bucket& b : buckets) {
    b.flat = at::empty({b.offsets.back() + params[b.members.back()].numel()}, b.flat.options());  // (bucket numel,)
    b.pending = static_cast<int>(b.members.size());
  }
}

// After the first synchronised step, like DDP: buckets follow the order in which rank 0 saw gradients
// arrive, parameters without a gradient last, so an unused parameter never holds back a bucket.
void DataParallel::Impl::rebuild_buckets_once() {
  rebuilt = true;
  std::vector<std::int64_t> order(ready_order.begin(), ready_order.end());
  std::vector<char> seen(params.size(), 0);
  for (auto i : order) seen[static_cast<std::size_t>(i)] = 1;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i)
    if (bucket_of[i] >= 0 && !seen[i]) order.push_back(i);
  std::vector<at::Tensor> t{at::tensor(order, at::kLong).to(scalar_device)};  // (parameters with gradients,)
  c10d::BroadcastOptions o;
  o.rootRank = 0;
  wait(group->broadcast(t, o), "the bucket-order broadcast");
  const at::Tensor from_rank0 = t[0].cpu();
  const auto* v = from_rank0.data_ptr<std::int64_t>();
  build_buckets(std::vector<int>(v, v + from_rank0.numel()));
}

void DataParallel::attach(const std::vector<at::Tensor>& params, const std::vector<std::string>& names) {
  Impl& d = *impl_;
  if (!d.params.empty())
    throw Error("DataParallel::attach called twice: gradient hooks are registered once per process");
  d.params = params;
  d.names = names;
  d.bucket_of.assign(params.size(), -1);
  d.slot_of.assign(params.size(), -1);
  d.ready.assign(params.size(), 0);
  if (d.rv.world_size == 1) return;
  std::vector<int> order;  // reverse parameter order: roughly the order backward produces gradients
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    if (!params[i].requires_grad()) continue;
    if (!params[i].is_leaf()) throw Error("DataParallel::attach: parameter " + d.name_of(i) + " is not a leaf tensor");
    order.push_back(i);
  }
  if (order.empty() && !params.empty())
    throw Error(fmt::format("DataParallel::attach: none of the {} parameters requires a gradient", params.size()));
  d.build_buckets(order);
  d.accumulators.resize(params.size());
  d.hook_keys.resize(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (d.bucket_of[i] < 0) continue;
    d.accumulators[i] = torch::autograd::impl::grad_accumulator(params[i]);
    d.hook_keys[i] = d.accumulators[i]->add_post_hook(std::make_unique<ReadyHook>(&d, static_cast<int>(i)));
  }
}

DataParallel::SyncStats DataParallel::last_sync_stats() const { return impl_->last_stats; }

std::vector<std::vector<int>> DataParallel::bucket_layout() const {
  std::vector<std::vector<int>> out;
  for (const Bucket& b : impl_->buckets) out.push_back(b.members);
  return out;
}

// --- gradient all-reduce ----------------------------------------------------------------------------
void DataParallel::set_sync(bool sync) {
  std::lock_guard lock(impl_->mu);
  impl_->sync = sync;
}

bool DataParallel::sync() const { return impl_->sync; }

torch::autograd::variable_list ReadyHook::operator()(const torch::autograd::variable_list& outputs,
                                                     const torch::autograd::variable_list& /*inputs*/) {
  impl_->on_gradient_ready(index_);
  return outputs;
}

void DataParallel::Impl::copy_in(int i, const at::Tensor& grad) {
  Bucket& b = buckets[bucket_of[i]];
  at::Tensor slot = b.flat.narrow(0, b.offsets[slot_of[i]], params[i].numel());  // (numel,) view
  if (grad.defined())
    slot.copy_(grad.is_sparse() ? grad.to_dense().reshape(-1) : grad.reshape(-1));
  else
    slot.zero_();
  ready[i] = 1;
  --b.pending;
}

void DataParallel::Impl::launch_ready_buckets() {
  while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) {
    Bucket& b = buckets[next_bucket];
    b.flat.div_(rv.world_size);
    b.work = allreduce(b.flat, c10d::ReduceOp::SUM,
                       fmt::format("gradient all-reduce (bucket {} of {})", next_bucket + 1, buckets.size()));
    ++next_bucket;
  }
}

void DataParallel::Impl::on_gradient_ready(int i) {
  std::lock_guard lock(mu);
  if (!sync) return;
  if (ready[i]) {
    // A second gradient in one synchronised backward (retain_graph, reentrant checkpointing): the
    // bucket may be on the wire already. Reported by finish_gradient_sync, not thrown inside autograd.
    if (hook_error.empty())
      hook_error = "parameter " + name_of(i) +
                   " received a gradient twice in one synchronised backward: call backward once per "
                   "micro-batch, with set_sync(true) only before the last one";
    return;
  }
  at::NoGradGuard no_grad;
  if (!rebuilt) ready_order.push_back(i);
  copy_in(i, params[i].grad());
  if (buckets[bucket_of[i]].pending == 0) {
    const std::size_t before = next_bucket;
    launch_ready_buckets();
    launched_in_backward += static_cast<int>(next_bucket - before);
  }
}

void DataParallel::finish_gradient_sync() {
  Impl& d = *impl_;
  if (d.rv.world_size == 1 || d.buckets.empty()) return;
  at::NoGradGuard no_grad;
  std::lock_guard lock(d.mu);
  // 1. Members that never became ready: their current .grad() (accumulated earlier) or zeros.
  at::Tensor has_grad =
      at::zeros({static_cast<std::int64_t>(d.params.size())}, at::kInt);  // (params,) 1 = grad defined here
  auto* has = has_grad.data_ptr<int>();
  for (std::size_t i = 0; i < d.params.size(); ++i) {
    if (d.bucket_of[i] < 0) continue;
    has[i] = d.params[i].grad().defined() ? 1 : 0;
    if (!d.ready[i]) d.copy_in(static_cast<int>(i), d.params[i].grad());
  }
  d.launch_ready_buckets();
  // 2. Which parameters have a gradient on some rank (a parameter unused everywhere keeps none).
  has_grad = has_grad.to(d.scalar_device);
  auto used_work = d.allreduce(has_grad, c10d::ReduceOp::MAX, "the used-parameter reduction");
  // 3. Wait and write back.
  for (std::size_t k = 0; k < d.buckets.size(); ++k)
    d.wait(d.buckets[k].work, fmt::format("gradient all-reduce (bucket {} of {}, {:.1f} MiB)", k + 1, d.buckets.size(),
                                          static_cast<double>(d.buckets[k].flat.nbytes()) / 1048576.0));
  d.wait(used_work, "the used-parameter reduction");
  const at::Tensor used = has_grad.cpu();
  const auto* u = used.data_ptr<int>();
  for (Bucket& b : d.buckets) {
    for (std::size_t s = 0; s < b.members.size(); ++s) {
      const int i = b.members[s];
      if (!u[i]) continue;
      at::Tensor avg = b.flat.narrow(0, b.offsets[s], d.params[i].numel()).view(d.params[i].sizes());  // param's shape
      at::Tensor& grad = d.params[i].mutable_grad();
      if (grad.defined())
        grad.copy_(avg);
      else
        grad = avg.to(d.params[i].scalar_type(), /*non_blocking=*/false, /*copy=*/true);
    }
    b.pending = static_cast<int>(b.members.size());
    b.work.reset();
  }
  std::fill(d.ready.begin(), d.ready.end(), 0);
  d.next_bucket = 0;
  d.last_stats = {static_cast<int>(d.buckets.size()), d.launched_in_backward};
  d.launched_in_backward = 0;
  if (!d.rebuilt) d.rebuild_buckets_once();
  if (!d.hook_error.empty()) {
    const std::string message = d.hook_error;
    d.hook_error.clear();
    throw Error(fmt::format("rank {}: {}", d.rv.rank, message));
  }
}

// --- agreement ----------------------------------------------------------------------------------------
bool DataParallel::all_true(bool local) {
  Impl& d = *impl_;
  if (d.rv.world_size == 1) return local;
  at::Tensor flag = at::full({1}, local ? 1 : 0, at::TensorOptions().dtype(at::kInt).device(d.scalar_device));  // (1,)
  d.allreduce_now(flag, c10d::ReduceOp::MIN, "all_true");
  return flag.item<int>() == 1;
}

double DataParallel::all_average(double local) { return all_average(std::vector<double>{local})[0]; }

std::vector<double> DataParallel::all_average(const std::vector<double>& local) {
  Impl& d = *impl_;
  if (d.rv.world_size == 1 || local.empty()) return local;
  at::Tensor v = at::tensor(local, at::kDouble).to(d.scalar_device);  // (n,)
  d.allreduce_now(v, c10d::ReduceOp::SUM, "all_average");
  v = v.cpu().div_(d.rv.world_size);
  return {v.data_ptr<double>(), v.data_ptr<double>() + v.numel()};
}

void DataParallel::barrier() {
  Impl& d = *impl_;
  if (d.rv.world_size == 1) return;
  d.allreduce_now(at::ones({1}, at::TensorOptions().dtype(at::kInt).device(d.scalar_device)), c10d::ReduceOp::SUM,
                  "barrier");
}

}  // namespace bertx
