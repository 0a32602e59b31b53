// history/gc.hpp - `bertx runs gc`: remove the checkpoints (artifacts of kind "checkpoint") of runs picked
// by an explicit selection, with a dry run that lists them first. The newest checkpoint of a running run is
// never removed, nor a folder that does not look like a bertx checkpoint (no progress.json).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace bertx::history {

struct GcQuery {
  std::string experiment;                // only runs with this [run] name
  std::optional<RunStatus> status;       // only runs with this status
  std::optional<std::size_t> keep_last;  // per [run] name, the N newest runs keep theirs
  std::vector<std::int64_t> runs;        // only these runs
};

struct GcItem {
  std::int64_t run_id = 0;
  std::string run;  // "run 3 (squad, seed 1, failed)"
  std::string path;
  std::int64_t step = 0;
  std::uintmax_t bytes = 0;
  enum class Action { Remove, Gone, Keep } action = Action::Remove;  // Gone: folder already removed, row dropped
  std::string why;                                                   // for Keep
};

// Throws bertx::Error when the selection is empty (no --keep-last/--status/--run) or names an unknown run.
std::vector<GcItem> plan_gc(const RunStore& store, const GcQuery& query);
// Removes the folders of Remove items and the store rows of Remove and Gone items. Returns bytes freed.
std::uintmax_t apply_gc(RunStore& store, const std::vector<GcItem>& items);
std::string format_gc(const std::vector<GcItem>& items, bool dry_run);

}  // namespace bertx::history
