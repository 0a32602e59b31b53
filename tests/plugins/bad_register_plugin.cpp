// bad_register_plugin.cpp - registers one builder, then throws: the host must refuse the plugin, keep none
// of its builders, and report the message (the exception must not cross the boundary).
#include <stdexcept>

#include "bertx/plugin.hpp"

static void register_then_fail(bertx::Registry& r) {
  r.add(bertx::BuilderSpec{
      bertx::Kind::Task, "half_registered", "", {}, [](const bertx::Options&) { return std::shared_ptr<void>(); }});
  throw std::runtime_error("cannot find my data files");
}

BERTX_PLUGIN("bad_register", "0.0.1", "fails during registration", register_then_fail)
