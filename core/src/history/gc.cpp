// history/gc.cpp - see gc.hpp.
#include "history/gc.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "bertx/error.hpp"
#include "host/progress.hpp"

namespace bertx::history {

namespace fs = std::filesystem;

namespace {

std::uintmax_t size_of(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return fs::file_size(p, ec);
  std::uintmax_t total = 0;
  for (fs::recursive_directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

std::string human(std::uintmax_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

}  // namespace

std::vector<GcItem> plan_gc(const RunStore& store, const GcQuery& q) {
  if (!q.keep_last && !q.status && q.runs.empty())
    throw Error("runs gc needs a selection: --keep-last N, --status S or --run ID (add --dry-run to only list)");
  for (std::int64_t id : q.runs)
    if (!store.get_run(id)) throw Error("--run " + std::to_string(id) + ": no run with this id in " + store.path());
  RunFilter f;
  if (!q.experiment.empty()) f.name = q.experiment;
  f.status = q.status;
  std::map<std::string, std::size_t> seen;  // per name, runs passed so far (newest first)
  std::vector<GcItem> items;
  for (const auto& r : store.list_runs(f)) {
    const std::size_t rank = seen[r.name]++;
    if (q.keep_last && rank < *q.keep_last) continue;
    if (!q.runs.empty() && std::find(q.runs.begin(), q.runs.end(), r.id) == q.runs.end()) continue;
    std::vector<Artifact> ckpts;
    for (const auto& a : store.artifacts(r.id))
      if (a.kind == "checkpoint") ckpts.push_back(a);
    std::int64_t newest = -1;
    for (const auto& a : ckpts) newest = std::max(newest, a.step);
    const std::string label = "run " + std::to_string(r.id) + " (" + r.name + ", seed " + std::to_string(r.seed) +
                              ", " + run_status_name(r.status) + ")";
    for (const auto& a : ckpts) {
      GcItem it;
      it.run_id = r.id;
      it.run = label;
      it.path = a.path;
      it.step = a.step;
      std::error_code ec;
      if (r.status == RunStatus::Running && a.step == newest) {
        it.action = GcItem::Action::Keep;
        it.why = "newest checkpoint of a running run";
      } else if (!fs::exists(a.path, ec)) {
        it.action = GcItem::Action::Gone;
      } else if (!fs::exists(fs::path(a.path) / "progress.json", ec)) {
        it.action = GcItem::Action::Keep;
        it.why = "not a bertx checkpoint folder (no progress.json)";
      } else {
        it.bytes = size_of(a.path);
      }
      items.push_back(it);
    }
  }
  return items;
}

std::uintmax_t apply_gc(RunStore& store, const std::vector<GcItem>& items) {
  std::uintmax_t freed = 0;
  for (const auto& it : items) {
    if (it.action == GcItem::Action::Keep) continue;
    if (it.action == GcItem::Action::Remove) {
      std::error_code ec;
      remove_checkpoint_dir(it.path, ec);  // all at once: a killed gc leaves no half-deleted checkpoint
      if (ec) throw Error("runs gc: cannot remove " + it.path + " (" + it.run + "): " + ec.message());
      freed += it.bytes;
    }
    store.remove_artifact(it.run_id, "checkpoint", it.path);
  }
  return freed;
}

std::string format_gc(const std::vector<GcItem>& items, bool dry_run) {
  std::string out;
  std::uintmax_t total = 0;
  std::size_t removed = 0, gone = 0;
  for (const auto& it : items) {
    if (it.action == GcItem::Action::Gone) {  // rotated away by the trainer: only the row is left
      ++gone;
      continue;
    }
    const bool keep = it.action == GcItem::Action::Keep;
    if (!keep) total += it.bytes, ++removed;
    out += it.run + " step " + std::to_string(it.step) + "  " + it.path + "  " +
           (keep ? "kept: " + it.why : std::string(dry_run ? "would remove " : "removed ") + human(it.bytes)) + "\n";
  }
  out +=
      std::string(dry_run ? "would remove " : "removed ") + std::to_string(removed) + " checkpoint(s), " + human(total);
  if (gone)
    out += std::string(dry_run ? "; would forget " : "; forgot ") + std::to_string(gone) +
           " record(s) of checkpoints already deleted";
  return out + (dry_run ? " (dry run: nothing changed)\n" : "\n");
}

}  // namespace bertx::history
