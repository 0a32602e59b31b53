// test_data_parallel.cpp - DataParallel across two real processes (Gloo over a TCPStore on 127.0.0.1,
// a free port): each case starts dist_worker twice with torchrun-style variables and expects both
// ranks to report success. The checks themselves live in dist_worker.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

struct RankResult {
  int exit_code = -1;
  std::string output;
};

// Runs `dist_worker <args>` as ranks `ranks` of a world of 2; returns each rank's exit code and output.
std::vector<RankResult> run_ranks(const std::string& args, std::vector<int> ranks = {0, 1}) {
  bertx::test::TempDir d;
  const int port = bertx::test::free_port();
  std::string cmd = "cd " + d.path.string() + " && { ";
  for (int r : ranks)
    cmd += "( RANK=" + std::to_string(r) + " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) +
           " LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
           " OMP_NUM_THREADS=1 timeout 120 " + DIST_WORKER + " " + args + " > out" + std::to_string(r) +
           " 2>&1; echo $? > rc" + std::to_string(r) + " ) & ";
  cmd += "wait; }";
  bertx::test::run_command(cmd);
  std::vector<RankResult> out;
  for (int r : ranks) {
    const std::string rc = bertx::test::read_text(d / ("rc" + std::to_string(r)));
    out.push_back({rc.empty() ? -1 : std::stoi(rc), bertx::test::read_text(d / ("out" + std::to_string(r)))});
  }
  return out;
}

void expect_all_ok(const std::vector<RankResult>& results) {
  for (std::size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r << " output:\n" << results[r].output);
    CHECK(results[r].exit_code == 0);
  }
}

}  // namespace

TEST_CASE("two ranks: broadcast and bucketed gradient averaging with buckets smaller than a tensor") {
  auto results = run_ranks("grads 0.00001");
  expect_all_ok(results);
  CHECK(results[0].output.find("6 bucket(s)") != std::string::npos);
}

TEST_CASE("two ranks: one bucket larger than every gradient together") {
  auto results = run_ranks("grads 25");
  expect_all_ok(results);
  CHECK(results[0].output.find("1 bucket(s)") != std::string::npos);
}

TEST_CASE("two ranks: a few buckets of about 300 bytes") {
  auto results = run_ranks("grads 0.0003");
  expect_all_ok(results);
  CHECK(results[0].output.find("4 bucket(s)") != std::string::npos);
}

TEST_CASE("two ranks with different models are refused by broadcast_parameters") {
  expect_all_ok(run_ranks("mismatch"));
}

TEST_CASE("a collective with a rank gone fails with an error naming the rank instead of hanging") {
  expect_all_ok(run_ranks("peer-dies"));
}

TEST_CASE("a rendezvous missing a rank times out and lists it") { expect_all_ok(run_ranks("alone", {0})); }
