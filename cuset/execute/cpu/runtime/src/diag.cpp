// The channel for the runtime's own reports (`CUSET-CPU: <word>: <detail>`).
//
// The harness passes an open file in CUSET_CPU_DIAG_FD and believes only what
// arrives there: a program printing marker lines on stderr (to pass as
// `unsupported` instead of `wrong`) is not believed. Before main the runtime moves
// the descriptor to a high number, closes the original and removes the variable,
// so the program finds neither by the usual means. (A program that searches its
// own process for it could still write there: it runs in the same address space.)
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

#include "internal.h"

namespace cuset {
namespace rt {

static int g_diag_fd = -1;

__attribute__((constructor(101))) static void open_diag_channel() {
  const char* v = getenv("CUSET_CPU_DIAG_FD");
  if (!v || !*v) return;
  int fd = atoi(v);
  unsetenv("CUSET_CPU_DIAG_FD");
  if (fd <= 2 || fcntl(fd, F_GETFD) == -1) return;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 100);
  if (moved >= 0) {
    close(fd);
    g_diag_fd = moved;
  } else {
    g_diag_fd = fd;
  }
}

void diag_write(const char* line, size_t n) {
  ssize_t ignored = write(2, line, n);
  if (g_diag_fd >= 0) ignored = write(g_diag_fd, line, n);
  (void)ignored;
}

// The harness's channel only (nothing when there is none): records, not reports.
void diag_channel_write(const char* line, size_t n) {
  if (g_diag_fd < 0) return;
  ssize_t ignored = write(g_diag_fd, line, n);
  (void)ignored;
}

void diag_printf(const char* fmt, ...) {
  char line[1200];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  diag_write(line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

}  // namespace rt
}  // namespace cuset
