// Device memory: cudaMalloc'd blocks live in one reserved address range.
//
// Each allocation gets its own pages plus an inaccessible gap, and addresses are
// not reused while the range lasts, so a use after cudaFree faults.
//
// Uninitialised memory behaves as on a GPU: a fresh allocation reads zero (a GPU
// hands a process cleared memory), and an allocation made after a cudaFree keeps
// what the freed block held (a GPU's allocator hands the same memory back): the
// last few freed blocks keep their contents, inaccessible, until an allocation
// takes one over (best fit, else the most recent). With
// CUSET_CPU_POISON_DEVICE=1 every new allocation is filled with 0x7fffffff
// words instead (NaN as float and double, INT_MAX as int), so a program that
// reads global memory it never wrote fails. In the
// checking mode (CUSET_CPU_CHECK_HOST_ACCESS=1) the allocations are
// inaccessible while host code runs and opened only for kernels and runtime
// copies: host code dereferencing a device pointer faults like on a GPU, and
// the signal handler names it.
#include "cuset_cpu.h"
#include "internal.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <map>
#include <vector>

namespace cuset {
namespace rt {

struct Allocation {
  size_t size;      // bytes requested
  size_t mapped;    // bytes of pages
  bool live;
};

static char* g_base = nullptr;
static size_t g_capacity = 0;
static size_t g_used = 0;  // bump offset
static size_t g_page = 4096;
static std::map<uintptr_t, Allocation> g_allocs;
static bool g_check = false;
static bool g_poison = false;
static int g_open_depth = 0;
struct Freed {
  char* p;
  size_t size, mapped;
};
static std::vector<Freed> g_freed;  // most recent last
static constexpr size_t kKeepFreed = 8;
static constexpr uint32_t kPoisonWord = 0x7fffffffu;
static size_t g_live_bytes = 0;
static constexpr size_t kHuge = 2u << 20;

bool host_access_check_enabled() { return g_check; }

void memory_init() {
  static bool done = false;
  if (done) return;
  done = true;
  g_page = (size_t)sysconf(_SC_PAGESIZE);
  const char* e = getenv("CUSET_CPU_CHECK_HOST_ACCESS");
  g_check = e && *e && strcmp(e, "0") != 0;
  const char* poison = getenv("CUSET_CPU_POISON_DEVICE");
  g_poison = poison && *poison && strcmp(poison, "0") != 0;
#if CUSET_CPU_ASAN
  g_check = false;  // device memory is ordinary heap memory under ASan
#endif
  // Reserve address space only (no memory). Under an address-space limit
  // (the sandbox sets one) take half of it, leaving the rest to the host heap.
  size_t want = (size_t)1 << 40;
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < want)
    want = (size_t)rl.rlim_cur / 2;
  for (size_t size = want & ~(kHuge - 1); size >= (64u << 20); size /= 2) {
    void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      g_base = (char*)p;
      g_capacity = size;
      return;
    }
  }
  g_check = false;  // no region: device memory comes from the heap, unchecked
}

static int prot_now() { return (!g_check || g_open_depth > 0) ? (PROT_READ | PROT_WRITE) : PROT_NONE; }

static bool heap_mode() {
#if CUSET_CPU_ASAN
  return true;
#else
  return g_base == nullptr;
#endif
}

static const std::pair<const uintptr_t, Allocation>* find_alloc(const void* p) {
  if (!heap_mode() && ((const char*)p < g_base || (const char*)p >= g_base + g_used)) return nullptr;
  auto it = g_allocs.upper_bound((uintptr_t)p);
  if (it == g_allocs.begin()) return nullptr;
  --it;
  if ((uintptr_t)p >= it->first + it->second.mapped) return nullptr;
  return &*it;
}

bool is_device_pointer(const void* p) {
  auto a = find_alloc(p);
  return a && a->second.live && (uintptr_t)p < a->first + a->second.size + (a->second.size == 0);
}

bool same_device_allocation(const void* a, const void* b) {
  auto x = find_alloc(a), y = find_alloc(b);
  return !x || !y || x == y;  // outside device memory: cannot tell, so they may be one
}

bool device_allocation_range(const void* p, uintptr_t& base, size_t& mapped) {
  auto a = find_alloc(p);
  if (!a || !a->second.live) return false;
  base = a->first;
  mapped = a->second.mapped;
  return true;
}

size_t device_bytes_after(const void* p) {
  auto a = find_alloc(p);
  if (!a || !a->second.live) return 0;
  uintptr_t end = a->first + a->second.size;
  return (uintptr_t)p < end ? end - (uintptr_t)p : 0;
}

static void poison_fill(void* p, size_t size) {
  uint32_t* w = (uint32_t*)p;
  for (size_t i = 0; i < size / 4; ++i) w[i] = kPoisonWord;
  memcpy((char*)p + size / 4 * 4, &kPoisonWord, size % 4);  // little-endian tail: ff ff ff
}

// Give pages back to the system; the range stays reserved and faults.
static void release(char* p, size_t mapped) {
  mmap(p, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

// The freed block a new allocation of `size` bytes takes over: the smallest that holds it, else the most recent.
static Freed take_freed(size_t size) {
  size_t pick = g_freed.size() - 1;
  for (size_t i = 0; i < g_freed.size(); ++i)
    if (g_freed[i].size >= size && (g_freed[pick].size < size || g_freed[i].size < g_freed[pick].size)) pick = i;
  Freed f = g_freed[pick];
  g_freed.erase(g_freed.begin() + pick);
  return f;
}

// Run `fill` with [p, p + mapped) writable, whatever the host-access check says now.
template <class F>
static void with_access(char* p, size_t mapped, F fill) {
  if (prot_now() != (PROT_READ | PROT_WRITE)) mprotect(p, mapped, PROT_READ | PROT_WRITE);
  fill();
  if (prot_now() != (PROT_READ | PROT_WRITE)) mprotect(p, mapped, prot_now());
}

void* device_alloc(size_t size) {
  memory_init();
  if (heap_mode()) {
    // AddressSanitizer guards heap blocks to the byte, so device memory comes
    // from malloc in that build (and when no address range could be reserved).
    void* q = nullptr;
    if (posix_memalign(&q, 256, size ? size : 1) != 0) return nullptr;
    g_allocs[(uintptr_t)q] = Allocation{size, size, true};
    g_live_bytes += size;
    if (g_poison) poison_fill(q, size);
    return q;
  }
  // One accessible slack page after the data: a GPU does not fault on a read
  // just past the end of a buffer either (its allocation granularity is
  // coarse). Then an inaccessible gap.
  size_t mapped = (size + g_page - 1) / g_page * g_page + g_page;
  // Large blocks sit on 2 MiB boundaries with transparent huge pages where the
  // kernel allows: the access check's mprotect then touches a few page-table
  // entries instead of one per 4 KiB.
  bool huge = size >= kHuge;
  size_t start = huge ? (g_used + kHuge - 1) / kHuge * kHuge : g_used;
  if (huge) mapped = (mapped + kHuge - 1) / kHuge * kHuge;
  size_t need = (start - g_used) + mapped + g_page;
  if (g_used + need > g_capacity) return nullptr;
  char* p = g_base + start;
  g_used += need;
  if (mprotect(p, mapped, prot_now()) != 0) return nullptr;
  if (huge) madvise(p, mapped, MADV_HUGEPAGE);
  g_allocs[(uintptr_t)p] = Allocation{size, mapped, true};
  g_live_bytes += size;
  if (g_poison) {
    with_access(p, mapped, [&] { poison_fill(p, size); });
  } else if (!g_freed.empty()) {
    // Move the freed block's pages under the new address (no copy, no second copy resident).
    Freed old = take_freed(size);
    size_t n = old.mapped < mapped ? old.mapped : mapped;
    if (mremap(old.p, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, p) != MAP_FAILED) {
      mprotect(p, n, prot_now());
    } else {
      with_access(p, mapped, [&] {
        mprotect(old.p, old.mapped, PROT_READ);
        memcpy(p, old.p, size < old.size ? size : old.size);
      });
    }
    release(old.p, old.mapped);  // the old range stays reserved and faults
  }
  return p;
}

int device_free(void* p) {
  auto it = g_allocs.find((uintptr_t)p);
  if (it == g_allocs.end() || !it->second.live) return cudaErrorInvalidValue;
  it->second.live = false;
  g_live_bytes -= it->second.size;
  if (heap_mode()) {
    free(p);  // ASan quarantines it: a use after cudaFree is reported
    return cudaSuccess;
  }
  // The range faults from now on; its contents stay for the next allocation (see the top).
  mprotect(p, it->second.mapped, PROT_NONE);
  g_freed.push_back(Freed{(char*)p, it->second.size, it->second.mapped});
  if (g_freed.size() > kKeepFreed) {
    release(g_freed.front().p, g_freed.front().mapped);
    g_freed.erase(g_freed.begin());
  }
  return cudaSuccess;
}

size_t device_live_bytes() { return g_live_bytes; }

static void set_all(int prot) {
  for (auto& kv : g_allocs)
    if (kv.second.live) mprotect((void*)kv.first, kv.second.mapped, prot);
}

void device_access_begin() {
  if (g_check && g_open_depth++ == 0) set_all(PROT_READ | PROT_WRITE);
}

void device_access_end() {
  if (g_check && --g_open_depth == 0) set_all(PROT_NONE);
}

bool in_device_region(const void* addr) {
  return g_base && (const char*)addr >= g_base && (const char*)addr < g_base + g_used;
}

bool describe_device_address(const void* addr, char* buf, size_t n) {
  auto a = find_alloc(addr);
  if (!a || !a->second.live) return false;
  snprintf(buf, n, "byte %zu of a %zu-byte cudaMalloc allocation", (size_t)((uintptr_t)addr - a->first),
           a->second.size);
  return true;
}

bool explain_device_fault(const void* addr, char* buf, size_t n) {
  if (!g_base || (const char*)addr < g_base || (const char*)addr >= g_base + g_capacity) return false;
  auto a = find_alloc(addr);
  if (!a) {
    // In a gap: just past the end of the allocation below it?
    auto it = g_allocs.upper_bound((uintptr_t)addr);
    if (it != g_allocs.begin()) {
      --it;
      snprintf(buf, n,
               "out-of-bounds access at %p, %zu bytes past the end of a %zu-byte cudaMalloc allocation at %p "
               "(cudaErrorIllegalAddress on a GPU)",
               addr, (size_t)((uintptr_t)addr - it->first - it->second.size), it->second.size, (void*)it->first);
      return true;
    }
    snprintf(buf, n, "access to unallocated device address %p (cudaErrorIllegalAddress on a GPU)", addr);
    return true;
  }
  const Allocation& al = a->second;
  size_t off = (uintptr_t)addr - a->first;
  if (!al.live) {
    snprintf(buf, n, "use of device memory after cudaFree: address %p, offset %zu of a freed %zu-byte allocation", addr,
             off, al.size);
    return true;
  }
  if (!in_kernel() && g_check && g_open_depth == 0) {
    snprintf(buf, n,
             "host code dereferenced device pointer %p (offset %zu of a %zu-byte cudaMalloc allocation); on a GPU "
             "this crashes: copy the data back with cudaMemcpy first",
             addr, off, al.size);
    return true;
  }
  snprintf(buf, n, "invalid access at %p, offset %zu of a %zu-byte allocation (cudaErrorIllegalAddress on a GPU)", addr,
           off, al.size);
  return true;
}

}  // namespace rt
}  // namespace cuset
