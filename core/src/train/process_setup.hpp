// process_setup.hpp - how a bertx process sets itself up for speed on the CPU, and records it.
//
// Measured on Debian's LibTorch 1.13 (libgomp + OpenBLAS-pthread): the process environment moves CPU step
// times more than the model code does. bertx therefore sets, itself:
//  - OpenMP wait policy PASSIVE: idle intra-op threads sleep instead of spinning on the cores OpenBLAS's own
//    threads need. libgomp reads OMP_WAIT_POLICY once, when it is loaded, so `main` re-executes the process
//    once with it set (prepare_process); a value the user set is respected.
//  - glibc malloc keeps freed memory (no mmap for large blocks, high trim threshold): no page faults on the
//    same large tensors every step.
//  - glibc malloc asks for transparent huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, glibc >= 2.35) where
//    the kernel gives them on request (THP mode "madvise"): fewer TLB misses in the GEMMs. Read at start-up,
//    so set by the same re-exec; a value the user set is respected.
//  - intra-op threads and OpenBLAS threads to the same count, by default the CPUs this process may run on
//    (its affinity mask, i.e. taskset/cgroup/SLURM binding), not all the machine's cores.
// It also records whether the CPU multiplies bf16 natively: without AMX-BF16 or AVX512-BF16 oneDNN and LibTorch
// emulate bf16 products with float32 instructions, and amp-bf16 runs slower than fp32 (a 2-core AVX-512 VM without
// them: SQuAD s384 bf16 inference 0.79 seq/s, bertx and transformers alike); runs and benchmarks say so.
// The resulting ProcessSettings go into the run record (runs.process) and the report's setup line.
#pragma once
#include <string>

namespace bertx {

// First thing in main(): malloc settings; unless OMP_WAIT_POLICY is set, sets it to PASSIVE, adds
// glibc.malloc.hugetlb=1 to GLIBC_TUNABLES as above, and re-executes the computing commands (run, bench, forward,
// eval) once so that libgomp and glibc see them; launch and sweep pass them to their children. Returns only when
// no re-exec happened (or it failed).
void prepare_process(int argc, char** argv);

struct ProcessSettings {
  int intra_op_threads = 1;     // at::get_num_threads() after apply_threads
  int blas_threads = -1;        // OpenBLAS or MKL threads; -1 when the BLAS is neither (no way to set them)
  int cpus_allowed = 1;         // CPUs in this process's affinity mask
  std::string omp_wait_policy;  // e.g. "PASSIVE (set by bertx)" or "ACTIVE (environment)"
  std::string malloc;           // glibc malloc settings (prepare_process's, the huge page tunable and who set it)
  std::string blas;             // openblas_get_config() or "unknown"
  std::string blas_core;        // OpenBLAS's kernels (openblas_get_corename()), noting an OPENBLAS_CORETYPE override
  std::string gemm;             // the GEMM of float32 CPU linears (ops::gemm_library(): oneDNN or LibTorch's BLAS)
  std::string cpu_bf16;         // the CPU's native bf16 matmul: cpu_bf16() below
  std::string json() const;     // one JSON object, stored with the run
  std::string summary() const;  // one line for the log
};

// Sets intra-op and BLAS threads (0 = the CPUs in the affinity mask) and returns what the process runs with.
ProcessSettings apply_threads(int threads);

// CPUs in this process's affinity mask (at least 1).
int cpus_allowed();

// The CPU's native bf16 matmul instructions, as CPUID and the OS's enabled register state (XCR0) report them:
// "AMX-BF16", "AVX512-BF16", "none" (bf16 products emulated) or "unknown (not x86)".
std::string cpu_bf16();

// One line for a run that computes in bf16 on a CPU without native bf16 (cpu_bf16() == "none"), else "".
std::string bf16_emulation_warning(const std::string& cpu_bf16);

}  // namespace bertx
