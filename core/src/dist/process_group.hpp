// process_group.hpp - the c10d side of DataParallel, internal to core/src/dist: join the job through a
// TCPStore (reporting who is missing) and create its Gloo or NCCL process group. It also holds the one
// section where c10d differs between LibTorch 1.13 and 2.x.
#pragma once
#include <exception>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include "host/rendezvous.hpp"

// --- LibTorch 1.13 / 2.x differences of c10d: only here --------------------------------------------
// 2.0 turned ProcessGroup into a dispatcher over per-device "Backend"s; ProcessGroupGloo/NCCL became
// Backends. Their own allreduce/broadcast/Options/constructors kept the same signatures.
namespace bertx::c10d_compat {
#if TORCH_VERSION_MAJOR >= 2
using Group = c10d::Backend;
#else
using Group = c10d::ProcessGroup;
#endif
using Work = c10d::Work;
}  // namespace bertx::c10d_compat

namespace bertx {

struct JoinedGroup {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d_compat::Group> group;
  std::vector<std::string> hosts;      // host name of every rank, index = rank
  std::vector<std::string> addresses;  // every rank's address towards the master (what its peers see), index = rank
};

// TCPStore rendezvous at rv.master_addr:master_port (rank 0 serves it), then a process group over a
// prefixed view of the store. backend: "gloo" | "nccl". Fails after timeout_s with a one-line
// bertx::Error naming this rank (and, for the rendezvous, the missing ranks).
JoinedGroup join_process_group(const Rendezvous& rv, const std::string& backend, int timeout_s);

// An exception's message on one line (a c10::Error without its backtrace).
std::string one_line(const std::exception& e);
std::string this_host();

}  // namespace bertx
