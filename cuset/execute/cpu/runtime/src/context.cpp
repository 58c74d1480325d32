// User-space context switch and fiber stacks.
//
// cuset_ctx_swap saves the callee-saved registers on the current stack,
// stores the stack pointer in *save and continues on new_sp; cuset_ctx_jump
// does the same without saving (the current context is abandoned). A new
// context is a stack prepared so that the first switch "returns" into its
// entry function. The floating-point control words are not switched: CUDA
// code has no way to change them, and skipping them keeps a switch ~10 ns.
#include "cuset_cpu.h"
#include "internal.h"

#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#if defined(__x86_64__)
asm(R"(
    .text
    .globl cuset_ctx_swap
    .type cuset_ctx_swap,@function
    .p2align 4
cuset_ctx_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuset_ctx_swap, .-cuset_ctx_swap

    .globl cuset_ctx_jump
    .type cuset_ctx_jump,@function
    .p2align 4
cuset_ctx_jump:
    movq %rdi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuset_ctx_jump, .-cuset_ctx_jump
    .section .note.GNU-stack,"",@progbits
)");
#elif defined(__aarch64__)
// Callee-saved: x19-x28, fp (x29), lr (x30), d8-d15. 160-byte frame.
asm(R"(
    .text
    .globl cuset_ctx_swap
    .type cuset_ctx_swap,%function
    .p2align 4
cuset_ctx_swap:
    sub sp, sp, #160
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mov x2, sp
    str x2, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #160
    ret
    .size cuset_ctx_swap, .-cuset_ctx_swap

    .globl cuset_ctx_jump
    .type cuset_ctx_jump,%function
    .p2align 4
cuset_ctx_jump:
    mov sp, x0
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #160
    ret
    .size cuset_ctx_jump, .-cuset_ctx_jump
    .section .note.GNU-stack,"",%progbits
)");
#else
#error "cuset CPU runtime: the fiber context switch exists for x86-64 and aarch64 only"
#endif

namespace cuset {
namespace rt {

// Free stacks per worker OS thread (a suspended fiber never changes worker);
// the list of all stacks is shared, for the fault handler's diagnosis.
static thread_local std::vector<Stack*> g_free_stacks;
static std::vector<Stack*> g_all_stacks;
static std::mutex g_all_stacks_mu;
static size_t g_page = 0;

static size_t stack_bytes() {
  static size_t bytes = 0;
  if (!bytes) {
    size_t kib = 256;  // CUDA allows large per-thread local arrays; pages are touched lazily
    if (const char* e = getenv("CUSET_CPU_STACK_KB")) {
      long v = atol(e);
      if (v >= 16 && v <= (1 << 20)) kib = (size_t)v;
    }
    bytes = kib * 1024;
  }
  return bytes;
}

Stack* acquire_stack() {
  if (!g_free_stacks.empty()) {
    Stack* s = g_free_stacks.back();
    g_free_stacks.pop_back();
    return s;
  }
  if (!g_page) g_page = (size_t)sysconf(_SC_PAGESIZE);
  size_t usable = stack_bytes();
  size_t total = usable + g_page;  // one guard page below the stack
  void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) fatal(Fatal::runtime_error, "out of memory for thread stacks (%zu fibers live)", g_all_stacks.size());
  mprotect(mem, g_page, PROT_NONE);
  // Stacks are a multiple of the page size apart, so their tops would all fall
  // into the same cache sets; starting each a different number of cache lines
  // below the end spreads the hot frames of many fibers over the cache.
  std::lock_guard<std::mutex> lk(g_all_stacks_mu);
  size_t colour = (g_all_stacks.size() * 7 % 64) * 64;
  Stack* s = new Stack{(char*)mem, (char*)mem + g_page, (char*)mem + total, (char*)mem + total - colour};
  g_all_stacks.push_back(s);
  return s;
}

void release_stack(Stack* s) { g_free_stacks.push_back(s); }

size_t stacks_allocated() { return g_all_stacks.size(); }

const Stack* stack_guard_containing(const void* addr) {
  for (Stack* s : g_all_stacks)
    if ((const char*)addr >= s->map && (const char*)addr < s->lo) return s;
  return nullptr;
}

void* make_context(Stack* s, void (*entry)()) {
  void** sp = (void**)s->top;
#if defined(__x86_64__)
  *--sp = nullptr;         // entry's return address: never used, keeps rsp % 16 == 8 at entry
  *--sp = (void*)entry;    // popped by `ret`
  for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp rbx r12-r15
#elif defined(__aarch64__)
  sp -= 20;                // 160-byte frame
  for (int i = 0; i < 20; ++i) sp[i] = nullptr;
  sp[11] = (void*)entry;   // x30 (lr): `ret` jumps there
#endif
  return sp;
}

}  // namespace rt
}  // namespace cuset
