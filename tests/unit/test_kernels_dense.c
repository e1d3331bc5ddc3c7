/* Kernel tests: dense products against a naive float64 product, RMSNorm, RoPE, SwiGLU
 * and the residual add against their direct formulas, memory ops, argument checks. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/cpu_internal.h"
#include "test_kernels.h"

static double rel_err(const float *got, const double *want, int64_t n) {
  double e = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    e = fmax(e, fabs(got[i] - want[i]));
    m = fmax(m, fabs(want[i]));
  }
  return m > 0 ? e / m : e;
}

static void check_gemm(bool ta, bool tb, int64_t batch, uint64_t seed) {
  sc_kernels *k = tk_ctx(1);
  const int64_t m = 7, n = 5, kk = 9;
  const int64_t lda = (ta ? m : kk) + 2, ldb = (tb ? kk : n) + 3, ldc = n + 1;
  const int64_t ra = ta ? kk : m, rb = tb ? n : kk;
  const int64_t sa = ra * lda + 5, sb = rb * ldb + 1, sc = m * ldc + 2;
  const int64_t nb = batch > 1 ? batch : 1;
  float *a = tk_rand_f32(&seed, (size_t)(sa * nb), -1, 1);
  float *b = tk_rand_f32(&seed, (size_t)(sb * nb), -1, 1);
  float *c = tk_rand_f32(&seed, (size_t)(sc * nb), -1, 1);
  double *want = malloc(sizeof(double) * (size_t)(sc * nb));
  const float alpha = 0.75f, beta = -0.5f;
  for (int64_t bi = 0; bi < nb; bi++)
    for (int64_t i = 0; i < sc; i++) want[bi * sc + i] = c[bi * sc + i];
  for (int64_t bi = 0; bi < nb; bi++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t x = 0; x < kk; x++) {
          const double av = ta ? a[bi * sa + x * lda + i] : a[bi * sa + i * lda + x];
          const double bv = tb ? b[bi * sb + j * ldb + x] : b[bi * sb + x * ldb + j];
          s += av * bv;
        }
        want[bi * sc + i * ldc + j] = alpha * s + beta * c[bi * sc + i * ldc + j];
      }
  float *da = tk_up(k, a, sizeof(float) * (size_t)(sa * nb));
  float *db = tk_up(k, b, sizeof(float) * (size_t)(sb * nb));
  float *dc = tk_up(k, c, sizeof(float) * (size_t)(sc * nb));
  const sc_gemm g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = kk, .alpha = alpha,
                     .beta = beta, .a = da, .lda = lda, .stride_a = sa, .b = db, .ldb = ldb,
                     .stride_b = sb, .c = dc, .ldc = ldc, .stride_c = sc, .batch = batch};
  cr_assert_eq(k->ops->gemm(k, &g), 0);
  tk_down(k, c, dc, sizeof(float) * (size_t)(sc * nb));
  cr_assert_lt(rel_err(c, want, sc * nb), 1e-6, "ta=%d tb=%d", ta, tb);
  free(a);
  free(b);
  free(c);
  free(want);
  k->ops->free(k, da);
  k->ops->free(k, db);
  k->ops->free(k, dc);
  sc_kernels_destroy(k);
}

Test(kernels_dense, gemm_nn) { check_gemm(false, false, 1, 1); }
Test(kernels_dense, gemm_nt) { check_gemm(false, true, 0, 2); }
Test(kernels_dense, gemm_tn) { check_gemm(true, false, 1, 3); }
Test(kernels_dense, gemm_tt_batched) { check_gemm(true, true, 3, 4); }
Test(kernels_dense, gemm_nt_batched) { check_gemm(false, true, 4, 5); }

Test(kernels_dense, gemm_rejects_short_leading_dimensions) {
  sc_kernels *k = tk_ctx(1);
  float *x = tk_zeros(k, 64 * sizeof(float));
  sc_gemm g = {.m = 2, .n = 3, .k = 4, .alpha = 1, .a = x, .lda = 3, .b = x, .ldb = 3,
               .c = x, .ldc = 3};
  cr_assert_eq(k->ops->gemm(k, &g), SC_EINVAL, "lda 3 < k 4");
  g.lda = 4;
  g.ldc = 2;
  cr_assert_eq(k->ops->gemm(k, &g), SC_EINVAL, "ldc 2 < n 3");
  g.ldc = 3;
  cr_assert_eq(k->ops->gemm(k, &g), 0);
  k->ops->free(k, x);
  sc_kernels_destroy(k);
}

/* The linears op: every part against the naive product in float64, through one output
 * buffer with a row pitch wider than any part (the parts side by side, as the forward
 * pass lays out the KV row and the index key), and gated against SwiGLU's formula. */
static void check_linears(bool gated, uint64_t seed) {
  sc_kernels *k = tk_ctx(2);
  const int64_t rows = 3, kk = 10, ldx = 12, n[3] = {4, 7, 2}, ldw[3] = {10, 13, 11};
  const float alpha[3] = {1.0f, -0.5f, 0.25f};
  const int parts = gated ? 2 : 3;
  const int64_t nn = gated ? 4 : n[0] + n[1] + n[2], ldo = nn + 3; /* gated: n 4, 4 */
  float *x = tk_rand_f32(&seed, (size_t)(rows * ldx), -1, 1);
  float *w[3], *dw[3];
  for (int j = 0; j < parts; j++) {
    w[j] = tk_rand_f32(&seed, (size_t)((gated ? 4 : n[j]) * ldw[j]), -1, 1);
    dw[j] = tk_up(k, w[j], sizeof(float) * (size_t)((gated ? 4 : n[j]) * ldw[j]));
  }
  float *dx = tk_up(k, x, sizeof(float) * (size_t)(rows * ldx));
  float *dout = tk_zeros(k, sizeof(float) * (size_t)(rows * ldo)),
        *dup = tk_zeros(k, sizeof(float) * (size_t)(rows * 4));
  sc_linears a = {.rows = rows, .k = kk, .x = dx, .ld_x = ldx, .n_parts = parts, .gated = gated};
  int64_t col = 0;
  for (int j = 0; j < parts; j++) {
    const int64_t nj = gated ? 4 : n[j];
    a.part[j] = (sc_linear_part){dw[j], nj, ldw[j], alpha[j], dout + col, ldo};
    if (!gated) col += nj;
  }
  if (gated) a.part[1].out = dup, a.part[1].ld_out = 4;
  cr_assert_eq(k->ops->linears(k, &a), 0);
  float *out = malloc(sizeof(float) * (size_t)(rows * ldo));
  tk_down(k, out, dout, sizeof(float) * (size_t)(rows * ldo));
  double *want = calloc((size_t)(rows * ldo), sizeof(double));
  for (int64_t r = 0; r < rows; r++) {
    col = 0;
    for (int j = 0; j < (gated ? 1 : parts); j++) {
      const int64_t nj = gated ? 4 : n[j];
      for (int64_t i = 0; i < nj; i++) {
        double d[2] = {0, 0};
        for (int q = 0; q < (gated ? 2 : 1); q++)
          for (int64_t c = 0; c < kk; c++)
            d[q] += (double)x[r * ldx + c] * w[j + q][i * ldw[j + q] + c];
        const double g = alpha[j] * d[0];
        want[r * ldo + col + i] = gated ? g / (1 + exp(-g)) * (alpha[1] * d[1]) : g;
      }
      col += nj;
    }
    for (int64_t c = col; c < ldo; c++) want[r * ldo + c] = 0; /* untouched */
  }
  cr_assert_lt(rel_err(out, want, rows * ldo), 1e-6, "gated=%d", gated);
  for (int j = 0; j < parts; j++) free(w[j]), k->ops->free(k, dw[j]);
  free(x), free(out), free(want);
  k->ops->free(k, dx);
  k->ops->free(k, dout);
  k->ops->free(k, dup);
  sc_kernels_destroy(k);
}

Test(kernels_dense, linears_match_the_products) { check_linears(false, 6); }
Test(kernels_dense, linears_gated_match_swiglu) { check_linears(true, 7); }

Test(kernels_dense, linears_reject_bad_arguments) {
  sc_kernels *k = tk_ctx(1);
  float *x = tk_zeros(k, 64 * sizeof(float));
  sc_linears a = {.rows = 2, .k = 4, .x = x, .ld_x = 4, .n_parts = 2,
                  .part = {{x, 3, 4, 1.0f, x + 32, 3}, {x, 2, 4, 1.0f, x + 48, 2}}};
  cr_assert_eq(k->ops->linears(k, &a), 0);
  a.gated = true;
  cr_assert_eq(k->ops->linears(k, &a), SC_EINVAL, "gated parts of unequal widths");
  a.gated = false;
  a.n_parts = 0;
  cr_assert_eq(k->ops->linears(k, &a), SC_EINVAL, "no part");
  a.n_parts = SC_LINEARS_MAX + 1;
  cr_assert_eq(k->ops->linears(k, &a), SC_EINVAL, "too many parts");
  a.n_parts = 2;
  a.part[1].ld_w = 3;
  cr_assert_eq(k->ops->linears(k, &a), SC_EINVAL, "ld_w 3 < k 4");
  a.part[1].ld_w = 4;
  a.part[0].ld_out = 2;
  cr_assert_eq(k->ops->linears(k, &a), SC_EINVAL, "ld_out 2 < n 3");
  a.part[0].ld_out = 3;
  a.part[1].out = NULL;
  cr_assert_eq(k->ops->linears(k, &a), SC_EINVAL, "no output");
  a.rows = 0; /* nothing to do: no pointer is looked at */
  cr_assert_eq(k->ops->linears(k, &a), 0);
  k->ops->free(k, x);
  sc_kernels_destroy(k);
}

/* 1 / sqrt(mean(v^2) + eps) in double: RMSNorm's factor for the reference. */
static double rms_inv_ref(const float *v, int64_t dim, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < dim; i++) ss += (double)v[i] * v[i];
  return 1.0 / sqrt(ss / dim + eps);
}

Test(kernels_dense, rmsnorm_matches_formula_in_place_and_without_weight) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 9;
  const int64_t rows = 130, dim = 48, ld = 50;
  float *x = tk_rand_f32(&seed, (size_t)(rows * ld), -4, 4);
  float *w = tk_rand_f32(&seed, (size_t)dim, 0.5, 1.5);
  float *dx = tk_up(k, x, sizeof(float) * (size_t)(rows * ld));
  float *dw = tk_up(k, w, sizeof(float) * (size_t)dim);
  float *dout = tk_zeros(k, sizeof(float) * (size_t)(rows * dim));
  const float eps = 1e-6f;
  cr_assert_eq(k->ops->rmsnorm(k, rows, dim, dx, ld, dw, eps, dout, dim), 0);
  cr_assert_eq(k->ops->rmsnorm(k, rows, dim, dx, ld, NULL, eps, dx, ld), 0); /* in place */
  float *o = malloc(sizeof(float) * (size_t)(rows * dim)), *xi = malloc(sizeof(float) * (size_t)(rows * ld));
  tk_down(k, o, dout, sizeof(float) * (size_t)(rows * dim));
  tk_down(k, xi, dx, sizeof(float) * (size_t)(rows * ld));
  for (int64_t r = 0; r < rows; r++) {
    const double inv = rms_inv_ref(x + r * ld, dim, eps);
    for (int64_t i = 0; i < dim; i++) {
      const double v = x[r * ld + i] * inv;
      cr_assert(fabs(o[r * dim + i] - v * w[i]) <= 1e-6 * fmax(1, fabs(v * w[i])));
      cr_assert(fabs(xi[r * ld + i] - v) <= 1e-6 * fmax(1, fabs(v)));
    }
    for (int64_t i = dim; i < ld; i++) cr_assert_eq(xi[r * ld + i], x[r * ld + i], "padding kept");
  }
  free(x);
  free(w);
  free(o);
  free(xi);
  k->ops->free(k, dx);
  k->ops->free(k, dw);
  k->ops->free(k, dout);
  sc_kernels_destroy(k);
}

/* add_rmsnorm twice: with a weight into its own output, and in place (out = y) without
 * one; y must hold the sums (its padding kept), the outputs their norms. */
Test(kernels_dense, add_rmsnorm_adds_then_norms_the_sums) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 10;
  const int64_t rows = 5, dim = 24, ld = 26;
  const size_t ny = sizeof(float) * (size_t)(rows * ld), no = sizeof(float) * (size_t)(rows * dim);
  float *x = tk_rand_f32(&seed, (size_t)(rows * ld), -2, 2);
  float *y = tk_rand_f32(&seed, (size_t)(rows * ld), -2, 2);
  float *w = tk_rand_f32(&seed, (size_t)dim, 0.5, 1.5);
  float *dx = tk_up(k, x, ny), *dy = tk_up(k, y, ny), *dy2 = tk_up(k, y, ny);
  float *dw = tk_up(k, w, sizeof(float) * (size_t)dim), *dout = tk_zeros(k, no);
  cr_assert_eq(k->ops->add_rmsnorm(k, rows, dim, dx, ld, dy, ld, dw, 1e-6f, dout, dim), 0);
  cr_assert_eq(k->ops->add_rmsnorm(k, rows, dim, dx, ld, dy2, ld, NULL, 1e-6f, dy2, ld), 0);
  float *ys = malloc(ny), *yn = malloc(ny), *o = malloc(no);
  float *sum = malloc(sizeof(float) * (size_t)dim);
  tk_down(k, ys, dy, ny);
  tk_down(k, yn, dy2, ny);
  tk_down(k, o, dout, no);
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t i = 0; i < dim; i++) {
      sum[i] = y[r * ld + i] + x[r * ld + i];
      cr_assert_eq(ys[r * ld + i], sum[i], "y holds the sums");
    }
    for (int64_t i = dim; i < ld; i++) cr_assert_eq(ys[r * ld + i], y[r * ld + i], "padding kept");
    const double inv = rms_inv_ref(sum, dim, 1e-6);
    for (int64_t i = 0; i < dim; i++) {
      const double v = sum[i] * inv;
      cr_assert(fabs(o[r * dim + i] - v * w[i]) <= 1e-6 * fmax(1, fabs(v * w[i])));
      cr_assert(fabs(yn[r * ld + i] - v) <= 1e-6 * fmax(1, fabs(v)), "in place, no weight");
    }
  }
  free(x), free(y), free(w), free(ys), free(yn), free(o), free(sum);
  k->ops->free(k, dx), k->ops->free(k, dy), k->ops->free(k, dy2), k->ops->free(k, dw);
  k->ops->free(k, dout);
  sc_kernels_destroy(k);
}

Test(kernels_dense, rope_rotates_interleaved_pairs) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 10;
  const int64_t n_tok = 40, ld_tok = 3 * 24 + 5, ld_head = 24;
  const int32_t nh = 3, rot = 16;
  const float theta = 10000.0f;
  float *x = tk_rand_f32(&seed, (size_t)(n_tok * ld_tok), -1, 1);
  int32_t pos[40];
  for (int i = 0; i < 40; i++) pos[i] = i == 0 ? 0 : (int32_t)tk_int(&seed, 1, 200000);
  float *dx = tk_up(k, x, sizeof(float) * (size_t)(n_tok * ld_tok));
  int32_t *dpos = tk_up(k, pos, sizeof pos);
  cr_assert_eq(k->ops->rope(k, n_tok, nh, rot, dx, ld_tok, ld_head, dpos, theta), 0);
  float *y = malloc(sizeof(float) * (size_t)(n_tok * ld_tok));
  tk_down(k, y, dx, sizeof(float) * (size_t)(n_tok * ld_tok));
  for (int64_t t = 0; t < n_tok; t++)
    for (int64_t c = 0; c < ld_tok; c++) {
      const int64_t h = c / ld_head, i = c % ld_head;
      const int64_t at = t * ld_tok + c;
      if (h >= nh || i >= rot) {
        cr_assert_eq(y[at], x[at], "outside the rotary part: unchanged");
        continue;
      }
      const int64_t pair = i / 2;
      const double ang = pos[t] * pow(theta, -2.0 * (double)pair / rot);
      const double a = x[at - (i % 2)], b = x[at - (i % 2) + 1];
      const double want = i % 2 == 0 ? a * cos(ang) - b * sin(ang) : a * sin(ang) + b * cos(ang);
      cr_assert(fabs(y[at] - want) < 2e-6, "t=%ld c=%ld: %g vs %g", (long)t, (long)c, y[at], want);
    }
  free(x);
  free(y);
  k->ops->free(k, dx);
  k->ops->free(k, dpos);
  sc_kernels_destroy(k);
}

Test(kernels_dense, ropes_rotate_each_part_as_rope_does) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 12;
  enum { NT = 6, LA = 2 * 20 + 3, LB = 18, LC = 3 * 10, LO = 3 * 12 + 1 };
  const size_t n = (size_t)NT * (LA + LB + LC), no = (size_t)NT * LO;
  float *x = tk_rand_f32(&seed, n, -1, 1);
  int32_t pos[NT];
  for (int i = 0; i < NT; i++) pos[i] = (int32_t)tk_int(&seed, 0, 100000);
  float *da = tk_up(k, x, sizeof(float) * n), *db = tk_up(k, x, sizeof(float) * n);
  float *dout = tk_zeros(k, sizeof(float) * no);
  int32_t *dpos = tk_up(k, pos, sizeof pos);
  float *c = da + NT * (LA + LB); /* part 2: 3 heads of 10, rotated into dout (heads of 12) */
  sc_ropes r = {.n_tok = NT, .pos = dpos, .theta = 500.0f, .n_parts = 3};
  r.part[0] = (sc_rope_part){.n_heads = 2, .rot_dim = 16, .x = da, .ld_tok = LA, .ld_head = 20};
  r.part[1] = (sc_rope_part){
      .n_heads = 1, .rot_dim = 8, .x = da + NT * LA, .ld_tok = LB, .ld_head = 8};
  r.part[2] = (sc_rope_part){.n_heads = 3, .rot_dim = 10, .x = c, .ld_tok = LC, .ld_head = 10,
                             .out = dout, .ld_tok_out = LO, .ld_head_out = 12};
  cr_assert_eq(k->ops->ropes(k, &r), 0);
  cr_assert_eq(k->ops->rope(k, NT, 2, 16, db, LA, 20, dpos, 500.0f), 0);
  cr_assert_eq(k->ops->rope(k, NT, 1, 8, db + NT * LA, LB, 8, dpos, 500.0f), 0);
  cr_assert_eq(k->ops->rope(k, NT, 3, 10, db + NT * (LA + LB), LC, 10, dpos, 500.0f), 0);
  float *ya = malloc(sizeof(float) * n), *yb = malloc(sizeof(float) * n);
  float *yo = malloc(sizeof(float) * no);
  tk_down(k, ya, da, sizeof(float) * n);
  tk_down(k, yb, db, sizeof(float) * n);
  tk_down(k, yo, dout, sizeof(float) * no);
  const size_t in_place = (size_t)NT * (LA + LB);
  cr_assert(memcmp(ya, yb, sizeof(float) * in_place) == 0, "ropes differ from rope");
  cr_assert(memcmp(ya, x, sizeof(float) * in_place) != 0, "nothing rotated");
  cr_assert(memcmp(ya + in_place, x + in_place, sizeof(float) * (n - in_place)) == 0,
            "an out-of-place part changed its input");
  for (int t = 0; t < NT; t++)
    for (int h = 0; h < 3; h++) {
      cr_assert(memcmp(yo + t * LO + h * 12, yb + in_place + t * LC + h * 10, sizeof(float) * 10) ==
                    0,
                "out of place: token %d head %d differs from rope", t, h);
      cr_assert(yo[t * LO + h * 12 + 10] == 0.0f && yo[t * LO + h * 12 + 11] == 0.0f,
                "out of place: beyond rot_dim written");
    }
  r.n_parts = SC_ROPES_MAX + 1;
  cr_assert_eq(k->ops->ropes(k, &r), SC_EINVAL);
  r.n_parts = 1;
  r.part[0].rot_dim = 15; /* odd */
  cr_assert_eq(k->ops->ropes(k, &r), SC_EINVAL);
  free(x), free(ya), free(yb), free(yo);
  k->ops->free(k, da), k->ops->free(k, db), k->ops->free(k, dout), k->ops->free(k, dpos);
  sc_kernels_destroy(k);
}

Test(kernels_dense, rmsnorms_normalise_each_part_as_rmsnorm_does) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 13;
  enum { NR = 4, DA = 24, LA = 30, DB = 40 };
  const size_t n = (size_t)NR * (LA + DB);
  float *x = tk_rand_f32(&seed, n, -2, 2), *w = tk_rand_f32(&seed, DA, 0.5, 1.5);
  float *da = tk_up(k, x, sizeof(float) * n), *db = tk_up(k, x, sizeof(float) * n);
  float *dw = tk_up(k, w, sizeof(float) * DA);
  const sc_rmsnorms r = {.n_rows = NR, .eps = 1e-5f, .n_parts = 2,
                         .part = {{DA, da, LA, dw, da, LA},
                                  {DB, da + NR * LA, DB, NULL, da + NR * LA, DB}}};
  cr_assert_eq(k->ops->rmsnorms(k, &r), 0);
  cr_assert_eq(k->ops->rmsnorm(k, NR, DA, db, LA, dw, 1e-5f, db, LA), 0);
  cr_assert_eq(k->ops->rmsnorm(k, NR, DB, db + NR * LA, DB, NULL, 1e-5f, db + NR * LA, DB), 0);
  float *ya = malloc(sizeof(float) * n), *yb = malloc(sizeof(float) * n);
  tk_down(k, ya, da, sizeof(float) * n);
  tk_down(k, yb, db, sizeof(float) * n);
  cr_assert(memcmp(ya, yb, sizeof(float) * n) == 0, "rmsnorms differ from rmsnorm");
  cr_assert(memcmp(ya, x, sizeof(float) * n) != 0, "nothing normalised");
  sc_rmsnorms bad = r;
  bad.n_parts = SC_RMSNORMS_MAX + 1;
  cr_assert_eq(k->ops->rmsnorms(k, &bad), SC_EINVAL);
  bad.n_parts = 1;
  bad.part[0].dim = 0;
  cr_assert_eq(k->ops->rmsnorms(k, &bad), SC_EINVAL);
  free(x), free(w), free(ya), free(yb);
  k->ops->free(k, da), k->ops->free(k, db), k->ops->free(k, dw);
  sc_kernels_destroy(k);
}

Test(kernels_dense, swiglu_and_add_match_formula) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 11;
  const int64_t rows = 70, inter = 33, ld = 2 * inter; /* fused [gate | up] rows */
  float *gu = tk_rand_f32(&seed, (size_t)(rows * ld), -6, 6);
  float *dgu = tk_up(k, gu, sizeof(float) * (size_t)(rows * ld));
  float *dout = tk_zeros(k, sizeof(float) * (size_t)(rows * inter));
  cr_assert_eq(k->ops->swiglu(k, rows, inter, dgu, ld, dgu + inter, ld, dout, inter), 0);
  float *o = malloc(sizeof(float) * (size_t)(rows * inter));
  tk_down(k, o, dout, sizeof(float) * (size_t)(rows * inter));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < inter; i++) {
      const double g = gu[r * ld + i], u = gu[r * ld + inter + i];
      const double want = g / (1 + exp(-g)) * u;
      cr_assert(fabs(o[r * inter + i] - want) <= 1e-6 * fmax(1, fabs(want)));
    }
  /* residual: out += first inter columns of gu */
  cr_assert_eq(k->ops->add(k, rows, inter, dgu, ld, dout, inter), 0);
  float *o2 = malloc(sizeof(float) * (size_t)(rows * inter));
  tk_down(k, o2, dout, sizeof(float) * (size_t)(rows * inter));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < inter; i++)
      cr_assert_eq(o2[r * inter + i], o[r * inter + i] + gu[r * ld + i]);
  free(gu);
  free(o);
  free(o2);
  k->ops->free(k, dgu);
  k->ops->free(k, dout);
  sc_kernels_destroy(k);
}

Test(kernels_dense, memory_ops_and_context) {
  cr_assert_eq(sc_kernels_cpu_create(&(sc_kernels *){NULL}, 0), SC_EINVAL);
  sc_kernels *k = tk_ctx(4);
  cr_assert_str_eq(k->device, "cpu");
  void *z = NULL;
  cr_assert_eq(k->ops->alloc(k, 0, &z), 0);
  cr_assert_not_null(z);
  k->ops->free(k, z);
  const char msg[] = "sparse attention";
  char *a = tk_up(k, msg, sizeof msg), *b = tk_zeros(k, sizeof msg);
  cr_assert_eq(k->ops->copy(k, b, a, sizeof msg, SC_KCOPY_D2D), 0);
  cr_assert_eq(k->ops->memset(k, a, 'x', 6), 0);
  char back[sizeof msg];
  tk_down(k, back, b, sizeof msg);
  cr_assert_str_eq(back, msg);
  tk_down(k, back, a, sizeof msg);
  cr_assert_eq(memcmp(back, "xxxxxx attention", sizeof msg), 0);
  cr_assert_eq(k->ops->copy(k, b, a, 1, (sc_kcopy)9), SC_EINVAL);
  k->ops->free(k, a);
  k->ops->free(k, b);
  sc_kernels_destroy(k);
  sc_kernels_destroy(NULL);
}

/* The worker pool really spreads items over its threads (every op relies on it): items
 * that sleep leave room for every worker to be scheduled even on a busy machine. */
typedef struct {
  int hits[4];
  int items;
} pool_probe;

static int probe_items(void *p, int64_t b, int64_t e, int worker) {
  pool_probe *pp = p;
  for (int64_t i = b; i < e; i++) {
    usleep(2000);
    __atomic_fetch_add(&pp->hits[worker], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&pp->items, 1, __ATOMIC_RELAXED);
  }
  return b == 40 ? SC_EIO : 0; /* one failing block (never reached with n <= 40) */
}

Test(kernels_dense, worker_pool_uses_every_thread_and_reports_failures) {
  sc_kernels *k = tk_ctx(3);
  pool_probe pp = {{0}, 0};
  const int rc = sc_kcpu_parallel(sc_kcpu_of(k), 48, 1, probe_items, &pp);
  int used = 0;
  for (int w = 0; w < 3; w++) used += pp.hits[w] > 0;
  cr_assert_geq(used, 2, "items ran on %d thread(s): %d %d %d", used, pp.hits[0], pp.hits[1],
                pp.hits[2]);
  cr_assert_eq(rc, SC_EIO, "the failing block's code comes back");
  /* without the failing block everything runs exactly once */
  pool_probe ok = {{0}, 0};
  cr_assert_eq(sc_kcpu_parallel(sc_kcpu_of(k), 30, 4, probe_items, &ok), 0);
  cr_assert_eq(ok.items, 30);
  sc_kernels_destroy(k);
}
