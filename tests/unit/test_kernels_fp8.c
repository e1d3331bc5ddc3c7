/* Kernel tests: KV rows in fp8_ds_mla (SPEC.md §7, kernels.h) on the CPU backend. The
 * quantizer of fp8_e4m3.h, which kv_write runs on every backend, against the independent
 * reference of tests/common/fp8_ref.c (a table search for each e4m3 byte); gather_rows'
 * conversions out of the format; and attention over fp8_ds_mla rows, which must be the
 * attention over the rows' dequantized values to the bit. */
#include <math.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/fp8_e4m3.h"
#include "test_kernels.h"
#include "tests/common/fp8_ref.h"

#define W 576 /* the row's values: 512 latent + 64 rope */
#define ROWS 12

/* ROWS rows of W values: random magnitudes per 128-value tile (1e-4 .. 1e3, so scales
 * span many binades and the small tiles reach e4m3's subnormals), an all-zero tile in
 * row 1, a NaN in row 2, and one value far above its tile in row 3 (the others round
 * to zero or to subnormals). */
static float *fp8_rows(uint64_t *s) {
  float *x = tk_rand_f32(s, (size_t)ROWS * W, -1.0, 1.0);
  for (int r = 0; r < ROWS; r++)
    for (int t = 0; t < 5; t++) { /* 4 tiles of 128, then the 64 rope values */
      const float mag = (float)pow(10.0, tk_unif(s, -4.0, 3.0));
      const int n = t < 4 ? 128 : 64;
      for (int i = 0; i < n; i++) x[r * W + t * 128 + i] *= mag;
    }
  memset(x + 1 * W + 128, 0, 128 * sizeof(float));
  x[2 * W + 300] = NAN;
  x[3 * W + 5] = 1e6f;
  return x;
}

/* kv_write into fp8_ds_mla rows gives the reference's bytes (rows to slots in reverse,
 * one slot skipped), and the host quantizer of fp8_e4m3.h gives them too. */
Test(kernels_fp8, ds_mla_rows_are_the_references_bytes) {
  sc_kernels *k = tk_ctx(2);
  uint64_t s = 71;
  float *x = fp8_rows(&s);
  int32_t slots[ROWS];
  for (int i = 0; i < ROWS; i++) slots[i] = i == 4 ? -1 : ROWS - 1 - i;
  const int64_t ld = SC_KFP8_DS_MLA_ROW_BYTES + 16; /* rows further apart than one row */
  void *src = tk_up(k, x, sizeof(float) * ROWS * W), *sl = tk_up(k, slots, sizeof slots);
  void *cache = tk_zeros(k, (size_t)(ROWS * ld));
  cr_assert_eq(k->ops->kv_write(k, ROWS, W, src, W, sl,
                                (sc_krows){cache, SC_KFMT_FP8_DS_MLA, ld, ROWS}),
               0);
  uint8_t *got = malloc((size_t)(ROWS * ld));
  tk_down(k, got, cache, (size_t)(ROWS * ld));
  uint8_t ref[SC_KFP8_DS_MLA_ROW_BYTES], host[SC_KFP8_DS_MLA_ROW_BYTES];
  for (int i = 0; i < ROWS; i++) {
    sc_ref_fp8_quantize_row(x + i * W, ref);
    sc_kfp8_ds_mla_quantize(x + i * W, host);
    cr_assert_arr_eq(host, ref, sizeof ref, "row %d: fp8_e4m3.h's bytes, not the reference's", i);
    if (slots[i] < 0) continue;
    cr_assert_arr_eq(got + slots[i] * ld, ref, sizeof ref, "row %d: kv_write's bytes", i);
  }
  for (int64_t b = 0; b < SC_KFP8_DS_MLA_ROW_BYTES; b++) /* slot ROWS - 5 was skipped */
    cr_assert_eq(got[(ROWS - 5) * ld + b], 0);
  float scale;
  memcpy(&scale, got + (ROWS - 2) * ld + SC_KFP8_DS_MLA_SCALE_AT + 4, sizeof scale);
  cr_assert_eq(scale, 1.0f, "row 1's zero tile has scale 1, not %g", scale);
  free(got), free(x);
  k->ops->free(k, src), k->ops->free(k, sl), k->ops->free(k, cache);
  sc_kernels_destroy(k);
}

/* gather_rows out of fp8_ds_mla rows: to f32 the reference's values, to bf16 those
 * rounded, to fp8_ds_mla the bytes; into fp8_ds_mla from another format refused (kv_write
 * quantizes), and a width other than 576 refused. */
Test(kernels_fp8, ds_mla_gather_converts) {
  sc_kernels *k = tk_ctx(2);
  uint64_t s = 72;
  float *x = fp8_rows(&s);
  uint8_t rows[ROWS][SC_KFP8_DS_MLA_ROW_BYTES];
  for (int i = 0; i < ROWS; i++) sc_ref_fp8_quantize_row(x + i * W, rows[i]);
  const int32_t idx[4] = {3, -1, 0, 11};
  void *src = tk_up(k, rows, sizeof rows), *ix = tk_up(k, idx, sizeof idx);
  const sc_krows from = {src, SC_KFMT_FP8_DS_MLA, SC_KFP8_DS_MLA_ROW_BYTES, ROWS};
  void *f = tk_zeros(k, sizeof(float) * 4 * W), *h = tk_zeros(k, sizeof(uint16_t) * 4 * W);
  void *q = tk_zeros(k, 4 * SC_KFP8_DS_MLA_ROW_BYTES);
  cr_assert_eq(k->ops->gather_rows(k, 4, W, from, ix, (sc_krows){f, SC_KFMT_F32, W, 4}), 0);
  cr_assert_eq(k->ops->gather_rows(k, 4, W, from, ix, (sc_krows){h, SC_KFMT_BF16, W, 4}), 0);
  cr_assert_eq(k->ops->gather_rows(k, 4, W, from, ix,
                                   (sc_krows){q, SC_KFMT_FP8_DS_MLA, SC_KFP8_DS_MLA_ROW_BYTES, 4}),
               0);
  float gf[4 * W], want[W];
  uint16_t gh[4 * W];
  uint8_t gq[4][SC_KFP8_DS_MLA_ROW_BYTES];
  tk_down(k, gf, f, sizeof gf);
  tk_down(k, gh, h, sizeof gh);
  tk_down(k, gq, q, sizeof gq);
  for (int i = 0; i < 4; i++) {
    if (idx[i] < 0) memset(want, 0, sizeof want);
    else sc_ref_fp8_dequantize_row(rows[idx[i]], want);
    for (int v = 0; v < W; v++) {
      const float g = gf[i * W + v], b = sc_bf16_to_f32(gh[i * W + v]);
      const float wb = sc_bf16_to_f32(sc_f32_to_bf16(want[v]));
      cr_assert(memcmp(&g, &want[v], sizeof g) == 0 || (isnan(g) && isnan(want[v])),
                "row %d value %d: %g, the reference's %g", i, v, g, want[v]);
      cr_assert(b == wb || (isnan(b) && isnan(wb)), "row %d value %d as bf16: %g, not %g", i,
                v, b, wb);
    }
    if (idx[i] >= 0) cr_assert_arr_eq(gq[i], rows[idx[i]], SC_KFP8_DS_MLA_ROW_BYTES);
  }
  cr_assert_eq(k->ops->gather_rows(k, 4, W, (sc_krows){f, SC_KFMT_F32, W, 4}, NULL,
                                   (sc_krows){q, SC_KFMT_FP8_DS_MLA, SC_KFP8_DS_MLA_ROW_BYTES, 4}),
               SC_ENOTSUP);
  cr_assert_eq(k->ops->gather_rows(k, 4, 64, from, ix, (sc_krows){f, SC_KFMT_F32, W, 4}),
               SC_ENOTSUP);
  free(x);
  k->ops->free(k, src), k->ops->free(k, ix), k->ops->free(k, f), k->ops->free(k, h);
  k->ops->free(k, q);
  sc_kernels_destroy(k);
}

/* Attention over fp8_ds_mla rows is the attention over their values in f32 rows, to the
 * bit: output and LSE (selections with -1 in them, an empty one). */
Test(kernels_fp8, ds_mla_attention_is_over_the_dequantized_rows) {
  enum { T = 3, H = 4, K = 9, R = 40 };
  sc_kernels *k = tk_ctx(2);
  uint64_t s = 73;
  float *x = tk_rand_f32(&s, (size_t)R * W, -2.0, 2.0);
  float *q = tk_rand_f32(&s, (size_t)T * H * W, -0.5, 0.5);
  uint8_t *rows = malloc((size_t)R * SC_KFP8_DS_MLA_ROW_BYTES);
  for (int r = 0; r < R; r++) {
    sc_ref_fp8_quantize_row(x + r * W, rows + r * SC_KFP8_DS_MLA_ROW_BYTES);
    sc_ref_fp8_dequantize_row(rows + r * SC_KFP8_DS_MLA_ROW_BYTES, x + r * W);
  }
  int32_t sel[T * K];
  for (int i = 0; i < T * K; i++) sel[i] = (int32_t)tk_int(&s, 0, R - 1);
  sel[3] = -1;
  for (int i = 0; i < K; i++) sel[2 * K + i] = -1;
  void *gq = tk_up(k, q, sizeof(float) * T * H * W), *gs = tk_up(k, sel, sizeof sel);
  void *g8 = tk_up(k, rows, (size_t)R * SC_KFP8_DS_MLA_ROW_BYTES);
  void *g32 = tk_up(k, x, sizeof(float) * R * W);
  float out[2][T * H * 512], lse[2][T * H];
  for (int v = 0; v < 2; v++) {
    void *o = tk_zeros(k, sizeof out[v]), *l = tk_zeros(k, sizeof lse[v]);
    const sc_krows kv = v == 0 ? (sc_krows){g8, SC_KFMT_FP8_DS_MLA, SC_KFP8_DS_MLA_ROW_BYTES, R}
                               : (sc_krows){g32, SC_KFMT_F32, W, R};
    const sc_attn_args a = {.n_tok = T, .n_heads = H, .dc = 512, .dr = 64, .topk = K,
                            .scale = 0.05f, .q = gq, .ld_q = H * W, .kv = kv, .sel = gs,
                            .ld_sel = K, .out = o, .ld_out = H * 512, .lse = l, .ld_lse = H};
    cr_assert_eq(k->ops->sparse_attn(k, &a), 0);
    tk_down(k, out[v], o, sizeof out[v]);
    tk_down(k, lse[v], l, sizeof lse[v]);
    k->ops->free(k, o), k->ops->free(k, l);
  }
  cr_assert_arr_eq(out[0], out[1], sizeof out[0]);
  cr_assert_arr_eq(lse[0], lse[1], sizeof lse[0]);
  cr_assert(isinf(lse[0][2 * H]) && lse[0][2 * H] < 0, "the empty selection's lse is -inf");
  free(x), free(q), free(rows);
  k->ops->free(k, gq), k->ops->free(k, gs), k->ops->free(k, g8), k->ops->free(k, g32);
  sc_kernels_destroy(k);
}
