// test_disk_full.cpp - `bertx run` when its disk fills up or its folders are read-only: a checkpoint or run
// store write that fails stops the run with one clear line, the previous checkpoint and store rows stay
// intact, and the same command continues once there is space; a read-only output or store folder is refused
// at start. Real kernel failures, no test hooks: a small tmpfs mounted on the folder when this process may
// mount (root), and always a per-file size limit (RLIMIT_FSIZE: EFBIG) on the bertx child.
#include "doctest_torch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <sstream>

#include "io/safetensors.hpp"
#include "store/store.hpp"
#include "test_util.hpp"
#include "host/progress.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

// How the disk gets small: a tmpfs shrunk to what it holds plus a little (ENOSPC), or a per-file size limit.
enum class Limit { Tmpfs, FileSize };

// A folder on its own small tmpfs while this object lives (mounted only when the process may mount).
struct SmallDisk {
  std::string dir;
  bool mounted = false;
  explicit SmallDisk(const std::string& d, bool read_only = false) : dir(d) {
    fs::create_directories(d);
    mounted = ::mount("tmpfs", d.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, "size=64m") == 0;
  }
  ~SmallDisk() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
  // Leaves `free_bytes` of space (rounded to pages) beyond what the folder holds now.
  void shrink(std::uintmax_t free_bytes) {
    std::uintmax_t used = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) used += (e.file_size() + 4095) / 4096 * 4096;
    remount("size=" + std::to_string(used + 64 * 1024 + free_bytes));  // + folders' pages
  }
  void grow() { remount("size=64m"); }
  void remount(const std::string& options) {
    REQUIRE(::mount("tmpfs", dir.c_str(), "tmpfs", MS_REMOUNT, options.c_str()) == 0);
  }
};

std::vector<Limit> limits() {
  test::TempDir probe;
  SmallDisk disk(probe / "d");
  if (disk.mounted) return {Limit::Tmpfs, Limit::FileSize};
  return {Limit::FileSize};
}

struct Result {
  int exit_code = -1;
  std::string output;
};

// Runs bertx with stdout+stderr captured; file_size_limit > 0 caps every file it writes (SIGXFSZ ignored, so
// the write fails with EFBIG as a full disk fails with ENOSPC).
Result run_bertx(const std::vector<std::string>& args, const std::string& log, std::uintmax_t file_size_limit = 0) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (file_size_limit > 0) {
      signal(SIGXFSZ, SIG_IGN);
      const rlimit r{static_cast<rlim_t>(file_size_limit), static_cast<rlim_t>(file_size_limit)};
      setrlimit(RLIMIT_FSIZE, &r);
    }
    std::vector<char*> argv{const_cast<char*>(BERTX_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(BERTX_BIN, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::read_text(log)};
}

std::string experiment(const test::TempDir& d, const std::string& out, const std::string& store) {
  test::write_text(d / "config.json",
                   R"({"vocab_size": 1100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64, "hidden_act": "gelu"})");
  test::write_text(d / "exp.toml",
                   "[run]\nname = \"full\"\nseed = 5\nthreads = 1\ndevice = \"cpu\"\noutput_dir = \"" + out +
                       "\"\nstore = \"" + store +
                       "\"\n[train]\nmax_steps = 3\nbatch_size = 4\nlearning_rate = 1e-3\nlog_freq = 1\n"
                       "num_steps_per_checkpoint = 3\nkeep_checkpoints = 1\n"
                       "[model]\ntype = \"bert\"\npreset = \"custom\"\nconfig = \"" +
                       (d / "config.json") +
                       "\"\n[optimizer]\ntype = \"adamw\"\n[task]\ntype = \"pretraining\"\n"
                       "[data]\ntype = \"synthetic\"\nvocab_size = 1100\nseq_len = 32\nmax_predictions = "
                       "5\nsamples_per_epoch = 40\n");
  return d / "exp.toml";
}

// The output line that holds `what` (the error must be on one line with its reason).
std::string line_with(const std::string& output, const std::string& what) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.find(what) != std::string::npos) return line;
  return "";
}

bool says_full(const std::string& line, Limit how) {
  return line.find(how == Limit::Tmpfs ? "No space left on device" : "File too large") != std::string::npos;
}

}  // namespace

TEST_CASE("a checkpoint write on a full disk stops the run with one line and keeps the previous checkpoint") {
  for (Limit how : limits()) {
    INFO((how == Limit::Tmpfs ? "tmpfs" : "file size limit"));
    test::TempDir d;
    SmallDisk disk(d / "disk");
    if (how == Limit::Tmpfs) REQUIRE(disk.mounted);
    const std::string root = d / "disk/out/bert/phase1";
    const std::string exp = experiment(d, d / "disk/out", d / "runs.db");
    Result first = run_bertx({"run", exp}, d / "log1.txt");
    INFO(first.output);
    REQUIRE(first.exit_code == 0);
    const auto model_bytes = fs::file_size(root + "/3/model.safetensors");

    // Steps 4..6, then the step-6 checkpoint does not fit: half a model file of space (or of file size) left.
    if (how == Limit::Tmpfs) disk.shrink(model_bytes / 2);
    Result full = run_bertx({"run", exp, "--set", "train.max_steps=6"}, d / "log2.txt",
                            how == Limit::FileSize ? model_bytes / 2 : 0);
    INFO(full.output);
    CHECK(full.exit_code == 1);
    const std::string line = line_with(
        full.output, "checkpoint of step 6 not written to " + root + "/6 (the newest complete checkpoint is kept)");
    CHECK(says_full(line, how));
    CHECK_FALSE(fs::exists(root + "/6"));
    CHECK_FALSE(fs::exists(root + "/6.tmp"));  // its space given back
    CHECK(read_progress(root + "/3/progress.json").step == 3);
    for (const char* f : {"model", "optimizer", "rng"})
      CHECK_FALSE(load_safetensors(root + "/3/" + f + ".safetensors").empty());
    {
      auto store = RunStore::open(d / "runs.db");
      auto run = store->get_run(1);
      REQUIRE(run.has_value());
      CHECK(run->status == RunStatus::Failed);
      CHECK(run->message.find("checkpoint of step 6 not written") != std::string::npos);
    }

    if (how == Limit::Tmpfs) disk.grow();
    Result again = run_bertx({"run", exp, "--set", "train.max_steps=6"}, d / "log3.txt");
    INFO(again.output);
    CHECK(again.exit_code == 0);
    CHECK(again.output.find("continuing run 1 from its checkpoint at step 3") != std::string::npos);
    CHECK(read_progress(root + "/6/progress.json").step == 6);
  }
}

TEST_CASE("a run store on a full disk stops the run with a clear error and keeps its rows consistent") {
  for (Limit how : limits()) {
    INFO((how == Limit::Tmpfs ? "tmpfs" : "file size limit"));
    test::TempDir d;
    SmallDisk disk(d / "disk");
    if (how == Limit::Tmpfs) REQUIRE(disk.mounted);
    const std::string db = d / "disk/runs.db";
    const std::string exp = experiment(d, d / "out", db);
    Result first = run_bertx({"run", exp}, d / "log1.txt");
    INFO(first.output);
    REQUIRE(first.exit_code == 0);

    // 40 more steps, no checkpoint before the end: the store's write-ahead log soon finds no room.
    const std::vector<std::string> longer{
        "run", exp, "--set", "train.max_steps=40", "--set", "train.num_steps_per_checkpoint=40"};
    if (how == Limit::Tmpfs) disk.shrink(16 * 1024);
    Result full = run_bertx(longer, d / "log2.txt", how == Limit::FileSize ? fs::file_size(db) + 16 * 1024 : 0);
    INFO(full.output);
    CHECK(full.exit_code == 1);
    const std::string line = line_with(full.output, "run 1 failed: " + db + ": run store error: ");
    CHECK(line.find(how == Limit::Tmpfs ? "database or disk is full" : "disk I/O error") != std::string::npos);
    if (how == Limit::Tmpfs) disk.grow();
    {
      auto store = RunStore::open(db);  // opens and migrates: not corrupt
      auto run = store->get_run(1);
      REQUIRE(run.has_value());
      CHECK(run->status != RunStatus::Finished);
      std::map<std::int64_t, int> names_per_step;
      for (const auto& m : store->metrics(1)) ++names_per_step[m.step];
      REQUIRE(names_per_step.size() >= 3);
      CHECK(names_per_step.size() < 40);
      for (const auto& [step, n] : names_per_step) CHECK(n == names_per_step.begin()->second);  // whole steps only
    }

    Result again = run_bertx(longer, d / "log3.txt");
    INFO(again.output);
    CHECK(again.exit_code == 0);
    CHECK(again.output.find("continuing run 1 from its checkpoint at step 3") != std::string::npos);
    auto store = RunStore::open(db);
    std::map<std::pair<std::int64_t, std::string>, int> rows;
    for (const auto& m : store->metrics(1)) ++rows[{m.step, m.name}];
    std::map<std::int64_t, int> names_per_step;
    for (const auto& [key, n] : rows) {
      CHECK(n == 1);  // none duplicated
      ++names_per_step[key.first];
    }
    CHECK(names_per_step.size() == 40);  // none lost
  }
}

TEST_CASE("a read-only output or store folder is refused at start with the reason") {
  test::TempDir d;
  SmallDisk ro(d / "ro", /*read_only=*/true);
  if (!ro.mounted) fs::permissions(d / "ro", fs::perms::owner_read | fs::perms::owner_exec);  // works unless root
  const bool effective = ro.mounted || ::access((d / "ro").c_str(), W_OK) != 0;
  REQUIRE_MESSAGE(effective, "root without mount permission: cannot make a read-only folder here");
  const std::string reason = ro.mounted ? "Read-only file system" : "Permission denied";

  Result out = run_bertx({"run", experiment(d, d / "ro/out", d / "runs.db")}, d / "log1.txt");
  INFO(out.output);
  CHECK(out.exit_code == 2);
  CHECK(line_with(out.output, "bertx: error: [run] output_dir '" + (d / "ro/out") + "': cannot ").find(reason) !=
        std::string::npos);
  CHECK_FALSE(fs::exists(d / "runs.db"));  // refused before any record was made

  Result store = run_bertx({"run", experiment(d, d / "out", d / "ro/runs.db")}, d / "log2.txt");
  INFO(store.output);
  CHECK(store.exit_code == 2);
  CHECK(line_with(store.output,
                  "bertx: error: " + (d / "ro/runs.db") + ": the run store's folder '" + (d / "ro") + "': cannot write")
            .find(reason) != std::string::npos);
  if (!ro.mounted) fs::permissions(d / "ro", fs::perms::owner_all);
}
