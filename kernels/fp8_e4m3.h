/* fp8_e4m3.h - the exact value of an e4m3fn byte (torch.float8_e4m3fn, safetensors
 * F8_E4M3: 1 sign bit, 4 exponent bits with bias 7, 3 mantissa bits; exponent 0 is
 * subnormal, m * 2^-9; no infinities; S.1111.111 is NaN, so 448 is the largest finite
 * value). Every e4m3 value is exact in f32, so the host, the CPU kernels and the CUDA
 * kernels (through SC_HOSTDEV) decode a byte to the same float. Pure; any thread. */
#ifndef SC_FP8_E4M3_H
#define SC_FP8_E4M3_H

#include <math.h>
#include <stdint.h>

#include "base/hostdev.h"

SC_HOSTDEV float sc_e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 7;
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (e == 0xf && m == 7) return NAN;
  if (e == 0) return sign * ldexpf((float)m, -9);  /* subnormal: m/8 * 2^-6 */
  return sign * ldexpf((float)(8 + m), e - 10);    /* (1 + m/8) * 2^(e-7) */
}

#endif
