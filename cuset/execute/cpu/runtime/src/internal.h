// Declarations shared by the runtime's own sources (not seen by user code).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" void cuset_ctx_swap(void** save_sp, void* new_sp);
extern "C" [[noreturn]] void cuset_ctx_jump(void* new_sp);

namespace cuset {
namespace rt {

struct Stack {
  char* map;  // start of the mapping (guard page)
  char* lo;   // lowest usable byte
  char* hi;   // one past the highest usable byte
  char* top;  // where contexts start: below hi by a per-stack "colour" (see make_context)
};
Stack* acquire_stack();
void release_stack(Stack* s);
void* make_context(Stack* s, void (*entry)());
size_t stacks_allocated();
const Stack* stack_guard_containing(const void* addr);

// Writes one `CUSET-CPU: ...` report line (see diag.cpp): to the harness's
// diagnostics channel when it gave one, and to stderr for people reading the log.
// CUSET_RT_PRIVATE: the library build makes these local symbols (objcopy
// --localize-hidden on the combined runtime object, toolchain._build_archive), so a
// program that declares them itself gets an undefined reference, not the channel.
#define CUSET_RT_PRIVATE __attribute__((visibility("hidden")))
CUSET_RT_PRIVATE void diag_write(const char* line, size_t n);
// The harness's diagnostics channel only (not stderr); nothing without one.
CUSET_RT_PRIVATE void diag_channel_write(const char* line, size_t n);
// A launch of kernel `name` ran `loop_blocks` of its `blocks` as block loops (paths.cpp).
CUSET_RT_PRIVATE void record_launch_path(const char* name, unsigned long long blocks, unsigned long long loop_blocks,
                                         unsigned long long barrier_blocks);
// printf-style wrapper of diag_write for one line.
CUSET_RT_PRIVATE void diag_printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Process exit codes of the fatal statuses (the marker line is authoritative).
constexpr int kExitRuntimeError = 90;
constexpr int kExitUnsupported = 91;
constexpr int kExitWarpSync = 92;
constexpr int kExitRace = 94;

// Where the running CUDA thread is, for the race checker (racecheck.cpp).
struct RacePosition {
  int tid;                  // linear thread index in the block
  unsigned warp;
  unsigned bgen;            // completed __syncthreads of the block
  unsigned wepoch;          // synchronisations of the thread's warp
  unsigned long long block; // serial number of the running block
};
bool race_position(RacePosition& p);
unsigned race_warp_epoch(unsigned warp);
void race_thread_name(int tid, char* buf, size_t n);
bool describe_device_address(const void* addr, char* buf, size_t n);
bool in_device_region(const void* addr);
// The running worker's static and dynamic shared memory (thread-locals).
bool in_shared_memory(const void* addr);

// "kernel 'k' (launched at f.cu:12), block (0,0,0), thread (3,0,0)" or "" on the host.
void describe_position(char* buf, size_t n);
bool in_kernel();
const char* current_kernel_name();

// Thread orders: forward, random with a seed (CUSET_CPU_ORDER=random:<seed>),
// or parallel (random, with blocks on several workers: parallel:<seed>).
struct Order {
  bool random;
  uint64_t seed;
  bool parallel;
};
const Order& order();
uint64_t next_random();

// Device memory bookkeeping (memory.cpp).
void memory_init();
bool is_device_pointer(const void* p);
// Bytes from p to the end of its device allocation, 0 if p is not device memory.
size_t device_bytes_after(const void* p);
// The live allocation holding p: its start and the bytes of its pages (with the slack page).
bool device_allocation_range(const void* p, uintptr_t& base, size_t& mapped);
// Order proof (order_proof.cpp): around every kernel launch.
void proof_launch_begin();
void proof_launch_end(const char* name);
// Whether a and b may point into one allocation (true unless both are in two different ones).
bool same_device_allocation(const void* a, const void* b);
// Host code may not touch device memory; kernels and runtime copies may.
void device_access_begin();
void device_access_end();
// Explains a fault address inside the device region, or returns false.
bool explain_device_fault(const void* addr, char* buf, size_t n);
bool host_access_check_enabled();

// Launch bookkeeping shared with api.cpp.
void set_last_error(int err);
void record_launch_failure(int err);
int max_dynamic_smem_optin_set();

}  // namespace rt
}  // namespace cuset
