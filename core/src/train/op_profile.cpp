// op_profile.cpp - see op_profile.hpp. Each thread keeps a stack of open operators; a closing operator adds
// its duration to its parent's child time, and its self time (duration - child time) to a shared table.
#include "train/op_profile.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include <ATen/record_function.h>
#include <fmt/format.h>

namespace bertx {

namespace {

using Clock = std::chrono::steady_clock;

struct Frame {
  Clock::time_point start;
  double child_s = 0;
};

struct Entry {
  std::int64_t calls = 0;
  double self_s = 0, total_s = 0;
};

std::mutex g_mutex;
std::map<std::string, Entry> g_table;  // operator name -> totals (guarded by g_mutex)
thread_local std::vector<Frame> t_stack;

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction&) {
  t_stack.push_back(Frame{Clock::now()});
  return nullptr;
}

void on_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  if (t_stack.empty()) return;  // opened before recording started
  const Frame f = t_stack.back();
  t_stack.pop_back();
  const double total = std::chrono::duration<double>(Clock::now() - f.start).count();
  if (!t_stack.empty()) t_stack.back().child_s += total;
  std::lock_guard<std::mutex> lock(g_mutex);
  Entry& e = g_table[fn.name()];
  ++e.calls;
  e.self_s += total - f.child_s;
  e.total_s += total;
}

// "torch::autograd::CppNode<bertx::ops::(anonymous namespace)::DropoutFn>" -> "backward DropoutFn": custom
// autograd functions' backward nodes, short enough for the table.
std::string display_name(const std::string& name) {
  const std::string prefix = "torch::autograd::CppNode<";
  if (name.rfind(prefix, 0) != 0) return name;
  std::string inner = name.substr(prefix.size(), name.size() - prefix.size() - (name.back() == '>' ? 1 : 0));
  const auto colon = inner.rfind("::");
  return "backward " + (colon == std::string::npos ? inner : inner.substr(colon + 2));
}

std::vector<std::pair<std::string, Entry>> sorted() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::pair<std::string, Entry>> v(g_table.begin(), g_table.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.self_s > b.second.self_s; });
  return v;
}

}  // namespace

OpProfile::OpProfile() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_table.clear();
  }
  at::RecordFunctionCallback cb(&on_enter, &on_exit);
  cb.needsInputs(false).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION});
  handle_ = at::addGlobalCallback(cb);
}

OpProfile::~OpProfile() { at::removeCallback(handle_); }

std::string OpProfile::table(int top, double per) const {
  const auto rows = sorted();
  double all = 0;
  for (const auto& [name, e] : rows) all += e.self_s;
  std::string out =
      fmt::format("{:<48} {:>8} {:>10} {:>10} {:>6}\n", "operator", "calls", "self ms", "total ms", "self%");
  for (int i = 0; i < top && i < static_cast<int>(rows.size()); ++i) {
    const auto& [name, e] = rows[static_cast<std::size_t>(i)];
    out += fmt::format("{:<48} {:>8.1f} {:>10.3f} {:>10.3f} {:>5.1f}%\n", display_name(name).substr(0, 48),
                       static_cast<double>(e.calls) / per, e.self_s * 1e3 / per, e.total_s * 1e3 / per,
                       all > 0 ? 100 * e.self_s / all : 0.0);
  }
  out += fmt::format("{:<48} {:>8} {:>10.3f}", "all operators (self)", "", all * 1e3 / per);
  return out;
}

nlohmann::json OpProfile::json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, e] : sorted())
    out.push_back({{"name", name}, {"calls", e.calls}, {"self_ms", e.self_s * 1e3}, {"total_ms", e.total_s * 1e3}});
  return out;
}

}  // namespace bertx
