// Which path each kernel took (block loop or fibers), for the run record.
//
// At exit, one line per kernel on the diagnostics channel only (not stderr, where
// the program's own output goes): `CUSET-CPU: path: kernel 'k': block loop, 4096 of
// 4096 blocks in 1 launch` (`block loop with barrier regions` for a kernel split at its barriers). CUSET_CPU_REPORT_PATHS=1 writes them to stderr instead
// (for runs outside the harness). The backend reads them (diagnostics.kernel_paths).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "internal.h"

namespace cuset {
namespace rt {

namespace {
struct PathCount {
  unsigned long long launches = 0, blocks = 0, loop_blocks = 0, barrier_blocks = 0;
};
std::mutex& paths_mu = *new std::mutex;
std::map<std::string, PathCount>& paths = *new std::map<std::string, PathCount>;

void report_paths() {
  std::lock_guard<std::mutex> lk(paths_mu);
  const char* e = getenv("CUSET_CPU_REPORT_PATHS");
  bool to_stderr = e && strcmp(e, "1") == 0;
  for (const auto& [name, c] : paths) {
    char line[600];
    const char* how = c.loop_blocks == 0                 ? "fibers"
                      : c.loop_blocks != c.blocks         ? "block loop and fibers"
                      : c.barrier_blocks == c.loop_blocks ? "block loop with barrier regions"
                                                          : "block loop";
    int n = snprintf(line, sizeof line, "CUSET-CPU: path: kernel '%.300s': %s, %llu of %llu blocks as a loop in %llu launch%s\n",
                     name.c_str(), how, c.loop_blocks, c.blocks, c.launches, c.launches == 1 ? "" : "es");
    if (n <= 0) continue;
    size_t len = n < (int)sizeof line ? (size_t)n : sizeof line - 1;
    if (to_stderr)
      diag_write(line, len);
    else
      diag_channel_write(line, len);
  }
}
}  // namespace

void record_launch_path(const char* name, unsigned long long blocks, unsigned long long loop_blocks,
                        unsigned long long barrier_blocks) {
  std::lock_guard<std::mutex> lk(paths_mu);
  if (paths.empty()) atexit(report_paths);
  PathCount& c = paths[name ? name : "?"];
  ++c.launches;
  c.blocks += blocks;
  c.loop_blocks += loop_blocks;
  c.barrier_blocks += barrier_blocks;
}

}  // namespace rt
}  // namespace cuset
