/* bf16.h - bfloat16 <-> f32 conversion (the CPU backend's bf16 rows, tests, weight
 * preparation, and the CUDA kernels through SC_HOSTDEV). bf16 is the upper half of an IEEE f32; conversion from f32 rounds
 * to nearest even and keeps NaN a (quiet) NaN. Pure inline functions; any thread. */
#ifndef SC_BF16_H
#define SC_BF16_H

#include <stdint.h>
#include <string.h>

#include "base/hostdev.h"

SC_HOSTDEV float sc_bf16_to_f32(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

SC_HOSTDEV uint16_t sc_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep sign, force quiet */
  u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest, ties to even */
  return (uint16_t)(u >> 16);
}

#endif
