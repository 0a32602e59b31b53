// test_bench_inference.cpp - `bertx bench infer` / `bench inference` on the tiny preset (CPU): prints sequences/s
// and latency average/p50/p90/p95/p99 that are consistent (positive, ordered, throughput = batch / average
// latency) and a JSON last line that agrees with them (and names the CPU's native bf16 as /proc/cpuinfo does, warning
// when bf16 is emulated); refuses a sequence longer than the model's position
// table with one line. `bertx bench train`'s JSON last line agrees with the run store's bench metrics.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace {
// The x86 feature flags /proc/cpuinfo lists for the first CPU, space-padded (" avx512f ... "), or "" elsewhere.
std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0 && line.find(':') != std::string::npos)
      return " " + line.substr(line.find(':') + 1) + " ";
  return "";
}

nlohmann::json last_json_line(const std::string& output) {
  const auto end = output.find_last_not_of('\n');
  const auto start = output.rfind('\n', end);
  return nlohmann::json::parse(output.substr(start == std::string::npos ? 0 : start + 1, end - start));
}
}  // namespace

TEST_CASE("bench inference reports throughput and ordered latency percentiles") {
  auto r = bertx::test::run_command(
      std::string(BERTX_BIN) +
      " bench inference --preset tiny --batch-size 2 --seq-len 32 --warmup 1 --iterations 8 --device cpu --threads 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  double sps = 0, avg = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0;
  const auto at = r.output.find("sequences/s");
  REQUIRE(at != std::string::npos);
  REQUIRE(std::sscanf(r.output.c_str() + at,
                      "sequences/s %lf latency avg %lf ms, p50 %lf ms, p90 %lf ms, p95 %lf ms, p99 %lf ms", &sps, &avg,
                      &p50, &p90, &p95, &p99) == 6);
  CHECK(avg > 0);
  CHECK(p50 <= p90);
  CHECK(p90 <= p95);
  CHECK(p95 <= p99);
  CHECK(sps == doctest::Approx(2 * 1000.0 / avg).epsilon(0.01));

  auto j = bertx::test::run_command(std::string(BERTX_BIN) +
                                    " bench infer --task squad --model tiny --batch 2 --seq-len 32 --warmup 1 "
                                    "--steps 8 --device cpu --threads 1 --precision amp-bf16");
  INFO(j.output);
  REQUIRE(j.exit_code == 0);
  const auto last = last_json_line(j.output);
  CHECK(last.at("sequences_per_second").get<double>() ==
        doctest::Approx(2 * 1000.0 / last.at("step_ms_median").get<double>()));
  CHECK(last.at("latency_ms_p50").get<double>() <= last.at("latency_ms_p99").get<double>());
  CHECK(last.at("peak_rss_mb").get<double>() > 10);
  CHECK(last.at("process").at("intra_op_threads") == 1);
  // Native bf16 as the kernel lists it: bertx's CPUID reading agrees, and warns exactly when bf16 is emulated.
  const std::string flags = cpu_flags();
  const std::string expected = flags.empty()                                      ? ""
                               : flags.find(" amx_bf16 ") != std::string::npos    ? "AMX-BF16"
                               : flags.find(" avx512_bf16 ") != std::string::npos ? "AVX512-BF16"
                                                                                  : "none";
  if (!expected.empty()) {
    CHECK(last.at("process").at("cpu_bf16") == expected);
    CHECK((j.output.find("warning: this CPU multiplies bf16 without hardware support") != std::string::npos) ==
          (expected == "none"));
  }
}

TEST_CASE("bench train ends with a JSON line that agrees with the run store") {
  bertx::test::TempDir d;
  auto r = bertx::test::run_command(std::string(BERTX_BIN) +
                                    " bench train --model tiny --batch 2 --seq-len 32 --max-preds 5 --warmup 1 "
                                    "--steps 3 --device cpu --threads 1 --optimizer adamw --out " +
                                    (d / "out") + " --store " + (d / "runs.db"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto last = last_json_line(r.output);
  const double sps = last.at("sequences_per_second").get<double>(), median = last.at("step_ms_median").get<double>();
  CHECK(sps == doctest::Approx(2 * 1000.0 / median));
  CHECK(median <= last.at("step_ms_p90").get<double>());
  CHECK(last.at("peak_rss_mb").get<double>() > 10);
  CHECK(r.output.find(" sequences/s (median step ") != std::string::npos);
  auto bad =
      bertx::test::run_command(std::string(BERTX_BIN) + " bench train --model " + d.path.string() + " --steps 1");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("is a folder without config.json") != std::string::npos);
}

TEST_CASE("bench infer --lengths pads batches to the given real lengths and names a bad line") {
  bertx::test::TempDir d;
  bertx::test::write_text(d / "lengths.txt", "8\n32\n\n16\n");  // (8 + 32 + 16) / 3 / 32 of the positions are real
  for (const char* padded : {"", " --padded"}) {
    CAPTURE(padded);
    auto r = bertx::test::run_command(std::string(BERTX_BIN) +
                                      " bench infer --task squad --model tiny --batch 2 --seq-len 32 "
                                      "--warmup 1 --steps 3 --device cpu --threads 1 --lengths " +
                                      (d / "lengths.txt") + padded);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto last = last_json_line(r.output);
    CHECK(last.at("real_token_fraction").get<double>() == doctest::Approx(56.0 / 96.0));  // 3 batches cycle all 6 slots
    CHECK(last.at("padded").get<bool>() == (padded[0] != 0));
  }
  bertx::test::write_text(d / "bad.txt", "8\n33\n");
  auto bad = bertx::test::run_command(std::string(BERTX_BIN) +
                                      " bench infer --model tiny --seq-len 32 --steps 1 --device cpu --lengths " +
                                      (d / "bad.txt"));
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("bad.txt:2: expected one sequence length in [1, 32]") != std::string::npos);
}

TEST_CASE("bench inference refuses a sequence longer than max_position_embeddings") {
  auto r = bertx::test::run_command(std::string(BERTX_BIN) +
                                    " bench inference --preset tiny --seq-len 600 --iterations 1 --device cpu");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--seq-len 600 > the model's max_position_embeddings 512") != std::string::npos);
}

TEST_CASE("a config.json number beyond double is a one-line error naming the file (found by fuzz_hf_config)") {
  bertx::test::TempDir d;
  bertx::test::write_text(d / "config.json", R"({"hidden_size": 61e308})");
  auto r = bertx::test::run_command(std::string(BERTX_BIN) + " bench infer --model " + d.path.string() +
                                    " --steps 1 --device cpu");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("config.json: not valid JSON") != std::string::npos);
}

TEST_CASE("a config.json integer beyond int64 is a one-line error naming the key, not a wrapped negative size") {
  bertx::test::TempDir d;
  bertx::test::write_text(d / "config.json",
                          R"({"vocab_size": 99, "hidden_size": 18446744073709551615, "num_hidden_layers": 1,
                              "num_attention_heads": 1, "intermediate_size": 4})");
  auto r = bertx::test::run_command(std::string(BERTX_BIN) + " bench infer --model " + d.path.string() +
                                    " --steps 1 --device cpu");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("config.json: key 'hidden_size' must be a 64-bit integer, got 18446744073709551615") !=
        std::string::npos);
}
