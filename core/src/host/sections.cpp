// sections.cpp - the host's experiment sections, registered in one place (sections.hpp says why).
#include "host/sections.hpp"

#include "bertx/error.hpp"
#include "host/config.hpp"
#include "host/distill_options.hpp"
#include "host/train_options.hpp"

namespace bertx {

void SectionRegistry::add(SectionSpec spec) {
  for (const auto& s : sections_)
    if (s.name == spec.name) throw Error("host section [" + spec.name + "] is registered twice");
  sections_.push_back(std::move(spec));
}

void register_host_sections(SectionRegistry& registry) {
  registry.add(
      {"run", "what every experiment has: name, seed, folders, store, device, data-parallel settings", &run_schema});
  registry.add({"train", "the training loop: steps, batch, accumulation, precision, schedule, checkpoints, resume",
                &train_schema});
  registry.add({"bench", "benchmark mode: warm-up and timed steps, what is reported", &bench_schema});
  registry.add({"distill", "knowledge distillation: the teacher and the weight of each loss", &distill_schema});
}

}  // namespace bertx
