/* Kernel tests for the ops a DeepSeek-V3.2 checkpoint needs (issue 23): rope_freq (a given
 * frequency table and cos/sin factor; equal to rope with theta's table and factor 1),
 * layernorm (with weight and bias) and weighted_sum_rows (the MoE combine), against their
 * formulas in double, and their argument checks. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "test_kernels.h"

Test(kernels_ckpt, rope_freq_equals_rope_with_thetas_table_and_scales_by_factor) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 21;
  const int64_t n_tok = 30, ld_tok = 2 * 16 + 3, ld_head = 16;
  const int32_t nh = 2, rot = 8;
  const size_t bytes = sizeof(float) * (size_t)(n_tok * ld_tok);
  float *x = tk_rand_f32(&seed, (size_t)(n_tok * ld_tok), -1, 1);
  int32_t pos[30];
  for (int i = 0; i < 30; i++) pos[i] = (int32_t)tk_int(&seed, 0, 100000);
  double freq[4];
  for (int i = 0; i < 4; i++) freq[i] = pow(10000.0, -2.0 * i / rot);
  float *a = tk_up(k, x, bytes), *b = tk_up(k, x, bytes), *c = tk_up(k, x, bytes);
  int32_t *dpos = tk_up(k, pos, sizeof pos);
  double *dfreq = tk_up(k, freq, sizeof freq);
  cr_assert_eq(k->ops->rope(k, n_tok, nh, rot, a, ld_tok, ld_head, dpos, 10000.0f), 0);
  cr_assert_eq(k->ops->rope_freq(k, n_tok, nh, rot, b, ld_tok, ld_head, dpos, dfreq, 1.0f), 0);
  cr_assert_eq(k->ops->rope_freq(k, n_tok, nh, rot, c, ld_tok, ld_head, dpos, dfreq, 1.25f), 0);
  float *ya = malloc(bytes), *yb = malloc(bytes), *yc = malloc(bytes);
  tk_down(k, ya, a, bytes), tk_down(k, yb, b, bytes), tk_down(k, yc, c, bytes);
  cr_assert_eq(memcmp(ya, yb, bytes), 0, "the same table and factor 1: bit-identical to rope");
  for (int64_t t = 0; t < n_tok; t++)
    for (int64_t col = 0; col < ld_tok; col++) {
      const int64_t at = t * ld_tok + col, h = col / ld_head, i = col % ld_head;
      if (h >= nh || i >= rot) cr_assert_eq(yc[at], x[at]);
      else cr_assert(fabs(yc[at] - 1.25 * ya[at]) < 1e-6, "factor scales the rotated values");
    }
  cr_assert_eq(k->ops->rope_freq(k, n_tok, nh, rot, b, ld_tok, ld_head, dpos, NULL, 1.0f), SC_EINVAL);
  cr_assert_eq(k->ops->rope_freq(k, n_tok, nh, rot, b, ld_tok, ld_head, dpos, dfreq, 0.0f), SC_EINVAL);
  free(x), free(ya), free(yb), free(yc);
  k->ops->free(k, a), k->ops->free(k, b), k->ops->free(k, c);
  k->ops->free(k, dpos), k->ops->free(k, dfreq);
  sc_kernels_destroy(k);
}

Test(kernels_ckpt, layernorm_matches_formula) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 22;
  const int64_t rows = 50, dim = 16, ld = 20;
  float *x = tk_rand_f32(&seed, (size_t)(rows * ld), -3, 5);
  float *w = tk_rand_f32(&seed, (size_t)dim, 0.5, 1.5), *b = tk_rand_f32(&seed, (size_t)dim, -1, 1);
  float *dx = tk_up(k, x, sizeof(float) * (size_t)(rows * ld));
  float *dw = tk_up(k, w, sizeof(float) * (size_t)dim), *db = tk_up(k, b, sizeof(float) * (size_t)dim);
  cr_assert_eq(k->ops->layernorm(k, rows, dim, dx, ld, dw, db, 1e-6f, dx, ld), 0);
  float *y = malloc(sizeof(float) * (size_t)(rows * ld));
  tk_down(k, y, dx, sizeof(float) * (size_t)(rows * ld));
  for (int64_t r = 0; r < rows; r++) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; i++) mean += x[r * ld + i] / (double)dim;
    for (int64_t i = 0; i < dim; i++) var += pow(x[r * ld + i] - mean, 2) / (double)dim;
    for (int64_t i = 0; i < ld; i++) {
      const double want = i < dim ? (x[r * ld + i] - mean) / sqrt(var + 1e-6) * w[i] + b[i] : x[r * ld + i];
      cr_assert(fabs(y[r * ld + i] - want) < 1e-5, "r %ld i %ld: %g vs %g", (long)r, (long)i, y[r * ld + i], want);
    }
  }
  free(x), free(w), free(b), free(y);
  k->ops->free(k, dx), k->ops->free(k, dw), k->ops->free(k, db);
  sc_kernels_destroy(k);
}

Test(kernels_ckpt, weighted_sum_rows_sums_in_order_then_adds) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 23;
  enum { N = 9, K = 3, W = 5, S = 12 };
  float *src = tk_rand_f32(&seed, S * W, -2, 2), *add = tk_rand_f32(&seed, N * W, -1, 1);
  float *wt = tk_rand_f32(&seed, N * K, 0, 3);
  int32_t rows[N * K];
  for (int i = 0; i < N * K; i++) rows[i] = i % 4 == 3 ? -1 : (int32_t)tk_int(&seed, 0, S - 1);
  float *ds = tk_up(k, src, sizeof(float) * S * W), *da = tk_up(k, add, sizeof(float) * N * W);
  float *dw = tk_up(k, wt, sizeof(float) * N * K), *dout;
  int32_t *dr = tk_up(k, rows, sizeof rows);
  cr_assert_eq(k->ops->alloc(k, sizeof(float) * N * W, (void **)&dout), 0);
  float out[N * W], want[N * W];
  for (int pass = 0; pass < 2; pass++) { /* with and without the added rows */
    cr_assert_eq(k->ops->weighted_sum_rows(k, N, K, W, ds, W, S, dr, dw, pass ? da : NULL, W, dout, W), 0);
    tk_down(k, out, dout, sizeof out);
    for (int t = 0; t < N; t++)
      for (int c = 0; c < W; c++) {
        float acc = 0.0f; /* the same f32 order: picks in i order, then add */
        for (int i = 0; i < K; i++)
          if (rows[t * K + i] >= 0) acc += wt[t * K + i] * src[rows[t * K + i] * W + c];
        want[t * W + c] = pass ? acc + add[t * W + c] : acc;
      }
    cr_assert_eq(memcmp(out, want, sizeof out), 0, "pass %d", pass);
  }
  rows[4] = S; /* outside the source rows */
  int32_t *dbad = tk_up(k, rows, sizeof rows);
  cr_assert_eq(k->ops->weighted_sum_rows(k, N, K, W, ds, W, S, dbad, dw, NULL, W, dout, W), SC_ERANGE);
  cr_assert_eq(k->ops->weighted_sum_rows(k, N, K, W, ds, W, S, NULL, dw, NULL, W, dout, W), SC_EINVAL);
  free(src), free(add), free(wt);
  k->ops->free(k, ds), k->ops->free(k, da), k->ops->free(k, dw), k->ops->free(k, dr);
  k->ops->free(k, dbad), k->ops->free(k, dout);
  sc_kernels_destroy(k);
}
