// cmd_launch.cpp - `bertx launch` (torchrun for bertx: start N local ranks of this binary with
// RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT, prefix their output with
// "[rank r]", stop them all when one fails, forward SIGINT/SIGTERM) and `bertx launch-check`.
// The supervisor is one poll() loop over the ranks' pipes and a self-pipe written by the signal
// handlers; no threads, no LibTorch. Ranks run in their own process groups (a terminal Ctrl-C reaches
// them once, through the launcher) and get SIGTERM if the launcher dies (PR_SET_PDEATHSIG).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bertx/error.hpp"
#include "base/build_info.hpp"
#include "commands.hpp"
#include "dist/launch_check.hpp"

extern char** environ;

namespace bertx::cli {

namespace {

struct LaunchArgs {
  int nproc_per_node = 1, nnodes = 1, node_rank = 0, master_port = 0;
  std::string master_addr;
  double grace_seconds = 10;
  std::vector<std::string> command;
};

struct Rank {
  int rank = 0, local_rank = 0;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr read ends
  std::string partial[2], last_line[2];
  std::string error_line;  // the message of the last error a rank printed, either stream (bertx logs errors to stdout)
  bool done = false;
  bool stopped_by_launcher = false;  // still running when another rank failed and we sent SIGTERM
  int status = 0;
};

// A failure caused by another rank's: ended by our SIGTERM/SIGKILL, or a collective that lost its peer
// (the wording of DataParallel's errors). The launcher names the first failure that is not one of these.
bool consequential(const Rank& r) {
  const bool by_our_signal = WIFSIGNALED(r.status)
                                 ? (WTERMSIG(r.status) == SIGTERM || WTERMSIG(r.status) == SIGKILL)
                                 : (WEXITSTATUS(r.status) == 128 + SIGTERM || WEXITSTATUS(r.status) == 128 + SIGKILL);
  return (r.stopped_by_launcher && by_our_signal) ||
         r.error_line.find("another rank probably stopped") != std::string::npos;
}

int g_self_pipe[2] = {-1, -1};
volatile sig_atomic_t g_signal = 0;

void on_signal(int sig) {
  if (sig != SIGCHLD) g_signal = sig;
  const int saved = errno;
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] auto n = write(g_self_pipe[1], &byte, 1);
  errno = saved;
}

int free_tcp_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 29500;
  if (s >= 0 && bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (s >= 0) close(s);
  return port;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

// The message of one of bertx's own error lines, nullopt for any other line: spdlog's "[12:00:00] error MSG" gives
// MSG, the CLI's "bertx: error: ..." the whole line. A library warning printed later (c10d, Gloo) must not take
// the place of the error that ended the rank.
std::optional<std::string> error_message(const std::string& line) {
  if (line.rfind("bertx: error:", 0) == 0) return line;
  const std::size_t level = line.rfind("[", 0) == 0 ? line.find("] error ") : std::string::npos;
  if (level == std::string::npos) return std::nullopt;
  return line.substr(level + 8);
}

// Forwards complete lines from a rank's pipe, prefixed; returns false at end of file.
bool pump(Rank& r, int which) {
  char buf[65536];
  const ssize_t n = read(r.fds[which], buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  std::FILE* out = which == 0 ? stdout : stderr;
  std::string& part = r.partial[which];
  if (n > 0) part.append(buf, static_cast<std::size_t>(n));
  std::size_t start = 0;
  for (std::size_t nl; (nl = part.find('\n', start)) != std::string::npos || (n == 0 && start < part.size());
       start = nl + 1) {
    if (nl == std::string::npos) nl = part.size();  // a last line without newline
    const std::string line = part.substr(start, nl - start);
    std::fprintf(out, "[rank %d] %s\n", r.rank, line.c_str());
    if (line.find_first_not_of(" \t\r") != std::string::npos) r.last_line[which] = line;
    if (auto message = error_message(line)) r.error_line = std::move(*message);
  }
  part.erase(0, std::min(start, part.size()));
  std::fflush(out);
  return n > 0;
}

int launch(const LaunchArgs& a) {
  if (a.nproc_per_node < 1) throw Error("--nproc-per-node " + std::to_string(a.nproc_per_node) + ": expected >= 1");
  if (a.nnodes < 1) throw Error("--nnodes " + std::to_string(a.nnodes) + ": expected >= 1");
  if (a.node_rank < 0 || a.node_rank >= a.nnodes)
    throw Error(fmt::format("--node-rank {}: expected 0..{} (--nnodes {})", a.node_rank, a.nnodes - 1, a.nnodes));
  if (a.nnodes > 1 && a.master_addr.empty())
    throw Error("--master-addr is required with --nnodes " + std::to_string(a.nnodes) + " (the host of node rank 0)");
  if (a.master_port < 0 || a.master_port > 65535)
    throw Error("--master-port " + std::to_string(a.master_port) + ": expected 1..65535");
  if (a.command.empty())
    throw Error("bertx launch needs a command after --, e.g. `bertx launch --nproc-per-node 2 -- run exp.toml`");
  if (a.command[0] == "launch") throw Error("bertx launch -- launch ...: launchers do not nest");

  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string addr = a.master_addr.empty() ? "127.0.0.1" : a.master_addr;
  const int port = a.master_port > 0 ? a.master_port : a.nnodes == 1 ? free_tcp_port() : 29500;
  const int world = a.nnodes * a.nproc_per_node;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());

  if (pipe2(g_self_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error("bertx launch: pipe: " + std::string(std::strerror(errno)));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD}) sigaction(sig, &sa, nullptr);

  std::vector<Rank> ranks(static_cast<std::size_t>(a.nproc_per_node));
  const pid_t launcher = getpid();
  for (int local = 0; local < a.nproc_per_node; ++local) {
    Rank& r = ranks[static_cast<std::size_t>(local)];
    r.local_rank = local;
    r.rank = a.node_rank * a.nproc_per_node + local;
    // Everything the child needs is built before fork (only async-signal-safe calls after it).
    std::vector<std::string> env_s;
    const std::map<std::string, std::string> set = {{"RANK", std::to_string(r.rank)},
                                                    {"WORLD_SIZE", std::to_string(world)},
                                                    {"LOCAL_RANK", std::to_string(local)},
                                                    {"LOCAL_WORLD_SIZE", std::to_string(a.nproc_per_node)},
                                                    {"GROUP_RANK", std::to_string(a.node_rank)},
                                                    {"MASTER_ADDR", addr},
                                                    {"MASTER_PORT", std::to_string(port)}};
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      if (!set.count(kv.substr(0, kv.find('=')))) env_s.push_back(kv);
    }
    for (const auto& [k, v] : set) env_s.push_back(k + "=" + v);
    if (!std::getenv("OMP_NUM_THREADS"))
      env_s.push_back("OMP_NUM_THREADS=" +
                      std::to_string(std::max(1u, cores / static_cast<unsigned>(a.nproc_per_node))));
    std::vector<char*> envp, argv;
    for (auto& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = {exe};
    args.insert(args.end(), a.command.begin(), a.command.end());
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);

    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
      throw Error("bertx launch: pipe: " + std::string(std::strerror(errno)));
    r.pid = fork();
    if (r.pid < 0) throw Error("bertx launch: fork of rank " + std::to_string(r.rank) + ": " + std::strerror(errno));
    if (r.pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != launcher) _exit(128 + SIGTERM);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig : {SIGINT, SIGTERM, SIGCHLD}) sigaction(sig, &dfl, nullptr);
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      execve(exe.c_str(), argv.data(), envp.data());
      const char msg[] = "bertx launch: execve of the bertx binary failed\n";
      [[maybe_unused]] auto n = write(STDERR_FILENO, msg, sizeof msg - 1);
      _exit(127);
    }
    setpgid(r.pid, r.pid);  // also here: no window where kill(-pid) misses the child
    close(out[1]);
    close(err[1]);
    r.fds[0] = out[0];
    r.fds[1] = err[0];
    for (int fd : r.fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  std::fprintf(stderr, "bertx launch: %d rank(s) here (ranks %d..%d of %d), master %s:%d\n", a.nproc_per_node,
               ranks.front().rank, ranks.back().rank, world, addr.c_str(), port);

  using Clock = std::chrono::steady_clock;
  std::vector<std::size_t> failures;  // ranks that failed, in the order they were reaped
  int interrupted = 0;
  std::optional<Clock::time_point> kill_at;
  std::optional<Clock::time_point> drain_until;
  auto signal_running = [&](int sig) {
    for (const Rank& r : ranks)
      if (!r.done) kill(-r.pid, sig);
  };

  for (;;) {
    std::vector<pollfd> pfds{{g_self_pipe[0], POLLIN, 0}};
    std::vector<std::pair<std::size_t, int>> owners;
    for (std::size_t i = 0; i < ranks.size(); ++i)
      for (int w = 0; w < 2; ++w)
        if (ranks[i].fds[w] >= 0) {
          pfds.push_back({ranks[i].fds[w], POLLIN, 0});
          owners.emplace_back(i, w);
        }
    const bool all_done = std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.done; });
    if (all_done && (owners.empty() || (drain_until && Clock::now() > *drain_until))) break;
    if (all_done && !drain_until) drain_until = Clock::now() + std::chrono::seconds(2);  // output of grandchildren
    poll(pfds.data(), pfds.size(), 200);

    char drained[64];
    while (read(g_self_pipe[0], drained, sizeof drained) > 0) {
    }
    for (std::size_t k = 1; k < pfds.size(); ++k)
      if (pfds[k].revents) {
        auto [i, w] = owners[k - 1];
        if (!pump(ranks[i], w)) {
          close(ranks[i].fds[w]);
          ranks[i].fds[w] = -1;
        }
      }
    if (g_signal) {
      const int sig = g_signal;
      g_signal = 0;
      std::fprintf(stderr, "bertx launch: %s received, forwarding it to the ranks\n", strsignal(sig));
      interrupted = sig;
      signal_running(sig);
    }
    for (;;) {  // reap
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (std::size_t i = 0; i < ranks.size(); ++i)
        if (ranks[i].pid == pid) {
          ranks[i].done = true;
          ranks[i].status = status;
          if (failed(status) && !interrupted) failures.push_back(i);
          if (failed(status) && failures.size() == 1 && !interrupted && !kill_at) {
            for (Rank& other : ranks) other.stopped_by_launcher = !other.done;
            signal_running(SIGTERM);
            kill_at = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(a.grace_seconds * 1000));
          }
        }
    }
    if (kill_at && Clock::now() >= *kill_at) {
      signal_running(SIGKILL);
      kill_at.reset();
    }
  }
  for (Rank& r : ranks)  // pipes a grandchild still holds open: print what is buffered, stop reading
    for (int w = 0; w < 2; ++w)
      if (r.fds[w] >= 0) {
        if (!r.partial[w].empty())
          std::fprintf(w == 0 ? stdout : stderr, "[rank %d] %s\n", r.rank, r.partial[w].c_str());
        close(r.fds[w]);
      }
  std::fflush(stdout);

  if (!failures.empty()) {
    // Rank pipes are drained by now, so last lines are complete: prefer a rank that failed on its own.
    auto cause =
        std::find_if(failures.begin(), failures.end(), [&](std::size_t i) { return !consequential(ranks[i]); });
    const Rank& r = ranks[cause == failures.end() ? failures.front() : *cause];
    const std::string& last = !r.error_line.empty()    ? r.error_line
                              : r.last_line[1].empty() ? r.last_line[0]
                                                       : r.last_line[1];
    std::fprintf(stderr,
                 "bertx: error: rank %d (local rank %d on %s, pid %d) %s%s; stopped the other %zu local rank(s)\n",
                 r.rank, r.local_rank, host_name().c_str(), static_cast<int>(r.pid), describe_status(r.status).c_str(),
                 last.empty() ? "" : (": " + last).c_str(), ranks.size() - 1);
    return std::max(1, exit_code_of(r.status));
  }
  int code = 0;
  for (const Rank& r : ranks)
    if (failed(r.status) && !code) code = exit_code_of(r.status);
  if (interrupted) {
    std::fprintf(stderr, "bertx launch: stopped by %s; every rank has exited\n", strsignal(interrupted));
    return code ? code : 128 + interrupted;
  }
  return code;
}

}  // namespace

void add_launch_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<LaunchArgs>();
  CLI::App* cmd =
      app.add_subcommand("launch", "start and supervise the ranks of a data-parallel job on this node (like torchrun)");
  cmd->add_option("--nproc-per-node", a->nproc_per_node, "ranks on this node (one per GPU)")->required();
  cmd->add_option("--nnodes", a->nnodes, "nodes in the job")->capture_default_str();
  cmd->add_option("--node-rank", a->node_rank, "this node's index, 0..nnodes-1")->capture_default_str();
  cmd->add_option("--master-addr", a->master_addr,
                  "host of node rank 0 (default 127.0.0.1; required with --nnodes > 1)");
  cmd->add_option("--master-port", a->master_port,
                  "rendezvous port (default: a free port on one node, 29500 across nodes)");
  cmd->add_option("--grace-seconds", a->grace_seconds,
                  "after one rank fails: seconds between SIGTERM and SIGKILL of the others")
      ->capture_default_str();
  cmd->add_option("command", a->command, "the bertx command every rank runs, after --: e.g. -- run exp.toml")
      ->required();
  cmd->footer(
      "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and OMP_NUM_THREADS = "
      "cores / "
      "ranks when unset); its output lines are prefixed with [rank r]. If a rank exits non-zero or by a signal, the "
      "others get "
      "SIGTERM (SIGKILL after the grace period) and bertx launch exits with that rank's code.");
  cmd->callback([a, &exit_code] { exit_code = launch(*a); });

  auto c = std::make_shared<LaunchCheckOptions>();
  CLI::App* check = app.add_subcommand("launch-check",
                                       "check a multi-process set-up: run under bertx launch / srun / mpirun / "
                                       "torchrun, every rank joins, collectives are verified and timed");
  check->add_option("--backend", c->backend, "auto | gloo | nccl")->capture_default_str();
  check->add_option("--device", c->device, "auto | cpu | cuda")->capture_default_str();
  check->add_option("--size-mb", c->size_mb, "all-reduce size for the bandwidth figure (MiB)")->capture_default_str();
  check->add_option("--timeout", c->timeout_s, "seconds before a missing rank or a hung collective is an error")
      ->capture_default_str();
  check->add_option("--fail-rank", c->fail_rank, "rehearse a failure: this rank exits with code 3 after joining");
  check->callback([c, &exit_code] { exit_code = run_launch_check(*c); });
}

}  // namespace bertx::cli
