// history/sweep.hpp - the torch-free half of `bertx sweep`: seed lists, the sweep's identity in the store
// (so a re-run continues the same sweep), which seeds still need a run, each seed's `bertx run` command,
// and the SLURM array script. cmd_sweep.cpp starts and supervises the processes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bertx {
class RunStore;
}

namespace bertx::history {

// "0-9", "1,3,5-7" -> ascending unique seeds. Throws bertx::Error naming --seeds and the expected form.
std::vector<std::int64_t> parse_seeds(const std::string& spec);
// The inverse, compact: {0,1,2,5} -> "0-2,5" (SLURM --array syntax).
std::string format_seeds(const std::vector<std::int64_t>& seeds);

struct SweepSpec {
  std::string experiment;         // absolute path of the experiment file
  std::string name;               // its [run] name
  std::vector<std::string> sets;  // the user's --set overrides, in order
  std::string output_dir;         // absolute base folder; seed S writes to <output_dir>/seed-S
  std::vector<std::int64_t> seeds;
};

// The sweep of the store with the same experiment file, name, overrides and base folder (seeds may differ:
// a re-run with more seeds extends it), else a new one. Returns its id. Throws bertx::Error when another
// sweep (other file, name or overrides) already uses the same base folder: its seed checkpoints would be resumed.
std::int64_t find_or_create_sweep(RunStore& store, const SweepSpec& spec);

std::string seed_output_dir(const std::string& base, std::int64_t seed);

struct SeedPlan {
  std::int64_t seed = 0;
  enum class Action { Run, Finished, Running } action = Action::Run;
  std::int64_t run_id = 0;  // the finished / running run, or the newest earlier attempt (0: none)
  std::string note;         // "run 4 finished", "run 5 failed: retrying", "run 6 is running (pid 77 on h)"
};
// One entry per seed: Finished when the sweep has a finished run of it, Running when one is still running
// (another sweep process or a job elsewhere), else Run (new, failed or interrupted: runs again and resumes
// from its checkpoint when the seed folder has one). Call reap_stale_runs() first.
std::vector<SeedPlan> plan_seeds(const RunStore& store, std::int64_t sweep_id, const std::vector<std::int64_t>& seeds);

// argv after the bertx binary for one seed: run FILE <sets> --set run.seed=S --set run.output_dir=DIR --sweep-id ID.
// `seed_text` replaces the number when given (the SLURM script passes "$SEED").
std::vector<std::string> seed_run_args(const SweepSpec& spec, std::int64_t sweep_id, std::int64_t seed,
                                       const std::string& seed_text = "");

std::string shell_quote(const std::string& s);

struct SlurmOptions {
  std::string bertx;                // absolute path of the binary
  std::string workdir;              // where the tasks run (relative store paths resolve there)
  std::vector<std::string> sbatch;  // extra #SBATCH lines, e.g. "--time=02:00:00"
  int max_parallel = 0;             // array throttle "%N"; 0 = none
};
// A bash script with one array task per seed in `seeds` (non-negative: array indices are the seeds).
std::string slurm_script(const SweepSpec& spec, std::int64_t sweep_id, const std::vector<std::int64_t>& seeds,
                         const SlurmOptions& options);

}  // namespace bertx::history
