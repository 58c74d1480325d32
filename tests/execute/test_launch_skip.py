"""strict_kernels on the GPU: the preloaded library skips the candidate's own launches and
no one else's (cuset/execute/kernelbench/launch_skip.c).

No GPU here, so the CUDA runtime is a stand-in: a library named and versioned as
libcudart.so.13 whose launch functions count their calls. The launching code is real nvcc
output (`<<<...>>>` stubs and an explicit cudaLaunchKernel), linked against the runtime
dynamically as torch's extensions are; a host program loads it with RTLD_LOCAL, as Python
imports an extension."""

import os
import shutil
import subprocess

import pytest

from cuset.execute.kernelbench import launch_skip

pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")]

FAKE_CUDART = r"""
#include <stddef.h>
typedef struct { unsigned x, y, z; } dim3_t;
static int launches;
int fake_launches(void) { return launches; }
int __cudaPushCallConfiguration(dim3_t g, dim3_t b, size_t s, void* st) { return 0; }
int __cudaPopCallConfiguration(dim3_t* g, dim3_t* b, size_t* s, void** st) { return 0; }
int __cudaGetKernel(void** k, const void* f) { *k = (void*)f; return 0; }
int __cudaLaunchKernel(void* k, dim3_t g, dim3_t b, void** a, size_t s, void* st) { launches++; return 0; }
int __cudaLaunchKernel_ptsz(void* k, dim3_t g, dim3_t b, void** a, size_t s, void* st) { launches++; return 0; }
int cudaLaunchKernel(const void* f, dim3_t g, dim3_t b, void** a, size_t s, void* st) { launches++; return 0; }
void** __cudaRegisterFatBinary(void* fb) { static void* h; return &h; }
void __cudaRegisterFatBinaryEnd(void** h) {}
void __cudaUnregisterFatBinary(void** h) {}
void __cudaRegisterFunction(void** h, const char* f, char* d, const char* n, int t, void* a, void* b, void* c,
                            void* e, int* w) {}
int __cudaInitModule(void** h) { return 1; }
int cudaGetLastError(void) { return 0; }
"""

KERNELS = r"""
__global__ void add1(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }
extern "C" int launch_%(name)s(float* x, int n) {
  add1<<<(n + 127) / 128, 128>>>(x, n);                               // the stub nvcc writes
  void* args[] = {&x, &n};
  return (int)cudaLaunchKernel((const void*)add1, dim3(1), dim3(128), args, 0, 0);   // called by hand
}
"""

HOST = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  const char* replace = getenv("THEN_REPLACE");   /* moved over the last path once it is loaded */
  /* loaded locally, as Python loads torch's libraries: the preloaded library finds it all the same */
  int (*count)(void) = (int (*)(void))dlsym(dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL), "fake_launches");
  for (int i = 1; i < argc; i++) {
    void* h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
    if (replace && i == argc - 1 && rename(replace, argv[i]) != 0) { perror("rename"); return 3; }
    int (*launch)(float*, int) = (int (*)(float*, int))dlsym(h, i == 1 ? "launch_own" : "launch_torch");
    int before = count();
    int rc = launch(0, 256);
    printf("%d %d\n", rc, count() - before);
  }
  return 0;
}
"""


def _sh(argv, **kw):
    out = subprocess.run(argv, capture_output=True, text=True, **kw)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The stand-in runtime, the host, the candidate's extension in a run dir and torch's
    library outside it."""
    d = tmp_path_factory.mktemp("launch-skip")
    (d / "fake.c").write_text(FAKE_CUDART)
    (d / "fake.map").write_text("libcudart.so.13 { global: *; };\n")
    rt = d / "rt"
    rt.mkdir()
    _sh(["gcc", "-shared", "-fPIC", "-o", str(rt / "libcudart.so.13"), str(d / "fake.c"),
         f"-Wl,--version-script={d / 'fake.map'}", "-Wl,-soname,libcudart.so.13"])
    os.symlink("libcudart.so.13", rt / "libcudart.so")
    run, lib = d / "run", d / "torch-lib"
    run.mkdir()
    lib.mkdir()
    for name, where in (("own", run / "ext"), ("torch", lib)):
        where.mkdir(exist_ok=True)
        (d / f"{name}.cu").write_text(KERNELS % {"name": name})
        # linked against the real runtime's name and versions; the stand-in is loaded in its place
        _sh(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o", str(where / f"lib{name}.so"),
             str(d / f"{name}.cu")])
    (d / "host.c").write_text(HOST)
    _sh(["gcc", "-o", str(d / "host"), str(d / "host.c"), "-ldl"])
    return {"dir": d, "rt": rt, "run": run, "own": run / "ext" / "libown.so", "torch": lib / "libtorch.so",
            "shim": launch_skip.library(d / "cache")}


def _launches(built, cwd, *libs, preload=True, then_replace=None) -> list[tuple[int, int]]:
    """(return code, launches that reached the runtime) per library, each asked for two launches."""
    env = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": str(built["rt"])}
    if then_replace is not None:
        env["THEN_REPLACE"] = str(then_replace)
    if preload:
        env["LD_PRELOAD"] = str(built["shim"])
    out = _sh([str(built["dir"] / "host"), *map(str, libs)], cwd=cwd, env=env)
    return [tuple(map(int, line.split())) for line in out.splitlines()]


def test_the_candidates_launches_are_skipped_and_torchs_run(built):
    assert _launches(built, built["run"], built["own"], built["torch"], preload=False) == [(0, 2), (0, 2)]
    # the run dir is the working directory: both of the extension's launches return success, unlaunched
    assert _launches(built, built["run"], built["own"], built["torch"]) == [(0, 0), (0, 2)]


def test_only_code_under_the_run_dir_is_the_candidates(built):
    # started elsewhere, the same extension is no longer under the run dir: its launches run
    # (what the library cannot attribute runs, so an answer relying on it fails strict_kernels)
    elsewhere = built["dir"] / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    assert _launches(built, elsewhere, built["own"], built["torch"]) == [(0, 2), (0, 2)]
    # what decides is where the object really is: a link into the run dir is the candidate's,
    # a link in the run dir to torch's library is torch's
    (elsewhere / "alias.so").unlink(missing_ok=True)
    os.symlink(built["own"], elsewhere / "alias.so")
    (built["run"] / "borrowed.so").unlink(missing_ok=True)
    os.symlink(built["torch"], built["run"] / "borrowed.so")
    assert _launches(built, built["run"], elsewhere / "alias.so", built["run"] / "borrowed.so") == [(0, 0), (0, 2)]


def test_a_link_swapped_after_loading_changes_nothing(built):
    """torch's library loaded through a link in the run dir, the link then replaced by a file of
    the candidate's: what is mapped at the caller is still torch's, and its launches run."""
    swapped = built["run"] / "swapped.so"
    swapped.unlink(missing_ok=True)
    os.symlink(built["torch"], swapped)
    own_copy = built["run"] / "own-copy.so"
    shutil.copy(built["own"], own_copy)
    # the host renames own-copy.so over swapped.so after loading swapped.so (torch's code)
    out = _launches(built, built["run"], built["own"], swapped, then_replace=own_copy)
    assert out == [(0, 0), (0, 2)] and swapped.is_file() and not swapped.is_symlink()


def test_the_library_is_built_once_per_source(built, tmp_path):
    first = launch_skip.library(tmp_path)
    assert first.is_file() and first.stat().st_mode & 0o777 == 0o644
    assert first.parent.stat().st_mode & 0o777 == 0o755
    mtime = first.stat().st_mtime_ns
    assert launch_skip.library(tmp_path) == first and first.stat().st_mtime_ns == mtime


def test_the_library_follows_the_cache_root_and_is_rebuilt_when_removed(built, tmp_path, monkeypatch):
    monkeypatch.setenv("CUSET_CACHE", str(tmp_path / "one"))
    one = launch_skip.library()
    monkeypatch.setenv("CUSET_CACHE", str(tmp_path / "two"))
    two = launch_skip.library()
    assert one.is_relative_to(tmp_path / "one") and two.is_relative_to(tmp_path / "two")
    shutil.rmtree(two.parent)
    assert launch_skip.library() == two and two.is_file()
