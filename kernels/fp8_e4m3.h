/* fp8_e4m3.h - the exact value of an e4m3fn byte (torch.float8_e4m3fn, safetensors
 * F8_E4M3: 1 sign bit, 4 exponent bits with bias 7, 3 mantissa bits; exponent 0 is
 * subnormal, m * 2^-9; no infinities; S.1111.111 is NaN, so 448 is the largest finite
 * value), the nearest byte of a float, and the quantizations of an fp8_index key row and
 * of an fp8_ds_mla KV row (kernels.h SC_KFMT_FP8_INDEX, SC_KFMT_FP8_DS_MLA). Every e4m3
 * value is exact in f32, so the host, the CPU kernels and the CUDA kernels (through
 * SC_HOSTDEV) decode a byte to the same float.
 * Pure; any thread. */
#ifndef SC_FP8_E4M3_H
#define SC_FP8_E4M3_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/hostdev.h"
#include "kernels/bf16.h"
#include "kernels/kernels.h"

SC_HOSTDEV float sc_e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 7;
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (e == 0xf && m == 7) return NAN;
  if (e == 0) return sign * ldexpf((float)m, -9);  /* subnormal: m/8 * 2^-6 */
  return sign * ldexpf((float)(8 + m), e - 10);    /* (1 + m/8) * 2^(e-7) */
}

/* The e4m3fn byte nearest to f, ties to even; |f| from 448 on saturates to +-448 (as
 * quantizers do after scaling) and NaN gives 0x7f. The scalings by powers of two are
 * exact, so the one rounding is rintf's (to nearest even in the default mode). */
SC_HOSTDEV uint8_t sc_e4m3_encode(float f) {
  if (f != f) return 0x7f;
  const uint8_t sign = signbit(f) ? 0x80 : 0;
  const float a = fabsf(f);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) { /* below 2^-6: subnormal steps of 2^-9 (8 steps is 2^-6: e = 1) */
    const int m = (int)rintf(ldexpf(a, 9));
    return sign | (uint8_t)(m == 8 ? 0x08 : m);
  }
  int x;
  (void)frexpf(a, &x);                 /* a = f * 2^x, f in [0.5, 1): 2^(x-1) <= a */
  int m = (int)rintf(ldexpf(a, 4 - x)); /* a / 2^(x-1) * 8, in [8, 16] */
  int e = x - 1 + 7;
  if (m == 16) m = 8, e++;
  if (e > 15 || (e == 15 && m - 8 == 7)) return sign | 0x7e; /* (not reached below 448) */
  return sign | (uint8_t)(e << 3) | (uint8_t)(m - 8);
}

/* The scale of an fp8_index row whose largest |value| is amax (NaN values left out): the
 * least power of two with amax / scale <= 448 (1 for a row of zeros), so that every
 * value / scale is exact before its one rounding. A device quantizer that reduces amax
 * over threads calls it to get the host's scale, and so the host's bytes. */
SC_HOSTDEV float sc_kfp8_index_scale(float amax) {
  if (!(amax > 0.0f && amax <= 3.0e38f)) return 1.0f;
  int x;
  const float f = frexpf(amax / 448.0f, &x); /* amax / 448 = f * 2^x, f in [0.5, 1) */
  return ldexpf(1.0f, f == 0.5f ? x - 1 : x);
}

/* One key of `dim` values as an fp8_index row (kernels.h): the e4m3 bytes of
 * k / sc_kfp8_index_scale(amax), then the scale at SC_KFP8_INDEX_SCALE_AT(dim) (the
 * padding before it zeroed). A NaN value becomes the NaN byte. */
SC_HOSTDEV void sc_kfp8_index_quantize(const float *k, int32_t dim, uint8_t *row) {
  float amax = 0.0f;
  for (int32_t i = 0; i < dim; i++) {
    const float a = fabsf(k[i]);
    amax = a > amax ? a : amax;
  }
  const float scale = sc_kfp8_index_scale(amax);
  for (int32_t i = 0; i < dim; i++) row[i] = sc_e4m3_encode(k[i] / scale);
  const int32_t at = (dim + 3) / 4 * 4;
  for (int32_t i = dim; i < at; i++) row[i] = 0;
  memcpy(row + at, &scale, sizeof scale);
}

/* The value an fp8_index row gives x when its scale is `scale` (sc_kfp8_index_scale):
 * scale times the nearest e4m3 value of x / scale (exact in f32 and in bf16). */
SC_HOSTDEV float sc_kfp8_index_round(float x, float scale) {
  return scale * sc_e4m3_value(sc_e4m3_encode(x / scale));
}

/* The scale of an fp8_ds_mla tile whose largest |value| is amax (NaN values left out):
 * amax / 448, 1 for a tile of zeros. Not a power of two (DeepSeek-V3.2's KV cache keeps
 * these scales), so x / scale rounds twice: once in the division, once to e4m3. The
 * division is IEEE's on every backend (the CUDA build has no fast math), so the bytes
 * agree everywhere. */
SC_HOSTDEV float sc_kfp8_ds_mla_scale(float amax) { return amax > 0.0f ? amax / 448.0f : 1.0f; }

/* One 576-wide KV row [c_kv (512) ; k_rope (64)] as an fp8_ds_mla row (kernels.h): per
 * tile of 128 values the e4m3 bytes of x / sc_kfp8_ds_mla_scale(amax) and the scale, the
 * rope values as bf16. The CUDA kv_write writes these bytes (its amax is a maximum over
 * a warp: order-free). */
SC_HOSTDEV void sc_kfp8_ds_mla_quantize(const float *x, uint8_t *row) {
  for (int t = 0; t < SC_KFP8_DS_MLA_NOPE / SC_KFP8_DS_MLA_TILE; t++) {
    const float *xt = x + t * SC_KFP8_DS_MLA_TILE;
    float amax = 0.0f;
    for (int i = 0; i < SC_KFP8_DS_MLA_TILE; i++) amax = fmaxf(amax, fabsf(xt[i]));
    const float scale = sc_kfp8_ds_mla_scale(amax);
    for (int i = 0; i < SC_KFP8_DS_MLA_TILE; i++)
      row[t * SC_KFP8_DS_MLA_TILE + i] = sc_e4m3_encode(xt[i] / scale);
    memcpy(row + SC_KFP8_DS_MLA_SCALE_AT + 4 * t, &scale, sizeof scale);
  }
  for (int i = 0; i < SC_KFP8_DS_MLA_ROPE; i++) {
    const uint16_t h = sc_f32_to_bf16(x[SC_KFP8_DS_MLA_NOPE + i]);
    memcpy(row + SC_KFP8_DS_MLA_ROPE_AT + 2 * i, &h, sizeof h);
  }
}

/* The 576 values of an fp8_ds_mla row: e4m3 value times its tile's scale (one f32
 * product, as every reader computes it), then the rope values. */
SC_HOSTDEV void sc_kfp8_ds_mla_dequantize(const uint8_t *row, float *x) {
  for (int t = 0; t < SC_KFP8_DS_MLA_NOPE / SC_KFP8_DS_MLA_TILE; t++) {
    float scale;
    memcpy(&scale, row + SC_KFP8_DS_MLA_SCALE_AT + 4 * t, sizeof scale);
    for (int i = 0; i < SC_KFP8_DS_MLA_TILE; i++)
      x[t * SC_KFP8_DS_MLA_TILE + i] = sc_e4m3_value(row[t * SC_KFP8_DS_MLA_TILE + i]) * scale;
  }
  for (int i = 0; i < SC_KFP8_DS_MLA_ROPE; i++) {
    uint16_t h;
    memcpy(&h, row + SC_KFP8_DS_MLA_ROPE_AT + 2 * i, sizeof h);
    x[SC_KFP8_DS_MLA_NOPE + i] = sc_bf16_to_f32(h);
  }
}

#endif
