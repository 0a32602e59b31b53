// sections.hpp - the experiment sections the host reads itself ([run], [train], [bench]), registered the way
// plugins register their builders: a registry the owners add to in one place (register_host_sections), which the
// plugin host holds and resolve() (config.cpp) validates an experiment against, next to the plugins' sections.
#pragma once
#include <string>
#include <vector>

#include "bertx/options.hpp"

namespace bertx {

// One host section of an experiment file.
struct SectionSpec {
  std::string name;         // the table's name: "train" is [train]
  std::string description;  // one line: what the section sets
  Schema (*schema)();       // its keys, types, defaults and documentation
};

class SectionRegistry {
 public:
  // Throws bertx::Error for a name already registered.
  void add(SectionSpec spec);
  const std::vector<SectionSpec>& all() const { return sections_; }  // in registration order

 private:
  std::vector<SectionSpec> sections_;
};

// Adds [run] (host/config.cpp), [train] and [bench] (host/train_options.cpp), [distill] (host/distill_options.cpp):
// the one place they are listed.
void register_host_sections(SectionRegistry& registry);

}  // namespace bertx
