// __half / __half2 (cuda_fp16.h) and __nv_bfloat16 / __nv_bfloat162
// (cuda_bf16.h). Values are IEEE binary16 / bfloat16 bit patterns; every
// operation is computed in double and rounded once to the narrow type, which
// gives the correctly rounded result a GPU computes.
#pragma once

struct __half_raw {
  unsigned short x;
};
struct __half2_raw {
  unsigned short x, y;
};

namespace cuset {
namespace rt {
// The compiler's IEEE binary16 type: _Float16 on x86-64, __fp16 on Arm.
#if defined(__aarch64__) || defined(__arm__)
typedef __fp16 f16_t;
#else
typedef _Float16 f16_t;
#endif
inline unsigned short f16_bits(double v) {
  f16_t h = (f16_t)v;
  unsigned short b;
  memcpy(&b, &h, 2);
  return b;
}
inline float f16_value(unsigned short b) {
  f16_t h;
  memcpy(&h, &b, 2);
  return (float)h;
}
inline unsigned short f16_bits_mode(double v, int mode) {
  return with_rounding(mode, [&] { return f16_bits(v); });
}
}  // namespace rt
}  // namespace cuset

struct __half {
  unsigned short __x;
  __half() = default;
  constexpr __half(const __half_raw& r) : __x(r.x) {}
  __half(float f) : __x(::cuset::rt::f16_bits(f)) {}
  __half(double d) : __x(::cuset::rt::f16_bits(d)) {}
  __half(int v) : __x(::cuset::rt::f16_bits((double)v)) {}
  __half(unsigned int v) : __x(::cuset::rt::f16_bits((double)v)) {}
  __half(short v) : __x(::cuset::rt::f16_bits((double)v)) {}
  __half(unsigned short v) : __x(::cuset::rt::f16_bits((double)v)) {}
  __half(long v) : __x(::cuset::rt::f16_bits((double)v)) {}
  __half(unsigned long v) : __x(::cuset::rt::f16_bits((double)v)) {}
  __half(long long v) : __x(::cuset::rt::f16_bits((double)v)) {}
  __half(unsigned long long v) : __x(::cuset::rt::f16_bits((double)v)) {}
  __half& operator=(const __half_raw& r) {
    __x = r.x;
    return *this;
  }
  operator __half_raw() const { return __half_raw{__x}; }
  operator float() const { return ::cuset::rt::f16_value(__x); }
};
typedef __half half;

struct __attribute__((aligned(4))) __half2 {
  __half x, y;
  __half2() = default;
  constexpr __half2(const __half& a, const __half& b) : x(a), y(b) {}
  __half2(const __half2_raw& r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
  operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};
typedef __half2 half2;

namespace cuset {
namespace rt {
inline double hd(__half h) { return (double)(float)h; }
inline __half mkh(double v) {
  __half r;
  r.__x = f16_bits(v);
  return r;
}
}  // namespace rt
}  // namespace cuset

// ---- conversions ----
inline __half __float2half(float f) { return ::cuset::rt::mkh(f); }
inline __half __float2half_rn(float f) { return ::cuset::rt::mkh(f); }
inline __half __double2half(double d) { return ::cuset::rt::mkh(d); }
#define CUSET_H_MODE(name, mode)                   \
  inline __half name(float f) {                    \
    __half r;                                      \
    r.__x = ::cuset::rt::f16_bits_mode(f, mode);   \
    return r;                                      \
  }
CUSET_H_MODE(__float2half_rz, FE_TOWARDZERO)
CUSET_H_MODE(__float2half_rd, FE_DOWNWARD)
CUSET_H_MODE(__float2half_ru, FE_UPWARD)
#undef CUSET_H_MODE
inline float __half2float(__half h) { return (float)h; }
inline __half __int2half_rn(int i) { return ::cuset::rt::mkh((double)i); }
inline __half __uint2half_rn(unsigned int i) { return ::cuset::rt::mkh((double)i); }
inline __half __short2half_rn(short i) { return ::cuset::rt::mkh((double)i); }
inline __half __ushort2half_rn(unsigned short i) { return ::cuset::rt::mkh((double)i); }
inline __half __ll2half_rn(long long i) { return ::cuset::rt::mkh((double)i); }
inline __half __ull2half_rn(unsigned long long i) { return ::cuset::rt::mkh((double)i); }
inline int __half2int_rn(__half h) { return __float2int_rn((float)h); }
inline int __half2int_rz(__half h) { return __float2int_rz((float)h); }
inline int __half2int_rd(__half h) { return __float2int_rd((float)h); }
inline int __half2int_ru(__half h) { return __float2int_ru((float)h); }
inline unsigned int __half2uint_rn(__half h) { return __float2uint_rn((float)h); }
inline unsigned int __half2uint_rz(__half h) { return __float2uint_rz((float)h); }
inline short __half2short_rn(__half h) { return ::cuset::rt::saturate_to<short>(nearbyint(::cuset::rt::hd(h))); }
inline short __half2short_rz(__half h) { return ::cuset::rt::saturate_to<short>(trunc(::cuset::rt::hd(h))); }
inline long long __half2ll_rn(__half h) { return __float2ll_rn((float)h); }
inline long long __half2ll_rz(__half h) { return __float2ll_rz((float)h); }
inline short __half_as_short(__half h) { return (short)h.__x; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __short_as_half(short s) { return __half(__half_raw{(unsigned short)s}); }
inline __half __ushort_as_half(unsigned short s) { return __half(__half_raw{s}); }
inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __half2half2(__half a) { return __half2(a, a); }
inline __half2 __float2half2_rn(float f) { return __half2(__float2half(f), __float2half(f)); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2(__float2half(a), __float2half(b)); }
inline __half2 __float22half2_rn(float2 f) { return __half2(__float2half(f.x), __float2half(f.y)); }
inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
inline float __low2float(__half2 h) { return (float)h.x; }
inline float __high2float(__half2 h) { return (float)h.y; }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __half2 __low2half2(__half2 h) { return __half2(h.x, h.x); }
inline __half2 __high2half2(__half2 h) { return __half2(h.y, h.y); }
inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
inline __half2 __lowhigh2highlow(__half2 h) { return __half2(h.y, h.x); }

// ---- arithmetic ----
#define CUSET_H(x) ::cuset::rt::hd(x)
#define CUSET_MKH(v) ::cuset::rt::mkh(v)
inline __half __hadd(__half a, __half b) { return CUSET_MKH(CUSET_H(a) + CUSET_H(b)); }
inline __half __hsub(__half a, __half b) { return CUSET_MKH(CUSET_H(a) - CUSET_H(b)); }
inline __half __hmul(__half a, __half b) { return CUSET_MKH(CUSET_H(a) * CUSET_H(b)); }
inline __half __hdiv(__half a, __half b) { return CUSET_MKH(CUSET_H(a) / CUSET_H(b)); }
inline __half __hfma(__half a, __half b, __half c) { return CUSET_MKH(fma(CUSET_H(a), CUSET_H(b), CUSET_H(c))); }
inline __half __hneg(__half a) { return __half(__half_raw{(unsigned short)(a.__x ^ 0x8000u)}); }
inline __half __habs(__half a) { return __half(__half_raw{(unsigned short)(a.__x & 0x7fffu)}); }
inline double cuset_sat01(double v) { return v != v ? 0.0 : v < 0 ? 0.0 : v > 1 ? 1.0 : v; }
inline __half __hadd_sat(__half a, __half b) { return CUSET_MKH(cuset_sat01(CUSET_H(__hadd(a, b)))); }
inline __half __hsub_sat(__half a, __half b) { return CUSET_MKH(cuset_sat01(CUSET_H(__hsub(a, b)))); }
inline __half __hmul_sat(__half a, __half b) { return CUSET_MKH(cuset_sat01(CUSET_H(__hmul(a, b)))); }
inline __half __hfma_sat(__half a, __half b, __half c) { return CUSET_MKH(cuset_sat01(CUSET_H(__hfma(a, b, c)))); }
inline __half __hfma_relu(__half a, __half b, __half c) {
  double v = CUSET_H(__hfma(a, b, c));
  return CUSET_MKH(v < 0 ? 0.0 : v);
}
inline bool __hisnan(__half a) { return (a.__x & 0x7c00u) == 0x7c00u && (a.__x & 0x3ffu); }
inline int __hisinf(__half a) { return a.__x == 0x7c00u ? 1 : a.__x == 0xfc00u ? -1 : 0; }
inline __half __hmax(__half a, __half b) {
  if (__hisnan(a)) return b;
  if (__hisnan(b)) return a;
  return CUSET_H(a) < CUSET_H(b) ? b : a;
}
inline __half __hmin(__half a, __half b) {
  if (__hisnan(a)) return b;
  if (__hisnan(b)) return a;
  return CUSET_H(b) < CUSET_H(a) ? b : a;
}
inline __half __hmax_nan(__half a, __half b) { return __hisnan(a) ? a : __hisnan(b) ? b : __hmax(a, b); }
inline __half __hmin_nan(__half a, __half b) { return __hisnan(a) ? a : __hisnan(b) ? b : __hmin(a, b); }
inline bool __heq(__half a, __half b) { return CUSET_H(a) == CUSET_H(b); }
inline bool __hne(__half a, __half b) { return CUSET_H(a) != CUSET_H(b) && !__hisnan(a) && !__hisnan(b); }
inline bool __hlt(__half a, __half b) { return CUSET_H(a) < CUSET_H(b); }
inline bool __hle(__half a, __half b) { return CUSET_H(a) <= CUSET_H(b); }
inline bool __hgt(__half a, __half b) { return CUSET_H(a) > CUSET_H(b); }
inline bool __hge(__half a, __half b) { return CUSET_H(a) >= CUSET_H(b); }
inline bool __hequ(__half a, __half b) { return !(CUSET_H(a) != CUSET_H(b)); }
inline bool __hneu(__half a, __half b) { return CUSET_H(a) != CUSET_H(b); }
inline bool __hltu(__half a, __half b) { return !(CUSET_H(a) >= CUSET_H(b)); }
inline bool __hleu(__half a, __half b) { return !(CUSET_H(a) > CUSET_H(b)); }
inline bool __hgtu(__half a, __half b) { return !(CUSET_H(a) <= CUSET_H(b)); }
inline bool __hgeu(__half a, __half b) { return !(CUSET_H(a) < CUSET_H(b)); }

#define CUSET_HMATH(name, expr)                     \
  inline __half name(__half a) {                    \
    float x = (float)a;                             \
    return __float2half(expr);                      \
  }
CUSET_HMATH(hsqrt, sqrtf(x))
CUSET_HMATH(hrsqrt, 1.0f / sqrtf(x))
CUSET_HMATH(hrcp, 1.0f / x)
CUSET_HMATH(hexp, expf(x))
CUSET_HMATH(hexp2, exp2f(x))
CUSET_HMATH(hexp10, exp10f(x))
CUSET_HMATH(hlog, logf(x))
CUSET_HMATH(hlog2, log2f(x))
CUSET_HMATH(hlog10, log10f(x))
CUSET_HMATH(hsin, sinf(x))
CUSET_HMATH(hcos, cosf(x))
CUSET_HMATH(htanh, tanhf(x))
CUSET_HMATH(hfloor, floorf(x))
CUSET_HMATH(hceil, ceilf(x))
CUSET_HMATH(htrunc, truncf(x))
CUSET_HMATH(hrint, rintf(x))
#undef CUSET_HMATH

inline __half operator+(const __half& a, const __half& b) { return __hadd(a, b); }
inline __half operator-(const __half& a, const __half& b) { return __hsub(a, b); }
inline __half operator*(const __half& a, const __half& b) { return __hmul(a, b); }
inline __half operator/(const __half& a, const __half& b) { return __hdiv(a, b); }
inline __half& operator+=(__half& a, const __half& b) { return a = __hadd(a, b); }
inline __half& operator-=(__half& a, const __half& b) { return a = __hsub(a, b); }
inline __half& operator*=(__half& a, const __half& b) { return a = __hmul(a, b); }
inline __half& operator/=(__half& a, const __half& b) { return a = __hdiv(a, b); }
inline __half operator+(const __half& a) { return a; }
inline __half operator-(const __half& a) { return __hneg(a); }
inline __half& operator++(__half& a) { return a = __hadd(a, __half(1.0f)); }
inline __half& operator--(__half& a) { return a = __hsub(a, __half(1.0f)); }
inline __half operator++(__half& a, int) {
  __half r = a;
  ++a;
  return r;
}
inline __half operator--(__half& a, int) {
  __half r = a;
  --a;
  return r;
}
inline bool operator==(const __half& a, const __half& b) { return __heq(a, b); }
inline bool operator!=(const __half& a, const __half& b) { return __hneu(a, b); }
inline bool operator<(const __half& a, const __half& b) { return __hlt(a, b); }
inline bool operator<=(const __half& a, const __half& b) { return __hle(a, b); }
inline bool operator>(const __half& a, const __half& b) { return __hgt(a, b); }
inline bool operator>=(const __half& a, const __half& b) { return __hge(a, b); }

// ---- half2: element-wise ----
#define CUSET_H2(name, op)                                                                  \
  inline __half2 name(__half2 a, __half2 b) { return __half2(op(a.x, b.x), op(a.y, b.y)); }
CUSET_H2(__hadd2, __hadd)
CUSET_H2(__hsub2, __hsub)
CUSET_H2(__hmul2, __hmul)
CUSET_H2(__h2div, __hdiv)
CUSET_H2(__hmax2, __hmax)
CUSET_H2(__hmin2, __hmin)
CUSET_H2(__hadd2_sat, __hadd_sat)
CUSET_H2(__hsub2_sat, __hsub_sat)
CUSET_H2(__hmul2_sat, __hmul_sat)
#undef CUSET_H2
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
inline __half2 __hfma2_sat(__half2 a, __half2 b, __half2 c) {
  return __half2(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y));
}
inline __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
inline bool __hbeq2(__half2 a, __half2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }
inline bool __hbne2(__half2 a, __half2 b) { return __hne(a.x, b.x) && __hne(a.y, b.y); }
inline bool __hblt2(__half2 a, __half2 b) { return __hlt(a.x, b.x) && __hlt(a.y, b.y); }
inline bool __hble2(__half2 a, __half2 b) { return __hle(a.x, b.x) && __hle(a.y, b.y); }
inline bool __hbgt2(__half2 a, __half2 b) { return __hgt(a.x, b.x) && __hgt(a.y, b.y); }
inline bool __hbge2(__half2 a, __half2 b) { return __hge(a.x, b.x) && __hge(a.y, b.y); }
inline __half2 __heq2(__half2 a, __half2 b) {
  return __half2(__half(__heq(a.x, b.x) ? 1.0f : 0.0f), __half(__heq(a.y, b.y) ? 1.0f : 0.0f));
}
inline __half2 __hlt2(__half2 a, __half2 b) {
  return __half2(__half(__hlt(a.x, b.x) ? 1.0f : 0.0f), __half(__hlt(a.y, b.y) ? 1.0f : 0.0f));
}
inline __half2 __hgt2(__half2 a, __half2 b) {
  return __half2(__half(__hgt(a.x, b.x) ? 1.0f : 0.0f), __half(__hgt(a.y, b.y) ? 1.0f : 0.0f));
}
#define CUSET_H2MATH(name, f) \
  inline __half2 name(__half2 a) { return __half2(f(a.x), f(a.y)); }
CUSET_H2MATH(h2sqrt, hsqrt)
CUSET_H2MATH(h2rsqrt, hrsqrt)
CUSET_H2MATH(h2rcp, hrcp)
CUSET_H2MATH(h2exp, hexp)
CUSET_H2MATH(h2exp2, hexp2)
CUSET_H2MATH(h2exp10, hexp10)
CUSET_H2MATH(h2log, hlog)
CUSET_H2MATH(h2log2, hlog2)
CUSET_H2MATH(h2log10, hlog10)
CUSET_H2MATH(h2sin, hsin)
CUSET_H2MATH(h2cos, hcos)
CUSET_H2MATH(h2floor, hfloor)
CUSET_H2MATH(h2ceil, hceil)
CUSET_H2MATH(h2trunc, htrunc)
CUSET_H2MATH(h2rint, hrint)
#undef CUSET_H2MATH
inline __half2 operator+(const __half2& a, const __half2& b) { return __hadd2(a, b); }
inline __half2 operator-(const __half2& a, const __half2& b) { return __hsub2(a, b); }
inline __half2 operator*(const __half2& a, const __half2& b) { return __hmul2(a, b); }
inline __half2 operator/(const __half2& a, const __half2& b) { return __h2div(a, b); }
inline __half2& operator+=(__half2& a, const __half2& b) { return a = __hadd2(a, b); }
inline __half2& operator-=(__half2& a, const __half2& b) { return a = __hsub2(a, b); }
inline __half2& operator*=(__half2& a, const __half2& b) { return a = __hmul2(a, b); }
inline __half2& operator/=(__half2& a, const __half2& b) { return a = __h2div(a, b); }
inline __half2 operator-(const __half2& a) { return __hneg2(a); }
inline bool operator==(const __half2& a, const __half2& b) { return __hbeq2(a, b); }
inline bool operator!=(const __half2& a, const __half2& b) { return !__hbeq2(a, b); }

CUSET_NOT_RACECHECKED inline __half atomicAdd(__half* address, __half val) {
  return ::cuset::rt::atomic_update(address, [val](__half old) { return __hadd(old, val); });
}
CUSET_NOT_RACECHECKED inline __half2 atomicAdd(__half2* address, __half2 val) {
  return ::cuset::rt::atomic_update(address, [val](__half2 old) { return __hadd2(old, val); });
}

#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)

// =========================================================== bfloat16
struct __nv_bfloat16_raw {
  unsigned short x;
};
struct __nv_bfloat162_raw {
  unsigned short x, y;
};

namespace cuset {
namespace rt {
inline unsigned short bf16_bits(float f) {
  unsigned int u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return (unsigned short)(u >> 16);
}
inline float bf16_value(unsigned short b) {
  unsigned int u = (unsigned int)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
}  // namespace rt
}  // namespace cuset

struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
  __nv_bfloat16(float f) : __x(::cuset::rt::bf16_bits(f)) {}
  __nv_bfloat16(double d) : __x(::cuset::rt::bf16_bits((float)d)) {}
  __nv_bfloat16(int v) : __x(::cuset::rt::bf16_bits((float)v)) {}
  __nv_bfloat16(unsigned int v) : __x(::cuset::rt::bf16_bits((float)v)) {}
  __nv_bfloat16(long long v) : __x(::cuset::rt::bf16_bits((float)v)) {}
  __nv_bfloat16(unsigned long long v) : __x(::cuset::rt::bf16_bits((float)v)) {}
  __nv_bfloat16(short v) : __x(::cuset::rt::bf16_bits((float)v)) {}
  __nv_bfloat16(unsigned short v) : __x(::cuset::rt::bf16_bits((float)v)) {}
  operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
  operator float() const { return ::cuset::rt::bf16_value(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;
struct __attribute__((aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  constexpr __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
};
typedef __nv_bfloat162 nv_bfloat162;

namespace cuset {
namespace rt {
// Double rounding through float is exact enough for bfloat16 (24 >= 2*8+2).
inline __nv_bfloat16 mkb(double v) { return __nv_bfloat16((float)v); }
}  // namespace rt
}  // namespace cuset

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
inline __nv_bfloat16 __int2bfloat16_rn(int i) { return __nv_bfloat16((float)i); }
inline int __bfloat162int_rn(__nv_bfloat16 b) { return __float2int_rn((float)b); }
inline int __bfloat162int_rz(__nv_bfloat16 b) { return __float2int_rz((float)b); }
inline short __bfloat16_as_short(__nv_bfloat16 b) { return (short)b.__x; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __short_as_bfloat16(short s) { return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)s}); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short s) { return __nv_bfloat16(__nv_bfloat16_raw{s}); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b)); }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(a)); }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 b) { return make_float2((float)b.x, (float)b.y); }
inline float __low2float(__nv_bfloat162 b) { return (float)b.x; }
inline float __high2float(__nv_bfloat162 b) { return (float)b.y; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return ::cuset::rt::mkb((double)(float)a + (float)b); }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return ::cuset::rt::mkb((double)(float)a - (float)b); }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return ::cuset::rt::mkb((double)(float)a * (float)b); }
inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return ::cuset::rt::mkb((double)(float)a / (float)b); }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return ::cuset::rt::mkb(fma((double)(float)a, (double)(float)b, (double)(float)c));
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return __ushort_as_bfloat16((unsigned short)(a.__x ^ 0x8000u)); }
inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return __ushort_as_bfloat16((unsigned short)(a.__x & 0x7fffu)); }
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(fmaxf((float)a, (float)b)); }
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(fminf((float)a, (float)b)); }
inline __nv_bfloat16 hsqrt(__nv_bfloat16 a) { return __nv_bfloat16(sqrtf((float)a)); }
inline __nv_bfloat16 hexp(__nv_bfloat16 a) { return __nv_bfloat16(expf((float)a)); }
inline __nv_bfloat16 hlog(__nv_bfloat16 a) { return __nv_bfloat16(logf((float)a)); }
inline __nv_bfloat16 operator+(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hadd(a, b); }
inline __nv_bfloat16 operator-(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hsub(a, b); }
inline __nv_bfloat16 operator*(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hmul(a, b); }
inline __nv_bfloat16 operator/(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hdiv(a, b); }
inline __nv_bfloat16& operator+=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hadd(a, b); }
inline __nv_bfloat16& operator-=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hsub(a, b); }
inline __nv_bfloat16& operator*=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hmul(a, b); }
inline __nv_bfloat16& operator/=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hdiv(a, b); }
inline __nv_bfloat16 operator-(const __nv_bfloat16& a) { return __hneg(a); }
inline bool operator==(const __nv_bfloat16& a, const __nv_bfloat16& b) { return (float)a == (float)b; }
inline bool operator!=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return (float)a != (float)b; }
inline bool operator<(const __nv_bfloat16& a, const __nv_bfloat16& b) { return (float)a < (float)b; }
inline bool operator<=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return (float)a <= (float)b; }
inline bool operator>(const __nv_bfloat16& a, const __nv_bfloat16& b) { return (float)a > (float)b; }
inline bool operator>=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return (float)a >= (float)b; }
inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline __nv_bfloat162 operator+(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hadd2(a, b); }
inline __nv_bfloat162 operator*(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hmul2(a, b); }
CUSET_NOT_RACECHECKED inline __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 val) {
  return ::cuset::rt::atomic_update(address, [val](__nv_bfloat16 old) { return __hadd(old, val); });
}
#undef CUSET_H
#undef CUSET_MKH
