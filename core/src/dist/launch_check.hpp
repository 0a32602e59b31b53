// launch_check.hpp - `bertx launch-check`: a cluster set-up check run under a launcher (bertx launch,
// srun, mpirun, torchrun). Every rank joins, then all-reduce, broadcast and agreement are verified and
// the all-reduce bandwidth is measured. No LibTorch in this header (the CLI includes it).
#pragma once
#include <string>

namespace bertx {

struct LaunchCheckOptions {
  std::string backend = "auto";  // auto | gloo | nccl
  std::string device = "auto";   // auto | cpu | cuda
  double size_mb = 64;           // all-reduce size for the bandwidth figure
  int timeout_s = 300;           // rendezvous and collectives
  int fail_rank = -1;            // rehearse a crash: this rank exits at once with code 3 after joining
};

// Returns the process exit code (0: every check passed); errors throw bertx::Error.
int run_launch_check(const LaunchCheckOptions& options);

}  // namespace bertx
