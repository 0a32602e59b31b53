// rendezvous.cpp - launcher environments -> Rendezvous (see rendezvous.hpp for the precedence).
// Every check names the variable at fault, so a mistyped job script fails on its first line of output.
// Plus the address helpers for jobs across hosts (plain sockets, no LibTorch).
#include "host/rendezvous.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "bertx/error.hpp"

namespace bertx {

namespace {

// A non-negative decimal integer; anything else is an error naming the variable.
int parse_int(const std::string& variable, const std::string& text, int min_value) {
  int value = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (text.empty() || ec != std::errc() || ptr != last)
    throw Error(variable + " = '" + text + "': expected an integer");
  if (value < min_value) throw Error(variable + " = " + text + ": expected an integer >= " + std::to_string(min_value));
  return value;
}

struct Reader {
  const EnvLookup& env;
  bool has(const std::string& v) const { return env(v).has_value(); }
  std::optional<int> optional_int(const std::string& v, int min_value) const {
    auto s = env(v);
    if (!s) return std::nullopt;
    return parse_int(v, *s, min_value);
  }
  int required_int(const std::string& v, int min_value, const std::string& why) const {
    auto value = optional_int(v, min_value);
    if (!value) throw Error(v + " is not set" + why);
    return *value;
  }
};

void check_consistent(const Rendezvous& r, const std::string& rank_var, const std::string& world_var,
                      const std::string& local_rank_var, const std::string& local_world_var) {
  if (r.rank >= r.world_size)
    throw Error(rank_var + " = " + std::to_string(r.rank) + " is not below " + world_var + " = " +
                std::to_string(r.world_size));
  if (r.local_world_size > r.world_size)
    throw Error(local_world_var + " = " + std::to_string(r.local_world_size) + " is above " + world_var + " = " +
                std::to_string(r.world_size));
  if (r.local_rank >= r.local_world_size)
    throw Error(local_rank_var + " = " + std::to_string(r.local_rank) + " is not below " + local_world_var + " = " +
                std::to_string(r.local_world_size));
  if (r.master_port < 1 || r.master_port > 65535)
    throw Error("MASTER_PORT = " + std::to_string(r.master_port) + ": expected a TCP port 1..65535");
}

void read_master(const Reader& in, Rendezvous& r, const std::string& who) {
  if (auto addr = in.env("MASTER_ADDR"); addr && !addr->empty())
    r.master_addr = *addr;
  else if (r.world_size > 1)
    throw Error("MASTER_ADDR is not set (" + who + " with " + std::to_string(r.world_size) +
                " ranks needs the address of rank 0's host)");
  if (auto port = in.optional_int("MASTER_PORT", 1)) r.master_port = *port;
}

Rendezvous from_torchrun(const Reader& in) {
  Rendezvous r;
  r.launcher = "torchrun";
  r.world_size = in.required_int("WORLD_SIZE", 1, " (RANK is set: torchrun-style launch needs both)");
  r.rank = in.required_int("RANK", 0, " (WORLD_SIZE is set: torchrun-style launch needs both)");
  const std::string where = " (RANK = " + std::to_string(r.rank) + ", WORLD_SIZE = " + std::to_string(r.world_size) +
                            "): set it to the rank's index on its node";
  r.local_rank =
      r.world_size > 1 ? in.required_int("LOCAL_RANK", 0, where) : in.optional_int("LOCAL_RANK", 0).value_or(0);
  // Unknown node size: assume one node (only CPU-affinity splitting uses it).
  r.local_world_size = in.optional_int("LOCAL_WORLD_SIZE", 1).value_or(r.world_size);
  read_master(in, r, "torchrun-style launch");
  check_consistent(r, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return r;
}

Rendezvous from_openmpi(const Reader& in) {
  Rendezvous r;
  r.launcher = "openmpi";
  r.rank = in.required_int("OMPI_COMM_WORLD_RANK", 0, "");
  r.world_size = in.required_int("OMPI_COMM_WORLD_SIZE", 1, " (OMPI_COMM_WORLD_RANK is set)");
  r.local_rank = in.optional_int("OMPI_COMM_WORLD_LOCAL_RANK", 0).value_or(0);
  r.local_world_size = in.optional_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(r.world_size);
  read_master(in, r, "Open MPI");
  check_consistent(r, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "OMPI_COMM_WORLD_LOCAL_SIZE");
  return r;
}

Rendezvous from_slurm(const Reader& in) {
  Rendezvous r;
  r.launcher = "slurm";
  r.rank = in.required_int("SLURM_PROCID", 0, "");
  const std::string world_var = in.has("SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
  r.world_size = in.required_int(world_var, 1, " (SLURM_PROCID is set: run bertx under srun)");
  r.local_rank = in.optional_int("SLURM_LOCALID", 0).value_or(0);
  r.local_world_size = r.world_size;
  for (const char* v : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
    if (auto list = in.env(v); list && !list->empty()) {
      r.local_world_size = slurm_tasks_on_node(*list, in.optional_int("SLURM_NODEID", 0).value_or(0), v);
      break;
    }
  if (auto addr = in.env("MASTER_ADDR"); addr && !addr->empty()) {
    r.master_addr = *addr;
  } else if (r.world_size > 1) {
    std::string var = "SLURM_JOB_NODELIST";
    auto list = in.env(var);
    if (!list) list = in.env(var = "SLURM_NODELIST");
    if (!list || list->empty())
      throw Error("SLURM_JOB_NODELIST is not set (SLURM_NTASKS = " + std::to_string(r.world_size) +
                  "): set MASTER_ADDR to rank 0's host");
    r.master_addr = first_slurm_host(*list, var);
  }
  if (auto port = in.optional_int("MASTER_PORT", 1)) r.master_port = *port;
  check_consistent(r, "SLURM_PROCID", world_var, "SLURM_LOCALID", "SLURM_TASKS_PER_NODE");
  return r;
}

}  // namespace

std::string Rendezvous::describe() const {
  return "rank " + std::to_string(rank) + "/" + std::to_string(world_size) + " (local " + std::to_string(local_rank) +
         "/" + std::to_string(local_world_size) + ", " + launcher + ", master " + master_addr + ":" +
         std::to_string(master_port) + ")";
}

std::string first_slurm_host(const std::string& nodelist, const std::string& variable) {
  std::string host;
  std::size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    const char c = nodelist[i];
    if (c == '[') {
      const std::size_t close = nodelist.find(']', i);
      if (close == std::string::npos) throw Error(variable + " = '" + nodelist + "': '[' without ']'");
      // "01-04,07" -> "01": the first number of the first range, zero padding kept.
      const std::string inside = nodelist.substr(i + 1, close - i - 1);
      const std::string first = inside.substr(0, inside.find_first_of(",-"));
      if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos)
        throw Error(variable + " = '" + nodelist + "': expected a number range inside [...]");
      host += first;
      i = close + 1;
    } else if (c == ']') {
      throw Error(variable + " = '" + nodelist + "': ']' without '['");
    } else if (c == ' ') {
      ++i;
    } else {
      host += c;
      ++i;
    }
  }
  if (host.empty()) throw Error(variable + " = '" + nodelist + "': no host name in it");
  return host;
}

int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id, const std::string& variable) {
  // "8(x2),4": 8 tasks on each of the first 2 nodes, then 4.
  int node = 0;
  std::size_t i = 0;
  while (i <= tasks_per_node.size()) {
    std::size_t end = tasks_per_node.find(',', i);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(i, end - i);
    const std::size_t paren = item.find("(x");
    const int tasks = parse_int(variable, item.substr(0, paren), 1);
    int repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')') throw Error(variable + " = '" + tasks_per_node + "': expected N or N(xR) items");
      repeat = parse_int(variable, item.substr(paren + 2, item.size() - paren - 3), 1);
    }
    if (node_id < node + repeat) return tasks;
    node += repeat;
    i = end + 1;
  }
  throw Error(variable + " = '" + tasks_per_node + "' lists " + std::to_string(node) +
              " node(s), not SLURM_NODEID = " + std::to_string(node_id));
}

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  std::size_t items = 0;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (++items > 16) return out + ", ...";
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out;
}

std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) return "";
  std::string out;
  for (addrinfo* a = found; a && out.empty(); a = a->ai_next) {
    const int s = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {};
    if (connect(s, a->ai_addr, a->ai_addrlen) == 0 && getsockname(s, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* addr = local.ss_family == AF_INET
                             ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                             : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, addr, text, sizeof text)) out = text;
    }
    close(s);
  }
  freeaddrinfo(found);
  return out;
}

std::string name_peers(const std::string& message, const std::vector<std::string>& addresses,
                       const std::vector<std::string>& hosts, int own_rank) {
  std::vector<std::string> seen;
  std::string out;
  for (std::size_t r = 0; r < addresses.size(); ++r) {
    const std::string& addr = addresses[r];
    if (addr.empty() || static_cast<int>(r) == own_rank || message.find("[" + addr + "]") == std::string::npos)
      continue;
    if (std::find(seen.begin(), seen.end(), addr) != seen.end()) continue;
    seen.push_back(addr);
    std::vector<int> ranks;
    for (std::size_t q = 0; q < addresses.size(); ++q)
      if (addresses[q] == addr && static_cast<int>(q) != own_rank) ranks.push_back(static_cast<int>(q));
    out += (out.empty() ? " (" : "; ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(ranks) +
           " on " + (r < hosts.size() ? hosts[r] : addr);
  }
  return out.empty() ? out : out + ")";
}

Rendezvous parse_rendezvous(const EnvLookup& env) {
  Reader in{env};
  if (in.has("RANK") || in.has("WORLD_SIZE")) return from_torchrun(in);
  if (in.has("OMPI_COMM_WORLD_RANK") || in.has("OMPI_COMM_WORLD_SIZE")) return from_openmpi(in);
  if (in.has("SLURM_PROCID")) return from_slurm(in);
  Rendezvous single;
  if (auto port = in.optional_int("MASTER_PORT", 1)) single.master_port = *port;
  return single;
}

Rendezvous rendezvous_from_env() {
  return parse_rendezvous([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  });
}

}  // namespace bertx
