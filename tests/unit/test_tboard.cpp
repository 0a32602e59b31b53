// test_tboard.cpp - TensorBoard event files (core/src/tboard): byte for byte against what TensorBoard's own
// Python writer (tensorboard 2.21: summary.writer.record_writer.RecordWriter over compat.proto.event_pb2.Event)
// writes for the same events, the hex below printed by it; file naming and errors. The round trip through
// TensorBoard's reader on a real run is tests/e2e/test_tensorboard.py.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "base/crc.hpp"
#include "bertx/error.hpp"
#include "tboard/events.hpp"
#include "test_util.hpp"

using namespace bertx;
using bertx::test::error_of;
using bertx::test::read_text;
using bertx::test::TempDir;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), 0, 16)));
  return out;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("crc32c: the Castagnoli check value, and the same over pieces") {
  CHECK(crc32c("123456789", 9) == 0xe3069283u);
  CHECK(crc32c("56789", 5, crc32c("1234", 4)) == 0xe3069283u);
}

TEST_CASE("a TFRecord frame equals TensorBoard's RecordWriter's") {
  CHECK(tboard::frame_record("bertx") == from_hex("0500000000000000eab2043e62657274783e8b4439"));
}

TEST_CASE("an event file equals TensorBoard's writer's bytes: file version, restart, two scalars with a 0.0") {
  TempDir d;
  std::string path;
  {
    tboard::EventWriter w(d / "run", 1.5);
    w.restart(4, 2.0);
    w.scalars(7, {{"loss", 0.0}, {"eval/f1", 0.25}}, 2.5);
    w.scalars(8, {}, 3.0);  // nothing to log: no record
    path = w.path();
  }
  CHECK(read_text(path) == from_hex("1800000000000000a37f4b2209000000000000f83f1a0d627261696e2e457665"
                                    "6e743a322a28646c0f000000000000006d532b0909000000000000004010043a"
                                    "0208017601b5eb2a00000000000000ae8d91f509000000000000044010072a1d"
                                    "0a0b0a046c6f737315000000000a0e0a076576616c2f6631150000803eaad9c0"
                                    "cf"));
}

TEST_CASE("event files: TensorBoard's name, a new file per writer, a value kept as float32") {
  TempDir d;
  tboard::EventWriter a(d.path.string(), 1700000000.25);
  tboard::EventWriter b(d.path.string(), 1700000000.75);  // the same second and process: another file
  const auto files = event_files(d.path.string());
  REQUIRE(files.size() == 2);
  CHECK(std::filesystem::path(a.path()).filename().string().rfind("events.out.tfevents.1700000000.", 0) == 0);
  CHECK(a.path() != b.path());
  const std::string before = read_text(b.path());
  b.scalars(1, {{"x", 0.1}, {"nan", std::numeric_limits<double>::quiet_NaN()}}, 1700000001.0);
  const std::string added = read_text(b.path()).substr(before.size());
  float f = 0;  // "x": tag 1 (0a 01 'x'), simple_value 2 (15, then 4 bytes)
  const auto at = added.find(std::string("\x0a\x01x\x15", 4));
  REQUIRE(at != std::string::npos);
  std::memcpy(&f, added.data() + at + 4, 4);
  CHECK(f == static_cast<float>(0.1));
  CHECK(added.find(std::string("\x0a\x03nan\x15\x00\x00\xc0\x7f", 9)) != std::string::npos);
}

TEST_CASE("an event file that cannot be created is an error naming it") {
  TempDir d;
  bertx::test::write_text(d / "file", "x");  // a folder below a regular file: fails for root too
  const std::string m = error_of([&] { tboard::EventWriter w(d / "file/run", 1.0); });
  CHECK(m.find(d / "file/run/events.out.tfevents.1.") != std::string::npos);
  CHECK(m.find("cannot create the TensorBoard event file") != std::string::npos);
}
