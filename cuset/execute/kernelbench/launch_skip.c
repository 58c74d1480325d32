/* strict_kernels on the GPU: the candidate's own kernel launches, skipped.
 *
 * Preloaded (LD_PRELOAD) into one candidate run by the parent (cuset/execute/kernelbench/
 * launch_skip.py). Every CUDA launch entry point a program can reach through the dynamic
 * linker is defined here: a launch called from code in a shared object under the run's
 * working directory (the run dir, where the candidate's extensions are placed and built)
 * returns success without launching; every other launch (torch's, cuBLAS's...) goes on to
 * the real function. The parent then compares the outputs: an answer that still passes
 * computed them without its kernels.
 *
 * Why the caller decides: CUDA 13's launch stubs pass a kernel handle, not the host stub's
 * address, so the kernel's identity does not say where it came from; the call site does,
 * through the file mapped there (own_launch).
 * What this cannot see only makes the check stricter, never looser: a launch it does not
 * skip (the driver API called through a handle of its own, a CUDA graph, a library loaded
 * from outside the run dir) runs, so an answer relying on it still passes here and fails
 * strict_kernels. Skipping torch's own launches would do the opposite, which is why only
 * code mapped from a file under the run dir counts (torch's libraries are read-only and
 * outside it, and a read-only file cannot be moved into it). One read of /proc/self/maps a
 * launch: slower than a cache, and only this one run of the answer pays it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_root[PATH_MAX];
static size_t g_root_len;

__attribute__((constructor)) static void launch_skip_init(void) {
  /* Runs before any of the program's own code: the working directory is the run dir. */
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) && realpath(cwd, g_root)) g_root_len = strlen(g_root);
}

/* Was this launch called from code mapped from a file under the run dir? The kernel's own
 * record of the mapping decides (/proc/self/maps: the file's path in this mount namespace as
 * it is, links resolved), read at every launch: a name the loader was given, a link swapped
 * after loading, an address range unmapped and reused, none of them changes what the kernel
 * says is mapped at the caller's address now. */
static int own_launch(const void* caller) {
  if (!g_root_len || !caller) return 0;
  FILE* maps = fopen("/proc/self/maps", "re");
  if (!maps) return 0;
  char line[PATH_MAX + 256];
  uintptr_t at = (uintptr_t)caller;
  int own = 0;
  while (fgets(line, sizeof line, maps)) {
    unsigned long lo, hi;
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &path_at) < 2 || at < lo || at >= hi) continue;
    char* path = path_at > 0 ? line + path_at : line + strlen(line);
    path[strcspn(path, "\n")] = 0;
    own = strncmp(path, g_root, g_root_len) == 0 && path[g_root_len] == '/';
    break;
  }
  fclose(maps);
  return own;
}

/* The real function: the next definition in the global scope, else the one of a loaded
 * library whose name starts with `lib` (libcudart and libcuda may be loaded locally). */
struct find { const char* name; const char* lib; void* fn; };

static int find_in(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct find* f = data;
  const char* slash = strrchr(info->dlpi_name, '/');
  const char* base = slash ? slash + 1 : info->dlpi_name;
  if (!*info->dlpi_name || strncmp(base, f->lib, strlen(f->lib)) != 0) return 0;
  void* h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0;
  f->fn = dlsym(h, f->name);
  dlclose(h);
  return f->fn != 0;
}

static void* real(const char* name, const char* lib) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn) return fn;
  struct find f = {name, lib, 0};
  dl_iterate_phdr(find_in, &f);
  return f.fn;
}

typedef struct { unsigned x, y, z; } dim3_t;
typedef int status_t;          /* cudaError_t and CUresult: 0 is success */
enum { NOT_FOUND = 500 };      /* cudaErrorSymbolNotFound / CUDA_ERROR_NOT_FOUND */

#define CALLER __builtin_extract_return_addr(__builtin_return_address(0))
#define FORWARD(lib, name, type, ...)                                   \
  do {                                                                   \
    static type fn;                                                      \
    if (own_launch(CALLER)) return 0;                                    \
    if (!fn) fn = (type)real(name, lib);                                 \
    return fn ? fn(__VA_ARGS__) : NOT_FOUND;                             \
  } while (0)

/* the runtime API: launches by host stub (CUDA 12 and explicit calls) and by handle (CUDA 13 stubs) */
typedef status_t (*launch_t)(const void*, dim3_t, dim3_t, void**, size_t, void*);
#define RUNTIME_LAUNCH(name)                                                                        \
  __attribute__((noinline)) status_t name(const void* f, dim3_t g, dim3_t b, void** a, size_t s, void* st) { \
    FORWARD("libcudart", #name, launch_t, f, g, b, a, s, st);                                       \
  }
RUNTIME_LAUNCH(cudaLaunchKernel)
RUNTIME_LAUNCH(cudaLaunchKernel_ptsz)
RUNTIME_LAUNCH(__cudaLaunchKernel)
RUNTIME_LAUNCH(__cudaLaunchKernel_ptsz)
RUNTIME_LAUNCH(cudaLaunchCooperativeKernel)
RUNTIME_LAUNCH(cudaLaunchCooperativeKernel_ptsz)

typedef status_t (*launch_ex_t)(const void*, const void*, void**);
#define RUNTIME_LAUNCH_EX(name)                                                              \
  __attribute__((noinline)) status_t name(const void* config, const void* f, void** a) {     \
    FORWARD("libcudart", #name, launch_ex_t, config, f, a);                                  \
  }
RUNTIME_LAUNCH_EX(cudaLaunchKernelExC)
RUNTIME_LAUNCH_EX(cudaLaunchKernelExC_ptsz)

/* the driver API */
typedef status_t (*cu_launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                                void**, void**);
#define DRIVER_LAUNCH(name)                                                                              \
  __attribute__((noinline)) status_t name(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,   \
                                          unsigned by, unsigned bz, unsigned s, void* st, void** p, void** e) { \
    FORWARD("libcuda.so", #name, cu_launch_t, f, gx, gy, gz, bx, by, bz, s, st, p, e);                   \
  }
DRIVER_LAUNCH(cuLaunchKernel)
DRIVER_LAUNCH(cuLaunchKernel_ptsz)

typedef status_t (*cu_coop_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                              void**);
#define DRIVER_COOPERATIVE(name)                                                                         \
  __attribute__((noinline)) status_t name(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,   \
                                          unsigned by, unsigned bz, unsigned s, void* st, void** p) {    \
    FORWARD("libcuda.so", #name, cu_coop_t, f, gx, gy, gz, bx, by, bz, s, st, p);                        \
  }
DRIVER_COOPERATIVE(cuLaunchCooperativeKernel)
DRIVER_COOPERATIVE(cuLaunchCooperativeKernel_ptsz)

typedef status_t (*cu_launch_ex_t)(const void*, void*, void**, void**);
#define DRIVER_LAUNCH_EX(name)                                                                  \
  __attribute__((noinline)) status_t name(const void* config, void* f, void** p, void** e) {    \
    FORWARD("libcuda.so", #name, cu_launch_ex_t, config, f, p, e);                              \
  }
DRIVER_LAUNCH_EX(cuLaunchKernelEx)
DRIVER_LAUNCH_EX(cuLaunchKernelEx_ptsz)
