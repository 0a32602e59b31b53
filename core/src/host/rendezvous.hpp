// rendezvous.hpp - who am I in a multi-process job: rank, world size, local rank and the master's
// address, read from the environment the usual launchers set. No LibTorch here (bertx_core).
//
// Precedence (first match wins): torchrun / `bertx launch` (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) > Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/
// LOCAL_SIZE + MASTER_ADDR/MASTER_PORT) > SLURM srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the
// first host of SLURM_JOB_NODELIST unless MASTER_ADDR is set) > a single process.
// MASTER_PORT defaults to 29500. Bad values throw a one-line bertx::Error naming the variable. Also the
// address helpers of a job across hosts (which local address reaches the master, which rank an address is).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace bertx {

struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // index on this node: the GPU a rank binds
  int local_world_size = 1;  // ranks on this node
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "single";  // "torchrun" | "openmpi" | "slurm" | "single"

  bool distributed() const { return world_size > 1; }
  // "rank 1/8 (local 1/8, slurm, master node01:29500)"
  std::string describe() const;
};

// Returns the value of an environment variable, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Parses a launcher's environment (see the file comment).
Rendezvous parse_rendezvous(const EnvLookup& env);
// parse_rendezvous over this process's environment (getenv).
Rendezvous rendezvous_from_env();

// First host of a SLURM node list: "node[01-04,07],gpu3" -> "node01", "a[1-2]-ib[3-4]" -> "a1-ib3".
// `variable` names the source in errors.
std::string first_slurm_host(const std::string& nodelist, const std::string& variable = "SLURM_JOB_NODELIST");

// Tasks on node `node_id` from a SLURM tasks-per-node list: ("8(x2),4", 2) -> 4.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id, const std::string& variable);

// Ranks as "1, 3-5, 9" (sorted input; at most 16 items, then ", ...").
std::string rank_ranges(const std::vector<int>& ranks);

// This host's address on the route to host:port: the source address a TCP connection to it would use (a UDP
// socket's connect() picks the route and sends nothing). "" when host does not resolve or is unreachable.
std::string local_address_towards(const std::string& host, int port);

// " (rank 1 on host-b)" when `message` names a peer by address in brackets ("[10.0.0.2]:port", as Gloo's errors
// do), "" otherwise. addresses[r] / hosts[r]: rank r's address towards the master and host name; own_rank is left out.
std::string name_peers(const std::string& message, const std::vector<std::string>& addresses,
                       const std::vector<std::string>& hosts, int own_rank);

}  // namespace bertx
