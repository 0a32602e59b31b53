// signals.cpp - async-signal-safe stop flag for SIGINT/SIGTERM.
#include "signals.hpp"

#include <csignal>

namespace bertx {

static volatile std::sig_atomic_t g_stop_signal = 0;

static void on_stop(int sig) {
  if (g_stop_signal != 0) {  // second request: give up on a clean stop
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_stop_signal = sig;
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = &on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: blocking calls return EINTR so loops notice promptly
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop_signal != 0; }
int stop_signal() { return g_stop_signal; }

}  // namespace bertx
