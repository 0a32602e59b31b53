// test_launch.cpp - `bertx launch` as a user runs it: two local ranks of `bertx launch-check` pass and
// exit 0; a rank that fails stops the job with an error naming it and its exit code; a rendezvous
// missing ranks times out listing them; SIGTERM to the launcher reaches the ranks; argument errors.
// Also the SLURM batch script: `bash -n` and a dry run with faked SLURM variables.
#include <doctest/doctest.h>

#include <string>

#include "test_util.hpp"

using bertx::test::run_command;

static const std::string kBertx = BERTX_BIN;
static const std::string kSrc = BERTX_SOURCE_DIR;

static bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST_CASE("bertx launch runs two ranks of launch-check and exits 0") {
  auto r = run_command(kBertx + " launch --nproc-per-node 2 -- launch-check --size-mb 1 --timeout 60");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "[rank 0] rank 0/2 joined from "));
  CHECK(has(r.output, "[rank 1] rank 1/2 joined from "));
  CHECK(has(r.output, "[rank 0] launch-check: all-reduce sum 3 (expected 3)"));
  CHECK(has(r.output, "[rank 0] launch-check: OK"));
}

TEST_CASE("bertx launch runs any bertx command on every rank") {
  bertx::test::TempDir d;
  auto r = run_command(kBertx + " launch --nproc-per-node 2 -- runs --store " + (d / "a.db") + " list");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "[rank 0] 0 run(s) in"));
  CHECK(has(r.output, "[rank 1] 0 run(s) in"));
}

TEST_CASE("a failing rank stops the job and the error names it") {
  auto r = run_command(
      kBertx + " launch --nproc-per-node 2 --grace-seconds 5 -- launch-check --size-mb 1 --timeout 60 --fail-rank 1");
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(has(r.output, "bertx: error: rank 1 (local rank 1 on "));
  CHECK(has(r.output,
            "exited with code 3: bertx: error: rank 1: failing on purpose (--fail-rank 1); stopped the other 1 local "
            "rank(s)"));
}

TEST_CASE("a bad command fails on every rank with the rank's own message") {
  auto r = run_command(kBertx + " launch --nproc-per-node 2 -- runs show");
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(has(r.output, "bertx: error: rank "));
}

TEST_CASE("a rendezvous missing the ranks of another node times out listing them") {
  auto r = run_command(kBertx +
                       " launch --nproc-per-node 2 --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port " +
                       std::to_string(bertx::test::free_port()) + " -- launch-check --timeout 3");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, "timed out after 3 s: 2/4 ranks joined, missing rank(s) 2-3"));
}

TEST_CASE("SIGTERM to the launcher is forwarded to the ranks") {
  // SIGTERM once the launcher has its handlers (it prints its first line after installing them): a fixed
  // sleep raced the start-up on a loaded machine.
  bertx::test::TempDir d;
  const std::string log = d / "launch.log";
  auto r = run_command(
      "{ " + kBertx + " launch --nproc-per-node 2 --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port " +
      std::to_string(bertx::test::free_port()) + " -- launch-check --timeout 60 > " + log +
      " 2>&1 & pid=$!; for i in $(seq 600); do grep -q 'rank(s) here' " + log +
      " && break; sleep 0.05; done; sleep 0.5; kill -TERM $pid; wait $pid; echo \"launcher exit $?\"; cat " + log +
      "; }");
  INFO(r.output);
  CHECK(has(r.output, "bertx launch: Terminated received, forwarding it to the ranks"));
  CHECK(has(r.output, "launcher exit 143"));
}

TEST_CASE("bertx launch argument errors are one line") {
  auto r = run_command(kBertx + " launch --nproc-per-node 2 --nnodes 2 -- launch-check");
  CHECK(r.exit_code == 2);
  CHECK(r.output == "bertx: error: --master-addr is required with --nnodes 2 (the host of node rank 0)\n");
  r = run_command(kBertx + " launch --nproc-per-node 2 --nnodes 2 --node-rank 2 --master-addr h -- launch-check");
  CHECK(r.exit_code == 2);
  CHECK(r.output == "bertx: error: --node-rank 2: expected 0..1 (--nnodes 2)\n");
}

TEST_CASE("the SLURM script parses and its dry run shows both phases") {
  const std::string script = kSrc + "/tools/slurm/run_pretraining.sub";
  auto syntax = run_command("bash -n " + script);
  INFO(syntax.output);
  CHECK(syntax.exit_code == 0);
  bertx::test::TempDir d;
  auto r = run_command("cd " + d.path.string() +
                       " && DRY_RUN=1 SLURM_JOB_ID=42 SLURM_NNODES=2 SLURM_JOB_NODELIST='dgx[01-02]' " +
                       "SLURM_NTASKS=16 BERTX=" + kBertx + " BERTX_ROOT=" + kSrc + " bash " + script);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "srun"));
  CHECK(has(r.output, "run " + kSrc + "/experiments/phase1.toml"));
  CHECK(has(r.output, "run " + kSrc + "/experiments/phase2.toml"));
  CHECK(has(r.output, "2 node(s): dgx[01-02], 16 rank(s)"));
}
