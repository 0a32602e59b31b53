// fuzz_glue.cpp - GLUE TSV files (plugins/glue/{tsv,tasks}.cpp, compiled into this target): the
// first byte picks one of the nine tasks' layouts (or a generic 2-class / regression task) and train/dev
// (labelled) or test layout; the rest is the file.
#include "fuzz_util.hpp"
#include "tasks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx;
  if (size < 1) return 0;
  const auto& all = glue::tasks();
  const std::size_t pick = (data[0] >> 1) % (all.size() + 2);
  const glue::TaskSpec spec = pick < all.size() ? all[pick] : glue::generic_task(pick == all.size() ? 2 : 1);
  const bool labelled = data[0] & 1;
  const std::string path = fuzz::write_file("data.tsv", {reinterpret_cast<const char*>(data) + 1, size - 1});
  fuzz::expect_ok_or_error([&] {
    for (const glue::Example& e : glue::load_examples(spec, path, labelled))
      if (labelled && !spec.regression() && (e.label < 0 || e.label >= spec.num_labels())) std::abort();
  });
  return 0;
}
