// cmd_sweep.cpp - `bertx sweep exp.toml --seeds 0-9 [--jobs N] [--set k=v ...] [--slurm [--submit]]`:
// one `bertx run` per seed, each a child process of this binary (/proc/self/exe) with its own output
// folder <output_dir>/seed-S and console log, linked to one sweep id in the store. A re-run of the same
// command finds that sweep again, skips seeds with a finished run and retries failed or interrupted ones
// (which resume from their checkpoints). SIGINT/SIGTERM are forwarded to the running seeds (which
// checkpoint and record themselves interrupted); a second signal kills them. --slurm writes an array job
// script for the missing seeds instead (and --submit hands it to sbatch).
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "commands.hpp"
#include "host/config.hpp"
#include "base/fs_util.hpp"
#include "history/sweep.hpp"
#include "host/plugin_host.hpp"
#include "store/store.hpp"

extern char** environ;

namespace bertx::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_signal_count = 0;

void on_signal(int sig) {
  g_signal = sig;
  g_signal_count = g_signal_count + 1;
}

struct SweepArgs {
  std::string file, seeds, slurm_script;
  std::vector<std::string> sets, sbatch;
  int jobs = 1;
  bool slurm = false, submit = false, dry_run = false;
};

struct Child {
  std::int64_t seed = 0;
  Clock::time_point started;
  std::string log;
};

// The last non-blank line of a console log (its final error, usually), at most 300 characters.
std::string last_line_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 65536));
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last.size() > 300 ? last.substr(0, 300) + "..." : last;
}

// fork + exec of this binary with `args`, output appended to `log`, in its own process group (a terminal
// Ctrl-C reaches it once, through us) and SIGTERM when this process dies (PR_SET_PDEATHSIG).
pid_t spawn_seed(const std::string& exe, const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv_s = {exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("bertx sweep: cannot open " + log + ": " + std::strerror(errno));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    throw Error(std::string("bertx sweep: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(128 + SIGTERM);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM}) sigaction(sig, &dfl, nullptr);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(exe.c_str(), argv.data(), environ);
    const char msg[] = "bertx sweep: execve of the bertx binary failed\n";
    [[maybe_unused]] auto n = write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(127);
  }
  setpgid(pid, pid);
  close(fd);
  return pid;
}

std::string command_line(const std::string& exe, const std::vector<std::string>& args) {
  std::string s = history::shell_quote(exe);
  for (const auto& a : args) s += " " + history::shell_quote(a);
  return s;
}

// sbatch SCRIPT, waited for; its output passes through. Returns its exit code.
int submit(const std::string& script) {
  std::vector<std::string> args_s = {"sbatch", script};
  std::vector<char*> argv;
  for (auto& s : args_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "sbatch", nullptr, nullptr, argv.data(), environ);
  if (rc != 0)
    throw Error("--submit: cannot start sbatch (" + std::string(std::strerror(rc)) +
                "); the script is written: " + script);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Runs the seeds `todo`, at most `jobs` at a time. Returns the exit code of the sweep.
int run_local(const history::SweepSpec& spec, std::int64_t sweep_id, const std::vector<std::int64_t>& todo, int jobs,
              const std::vector<std::string>& extra_sets, const std::string& store_path) {
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) sigaction(sig, &sa, nullptr);

  std::size_t next = 0;
  std::map<pid_t, Child> running;
  int finished = 0, failed = 0, forwarded = 0;
  while (next < todo.size() || !running.empty()) {
    while (!g_signal && next < todo.size() && static_cast<int>(running.size()) < jobs) {
      const std::int64_t seed = todo[next++];
      const std::string dir = history::seed_output_dir(spec.output_dir, seed);
      fs::create_directories(dir);
      auto args = history::seed_run_args(spec, sweep_id, seed);
      args.insert(args.end() - 2, extra_sets.begin(), extra_sets.end());  // before --sweep-id ID
      Child c{seed, Clock::now(), dir + "/console.log"};
      const pid_t pid = spawn_seed(exe, args, c.log);
      running.emplace(pid, c);
      std::printf("seed %lld: started (pid %d, log %s)\n", static_cast<long long>(seed), static_cast<int>(pid),
                  c.log.c_str());
      std::fflush(stdout);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const Child c = running.at(pid);
      running.erase(pid);
      const double secs = std::chrono::duration<double>(Clock::now() - c.started).count();
      auto store = RunStore::open(store_path);
      const auto plan = history::plan_seeds(*store, sweep_id, {c.seed}).front();
      const bool ok =
          WIFEXITED(status) && WEXITSTATUS(status) == 0 && plan.action == history::SeedPlan::Action::Finished;
      if (ok) {
        ++finished;
        std::printf("seed %lld: finished (run %lld, %.1f s)\n", static_cast<long long>(c.seed),
                    static_cast<long long>(plan.run_id), secs);
      } else {
        ++failed;
        const std::string how = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                                  : "signal " + std::to_string(WTERMSIG(status));
        const std::string last = last_line_of(c.log);
        std::printf("seed %lld: %s (%s, %.1f s; log %s)%s\n", static_cast<long long>(c.seed),
                    g_signal ? "interrupted" : "failed", how.c_str(), secs, c.log.c_str(),
                    last.empty() ? "" : (": " + last).c_str());
      }
      std::fflush(stdout);
      continue;
    }
    if (g_signal && forwarded < g_signal_count) {
      forwarded = g_signal_count;
      const int sig = forwarded > 1 ? SIGKILL : SIGTERM;
      std::fprintf(stderr, "bertx sweep: %s received; %s %zu running seed(s)%s\n", strsignal(g_signal),
                   sig == SIGKILL ? "killing" : "stopping", running.size(),
                   sig == SIGKILL ? "" : " (they checkpoint; signal again to kill them)");
      for (const auto& [p, c] : running) kill(-p, sig);
    }
    poll(nullptr, 0, 100);
  }
  const std::size_t not_started = todo.size() - next;
  std::printf("sweep %lld: %d finished, %d failed or interrupted, %zu not started\n", static_cast<long long>(sweep_id),
              finished, failed, not_started);
  if (g_signal) return 128 + g_signal;
  return failed ? 1 : 0;
}

int sweep(const SweepArgs& a) {
  if (a.jobs < 1) throw Error("--jobs " + std::to_string(a.jobs) + ": expected 1 or more");
  if (a.submit && !a.slurm) throw Error("--submit needs --slurm (it submits the written array job script)");
  const auto seeds = history::parse_seeds(a.seeds);
  for (const auto& kv : a.sets)
    if (kv.rfind("run.seed=", 0) == 0 || kv.rfind("run.seed =", 0) == 0)
      throw Error("--set " + kv + ": the sweep sets run.seed itself (use --seeds)");
  const Experiment exp = Experiment::load(a.file, a.sets);
  PluginHost host;
  host.scan(PluginHost::default_search_path());
  for (const auto& p : host.problems()) spdlog::warn("plugin refused: {}", p);
  const ResolvedConfig rc = resolve(exp, host);  // fails here once rather than in every seed

  history::SweepSpec spec;
  spec.experiment = fs::absolute(a.file).lexically_normal().string();
  spec.name = rc.run.name;
  spec.sets = a.sets;
  spec.output_dir = fs::absolute(rc.run.output_dir).lexically_normal().string();
  spec.seeds = seeds;
  auto store = RunStore::open(rc.run.store);
  store->reap_stale_runs();
  const std::int64_t sweep_id = history::find_or_create_sweep(*store, spec);
  std::printf("sweep %lld: %s ('%s'), seeds %s, outputs %s/seed-S, store %s\n", static_cast<long long>(sweep_id),
              spec.experiment.c_str(), spec.name.c_str(), history::format_seeds(seeds).c_str(), spec.output_dir.c_str(),
              store->path().c_str());
  std::vector<std::int64_t> todo;
  for (const auto& p : history::plan_seeds(*store, sweep_id, seeds)) {
    if (p.action == history::SeedPlan::Action::Run) todo.push_back(p.seed);
    if (p.action == history::SeedPlan::Action::Finished)
      std::printf("seed %lld: already finished (%s)\n", static_cast<long long>(p.seed), p.note.c_str());
    else if (p.action == history::SeedPlan::Action::Running)
      std::printf("seed %lld: skipped, %s\n", static_cast<long long>(p.seed), p.note.c_str());
    else if (!p.note.empty())
      std::printf("seed %lld: %s\n", static_cast<long long>(p.seed), p.note.c_str());
  }
  const std::string table_hint = "bertx runs --store " + history::shell_quote(store->path()) + " table --sweep " +
                                 std::to_string(sweep_id) + " --metric NAME";
  store.reset();
  if (todo.empty()) {
    std::printf("nothing to run: every seed has a finished run (%s)\n", table_hint.c_str());
    return 0;
  }
  std::vector<std::string> extra_sets;
  if (rc.run.threads == 0 && a.jobs > 1 && !a.slurm) {  // N seeds side by side: share the cores
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    extra_sets = {"--set", "run.threads=" + std::to_string(std::max(1u, cores / static_cast<unsigned>(a.jobs)))};
  }
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  if (a.dry_run) {
    for (std::int64_t s : todo) {
      auto args = history::seed_run_args(spec, sweep_id, s);
      args.insert(args.end() - 2, extra_sets.begin(), extra_sets.end());
      std::printf("%s\n", command_line(exe, args).c_str());
    }
    return 0;
  }
  if (a.slurm) {
    history::SlurmOptions o;
    o.bertx = exe;
    o.workdir = fs::current_path().string();
    o.sbatch = a.sbatch;
    o.max_parallel = a.jobs > 1 ? a.jobs : 0;
    const std::string path =
        a.slurm_script.empty() ? spec.output_dir + "/sweep-" + std::to_string(sweep_id) + ".sbatch" : a.slurm_script;
    fs::create_directories(spec.output_dir);  // SLURM writes the tasks' output there; it creates no folders
    write_file_atomic(path, history::slurm_script(spec, sweep_id, todo, o));
    fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
    std::printf("wrote %s: array job of %zu seed(s) (%s)\n", path.c_str(), todo.size(),
                history::format_seeds(todo).c_str());
    if (!a.submit) {
      std::printf("submit it with: sbatch %s\n", history::shell_quote(path).c_str());
      return 0;
    }
    return submit(path);
  }
  const int code = run_local(spec, sweep_id, todo, a.jobs, extra_sets, rc.run.store);
  std::printf("table: %s\n", table_hint.c_str());
  return code;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd =
      app.add_subcommand("sweep", "run an experiment once per seed (locally, N at a time, or as a SLURM array job)");
  cmd->add_option("file", a->file, "experiment TOML file")->required();
  cmd->add_option("--seeds", a->seeds, "seeds and ranges, e.g. 0-9 or 1,3,5-7")->required();
  cmd->add_option("--jobs,-j", a->jobs, "seeds run at once on this machine (with --slurm: the array's %N throttle)")
      ->capture_default_str();
  cmd->add_option("--set", a->sets, "override a value for every seed: section.key=value (repeatable)");
  cmd->add_flag("--dry-run", a->dry_run, "print the command of each seed still to run, run nothing");
  cmd->add_flag("--slurm", a->slurm, "write a SLURM array job script (one task per missing seed) instead of running");
  cmd->add_flag("--submit", a->submit, "with --slurm: submit the script with sbatch");
  cmd->add_option("--slurm-script", a->slurm_script,
                  "where --slurm writes the script (default <output_dir>/sweep-ID.sbatch)");
  cmd->add_option("--sbatch", a->sbatch, "extra #SBATCH line for --slurm, e.g. --sbatch=--time=02:00:00 (repeatable)");
  cmd->footer(
      "Seed S runs `bertx run FILE --set run.seed=S --set run.output_dir=<output_dir>/seed-S --sweep-id ID`; "
      "its console output goes to <output_dir>/seed-S/console.log. Running the same command again continues "
      "the same sweep: finished seeds are skipped, failed and interrupted ones run again (resuming from their "
      "checkpoints). The seeds' table: bertx runs table --sweep ID --metric NAME.");
  cmd->callback([a, &exit_code] { exit_code = sweep(*a); });
}

}  // namespace bertx::cli
