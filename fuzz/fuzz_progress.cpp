// fuzz_progress.cpp - a checkpoint's progress.json (core/src/host/progress.cpp): what resume trusts to
// continue a run. Accepted files must write back to an equal progress.json.
#include "fuzz_util.hpp"
#include "host/progress.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx;
  const std::string path = fuzz::write_file("progress.json", {reinterpret_cast<const char*>(data), size});
  fuzz::expect_ok_or_error([&] {
    const Progress p = read_progress(path);
    const Progress q = read_progress(fuzz::write_file("again.json", progress_json(p)));
    if (q.step != p.step || q.phase != p.phase || q.reader != p.reader || q.config_hash != p.config_hash) std::abort();
  });
  return 0;
}
