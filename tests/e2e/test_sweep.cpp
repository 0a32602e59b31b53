// test_sweep.cpp - `bertx sweep` end to end on a very small BERT and synthetic data: three seeds finish and
// `runs table` lists them with the mean and sample standard deviation computed here from the store's raw
// metric rows; a sweep killed with SIGKILL and run again completes only the seeds that had not finished.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

const std::string kBertx = BERTX_BIN;

std::string experiment(const test::TempDir& d, int max_steps) {
  test::write_text(d / "config.json", R"({"vocab_size": 1100, "hidden_size": 32, "num_hidden_layers": 2,
 "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64, "hidden_act": "gelu"})");
  test::write_text(d / "exp.toml",
                   "[run]\nname = \"sweepme\"\nthreads = 1\ndevice = \"cpu\"\noutput_dir = \"" + (d / "out") +
                       "\"\nstore = \"" + (d / "runs.db") + "\"\n[train]\nmax_steps = " + std::to_string(max_steps) +
                       "\nbatch_size = 4\nlearning_rate = 1e-3\nlog_freq = 1\nnum_steps_per_checkpoint = 10\n"
                       "[model]\ntype = \"bert\"\npreset = \"custom\"\nconfig = \"" +
                       (d / "config.json") +
                       "\"\n[optimizer]\ntype = \"adamw\"\n[task]\ntype = \"pretraining\"\n"
                       "[data]\ntype = \"synthetic\"\nvocab_size = 1100\nseq_len = 32\nmax_predictions = "
                       "5\nsamples_per_epoch = 40\n");
  return d / "exp.toml";
}

// Seeds of the sweep's finished runs, and all runs per seed.
struct SweepState {
  std::map<std::int64_t, std::int64_t> finished;  // seed -> run id
  std::map<std::int64_t, int> runs;               // seed -> number of runs
  int running = 0;
};

SweepState state_of(const std::string& store_path) {
  auto store = RunStore::open(store_path);
  store->reap_stale_runs();
  SweepState s;
  for (const auto& r : store->list_runs()) {
    ++s.runs[r.seed];
    if (r.status == RunStatus::Finished) s.finished[r.seed] = r.id;
    if (r.status == RunStatus::Running) ++s.running;
  }
  return s;
}

bool process_gone(pid_t pid) {  // a zombie (no reaper in some containers) counts as gone
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto close = text.rfind(')');
  return text.empty() || (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z');
}

void wait_for(const std::function<bool()>& ready, int seconds = 180) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!ready()) {
    REQUIRE(std::chrono::steady_clock::now() < until);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

TEST_CASE("a sweep of three seeds finishes and its table has their mean and sample standard deviation") {
  test::TempDir d;
  const std::string exp = experiment(d, 4);
  auto r = test::run_command(kBertx + " sweep " + exp + " --seeds 0-2 --jobs 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("sweep 1: 3 finished, 0 failed or interrupted, 0 not started") != std::string::npos);

  // The expected numbers, from the store's raw rows: each run's loss at its last logged step.
  std::vector<double> finals;
  std::vector<std::int64_t> run_ids;
  {
    auto store = RunStore::open(d / "runs.db");
    RunFilter f;
    f.sweep_id = 1;
    auto runs = store->list_runs(f);
    REQUIRE(runs.size() == 3);
    std::sort(runs.begin(), runs.end(), [](const RunRecord& a, const RunRecord& b) { return a.seed < b.seed; });
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(runs[i].seed == static_cast<std::int64_t>(i));
      CHECK(runs[i].status == RunStatus::Finished);
      CHECK(runs[i].output_dir == (d / "out") + "/seed-" + std::to_string(i));
      const auto rows = store->metrics(runs[i].id, "loss");
      REQUIRE(rows.size() == 4);
      finals.push_back(rows.back().value);
      run_ids.push_back(runs[i].id);
    }
  }
  const double mean = (finals[0] + finals[1] + finals[2]) / 3.0;
  double ss = 0;
  for (double v : finals) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / 2.0);  // sample: n - 1
  CHECK(sd > 0);                          // the seeds really differ

  auto t = test::run_command("(" + kBertx + " runs --store " + (d / "runs.db") +
                             " table --sweep 1 --metric loss --format csv 2>/dev/null)");
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  std::istringstream lines(t.output);
  std::string line;
  std::getline(lines, line);
  CHECK(line == "seed,run,loss");
  std::map<std::string, double> stats;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(std::getline(lines, line));
    CHECK(line.rfind(std::to_string(i) + "," + std::to_string(run_ids[static_cast<std::size_t>(i)]) + ",", 0) == 0);
    CHECK(std::stod(line.substr(line.rfind(',') + 1)) == finals[static_cast<std::size_t>(i)]);  // shortest round trip
  }
  while (std::getline(lines, line)) stats[line.substr(0, line.find(','))] = std::stod(line.substr(line.rfind(',') + 1));
  REQUIRE(stats.size() == 4);
  CHECK(stats["mean"] == doctest::Approx(mean).epsilon(1e-12));
  CHECK(stats["std"] == doctest::Approx(sd).epsilon(1e-9));
  CHECK(stats["min"] == *std::min_element(finals.begin(), finals.end()));
  CHECK(stats["max"] == *std::max_element(finals.begin(), finals.end()));
}

TEST_CASE("a sweep killed with SIGKILL and run again completes only what was missing") {
  test::TempDir d;
  const std::string exp = experiment(d, 60);
  const pid_t sweep = fork();
  if (sweep == 0) {
    const int fd = ::open((d / "sweep1.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(BERTX_BIN, BERTX_BIN, "sweep", exp.c_str(), "--seeds", "0-2", "--jobs", "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  wait_for([&] { return !state_of(d / "runs.db").finished.empty(); });
  kill(sweep, SIGKILL);
  int status = 0;
  waitpid(sweep, &status, 0);
  CHECK(WIFSIGNALED(status));
  // The seed it was running gets SIGTERM (parent death signal): wait until that process has gone.
  const std::string log1 = test::read_text(d / "sweep1.log");
  INFO(log1);
  std::set<pid_t> children;
  const std::regex started(R"(started \(pid (\d+),)");
  for (std::sregex_iterator it(log1.begin(), log1.end(), started), end; it != end; ++it)
    children.insert(std::stoi((*it)[1]));
  REQUIRE(!children.empty());
  wait_for([&] { return std::all_of(children.begin(), children.end(), process_gone); }, 60);

  const SweepState before = state_of(d / "runs.db");
  CHECK(before.running == 0);
  REQUIRE(before.finished.count(0) == 1);
  REQUIRE(before.finished.size() < 3);  // killed while seeds were still missing

  auto r = test::run_command(kBertx + " sweep " + exp + " --seeds 0-2 --jobs 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (std::int64_t seed = 0; seed < 3; ++seed) {
    const std::string s = "seed " + std::to_string(seed) + ": ";
    if (before.finished.count(seed)) {
      CHECK(r.output.find(s + "already finished (run " + std::to_string(before.finished.at(seed)) + " finished)") !=
            std::string::npos);
      CHECK(r.output.find(s + "started") == std::string::npos);
    } else {
      CHECK(r.output.find(s + "started") != std::string::npos);
    }
  }
  CHECK(r.output.find("sweep 1: " + std::to_string(3 - before.finished.size()) + " finished, 0 failed") !=
        std::string::npos);
  const SweepState after = state_of(d / "runs.db");
  CHECK(after.finished.size() == 3);
  for (const auto& [seed, id] : before.finished) {
    CHECK(after.finished.at(seed) == id);  // not run again
    CHECK(after.runs.at(seed) == before.runs.at(seed));
  }
  auto store = RunStore::open(d / "runs.db");
  CHECK(store->list_sweeps().size() == 1);  // the same sweep, continued
}
