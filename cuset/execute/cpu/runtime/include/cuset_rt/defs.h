// CUDA qualifiers and version macros for the cuset CPU runtime.
//
// Host and device code are compiled together by g++, so the execution-space
// qualifiers vanish. __CUDA_ARCH__ stays undefined: code guarded by it is
// device-only on a real toolchain, and the usual guards
// (`#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 600`) then pick the path
// that uses the built-in functions this runtime provides.
#pragma once

#define __CUDACC__ 1
#define __NVCC__ 1
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 8
#define __CUDACC_VER_BUILD__ 0
#define CUDART_VERSION 12080
#define CUDA_VERSION 12080
#define __CUDART_API_VERSION 12080

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __device_builtin__
#define __cudart_builtin__
#define __device_builtin_texture_type__
#define __device_builtin_surface_type__
#define CUDARTAPI
#define CUDART_CB
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __maxnreg__(n)
#define __cluster_dims__(...)

// Static shared memory: one copy per worker OS thread (thread_local), reused by
// the blocks that worker runs one at a time. The section lets the runtime find
// (and poison) it between blocks.
// The source rewriter turns `__shared__` into this; the macro covers the rest.
#define __cuset_shared_attr__ thread_local __attribute__((section("cuset_smem")))
#define __shared__ static __cuset_shared_attr__
