// Data-race checker for race-check builds (CUSET_CPU_RACECHECK).
//
// User code is compiled with GCC's ThreadSanitizer instrumentation but linked
// against these callbacks instead of libtsan: every load and store of a kernel
// reports its address here. Two accesses to the same memory by different
// threads of a block, one of them a write that another thread reads or
// overwrites after reading, with no __syncthreads() (or, within a warp, no
// warp synchronisation) in between, are a data race on a GPU even though
// they run one after the other here: the classic missing __syncthreads() or
// missing atomic. Atomics and checked volatile accesses are not instrumented.
// Writes of two threads with no read in between are not reported (a flag
// set by many threads is a common, benign pattern). Only memory a CUDA
// program shares is watched: device allocations and the program's globals
// (shared memory, __device__ and __constant__ variables); stacks are private.
#include "cuset_cpu.h"
#include "internal.h"

#if CUSET_CPU_RACECHECK

extern "C" char __data_start[] __attribute__((weak));
extern "C" char _end[] __attribute__((weak));

namespace cuset {
namespace rt {

struct Shadow {
  uintptr_t granule;          // address / 4
  unsigned long long block;   // block serial the record belongs to
  int writer;                 // last writing thread, -1 none
  unsigned w_bgen, w_wepoch, w_warp;
  int reader;                 // a reading thread since that write, -1 none
  unsigned r_bgen, r_wepoch, r_warp;
};

static constexpr unsigned kShadowBits = 18;
static Shadow* g_shadow = nullptr;

static bool shared_memory_of_program(const void* addr) {
  return in_device_region(addr) || in_shared_memory(addr) || (__data_start && (const char*)addr >= __data_start && (const char*)addr < _end);
}

// Were the earlier access (tid-less fields) and now unordered?
static bool concurrent(unsigned bgen, unsigned wepoch, unsigned warp, const RacePosition& now) {
  if (bgen != now.bgen) return false;                 // a __syncthreads() lies between them
  if (warp == now.warp && wepoch != now.wepoch) return false;  // so does a warp synchronisation
  return true;
}

[[noreturn]] static void report(const void* addr, const char* what, int other, const char* other_did,
                                const RacePosition& now) {
  char where[200], me[64], them[64];
  if (!describe_device_address(addr, where, sizeof where)) snprintf(where, sizeof where, "a shared or __device__ variable");
  race_thread_name(now.tid, me, sizeof me);
  race_thread_name(other, them, sizeof them);
  fatal(Fatal::race,
        "data race at %p (%s): %s %s it after %s %s it, with no __syncthreads() in between (missing barrier or "
        "atomic operation)",
        addr, where, me, what, them, other_did);
}

static void access(const void* addr, unsigned size, bool write) {
  RacePosition now;
  if (!race_position(now) || !shared_memory_of_program(addr)) return;
  if (!g_shadow) g_shadow = (Shadow*)calloc((size_t)1 << kShadowBits, sizeof(Shadow));
  uintptr_t first = (uintptr_t)addr >> 2, last = ((uintptr_t)addr + (size ? size : 1) - 1) >> 2;
  for (uintptr_t g = first; g <= last; ++g) {
    Shadow& s = g_shadow[(g ^ (g >> kShadowBits)) & ((1u << kShadowBits) - 1)];
    if (s.granule != g || s.block != now.block) {
      s = Shadow{g, now.block, -1, 0, 0, 0, -1, 0, 0, 0};
    }
    if (write) {
      if (s.reader >= 0 && s.reader != now.tid && concurrent(s.r_bgen, s.r_wepoch, s.r_warp, now))
        report(addr, "writes", s.reader, "read", now);
      s.writer = now.tid;
      s.w_bgen = now.bgen;
      s.w_wepoch = now.wepoch;
      s.w_warp = now.warp;
      s.reader = -1;
    } else {
      if (s.writer >= 0 && s.writer != now.tid && concurrent(s.w_bgen, s.w_wepoch, s.w_warp, now))
        report(addr, "reads", s.writer, "wrote", now);
      if (s.reader < 0 || !concurrent(s.r_bgen, s.r_wepoch, s.r_warp, now)) {
        s.reader = now.tid;
        s.r_bgen = now.bgen;
        s.r_wepoch = now.wepoch;
        s.r_warp = now.warp;
      }
    }
  }
}

}  // namespace rt
}  // namespace cuset

using cuset::rt::access;

// The instrumentation ABI GCC's -fsanitize=thread emits calls to.
extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit(void*) {}
void __tsan_read1(void* a) { access(a, 1, false); }
void __tsan_read2(void* a) { access(a, 2, false); }
void __tsan_read4(void* a) { access(a, 4, false); }
void __tsan_read8(void* a) { access(a, 8, false); }
void __tsan_read16(void* a) { access(a, 16, false); }
void __tsan_write1(void* a) { access(a, 1, true); }
void __tsan_write2(void* a) { access(a, 2, true); }
void __tsan_write4(void* a) { access(a, 4, true); }
void __tsan_write8(void* a) { access(a, 8, true); }
void __tsan_write16(void* a) { access(a, 16, true); }
void __tsan_unaligned_read2(void* a) { access(a, 2, false); }
void __tsan_unaligned_read4(void* a) { access(a, 4, false); }
void __tsan_unaligned_read8(void* a) { access(a, 8, false); }
void __tsan_unaligned_read16(void* a) { access(a, 16, false); }
void __tsan_unaligned_write2(void* a) { access(a, 2, true); }
void __tsan_unaligned_write4(void* a) { access(a, 4, true); }
void __tsan_unaligned_write8(void* a) { access(a, 8, true); }
void __tsan_unaligned_write16(void* a) { access(a, 16, true); }
void __tsan_read_range(void* a, long size) { access(a, (unsigned)size, false); }
void __tsan_write_range(void* a, long size) { access(a, (unsigned)size, true); }
void __tsan_vptr_update(void*, void*) {}
void __tsan_vptr_read(void*) {}
void __tsan_volatile_read1(void* a) { access(a, 1, false); }
void __tsan_volatile_read2(void* a) { access(a, 2, false); }
void __tsan_volatile_read4(void* a) { access(a, 4, false); }
void __tsan_volatile_read8(void* a) { access(a, 8, false); }
void __tsan_volatile_read16(void* a) { access(a, 16, false); }
void __tsan_volatile_write1(void* a) { access(a, 1, true); }
void __tsan_volatile_write2(void* a) { access(a, 2, true); }
void __tsan_volatile_write4(void* a) { access(a, 4, true); }
void __tsan_volatile_write8(void* a) { access(a, 8, true); }
void __tsan_volatile_write16(void* a) { access(a, 16, true); }
}

#endif  // CUSET_CPU_RACECHECK
