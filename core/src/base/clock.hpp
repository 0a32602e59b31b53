// clock.hpp - wall-clock seconds since the Unix epoch, as the run store, report.jsonl and TensorBoard's Event
// records keep time: one definition for all three.
#pragma once
#include <chrono>

namespace bertx {

inline double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace bertx
