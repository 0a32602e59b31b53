// bertx/simd.hpp - the two function attributes that let plain C++ loops run at the CPU's vector width without
// LibTorch's per-ISA builds: BERTX_CLONES makes GCC/clang compile a function for x86-64-v4 (AVX-512 F/BW/DQ/VL:
// the BW part gives bf16 <-> float loops full 512-bit vectors; with F alone GCC packs 16-bit lanes in 256-bit halves),
// AVX2 and the x86-64 baseline and pick one at load time (target_clones, an ifunc); BERTX_INLINE forces a helper inline so
// that each clone compiles it for its own instruction set (an out-of-line helper would be baseline code).
// Used by the LibTorch-free kernel files: core/src/ops/cpu/kernels_cpu.cpp, plugins/optimizers/fused_kernels.cpp;
// public so that a plugin's kernels are cloned exactly as the bertx::ops kernels are.
// Under AddressSanitizer or off x86-64 the functions are built once, for the target's baseline.
#pragma once

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define BERTX_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
#endif
#ifndef BERTX_CLONES
#define BERTX_CLONES
#endif
#define BERTX_INLINE __attribute__((always_inline)) inline
