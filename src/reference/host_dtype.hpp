// Host-side bf16 / fp16 / fp8 e4m3 <-> float conversions, written out here so
// the CPU reference depends on no CUDA header and no compiler extension (and
// the tests can build inputs bit-exactly with the same code).
//
// float -> narrow conversions round to nearest, ties to even, as the CUDA
// intrinsics (__float2bfloat16_rn, __float2half_rn, __nv_cvt_float_to_fp8
// with __NV_SATFINITE off) do. fp8 is the e4m3 "fn" variant: bias 7, no
// infinities, 0x7f / 0xff are NaN, largest finite 448.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kdtree_kernels.h"

namespace kdtree::host_dtype {

inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// ---- bf16: the upper half of an IEEE float ----

inline float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float x) {
  uint32_t u = float_bits(x);
  if (std::isnan(x)) return uint16_t((u >> 16) | 0x0040);  // keep sign, force a quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // ties to even; overflow carries into the exponent (-> inf)
  return uint16_t(u >> 16);
}

// ---- fp16: 1 sign, 5 exponent (bias 15), 10 mantissa ----

inline float f16_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t float_to_f16(float x) {
  uint32_t u = float_bits(x);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  if (std::isnan(x)) return uint16_t(sign | 0x7e00u);
  float a = std::fabs(x);
  if (a >= 65520.0f) return uint16_t(sign | 0x7c00u);  // rounds past the max finite 65504
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal range: the value in units of 2^-24, rounded to nearest even.
    // std::nearbyint uses the default (ties-to-even) rounding mode.
    float units = std::nearbyint(std::ldexp(a, 24));
    return uint16_t(sign | uint16_t(units));  // units == 1024 is the smallest normal
  }
  uint32_t exp = ((u >> 23) & 0xffu) - 112u;  // rebias 127 -> 15
  uint32_t man = u & 0x7fffffu;
  uint32_t half = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into exponent
  return uint16_t(sign | half);
}

// ---- fp8 e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa ----

inline float fp8_e4m3_to_float(uint8_t b) {
  uint32_t exp = (b >> 3) & 0xfu;
  uint32_t man = b & 0x7u;
  float v;
  if (exp == 0xf && man == 0x7) {
    v = std::nanf("");
  } else if (exp == 0) {
    v = std::ldexp(float(man), -9);  // subnormal: man/8 * 2^-6
  } else {
    v = std::ldexp(float(8 + man), int(exp) - 10);  // (1 + man/8) * 2^(exp-7)
  }
  return (b & 0x80u) ? -v : v;
}

// Finite values beyond 448 (after rounding) become NaN, as the "fn" variant
// has no infinity to saturate to.
inline uint8_t float_to_fp8_e4m3(float x) {
  uint8_t sign = std::signbit(x) ? 0x80u : 0x00u;
  if (std::isnan(x)) return uint8_t(sign | 0x7fu);
  float a = std::fabs(x);
  if (a >= 464.0f) return uint8_t(sign | 0x7fu);  // 464 is the midpoint 448..(512)
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int unbiased = e - 1;
  if (a == 0.0f) return sign;
  // Quantum of the binade (3 mantissa bits); subnormals share the 2^-9 quantum.
  int quantum_exp = (unbiased < -6 ? -6 : unbiased) - 3;
  float units = std::nearbyint(std::ldexp(a, -quantum_exp));  // ties to even
  float rounded = std::ldexp(units, quantum_exp);
  if (rounded == 0.0f) return sign;
  std::frexp(rounded, &e);
  unbiased = e - 1;
  if (unbiased < -6) return uint8_t(sign | uint8_t(units));  // subnormal: exp field 0
  uint32_t man = uint32_t(std::ldexp(rounded, -unbiased) * 8.0f) - 8u;
  return uint8_t(sign | uint8_t((unbiased + 7) << 3) | uint8_t(man));
}

// Element `index` of an array of `dtype` as double (fp8 values times kv_scale).
inline double load_element(const void* base, int64_t index, int32_t dtype, double kv_scale = 1.0) {
  switch (dtype) {
    case KDTREE_DTYPE_F32:
      return static_cast<const float*>(base)[index];
    case KDTREE_DTYPE_BF16:
      return bf16_to_float(static_cast<const uint16_t*>(base)[index]);
    case KDTREE_DTYPE_F16:
      return f16_to_float(static_cast<const uint16_t*>(base)[index]);
    default:  // KDTREE_DTYPE_FP8_E4M3
      return double(fp8_e4m3_to_float(static_cast<const uint8_t*>(base)[index])) * kv_scale;
  }
}

// Stores `value` as `dtype` (F32, BF16 or F16), narrowed through float as a
// device kernel rounds its fp32 result.
inline void store_element(void* base, int64_t index, int32_t dtype, double value) {
  const float f = static_cast<float>(value);
  switch (dtype) {
    case KDTREE_DTYPE_F32:
      static_cast<float*>(base)[index] = f;
      break;
    case KDTREE_DTYPE_BF16:
      static_cast<uint16_t*>(base)[index] = float_to_bf16(f);
      break;
    default:  // KDTREE_DTYPE_F16
      static_cast<uint16_t*>(base)[index] = float_to_f16(f);
      break;
  }
}

}  // namespace kdtree::host_dtype
