// wrong_api_plugin.cpp - claims a plugin-API version this bertx does not speak; the host must refuse it.
#include "bertx/plugin.hpp"

static int never_called(void*, char*, std::size_t) { return 0; }

extern "C" BERTX_EXPORT const bertx_plugin_info* bertx_plugin_entry(void) {
  static const bertx_plugin_info info{BERTX_PLUGIN_API_VERSION + 99, "from_the_future", "9.9.9", "wrong API",
                                      &never_called};
  return &info;
}
