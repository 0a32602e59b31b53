// process_setup.cpp - threads, OpenMP wait policy and malloc settings for speed (see process_setup.hpp).
#include "train/process_setup.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bertx/ops.hpp"

namespace bertx {

namespace {
constexpr const char* kMarker = "BERTX_SET_OMP_WAIT_POLICY";     // tells the re-executed process who set the policy
constexpr const char* kHugeMarker = "BERTX_SET_MALLOC_HUGETLB";  // the same for glibc.malloc.hugetlb
constexpr const char* kHugeTunable = "glibc.malloc.hugetlb";

// The kernel's transparent huge page mode: "always", "madvise", "never", or "" when it has none.
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);  // e.g. "always [madvise] never"
  const auto open = line.find('['), close = line.find(']');
  return open != std::string::npos && close > open ? line.substr(open + 1, close - open - 1) : std::string();
}

// `tunables` (GLIBC_TUNABLES) with glibc.malloc.hugetlb=1 added where it helps: the kernel gives huge pages to memory that asks
// for them (THP mode "madvise") and glibc asks when the tunable says so (2.35+). "" when the user set the tunable
// already or it would change nothing ("always": every process has them; "never": none; an older glibc).
std::string tunables_with_huge_pages(const std::string& tunables) {
  if (tunables.find(kHugeTunable) != std::string::npos || thp_mode() != "madvise") return "";
  int major = 0, minor = 0;
  if (std::sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) != 2 || major < 2 || (major == 2 && minor < 35))
    return "";
  return (tunables.empty() ? "" : tunables + ":") + kHugeTunable + "=1";
}

// "glibc.malloc.hugetlb=1 (set by bertx)", "... (environment)", or "" when GLIBC_TUNABLES does not set it.
std::string huge_tunable_setting() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::string t = tunables ? tunables : "";
  const auto at = t.find(kHugeTunable);
  if (at == std::string::npos) return "";
  const std::string setting = t.substr(at, t.find(':', at) - at);  // up to the next ':' or the end
  return fmt::format("{} ({})", setting, std::getenv(kHugeMarker) ? "set by bertx" : "environment");
}

// OpenBLAS's name for the kernels it runs ("Haswell", "Cooperlake", ...), or "" when the BLAS is not OpenBLAS.
std::string openblas_core() {
  using GetCore = char* (*)();
  auto get = reinterpret_cast<GetCore>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return get ? std::string(get()) : std::string();
}
}  // namespace

void prepare_process(int argc, char** argv) {
  // Training frees and reallocates the same large tensors every step (MLM logits, activations). glibc
  // serves blocks over 32 MB with fresh mmap()s and returns them on free, so every step page-faults its
  // memory in again (measured: ~30% of a tiny-model CPU step in the kernel). Keep freed memory in the heap.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (argc < 2) return;
  const bool set_policy = std::getenv("OMP_WAIT_POLICY") == nullptr;
  if (set_policy) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    setenv(kMarker, "1", 1);
  }
  // Huge pages for the heap: a BERT-base step sweeps GBs of activations and weights, and with 4 KB pages the
  // GEMMs miss the TLB (measured: base seq 128 bf16 training +4%, 5 of 5 alternating rounds). glibc reads
  // GLIBC_TUNABLES once, at start-up, hence the same re-exec.
  const char* user_tunables = std::getenv("GLIBC_TUNABLES");
  const std::optional<std::string> before = user_tunables ? std::optional<std::string>(user_tunables) : std::nullopt;
  const std::string tunables = tunables_with_huge_pages(before.value_or(""));
  if (!tunables.empty()) {
    setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
    setenv(kHugeMarker, "1", 1);
  }
  if (!set_policy && tunables.empty()) return;
  // Commands that compute in this process re-execute (same pid, same arguments; ~0.3 s to load LibTorch
  // again); the ones that start bertx children (launch, sweep) pass the settings on in their environment.
  const std::string command = argv[1];
  if (command != "run" && command != "bench" && command != "forward" && command != "eval") return;
  execv("/proc/self/exe", argv);
  // exec failed: carry on without what needed it (the default active policy, 4 KB pages), recorded as such
  if (set_policy) {
    unsetenv("OMP_WAIT_POLICY");
    unsetenv(kMarker);
  }
  if (!tunables.empty()) {
    if (before)
      setenv("GLIBC_TUNABLES", before->c_str(), 1);
    else
      unsetenv("GLIBC_TUNABLES");
    unsetenv(kHugeMarker);
  }
}

std::string cpu_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1u)) return "none";  // no OSXSAVE: no AVX-512 or AMX state
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const unsigned long long xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return "none";
  const unsigned max_subleaf = a;
  const bool amx = (d >> 22 & 1u) && (xcr0 & 0x60000ull) == 0x60000ull;  // AMX-BF16; tile config + data enabled
  if (amx) return "AMX-BF16";
  const bool avx512 = (b >> 16 & 1u) && (xcr0 & 0xE6ull) == 0xE6ull;  // AVX512F; opmask, ZMM state enabled
  if (avx512 && max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1u)) return "AVX512-BF16";
  return "none";
#else
  return "unknown (not x86)";
#endif
}

std::string bf16_emulation_warning(const std::string& cpu_bf16) {
  if (cpu_bf16 != "none") return "";
  return "this CPU multiplies bf16 without hardware support (no AMX-BF16 or AVX512-BF16): oneDNN and LibTorch emulate "
         "bf16 products with float32 instructions, so bf16 runs slower here than fp32 (precision fp32 is the faster "
         "choice on this CPU)";
}

int cpus_allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  return std::max(1, CPU_COUNT(&set));
}

ProcessSettings apply_threads(int threads) {
  ProcessSettings s;
  s.cpus_allowed = cpus_allowed();
  const int n = threads > 0 ? threads : s.cpus_allowed;
  at::set_num_threads(n);
  s.intra_op_threads = at::get_num_threads();
  // OpenBLAS runs its own thread pool for every GEMM; the same count as the intra-op threads (they do not run
  // at the same time: ATen calls GEMM from the calling thread).
  using SetThreads = void (*)(int);
  using GetConfig = char* (*)();
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(n);
    s.blas_threads = n;
  }
  auto config = reinterpret_cast<GetConfig>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  s.blas = config ? std::string(config()) : "unknown (not OpenBLAS)";
  // PyPI's LibTorch links MKL inside libtorch_cpu (no symbol of it visible): at::set_num_threads sets its threads.
  if (!config && at::globalContext().hasMKL()) {
    s.blas = "MKL (inside LibTorch)";
    s.blas_threads = n;
  }
  Dl_info where{};  // which build: Debian ships openblas-pthread and openblas-openmp with the same config string
  if (config && dladdr(reinterpret_cast<void*>(config), &where) != 0 && where.dli_fname) {
    char resolved[PATH_MAX];  // through Debian's alternatives symlinks to the real file
    s.blas += fmt::format(" [{}]", realpath(where.dli_fname, resolved) ? resolved : where.dli_fname);
  }
  // The kernels decide GEMM speed (on an AVX-512 machine OpenBLAS's AVX-512 SGEMM ran 1.7-1.9x its AVX2 one at
  // BERT-base shapes); OPENBLAS_CORETYPE in the environment overrides OpenBLAS's own detection, so say so.
  const std::string core = openblas_core();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (!core.empty())
    s.blas_core =
        forced ? fmt::format("{} (OPENBLAS_CORETYPE={} in the environment)", core, forced) : core + " (detected)";
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  s.omp_wait_policy = policy ? fmt::format("{} ({})", policy, std::getenv(kMarker) ? "set by bertx" : "environment")
                             : "default (active spin)";
  s.malloc = "M_MMAP_MAX=0 M_TRIM_THRESHOLD=1GiB";
  if (const std::string huge = huge_tunable_setting(); !huge.empty()) s.malloc += " " + huge;
  if (const std::string mode = thp_mode(); !mode.empty()) s.malloc += ", kernel THP " + mode;
  s.gemm = ops::gemm_library();
  s.cpu_bf16 = cpu_bf16();
  return s;
}

std::string ProcessSettings::json() const {
  return nlohmann::json{{"intra_op_threads", intra_op_threads},
                        {"blas_threads", blas_threads},
                        {"cpus_allowed", cpus_allowed},
                        {"omp_wait_policy", omp_wait_policy},
                        {"malloc", malloc},
                        {"blas", blas},
                        {"blas_core", blas_core},
                        {"gemm", gemm},
                        {"cpu_bf16", cpu_bf16}}
      .dump();
}

std::string ProcessSettings::summary() const {
  return fmt::format(
      "{} intra-op threads, {} BLAS threads ({}; kernels {}), float32 linears: {}, {} CPUs allowed, OpenMP wait policy "
      "{}, malloc {}, CPU bf16 matmul: {}",
      intra_op_threads, blas_threads < 0 ? std::string("?") : std::to_string(blas_threads), blas,
      blas_core.empty() ? std::string("?") : blas_core, gemm, cpus_allowed, omp_wait_policy, malloc, cpu_bf16);
}

}  // namespace bertx
