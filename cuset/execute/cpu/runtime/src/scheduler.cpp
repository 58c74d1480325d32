// Block scheduler: each worker OS thread runs the CUDA threads of one block at
// a time as fibers.
//
// Direct mode: a block starts with its threads run one after another as plain
// calls in a tight loop, with no per-thread scheduler state at all. Most
// kernels never wait (no barrier, warp operation, loop tick or spin), and for
// short kernels that bookkeeping cost more than the kernel itself. The first
// time a thread would wait, leave_direct() writes the state the general
// scheduler would have had at that point (threads before it done, the rest
// queued in the same order), so the order threads run in, and every result,
// is the same as without direct mode.
//
// A thread starts as a plain call on the current worker stack. When it
// reaches a barrier or a warp operation that cannot complete yet it keeps
// that stack, and a fresh worker context carries on with the next thread.
// A worker whose thread finished either starts the next not-started thread on
// the same stack (the cheap, common case) or jumps into a suspended thread
// and abandons its own frames.
//
// Workers: the host thread is worker 0 and the only one under `forward` and
// `random:<seed>` (every run reproducible). `parallel:<seed>` adds a pool of
// OS threads (CUSET_CPU_WORKERS, default: the cores) that take blocks from a
// shared counter, so blocks run concurrently and races between blocks show.
// A worker's block, grid copy, built-in variables and shared memory are
// thread-locals; only the launch (block counter, progress) is shared.
#include "cuset_cpu.h"
#include "internal.h"

#include <link.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;

extern "C" {
extern char __start_cuset_smem[] __attribute__((weak));
extern char __stop_cuset_smem[] __attribute__((weak));
}

namespace cuset {
namespace rt {

alignas(4096) __thread unsigned char dynamic_smem[kDynamicSmemCapacity];

enum : unsigned char { T_NOT_STARTED, T_READY, T_RUNNING, T_BARRIER, T_WARP, T_DONE };

struct Thread {
  uint3 idx;
  unsigned char state;
  void* sp;          // saved context while suspended
  Stack* stack;      // the stack it runs on (for AddressSanitizer's fiber annotations)
  void* fake_stack;  // AddressSanitizer's fake stack while suspended
  Site site;         // where it waits (barrier) for diagnostics
  WarpCall* call;    // the warp operation it waits in
};

struct Warp {
  unsigned exists;      // lanes that exist (a partial last warp has fewer)
  unsigned exited;
  unsigned waiting;     // lanes suspended in a warp operation
  unsigned at_barrier;  // lanes suspended in __syncthreads
  unsigned epoch;       // bumped whenever the warp synchronises (volatile checks)
};

struct RunQueue {
  int buf[2048];
  unsigned head = 0, tail = 0;
  bool empty() const { return head == tail; }
  unsigned size() const { return tail - head; }
  void clear() { head = tail = 0; }
  void push_back(int t) { buf[tail++ & 2047] = t; }
  void push_front(int t) { buf[--head & 2047] = t; }
  int front() const { return buf[head & 2047]; }
  int pop_front() { return buf[head++ & 2047]; }
  int peek(unsigned k) const { return size() > k ? buf[(head + k) & 2047] : -1; }
};

// AddressSanitizer must be told about every stack switch (CUSET_CPU_ASAN builds).
#if CUSET_CPU_ASAN
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
static const void* g_host_bottom = nullptr;
static size_t g_host_size = 0;
static inline void asan_leave(void** fake_save, const Stack* to) {
  if (to)
    __sanitizer_start_switch_fiber(fake_save, to->lo, (size_t)(to->hi - to->lo));
  else
    __sanitizer_start_switch_fiber(fake_save, g_host_bottom, g_host_size);
}
static inline void asan_arrive(void* fake_save) {
  const void* bottom;
  size_t size;
  __sanitizer_finish_switch_fiber(fake_save, &bottom, &size);
  if (!g_host_bottom) {  // the first switch leaves the host stack: remember it
    g_host_bottom = bottom;
    g_host_size = size;
  }
}
#else
static inline void asan_leave(void**, const Stack*) {}
static inline void asan_arrive(void*) {}
#endif

struct Block {
  Thread th[1024];
  Warp warps[32];
  unsigned nthreads = 0, nwarps = 0, live = 0;
  int cur = -1;
  RunQueue q;
  // current barrier
  unsigned arrived = 0, bar_count = 0;
  Site bar_site{nullptr, 0};
  int bar_first = -1;
  // last completed barrier's reduction inputs
  unsigned bar_count_result = 0, bar_n_result = 0;
  unsigned long long serial = 0;  // distinguishes blocks for the volatile checks
  unsigned bgen = 0;              // completed __syncthreads of this block (race checks)
  DirectLoop dl{false, 0, 0, nullptr, nullptr, nullptr};  // direct mode (see the top of this file)
  Stack* dstack = nullptr;        // the worker stack the direct loop runs on
};

// The random orders' block order: a random bijection of the linear block indices
// that keeps locality. The blocks are cut into chunks of CUSET_CPU_BLOCK_CHUNK
// (default 64) consecutive blocks, the last one shorter; the chunks run in the
// order q -> (a*q + c) mod m and each chunk's blocks in the order
// r -> (a'*r + c') mod size, all drawn per launch. Any two blocks still run in either
// order with about the same probability as under one affine permutation of the whole
// grid (CUSET_CPU_BLOCK_CHUNK=1, the order before 2026-11-27, same random numbers),
// since the chunks' order and each chunk's order are both random; but consecutive
// blocks of the run are neighbours, so what neighbours share (an attention head's K
// and V, a sort's stretch of the array) stays in the cache. A grid of at most one
// chunk runs exactly as before. bench/cpu_backend.py --block-order measures both.
struct Affine {  // i -> (a*i + c) mod n, gcd(a, n) = 1
  unsigned long long a = 1, c = 0, n = 1;
  unsigned long long operator()(unsigned long long i) const { return (a * i + c) % n; }
};

static unsigned long long gcd(unsigned long long a, unsigned long long b);

static Affine random_affine(unsigned long long n) {
  Affine f;
  f.n = n ? n : 1;
  if (f.n > 1) {
    do f.a = 1 + next_random() % f.n; while (gcd(f.a, f.n) != 1);
    f.c = next_random() % f.n;
  }
  return f;
}

// a^-1 mod n for gcd(a, n) = 1 (extended Euclid).
static unsigned long long inverse(unsigned long long a, unsigned long long n) {
  long long t = 0, t1 = 1;
  unsigned long long r = n, r1 = a % n;
  while (r1) {
    unsigned long long q = r / r1, r2 = r - q * r1;
    long long t2 = t - (long long)q * t1;
    r = r1, r1 = r2, t = t1, t1 = t2;
  }
  return n == 1 ? 0 : (unsigned long long)(t < 0 ? t + (long long)n : t);
}

static unsigned long long block_chunk() {
  static unsigned long long size = 0;
  if (!size) {
    const char* e = getenv("CUSET_CPU_BLOCK_CHUNK");
    char* end = nullptr;
    unsigned long long v = e && *e ? strtoull(e, &end, 10) : 64;
    if (e && *e && (!end || *end || v == 0)) {
      diag_printf("CUSET-CPU: runtime_error: CUSET_CPU_BLOCK_CHUNK='%s' is not a positive block count\n", e);
      _exit(kExitRuntimeError);
    }
    size = v;
  }
  return size;
}

struct BlockPermutation {
  unsigned long long size = 1, chunks = 1, last = 1;  // chunk size; chunks; size of the last chunk
  unsigned long long last_at = 0;                     // the position in the run of the last chunk
  Affine chunk, within, within_last;

  void draw(unsigned long long n) {
    size = block_chunk();
    chunks = (n + size - 1) / size;
    last = n - (chunks - 1) * size;
    chunk = random_affine(chunks);
    within = random_affine(chunks > 1 ? size : last);
    within_last = chunks > 1 ? random_affine(last) : within;
    // The position whose chunk is the last: a*v + c = chunks - 1 (mod chunks).
    last_at = (unsigned long long)((unsigned __int128)((chunks - 1 + chunks - chunk.c) % chunks) *
                                   inverse(chunk.a, chunks) % chunks);
  }
  // The block run at position `lin` of the launch.
  unsigned long long block_of(unsigned long long lin) const {
    unsigned long long start = last_at * size;  // the last chunk's first position
    if (lin >= start && lin < start + last) return (chunks - 1) * size + within_last(lin - start);
    if (lin >= start + last) lin += size - last;  // positions after the short chunk
    return chunk(lin / size) * size + within(lin % size);
  }
};

struct Grid {
  ThreadFn fn = nullptr;
  DirectFn direct_fn = nullptr;
  void* arg = nullptr;
  KernelSite site{"", "", 0};
  dim3 grid, block;
  unsigned long long nblocks = 0, next = 0;
  BlockPermutation perm;  // the random orders' block order (block_of)
  void* host_sp = nullptr;
  bool active = false;
  Stack* pending_stack = nullptr;
  bool poison_notes_left = true;
  bool block_loops = false;       // blocks are offered as block loops (see core.h)
  uint3 idx_of[1024];
  unsigned exists_of[32];
};

// The host thread's block and grid; every other worker allocates its own.
static Block g_host_block;
static Grid g_host_grid;
static __thread Block* tls_block = &g_host_block;
static __thread Grid* tls_grid = &g_host_grid;
#define B (*tls_block)
#define G (*tls_grid)
static std::atomic<unsigned long long> g_block_serial{0};

// What the workers of one launch share.
struct Launch {
  const Grid* grid = nullptr;               // the host's grid, copied by each worker
  unsigned workers = 1;                     // workers running this launch
  uint64_t seed = 0;                        // parallel order: seeds of the workers' generators
  std::atomic<unsigned long long> next{0};  // next block (linear index before the permutation)
  std::atomic<unsigned long long> done{0};  // finished blocks: progress for the spin checks
  std::atomic<unsigned> busy{0};            // workers still running blocks
  std::atomic<unsigned> stuck{0};           // of those, workers whose block only spins
  std::atomic<unsigned long long> loop_blocks{0};  // blocks that ran as block loops
  std::atomic<unsigned long long> barrier_blocks{0};  // of those, kernels split at their barriers
};
static Launch L;
static Grid g_launch_grid;  // the host's grid as the other workers copy it

// ---------------------------------------------------------------- orders
static Order g_order{false, 0, false};
static __thread uint64_t g_rng = 0x9E3779B97F4A7C15ull;

const Order& order() { return g_order; }

uint64_t next_random() {  // xorshift64*
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 2685821657736338717ull;
}

__attribute__((constructor(101))) static void read_order() {
  const char* e = getenv("CUSET_CPU_ORDER");
  if (!e || !*e || strcmp(e, "forward") == 0) return;
  bool parallel = strncmp(e, "parallel", 8) == 0;
  if (strncmp(e, "random", 6) == 0 || parallel) {
    const char* seed = e + (parallel ? 8 : 6);
    g_order.random = true;
    g_order.parallel = parallel;
    g_order.seed = (*seed == ':') ? strtoull(seed + 1, nullptr, 10) : 1;
    g_rng = g_order.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (!g_rng) g_rng = 1;
    for (int i = 0; i < 8; ++i) next_random();
    return;
  }
  diag_printf("CUSET-CPU: runtime_error: unknown CUSET_CPU_ORDER '%s' (use forward, random:<seed> or parallel:<seed>)\n", e);
  _exit(kExitRuntimeError);
}

static void shuffle(int* v, unsigned n) {
  for (unsigned i = n; i > 1; --i) {
    // j uniform in [0, i) by multiply-shift (Lemire): no 64-bit division per element.
    unsigned j = (unsigned)(((next_random() >> 32) * (uint64_t)i) >> 32);
    int t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

// ---------------------------------------------------------------- reporting
bool in_kernel() { return G.active; }
const char* current_kernel_name() { return G.active ? G.site.name : ""; }

void describe_position(char* buf, size_t n) {
  if (!G.active) {
    snprintf(buf, n, "in host code");
    return;
  }
  char where[300];
  if (G.site.file && *G.site.file)
    snprintf(where, sizeof where, "launched at %s:%d", G.site.file, G.site.line);
  else
    snprintf(where, sizeof where, "launched with cudaLaunchKernel");
  int c = B.cur;
  if (c >= 0) {
    uint3 t = B.th[c].idx;
    snprintf(buf, n, "in kernel '%s' (%s), block (%u,%u,%u), thread (%u,%u,%u)", G.site.name, where, blockIdx.x,
             blockIdx.y, blockIdx.z, t.x, t.y, t.z);
  } else {
    snprintf(buf, n, "in kernel '%s' (%s), block (%u,%u,%u)", G.site.name, where, blockIdx.x, blockIdx.y,
             blockIdx.z);
  }
}

// User code is built with -fsanitize=float-cast-overflow (toolchain.py) and these
// handlers instead of libubsan's. A floating-point value converted to an integer
// type it does not fit (or NaN) is undefined in C++ and gives x86's "integer
// indefinite"; a GPU saturates. Device code's explicit casts convert as a GPU's
// (conversions.py); what is left here (an implicit conversion, a cast in a macro)
// cannot be given the GPU's value, so a kernel doing it is `unsupported`. Host code
// keeps the host's conversion, as on a GPU machine.
namespace {
struct UbsanLocation { const char* file; unsigned line, column; };
struct UbsanType { unsigned short kind, info; char name[1]; };
struct UbsanFloatCast { UbsanLocation loc; const UbsanType* from; const UbsanType* to; };
}  // namespace

[[noreturn]] static void float_cast_out_of_range(const UbsanFloatCast* d) {
  fatal(Fatal::unsupported,
        "%s:%u: a conversion from %s to %s in device code got a value out of the integer type's range (or NaN): "
        "a GPU saturates it (NaN gives 0) and this backend cannot reproduce that for an implicit conversion; write "
        "the cast out ((int)x, static_cast<int>(x)) or use __float2int_rz, which convert as a GPU does",
        d->loc.file ? d->loc.file : "?", d->loc.line, d->from ? d->from->name : "?", d->to ? d->to->name : "?");
}
}  // namespace rt
}  // namespace cuset

extern "C" void __ubsan_handle_float_cast_overflow(void* data, void*) {
  if (cuset::rt::in_kernel()) cuset::rt::float_cast_out_of_range((const cuset::rt::UbsanFloatCast*)data);
}

namespace cuset {
namespace rt {

static const char* status_word(Fatal k) {
  switch (k) {
    case Fatal::unsupported: return "unsupported";
    case Fatal::warp_sync: return "warp_sync";
    case Fatal::race: return "race";
    default: return "runtime_error";
  }
}

static std::atomic<long> g_fatal_owner{0};

void fatal(Fatal kind, const char* fmt, ...) {
  // The first worker to fail reports and exits; others wait for that exit.
  long me = (long)syscall(SYS_gettid), none = 0;
  if (!g_fatal_owner.compare_exchange_strong(none, me) && none != me)
    for (;;) pause();
  static char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  (void)len;
  flush_device_output(false);  // what the kernels printed, for whoever reads the log
  fflush(stdout);
  fflush(stderr);
  char pos[512];
  describe_position(pos, sizeof pos);
  char line[5000];
  int m = snprintf(line, sizeof line, "\nCUSET-CPU: %s: %s [%s]\n", status_word(kind), msg, pos);
  if (m > (int)sizeof line - 1) m = sizeof line - 1;
  diag_write(line, (size_t)m);
  _exit(kind == Fatal::unsupported ? kExitUnsupported
        : kind == Fatal::warp_sync ? kExitWarpSync
        : kind == Fatal::race      ? kExitRace
                                   : kExitRuntimeError);
}

void note(const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(stderr);
  diag_printf("CUSET-CPU: note: %s\n", msg);
}

static void lane_list(char* buf, size_t n, unsigned mask) {
  // "0-15,17" style list of set bits
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < 32 && used < n;) {
    if (!(mask >> i & 1u)) { ++i; continue; }
    int j = i;
    while (j + 1 < 32 && (mask >> (j + 1) & 1u)) ++j;
    used += (size_t)snprintf(buf + used, n - used, used ? ",%d" : "%d", i);
    if (j > i && used < n) used += (size_t)snprintf(buf + used, n - used, "-%d", j);
    i = j + 1;
  }
}

// ---------------------------------------------------------------- switching
static inline void enter(int t) {
  B.cur = t;
  threadIdx = B.th[t].idx;
}

static void worker_loop(Stack* me);

static void worker_main() {
  asan_arrive(nullptr);
  worker_loop(G.pending_stack);
}

// No suspended thread is ready: a fresh worker starts the next thread (or
// finds the block finished, or a deadlock).
__attribute__((noinline)) static void switch_to_new_worker(Thread& me) {
  Stack* w = acquire_stack();
  G.pending_stack = w;
  asan_leave(&me.fake_stack, w);
  cuset_ctx_swap(&me.sp, make_context(w, worker_main));
  asan_arrive(me.fake_stack);
}

// The threads that run after the next one: the saved context (top of the
// stack) of the first and the record of the second are fetched ahead. A switch
// otherwise waits on a cache miss in the resumed thread's stack, most of a
// switch's cost when threads resume in random order (82 vs 95 s for a
// 65536x1024 shared-memory sort's random-order run).
__attribute__((always_inline)) static inline void prefetch_queued() {
  int a = B.q.peek(0), b = B.q.peek(1);
  if (b >= 0) __builtin_prefetch(&B.th[b]);
  if (a >= 0 && B.th[a].state == T_READY) {
    const char* sp = (const char*)B.th[a].sp;
    __builtin_prefetch(sp);
    __builtin_prefetch(sp + 64);
  }
}

// The running thread gives up the CPU (its state is already set: waiting, or
// READY and queued). Returns once something resumes it. Inlined into the
// barrier and warp paths: every frame on a suspended fiber's stack is cache
// footprint paid again at each switch.
// The loop-tick count is the CUDA thread's own (core.h): kept on its stack while
// other threads run, so what they tick never moves where it switches.
__attribute__((always_inline)) static inline void switch_away(Thread& me) {
  const unsigned ticks = loop_ticks;
  if (!B.q.empty()) {
    int n = B.q.front();
    Thread& nt = B.th[n];
    if (nt.state == T_READY) {
      B.q.pop_front();
      prefetch_queued();
      if (&nt == &me) {
        me.state = T_RUNNING;
        return;
      }
      nt.state = T_RUNNING;
      enter(n);
      asan_leave(&me.fake_stack, nt.stack);
      cuset_ctx_swap(&me.sp, nt.sp);
      asan_arrive(me.fake_stack);
      loop_ticks = ticks;
      return;
    }
  }
  switch_to_new_worker(me);
  loop_ticks = ticks;
}

[[noreturn]] static void report_deadlock();
static bool next_block();

static void finish_thread(int t);
static void unstick();

static void run_direct(Stack* me);

static void worker_loop(Stack* me) {
  for (;;) {
    if (B.dl.active) {
      run_direct(me);
      continue;
    }
    if (!B.q.empty()) {
      int t = B.q.pop_front();
      Thread& th = B.th[t];
      if (th.state == T_NOT_STARTED) {
        th.state = T_RUNNING;
        th.stack = me;
        enter(t);
        loop_ticks = 0;
        G.fn(G.arg);
        finish_thread(t);
        continue;
      }
      release_stack(me);  // this worker's frames are abandoned from here on
      th.state = T_RUNNING;
      enter(t);
      asan_leave(nullptr, th.stack);
      cuset_ctx_jump(th.sp);
    }
    if (B.live == 0) {
      if (next_block()) continue;
      release_stack(me);
      B.cur = -1;
      asan_leave(nullptr, nullptr);
      cuset_ctx_jump(G.host_sp);
    }
    report_deadlock();
  }
}

// ---------------------------------------------------------------- blocks
// Static shared memory is thread-local: __start/__stop_cuset_smem are
// addresses in the TLS template; this worker's copy lies at the same offset
// in its own TLS block of the program (dl_iterate_phdr tells where).
static int find_smem(struct dl_phdr_info* info, size_t, void* out) {
  for (int k = 0; k < info->dlpi_phnum; ++k) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[k];
    if (ph.p_type != PT_TLS || !info->dlpi_tls_data) continue;
    char* tmpl = (char*)(info->dlpi_addr + ph.p_vaddr);
    if (__start_cuset_smem >= tmpl && __start_cuset_smem < tmpl + ph.p_memsz) {
      *(char**)out = (char*)info->dlpi_tls_data + (__start_cuset_smem - tmpl);
      return 1;
    }
  }
  return 0;
}

// This worker's static shared memory (null, 0 when the program has none).
// (weak symbols: both null when the program declares no static shared memory)
static char* static_smem(size_t* n) {
  static __thread char* mine = nullptr;
  *n = (size_t)(__stop_cuset_smem - __start_cuset_smem);
  if (!__start_cuset_smem || !*n) return nullptr;
  if (!mine) dl_iterate_phdr(find_smem, &mine);
  return mine;
}

bool in_shared_memory(const void* addr) {
  size_t n;
  const char* lo = static_smem(&n);
  const char* a = (const char*)addr;
  return (lo && a >= lo && a < lo + n) || (a >= (const char*)dynamic_smem && a < (const char*)dynamic_smem + kDynamicSmemCapacity);
}

static void poison_shared_memory(size_t dynamic_bytes) {
  // Shared memory is not initialised on a GPU and keeps whatever the previous
  // block left. Under the random order it starts as all-ones bytes (NaN / -1).
  size_t n;
  if (char* mine = static_smem(&n)) memset(mine, 0xff, n);
  if (dynamic_bytes) memset(dynamic_smem, 0xff, dynamic_bytes);
}

static size_t g_dynamic_smem_bytes = 0;

// A random order of a block's threads (the order they start in, and resume in
// after a barrier, under the random orders): one of a pool of random
// permutations, drawn each time. Shuffling afresh every time cost as much as
// running a short kernel's threads (a 16M-element bitonic sort runs 20 million
// blocks). Each permutation takes the warps in a random order and the lanes
// of a full warp in the order lane ^ mask for a random mask: any two lanes run
// in either order with probability 1/2, as in a uniform shuffle, but a warp's
// threads stay near each other in memory. (A 65536x1024 shared-memory sort's
// random-order run: 73.6 s with a uniform shuffle of the lanes, 62.5 s with
// this, 59.5 s with lanes in index order.)
static constexpr unsigned kThreadOrders = 32;
static __thread int g_thread_orders[kThreadOrders][1024];
static __thread unsigned g_thread_orders_n = 0;

static const int* random_thread_order(unsigned n) {
  if (g_thread_orders_n != n) {
    for (unsigned k = 0; k < kThreadOrders; ++k) {
      int warps[32];
      unsigned nw = (n + 31) / 32;
      for (unsigned w = 0; w < nw; ++w) warps[w] = (int)w;
      shuffle(warps, nw);
      int* out = g_thread_orders[k];
      for (unsigned i = 0; i < nw; ++i) {
        unsigned first = (unsigned)warps[i] * 32, lanes = n - first < 32 ? n - first : 32;
        if (lanes == 32) {
          unsigned mask = (unsigned)(next_random() >> 59);  // lanes in the order l ^ mask
          for (unsigned l = 0; l < 32; ++l) out[l] = (int)(first + (l ^ mask));
        } else {
          for (unsigned l = 0; l < lanes; ++l) out[l] = (int)(first + l);
          shuffle(out, lanes);
        }
        out += lanes;
      }
    }
    g_thread_orders_n = n;
  }
  return g_thread_orders[next_random() % kThreadOrders];
}

static bool next_block() {
  unsigned long long lin = L.workers > 1 ? L.next.fetch_add(1, std::memory_order_relaxed) : G.next++;
  if (lin >= G.nblocks) return false;
  if (g_order.random) lin = G.perm.block_of(lin);
  unsigned long long gx = G.grid.x, gy = G.grid.y;
  blockIdx.x = (unsigned)(lin % gx);
  blockIdx.y = (unsigned)((lin / gx) % gy);
  blockIdx.z = (unsigned)(lin / (gx * gy));
  B.serial = ++g_block_serial;
  unstick();
  unsigned n = B.nthreads;
  for (unsigned w = 0; w < B.nwarps; ++w) {
    Warp& W = B.warps[w];
    W.exists = G.exists_of[w];
    W.exited = W.waiting = W.at_barrier = 0;
    ++W.epoch;
  }
  B.live = n;
  B.arrived = B.bar_count = 0;
  B.bar_first = -1;
  B.cur = -1;
  B.q.clear();
  // Threads start in this order; leave_direct() queues the ones not started yet.
  B.dl = DirectLoop{true, 0, n, nullptr, G.idx_of, &B.cur};
  if (g_order.random) {
    B.dl.order = random_thread_order(n);
    poison_shared_memory(g_dynamic_smem_bytes);
  }
  block_loop_offered = G.block_loops;
  block_loop = BlockLoop{n, G.block, B.dl.order, G.idx_of};
  return true;
}

// ---------------------------------------------------------------- block loops
__thread bool block_loop_offered = false;
__thread bool block_loop_ran = false;
__thread BlockLoop block_loop{0, dim3(1, 1, 1), nullptr, nullptr};

// Every order takes the block loop a kernel offers: one version of a kernel for
// all of them, since g++ may contract a*b+c into FMAs differently in the two
// versions and orders that disagreed by an ulp would read as a race. Under the
// random orders block_loop.order permutes the threads of every region (every
// iteration of a hoisted loop) as the fibers' start and tick order would.
bool take_block_loop() {
  block_loop_offered = false;
  block_loop_ran = true;
  B.cur = -1;  // reports name the block, not a thread
  L.loop_blocks.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool take_barrier_block_loop() {
  L.barrier_blocks.fetch_add(1, std::memory_order_relaxed);
  return take_block_loop();
}

// complete_barrier() draws the order its threads resume in once per barrier that
// completes, and a barrier completes only when some thread arrives at it: the
// regions draw at the same points, so the generator's state, every later order
// and every later block's, stays the fibers'.
const int* block_loop_barrier(const int* order, unsigned live) {
  if (!g_order.random || live == 0) return order;
  return random_thread_order(B.nthreads);
}

bool block_loop_full_warps() {
  if (block_loop.n % 32u == 0) return true;
  block_loop_offered = false;
  return false;
}

void block_loop_warp_lanes(const BlockLoop& bl, unsigned first, int* lanes) {
  for (unsigned k = 0; k < 32; ++k) lanes[k] = bl.order ? bl.order[first + k] : (int)(first + k);
}

// release_group's order: the running lane (the last to arrive) goes on, the others
// are pushed to the front of the queue: ascending under forward, under the random
// orders in the reverse of a shuffle of the ascending lanes (the same draws).
void block_loop_warp_release(int* lanes) {
  const int running = lanes[31], first = lanes[0] & ~31;
  int out[32], asc[32];
  unsigned k = 0;
  out[k++] = running;
  for (int l = 0; l < 32; ++l) asc[l] = first + l;
  if (g_order.random) {
    shuffle(asc, 32);
    for (int i = 31; i >= 0; --i)
      if (asc[i] != running) out[k++] = asc[i];
  } else {
    for (int l = 0; l < 32; ++l)
      if (asc[l] != running) out[k++] = asc[l];
  }
  memcpy(lanes, out, sizeof out);
}

unsigned block_loop_shuffle_source(WarpKind kind, unsigned lane, int param, int width, const char* api,
                                   const char* file, unsigned line) {
  if (width <= 0 || width > 32 || (width & (width - 1)))
    fatal(Fatal::runtime_error, "%s at %s:%u: width %d is not a power of two in 1..32", api, file, line, width);
  return shuffle_source(kind, lane, param, (unsigned)width);
}

void block_loop_warp_divergence(unsigned warp, const char* file, unsigned line) {
  fatal(Fatal::runtime_error,
        "deadlock in block (%u,%u,%u): lanes of warp %u shuffle with the full mask at %s:%u inside a branch the "
        "warp's other lanes skipped to wait at __syncthreads() (a warp operation in divergent code)",
        blockIdx.x, blockIdx.y, blockIdx.z, warp, file, line);
}

bool block_loop_lanes = true;

// CUSET_CPU_BLOCK_LOOP: 0 every kernel on the fibers; `chunks` block loops without
// the threads-innermost regions (every hoisted loop chunked, as before them: for
// benchmarks and tests comparing the two); unset or anything else: both.
bool block_loop_apart(std::initializer_list<const void*> pairs) {
  for (auto it = pairs.begin(); it != pairs.end(); it += 2) {
    if (same_device_allocation(it[0], it[1])) {
      block_loop_offered = false;
      return false;
    }
  }
  return true;
}

static bool block_loops_enabled() {
#if CUSET_CPU_ASAN || CUSET_CPU_RACECHECK
  return false;  // the sanitizers' reports name the thread; race checks need the per-thread runs
#else
  static int on = -1;
  if (on < 0) {
    const char* e = getenv("CUSET_CPU_BLOCK_LOOP");
    on = !(e && strcmp(e, "0") == 0);
    block_loop_lanes = !(e && strcmp(e, "chunks") == 0);
  }
  return on == 1;
#endif
}

static constexpr unsigned kScratchSlots = 64;
static __thread void* g_scratch[kScratchSlots];
static __thread size_t g_scratch_bytes[kScratchSlots];

void* block_loop_scratch(unsigned slot, size_t bytes) {
  if (slot >= kScratchSlots) fatal(Fatal::runtime_error, "block loop: scratch slot %u out of range", slot);
  if (g_scratch_bytes[slot] < bytes) {
    free(g_scratch[slot]);
    size_t n = (bytes + 63) & ~(size_t)63;
    g_scratch[slot] = aligned_alloc(64, n);
    if (!g_scratch[slot]) fatal(Fatal::runtime_error, "out of host memory for a block loop's locals");
    g_scratch_bytes[slot] = n;
  }
  return g_scratch[slot];
}

// A thread of a block in direct mode is about to wait: from here on the block
// runs under the general scheduler, in the state it would have reached by now.
__attribute__((noinline)) static void leave_direct() {
  B.dl.active = false;
  unsigned n = B.nthreads, p = B.dl.pos;
  for (unsigned i = 0; i < n; ++i) {
    int t = B.dl.order ? B.dl.order[i] : (int)i;
    Thread& th = B.th[t];
    if (i < p) {
      th.state = T_DONE;
      B.warps[(unsigned)t >> 5].exited |= 1u << (t & 31);
    } else if (i == p) {
      th.state = T_RUNNING;
      th.stack = B.dstack;
    } else {
      th.state = T_NOT_STARTED;
      B.q.push_back(t);
    }
  }
  B.live = n - p;
}

// Threads run as plain calls until every one has finished (returns with the
// block done) or one of them left direct mode; that one returns here once it
// has been resumed and finished its kernel, on its own stack.
static int direct_threads(void*, DirectLoop& d) {
  for (; d.pos < d.n; ++d.pos) {
    int t = d.order ? d.order[d.pos] : (int)d.pos;
    enter(t);
    loop_ticks = 0;
    G.fn(G.arg);
    if (!d.active) return t;
  }
  return -1;
}

static void run_direct(Stack* me) {
  B.dstack = me;
  int t = (G.direct_fn ? G.direct_fn : direct_threads)(G.arg, B.dl);
  if (t >= 0) {
    finish_thread(t);
    return;
  }
  B.dl.active = false;
  B.live = 0;
  L.done.fetch_add(1, std::memory_order_relaxed);
}

static unsigned long long gcd(unsigned long long a, unsigned long long b) {
  while (b) {
    unsigned long long t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// ---------------------------------------------------------------- workers
static unsigned workers_wanted() {
#if CUSET_CPU_ASAN || CUSET_CPU_RACECHECK
  return 1;  // the sanitizers' fiber and shadow bookkeeping is per process
#else
  static unsigned n = 0;
  if (!n) {
    n = 1;
    if (g_order.parallel) {
      const char* e = getenv("CUSET_CPU_WORKERS");
      long v = e && *e ? atol(e) : sysconf(_SC_NPROCESSORS_ONLN);
      n = v < 1 ? 1 : v > 256 ? 256 : (unsigned)v;
    }
  }
  return n;
#endif
}

// Runs blocks of the launch in L until none is left, on this OS thread.
static void run_blocks() {
  unsigned n = G.block.x * G.block.y * G.block.z;
  B.nthreads = n;
  B.nwarps = (n + 31) / 32;
  for (unsigned t = 0; t < n; ++t) B.th[t].idx = G.idx_of[t];
  B.live = 0;
  B.q.clear();
  gridDim = G.grid;
  blockDim = G.block;
  G.active = true;
  Stack* w = acquire_stack();
  G.pending_stack = w;
  void* host_fake = nullptr;
  asan_leave(&host_fake, w);
  cuset_ctx_swap(&G.host_sp, make_context(w, worker_main));
  asan_arrive(host_fake);
  G.active = false;
  B.cur = -1;
  threadIdx = uint3{0, 0, 0};
  blockIdx = uint3{0, 0, 0};
}

// The pool: workers 1..n-1 wait for a launch generation, copy the host's
// grid, run blocks and report back.
// (Never destroyed: at exit the workers still wait on them, and destroying a
// condition variable with waiters blocks.)
static std::mutex& g_pool_mu = *new std::mutex;
static std::condition_variable& g_pool_cv = *new std::condition_variable;
static std::condition_variable& g_pool_done_cv = *new std::condition_variable;
static unsigned long long g_pool_gen = 0;
static unsigned g_pool_running = 0;
static unsigned g_pool_size = 0;

static void pool_worker(unsigned index) {
  // Each worker needs its own signal stack for the fault handler (api.cpp).
  stack_t ss{};
  ss.ss_sp = malloc(64 * 1024);
  ss.ss_size = 64 * 1024;
  sigaltstack(&ss, nullptr);
  tls_block = new Block();
  tls_grid = new Grid();
  unsigned long long seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(g_pool_mu);
      g_pool_cv.wait(lk, [&] { return g_pool_gen != seen; });
      seen = g_pool_gen;
    }
    if (index < L.workers) {
      *tls_grid = *L.grid;
      g_rng = L.seed + index * 0x9E3779B97F4A7C15ull;
      if (!g_rng) g_rng = 1;
      for (int i = 0; i < 8; ++i) next_random();
      run_blocks();
      L.busy.fetch_sub(1);
    }
    std::lock_guard<std::mutex> lk(g_pool_mu);
    if (--g_pool_running == 0) g_pool_done_cv.notify_all();
  }
}

void run_grid_impl(const KernelSite& site, dim3 grid, dim3 block, size_t dynamic_smem_bytes, ThreadFn fn,
                   DirectFn direct_fn, void* arg) {
  if (G.active) fatal(Fatal::unsupported, "kernel launch from inside a kernel (dynamic parallelism)");
  flush_device_output();  // a GPU prints the earlier kernels' output at the start of a launch
  G.fn = fn;
  G.direct_fn = direct_fn;
  G.arg = arg;
  G.site = site;
  G.grid = grid;
  G.block = block;
  G.nblocks = (unsigned long long)grid.x * grid.y * grid.z;
  G.next = 0;
  g_dynamic_smem_bytes = dynamic_smem_bytes;
  if (g_order.random) G.perm.draw(G.nblocks);  // draws nothing for one block, as before
  unsigned n = block.x * block.y * block.z;
  for (unsigned t = 0; t < n; ++t) G.idx_of[t] = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
  for (unsigned w = 0, nw = (n + 31) / 32; w < nw; ++w) {
    unsigned lanes = n - w * 32 >= 32 ? 32 : n - w * 32;
    G.exists_of[w] = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
  }
  G.poison_notes_left = true;
  G.block_loops = direct_fn != nullptr && block_loops_enabled();
  L.loop_blocks.store(0);
  L.barrier_blocks.store(0);
  unsigned workers = workers_wanted();
  if (workers > G.nblocks) workers = (unsigned)G.nblocks;
  L.workers = workers;
  L.next.store(0);
  L.done.store(0);
  L.stuck.store(0);
  L.busy.store(workers);
  if (workers > 1) {
    g_launch_grid = G;
    L.grid = &g_launch_grid;
    L.seed = next_random();
    std::lock_guard<std::mutex> lk(g_pool_mu);
    for (; g_pool_size < workers - 1; ++g_pool_size) std::thread(pool_worker, g_pool_size + 1).detach();
    g_pool_running = g_pool_size;
    ++g_pool_gen;
    g_pool_cv.notify_all();
  }
  run_blocks();
  L.busy.fetch_sub(1);
  if (workers > 1) {
    // Kernel memory effects of the other workers happen-before the host goes on.
    std::unique_lock<std::mutex> lk(g_pool_mu);
    g_pool_done_cv.wait(lk, [] { return g_pool_running == 0; });
  }
  L.workers = 1;
  block_loop_offered = false;
  record_launch_path(site.name, G.nblocks, L.loop_blocks.load(), L.barrier_blocks.load());
}

// ---------------------------------------------------------------- barrier
__attribute__((noinline)) static void complete_barrier() {
  ++B.bgen;
  B.bar_count_result = B.bar_count;
  B.bar_n_result = B.arrived;
  B.bar_count = 0;
  B.arrived = 0;
  B.bar_first = -1;
  for (unsigned w = 0; w < B.nwarps; ++w) {
    B.warps[w].at_barrier = 0;
    ++B.warps[w].epoch;
  }
  unsigned n = B.nthreads;
  if (g_order.random) {
    // Resume in the order of a random permutation of the block's threads,
    // drawn from the pool as the start order is (a fresh shuffle at every
    // barrier: 102 vs 95 s for a 65536x1024 shared-memory sort).
    const int* perm = random_thread_order(n);
    for (unsigned i = 0; i < n; ++i) {
      int t = perm[i];
      if (B.th[t].state == T_BARRIER) {
        B.th[t].state = T_READY;
        B.q.push_back(t);
      }
    }
  } else {
    for (unsigned t = 0; t < n; ++t)
      if (B.th[t].state == T_BARRIER) {
        B.th[t].state = T_READY;
        B.q.push_back((int)t);
      }
  }
}

static bool same_site(const Site& a, const Site& b) {
  return a.line == b.line && (a.file == b.file || strcmp(a.file, b.file) == 0);
}

static void check_activemask(unsigned w, int running);

[[noreturn]] __attribute__((noinline, cold)) static void barrier_misuse(int t, Site site) {
  if (!G.active) fatal(Fatal::runtime_error, "__syncthreads() called outside a kernel (%s:%u)", site.file, site.line);
  uint3 a = B.th[B.bar_first].idx, b = B.th[t].idx;
  fatal(Fatal::runtime_error,
        "barrier divergence: thread (%u,%u,%u) waits at __syncthreads() on %s:%u while thread (%u,%u,%u) reached "
        "__syncthreads() on %s:%u; all threads of a block must reach the same barrier (undefined behaviour on a GPU)",
        a.x, a.y, a.z, B.bar_site.file, B.bar_site.line, b.x, b.y, b.z, site.file, site.line);
}

int block_barrier(int op, int predicate, Site site) {
  int t = B.cur;
  if (!G.active) barrier_misuse(t, site);
  if (B.dl.active) leave_direct();
  Thread& me = B.th[t];
  if (B.arrived == 0) {
    B.bar_site = site;
    B.bar_first = t;
  } else if (site.line != B.bar_site.line || (site.file != B.bar_site.file && !same_site(site, B.bar_site))) {
    barrier_misuse(t, site);
  }
  me.state = T_BARRIER;
  me.site = site;
  ++B.arrived;
  if (predicate) ++B.bar_count;
  unsigned w = (unsigned)t >> 5;
  B.warps[w].at_barrier |= 1u << (t & 31);
  if (B.arrived == B.live) {
    complete_barrier();
  } else if (B.warps[w].waiting) {
    check_activemask(w, -1);
  }
  switch_away(me);
  switch (op) {
    case 1: return (int)B.bar_count_result;
    case 2: return B.bar_count_result == B.bar_n_result;
    case 3: return B.bar_count_result != 0;
    default: return 0;
  }
}

// ---------------------------------------------------------------- warps
static const char* kind_name(const WarpCall& c) { return c.api ? c.api : "warp operation"; }

static void note_poison(const WarpCall& c, unsigned w, unsigned lane, unsigned src) {
  if (!G.poison_notes_left) return;
  G.poison_notes_left = false;
  note("in kernel '%s': lane %u of warp %u, block (%u,%u,%u) read lane %u in %s at %s:%u, but that lane had exited or "
       "does not exist (undefined on a GPU); the value reads as all-ones bytes (NaN / -1)",
       G.site.name, lane, w, blockIdx.x, blockIdx.y, blockIdx.z, src, kind_name(c), c.site.file, c.site.line);
}

static void compute_group(unsigned w, unsigned need) {
  Thread* th = B.th + w * 32;
  const WarpCall& c0 = *th[__builtin_ctz(need)].call;
  switch (c0.kind) {
    case WarpKind::sync:
      break;
    case WarpKind::shfl_idx:
    case WarpKind::shfl_up:
    case WarpKind::shfl_down:
    case WarpKind::shfl_xor: {
      for (unsigned m = need; m; m &= m - 1) {
        unsigned l = (unsigned)__builtin_ctz(m);
        WarpCall& c = *th[l].call;
        unsigned width = (unsigned)c.width;
        if (width == 0 || width > 32 || (width & (width - 1)))
          fatal(Fatal::runtime_error, "%s at %s:%u: width %d is not a power of two in 1..32", kind_name(c),
                c.site.file, c.site.line, c.width);
        unsigned src = shuffle_source(c.kind, l, c.param, width);
        if (src == l || (need >> src & 1u)) {
          memcpy(c.out, th[src].call->in, c.size);
        } else {
          memset(c.out, 0xff, c.size);
          note_poison(c, w, l, src);
        }
      }
      break;
    }
    case WarpKind::ballot:
    case WarpKind::any:
    case WarpKind::all: {
      unsigned bits = 0;
      for (unsigned m = need; m; m &= m - 1) {
        unsigned l = (unsigned)__builtin_ctz(m);
        if (*(const int*)th[l].call->in) bits |= 1u << l;
      }
      for (unsigned m = need; m; m &= m - 1) {
        unsigned l = (unsigned)__builtin_ctz(m);
        WarpCall& c = *th[l].call;
        unsigned r = c.kind == WarpKind::ballot ? bits : c.kind == WarpKind::any ? (bits != 0) : (bits == need);
        memcpy(c.out, &r, sizeof r);
      }
      break;
    }
    case WarpKind::match_any:
    case WarpKind::match_all: {
      bool all_equal = true;
      unsigned first = (unsigned)__builtin_ctz(need);
      for (unsigned m = need; m; m &= m - 1) {
        unsigned l = (unsigned)__builtin_ctz(m);
        if (memcmp(th[l].call->in, th[first].call->in, c0.size) != 0) all_equal = false;
      }
      for (unsigned m = need; m; m &= m - 1) {
        unsigned l = (unsigned)__builtin_ctz(m);
        WarpCall& c = *th[l].call;
        unsigned r[2];
        if (c.kind == WarpKind::match_any) {
          r[0] = 0;
          for (unsigned k = need; k; k &= k - 1) {
            unsigned o = (unsigned)__builtin_ctz(k);
            if (memcmp(th[o].call->in, c.in, c.size) == 0) r[0] |= 1u << o;
          }
          memcpy(c.out, r, sizeof(unsigned));
        } else {
          r[0] = all_equal ? need : 0;
          r[1] = all_equal;
          memcpy(c.out, r, 2 * sizeof(unsigned));
        }
      }
      break;
    }
    case WarpKind::reduce_add:
    case WarpKind::reduce_min:
    case WarpKind::reduce_max:
    case WarpKind::reduce_and:
    case WarpKind::reduce_or:
    case WarpKind::reduce_xor: {
      unsigned first = (unsigned)__builtin_ctz(need);
      unsigned acc = *(const unsigned*)th[first].call->in;
      for (unsigned m = need & (need - 1); m; m &= m - 1) {
        unsigned v = *(const unsigned*)th[__builtin_ctz(m)].call->in;
        switch (c0.kind) {
          case WarpKind::reduce_add: acc += v; break;
          case WarpKind::reduce_min:
            acc = c0.is_signed ? ((int)v < (int)acc ? v : acc) : (v < acc ? v : acc);
            break;
          case WarpKind::reduce_max:
            acc = c0.is_signed ? ((int)v > (int)acc ? v : acc) : (v > acc ? v : acc);
            break;
          case WarpKind::reduce_and: acc &= v; break;
          case WarpKind::reduce_or: acc |= v; break;
          default: acc ^= v; break;
        }
      }
      for (unsigned m = need; m; m &= m - 1) memcpy(th[__builtin_ctz(m)].call->out, &acc, sizeof acc);
      break;
    }
    case WarpKind::activemask:
      break;
  }
}

// Lanes in `need` are all waiting in the same operation: wake them. The
// running lane (if one of them) just continues.
static void release_group(unsigned w, unsigned need, int running) {
  Warp& W = B.warps[w];
  W.waiting &= ~need;
  ++W.epoch;
  if (g_order.random) {
    int lanes[32];
    unsigned k = 0;
    for (unsigned m = need; m; m &= m - 1) lanes[k++] = (int)(w * 32 + (unsigned)__builtin_ctz(m));
    shuffle(lanes, k);
    for (unsigned i = 0; i < k; ++i) {
      Thread& th = B.th[lanes[i]];
      if (lanes[i] == running) {
        th.state = T_RUNNING;
        continue;
      }
      th.state = T_READY;
      B.q.push_front(lanes[i]);
    }
    return;
  }
  for (int l = 31; l >= 0; --l) {
    if (!(need >> l & 1u)) continue;
    int t = (int)(w * 32) + l;
    if (t == running) {
      B.th[t].state = T_RUNNING;
      continue;
    }
    B.th[t].state = T_READY;
    B.q.push_front(t);
  }
}

// Can the operation lane `lane` waits in complete? Then do it.
static bool try_group(unsigned w, unsigned lane, int running) {
  Warp& W = B.warps[w];
  Thread* th = B.th + w * 32;
  const WarpCall& c = *th[lane].call;
  if (c.kind == WarpKind::activemask) return false;
  unsigned need = c.mask & W.exists & ~W.exited;
  if ((W.waiting & need) != need) return false;
  for (unsigned m = need; m; m &= m - 1) {
    const WarpCall& o = *th[__builtin_ctz(m)].call;
    if (o.kind != c.kind || o.mask != c.mask) return false;  // a lane is busy elsewhere: maybe later, else deadlock
  }
  compute_group(w, need);
  release_group(w, need, running);
  return true;
}

// __activemask(): the lanes that reach the same call together. Resolved once
// no lane of the warp can run any more (all wait somewhere or exited).
static void check_activemask(unsigned w, int running) {
  Warp& W = B.warps[w];
  if (!W.waiting) return;
  unsigned active = W.exists & ~W.exited & ~W.waiting & ~W.at_barrier;
  if (active) return;
  Thread* th = B.th + w * 32;
  unsigned am = 0;
  for (unsigned m = W.waiting; m; m &= m - 1) {
    unsigned l = (unsigned)__builtin_ctz(m);
    if (th[l].call->kind == WarpKind::activemask) am |= 1u << l;
  }
  while (am) {
    unsigned l = (unsigned)__builtin_ctz(am);
    Site s = th[l].call->site;
    unsigned group = 0;
    for (unsigned m = am; m; m &= m - 1) {
      unsigned o = (unsigned)__builtin_ctz(m);
      if (same_site(th[o].call->site, s)) group |= 1u << o;
    }
    for (unsigned m = group; m; m &= m - 1) memcpy(th[__builtin_ctz(m)].call->out, &group, sizeof group);
    release_group(w, group, running);
    am &= ~group;
  }
}

void warp_collective(WarpCall& call) {
  if (!G.active) fatal(Fatal::runtime_error, "%s called outside a kernel (%s:%u)", kind_name(call), call.site.file, call.site.line);
  int t = B.cur;
  unsigned lane = (unsigned)t & 31u, w = (unsigned)t >> 5;
  if (call.kind != WarpKind::activemask && !(call.mask >> lane & 1u))
    fatal(Fatal::runtime_error,
          "%s at %s:%u: lane %u called it with mask 0x%08x, which does not include the lane itself (undefined "
          "behaviour on a GPU)",
          kind_name(call), call.site.file, call.site.line, lane, call.mask);
  if (B.dl.active) leave_direct();
  Thread& me = B.th[t];
  me.state = T_WARP;
  me.call = &call;
  me.site = call.site;
  B.warps[w].waiting |= 1u << lane;
  if (try_group(w, lane, t)) return;
  check_activemask(w, t);
  if (me.state == T_RUNNING) return;
  switch_away(me);
}

static void finish_thread(int t) {
  Thread& th = B.th[t];
  th.state = T_DONE;
  if (--B.live == 0) L.done.fetch_add(1, std::memory_order_relaxed);
  unsigned w = (unsigned)t >> 5;
  Warp& W = B.warps[w];
  W.exited |= 1u << (t & 31);
  if (W.waiting) {
    // An exit may complete operations that waited for this lane.
    for (unsigned m = W.waiting; m; m &= m - 1) {
      unsigned l = (unsigned)__builtin_ctz(m);
      if (W.waiting >> l & 1u) try_group(w, l, -1);
    }
    check_activemask(w, -1);
  }
  if (B.arrived && B.arrived == B.live) complete_barrier();
}

bool race_position(RacePosition& p) {
  if (!G.active || B.cur < 0) return false;
  p.tid = B.cur;
  p.warp = (unsigned)B.cur >> 5;
  p.bgen = B.bgen;
  p.wepoch = B.warps[p.warp].epoch;
  p.block = B.serial;
  return true;
}

unsigned race_warp_epoch(unsigned warp) { return B.warps[warp].epoch; }

void race_thread_name(int tid, char* buf, size_t n) {
  uint3 t = B.th[tid].idx;
  snprintf(buf, n, "thread (%u,%u,%u)", t.x, t.y, t.z);
}

unsigned current_lane() { return (unsigned)B.cur & 31u; }
unsigned current_linear_tid() { return (unsigned)B.cur; }

// ---------------------------------------------------------------- deadlock
static void report_deadlock() {
  // Nothing can run, yet threads wait. Describe each group of waiters.
  char msg[3000];
  size_t used = 0;
  auto add = [&](const char* fmt, auto... args) {
    if (used < sizeof msg) used += (size_t)snprintf(msg + used, sizeof msg - used, fmt, args...);
  };
  add("deadlock in block (%u,%u,%u): ", blockIdx.x, blockIdx.y, blockIdx.z);
  unsigned described = 0;
  for (unsigned w = 0; w < B.nwarps && described < 4; ++w) {
    Warp& W = B.warps[w];
    Thread* th = B.th + w * 32;
    unsigned todo = W.waiting;
    while (todo && described < 4) {
      unsigned l = (unsigned)__builtin_ctz(todo);
      const WarpCall& c = *th[l].call;
      unsigned same = 0;
      for (unsigned m = todo; m; m &= m - 1) {
        unsigned o = (unsigned)__builtin_ctz(m);
        const WarpCall& oc = *th[o].call;
        if (oc.kind == c.kind && oc.mask == c.mask && same_site(oc.site, c.site)) same |= 1u << o;
      }
      todo &= ~same;
      char lanes[128], missing[128];
      lane_list(lanes, sizeof lanes, same);
      unsigned need = c.kind == WarpKind::activemask ? 0 : (c.mask & W.exists & ~W.exited & ~same);
      lane_list(missing, sizeof missing, need);
      add("%slanes %s of warp %u wait in %s(mask 0x%08x) at %s:%u", described ? "; " : "", lanes, w, kind_name(c),
          c.mask, c.site.file, c.site.line);
      if (need) {
        unsigned o = (unsigned)__builtin_ctz(need);
        const Thread& ot = th[o];
        if (ot.state == T_BARRIER)
          add(" for lanes %s, which wait at __syncthreads() at %s:%u (a warp operation in divergent code)", missing,
              ot.site.file, ot.site.line);
        else if (ot.state == T_WARP)
          add(" for lanes %s, which wait in %s(mask 0x%08x) at %s:%u", missing, kind_name(*ot.call), ot.call->mask,
              ot.call->site.file, ot.call->site.line);
        else
          add(" for lanes %s", missing);
      }
      ++described;
    }
  }
  if (!described && B.arrived) {
    add("%u threads wait at __syncthreads() at %s:%u while the others spin", B.arrived, B.bar_site.file,
        B.bar_site.line);
  } else if (B.arrived) {
    add("; %u threads wait at __syncthreads() at %s:%u", B.arrived, B.bar_site.file, B.bar_site.line);
  }
  B.cur = -1;
  fatal(Fatal::runtime_error, "%s", msg);
}

// ---------------------------------------------------------------- loops
__thread unsigned loop_ticks = 0;

void loop_yield() {
  loop_ticks = 0;
  if (!G.active || B.cur < 0) return;  // host code
  if (B.dl.active) {
    if (B.dl.pos + 1 == B.nthreads) return;  // the last thread: nobody else to run
    leave_direct();
  }
  if (B.q.empty()) return;  // nobody else to run
  Thread& me = B.th[B.cur];
  me.state = T_READY;
  B.q.push_back(B.cur);
  switch_away(me);
  loop_ticks = 0;
}

// ---------------------------------------------------------------- spinning
static __thread const void* g_spin_addr = nullptr;
static __thread int g_spin_thread = -1;
static __thread unsigned long g_spin_count = 0;
static __thread bool g_stuck = false;               // counted in L.stuck
static __thread unsigned long long g_stuck_done = 0;  // L.done when this worker got stuck

static void unstick() {
  if (!g_stuck) return;
  g_stuck = false;
  L.stuck.fetch_sub(1);
}

void note_progress() {
  g_spin_count = 0;
  unstick();
}

// With other workers: a block spinning on memory may wait for a block that
// runs elsewhere. Keep waiting while any worker still does something else
// (or blocks finish); when every worker that holds a block only spins,
// nothing can end the wait.
static bool others_may_end_spin() {
  unsigned long long done = L.done.load(std::memory_order_relaxed);
  if (!g_stuck) {
    g_stuck = true;
    g_stuck_done = done;
    L.stuck.fetch_add(1);
  } else if (done != g_stuck_done) {
    g_stuck_done = done;
    g_spin_count = 0;
    return true;
  }
  if (L.stuck.load() < L.busy.load()) {
    g_spin_count = 1ul << 23;  // check again after a while
    sched_yield();
    return true;
  }
  return false;
}

void note_spin(const void* addr) {
  if (!G.active) return;
  if (addr != g_spin_addr || B.cur != g_spin_thread) {
    g_spin_addr = addr;
    g_spin_thread = B.cur;
    g_spin_count = 0;
    unstick();
  }
  if (++g_spin_count % 64) return;
  if (B.dl.active && B.dl.pos + 1 < B.nthreads) leave_direct();
  if (!B.q.empty()) {
    // Let the others run: one of them may be what this thread waits for.
    Thread& me = B.th[B.cur];
    me.state = T_READY;
    B.q.push_back(B.cur);
    int self = B.cur;
    switch_away(me);
    g_spin_addr = addr;
    g_spin_thread = self;
    return;
  }
  if (g_spin_count < (1ul << 24)) return;
  if (L.workers > 1 && others_may_end_spin()) return;
  if (G.nblocks > 1 && L.workers > 1)
    fatal(Fatal::unsupported,
          "busy-wait on memory at %p that no running thread can change: every worker holds a block that waits for "
          "another thread block, which cannot start before one of them finishes (inter-block synchronisation across "
          "more blocks than the %u workers run at once)",
          addr, L.workers);
  if (G.nblocks > 1)
    fatal(Fatal::unsupported,
          "busy-wait on memory at %p that no thread of this block can change: it waits for another thread block, but "
          "the CPU backend runs blocks one at a time in this order (inter-block synchronisation)",
          addr);
  fatal(Fatal::runtime_error, "deadlock: busy-wait on memory at %p that no other thread can change", addr);
}

void unsupported_grid_sync(Site site) {
  fatal(Fatal::unsupported,
        "grid-wide synchronisation (cooperative_groups grid_group::sync at %s:%u) needs all blocks resident at once; "
        "the CPU backend runs blocks one at a time",
        site.file, site.line);
}

// ---------------------------------------------------------------- volatile
// Lanes of one warp that exchange data through volatile shared memory with no
// __syncwarp (or other warp/block synchronisation) in between rely on the
// lockstep execution of pre-Volta GPUs.
struct VolatileEntry {
  const volatile void* addr;
  unsigned long long block;
  unsigned warp, epoch;
  int writer;
  unsigned readers;
  unsigned long long value;  // last value written (first 8 bytes)
};
static __thread VolatileEntry g_vol[4096];

void note_volatile_access(const volatile void* addr, unsigned size, const void* written) {
  if (!G.active) return;
  bool is_write = written != nullptr;
  unsigned long long value = 0;
  if (is_write) memcpy(&value, written, size < 8 ? size : 8);
  int t = B.cur;
  unsigned w = (unsigned)t >> 5, lane = (unsigned)t & 31u;
  Warp& W = B.warps[w];
  uintptr_t key = (uintptr_t)addr;
  VolatileEntry& e = g_vol[(key >> 2 ^ key >> 14) & 4095];
  if (e.addr != addr || e.block != B.serial || e.warp != w || e.epoch != W.epoch) {
    e.addr = addr;
    e.block = B.serial;
    e.warp = w;
    e.epoch = W.epoch;
    e.writer = -1;
    e.readers = 0;
  }
  int other = -1;
  if (is_write) {
    unsigned others = e.readers & ~(1u << lane);
    if (others)
      other = __builtin_ctz(others);
    else if (e.writer >= 0 && e.writer != (int)lane && e.value != value)
      other = e.writer;  // lanes storing the same value (a flag) is a benign race
    e.writer = (int)lane;
    e.value = value;
    g_spin_count = 0;
  } else {
    if (e.writer >= 0 && e.writer != (int)lane) other = e.writer;
    e.readers |= 1u << lane;
  }
  if (other >= 0) {
    fatal(Fatal::warp_sync,
          "lanes %d and %u of warp %u exchange data through volatile memory at %p with no __syncwarp() in between "
          "(%s by lane %u); the code relies on implicit warp-synchronous (lockstep) execution, which GPUs since Volta "
          "do not guarantee",
          other, lane, w, (const void*)addr, is_write ? "write" : "read", lane);
  }
}

}  // namespace rt
}  // namespace cuset
