/* fp8_block.c - e4m3 decoding and block-scaled dequantization (see fp8_block.h). */
#include "model/fp8_block.h"

#include <math.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/fp8_e4m3.h"

float sc_e4m3_to_f32(uint8_t b) { return sc_e4m3_value(b); }

uint8_t sc_f32_to_e4m3(float f) { return sc_e4m3_encode(f); }

static int check(const sc_fp8_weight *w, int64_t row0, int64_t nrows, int64_t col0,
                 int64_t ncols) {
  if (w->block_rows < 1 || w->block_cols < 1) return SC_EINVAL;
  /* no sum that could overflow: the bounds come from the caller */
  if (row0 < 0 || nrows < 0 || col0 < 0 || ncols < 0 || row0 > w->rows ||
      nrows > w->rows - row0 || col0 > w->cols || ncols > w->cols - col0)
    return SC_ERANGE;
  return 0;
}

static float scale_at(const sc_fp8_weight *w, int64_t r, int64_t c) {
  const int64_t scols = (w->cols + w->block_cols - 1) / w->block_cols;
  float s;
  memcpy(&s, (const uint8_t *)w->scale + ((r / w->block_rows) * scols + c / w->block_cols) * 4,
         sizeof s);
  return s;
}

/* One of outf (f32) and outb (bf16) is set. */
static int dequant(const sc_fp8_weight *w, int64_t row0, int64_t nrows, int64_t col0,
                   int64_t ncols, float *outf, uint16_t *outb) {
  const int rc = check(w, row0, nrows, col0, ncols);
  if (rc) return rc;
  for (int64_t r = 0; r < nrows; r++) {
    const uint8_t *q = w->q + (row0 + r) * w->cols;
    for (int64_t c = 0; c < ncols; c++) {
      const float v = sc_e4m3_to_f32(q[col0 + c]) * scale_at(w, row0 + r, col0 + c);
      if (outf) outf[r * ncols + c] = v;
      else outb[r * ncols + c] = sc_f32_to_bf16(v);
    }
  }
  return 0;
}

int sc_fp8_dequant_f32(const sc_fp8_weight *w, int64_t row0, int64_t nrows, int64_t col0,
                       int64_t ncols, float *out) {
  return dequant(w, row0, nrows, col0, ncols, out, NULL);
}

int sc_fp8_dequant_bf16(const sc_fp8_weight *w, int64_t row0, int64_t nrows, int64_t col0,
                        int64_t ncols, uint16_t *out) {
  return dequant(w, row0, nrows, col0, ncols, NULL, out);
}
