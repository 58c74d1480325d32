// Host side of the CUDA runtime API: devices, errors, memory, copies,
// streams, events, launches and their validation, fault reporting.
#include "cuset_cpu.h"
#include "internal.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <vector>

namespace cuset {
namespace rt {

void* device_alloc(size_t size);
int device_free(void* p);
size_t device_live_bytes();
void run_grid_impl(const KernelSite& site, dim3 grid, dim3 block, size_t dynamic_smem_bytes, ThreadFn fn,
                   DirectFn direct_fn, void* arg);

static constexpr size_t kTotalGlobalMem = 24ull << 30;
static constexpr size_t kDefaultSmemPerBlock = 48 * 1024;

static cudaError_t g_last_error = cudaSuccess;
static cudaError_t g_unchecked_launch_error = cudaSuccess;
static char g_unchecked_launch_detail[512];
static int g_max_optin = 0;

void set_last_error(int err) { g_last_error = (cudaError_t)err; }
int max_dynamic_smem_optin_set() { return g_max_optin; }

static cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess) g_last_error = e;
  return e;
}

// ---------------------------------------------------------------- faults
static char g_altstack[64 * 1024];

#if defined(__x86_64__)
// A GPU does not trap on integer division by zero: the quotient is
// unspecified. x86 raises #DE instead; inside a kernel, finish the DIV/IDIV
// with an all-ones quotient (remainder: the dividend) and carry on.
static bool g_division_noted = false;

static bool skip_division(ucontext_t* uc) {
  greg_t* r = uc->uc_mcontext.gregs;
  const unsigned char* ip = (const unsigned char*)r[REG_RIP];
  size_t i = 0;
  bool opsize16 = false, rexw = false;
  for (;; ++i) {  // legacy prefixes
    unsigned char b = ip[i];
    if (b == 0x66) opsize16 = true;
    else if (b != 0x67 && b != 0x2e && b != 0x3e && b != 0x26 && b != 0x64 && b != 0x65 && b != 0x36) break;
  }
  if ((ip[i] & 0xf0) == 0x40) rexw = (ip[i++] & 8) != 0;
  unsigned char op = ip[i++];
  if (op != 0xf6 && op != 0xf7) return false;
  unsigned char modrm = ip[i++];
  int reg = (modrm >> 3) & 7, mod = modrm >> 6, rm = modrm & 7;
  if (reg != 6 && reg != 7) return false;  // not DIV / IDIV
  if (mod != 3) {
    if (rm == 4 && (ip[i++] & 7) == 5 && mod == 0) i += 4;  // SIB with disp32 base
    if (mod == 1) i += 1;
    else if (mod == 2) i += 4;
    else if (mod == 0 && rm == 5) i += 4;  // RIP-relative
  }
  unsigned long long dividend = (unsigned long long)r[REG_RAX];
  if (op == 0xf6) {  // 8-bit: AL quotient, AH remainder
    r[REG_RAX] = (greg_t)((dividend & ~0xffffull) | 0xffull | ((dividend & 0xffull) << 8));
  } else if (rexw) {
    r[REG_RAX] = (greg_t)~0ull;
    r[REG_RDX] = (greg_t)dividend;
  } else if (opsize16) {
    r[REG_RAX] = (greg_t)((dividend & ~0xffffull) | 0xffffull);
    r[REG_RDX] = (greg_t)(((unsigned long long)r[REG_RDX] & ~0xffffull) | (dividend & 0xffffull));
  } else {  // 32-bit results zero-extend
    r[REG_RAX] = (greg_t)0xffffffffull;
    r[REG_RDX] = (greg_t)(dividend & 0xffffffffull);
  }
  r[REG_RIP] += (greg_t)i;
  return true;
}
#endif

static void on_fault(int sig, siginfo_t* info, void* context) {
  char buf[700];
#if defined(__x86_64__)
  if (sig == SIGFPE && (info->si_code == FPE_INTDIV || info->si_code == FPE_INTOVF) && in_kernel() &&
      skip_division((ucontext_t*)context)) {
    if (!g_division_noted) {
      g_division_noted = true;
      static const char msg[] =
          "CUSET-CPU: note: integer division by zero in a kernel; a GPU returns an unspecified value, the CPU "
          "backend continues with all-ones (-1) bits\n";
      diag_write(msg, sizeof msg - 1);
    }
    return;
  }
#else
  (void)context;
#endif
  const void* addr = info->si_addr;
  if (sig == SIGSEGV || sig == SIGBUS) {
    if (stack_guard_containing(addr))
      fatal(Fatal::runtime_error,
            "stack overflow of a CUDA thread at %p (large local arrays or deep recursion; each thread has a %s KiB "
            "stack, set CUSET_CPU_STACK_KB to change it)",
            addr, getenv("CUSET_CPU_STACK_KB") ? getenv("CUSET_CPU_STACK_KB") : "256");
    if (explain_device_fault(addr, buf, sizeof buf)) fatal(Fatal::runtime_error, "%s", buf);
    fatal(Fatal::runtime_error, "invalid memory access at %p (segmentation fault%s)", addr,
          in_kernel() ? "; cudaErrorIllegalAddress on a GPU" : "");
  }
  if (sig == SIGFPE) {
    if (info->si_code == FPE_INTDIV || info->si_code == FPE_INTOVF)
      fatal(Fatal::runtime_error, "integer division by zero or overflow (SIGFPE)");
    fatal(Fatal::runtime_error, "floating-point exception (SIGFPE)");
  }
  if (sig == SIGILL) fatal(Fatal::runtime_error, "illegal instruction at %p", addr);
  if (sig == SIGABRT && in_kernel())
    fatal(Fatal::runtime_error, "device-side assertion failed or abort() called (cudaErrorAssert)");
  signal(sig, SIG_DFL);
  raise(sig);
}

static void at_exit_check() {
  if (g_unchecked_launch_error != cudaSuccess) {
    fflush(nullptr);
    char line[700];
    int n = snprintf(line, sizeof line,
                     "\nCUSET-CPU: runtime_error: a kernel launch failed and the program never checked for it: %s\n",
                     g_unchecked_launch_detail);
    diag_write(line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
    _exit(kExitRuntimeError);
  }
}

#if CUSET_CPU_ASAN
extern "C" void __sanitizer_set_death_callback(void (*callback)(void));
static void on_asan_death() {
  // AddressSanitizer has printed its report; add where in the grid it happened.
  fflush(stdout);
  char pos[512];
  describe_position(pos, sizeof pos);
  char line[700];
  int n = snprintf(line, sizeof line, "CUSET-CPU: note: AddressSanitizer stopped the program %s\n", pos);
  diag_write(line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}
#endif

// KernelBench's strict_kernels check (cuset/evaluate/kernelbench.py): with
// CUSET_CPU_SKIP_LAUNCHES=1 every launch that passes validation returns without running the
// kernel (still counted), so the parent sees whether an answer's outputs come out right
// without its own kernels. Reading it tells a program which run it is in; that is all it does.
static bool g_skip_launches = false;

__attribute__((constructor(102))) static void runtime_init() {
#if CUSET_CPU_ASAN
  __sanitizer_set_death_callback(on_asan_death);
#endif
  const char* skip = getenv("CUSET_CPU_SKIP_LAUNCHES");
  g_skip_launches = skip && strcmp(skip, "1") == 0;
  memory_init();
  stack_t ss{};
  ss.ss_sp = g_altstack;
  ss.ss_size = sizeof g_altstack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
#if CUSET_CPU_ASAN
  for (int s : {SIGFPE, SIGILL}) sigaction(s, &sa, nullptr);  // AddressSanitizer reports the rest
#else
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(s, &sa, nullptr);
#endif
  atexit(at_exit_check);
}

// ---------------------------------------------------------------- launches
static KernelSite g_site;
// Launches that passed validation: KernelBench reads it (cuset_rt_kernel_launches) to tell a
// pass that ran the candidate's own kernels from one that fell back to torch.
static unsigned long long g_kernel_launches = 0;
static LaunchConfig g_cfg(1, 1);
static std::map<const void*, std::pair<const char*, ErasedLauncher>>& kernel_registry() {
  static std::map<const void*, std::pair<const char*, ErasedLauncher>> r;
  return r;
}

bool register_kernel(const void* fn, const char* name, ErasedLauncher launcher) {
  kernel_registry()[fn] = {name, launcher};
  return true;
}

const char* registered_kernel_name(const void* fn) {
  auto it = kernel_registry().find(fn);
  return it == kernel_registry().end() ? nullptr : it->second.first;
}

struct StreamObj;
static bool stream_ok(cudaStream_t s);

void record_launch_failure(int err) { g_unchecked_launch_error = (cudaError_t)err; }

bool begin_launch(const KernelSite& site, const LaunchConfig& cfg) {
  char why[256] = "";
  cudaError_t err = cudaSuccess;
  const dim3& g = cfg.grid;
  const dim3& b = cfg.block;
  unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
  if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z) {
    err = cudaErrorInvalidConfiguration;
    snprintf(why, sizeof why, "a grid or block dimension is 0");
  } else if (b.x > 1024 || b.y > 1024 || b.z > 64) {
    err = cudaErrorInvalidConfiguration;
    snprintf(why, sizeof why, "block dimensions (%u,%u,%u) exceed the maximum (1024,1024,64)", b.x, b.y, b.z);
  } else if (threads > 1024) {
    err = cudaErrorInvalidConfiguration;
    snprintf(why, sizeof why, "%llu threads per block exceed the maximum of 1024", threads);
  } else if (g.x > 2147483647u || g.y > 65535u || g.z > 65535u) {
    err = cudaErrorInvalidConfiguration;
    snprintf(why, sizeof why, "grid dimensions (%u,%u,%u) exceed the maximum (2147483647,65535,65535)", g.x, g.y, g.z);
  } else if (cfg.smem > kDynamicSmemCapacity ||
             (cfg.smem > kDefaultSmemPerBlock && cfg.smem > (size_t)g_max_optin)) {
    err = cudaErrorInvalidValue;
    snprintf(why, sizeof why,
             "%zu bytes of dynamic shared memory exceed the %zu-byte limit (up to %u with "
             "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))",
             cfg.smem, cfg.smem > kDynamicSmemCapacity ? (size_t)kDynamicSmemCapacity : kDefaultSmemPerBlock,
             kDynamicSmemCapacity);
  } else if (!stream_ok(cfg.stream)) {
    err = cudaErrorInvalidResourceHandle;
    snprintf(why, sizeof why, "the stream is not a live cudaStream_t");
  }
  if (err != cudaSuccess) {
    g_last_error = err;
    g_unchecked_launch_error = err;
    snprintf(g_unchecked_launch_detail, sizeof g_unchecked_launch_detail,
             "kernel '%s' at %s:%d <<<(%u,%u,%u), (%u,%u,%u), %zu>>>: %s (%s): %s", site.name, site.file, site.line,
             g.x, g.y, g.z, b.x, b.y, b.z, cfg.smem, cudaGetErrorName(err), cudaGetErrorString(err), why);
    fflush(stdout);
    fflush(stderr);
    diag_printf("CUSET-CPU: launch_error: %s\n", g_unchecked_launch_detail);
    return false;
  }
  g_site = site;
  g_cfg = cfg;
  ++g_kernel_launches;
  return !g_skip_launches;
}

void run_grid(ThreadFn thread_fn, DirectFn direct_fn, void* arg) {
  device_access_begin();
  proof_launch_begin();
  run_grid_impl(g_site, g_cfg.grid, g_cfg.block, g_cfg.smem, thread_fn, direct_fn, arg);
  proof_launch_end(g_site.name);
  device_access_end();
}

cudaError_t launch_registered(const void* fn, const LaunchConfig& cfg, void** args) {
  auto it = kernel_registry().find(fn);
  if (it == kernel_registry().end())
    fatal(Fatal::unsupported,
          "cudaLaunchKernel with a kernel passed as void* whose parameter types are unknown (templates are not "
          "registered); launch it with <<<...>>> or pass the kernel without the cast");
  it->second.second(fn, KernelSite{it->second.first, "", 0}, cfg, args);
  return g_last_error == cudaSuccess ? cudaSuccess : cudaPeekAtLastError();
}

// ---------------------------------------------------------------- attributes
cudaError_t func_set_attribute(const void* func, cudaFuncAttribute attr, int value) {
  (void)func;
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > (int)kDynamicSmemCapacity) return ret(cudaErrorInvalidValue);
    if (value > g_max_optin) g_max_optin = value;
  }
  return cudaSuccess;
}

cudaError_t func_get_attributes(cudaFuncAttributes* a, const void* func) {
  (void)func;
  if (!a) return ret(cudaErrorInvalidValue);
  memset(a, 0, sizeof *a);
  a->maxThreadsPerBlock = 1024;
  a->numRegs = 32;
  a->ptxVersion = 89;
  a->binaryVersion = 89;
  a->maxDynamicSharedSizeBytes = g_max_optin > (int)kDefaultSmemPerBlock ? g_max_optin : (int)kDefaultSmemPerBlock;
  a->preferredShmemCarveout = -1;
  return cudaSuccess;
}

cudaError_t occupancy_blocks(int* numBlocks, int blockSize, size_t smem) {
  if (!numBlocks || blockSize <= 0 || blockSize > 1024) return ret(cudaErrorInvalidValue);
  int by_threads = 1536 / blockSize;
  int by_smem = smem ? (int)(102400 / smem) : 24;
  int n = by_threads < by_smem ? by_threads : by_smem;
  *numBlocks = n < 24 ? n : 24;
  return cudaSuccess;
}

// ---------------------------------------------------------------- symbols
static std::map<uintptr_t, size_t>& symbols() {
  static std::map<uintptr_t, size_t> s;
  return s;
}

void register_symbol(const void* symbol, size_t size) { symbols()[(uintptr_t)symbol] = size; }

static size_t symbol_bytes_after(const void* p) {
  auto& s = symbols();
  auto it = s.upper_bound((uintptr_t)p);
  if (it == s.begin()) return 0;
  --it;
  uintptr_t end = it->first + it->second;
  return (uintptr_t)p < end ? end - (uintptr_t)p : 0;
}

cudaError_t memcpy_symbol(void* symbol, size_t symbol_size, const void* buf, size_t count, size_t offset,
                          bool to_symbol, cudaMemcpyKind kind) {
  if (offset > symbol_size || count > symbol_size - offset) return ret(cudaErrorInvalidValue);
  if (to_symbol && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return ret(cudaErrorInvalidMemcpyDirection);
  if (!to_symbol && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return ret(cudaErrorInvalidMemcpyDirection);
  if (count == 0) return cudaSuccess;
  device_access_begin();
  if (to_symbol)
    memmove((char*)symbol + offset, buf, count);
  else
    memmove((void*)buf, (char*)symbol + offset, count);
  device_access_end();
  return cudaSuccess;
}

// ---------------------------------------------------------------- host memory kinds
enum class HostKind { pinned, managed, registered };
static std::map<uintptr_t, std::pair<size_t, HostKind>>& host_blocks() {
  static std::map<uintptr_t, std::pair<size_t, HostKind>> m;
  return m;
}

static const std::pair<const uintptr_t, std::pair<size_t, HostKind>>* find_host_block(const void* p) {
  auto& m = host_blocks();
  auto it = m.upper_bound((uintptr_t)p);
  if (it == m.begin()) return nullptr;
  --it;
  if ((uintptr_t)p >= it->first + (it->second.first ? it->second.first : 1)) return nullptr;
  return &*it;
}

static size_t managed_bytes_after(const void* p) {
  auto b = find_host_block(p);
  if (!b || b->second.second != HostKind::managed) return 0;
  return b->first + b->second.first - (uintptr_t)p;
}

// Bytes addressable as device memory from p (device, managed or symbol); 0 if none.
static size_t device_side_bytes(const void* p) {
  size_t n = device_bytes_after(p);
  if (n) return n;
  n = managed_bytes_after(p);
  if (n) return n;
  return symbol_bytes_after(p);
}

static bool is_device_side(const void* p) { return device_side_bytes(p) > 0; }

static cudaError_t check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  if (!dst || !src) return cudaErrorInvalidValue;
  if ((int)kind < 0 || (int)kind > 4) return cudaErrorInvalidMemcpyDirection;
  bool dd = is_device_side(dst), sd = is_device_side(src);
  bool dst_dev_only = is_device_pointer(dst), src_dev_only = is_device_pointer(src);
  switch (kind) {
    case cudaMemcpyHostToDevice:
      if (!dd || src_dev_only) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyDeviceToHost:
      if (!sd || dst_dev_only) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyDeviceToDevice:
      if (!dd || !sd) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyHostToHost:
      if (dst_dev_only || src_dev_only) return cudaErrorInvalidValue;
      break;
    default:
      break;
  }
  if (dd && count > device_side_bytes(dst)) return cudaErrorInvalidValue;
  if (sd && count > device_side_bytes(src)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

static void copy_bytes(void* dst, const void* src, size_t count) {
  device_access_begin();
  memmove(dst, src, count);
  device_access_end();
}

}  // namespace rt
}  // namespace cuset

using namespace cuset::rt;

// ================================================================ devices
cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return ret(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (!device) return ret(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : ret(cudaErrorInvalidDevice); }
cudaError_t cudaInitDevice(int device, unsigned int, unsigned int) { return cudaSetDevice(device); }
cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp*) {
  if (!device) return ret(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (!p) return ret(cudaErrorInvalidValue);
  if (device != 0) return ret(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "NVIDIA GeForce RTX 4090 (cuset CPU emulation)");
  p->totalGlobalMem = kTotalGlobalMem;
  p->sharedMemPerBlock = kDefaultSmemPerBlock;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->memPitch = 2147483647;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->clockRate = 2520000;
  p->totalConstMem = 65536;
  p->major = 8;
  p->minor = 9;
  p->textureAlignment = 512;
  p->texturePitchAlignment = 32;
  p->deviceOverlap = 1;
  p->multiProcessorCount = 128;
  p->canMapHostMemory = 1;
  p->maxTexture1D = 131072;
  p->maxTexture1DLinear = 268435456;
  p->maxTexture2D[0] = 131072;
  p->maxTexture2D[1] = 65536;
  p->maxTexture3D[0] = p->maxTexture3D[1] = p->maxTexture3D[2] = 16384;
  p->maxSurface1D = 32768;
  p->maxSurface2D[0] = 131072;
  p->maxSurface2D[1] = 65536;
  p->surfaceAlignment = 512;
  p->concurrentKernels = 1;
  p->pciBusID = 1;
  p->asyncEngineCount = 2;
  p->unifiedAddressing = 1;
  p->memoryClockRate = 10501000;
  p->memoryBusWidth = 384;
  p->l2CacheSize = 75497472;
  p->persistingL2CacheMaxSize = 51904512;
  p->maxThreadsPerMultiProcessor = 1536;
  p->streamPrioritiesSupported = 1;
  p->globalL1CacheSupported = 1;
  p->localL1CacheSupported = 1;
  p->sharedMemPerMultiprocessor = 102400;
  p->regsPerMultiprocessor = 65536;
  p->managedMemory = 1;
  p->concurrentManagedAccess = 1;
  p->computePreemptionSupported = 1;
  p->cooperativeLaunch = 1;
  p->sharedMemPerBlockOptin = kDynamicSmemCapacity;
  p->maxBlocksPerMultiProcessor = 24;
  p->accessPolicyMaxWindowSize = 134213632;
  p->reservedSharedMemPerBlock = 1024;
  p->hostRegisterSupported = 1;
  p->memoryPoolsSupported = 1;
  p->singleToDoublePrecisionPerfRatio = 64;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return ret(cudaErrorInvalidValue);
  if (device != 0) return ret(cudaErrorInvalidDevice);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrTotalConstantMemory: *value = (int)p.totalConstMem; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMaxPitch: *value = (int)p.memPitch; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrClockRate: *value = p.clockRate; break;
    case cudaDevAttrTextureAlignment: *value = (int)p.textureAlignment; break;
    case cudaDevAttrGpuOverlap: *value = 1; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrKernelExecTimeout: *value = 0; break;
    case cudaDevAttrIntegrated: *value = 0; break;
    case cudaDevAttrCanMapHostMemory: *value = 1; break;
    case cudaDevAttrComputeMode: *value = 0; break;
    case cudaDevAttrConcurrentKernels: *value = 1; break;
    case cudaDevAttrEccEnabled: *value = 0; break;
    case cudaDevAttrPciBusId: *value = 1; break;
    case cudaDevAttrPciDeviceId: *value = 0; break;
    case cudaDevAttrMemoryClockRate: *value = p.memoryClockRate; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrStreamPrioritiesSupported: *value = 1; break;
    case cudaDevAttrGlobalL1CacheSupported: *value = 1; break;
    case cudaDevAttrLocalL1CacheSupported: *value = 1; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrManagedMemory: *value = 1; break;
    case cudaDevAttrIsMultiGpuBoard: *value = 0; break;
    case cudaDevAttrConcurrentManagedAccess: *value = 1; break;
    case cudaDevAttrCooperativeLaunch: *value = 1; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
    default: return ret(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

// The synchronising calls and blocking copies print the device printf output a GPU
// holds back until then (device_printf.cpp); their Async forms do not.
cudaError_t cudaDeviceSynchronize() {
  flush_device_output();
  return cudaSuccess;
}
cudaError_t cudaThreadSynchronize() { return cudaDeviceSynchronize(); }
cudaError_t cudaDeviceReset() {
  flush_device_output();
  g_last_error = cudaSuccess;
  return cudaSuccess;
}
cudaError_t cudaThreadExit() { return cudaDeviceReset(); }
cudaError_t cudaSetDeviceFlags(unsigned int) { return cudaSuccess; }
cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (!flags) return ret(cudaErrorInvalidValue);
  *flags = cudaDeviceMapHost;
  return cudaSuccess;
}
cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache) { return cudaSuccess; }
cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* c) {
  if (c) *c = cudaFuncCachePreferNone;
  return cudaSuccess;
}
cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig) { return cudaSuccess; }
cudaError_t cudaDeviceGetSharedMemConfig(cudaSharedMemConfig* c) {
  if (c) *c = cudaSharedMemBankSizeFourByte;
  return cudaSuccess;
}
static size_t g_limits[7] = {1024, 1 << 20, 8 << 20, 2, 2048, 64, 0};
cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  if ((int)limit < 0 || (int)limit > 6) return ret(cudaErrorUnsupportedLimit);
  g_limits[(int)limit] = value;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  if (!value) return ret(cudaErrorInvalidValue);
  if ((int)limit < 0 || (int)limit > 6) return ret(cudaErrorUnsupportedLimit);
  *value = g_limits[(int)limit];
  return cudaSuccess;
}
cudaError_t cudaDeviceCanAccessPeer(int* can, int, int) {
  if (can) *can = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceEnablePeerAccess(int, unsigned int) { return ret(cudaErrorInvalidDevice); }
cudaError_t cudaDeviceDisablePeerAccess(int) { return ret(cudaErrorInvalidDevice); }
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return ret(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  if (!v) return ret(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaProfilerStart() { return cudaSuccess; }
cudaError_t cudaProfilerStop() { return cudaSuccess; }

// ================================================================ errors
cudaError_t cudaGetLastError() {
  cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  g_unchecked_launch_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  g_unchecked_launch_error = cudaSuccess;
  return g_last_error;
}

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};
static const ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorInvalidHostPointer, "cudaErrorInvalidHostPointer", "invalid host pointer"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidTexture, "cudaErrorInvalidTexture", "invalid texture reference"},
    {cudaErrorInvalidChannelDescriptor, "cudaErrorInvalidChannelDescriptor", "invalid channel descriptor"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInvalidFilterSetting, "cudaErrorInvalidFilterSetting", "linear filtering not supported for non-float type"},
    {cudaErrorInvalidNormSetting, "cudaErrorInvalidNormSetting", "read as normalized float not supported for 32-bit non float type"},
    {cudaErrorInvalidSurface, "cudaErrorInvalidSurface", "invalid surface reference"},
    {cudaErrorMissingConfiguration, "cudaErrorMissingConfiguration", "__global__ function call is not configured"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorUnsupportedLimit, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress", "misaligned address"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorCooperativeLaunchTooLarge, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorTimeout, "cudaErrorTimeout", "wait operation timed out"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const char* cudaGetErrorString(cudaError_t e) {
  for (const auto& t : kErrors)
    if (t.code == e) return t.text;
  return "unrecognized error code";
}
const char* cudaGetErrorName(cudaError_t e) {
  for (const auto& t : kErrors)
    if (t.code == e) return t.name;
  return "cudaErrorUnknown";
}

// ================================================================ memory
cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (!devPtr) return ret(cudaErrorInvalidValue);
  if (size == 0) {
    *devPtr = nullptr;
    return cudaSuccess;
  }
  if (size > kTotalGlobalMem - device_live_bytes()) {
    *devPtr = nullptr;
    return ret(cudaErrorMemoryAllocation);
  }
  void* p = device_alloc(size);
  if (!p) {
    *devPtr = nullptr;
    return ret(cudaErrorMemoryAllocation);
  }
  *devPtr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  if (device_free(p) != cudaSuccess) {
    auto b = find_host_block(p);
    if (b && b->first == (uintptr_t)p && b->second.second == HostKind::managed) {
      free(p);
      host_blocks().erase((uintptr_t)p);
      return cudaSuccess;
    }
    return ret(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

static void* host_block(size_t size, HostKind kind) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size ? size : 1) != 0) return nullptr;
  if (kind == HostKind::managed) memset(p, 0, size);
  host_blocks()[(uintptr_t)p] = {size, kind};
  return p;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (!ptr) return ret(cudaErrorInvalidValue);
  *ptr = host_block(size, HostKind::pinned);
  return *ptr ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }
cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  auto it = host_blocks().find((uintptr_t)ptr);
  if (it == host_blocks().end() || it->second.second != HostKind::pinned) return ret(cudaErrorInvalidValue);
  host_blocks().erase(it);
  free(ptr);
  return cudaSuccess;
}
cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int) {
  if (!devPtr) return ret(cudaErrorInvalidValue);
  if (size == 0) return ret(cudaErrorInvalidValue);
  *devPtr = host_block(size, HostKind::managed);
  return *devPtr ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}
cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  if (!devPtr || !pitch) return ret(cudaErrorInvalidValue);
  size_t p = (width + 511) / 512 * 512;
  if (p == 0) p = 512;
  *pitch = p;
  return cudaMalloc(devPtr, p * (height ? height : 1));
}
cudaError_t cudaMalloc3D(cudaPitchedPtr* pp, cudaExtent e) {
  if (!pp) return ret(cudaErrorInvalidValue);
  size_t pitch = 0;
  void* p = nullptr;
  cudaError_t r = cudaMallocPitch(&p, &pitch, e.width, e.height * (e.depth ? e.depth : 1));
  *pp = make_cudaPitchedPtr(p, pitch, e.width, e.height);
  return r;
}
cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t) { return cudaMalloc(devPtr, size); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaMemGetInfo(size_t* freeb, size_t* total) {
  if (total) *total = kTotalGlobalMem;
  if (freeb) *freeb = kTotalGlobalMem - device_live_bytes();
  return cudaSuccess;
}
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int) {
  if (!ptr || !size) return ret(cudaErrorInvalidValue);
  if (find_host_block(ptr)) return ret(cudaErrorHostMemoryAlreadyRegistered);
  host_blocks()[(uintptr_t)ptr] = {size, HostKind::registered};
  return cudaSuccess;
}
cudaError_t cudaHostUnregister(void* ptr) {
  auto it = host_blocks().find((uintptr_t)ptr);
  if (it == host_blocks().end() || it->second.second != HostKind::registered)
    return ret(cudaErrorHostMemoryNotRegistered);
  host_blocks().erase(it);
  return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int) {
  if (!pDevice || !find_host_block(pHost)) return ret(cudaErrorInvalidValue);
  *pDevice = pHost;
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* ptr) {
  if (!a) return ret(cudaErrorInvalidValue);
  memset(a, 0, sizeof *a);
  a->device = 0;
  if (is_device_pointer(ptr) || symbol_bytes_after(ptr)) {
    a->type = cudaMemoryTypeDevice;
    a->devicePointer = (void*)ptr;
  } else if (auto b = find_host_block(ptr)) {
    a->type = b->second.second == HostKind::managed ? cudaMemoryTypeManaged : cudaMemoryTypeHost;
    a->devicePointer = (void*)ptr;
    a->hostPointer = (void*)ptr;
  } else {
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    a->hostPointer = (void*)ptr;
  }
  return cudaSuccess;
}
cudaError_t cudaMemPrefetchAsync(const void*, size_t, int, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMemAdvise(const void*, size_t, int, int) { return cudaSuccess; }

// ================================================================ copies
static cudaError_t copy_1d(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  cudaError_t e = check_copy(dst, src, count, kind);
  if (e != cudaSuccess) return ret(e);
  if (count) copy_bytes(dst, src, count);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  flush_device_output();
  return copy_1d(dst, src, count, kind);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  if (!stream_ok(stream)) return ret(cudaErrorInvalidResourceHandle);
  return copy_1d(dst, src, count, kind);
}
cudaError_t cudaMemcpyPeer(void* dst, int dd, const void* src, int sd, size_t count) {
  if (dd != 0 || sd != 0) return ret(cudaErrorInvalidDevice);
  return cudaMemcpy(dst, src, count, cudaMemcpyDeviceToDevice);
}

static cudaError_t copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                           cudaMemcpyKind kind) {
  if (width > dpitch || width > spitch) return ret(cudaErrorInvalidPitchValue);
  if (height == 0 || width == 0) return cudaSuccess;
  size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
  cudaError_t e = check_copy(dst, src, 1, kind);
  if (e == cudaSuccess && is_device_side(dst) && dspan > device_side_bytes(dst)) e = cudaErrorInvalidValue;
  if (e == cudaSuccess && is_device_side(src) && sspan > device_side_bytes(src)) e = cudaErrorInvalidValue;
  if (e != cudaSuccess) return ret(e);
  device_access_begin();
  for (size_t r = 0; r < height; ++r) memmove((char*)dst + r * dpitch, (const char*)src + r * spitch, width);
  device_access_end();
  return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  flush_device_output();
  return copy_2d(dst, dpitch, src, spitch, width, height, kind);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind);
}

cudaError_t cudaMemset(void* p, int value, size_t count) {
  if (count == 0) return cudaSuccess;
  if (!p || count > device_side_bytes(p)) return ret(cudaErrorInvalidValue);
  device_access_begin();
  memset(p, value, count);
  device_access_end();
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  if (!stream_ok(stream)) return ret(cudaErrorInvalidResourceHandle);
  return cudaMemset(p, value, count);
}
cudaError_t cudaMemset2D(void* p, size_t pitch, int value, size_t width, size_t height) {
  if (width > pitch) return ret(cudaErrorInvalidPitchValue);
  if (!width || !height) return cudaSuccess;
  if (!p || pitch * (height - 1) + width > device_side_bytes(p)) return ret(cudaErrorInvalidValue);
  device_access_begin();
  for (size_t r = 0; r < height; ++r) memset((char*)p + r * pitch, value, width);
  device_access_end();
  return cudaSuccess;
}
cudaError_t cudaMemset2DAsync(void* p, size_t pitch, int value, size_t width, size_t height, cudaStream_t) {
  return cudaMemset2D(p, pitch, value, width, height);
}
cudaError_t cudaMemset3D(cudaPitchedPtr pp, int value, cudaExtent e) {
  size_t rows = e.height * e.depth;
  if (pp.ysize && pp.ysize != e.height && e.depth > 1) {
    // rows of each slice are ysize apart
    device_access_begin();
    for (size_t z = 0; z < e.depth; ++z)
      for (size_t y = 0; y < e.height; ++y) memset((char*)pp.ptr + (z * pp.ysize + y) * pp.pitch, value, e.width);
    device_access_end();
    return cudaSuccess;
  }
  return cudaMemset2D(pp.ptr, pp.pitch, value, e.width, rows);
}

// ================================================================ streams, events
struct CUstream_st {
  unsigned magic;
  unsigned flags;
  int priority;
};
struct CUevent_st {
  unsigned magic;
  unsigned flags;
  bool recorded;
  double ms;
};
static constexpr unsigned kLiveStream = 0x57AEA11u, kDeadStream = 0xDEAD57u;
static constexpr unsigned kLiveEvent = 0xE7E11u, kDeadEvent = 0xDEADE7u;

namespace cuset {
namespace rt {
static bool stream_ok(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || s->magic == kLiveStream;
}
}  // namespace rt
}  // namespace cuset

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
  if (!s) return ret(cudaErrorInvalidValue);
  *s = new CUstream_st{kLiveStream, flags, priority};
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithPriority(s, 0, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  return cudaStreamCreateWithPriority(s, flags, 0);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s || !stream_ok(s)) return ret(cudaErrorInvalidResourceHandle);
  if (s == cudaStreamLegacy || s == cudaStreamPerThread) return ret(cudaErrorInvalidResourceHandle);
  s->magic = kDeadStream;  // kept, so a later use is recognised
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (stream_ok(s)) flush_device_output();
  return stream_ok(s) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaStreamQuery(cudaStream_t s) { return stream_ok(s) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle); }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  if (!stream_ok(s) || !e || e->magic != kLiveEvent) return ret(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}
cudaError_t cudaStreamGetPriority(cudaStream_t s, int* priority) {
  if (!stream_ok(s) || !priority) return ret(cudaErrorInvalidValue);
  *priority = (s && s != cudaStreamLegacy && s != cudaStreamPerThread) ? s->priority : 0;
  return cudaSuccess;
}
cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int* flags) {
  if (!stream_ok(s) || !flags) return ret(cudaErrorInvalidValue);
  *flags = (s && s != cudaStreamLegacy && s != cudaStreamPerThread) ? s->flags : 0;
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* userData) {
  if (!stream_ok(s) || !fn) return ret(cudaErrorInvalidValue);
  flush_device_output();
  fn(userData);
  return cudaSuccess;
}
cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void* userData, unsigned int) {
  if (!stream_ok(s) || !cb) return ret(cudaErrorInvalidValue);
  flush_device_output();
  cb(s, cudaSuccess, userData);
  return cudaSuccess;
}

static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  if (!e) return ret(cudaErrorInvalidValue);
  *e = new CUevent_st{kLiveEvent, flags, false, 0.0};
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e || e->magic != kLiveEvent || !stream_ok(s)) return ret(cudaErrorInvalidResourceHandle);
  e->recorded = true;
  e->ms = now_ms();
  return cudaSuccess;
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int) { return cudaEventRecord(e, s); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e || e->magic != kLiveEvent) return ret(cudaErrorInvalidResourceHandle);
  flush_device_output();
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!e || e->magic != kLiveEvent) return ret(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (!ms) return ret(cudaErrorInvalidValue);
  if (!a || !b || a->magic != kLiveEvent || b->magic != kLiveEvent) return ret(cudaErrorInvalidResourceHandle);
  if ((a->flags | b->flags) & cudaEventDisableTiming) return ret(cudaErrorInvalidResourceHandle);
  if (!a->recorded || !b->recorded) return ret(cudaErrorInvalidResourceHandle);
  *ms = (float)(b->ms - a->ms);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (!e || e->magic != kLiveEvent) return ret(cudaErrorInvalidResourceHandle);
  e->magic = kDeadEvent;
  return cudaSuccess;
}

// ================================================================ launch (C API)
extern "C" unsigned long long cuset_rt_kernel_launches(void) { return g_kernel_launches; }

cudaError_t cudaLaunchKernel(const void* func, dim3 g, dim3 b, void** args, size_t smem, cudaStream_t stream) {
  return launch_registered(func, LaunchConfig(g, b, smem, stream), args);
}
cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 g, dim3 b, void** args, size_t smem,
                                        cudaStream_t stream) {
  return cudaLaunchKernel(func, g, b, args, smem, stream);
}
