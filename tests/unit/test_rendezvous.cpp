// test_rendezvous.cpp - launcher environments -> Rendezvous: torchrun, Open MPI, SLURM (node lists in
// their compressed forms, tasks per node), precedence, single process, and one-line errors naming the
// variable. Most cases use a map as the environment; a few go through the real one with setenv. Also the
// address helpers of jobs across hosts.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>

#include "bertx/error.hpp"
#include "host/rendezvous.hpp"

using bertx::Rendezvous;

namespace {

Rendezvous parse(const std::map<std::string, std::string>& env) {
  return bertx::parse_rendezvous([&](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}

std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    parse(env);
  } catch (const bertx::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Clears every variable the parser reads, restoring them at the end of the test.
struct CleanEnv {
  std::map<std::string, std::optional<std::string>> saved;
  CleanEnv() {
    for (const char* v :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID",
          "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_NODEID",
          "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"}) {
      const char* value = std::getenv(v);
      saved[v] = value ? std::optional<std::string>(value) : std::nullopt;
      unsetenv(v);
    }
  }
  ~CleanEnv() {
    for (const auto& [k, v] : saved)
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
  }
};

}  // namespace

TEST_CASE("no launcher variables mean a single process") {
  CleanEnv clean;
  const Rendezvous r = bertx::rendezvous_from_env();
  CHECK(r.rank == 0);
  CHECK(r.world_size == 1);
  CHECK(r.local_rank == 0);
  CHECK(r.launcher == "single");
  CHECK_FALSE(r.distributed());
}

TEST_CASE("torchrun variables from the real environment") {
  CleanEnv clean;
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "16", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "8", 1);
  setenv("MASTER_ADDR", "node01", 1);
  setenv("MASTER_PORT", "1234", 1);
  const Rendezvous r = bertx::rendezvous_from_env();
  CHECK(r.rank == 5);
  CHECK(r.world_size == 16);
  CHECK(r.local_rank == 1);
  CHECK(r.local_world_size == 8);
  CHECK(r.master_addr == "node01");
  CHECK(r.master_port == 1234);
  CHECK(r.launcher == "torchrun");
  CHECK(r.describe() == "rank 5/16 (local 1/8, torchrun, master node01:1234)");
}

TEST_CASE("torchrun defaults: port 29500 and a single-node local world") {
  const Rendezvous r = parse({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}});
  CHECK(r.master_port == 29500);
  CHECK(r.local_world_size == 2);
  const Rendezvous one = parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  CHECK(one.world_size == 1);
  CHECK(one.master_addr == "127.0.0.1");
}

TEST_CASE("torchrun errors name the variable") {
  CHECK(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"}}) ==
        "RANK = 2 is not below WORLD_SIZE = 2");
  CHECK(error_of({{"RANK", "x1"}, {"WORLD_SIZE", "2"}}) == "RANK = 'x1': expected an integer");
  CHECK(error_of({{"RANK", "1"}, {"WORLD_SIZE", "2 "}}) == "WORLD_SIZE = '2 ': expected an integer");
  CHECK(error_of({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}) == "RANK = -1: expected an integer >= 0");
  CHECK(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}) == "WORLD_SIZE = 0: expected an integer >= 1");
  CHECK(error_of({{"RANK", "0"}}).starts_with("WORLD_SIZE is not set"));
  CHECK(error_of({{"WORLD_SIZE", "4"}}).starts_with("RANK is not set"));
  CHECK(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}).starts_with("MASTER_ADDR is not set"));
  CHECK(error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).starts_with("LOCAL_RANK is not set"));
  CHECK(
      error_of(
          {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "1"}, {"MASTER_ADDR", "h"}}) ==
      "LOCAL_RANK = 1 is not below LOCAL_WORLD_SIZE = 1");
  CHECK(
      error_of(
          {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}) ==
      "MASTER_PORT = 70000: expected a TCP port 1..65535");
  CHECK(error_of(
            {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "http"}}) ==
        "MASTER_PORT = 'http': expected an integer");
}

TEST_CASE("Open MPI variables") {
  const Rendezvous r = parse({{"OMPI_COMM_WORLD_RANK", "3"},
                              {"OMPI_COMM_WORLD_SIZE", "8"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                              {"MASTER_ADDR", "head"}});
  CHECK(r.launcher == "openmpi");
  CHECK(r.rank == 3);
  CHECK(r.world_size == 8);
  CHECK(r.local_rank == 3);
  CHECK(r.local_world_size == 4);
  CHECK(r.master_addr == "head");
  CHECK(r.master_port == 29500);
  CHECK(error_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}})
            .starts_with("MASTER_ADDR is not set (Open MPI"));
  CHECK(error_of({{"OMPI_COMM_WORLD_RANK", "9"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"MASTER_ADDR", "h"}}) ==
        "OMPI_COMM_WORLD_RANK = 9 is not below OMPI_COMM_WORLD_SIZE = 8");
}

TEST_CASE("SLURM variables with the master from the node list") {
  CleanEnv clean;
  setenv("SLURM_PROCID", "9", 1);
  setenv("SLURM_NTASKS", "16", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NODEID", "1", 1);
  setenv("SLURM_TASKS_PER_NODE", "8(x2)", 1);
  setenv("SLURM_JOB_NODELIST", "dgx[07-08]", 1);
  const Rendezvous r = bertx::rendezvous_from_env();
  CHECK(r.launcher == "slurm");
  CHECK(r.rank == 9);
  CHECK(r.world_size == 16);
  CHECK(r.local_rank == 1);
  CHECK(r.local_world_size == 8);
  CHECK(r.master_addr == "dgx07");
  CHECK(r.master_port == 29500);
  setenv("MASTER_ADDR", "explicit", 1);
  setenv("MASTER_PORT", "6000", 1);
  const Rendezvous m = bertx::rendezvous_from_env();
  CHECK(m.master_addr == "explicit");
  CHECK(m.master_port == 6000);
}

TEST_CASE("SLURM errors and fallbacks") {
  CHECK(parse({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).world_size == 1);
  CHECK(parse({{"SLURM_PROCID", "1"}, {"SLURM_NPROCS", "2"}, {"SLURM_NODELIST", "a,b"}}).master_addr == "a");
  CHECK(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}).starts_with("SLURM_JOB_NODELIST is not set"));
  CHECK(error_of({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n1"}}) ==
        "SLURM_PROCID = 2 is not below SLURM_NTASKS = 2");
  CHECK(error_of({{"SLURM_PROCID", "0"}}).starts_with("SLURM_NPROCS is not set"));
  CHECK(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "two"}}) == "SLURM_NTASKS = 'two': expected an integer");
  CHECK(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n[1-2"}}) ==
        "SLURM_JOB_NODELIST = 'n[1-2': '[' without ']'");
}

TEST_CASE("precedence: torchrun over Open MPI over SLURM") {
  const std::map<std::string, std::string> slurm = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}};
  auto both = slurm;
  both.insert({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  CHECK(parse(both).launcher == "openmpi");
  both.insert({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  CHECK(parse(both).launcher == "torchrun");
}

TEST_CASE("first host of SLURM node lists") {
  using bertx::first_slurm_host;
  CHECK(first_slurm_host("node01") == "node01");
  CHECK(first_slurm_host("node[01-04,07]") == "node01");
  CHECK(first_slurm_host("node[07,01-04]") == "node07");
  CHECK(first_slurm_host("gpu[3],cpu[1-2]") == "gpu3");
  CHECK(first_slurm_host("a,b,c") == "a");
  CHECK(first_slurm_host("rack1-node[003-005]") == "rack1-node003");
  CHECK(first_slurm_host("r[1-2]-n[08-09]") == "r1-n08");
  CHECK(first_slurm_host("x[10-11]y") == "x10y");
  CHECK_THROWS_WITH_AS(first_slurm_host("node[a-b]"),
                       "SLURM_JOB_NODELIST = 'node[a-b]': expected a number range inside [...]", bertx::Error);
  CHECK_THROWS_WITH_AS(first_slurm_host("n]1"), "SLURM_JOB_NODELIST = 'n]1': ']' without '['", bertx::Error);
  CHECK_THROWS_WITH_AS(first_slurm_host(""), "SLURM_JOB_NODELIST = '': no host name in it", bertx::Error);
}

TEST_CASE("SLURM tasks per node") {
  using bertx::slurm_tasks_on_node;
  CHECK(slurm_tasks_on_node("8", 0, "V") == 8);
  CHECK(slurm_tasks_on_node("8(x2),4", 0, "V") == 8);
  CHECK(slurm_tasks_on_node("8(x2),4", 1, "V") == 8);
  CHECK(slurm_tasks_on_node("8(x2),4", 2, "V") == 4);
  CHECK(slurm_tasks_on_node("2,3,1", 1, "V") == 3);
  CHECK_THROWS_WITH_AS(slurm_tasks_on_node("8(x2)", 2, "V"), "V = '8(x2)' lists 2 node(s), not SLURM_NODEID = 2",
                       bertx::Error);
  CHECK_THROWS_WITH_AS(slurm_tasks_on_node("8(x2", 0, "V"), "V = '8(x2': expected N or N(xR) items", bertx::Error);
}

TEST_CASE("across hosts: rank lists, the local address towards the master, peers named by address") {
  CHECK(bertx::rank_ranges({1, 3, 4, 5, 9}) == "1, 3-5, 9");
  CHECK(bertx::rank_ranges({}).empty());
  CHECK(bertx::local_address_towards("127.0.0.1", 29500) == "127.0.0.1");
  CHECK(bertx::local_address_towards("", 29500).empty());
  const std::vector<std::string> addresses = {"10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"};
  const std::vector<std::string> hosts = {"node1", "node1", "node2", "node2"};
  // Gloo's wording for a peer that died; the address of rank 2 and 3's host, seen from rank 0.
  CHECK(bertx::name_peers("Connection closed by peer [10.0.0.2]:4711", addresses, hosts, 0) == " (ranks 2-3 on node2)");
  CHECK(bertx::name_peers("Connection closed by peer [10.0.0.1]:4711", addresses, hosts, 0) == " (rank 1 on node1)");
  CHECK(
      bertx::name_peers("Connection closed by peer [10.0.0.12]:4711", addresses, hosts, 0).empty());  // no prefix match
  CHECK(bertx::name_peers("Operation timed out!", addresses, hosts, 0).empty());
  CHECK(bertx::name_peers("peer [10.0.0.2]", {}, {}, 0).empty());  // world size 1: no addresses
}
