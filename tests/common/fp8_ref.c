/* fp8_ref.c - CPU reference of e4m3 and the fp8_ds_mla row (see fp8_ref.h). Encoding
 * searches the table of the 127 non-negative finite codes, so it is exact by
 * construction rather than by bit tricks. */
#include "tests/common/fp8_ref.h"

#include <math.h>
#include <string.h>

#include "kernels/bf16.h"

float sc_ref_e4m3_to_f32(uint8_t v) {
  const int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  float f;
  if (e == 15 && m == 7) return NAN;
  if (e == 0) f = (float)m * 0x1p-9f; /* subnormal: m/8 * 2^-6 */
  else f = ldexpf(1.0f + (float)m / 8.0f, e - 7);
  return s ? -f : f;
}

uint8_t sc_ref_f32_to_e4m3(float x) {
  if (isnan(x)) return 0x7f;
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  const float a = fabsf(x);
  if (a >= 448.0f) return sign | 0x7e; /* saturate */
  /* largest code c (0..0x7e) with value <= a */
  int lo = 0, hi = 0x7e;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (sc_ref_e4m3_to_f32((uint8_t)mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  int c = lo;
  if (c < 0x7e) {
    const double dlo = (double)a - sc_ref_e4m3_to_f32((uint8_t)c);
    const double dhi = (double)sc_ref_e4m3_to_f32((uint8_t)(c + 1)) - a;
    if (dhi < dlo || (dhi == dlo && (c & 1))) c++; /* ties to the even code */
  }
  return sign | (uint8_t)c;
}

void sc_ref_fp8_quantize_row(const float *x, uint8_t *row) {
  for (int tile = 0; tile < 4; tile++) {
    float amax = 0.0f;
    for (int i = 0; i < 128; i++) amax = fmaxf(amax, fabsf(x[tile * 128 + i]));
    const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
    for (int i = 0; i < 128; i++)
      row[tile * 128 + i] = sc_ref_f32_to_e4m3(x[tile * 128 + i] / scale);
    memcpy(row + 512 + 4 * tile, &scale, 4);
  }
  for (int i = 0; i < 64; i++) {
    const uint16_t h = sc_f32_to_bf16(x[512 + i]);
    memcpy(row + 528 + 2 * i, &h, 2);
  }
}

void sc_ref_fp8_dequantize_row(const uint8_t *row, float *x) {
  for (int tile = 0; tile < 4; tile++) {
    float scale;
    memcpy(&scale, row + 512 + 4 * tile, 4);
    for (int i = 0; i < 128; i++)
      x[tile * 128 + i] = sc_ref_e4m3_to_f32(row[tile * 128 + i]) * scale;
  }
  for (int i = 0; i < 64; i++) {
    uint16_t h;
    memcpy(&h, row + 528 + 2 * i, 2);
    x[512 + i] = sc_bf16_to_f32(h);
  }
}
