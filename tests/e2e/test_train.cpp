// test_train.cpp - `bertx run` end to end on a very small BERT and synthetic data: resume after SIGKILL is
// bitwise identical to an uninterrupted run (weights, optimizer state, loss curve, one run record),
// SIGTERM checkpoints and marks the run interrupted, the final evaluation precedes the final checkpoint,
// benchmark mode reports throughput, use_pure_fp16 keeps half weights whose fp32 masters accumulate updates
// too small for bf16.
#include "doctest_torch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <gnu/libc-version.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include <ATen/Context.h>
#include <nlohmann/json.hpp>

#include "io/safetensors.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

const char* kTinyConfig = R"({"vocab_size": 1100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64, "hidden_act": "gelu"})";

std::string experiment(const test::TempDir& d, const std::string& extra = "") {
  test::write_text(d / "config.json", kTinyConfig);
  test::write_text(d / "exp.toml",
                   "[run]\nname = \"e2e\"\nseed = 5\nthreads = 1\ndevice = \"cpu\"\noutput_dir = \"" + (d / "out") +
                       "\"\nstore = \"" + (d / "runs.db") +
                       "\"\n[train]\nmax_steps = 6\nbatch_size = 4\ngradient_accumulation_steps = 2\n"
                       "learning_rate = 1e-3\nwarmup_proportion = 0.2\nlog_freq = 1\nnum_steps_per_checkpoint = 3\n" +
                       extra + "[model]\ntype = \"bert\"\npreset = \"custom\"\nconfig = \"" + (d / "config.json") +
                       "\"\n[optimizer]\ntype = \"nvlamb\"\n[task]\ntype = \"pretraining\"\n"
                       "[data]\ntype = \"synthetic\"\nvocab_size = 1100\nseq_len = 32\nmax_predictions = "
                       "5\nsamples_per_epoch = 40\n");
  return d / "exp.toml";
}

pid_t spawn_bertx(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>(BERTX_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(BERTX_BIN, argv.data());
    _exit(127);
  }
  return pid;
}

void wait_for(const std::function<bool()>& ready, int seconds = 120) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!ready()) {
    REQUIRE(std::chrono::steady_clock::now() < until);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void check_same_tensors(const std::string& a, const std::string& b) {
  TensorMap x = load_safetensors(a), y = load_safetensors(b);
  REQUIRE(x.size() == y.size());
  for (const auto& [k, v] : x) {
    INFO(k);
    REQUIRE(y.count(k) == 1);
    CHECK(at::equal(v, y.at(k)));  // bitwise
  }
}

std::vector<MetricRow> losses_of(const std::string& store_path, const std::string& metric = "loss") {
  auto store = RunStore::open(store_path);
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);  // a resumed run continues its record
  CHECK(runs[0].status == RunStatus::Finished);
  return store->metrics(runs[0].id, metric);
}

}  // namespace

TEST_CASE("resume after SIGKILL reproduces an uninterrupted run bitwise") {
  std::string extra;
  SUBCASE("fp32") {}
  SUBCASE("use_pure_fp16 bf16 weights and fp32 masters") { extra = "precision = \"amp-bf16\"\nuse_pure_fp16 = true\n"; }
  test::TempDir a, b;
  auto r = test::run_command(std::string(BERTX_BIN) + " run " + experiment(a, extra));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const std::string exp_b = experiment(b, extra);
  const std::string ckpt = b / "out/bert/phase1";
  pid_t pid = spawn_bertx({"run", exp_b}, b / "log1.txt");
  wait_for([&] { return fs::exists(ckpt + "/3/progress.json"); });
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  // Whatever the killed process did after checkpoint 3 is as if it never happened.
  std::error_code ec;
  for (int s = 4; s <= 6; ++s) fs::remove_all(ckpt + "/" + std::to_string(s), ec);

  auto r2 = test::run_command(std::string(BERTX_BIN) + " run " + exp_b);
  INFO(r2.output);
  REQUIRE(r2.exit_code == 0);
  CHECK(r2.output.find("continuing run 1 from its checkpoint at step 3") != std::string::npos);

  check_same_tensors(a / "out/bert/phase1/6/model.safetensors", ckpt + "/6/model.safetensors");
  check_same_tensors(a / "out/bert/phase1/6/optimizer.safetensors", ckpt + "/6/optimizer.safetensors");
  const auto la = losses_of(a / "runs.db"), lb = losses_of(b / "runs.db");
  REQUIRE(la.size() == 6);
  REQUIRE(lb.size() == 6);  // none lost, none duplicated
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(lb[i].step == la[i].step);
    CHECK(lb[i].value == la[i].value);
  }
  // The gradient norm of every logged step (log_freq 1), the same after the resume.
  const auto ga = losses_of(a / "runs.db", "grad_norm"), gb = losses_of(b / "runs.db", "grad_norm");
  REQUIRE(ga.size() == 6);
  REQUIRE(gb.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(ga[i].value > 0);
    CHECK(std::isfinite(ga[i].value));
    CHECK(gb[i].step == ga[i].step);
    CHECK(gb[i].value == ga[i].value);
  }
  // The newest 3 checkpoints are kept, no partial folder left behind.
  CHECK(fs::exists(ckpt + "/3"));
  CHECK(fs::exists(ckpt + "/6"));
}

TEST_CASE("SIGTERM checkpoints and marks the run interrupted and the same command finishes it") {
  test::TempDir d;
  const std::string exp = experiment(d, "");
  pid_t pid = spawn_bertx(
      {"run", exp, "--set", "train.max_steps=100000", "--set", "train.num_steps_per_checkpoint=100000"}, d / "log.txt");
  wait_for([&] { return test::read_text(d / "out/report.jsonl").find("\"step\":3") != std::string::npos; });
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO("bertx's log: " << test::read_text(d / "log.txt"));  // seen once under CI load: ended by a signal, not by exit
  INFO("ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  std::int64_t stopped_at = 0;
  {
    auto store = RunStore::open(d / "runs.db");
    auto runs = store->list_runs();
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].status == RunStatus::Interrupted);
    for (const auto& a : store->artifacts(runs[0].id))
      if (a.kind == "checkpoint") stopped_at = a.step;
  }
  REQUIRE(stopped_at >= 3);
  auto r = test::run_command(std::string(BERTX_BIN) + " run " + exp +
                             " --set train.max_steps=100000 --set train.num_steps_per_checkpoint=100000 "
                             "--set bench.enabled=false --set train.max_steps=" +
                             std::to_string(stopped_at + 2));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  auto store = RunStore::open(d / "runs.db");
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Finished);
  CHECK(fs::exists(d / "out/bert/phase1/" + std::to_string(stopped_at + 2) + "/model.safetensors"));
}

TEST_CASE("the final evaluation is logged before the final checkpoint so that a resume never skips it") {
  // Found by tools/chaos/kill_resume: killed between the final checkpoint and the final evaluation, the
  // resumed run found the phase complete and finished without the evaluation's rows.
  test::TempDir d;
  auto r = test::run_command(std::string(BERTX_BIN) + " run " + experiment(d, "eval = true\neval_batches = 1\n"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(test::read_text(d / "out/report.jsonl"));
  int line_no = 0, final_eval = -1, final_checkpoint = -1;
  for (std::string line; std::getline(lines, line); ++line_no) {
    if (line.find("\"type\":\"metrics\"") != std::string::npos && line.find("\"step\":6") != std::string::npos &&
        line.find("eval_loss") != std::string::npos)
      final_eval = line_no;
    if (line.find("\"type\":\"checkpoint\"") != std::string::npos && line.find("phase1/6\"") != std::string::npos)
      final_checkpoint = line_no;
  }
  REQUIRE(final_eval >= 0);
  REQUIRE(final_checkpoint >= 0);
  CHECK(final_eval < final_checkpoint);
}

TEST_CASE("benchmark mode reports throughput and latency percentiles and writes no checkpoint") {
  test::TempDir d;
  auto r = test::run_command(std::string(BERTX_BIN) + " run " +
                             experiment(d, "[bench]\nenabled = true\nwarmup_steps = 1\nsteps = 3\n"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("sequences/s (median step") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "out/bert"));
  auto store = RunStore::open(d / "runs.db");
  auto rows = store->metrics(store->list_runs()[0].id, "bench_sequences_per_second");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].value > 0);
}

TEST_CASE("use_pure_fp16 keeps bf16 weights and fp32 masters that accumulate updates below bf16 resolution") {
  test::TempDir d;
  // lr 1e-5: an NVLAMB step moves a weight by ~1e-5 of its norm, far below bf16's relative step 2^-8.
  auto r = test::run_command(std::string(BERTX_BIN) + " run " +
                             experiment(d, "precision = \"amp-bf16\"\nuse_pure_fp16 = true\n") +
                             " --set train.learning_rate=1e-5 --set train.warmup_proportion=0 --set train.max_steps=3"
                             " --set train.num_steps_per_checkpoint=1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("pure half weights") != std::string::npos);
  const std::string ckpt = d / "out/bert/phase1";
  TensorMap m1 = load_safetensors(ckpt + "/1/model.safetensors"), m3 = load_safetensors(ckpt + "/3/model.safetensors");
  TensorMap o1 = load_safetensors(ckpt + "/1/optimizer.safetensors"),
            o3 = load_safetensors(ckpt + "/3/optimizer.safetensors");
  std::int64_t half = 0, kept = 0, master_moved = 0, half_moved = 0, elements = 0;
  for (const auto& [name, w] : m3) {
    INFO(name);
    if (name.find("LayerNorm") != std::string::npos) {  // fp32_params default: LayerNorm stays fp32, no master
      CHECK((w.scalar_type() == at::kFloat));
      CHECK(o3.count(name + ".master") == 0);
      ++kept;
      continue;
    }
    ++half;
    REQUIRE((w.scalar_type() == at::kBFloat16));
    REQUIRE(o3.count(name + ".master") == 1);
    const at::Tensor& master = o3.at(name + ".master");
    CHECK((master.scalar_type() == at::kFloat));
    CHECK(at::equal(master.to(at::kBFloat16), w));               // the model weight is its master rounded
    if (name.find("embeddings") == std::string::npos) continue;  // embeddings: rows of unseen tokens get no gradient
    master_moved += o1.at(name + ".master").ne(master).sum().item<std::int64_t>();
    half_moved += m1.at(name).ne(w).sum().item<std::int64_t>();
    elements += w.numel();
  }
  CHECK(half > 0);
  CHECK(kept > 0);
  REQUIRE(elements > 0);
  MESSAGE("embedding elements moved between steps 1 and 3: masters " << master_moved << ", bf16 weights " << half_moved
                                                                     << " of " << elements);
  // Between steps 1 and 3 almost every master element moved; almost no bf16 weight did.
  CHECK(static_cast<double>(master_moved) / static_cast<double>(elements) > 0.5);
  CHECK(static_cast<double>(half_moved) / static_cast<double>(elements) < 0.05);
}

TEST_CASE("use_pure_fp16 needs a half precision") {
  test::TempDir d;
  auto r = test::run_command(std::string(BERTX_BIN) + " run " + experiment(d, "use_pure_fp16 = true\n"));
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("use_pure_fp16 = true needs precision") != std::string::npos);
}

TEST_CASE("device = \"cuda\" where LibTorch sees no CUDA device stops at start with one line") {
  if (at::globalContext().hasCUDA()) {
    MESSAGE("a CUDA device is visible: tools/gpu/check.sh covers this machine");
    return;
  }
  test::TempDir d;
  auto r = test::run_command(std::string(BERTX_BIN) + " run " + experiment(d) + " --set run.device=cuda");
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("[run] device = \"cuda\" but no CUDA device is available to this LibTorch") != std::string::npos);
  CHECK(r.output.find("terminate") == std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(d / "out") / "bert"));  // no checkpoint folder
}

namespace {

// `bertx run` of a one-step bench experiment with the environment changed by `env` ("env -u X ", "env X=v "):
// the run record's process settings, and the command's output.
std::pair<nlohmann::json, std::string> process_of_run(const std::string& env) {
  test::TempDir d;
  auto r = test::run_command(env + BERTX_BIN + " run " +
                             experiment(d, "[bench]\nenabled = true\nwarmup_steps = 0\nsteps = 1\n"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto store = RunStore::open(d / "runs.db");
  const auto run = store->get_run(store->list_runs()[0].id);
  REQUIRE(run.has_value());
  return {nlohmann::json::parse(run->process), r.output};
}

}  // namespace

TEST_CASE("the run record keeps how the process was set up and a user's OpenMP wait policy is respected") {
  for (const std::string policy : {"", "ACTIVE"}) {
    INFO("OMP_WAIT_POLICY=" << policy);
    const auto [p, output] =
        process_of_run(policy.empty() ? "env -u OMP_WAIT_POLICY " : "env OMP_WAIT_POLICY=" + policy + " ");
    CHECK(p.at("intra_op_threads") == 1);  // [run] threads = 1
    CHECK(p.at("blas_threads") ==
          1);  // OpenBLAS (Debian's LibTorch; tools/setup installs it) or MKL (the wheel's) follows
    CHECK(p.at("omp_wait_policy") == (policy.empty() ? "PASSIVE (set by bertx)" : "ACTIVE (environment)"));
    CHECK(output.find("process: 1 intra-op threads") != std::string::npos);
  }
}

// glibc.malloc.hugetlb=1 goes into GLIBC_TUNABLES by bertx where the kernel gives huge pages on request and glibc
// knows the tunable (2.35+); a value the user set stays, and the record says who set it.
TEST_CASE("the run record says how malloc was set up: huge pages asked for by bertx, or the user's tunable kept") {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(thp, mode);
  int major = 0, minor = 0;
  std::sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
  const bool bertx_asks = mode.find("[madvise]") != std::string::npos && (major > 2 || (major == 2 && minor >= 35));
  for (const std::string tunables : {"", "glibc.malloc.hugetlb=0", "glibc.malloc.check=0"}) {
    INFO("GLIBC_TUNABLES=" << tunables);
    const auto [p, output] =
        process_of_run(tunables.empty() ? "env -u GLIBC_TUNABLES " : "env GLIBC_TUNABLES=" + tunables + " ");
    const std::string malloc_setup = p.at("malloc");
    CHECK(malloc_setup.rfind("M_MMAP_MAX=0 M_TRIM_THRESHOLD=1GiB", 0) == 0);
    if (tunables == "glibc.malloc.hugetlb=0")
      CHECK(malloc_setup.find("glibc.malloc.hugetlb=0 (environment)") != std::string::npos);
    else if (bertx_asks)
      CHECK(malloc_setup.find("glibc.malloc.hugetlb=1 (set by bertx)") != std::string::npos);
    else
      CHECK(malloc_setup.find("glibc.malloc.hugetlb") == std::string::npos);
  }
}
