// Kernel launches. The rewriter turns
//     kernel<<<grid, block, smem, stream>>>(a, b)
// into
//     ::cuset::kernel_call("kernel", __FILE__, __LINE__,
//         [&](auto... cuset_a) { kernel(cuset_a...); },
//         ::cuset::rt::LaunchConfig(grid, block, smem, stream))(a, b)
// so overloads and templates (`k<T, 4>`, or deduced from the arguments)
// resolve exactly as in CUDA. The arguments are evaluated once on the host;
// every CUDA thread calls the kernel with its own copy of them.
#pragma once

namespace cuset {

namespace detail {
template <class Fn, class Tuple>
struct KernelPack {
  Fn fn;
  Tuple args;
};

template <class Pack>
void run_one_thread(void* p) {
  Pack& pack = *static_cast<Pack*>(p);
  std::apply(pack.fn, pack.args);
}

// Direct mode's loop over a block's threads, with the kernel inlined (see core.h).
template <class Pack>
int run_threads_direct(void* p, rt::DirectLoop& d) {
  Pack& pack = *static_cast<Pack*>(p);
  for (; d.pos < d.n; ++d.pos) {
    int t = d.order ? d.order[d.pos] : (int)d.pos;
    *d.cur = t;
    threadIdx = d.idx[t];
    rt::loop_ticks = 0;
    std::apply(pack.fn, pack.args);
    if (__builtin_expect(rt::block_loop_ran, 0)) {  // that call ran the whole block
      rt::block_loop_ran = false;
      d.pos = d.n;
      return -1;
    }
    if (!d.active) return t;
  }
  return -1;
}

// Race-check builds pass none (the scheduler's own loop runs instead): this one
// would be instrumented like the kernel, and its writes of the scheduler's state
// would read as races.
#if CUSET_CPU_RACECHECK
template <class Pack>
constexpr rt::DirectFn direct_loop = nullptr;
#else
template <class Pack>
constexpr rt::DirectFn direct_loop = &run_threads_direct<Pack>;
#endif
}  // namespace detail

template <class Fn, class... A>
inline void launch_kernel(const char* name, const char* file, int line, Fn&& fn, rt::LaunchConfig cfg, A&&... args) {
  using Tuple = std::tuple<std::decay_t<A>...>;
  using Pack = detail::KernelPack<std::decay_t<Fn>, Tuple>;
  Pack pack{std::forward<Fn>(fn), Tuple(std::forward<A>(args)...)};
  if (!rt::begin_launch(rt::KernelSite{name, file, line}, cfg)) return;
  rt::run_grid(&detail::run_one_thread<Pack>, detail::direct_loop<Pack>, &pack);
}

template <class Fn>
struct KernelCall {
  const char* name;
  const char* file;
  int line;
  Fn fn;
  rt::LaunchConfig cfg;
  template <class... A>
  void operator()(A&&... args) const {
    launch_kernel(name, file, line, fn, cfg, std::forward<A>(args)...);
  }
};

template <class Fn>
inline KernelCall<std::decay_t<Fn>> kernel_call(const char* name, const char* file, int line, Fn&& fn,
                                                rt::LaunchConfig cfg) {
  return KernelCall<std::decay_t<Fn>>{name, file, line, std::forward<Fn>(fn), cfg};
}

namespace rt {
template <class... P, size_t... I>
void launch_from_args(void (*fn)(P...), const KernelSite& site, const LaunchConfig& cfg, void** args,
                      std::index_sequence<I...>) {
  using Tuple = std::tuple<std::decay_t<P>...>;
  auto call = [fn](auto... a) { fn(a...); };
  using Pack = detail::KernelPack<decltype(call), Tuple>;
  Pack pack{call, Tuple(*static_cast<std::decay_t<P>*>(args[I])...)};
  (void)args;
  if (!begin_launch(site, cfg)) return;
  run_grid(&detail::run_one_thread<Pack>, detail::direct_loop<Pack>, &pack);
}

// cudaLaunchKernel((void*)kernel, ...) gives no argument types; kernels whose
// address the rewriter registered (non-template __global__ definitions) can
// still be launched that way.
using ErasedLauncher = void (*)(const void* fn, const KernelSite& site, const LaunchConfig& cfg, void** args);
bool register_kernel(const void* fn, const char* name, ErasedLauncher launcher);
const char* registered_kernel_name(const void* fn);
cudaError_t launch_registered(const void* fn, const LaunchConfig& cfg, void** args);

template <class... P>
void erased_launch(const void* fn, const KernelSite& site, const LaunchConfig& cfg, void** args) {
  launch_from_args(reinterpret_cast<void (*)(P...)>(const_cast<void*>(fn)), site, cfg, args,
                   std::index_sequence_for<P...>{});
}

template <class... P>
inline bool register_kernel_fn(void (*fn)(P...), const char* name) {
  return register_kernel(reinterpret_cast<const void*>(fn), name, &erased_launch<P...>);
}
}  // namespace rt

}  // namespace cuset

// C++ API: the kernel's type gives the argument types.
template <class... P>
static inline cudaError_t cudaLaunchKernel(void (*func)(P...), dim3 gridDim_, dim3 blockDim_, void** args,
                                           size_t sharedMem = 0, cudaStream_t stream = 0) {
  cuset::rt::LaunchConfig cfg(gridDim_, blockDim_, sharedMem, stream);
  const char* name = cuset::rt::registered_kernel_name((const void*)func);
  cuset::rt::launch_from_args(func, cuset::rt::KernelSite{name ? name : "cudaLaunchKernel", "", 0}, cfg, args,
                              std::index_sequence_for<P...>{});
  return cudaPeekAtLastError();
}
template <class... P>
static inline cudaError_t cudaLaunchCooperativeKernel(void (*func)(P...), dim3 gridDim_, dim3 blockDim_, void** args,
                                                      size_t sharedMem = 0, cudaStream_t stream = 0) {
  return cudaLaunchKernel(func, gridDim_, blockDim_, args, sharedMem, stream);
}
// C API: a kernel cast to void*.
cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim_, dim3 blockDim_, void** args, size_t sharedMem = 0,
                             cudaStream_t stream = 0);
cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim_, dim3 blockDim_, void** args,
                                        size_t sharedMem = 0, cudaStream_t stream = 0);
