// history/compare.hpp - `bertx runs compare A B`: what differs between two runs - the recorded facts
// (status, seed, versions, host, duration), the resolved configs key by key, and every metric's final
// value with the difference B - A.
#pragma once
#include <map>
#include <string>

#include "history/format.hpp"

namespace bertx {
class RunStore;
}

namespace bertx::history {

// A TOML document as "section.key" -> value in TOML syntax (strings quoted, arrays inline); nested
// tables become dotted keys. Throws bertx::Error naming `what` when the text is not TOML.
std::map<std::string, std::string> flatten_toml(const std::string& text, const std::string& what);

// Throws bertx::Error naming the id that is not in the store. Text or JSON (markdown/csv: text).
std::string compare_runs(const RunStore& store, std::int64_t a, std::int64_t b, Format format);

}  // namespace bertx::history
