// process_group.cpp - joining a multi-process job: TCPStore rendezvous (rank 0 serves; every rank
// registers its host and bumps a counter; rank 0 reports the missing ranks every 10 s; everyone gives up
// after the timeout with that list), then a Gloo or NCCL process group on a prefixed view of the store; across
// hosts Gloo listens on the address that routes to the master.
#include "dist/process_group.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "bertx/error.hpp"

namespace bertx {

using c10d_compat::Group;
using Clock = std::chrono::steady_clock;

std::string one_line(const std::exception& e) {
  const auto* ce = dynamic_cast<const c10::Error*>(&e);
  std::string s = ce ? ce->what_without_backtrace() : e.what();
  if (auto nl = s.find('\n'); nl != std::string::npos) s = s.substr(0, nl);
  return s;
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

namespace {

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// Polls the joined count until every rank is in; rank 0 reports who is missing every 10 s.
void wait_for_ranks(const Rendezvous& rv, int timeout_s, c10d::Store& store) {
  auto missing = [&] {
    std::vector<int> out;
    for (int r = 0; r < rv.world_size; ++r)
      if (!store.check({"bertx/host/" + std::to_string(r)})) out.push_back(r);
    return out;
  };
  const auto start = Clock::now();
  auto last_report = start;
  for (;;) {
    const std::int64_t joined = store.add("bertx/joined", 0);
    if (joined >= rv.world_size) break;
    const auto now = Clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
    if (waited >= timeout_s)
      throw Error(fmt::format(
          "rank {} ({}): rendezvous at {}:{} timed out after {} s: {}/{} ranks joined, missing rank(s) {}", rv.rank,
          this_host(), rv.master_addr, rv.master_port, timeout_s, joined, rv.world_size, rank_ranges(missing())));
    if (rv.rank == 0 && now - last_report >= std::chrono::seconds(10)) {
      spdlog::info("rendezvous at {}:{}: {}/{} ranks joined, waiting for rank(s) {} ({} s of {} s)", rv.master_addr,
                   rv.master_port, joined, rv.world_size, rank_ranges(missing()), waited, timeout_s);
      last_report = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

c10::intrusive_ptr<c10d::TCPStore> join(const Rendezvous& rv, int timeout_s, JoinedGroup& g) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(rv.master_port);
  o.isServer = rv.rank == 0;
  o.numWorkers = static_cast<std::size_t>(rv.world_size);
  o.waitWorkers = false;  // we wait ourselves below, reporting who is missing
  o.timeout = std::chrono::milliseconds(std::int64_t{timeout_s} * 1000);
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(rv.master_addr, o);
  } catch (const std::exception& e) {
    if (rv.rank == 0)
      throw Error(fmt::format("rank 0: cannot serve the rendezvous on {}:{} (MASTER_PORT in use by another job?): {}",
                              rv.master_addr, rv.master_port, one_line(e)));
    throw Error(fmt::format(
        "rank {} ({}): cannot reach the rendezvous at {}:{} within {} s (MASTER_ADDR/MASTER_PORT wrong, or rank 0 "
        "not started?): {}",
        rv.rank, this_host(), rv.master_addr, rv.master_port, timeout_s, one_line(e)));
  }
  try {
    store->set("bertx/host/" + std::to_string(rv.rank), bytes(this_host()));
    store->set("bertx/addr/" + std::to_string(rv.rank), bytes(local_address_towards(rv.master_addr, rv.master_port)));
    store->add("bertx/joined", 1);
    wait_for_ranks(rv, timeout_s, *store);
    for (int r = 0; r < rv.world_size; ++r) {
      auto h = store->get("bertx/host/" + std::to_string(r));
      auto a = store->get("bertx/addr/" + std::to_string(r));
      g.hosts.emplace_back(h.begin(), h.end());
      g.addresses.emplace_back(a.begin(), a.end());
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format(
        "rank {} ({}): lost the rendezvous store at {}:{} (another rank probably stopped: rank 0 serves it): {}",
        rv.rank, this_host(), rv.master_addr, rv.master_port, one_line(e)));
  }
  return store;
}

#ifdef USE_C10D_GLOO
// GLOO_SOCKET_IFNAME picks the interface (as in PyTorch); a loopback master means one host. Otherwise Gloo listens
// on this host's address towards the master: Gloo's own default resolves the host name, which on many clusters
// (and in network namespaces) gives no address or the loopback one, and the other hosts cannot connect to that.
// `local` is the address this rank published at the rendezvous, so the one its peers' errors name is the one it
// listens on.
std::shared_ptr<::gloo::transport::Device> gloo_device(const Rendezvous& rv, const std::string& local) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (rv.master_addr == "localhost" || rv.master_addr.rfind("127.", 0) == 0)
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  if (!local.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

c10::intrusive_ptr<Group> make_group(const std::string& backend, const c10::intrusive_ptr<c10d::Store>& store,
                                     const Rendezvous& rv, [[maybe_unused]] const std::string& local_address,
                                     std::chrono::milliseconds timeout) {
  if (backend == "gloo") {
#ifdef USE_C10D_GLOO
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    opts->devices.push_back(gloo_device(rv, local_address));
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rv.rank, rv.world_size, opts);
#endif
  } else {
#ifdef USE_C10D_NCCL
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rv.rank, rv.world_size, opts);
#endif
  }
  throw Error("backend \"" + backend + "\": this LibTorch (" + TORCH_VERSION + ") was built without it (USE_C10D_" +
              (backend == "gloo" ? "GLOO" : "NCCL") + " is not defined)" +
              (backend == "nccl" ? ": use backend \"gloo\" or a CUDA build of LibTorch" : ""));
}

}  // namespace

JoinedGroup join_process_group(const Rendezvous& rv, const std::string& backend, int timeout_s) {
  JoinedGroup g;
  g.store = join(rv, timeout_s, g);
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("bertx/pg", g.store);
  try {
    g.group = make_group(backend, prefixed, rv, g.addresses[static_cast<std::size_t>(rv.rank)],
                         std::chrono::milliseconds(std::int64_t{timeout_s} * 1000));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("rank {}: creating the {} process group failed: {}", rv.rank, backend, one_line(e)));
  }
  return g;
}

}  // namespace bertx
