// doctest_torch.hpp - include this instead of <doctest/doctest.h> in tests that use LibTorch.
// c10 pulls in glog, whose CHECK/CHECK_EQ/... macros would otherwise replace doctest's and turn a failed
// check into an abort without a message. LibTorch goes first, then glog's macros are dropped.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE
#undef CHECK_FALSE
#undef CHECK_THROWS
#undef CHECK_NOTHROW
#undef REQUIRE
#undef WARN
#undef CAPTURE
#undef INFO
#undef MESSAGE
#undef FAIL
#include <doctest/doctest.h>
