// test_train_dp.cpp - data-parallel training end to end on the CPU (Gloo): `bertx launch --nproc-per-node 2
// -- run` reaches the weights of one process with gradient accumulation 2 (same seed, data, dropout 0, fp32),
// only rank 0 writes the store, report and checkpoints, a killed rank stops the job (and the same launch resumes
// it from the last checkpoint), a stopped (hung) rank
// makes the others fail after [run] dist_timeout_s, and benchmark mode reports per-rank and total throughput.
#include "doctest_torch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bertx/dataset.hpp"
#include "base/build_info.hpp"
#include "host/plugin_host.hpp"
#include "io/safetensors.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

const std::string kBertx = BERTX_BIN;
constexpr int kSteps = 4;

// No dropout: the ranks' dropout masks would differ from the single process's.
const char* kTinyConfig = R"({"vocab_size": 1100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
 "attention_probs_dropout_prob": 0.0})";

// batch_size 4, no accumulation, kSteps steps, a checkpoint at the end only; 64 synthetic samples per epoch.
std::string experiment(const test::TempDir& d, const std::string& extra = "") {
  test::write_text(d / "config.json", kTinyConfig);
  test::write_text(
      d / "exp.toml",
      "[run]\nname = \"dp\"\nseed = 11\nthreads = 1\ndevice = \"cpu\"\ndist_timeout_s = 60\noutput_dir = \"" +
          (d / "out") + "\"\nstore = \"" + (d / "runs.db") + "\"\n[train]\nmax_steps = " + std::to_string(kSteps) +
          "\nbatch_size = 4\nlearning_rate = 1e-3\nwarmup_proportion = 0.25\nlog_freq = 1\n"
          "num_steps_per_checkpoint = 1000\nprecision = \"fp32\"\n" +
          extra + "[model]\ntype = \"bert\"\npreset = \"custom\"\nconfig = \"" + (d / "config.json") +
          "\"\n[optimizer]\ntype = \"nvlamb\"\n[task]\ntype = \"pretraining\"\n"
          "[data]\ntype = \"synthetic\"\nvocab_size = 1100\nseq_len = 32\nmax_predictions = 5\nsamples_per_epoch = "
          "64\n");
  return d / "exp.toml";
}

std::string launch(int ranks) {
  return kBertx + " launch --nproc-per-node " + std::to_string(ranks) + " --grace-seconds 5 -- ";
}

std::vector<RunRecord> runs_of(const std::string& store_path) { return RunStore::open(store_path)->list_runs(); }

int count_lines_with(const std::string& text, const std::string& what) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
  return n;
}

pid_t spawn(const std::string& command, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

void wait_for(const std::function<bool()>& ready, int seconds = 120) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!ready()) {
    REQUIRE(std::chrono::steady_clock::now() < until);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The pid of the launcher's child whose environment says RANK=<rank>, or 0.
pid_t rank_pid(pid_t launcher, int rank) {
  std::ifstream children("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children");
  for (pid_t child; children >> child;) {
    std::ifstream env("/proc/" + std::to_string(child) + "/environ");
    for (std::string var; std::getline(env, var, '\0');)
      if (var == "RANK=" + std::to_string(rank)) return child;
  }
  return 0;
}

// Waits for a spawned launcher; returns its exit code (-1 if not a normal exit) and how long it took.
std::pair<int, double> reap(pid_t pid) {
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

}  // namespace

TEST_CASE("synthetic reader: rank r of 2 gets batch 2j+r of one process and evaluation covers every sample once") {
  PluginHost host;
  host.load(std::string(BERTX_BUILD_PLUGIN_DIR) + "/libbertx_pretraining.so");
  auto reader = [&](const std::string& split, int rank, int world) {
    auto r = host.create<DatasetReader>(Kind::Dataset, "synthetic",
                                        Options("[data]", {{"vocab_size", std::int64_t{1100}},
                                                           {"seq_len", std::int64_t{16}},
                                                           {"max_predictions", std::int64_t{3}},
                                                           {"samples_per_epoch", std::int64_t{22}}}));
    r->open(DatasetContext{split, 4, rank, world, 7});
    return r;
  };
  auto one = reader("train", 0, 1);
  auto r0 = reader("train", 0, 2), r1 = reader("train", 1, 2);
  CHECK(one->samples_per_epoch() == 20);  // 5 whole batches of 4
  CHECK(r0->samples_per_epoch() == 8);    // 2 batches per rank: the 5th global batch is left out
  for (int j = 0; j < 4; ++j) {           // crosses into the second epoch
    INFO("rank batch " << j);
    at::Tensor a = one->next_batch()->at("input_ids"), b = one->next_batch()->at("input_ids");  // (4, 16) each
    if (j % 2 == 0 && j > 0) a = b, b = one->next_batch()->at("input_ids");  // one's epoch has a 5th batch: skip it
    CHECK(at::equal(r0->next_batch()->at("input_ids"), a));
    CHECK(at::equal(r1->next_batch()->at("input_ids"), b));
  }
  auto e0 = reader("eval", 0, 2), e1 = reader("eval", 1, 2), whole = reader("eval", 0, 1);
  CHECK(e0->samples_per_epoch() + e1->samples_per_epoch() == 22);
  std::vector<at::Tensor> split_rows, whole_rows;
  for (int g = 0;; ++g) {
    auto b = (g % 2 == 0 ? e0 : e1)->next_batch();
    if (!b) break;
    split_rows.push_back(b->at("input_ids"));
  }
  while (auto b = whole->next_batch()) whole_rows.push_back(b->at("input_ids"));
  CHECK(at::equal(at::cat(split_rows), at::cat(whole_rows)));  // (22, 16): batch g on rank g % 2, the last one short
  CHECK(at::cat(whole_rows).size(0) == 22);
}

TEST_CASE("2 ranks x batch 4 reach the weights of 1 process x batch 4 x accumulation 2") {
  test::TempDir one, two;
  auto r1 = test::run_command(kBertx + " run " + experiment(one) + " --set train.gradient_accumulation_steps=2");
  INFO(r1.output);
  REQUIRE(r1.exit_code == 0);
  auto r2 = test::run_command(launch(2) + "run " + experiment(two));
  INFO(r2.output);
  REQUIRE(r2.exit_code == 0);
  CHECK(r2.output.find("global batch 8 = 4 x 1 accumulation x 2 rank(s)") != std::string::npos);

  const std::string final_step = "out/bert/phase1/" + std::to_string(kSteps);
  TensorMap a = load_safetensors(one / (final_step + "/model.safetensors"));
  TensorMap b = load_safetensors(two / (final_step + "/model.safetensors"));
  REQUIRE(a.size() == b.size());
  double max_diff = 0, max_update = 0;
  for (const auto& [name, x] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    REQUIRE(x.sizes() == b.at(name).sizes());
    max_diff = std::max(max_diff, (x.to(at::kDouble) - b.at(name).to(at::kDouble)).abs().max().item<double>());
  }
  MESSAGE("max |w(2 ranks) - w(1 process, accumulation 2)| after " << kSteps << " steps: " << max_diff);
  CHECK(max_diff <= 1e-6);

  // The comparison can fail: the same run without accumulation (half the data per step) lands elsewhere.
  test::TempDir half;
  auto r3 = test::run_command(kBertx + " run " + experiment(half));
  REQUIRE(r3.exit_code == 0);
  TensorMap c = load_safetensors(half / (final_step + "/model.safetensors"));
  for (const auto& [name, x] : a) max_update = std::max(max_update, (x - c.at(name)).abs().max().item<double>());
  CHECK(max_update > 1e-4);

  // The logged loss is the average over ranks = the average over the single process's micro-batches.
  auto single = RunStore::open(one / "runs.db"), multi = RunStore::open(two / "runs.db");
  const auto la = single->metrics(single->list_runs()[0].id, "loss"),
             lb = multi->metrics(multi->list_runs()[0].id, "loss");
  REQUIRE(la.size() == static_cast<std::size_t>(kSteps));
  REQUIRE(lb.size() == static_cast<std::size_t>(kSteps));  // one row per step: rank 1 logged nothing
  for (int i = 0; i < kSteps; ++i)
    CHECK(lb[static_cast<std::size_t>(i)].value ==
          doctest::Approx(la[static_cast<std::size_t>(i)].value).epsilon(1e-5));
}

TEST_CASE("only rank 0 writes the run record report and checkpoints and the record lists both ranks") {
  test::TempDir d;
  auto r = test::run_command(launch(2) + "run " + experiment(d));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto runs = runs_of(d / "runs.db");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Finished);
  CHECK(runs[0].world_size == 2);
  REQUIRE(runs[0].hosts.size() == 2);
  CHECK(runs[0].hosts[0] == host_name());
  CHECK(runs[0].hosts[1] == host_name());
  const std::string report = test::read_text(d / "out/report.jsonl");
  CHECK(count_lines_with(report, "\"type\":\"start\"") == 1);
  CHECK(count_lines_with(report, "\"type\":\"summary\"") == 1);
  CHECK(count_lines_with(report, "\"type\":\"step\"") == kSteps);
  CHECK(fs::exists(d / "out/config.toml"));
  // Progress lines appear once, from rank 0; the others log at debug level.
  CHECK(count_lines_with(r.output, "step 1/" + std::to_string(kSteps)) == 1);
  CHECK(count_lines_with(r.output, "[rank 0]") > 0);
  CHECK(runs_of(d / "runs.db")[0].status == RunStatus::Finished);

  // A restarted job continues from the checkpoint on every rank: no new record.
  auto again =
      test::run_command(launch(2) + "run " + experiment(d) + " --set train.max_steps=" + std::to_string(kSteps + 2));
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK(again.output.find("continuing run 1 from its checkpoint at step " + std::to_string(kSteps)) !=
        std::string::npos);
  CHECK(runs_of(d / "runs.db").size() == 1);
  CHECK(fs::exists(d / ("out/bert/phase1/" + std::to_string(kSteps + 2) + "/model.safetensors")));
}

TEST_CASE("a rank killed mid-run stops the job and the same launch resumes from the last checkpoint") {
  test::TempDir d;
  const std::string every2 = " --set train.num_steps_per_checkpoint=2";
  const pid_t launcher =
      spawn(launch(2) + "run " + experiment(d) + " --set train.max_steps=100000" + every2, d / "log.txt");
  wait_for([&] { return test::read_text(d / "out/report.jsonl").find("\"step\":3") != std::string::npos; });
  const pid_t victim = rank_pid(launcher, 1);
  REQUIRE(victim > 0);
  kill(victim, SIGKILL);
  const auto [code, seconds] = reap(launcher);
  const std::string log = test::read_text(d / "log.txt");
  INFO(log);
  CHECK(code != 0);
  CHECK(seconds < 30);  // not the 60 s collective timeout: the launcher stopped rank 0
  CHECK(log.find("bertx: error: rank 1 (local rank 1 on " + host_name() + ", pid " + std::to_string(victim) + ")") !=
        std::string::npos);
  CHECK(log.find("was killed by signal 9") != std::string::npos);
  CHECK(runs_of(d / "runs.db")[0].status != RunStatus::Finished);

  // The job restarted with the same command (two more steps): every rank resumes from rank 0's last checkpoint.
  std::int64_t last = 0;
  for (const auto& e : fs::directory_iterator(d / "out/bert/phase1"))
    if (fs::exists(e.path() / "progress.json"))
      last = std::max<std::int64_t>(last, std::stoll(e.path().filename().string()));
  REQUIRE(last >= 2);
  auto again = test::run_command(launch(2) + "run " + experiment(d) +
                                 " --set train.max_steps=" + std::to_string(last + 2) + every2);
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(again.output.find("continuing run 1 from its checkpoint at step " + std::to_string(last)) != std::string::npos);
  CHECK(count_lines_with(again.output, "resume: from " + (d / "out/bert/phase1/") + std::to_string(last)) ==
        1);  // rank 0's line
  const auto runs = runs_of(d / "runs.db");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Finished);
  CHECK(fs::exists(d / ("out/bert/phase1/" + std::to_string(last + 2) + "/model.safetensors")));
}

TEST_CASE("a hung rank fails the others after dist_timeout_s with an error naming the collective") {
  test::TempDir d;
  const pid_t launcher = spawn(
      launch(2) + "run " + experiment(d) + " --set train.max_steps=100000 --set run.dist_timeout_s=4", d / "log.txt");
  wait_for([&] { return test::read_text(d / "out/report.jsonl").find("\"step\":2") != std::string::npos; });
  const pid_t victim = rank_pid(launcher, 1);
  REQUIRE(victim > 0);
  kill(victim, SIGSTOP);  // hangs: alive, but never joins the next collective
  const auto [code, seconds] = reap(launcher);
  const std::string log = test::read_text(d / "log.txt");
  INFO(log);
  CHECK(code == 1);
  CHECK(seconds < 40);
  const auto runs = runs_of(d / "runs.db");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Failed);
  CHECK(runs[0].message.find("rank 0 (") == 0);
  CHECK(runs[0].message.find("timeout 4 s") != std::string::npos);
}

TEST_CASE("benchmark mode under bertx launch reports every rank's throughput the total and the scaling efficiency") {
  test::TempDir d;
  auto r = test::run_command(launch(2) + "run " +
                             experiment(d,
                                        "[bench]\nenabled = true\nwarmup_steps = 1\nsteps = 3\n"
                                        "baseline_sequences_per_second = 10.0\n"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("bench: sequences/s per rank: rank 0 ") != std::string::npos);
  CHECK(r.output.find(", rank 1 ") != std::string::npos);
  auto store = RunStore::open(d / "runs.db");
  const auto id = store->list_runs()[0].id;
  auto total = store->metrics(id, "bench_sequences_per_second"), p50 = store->metrics(id, "bench_step_seconds_p50");
  auto efficiency = store->metrics(id, "bench_scaling_efficiency");
  REQUIRE(total.size() == 1);
  REQUIRE(p50.size() == 1);
  REQUIRE(efficiency.size() == 1);
  CHECK(total[0].value == doctest::Approx(8.0 / p50[0].value));  // the global batch (2 ranks x 4) per median step
  CHECK(efficiency[0].value == doctest::Approx(total[0].value / 20.0));
}

TEST_CASE("evaluation under bertx launch scores the whole split once on rank 0 as one process does") {
  test::TempDir d;
  // Train 2 ranks with an evaluation mid-run and at the end; then score the final checkpoint in one
  // process (do_train = false): the same eval metrics, logged once per evaluation.
  auto r = test::run_command(launch(2) + "run " + experiment(d, "eval = true\neval_freq = 2\n"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string report = test::read_text(d / "out/report.jsonl");
  CHECK(count_lines_with(report, "eval_mlm_loss") == 1 + (kSteps - 1) / 2);
  auto store = RunStore::open(d / "runs.db");
  const auto dp_eval = store->metrics(store->list_runs()[0].id, "eval_mlm_loss");
  REQUIRE(!dp_eval.empty());
  auto one = test::run_command(kBertx + " run " + experiment(d, "eval = true\ndo_train = false\n") +
                               " --set run.output_dir=" + (d / "single") + " --set run.store=" + (d / "single.db") +
                               " --set train.from_pretrained=" + (d / "out/bert/phase1"));
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  auto single_store = RunStore::open(d / "single.db");
  const auto single = single_store->metrics(single_store->list_runs().at(0).id, "eval_mlm_loss");
  REQUIRE(single.size() == 1);
  CHECK(single[0].value == doctest::Approx(dp_eval.back().value).epsilon(1e-6));
}

TEST_CASE("use_pure_fp16: 2 ranks with bf16 weights over Gloo (fp32 on the wire) track 1 process with accumulation 2") {
  const std::string pure = " --set train.precision=\"amp-bf16\" --set train.use_pure_fp16=true";
  test::TempDir one, two, half;
  auto r1 = test::run_command(kBertx + " run " + experiment(one) + " --set train.gradient_accumulation_steps=2" + pure);
  INFO(r1.output);
  REQUIRE(r1.exit_code == 0);
  auto r2 = test::run_command(launch(2) + "run " + experiment(two) + pure);
  INFO(r2.output);
  REQUIRE(r2.exit_code == 0);
  auto r3 = test::run_command(kBertx + " run " + experiment(half) + pure);
  REQUIRE(r3.exit_code == 0);
  const std::string opt = "out/bert/phase1/" + std::to_string(kSteps) + "/optimizer.safetensors";
  TensorMap a = load_safetensors(one / opt), b = load_safetensors(two / opt), c = load_safetensors(half / opt);
  double max_diff = 0, max_update = 0;
  std::size_t masters = 0;
  for (const auto& [name, x] : a) {
    if (name.size() < 7 || name.compare(name.size() - 7, 7, ".master") != 0) continue;
    INFO(name);
    REQUIRE(b.count(name) == 1);
    ++masters;
    max_diff = std::max(max_diff, (x - b.at(name)).abs().max().item<double>());
    max_update = std::max(max_update, (x - c.at(name)).abs().max().item<double>());
  }
  MESSAGE("fp32 masters after " << kSteps << " steps: max |2 ranks - 1 process x accumulation 2| " << max_diff
                                << ", vs without accumulation " << max_update);
  REQUIRE(masters > 0);
  // Measured equal: one process adds two bf16 half-gradients (the sum of two bf16 values is exact in fp32 before
  // its one rounding), the ranks average theirs in fp32 and round once when writing back to bf16.
  CHECK(max_diff <= 1e-6);
  CHECK(max_update > 1e-4);
}
