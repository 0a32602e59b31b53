// build_info.cpp - versions and host facts recorded with every run.
#include "build_info.hpp"

#include <unistd.h>

#include <torch/version.h>  // macros only: no LibTorch code is compiled here

#include "bertx/version.hpp"

namespace bertx {

std::string bertx_version() { return BERTX_VERSION_STRING; }
std::string torch_version() { return TORCH_VERSION; }
std::string git_revision() { return BERTX_GIT_REV; }

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace bertx
