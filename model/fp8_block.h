/* fp8_block.h - fp8 e4m3 weights with block scales, as DeepSeek-V3/V3.2 checkpoints store
 * them (quantization_config {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size":
 * [128, 128]}).
 *
 * e4m3 here is the "fn" variant (torch.float8_e4m3fn, safetensors F8_E4M3): 1 sign bit,
 * 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal (m * 2^-9), no
 * infinities, and only S.1111.111 (0x7f, 0xff) is NaN, so the largest finite value is
 * 0x7e = 448. A [rows, cols] weight comes with `weight_scale_inv`, f32
 * [ceil(rows/br), ceil(cols/bc)], and means w[r][c] = e4m3(q[r][c]) *
 * scale_inv[r/br][c/bc] (DeepSeek's inference/model.py weight_dequant; the name says
 * "inverse" because the quantizer divided by it).
 *
 * Pure functions, any thread. Pointers into a mapped safetensors file need no alignment:
 * scales are read with memcpy, little-endian hosts only (as model/safetensors.c).
 */
#ifndef SC_FP8_BLOCK_H
#define SC_FP8_BLOCK_H

#include <stdint.h>

#include "base/error.h"

/* Exact value of an e4m3fn byte (NaN for 0x7f and 0xff). */
float sc_e4m3_to_f32(uint8_t b);

/* The e4m3fn byte nearest to f, ties to even; |f| beyond 448 saturates to +-448 (as the
 * quantizers do after scaling) and NaN gives 0x7f. For writing test and generated
 * checkpoints. */
uint8_t sc_f32_to_e4m3(float f);

/* One fp8 weight with its block scales: q [rows, cols] e4m3 bytes, row-major;
 * scale [ceil(rows/block_rows), ceil(cols/block_cols)] little-endian f32. */
typedef struct sc_fp8_weight {
  const uint8_t *q;
  const void *scale;
  int64_t rows, cols;
  int32_t block_rows, block_cols;
} sc_fp8_weight;

/* Dequantizes rows [row0, row0+nrows) x columns [col0, col0+ncols) of w (a TP slice, or
 * the whole tensor) into out, row-major and ncols wide: f32, or bf16 rounded to nearest
 * even from the f32 product (as weight_dequant: a float multiply, then the cast).
 * SC_ERANGE when the block lies outside the weight, SC_EINVAL for block sizes < 1. */
int sc_fp8_dequant_f32(const sc_fp8_weight *w, int64_t row0, int64_t nrows, int64_t col0,
                       int64_t ncols, float *out);
int sc_fp8_dequant_bf16(const sc_fp8_weight *w, int64_t row0, int64_t nrows, int64_t col0,
                        int64_t ncols, uint16_t *out);

#endif
