// not_a_plugin.cpp - an ordinary shared library without bertx_plugin_entry; the host must refuse it.
extern "C" __attribute__((visibility("default"))) int some_function(int x) { return x + 1; }
