// history/sweep.cpp - see sweep.hpp.
#include "history/sweep.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "base/json_util.hpp"
#include "store/store.hpp"

namespace bertx::history {

namespace {

constexpr std::int64_t kMaxSeeds = 100000;

std::int64_t parse_int(const std::string& s, const std::string& whole) {
  std::int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw Error("--seeds '" + whole + "': '" + s +
                "' is not an integer (expected seeds and ranges such as 0-9 or 1,3,5-7)");
  return v;
}

nlohmann::json identity(const SweepSpec& s) {
  return {{"experiment", s.experiment}, {"name", s.name}, {"sets", s.sets}, {"output_dir", s.output_dir}};
}

}  // namespace

std::vector<std::int64_t> parse_seeds(const std::string& spec) {
  std::set<std::int64_t> seeds;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    const std::size_t dash = item.find('-', 1);  // a leading '-' is a negative seed's sign
    if (dash == std::string::npos) {
      seeds.insert(parse_int(item, spec));
    } else {
      const std::int64_t a = parse_int(item.substr(0, dash), spec), b = parse_int(item.substr(dash + 1), spec);
      if (b < a) throw Error("--seeds '" + spec + "': range " + item + " ends before it starts");
      if (b - a >= kMaxSeeds) throw Error("--seeds '" + spec + "': range " + item + " has more than 100000 seeds");
      for (std::int64_t s = a; s <= b; ++s) seeds.insert(s);
    }
    if (seeds.size() > static_cast<std::size_t>(kMaxSeeds))
      throw Error("--seeds '" + spec + "': more than 100000 seeds");
    pos = comma + 1;
  }
  return {seeds.begin(), seeds.end()};
}

std::string format_seeds(const std::vector<std::int64_t>& seeds) {
  std::string out;
  for (std::size_t i = 0; i < seeds.size();) {
    std::size_t j = i;
    while (j + 1 < seeds.size() && seeds[j + 1] == seeds[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(seeds[i]);
    if (j > i) out += "-" + std::to_string(seeds[j]);
    i = j + 1;
  }
  return out;
}

std::int64_t find_or_create_sweep(RunStore& store, const SweepSpec& spec) {
  const nlohmann::json key = identity(spec);
  for (const auto& s : store.list_sweeps()) {
    const auto j = nlohmann::json::parse(s.spec, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("identity")) continue;
    if (j["identity"] == key) return s.id;
    // Seed folders hold checkpoints that `bertx run` resumes from: two sweeps must not share them.
    if (string_or(j["identity"], "output_dir") == spec.output_dir)
      throw Error(
          "run.output_dir " + spec.output_dir + " already holds the seeds of sweep " + std::to_string(s.id) + " (" +
          s.experiment +
          " with other --set overrides): give this sweep its own, e.g. --set run.output_dir=" + spec.output_dir + "-2");
  }
  return store.create_sweep(spec.experiment, nlohmann::json{{"identity", key}, {"seeds", spec.seeds}}.dump());
}

std::string seed_output_dir(const std::string& base, std::int64_t seed) {
  return base + "/seed-" + std::to_string(seed);
}

std::vector<SeedPlan> plan_seeds(const RunStore& store, std::int64_t sweep_id, const std::vector<std::int64_t>& seeds) {
  RunFilter f;
  f.sweep_id = sweep_id;
  const auto runs = store.list_runs(f);  // newest first
  std::vector<SeedPlan> out;
  for (std::int64_t seed : seeds) {
    SeedPlan p;
    p.seed = seed;
    const RunRecord* newest = nullptr;
    for (const auto& r : runs) {
      if (r.seed != seed) continue;
      if (!newest) newest = &r;
      if (r.status == RunStatus::Finished) {
        p.action = SeedPlan::Action::Finished;
        p.run_id = r.id;
        p.note = "run " + std::to_string(r.id) + " finished";
        break;
      }
      if (r.status == RunStatus::Running) {
        p.action = SeedPlan::Action::Running;
        p.run_id = r.id;
        p.note = "run " + std::to_string(r.id) + " is running (pid " + std::to_string(r.pid) + " on " + r.host + ")";
        break;
      }
    }
    if (p.action == SeedPlan::Action::Run && newest) {
      p.run_id = newest->id;
      p.note = "run " + std::to_string(newest->id) + " " + run_status_name(newest->status) + ": retrying";
    }
    out.push_back(p);
  }
  return out;
}

std::vector<std::string> seed_run_args(const SweepSpec& spec, std::int64_t sweep_id, std::int64_t seed,
                                       const std::string& seed_text) {
  const std::string s = seed_text.empty() ? std::to_string(seed) : seed_text;
  std::vector<std::string> args = {"run", spec.experiment};
  for (const auto& kv : spec.sets) {
    args.push_back("--set");
    args.push_back(kv);
  }
  for (const std::string kv : {"run.seed=" + s, "run.output_dir=" + spec.output_dir + "/seed-" + s}) {
    args.push_back("--set");
    args.push_back(kv);
  }
  args.push_back("--sweep-id");
  args.push_back(std::to_string(sweep_id));
  return args;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string slurm_script(const SweepSpec& spec, std::int64_t sweep_id, const std::vector<std::int64_t>& seeds,
                         const SlurmOptions& o) {
  if (seeds.empty()) throw Error("sweep " + std::to_string(sweep_id) + ": no seeds left to submit");
  if (seeds.front() < 0)
    throw Error("--slurm: seed " + std::to_string(seeds.front()) +
                " is negative (SLURM array indices, which are the seeds, start at 0)");
  std::string s = "#!/bin/bash\n";
  s += "# bertx sweep " + std::to_string(sweep_id) + " of " + spec.experiment + " ('" + spec.name +
       "'): one array task per seed.\n";
  s += "# Written by `bertx sweep --slurm`, which lists only the seeds without a finished run: run it again\n";
  s += "# after a partial failure to get a script for what is missing. Each task is `bertx run` of one seed.\n";
  s += "#SBATCH --job-name=bertx-sweep-" + std::to_string(sweep_id) + "\n";
  s += "#SBATCH --array=" + format_seeds(seeds) + (o.max_parallel > 0 ? "%" + std::to_string(o.max_parallel) : "") +
       "\n";
  s += "#SBATCH --output=" + spec.output_dir + "/slurm-%A_%a.out\n";
  for (const auto& extra : o.sbatch) s += "#SBATCH " + extra + "\n";
  s += "set -euo pipefail\n";
  s += "cd " + shell_quote(o.workdir) + "\n";
  s += "SEED=${SLURM_ARRAY_TASK_ID:?run this script with sbatch (it is an array job)}\n";
  s += "exec " + shell_quote(o.bertx);
  for (const auto& a : seed_run_args(spec, sweep_id, 0, "@SEED@")) {
    std::string q = shell_quote(a);
    // "$SEED" must expand: splice it in outside the single quotes.
    for (std::size_t at; (at = q.find("@SEED@")) != std::string::npos;)
      q.replace(at, 6, q.front() == '\'' ? "'\"$SEED\"'" : "\"$SEED\"");
    s += " " + q;
  }
  return s + "\n";
}

}  // namespace bertx::history
