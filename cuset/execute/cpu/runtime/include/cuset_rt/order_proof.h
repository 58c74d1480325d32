// Checked pointers of the order proof (cuset/execute/cpu/order_proof.py, src/order_proof.cpp).
//
// In a kernel the rewriter found simple enough, each parameter the kernel writes
// becomes `auto out = ::cuset::rt::proof_wrap(cuset_pp_out);` and `out[i]` reports
// the element's address to the runtime before it is read or written. The report
// costs a load and a predictable branch while no proof runs (the random and
// parallel orders, or a launch already known not to be independent).
#pragma once

#include <initializer_list>

namespace cuset {
namespace rt {

// A launch of an instrumented kernel is being checked (forward order, CUSET_CPU_ORDER_PROOF=1).
extern bool proof_active;
// The launch's pointers: those written through checked pointers, and the read-only ones.
void proof_enter_slow(std::initializer_list<const void*> written, std::initializer_list<const void*> read);
// One access of `size` bytes at `p` through a written parameter.
void proof_access(const void* p, unsigned long size);

__attribute__((always_inline)) inline void proof_enter(std::initializer_list<const void*> written,
                                                       std::initializer_list<const void*> read) {
  if (__builtin_expect(proof_active, 0)) proof_enter_slow(written, read);
}

template <class T>
struct proof_ptr {
  T* p;
  // Every access counts as a write: the reference may be written or read.
  template <class I>
  __attribute__((always_inline)) T& operator[](I i) const {
    T& r = p[i];
    if (__builtin_expect(proof_active, 0)) proof_access(__builtin_addressof(r), sizeof(T));
    return r;
  }
  // For the block-loop variant's allocation checks (`(const void*)(out)`).
  explicit operator const void*() const { return p; }
};

template <class T>
__attribute__((always_inline)) inline proof_ptr<T> proof_wrap(T* p) {
  return proof_ptr<T>{p};
}

}  // namespace rt
}  // namespace cuset
