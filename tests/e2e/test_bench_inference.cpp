// test_bench_inference.cpp - `bertx bench inference` on the tiny preset (CPU): prints sequences/s and
// latency average/p50/p90/p95/p99 that are consistent (positive, ordered, throughput = batch / average
// latency), and refuses a sequence longer than the model's position table with one line.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "test_util.hpp"

TEST_CASE("bench inference reports throughput and ordered latency percentiles") {
  auto r = bertx::test::run_command(std::string(BERTX_BIN) +
                                    " bench inference --preset tiny --batch-size 2 --seq-len 32 --warmup 1 --iterations 8 --device cpu --threads 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  double sps = 0, avg = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0;
  const auto at = r.output.find("sequences/s");
  REQUIRE(at != std::string::npos);
  REQUIRE(std::sscanf(r.output.c_str() + at, "sequences/s %lf latency avg %lf ms, p50 %lf ms, p90 %lf ms, p95 %lf ms, p99 %lf ms",
                      &sps, &avg, &p50, &p90, &p95, &p99) == 6);
  CHECK(avg > 0);
  CHECK(p50 <= p90);
  CHECK(p90 <= p95);
  CHECK(p95 <= p99);
  CHECK(sps == doctest::Approx(2 * 1000.0 / avg).epsilon(0.01));
}

TEST_CASE("bench inference refuses a sequence longer than max_position_embeddings") {
  auto r = bertx::test::run_command(std::string(BERTX_BIN) + " bench inference --preset tiny --seq-len 600 --iterations 1 --device cpu");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--seq-len 600 > the model's max_position_embeddings 512") != std::string::npos);
}
