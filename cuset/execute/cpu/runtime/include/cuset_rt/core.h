// The execution core as seen from kernel code: built-in variables, barriers,
// warp collectives and error reporting. Implemented in src/scheduler.cpp.
//
// One fiber per CUDA thread: a thread runs as a plain call until it reaches a
// barrier or a warp operation, where it is suspended and the next one of its
// block runs. A worker OS thread runs one block at a time; the `parallel`
// order runs blocks on several workers at once.
#pragma once

#include <initializer_list>

// Built-in variables. They are thread-locals of the worker OS thread that the
// scheduler rewrites on every switch; being non-const externs, the compiler
// reloads them after any call that may switch threads. (`__thread`, not
// `thread_local`: no TLS wrapper call on every access.)
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;
constexpr int warpSize = 32;

// In race-check builds user code is instrumented (-fsanitize=thread with our
// own callbacks); the runtime's atomics and checked volatile accesses must not
// count as plain accesses.
#if CUSET_CPU_RACECHECK
#define CUSET_NOT_RACECHECKED __attribute__((no_sanitize("thread")))
#else
#define CUSET_NOT_RACECHECKED
#endif

namespace cuset {
namespace rt {

// How a failing program tells the backend what went wrong: one line on stderr,
// `CUSET-CPU: <status>: <detail>`, then exit with the status's code.
enum class Fatal { runtime_error, unsupported, warp_sync, race };
[[noreturn]] void fatal(Fatal kind, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Print the device printf output held back so far (src/device_printf.cpp), at the calls
// where a GPU prints it; `wait` false (a fatal report) skips it if a printf holds the lock.
void flush_device_output(bool wait = true);

// Source position of a device-side call: barriers and warp operations take
// their caller's file/line via default arguments, for diagnostics.
struct Site {
  const char* file;
  unsigned line;
};
// (GCC gives the caller's position only when the builtins are themselves
// default arguments, hence the helper.)
inline Site site_here(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) { return Site{file, line}; }
#define CUSET_SITE_PARAM ::cuset::rt::Site cuset_site = ::cuset::rt::site_here()

// Block-wide barrier; op: 0 plain, 1 count, 2 and, 3 or. Returns the reduction.
int block_barrier(int op, int predicate, Site site);

// A warp collective: every lane in `mask` posts its operand and waits until
// all of them (that still exist) have arrived; the last one computes every
// lane's result. Lanes that exited read back as all-ones bytes (NaN / -1).
enum class WarpKind : unsigned char {
  sync, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all, match_any, match_all,
  reduce_add, reduce_min, reduce_max, reduce_and, reduce_or, reduce_xor, activemask,
};
struct WarpCall {
  WarpKind kind;
  bool is_signed;      // reduce_min/max on int vs unsigned
  unsigned mask;
  int width;           // shuffles: segment width (power of two <= 32)
  int param;           // shuffles: source lane / delta / xor mask
  const void* in;      // this lane's operand (size bytes)
  void* out;           // where this lane's result goes
  unsigned size;
  const char* api;     // name for diagnostics, e.g. "__shfl_down_sync"
  Site site;
};
void warp_collective(WarpCall& call);

// Lane / warp of the running thread, linear thread index in its block.
unsigned current_lane();
unsigned current_linear_tid();

// A thread busy-waiting (failed atomicCAS, volatile poll) lets the others run;
// a spin that nothing can ever end is reported instead of hanging.
void note_spin(const void* addr);
void note_progress();

// Loop back-edges in device code (inserted by the rewriter into loop conditions):
// every kLoopTicks iterations of one CUDA thread's loops it lets the next thread of
// its block run. Threads of a block then walk memory together, a few iterations at
// a time, as a GPU's warps do, instead of one thread finishing its whole loop before
// the next starts: a naive kernel whose threads each walk a column reads neighbouring
// addresses in one pass instead of striding through memory once per thread.
// Threads with fewer iterations never switch. The count is the CUDA thread's own: it
// starts at 0 with the thread, restarts at each switch a tick makes and is kept while
// the thread waits at a barrier (block_loop.py reproduces where it switches).
constexpr unsigned kLoopTicks = 32;
extern __thread unsigned loop_ticks;
void loop_yield();
__attribute__((always_inline)) inline bool loop_tick() {
  if (__builtin_expect(++loop_ticks >= kLoopTicks, 0)) loop_yield();
  return true;
}

// Grid-wide synchronisation cannot run with blocks executed one at a time.
[[noreturn]] void unsupported_grid_sync(Site site);

// Volatile shared-memory accesses in device code go through this (see
// volatile.h): detects lanes of one warp exchanging data without __syncwarp.
// `written` is the new value's bytes for writes (nullptr for reads).
void note_volatile_access(const volatile void* addr, unsigned size, const void* written);

// The dynamic shared memory window: one fixed array per worker OS thread, so
// `extern __shared__` declarations (rewritten to pointers) work at any scope.
constexpr unsigned kDynamicSmemCapacity = 101376;  // sharedMemPerBlockOptin (99 KiB)
extern __thread unsigned char dynamic_smem[];

// ---- launching ----
struct LaunchConfig {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  LaunchConfig(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0) : grid(g), block(b), smem(s), stream(st) {}
};
struct KernelSite {
  const char* name;   // the launch expression's callee, as written
  const char* file;
  int line;
};
// Validates the configuration as a GPU would; on failure records the CUDA
// error (seen by cudaGetLastError), reports it and returns false.
bool begin_launch(const KernelSite& site, const LaunchConfig& cfg);
// Direct mode (scheduler.cpp): a block's threads run one after another as plain
// calls until one of them has to wait. The loop lives in the launch code of each
// kernel (launch.h), so the kernel is inlined into it.
struct DirectLoop {
  bool active;        // cleared when a thread leaves direct mode
  unsigned pos, n;    // position of the running thread in the start order; threads
  const int* order;   // start order; null: index order
  const uint3* idx;   // threadIdx of each linear thread index
  int* cur;           // where the scheduler keeps the running thread
};
using ThreadFn = void (*)(void*);
// Runs the threads from d.pos on; returns the thread that left direct mode (it
// has finished its kernel, resumed by the scheduler), or -1 when all finished.
// Null: the scheduler's own loop, calling ThreadFn once per thread.
using DirectFn = int (*)(void*, DirectLoop&);
// Runs every thread of every block: the kernel once per CUDA thread.
void run_grid(ThreadFn thread_fn, DirectFn direct_fn, void* arg);

// Block loops (cuset/execute/cpu/block_loop.py): a kernel that needs no fiber
// carries a second version of its body that runs all the threads of a block as
// a loop. At the start of each block the scheduler offers it (block_loop_offered,
// with the block's shape and start order in block_loop); the kernel's first call
// takes it (take_block_loop), runs the whole block and the direct loop ends the
// block (block_loop_ran). Never offered in the sanitizer builds or with
// CUSET_CPU_BLOCK_LOOP=0.
struct BlockLoop {
  unsigned n;          // threads in the block
  dim3 dim;            // blockDim
  const int* order;    // the start order of the random orders; null: index order (x innermost)
  const uint3* idx;    // threadIdx of each linear thread index
};
extern __thread bool block_loop_offered;
extern __thread bool block_loop_ran;
extern __thread BlockLoop block_loop;
// Hoisted loops that write no memory may run with the threads innermost (vectorised);
// false under CUSET_CPU_BLOCK_LOOP=chunks. Set before any block runs, read-only after.
extern bool block_loop_lanes;
bool take_block_loop();
// A kernel with barriers split into regions at them (barrier_regions.py): taken as
// take_block_loop, and named "block loop with barrier regions" in the run record.
bool take_barrier_block_loop();
// The order of the threads after a barrier of such a kernel, as the fibers' barrier
// would resume them: under the random orders a permutation drawn from the same pool,
// once per barrier passed while some thread (`live` of them) still runs; else `order`.
const int* block_loop_barrier(const int* order, unsigned live);
// Pairs of pointers (a0, b0, a1, b1, ...) that regions of a block loop write and
// access (region_memory.py): true when each pair points into two different device
// allocations; otherwise the offer is withdrawn (the block runs on the fibers).
bool block_loop_apart(std::initializer_list<const void*> pairs);
// Per-thread copies of the locals that live across a hoisted loop: slot k of the
// running worker, at least `bytes` long, 64-byte aligned, kept between blocks.
void* block_loop_scratch(unsigned slot, size_t bytes);

// Warp shuffles in barrier regions (barrier_regions.py): between two barriers a
// kernel with shuffles runs warp after warp, as the fibers do (a released warp's
// lanes go to the front of the queue), each stretch between two shuffles as a
// loop over the warp's 32 lanes. Offered only to blocks of whole warps: otherwise
// the offer is withdrawn (the block runs on the fibers).
bool block_loop_full_warps();
// The lanes (thread indices, in the order they run) of the warp at position
// `first` of the block's order: that order's 32 entries from there.
void block_loop_warp_lanes(const BlockLoop& bl, unsigned first, int* lanes);
// A shuffle every lane of the warp has reached, the last of `lanes` last: the
// order they go on in, as the fibers' release_group queues them (the last lane
// first, then the others; under the random orders the same draws).
void block_loop_warp_release(int* lanes);
// The lane a shuffle reads (width checked as on the fibers).
unsigned block_loop_shuffle_source(WarpKind kind, unsigned lane, int param, int width, const char* api,
                                   const char* file, unsigned line);
// Some lanes of a warp entered an `if` whose body shuffles with the full mask and
// the others went on to a barrier: a deadlock on the fibers, reported alike.
[[noreturn]] void block_loop_warp_divergence(unsigned warp, const char* file, unsigned line);
// A vote over a warp's 32 predicates (all lanes present), as compute_group computes it.
inline unsigned block_loop_vote(WarpKind kind, const int* predicates) {
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l)
    if (predicates[l]) bits |= 1u << l;
  return kind == WarpKind::ballot ? bits : kind == WarpKind::any ? (bits != 0) : (bits == 0xffffffffu);
}
// Source lane of a shuffle of `kind` read by `lane` (width a power of two <= 32):
// the fibers' compute_group and the regions share it.
inline unsigned shuffle_source(WarpKind kind, unsigned lane, int param, unsigned width) {
  unsigned base = lane & ~(width - 1);
  switch (kind) {
    case WarpKind::shfl_idx: return base + ((unsigned)param & (width - 1));
    case WarpKind::shfl_up: return (lane - base) >= (unsigned)param ? lane - (unsigned)param : lane;
    case WarpKind::shfl_down: return (lane - base) + (unsigned)param < width ? lane + (unsigned)param : lane;
    default: {
      unsigned s = lane ^ ((unsigned)param & 31u);
      return s >= base + width ? lane : s;  // later segments read back the own value
    }
  }
}

// A kernel with shuffles runs as regions only where each warp's lanes agree on the
// conditions it branches on around them (`if (C) return;` before the first barrier and
// shuffle: whole warps leave together; a top-level `if (C)` around shuffles: whole warps
// enter): `holds` (C for a thread's index) true for all 32 lanes of a warp or for none;
// else the offer is withdrawn (the fibers model lanes that left or skipped a shuffle).
template <class F>
inline bool block_loop_warps_agree(const BlockLoop& bl, F&& holds) {
  for (unsigned w = 0; w < bl.n; w += 32) {
    unsigned out = 0;
    for (unsigned t = w; t < w + 32 && t < bl.n; ++t)
      out += holds(bl.dim.y == 1 && bl.dim.z == 1 ? uint3{t, 0, 0} : bl.idx[t]) ? 1u : 0u;
    if (out != 0 && out != 32) {
      block_loop_offered = false;
      return false;
    }
  }
  return true;
}

// The thread for_each_thread is running (linear index in the block), ~0u outside it:
// in a block loop the order proof (src/order_proof.cpp) takes the accessing thread
// from here, and an access outside a per-thread region proves nothing.
extern __thread unsigned proof_thread;

// The threads of the block, in the order the fiber path would start them.
// The 32 lanes of a warp (thread indices) in the order given.
template <class F>
__attribute__((always_inline)) inline void for_each_lane(const BlockLoop& bl, const int* lanes, F&& f) {
  for (unsigned k = 0; k < 32; ++k) {
    unsigned t = (unsigned)lanes[k];
    proof_thread = t;
    f(t, bl.dim.y == 1 && bl.dim.z == 1 ? uint3{t, 0, 0} : bl.idx[t]);
  }
  proof_thread = ~0u;
}

template <class F>
__attribute__((always_inline)) inline void for_each_thread(const BlockLoop& bl, F&& f) {
  if (bl.order && bl.dim.y == 1 && bl.dim.z == 1) {  // 1-D: the index is the thread (no table load)
    for (unsigned i = 0; i < bl.n; ++i) {
      unsigned t = (unsigned)bl.order[i];
      f(t, uint3{t, 0, 0});
    }
  } else if (bl.order) {
    for (unsigned i = 0; i < bl.n; ++i) {
      unsigned t = (unsigned)bl.order[i];
      proof_thread = t;
      f(t, bl.idx[t]);
    }
  } else if (bl.dim.y == 1 && bl.dim.z == 1) {
    for (unsigned x = 0; x < bl.dim.x; ++x) {
      proof_thread = x;
      f(x, uint3{x, 0, 0});
    }
  } else {
    unsigned t = 0;
    for (unsigned z = 0; z < bl.dim.z; ++z)
      for (unsigned y = 0; y < bl.dim.y; ++y)
        for (unsigned x = 0; x < bl.dim.x; ++x, ++t) {
          proof_thread = t;
          f(t, uint3{x, y, z});
        }
  }
  proof_thread = ~0u;
}

}  // namespace rt
}  // namespace cuset
