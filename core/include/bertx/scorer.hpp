// bertx/scorer.hpp - the Scorer plugin interface: a benchmark's official metric over files on disk (a dataset and
// a predictions file), which `bertx eval <name> --<option> <value> ...` runs. Core knows no benchmark: the scorer
// comes from a plugin (the squad plugin's `squad` scorer is evaluate-v1.1.py / evaluate-v2.0.py) and its options
// are its schema - `--na-prob-thresh 0.5` sets na_prob_thresh, typed by the schema. Needs no LibTorch.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bertx/plugin.hpp"

namespace bertx {

// What `bertx eval` prints: the notes on stderr (one line each, in order), then the result on stdout.
struct ScoreReport {
  std::string result;              // one line, e.g. the official script's JSON object
  std::vector<std::string> notes;  // e.g. "Unanswered question <id> will receive score 0."
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // Reads the files its options name and scores them. Throws bertx::Error naming the file at fault.
  virtual ScoreReport score() = 0;
};

template <class F>
void add_scorer(Registry& registry, std::string name, std::string description, Schema schema, F make) {
  registry.add(BuilderSpec{Kind::Scorer, std::move(name), std::move(description), std::move(schema),
                           [make](const Options& o) -> std::shared_ptr<void> {
                             std::shared_ptr<Scorer> p = make(o);
                             return p;
                           }});
}

}  // namespace bertx
