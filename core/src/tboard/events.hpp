// events.hpp - TensorBoard event files: the scalars of a run by step, in an events.out.tfevents.* file that
// TensorBoard, and tools built on its reader such as tbparse, read as their own.
//
// Why: TensorBoard is where most users watch training and compare seeds; LibTorch cannot write its files. A run
// writes one beside report.jsonl as it logs (host/report.cpp, the store's rows, value for value), and `bertx runs
// export --format tensorboard` writes the same for runs already in the store.
// Format: TFRecord framing - u64 length, masked crc32c of those 8 bytes, the record, masked crc32c of it, all
// little-endian - around Event protobufs (event.proto). A file opens with the file_version event; a restarted run's
// new file opens with a SessionLog START at the step it resumes from, so TensorBoard drops the stopped process's
// records after that step (the steps are logged again) as it does for TensorFlow's restarted jobs.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace bertx::tboard {

using Scalars =
    std::vector<std::pair<std::string, double>>;  // tag -> value (written as float32, as TensorBoard keeps it)

class EventWriter {
 public:
  // Creates `folder` if needed and a new file events.out.tfevents.<unix seconds>.<host>.<pid>.<n> in it (n: the
  // first number that names no existing file), then writes its file_version record. Throws bertx::Error naming
  // the file when it cannot be created.
  explicit EventWriter(const std::string& folder, double wall_time);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One Event at `step` holding every value (NaN and infinities as they are: TensorBoard shows them).
  void scalars(std::int64_t step, const Scalars& values, double wall_time);
  // A SessionLog START at `step`: records of earlier files at steps >= step are dropped by TensorBoard's reader.
  void restart(std::int64_t step, double wall_time);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& bytes);  // framed, then flushed to the OS (a killed run keeps its lines)
  std::FILE* file_ = nullptr;
  std::string path_;
};

// The TFRecord frame of `bytes`: what a reader checks (exposed for the tests).
std::string frame_record(const std::string& bytes);

}  // namespace bertx::tboard
