// Atomic functions. Blocks of the `parallel` order run on several OS threads,
// so every read-modify-write is a real (sequentially consistent) atomic:
// integer add/sub/and/or/xor/exchange map to the hardware's fetch-and-op, the
// rest to a compare-and-swap loop on the object's bytes.
// A failing atomicCAS is how spin locks wait: it lets other threads run and
// reports a spin that can never end.
#pragma once

namespace cuset {
namespace rt {
// *address = f(*address), atomically; returns the old value.
template <class T, class F>
CUSET_NOT_RACECHECKED __attribute__((always_inline)) inline T atomic_update(T* address, F f) {
  T old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  T desired;
  do desired = f(old);
  while (!__atomic_compare_exchange(address, &old, &desired, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  return old;
}
}  // namespace rt
}  // namespace cuset

// The empty asm hides from the optimiser that the operand is the caller's variable: GCC 12.2
// (Debian 12.2.0-14) at -O1 and up compiles `if (c) v += atomicAdd(p, v);` on unsigned and
// unsigned long long to `lock xadd v, (p); add v, v`, adding the old value to itself because
// xadd overwrote the register holding v (tests/execute/cpu/test_runtime.py
// test_an_atomic_whose_operand_is_also_its_result, found by the differential fuzzer).
#define CUSET_ATOMIC_FETCH(name, T, builtin)                                            \
  CUSET_NOT_RACECHECKED inline T name(T* address, T val) {                             \
    __asm__("" : "+r"(val));                                                           \
    return builtin(address, val, __ATOMIC_SEQ_CST);                                    \
  }                                                                                    \
  inline T name##_block(T* address, T val) { return name(address, val); }             \
  inline T name##_system(T* address, T val) { return name(address, val); }

#define CUSET_ATOMIC_RMW(name, T, expr)                                                               \
  CUSET_NOT_RACECHECKED inline T name(T* address, T val) {                                            \
    return ::cuset::rt::atomic_update(address, [val](T old) -> T { return (expr); });                 \
  }                                                                                                   \
  inline T name##_block(T* address, T val) { return name(address, val); }  \
  inline T name##_system(T* address, T val) { return name(address, val); }

// Integer addition wraps as on a GPU (computed unsigned: no signed overflow).
CUSET_ATOMIC_FETCH(atomicAdd, int, __atomic_fetch_add)
CUSET_ATOMIC_FETCH(atomicAdd, unsigned int, __atomic_fetch_add)
CUSET_ATOMIC_FETCH(atomicAdd, unsigned long long, __atomic_fetch_add)
CUSET_ATOMIC_RMW(atomicAdd, float, old + val)
CUSET_ATOMIC_RMW(atomicAdd, double, old + val)
CUSET_ATOMIC_FETCH(atomicSub, int, __atomic_fetch_sub)
CUSET_ATOMIC_FETCH(atomicSub, unsigned int, __atomic_fetch_sub)
CUSET_ATOMIC_FETCH(atomicExch, int, __atomic_exchange_n)
CUSET_ATOMIC_FETCH(atomicExch, unsigned int, __atomic_exchange_n)
CUSET_ATOMIC_FETCH(atomicExch, unsigned long long, __atomic_exchange_n)
CUSET_ATOMIC_RMW(atomicExch, float, val)
CUSET_ATOMIC_RMW(atomicMin, int, val < old ? val : old)
CUSET_ATOMIC_RMW(atomicMin, unsigned int, val < old ? val : old)
CUSET_ATOMIC_RMW(atomicMin, long long, val < old ? val : old)
CUSET_ATOMIC_RMW(atomicMin, unsigned long long, val < old ? val : old)
CUSET_ATOMIC_RMW(atomicMax, int, val > old ? val : old)
CUSET_ATOMIC_RMW(atomicMax, unsigned int, val > old ? val : old)
CUSET_ATOMIC_RMW(atomicMax, long long, val > old ? val : old)
CUSET_ATOMIC_RMW(atomicMax, unsigned long long, val > old ? val : old)
CUSET_ATOMIC_FETCH(atomicAnd, int, __atomic_fetch_and)
CUSET_ATOMIC_FETCH(atomicAnd, unsigned int, __atomic_fetch_and)
CUSET_ATOMIC_FETCH(atomicAnd, unsigned long long, __atomic_fetch_and)
CUSET_ATOMIC_FETCH(atomicOr, int, __atomic_fetch_or)
CUSET_ATOMIC_FETCH(atomicOr, unsigned int, __atomic_fetch_or)
CUSET_ATOMIC_FETCH(atomicOr, unsigned long long, __atomic_fetch_or)
CUSET_ATOMIC_FETCH(atomicXor, int, __atomic_fetch_xor)
CUSET_ATOMIC_FETCH(atomicXor, unsigned int, __atomic_fetch_xor)
CUSET_ATOMIC_FETCH(atomicXor, unsigned long long, __atomic_fetch_xor)
// ((old >= val) ? 0 : (old+1)) and (((old == 0) || (old > val)) ? val : (old-1))
CUSET_ATOMIC_RMW(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
CUSET_ATOMIC_RMW(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#undef CUSET_ATOMIC_RMW
#undef CUSET_ATOMIC_FETCH

#define CUSET_ATOMIC_CAS(T)                                                                   \
  CUSET_NOT_RACECHECKED inline T atomicCAS(T* address, T compare, T val) {                    \
    T old = compare;                                                                          \
    if (!__atomic_compare_exchange_n(address, &old, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) \
      ::cuset::rt::note_spin(address);                                                        \
    return old;                                                                               \
  }                                                                                           \
  inline T atomicCAS_block(T* address, T compare, T val) { return atomicCAS(address, compare, val); } \
  inline T atomicCAS_system(T* address, T compare, T val) { return atomicCAS(address, compare, val); }

CUSET_ATOMIC_CAS(int)
CUSET_ATOMIC_CAS(unsigned int)
CUSET_ATOMIC_CAS(unsigned long long)
CUSET_ATOMIC_CAS(unsigned short)
#undef CUSET_ATOMIC_CAS

// long long / unsigned long and friends: CUDA declares the 64-bit forms on
// unsigned long long only; `long long` atomicAdd does not exist there either.
