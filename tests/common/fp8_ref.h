/* fp8_ref.h - the CPU reference of the fp8_ds_mla KV layout (SPEC.md §7, kernels.h):
 * e4m3 (1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no infinities, 0x7f/0xff
 * NaN, largest finite 448) with round-to-nearest-even and saturation, and the row
 * quantization the CUDA kv_write performs: per 128-value tile scale = amax / 448 (1 for an
 * all-zero tile), value = x / scale as e4m3; the 64 rope values as bf16. Pure functions;
 * any thread. */
#ifndef SC_FP8_REF_H
#define SC_FP8_REF_H

#include <stdint.h>

float sc_ref_e4m3_to_f32(uint8_t v);
uint8_t sc_ref_f32_to_e4m3(float x);
/* x: 576 floats -> row: 656 bytes. */
void sc_ref_fp8_quantize_row(const float *x, uint8_t *row);
/* row: 656 bytes -> x: 576 floats. */
void sc_ref_fp8_dequantize_row(const uint8_t *row, float *x);

#endif
