// events.cpp - see events.hpp. The record bytes come from the generated lite messages (event.pb.h); the framing
// and its crc32c are base/crc.hpp's.
#include "tboard/events.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/crc.hpp"
#include "bertx/error.hpp"
#include "event.pb.h"

namespace bertx::tboard {

namespace {

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

std::string serialized(const proto::Event& e) {
  std::string bytes;
  if (!e.SerializeToString(&bytes)) throw Error("TensorBoard event: protobuf serialization failed");
  return bytes;
}

}  // namespace

std::string frame_record(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size() + 16);
  put_le(out, bytes.size(), 8);
  put_le(out, mask_crc(crc32c(out.data(), 8)), 4);
  out += bytes;
  put_le(out, mask_crc(crc32c(bytes.data(), bytes.size())), 4);
  return out;
}

EventWriter::EventWriter(const std::string& folder, double wall_time) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  const std::string stem = folder + "/events.out.tfevents." + std::to_string(static_cast<std::int64_t>(wall_time)) +
                           "." + host_name() + "." + std::to_string(::getpid()) + ".";
  // "x": never append to another writer's file (two runs sharing a folder, a pid reused within the second).
  for (int n = 0; !file_ && n < 1000; ++n) {
    path_ = stem + std::to_string(n);
    file_ = std::fopen(path_.c_str(), "wbx");
    if (!file_ && errno != EEXIST) break;
  }
  if (!file_) throw Error(path_ + ": cannot create the TensorBoard event file (" + std::strerror(errno) + ")");
  proto::Event e;
  e.set_wall_time(wall_time);
  e.set_file_version("brain.Event:2");
  write_record(serialized(e));
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

void EventWriter::write_record(const std::string& bytes) {
  if (!file_) throw Error(path_ + ": the TensorBoard event file was closed after a failed write");
  const std::string framed = frame_record(bytes);
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size() || std::fflush(file_) != 0) {
    const std::string why = std::strerror(errno);
    std::fclose(file_);
    file_ = nullptr;
    throw Error(path_ + ": cannot append to the TensorBoard event file: " + why);
  }
}

void EventWriter::scalars(std::int64_t step, const Scalars& values, double wall_time) {
  if (values.empty()) return;
  proto::Event e;
  e.set_wall_time(wall_time);
  e.set_step(step);
  auto* summary = e.mutable_summary();
  for (const auto& [tag, v] : values) {
    auto* value = summary->add_value();
    value->set_tag(tag);
    value->set_simple_value(static_cast<float>(v));
  }
  write_record(serialized(e));
}

void EventWriter::restart(std::int64_t step, double wall_time) {
  proto::Event e;
  e.set_wall_time(wall_time);
  e.set_step(step);
  e.mutable_session_log()->set_status(proto::SessionLog::START);
  write_record(serialized(e));
}

}  // namespace bertx::tboard
