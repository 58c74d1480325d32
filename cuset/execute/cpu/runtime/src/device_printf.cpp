// printf in device code, held back as a GPU holds it back.
//
// A GPU writes a kernel's printf output into a buffer that the host prints only at
// certain calls (CUDA C++ Programming Guide, "Formatted Output"): the start of a
// kernel launch, cudaDeviceSynchronize / cudaStreamSynchronize / cudaEventSynchronize,
// a blocking cudaMemcpy*, cudaDeviceReset, before a stream callback; not when the
// program exits. So host output printed between a launch and the next of those comes
// first, and a program that never synchronises after its last kernel prints none of
// that kernel's lines. The executable's own `printf` (this one; g++ runs with
// -fno-builtin-printf so that no call becomes puts) formats device calls into the
// buffer and passes host calls to vprintf.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "cuset_cpu.h"
#include "internal.h"

namespace cuset {
namespace rt {
namespace {
std::mutex g_mu;          // blocks on several workers print at once (parallel order)
// formatted, not yet printed (never destroyed: read by the exit-time report below)
std::string& g_pending = *new std::string;
// Beyond this the lines are dropped and counted: a GPU's buffer is circular (1 MiB by
// default) and keeps the newest; holding more only costs memory.
constexpr size_t kMaxPending = 64u << 20;
size_t g_dropped = 0;
}  // namespace

void flush_device_output(bool wait) {
  std::unique_lock<std::mutex> lk(g_mu, std::defer_lock);
  if (wait) lk.lock();
  else if (!lk.try_lock()) return;  // a fatal report from a fault while printing: skip, never deadlock
  if (g_pending.empty()) return;
  fwrite(g_pending.data(), 1, g_pending.size(), stdout);
  g_pending.clear();
}

static void device_vprintf(const char* fmt, va_list ap, int* written) {
  char small[1024];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  *written = n;
  if (n < 0) {
    va_end(again);
    return;
  }
  std::string line;
  if ((size_t)n < sizeof small) {
    line.assign(small, (size_t)n);
  } else {
    line.resize((size_t)n + 1);
    vsnprintf(&line[0], line.size(), fmt, again);
    line.resize((size_t)n);
  }
  va_end(again);
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_pending.size() + line.size() > kMaxPending) {
    g_dropped += line.size();
    return;
  }
  g_pending += line;  // one call's output stays together, as on a GPU
}

__attribute__((destructor(101))) static void report_unflushed_output() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_pending.empty())
    note("%zu bytes of device printf output were never printed: no cudaDeviceSynchronize, blocking cudaMemcpy or "
         "other flushing call followed the kernel, and a GPU does not print its buffer when the program exits",
         g_pending.size());
  if (g_dropped)
    note("%zu bytes of device printf output were dropped (more than %zu MiB between two flushing calls)", g_dropped,
         kMaxPending >> 20);
}

}  // namespace rt
}  // namespace cuset

extern "C" int printf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n;
  if (cuset::rt::in_kernel())
    cuset::rt::device_vprintf(fmt, ap, &n);
  else
    n = vprintf(fmt, ap);
  va_end(ap);
  return n;
}
