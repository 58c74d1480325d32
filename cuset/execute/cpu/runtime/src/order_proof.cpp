// Order proof: evidence, gathered in the forward run, that no other thread order
// can give different outputs, so the pipeline may skip the other orders.
//
// The rewriter instruments the kernels it can (cuset/execute/cpu/order_proof.py):
// no barrier, warp operation, atomic, shared or volatile memory, clock, printf,
// asm or unknown call; every memory access through a pointer parameter; locals
// initialised; no `&`. Each parameter the kernel writes is a checked pointer whose
// every access (read or write) is reported here; the others are only read.
//
// Per launch, with CUSET_CPU_ORDER_PROOF=1 under the forward order:
// - proof_enter: every written pointer lies in a live device allocation, and no
//   read-only pointer lies in one of those allocations (the reads through it would
//   bypass the check);
// - proof_access: a shadow word per 4 bytes of each written allocation holds the
//   launch and the thread (grid-wide linear index) that last accessed it; an access
//   by another thread of the same launch is a conflict. Word granularity makes two
//   threads writing neighbouring bytes a conflict too (never the reverse), and an
//   access spanning words marks every word;
// - a launch is independent when the kernel was entered (it is instrumented), no
//   access went outside the written allocations or outside a per-thread region
//   of a block loop, and no conflict was seen.
// Then each thread's accesses to written memory are its own, and the rest of memory
// is only read during the launch: every thread reads the same values and computes
// the same results whatever the interleaving of threads and blocks. If every launch
// of the run is independent, the device memory after each launch, and so the host
// code's inputs, are the same in every order (host code runs alike in all of them),
// so the whole run's outputs are.
//
// The proof's cost is bounded: after CUSET_CPU_PROOF_ACCESSES checked accesses in one
// run (default 2^28, about a second or two), it gives up: that launch and every later
// one are not proven, their checked pointers cost a load and a branch again, and the
// pipeline runs every order, as without the proof. A kernel that reads and writes its
// output billions of times (a 16M-element bitonic sort: 136 launches, two accesses per
// thread each) would otherwise pay more in its forward run than the orders it saves.
//
// At exit, on the diagnostics channel only (CUSET_CPU_REPORT_PATHS=1: stderr too):
//   CUSET-CPU: order-proof: kernel 'k': 3 of 3 launches independent
//   CUSET-CPU: order-proof: kernel 'k': 0 of 1 launches independent: <why>
//   CUSET-CPU: order-proof: 3 of 3 launches independent, 1 kernels, token <token>
// The token is CUSET_CPU_PROOF_TOKEN, taken from the environment before main and
// scrubbed from it, so that a line the program writes itself cannot carry it
// unless it searches the runtime's memory. A launch after the report (from an
// exit handler or a destructor) adds a `not proven` line.
#include <sys/mman.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cuset_cpu.h"
#include "internal.h"

namespace cuset {
namespace rt {

bool proof_active = false;
__thread unsigned proof_thread = ~0u;

namespace {

struct Written {
  uintptr_t lo, hi;  // the allocation's pages, slack page included
  uint64_t* shadow;  // per 4 bytes: (launch epoch << 32) | (grid-wide thread index + 1)
};

struct KernelCount {
  unsigned long long launches = 0, independent = 0;
  std::string why;  // the first reason a launch was not independent
};

bool g_enabled = false;
bool g_to_stderr = false;
bool g_reported = false;
char g_token[72] = "";
uint32_t g_epoch = 0;
unsigned long long g_launches = 0, g_independent = 0;
unsigned long long g_access_budget = 1ull << 28, g_accesses = 0;  // checked accesses: the proof's cost
bool g_gave_up = false;

// This launch.
bool g_entered = false, g_failed = false;
uint64_t g_threads_per_block = 0;
char g_why[480] = "";
std::vector<Written>& g_written = *new std::vector<Written>;
size_t g_last = 0;

// allocation start -> (shadow, its bytes)
std::map<uintptr_t, std::pair<uint64_t*, size_t>>& g_shadows = *new std::map<uintptr_t, std::pair<uint64_t*, size_t>>;
std::map<std::string, KernelCount>& g_kernels = *new std::map<std::string, KernelCount>;

__attribute__((format(printf, 1, 2))) void fail(const char* fmt, ...) {
  proof_active = false;  // one reason is enough: the rest of the launch runs unchecked
  if (g_failed) return;
  g_failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_why, sizeof g_why, fmt, ap);
  va_end(ap);
}

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  char line[700];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  size_t len = n < (int)sizeof line ? (size_t)n : sizeof line - 1;
  if (g_to_stderr)
    diag_write(line, len);
  else
    diag_channel_write(line, len);
}

void report() {
  for (const auto& [name, c] : g_kernels)
    say("CUSET-CPU: order-proof: kernel '%.300s': %llu of %llu launch%s independent%s%.400s\n", name.c_str(),
        c.independent, c.launches, c.launches == 1 ? "" : "es", c.why.empty() ? "" : ": ", c.why.c_str());
  say("CUSET-CPU: order-proof: %llu of %llu launches independent, %zu kernels, token %s\n", g_independent, g_launches,
      g_kernels.size(), g_token);
  g_reported = true;
}

// Before main (after the order is read, priority 101): registered this early, the
// report runs after every exit handler the program registers itself.
__attribute__((constructor(102))) void read_proof_settings() {
  static const char kName[] = "CUSET_CPU_PROOF_TOKEN";
  if (char* t = getenv(kName)) {
    snprintf(g_token, sizeof g_token, "%s", t);
    // Out of `environ`, and the string itself overwritten, name and all: /proc/self/environ
    // reads the original block.
    char* entry = t - (sizeof kName - 1) - 1;
    size_t len = strlen(entry);
    unsetenv(kName);
    memset(entry, 'x', len);
  }
  const char* e = getenv("CUSET_CPU_ORDER_PROOF");
  const char* p = getenv("CUSET_CPU_REPORT_PATHS");
  if (const char* b = getenv("CUSET_CPU_PROOF_ACCESSES")) {
    char* end = nullptr;
    unsigned long long v = strtoull(b, &end, 10);
    if (end && *end == 0 && end != b) g_access_budget = v;
  }
  g_to_stderr = p && strcmp(p, "1") == 0;
  g_enabled = e && strcmp(e, "1") == 0 && !order().random && !order().parallel;
  if (g_enabled) atexit(report);
}

// Shadow bytes (address space; pages count where threads touch them) the proof may hold:
// twice the written allocations. Beyond it a launch is not proven and runs every order,
// so a program near its memory limit never fails in the forward run for the proof's sake.
constexpr size_t kShadowBudget = 512u << 20;
size_t g_shadow_bytes = 0;

size_t shadow_bytes(size_t mapped) { return (mapped + 3) / 4 * sizeof(uint64_t); }

uint64_t* shadow_of(uintptr_t base, size_t mapped) {
  size_t bytes = shadow_bytes(mapped);
  auto it = g_shadows.find(base);
  if (it != g_shadows.end()) {
    if (it->second.second == bytes) return it->second.first;
    munmap(it->second.first, it->second.second);  // heap-mode addresses come back with another size
    g_shadow_bytes -= it->second.second;
    g_shadows.erase(it);
  }
  if (g_shadow_bytes + bytes > kShadowBudget) {  // give back the shadows of freed allocations
    for (auto i = g_shadows.begin(); i != g_shadows.end();) {
      uintptr_t b;
      size_t m;
      if (device_allocation_range((const void*)i->first, b, m)) {
        ++i;
        continue;
      }
      munmap(i->second.first, i->second.second);
      g_shadow_bytes -= i->second.second;
      i = g_shadows.erase(i);
    }
    if (g_shadow_bytes + bytes > kShadowBudget) return nullptr;
  }
  // Address space only: pages appear where threads access (and read zero: epoch 0 is no launch).
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  g_shadows[base] = {(uint64_t*)m, bytes};
  g_shadow_bytes += bytes;
  return (uint64_t*)m;
}

}  // namespace

void proof_launch_begin() {
  ++g_launches;
  g_entered = g_failed = false;
  g_why[0] = 0;
  g_written.clear();
  g_last = 0;
  proof_active = false;
  // After the report nothing is checked (the runtime's own tables may be gone by then).
  if (!g_enabled || g_reported) return;
  if (g_gave_up) {
    fail("not checked: the proof gave up earlier in this run (more than %llu checked accesses)", g_access_budget);
    return;
  }
  if (g_epoch == 0xffffffffu) {
    fail("too many launches to tell apart");
    return;
  }
  ++g_epoch;
  proof_active = true;
}

void proof_launch_end(const char* name) {
  proof_active = false;
  KernelCount& c = g_kernels[name ? name : "?"];
  ++c.launches;
  if (!g_entered && !g_failed)
    snprintf(g_why, sizeof g_why, "%s", g_enabled ? "not checked (see the compile step's order proofs)"
                                                  : "not checked (CUSET_CPU_ORDER_PROOF is off)");
  bool independent = g_enabled && g_entered && !g_failed;
  if (independent) {
    ++c.independent;
    ++g_independent;
  } else if (c.why.empty()) {
    c.why = g_why;
  }
  if (g_reported)  // after the report (an exit handler, a destructor): it no longer holds
    say("CUSET-CPU: order-proof: kernel '%.300s' launched after the report: not proven\n", name ? name : "?");
}

void proof_enter_slow(std::initializer_list<const void*> written, std::initializer_list<const void*> read) {
  if (g_entered) return;  // once per launch: every thread passes the same pointers
  g_entered = true;
  g_threads_per_block = (uint64_t)blockDim.x * blockDim.y * blockDim.z;
  uint64_t threads = g_threads_per_block * gridDim.x * gridDim.y * gridDim.z;
  if (threads >= 0xffffffffull) return fail("more than 2^32 - 2 threads in one launch");
  for (const void* w : written) {
    if (!w) continue;  // never accessed, or the access faults
    uintptr_t base;
    size_t mapped;
    if (!device_allocation_range(w, base, mapped))
      return fail("a parameter it writes does not point into a live cudaMalloc allocation");
    bool known = false;
    for (const Written& x : g_written) known |= x.lo == base;
    if (known) continue;  // two parameters into one allocation: one shadow, conflicts seen by address
    uint64_t* s = shadow_of(base, mapped);
    if (!s) return fail("the allocations it writes are too large to record (256 MiB at most)");
    g_written.push_back(Written{base, base + mapped, s});
  }
  for (const void* r : read) {
    uintptr_t base;
    size_t mapped;
    if (!r || !device_allocation_range(r, base, mapped)) continue;
    for (const Written& x : g_written)
      if (x.lo == base)
        return fail("a parameter it only reads points into an allocation it writes through another parameter");
  }
}

void proof_access(const void* p, unsigned long size) {
  if (++g_accesses > g_access_budget) {
    g_gave_up = true;
    return fail("the proof gave up: more than %llu checked accesses in this run (its cost would pass what the "
                "other orders cost)", g_access_budget);
  }
  unsigned t = current_linear_tid();
  if (t == ~0u) t = proof_thread;  // a block loop: the thread for_each_thread runs
  if (t == ~0u) return fail("an access through a written parameter outside a per-thread region of its block loop");
  uint64_t block = ((uint64_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  uint32_t gid = (uint32_t)(block * g_threads_per_block + t + 1);
  uintptr_t a = (uintptr_t)p;
  const Written* w = nullptr;
  if (g_last < g_written.size() && g_written[g_last].lo <= a && a + size <= g_written[g_last].hi) {
    w = &g_written[g_last];
  } else {
    for (size_t k = 0; k < g_written.size(); ++k)
      if (g_written[k].lo <= a && a + size <= g_written[k].hi) {
        w = &g_written[k];
        g_last = k;
        break;
      }
  }
  if (!w) return fail("an access through a written parameter outside its allocation");
  const uint64_t tag = (uint64_t)g_epoch << 32 | gid;
  for (uintptr_t k = (a - w->lo) >> 2, last = (a + size - 1 - w->lo) >> 2; k <= last; ++k) {
    uint64_t v = w->shadow[k];
    if ((uint32_t)(v >> 32) == g_epoch && (uint32_t)v != gid) {
      uint64_t other = (uint32_t)v - 1, me = (uint64_t)gid - 1;
      return fail("thread %llu of block %llu and thread %llu of block %llu access the same memory (byte %llu of "
                  "an allocation it writes)",
                  (unsigned long long)(other % g_threads_per_block), (unsigned long long)(other / g_threads_per_block),
                  (unsigned long long)(me % g_threads_per_block), (unsigned long long)(me / g_threads_per_block),
                  (unsigned long long)(k * 4));
    }
    w->shadow[k] = tag;
  }
}

}  // namespace rt
}  // namespace cuset
