// signals.hpp - SIGINT/SIGTERM ask the run to stop: the loop saves, marks the run interrupted, exits.
// A second SIGINT/SIGTERM while stopping terminates at once (default action).
#pragma once

namespace bertx {
void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the signal number received, 0 if none
}  // namespace bertx
