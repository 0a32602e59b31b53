// op_profile.hpp - where a training step's time goes, operator by operator: while an OpProfile lives, every
// ATen operator and autograd backward node run on any thread is timed through LibTorch's RecordFunction
// callbacks; self time = own time minus the operators it called. `bertx bench train --profile` prints the
// table of the timed steps (what torch.profiler's key_averages shows for the Python peers) and writes it as
// JSON. Costs a few microseconds per operator: the profiled figures are slower than a plain benchmark.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace bertx {

class OpProfile {
 public:
  OpProfile();   // starts recording (one global callback)
  ~OpProfile();  // stops recording
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // The `top` operators by self time: name, calls, self ms, total ms, % of all self time; `per` divides the
  // times (e.g. the number of steps, for per-step figures).
  std::string table(int top, double per) const;
  // Every operator: [{"name", "calls", "self_ms", "total_ms"}], sorted by self time.
  nlohmann::json json() const;

 private:
  std::uint64_t handle_ = 0;
};

}  // namespace bertx
