// Barriers, memory fences and warp-level primitives.
//
// Every warp primitive is a warp-scoped barrier over the lanes in its mask:
// divergent code that leaves lanes of the mask behind deadlocks (reported),
// lanes that already exited read back as all-ones bytes.
#pragma once

inline void __syncthreads(CUSET_SITE_PARAM) { ::cuset::rt::block_barrier(0, 0, cuset_site); }
inline int __syncthreads_count(int predicate, CUSET_SITE_PARAM) {
  return ::cuset::rt::block_barrier(1, predicate, cuset_site);
}
inline int __syncthreads_and(int predicate, CUSET_SITE_PARAM) {
  return ::cuset::rt::block_barrier(2, predicate, cuset_site);
}
inline int __syncthreads_or(int predicate, CUSET_SITE_PARAM) {
  return ::cuset::rt::block_barrier(3, predicate, cuset_site);
}

// Blocks on other workers are other OS threads: device- and system-scope
// fences are real fences; a block's threads share one OS thread.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

namespace cuset {
namespace rt {
template <class T>
inline T warp_op(WarpKind kind, unsigned mask, const T& value, int param, int width, const char* api, Site site) {
  alignas(T) unsigned char out[sizeof(T)];
  WarpCall c{kind, false, mask, width, param, &value, out, (unsigned)sizeof(T), api, site};
  warp_collective(c);
  T r;
  memcpy((void*)&r, out, sizeof(T));
  return r;
}
inline unsigned warp_pred(WarpKind kind, unsigned mask, int predicate, const char* api, Site site) {
  unsigned out = 0;
  WarpCall c{kind, false, mask, 32, 0, &predicate, &out, sizeof(int), api, site};
  warp_collective(c);
  return out;
}
template <class T>
inline unsigned warp_reduce(WarpKind kind, bool is_signed, unsigned mask, T value, const char* api, Site site) {
  unsigned in = (unsigned)value, out = 0;
  WarpCall c{kind, is_signed, mask, 32, 0, &in, &out, sizeof(unsigned), api, site};
  warp_collective(c);
  return out;
}
}  // namespace rt
}  // namespace cuset

inline void __syncwarp(unsigned mask = 0xffffffffu, CUSET_SITE_PARAM) {
  ::cuset::rt::warp_pred(::cuset::rt::WarpKind::sync, mask, 0, "__syncwarp", cuset_site);
}

template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_op(::cuset::rt::WarpKind::shfl_idx, mask, var, srcLane, width, "__shfl_sync", cuset_site);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_op(::cuset::rt::WarpKind::shfl_up, mask, var, (int)delta, width, "__shfl_up_sync",
                              cuset_site);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_op(::cuset::rt::WarpKind::shfl_down, mask, var, (int)delta, width, "__shfl_down_sync",
                              cuset_site);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_op(::cuset::rt::WarpKind::shfl_xor, mask, var, laneMask, width, "__shfl_xor_sync",
                              cuset_site);
}

inline unsigned __ballot_sync(unsigned mask, int predicate, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_pred(::cuset::rt::WarpKind::ballot, mask, predicate, "__ballot_sync", cuset_site);
}
inline int __any_sync(unsigned mask, int predicate, CUSET_SITE_PARAM) {
  return (int)::cuset::rt::warp_pred(::cuset::rt::WarpKind::any, mask, predicate, "__any_sync", cuset_site);
}
inline int __all_sync(unsigned mask, int predicate, CUSET_SITE_PARAM) {
  return (int)::cuset::rt::warp_pred(::cuset::rt::WarpKind::all, mask, predicate, "__all_sync", cuset_site);
}
inline int __uni_sync(unsigned mask, int predicate, CUSET_SITE_PARAM) {
  unsigned b = ::cuset::rt::warp_pred(::cuset::rt::WarpKind::ballot, mask, predicate != 0, "__uni_sync", cuset_site);
  return b == 0 || b == mask;
}
// The lanes of the warp that arrive at this call together.
inline unsigned __activemask(CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_pred(::cuset::rt::WarpKind::activemask, 0, 0, "__activemask", cuset_site);
}

template <class T>
inline unsigned __match_any_sync(unsigned mask, T value, CUSET_SITE_PARAM) {
  unsigned out = 0;
  ::cuset::rt::WarpCall c{::cuset::rt::WarpKind::match_any, false, mask, 32, 0, &value, &out, (unsigned)sizeof(T),
                          "__match_any_sync", cuset_site};
  ::cuset::rt::warp_collective(c);
  return out;
}
template <class T>
inline unsigned __match_all_sync(unsigned mask, T value, int* pred, CUSET_SITE_PARAM) {
  unsigned out[2] = {0, 0};
  ::cuset::rt::WarpCall c{::cuset::rt::WarpKind::match_all, false, mask, 32, 0, &value, out, (unsigned)sizeof(T),
                          "__match_all_sync", cuset_site};
  ::cuset::rt::warp_collective(c);
  if (pred) *pred = (int)out[1];
  return out[0];
}

inline unsigned __reduce_add_sync(unsigned mask, unsigned value, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_add, false, mask, value, "__reduce_add_sync",
                                  cuset_site);
}
inline int __reduce_add_sync(unsigned mask, int value, CUSET_SITE_PARAM) {
  return (int)::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_add, true, mask, value, "__reduce_add_sync",
                                       cuset_site);
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned value, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_min, false, mask, value, "__reduce_min_sync",
                                  cuset_site);
}
inline int __reduce_min_sync(unsigned mask, int value, CUSET_SITE_PARAM) {
  return (int)::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_min, true, mask, value, "__reduce_min_sync",
                                       cuset_site);
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned value, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_max, false, mask, value, "__reduce_max_sync",
                                  cuset_site);
}
inline int __reduce_max_sync(unsigned mask, int value, CUSET_SITE_PARAM) {
  return (int)::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_max, true, mask, value, "__reduce_max_sync",
                                       cuset_site);
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned value, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_and, false, mask, value, "__reduce_and_sync",
                                  cuset_site);
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned value, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_or, false, mask, value, "__reduce_or_sync",
                                  cuset_site);
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned value, CUSET_SITE_PARAM) {
  return ::cuset::rt::warp_reduce(::cuset::rt::WarpKind::reduce_xor, false, mask, value, "__reduce_xor_sync",
                                  cuset_site);
}

namespace cuset {
namespace rt {
// Lanes below the calling one (PTX %lanemask_lt), for cooperative groups.
inline unsigned lanemask_lt() { return (1u << current_lane()) - 1u; }
}  // namespace rt
}  // namespace cuset

inline void __nanosleep(unsigned ns) {
  (void)ns;
  static int token;
  ::cuset::rt::note_spin(&token);
}
