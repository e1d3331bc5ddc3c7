/* Kernel tests: sparse MLA attention and the LSE merge (SPEC.md §7). */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/bf16.h"
#include "test_kernels.h"

/* ---- the SPEC.md §7 example: scores (0,1,2,3), values (1,2,4,8), split {0,1} {2,3} ---- */

/* One head, dc = 1 (the value), dr = 1 (carries the score: q = [0, 1]). */
static void spec_attention(sc_kernels *k, const int32_t *sel_host, int32_t topk, float *out,
                           float *lse) {
  const float q_host[2] = {0.0f, 1.0f};
  const float kv_host[8] = {1, 0, 2, 1, 4, 2, 8, 3}; /* rows [value ; score] */
  float *q = tk_up(k, q_host, sizeof q_host);
  float *kv = tk_up(k, kv_host, sizeof kv_host);
  int32_t *sel = tk_up(k, sel_host, sizeof(int32_t) * (size_t)topk);
  float *o = tk_zeros(k, sizeof(float)), *l = tk_zeros(k, sizeof(float));
  const sc_attn_args a = {.n_tok = 1, .n_heads = 1, .dc = 1, .dr = 1, .topk = topk,
                          .scale = 1.0f, .q = q, .ld_q = 2,
                          .kv = {kv, SC_KFMT_F32, 2, 4}, .sel = sel, .ld_sel = topk,
                          .out = o, .ld_out = 1, .lse = l, .ld_lse = 1};
  cr_assert_eq(k->ops->sparse_attn(k, &a), 0);
  tk_down(k, out, o, sizeof(float));
  tk_down(k, lse, l, sizeof(float));
  k->ops->free(k, q);
  k->ops->free(k, kv);
  k->ops->free(k, sel);
  k->ops->free(k, o);
  k->ops->free(k, l);
}

Test(kernels_lse, spec_example) {
  sc_kernels *k = tk_ctx(1);
  float out[2], lse[2], whole_out, whole_lse;
  spec_attention(k, (int32_t[]){0, 1}, 2, &out[0], &lse[0]);
  spec_attention(k, (int32_t[]){-1, 2, 3, -1}, 4, &out[1], &lse[1]);
  spec_attention(k, (int32_t[]){3, 1, 0, 2}, 4, &whole_out, &whole_lse);
  cr_assert_float_eq(lse[0], 1.3133f, 5e-5);
  cr_assert_float_eq(lse[1], 3.3133f, 5e-5);
  cr_assert_float_eq(whole_lse, 3.4402f, 5e-5);
  cr_assert_float_eq(whole_out, 6.3052f, 5e-5);

  /* the merge of the two shards, rank-major as after an all-gather */
  float *l = tk_up(k, lse, sizeof lse), *o = tk_up(k, out, sizeof out);
  float *m = tk_zeros(k, sizeof(float)), *ml = tk_zeros(k, sizeof(float));
  cr_assert_eq(k->ops->lse_merge(k, 2, 1, 1, l, o, m, ml), 0);
  float merged, merged_lse;
  tk_down(k, &merged, m, sizeof merged);
  tk_down(k, &merged_lse, ml, sizeof merged_lse);
  cr_assert_float_eq(merged_lse, 3.4402f, 5e-5);
  cr_assert_float_eq(merged, 6.3052f, 5e-5);
  cr_assert_float_eq(merged, whole_out, 2e-6);

  /* the all-reduce form: each shard scales its own output, the sum is the merge */
  float sum = 0;
  for (int r = 0; r < 2; r++) {
    float *mine = tk_up(k, &out[r], sizeof(float));
    cr_assert_eq(k->ops->lse_scale(k, 2, r, 1, 1, l, mine, NULL), 0);
    float v;
    tk_down(k, &v, mine, sizeof v);
    sum += v;
    k->ops->free(k, mine);
  }
  cr_assert_float_eq(sum, 6.3052f, 5e-5);
  k->ops->free(k, l);
  k->ops->free(k, o);
  k->ops->free(k, m);
  k->ops->free(k, ml);
  sc_kernels_destroy(k);
}

Test(kernels_lse, nan_inf_and_empty_shards) {
  sc_kernels *k = tk_ctx(1);
  /* 4 rows x 3 shards, width 2. Row 0: shard 1 NaN, shard 2 +inf -> only shard 0 counts.
   * Row 1: all -inf (out 0, L -inf). Row 2: shard 0 -inf with NaN output (must not leak).
   * Row 3: ordinary. */
  const float lse_h[12] = {0.5f, -INFINITY, -INFINITY, 1.0f,   /* shard 0 */
                           NAN, -INFINITY, 2.0f, 1.0f,         /* shard 1 */
                           INFINITY, -INFINITY, 2.0f, 3.0f};   /* shard 2 */
  float out_h[24];
  for (int i = 0; i < 24; i++) out_h[i] = (float)(i + 1);
  out_h[(0 * 4 + 2) * 2] = NAN;      /* shard 0 row 2 */
  out_h[(1 * 4 + 0) * 2 + 1] = NAN;  /* shard 1 row 0 (its lse is NaN) */
  out_h[(1 * 4 + 1) * 2] = INFINITY; /* shard 1 row 1 (all -inf row) */
  float *l = tk_up(k, lse_h, sizeof lse_h), *o = tk_up(k, out_h, sizeof out_h);
  float *m = tk_zeros(k, 8 * sizeof(float)), *ml = tk_zeros(k, 4 * sizeof(float));
  cr_assert_eq(k->ops->lse_merge(k, 3, 4, 2, l, o, m, ml), 0);
  float mh[8], mlh[4];
  tk_down(k, mh, m, sizeof mh);
  tk_down(k, mlh, ml, sizeof mlh);
  cr_assert_float_eq(mlh[0], 0.5f, 1e-6);
  cr_assert_float_eq(mh[0], out_h[0], 1e-6);
  cr_assert_float_eq(mh[1], out_h[1], 1e-6);
  cr_assert(isinf(mlh[1]) && mlh[1] < 0);
  cr_assert(mh[2] == 0.0f && mh[3] == 0.0f);
  const double l2 = log(2 * exp(2.0)); /* shards 1 and 2 at lse 2 */
  cr_assert_float_eq(mlh[2], (float)l2, 1e-6);
  cr_assert_float_eq(mh[4], 0.5f * (out_h[(1 * 4 + 2) * 2] + out_h[(2 * 4 + 2) * 2]), 1e-5);
  cr_assert(!isnan(mh[5]));
  const double l3 = log(exp(1.0) + exp(1.0) + exp(3.0));
  cr_assert_float_eq(mlh[3], (float)l3, 1e-6);
  const double want =
      (exp(1.0) * out_h[6] + exp(1.0) * out_h[14] + exp(3.0) * out_h[22]) / exp(l3);
  cr_assert_float_eq(mh[6], (float)want, 1e-5);

  /* scale form on every shard, then the sum: same rows, no NaN from empty shards */
  float sum[8] = {0};
  for (int r = 0; r < 3; r++) {
    float *mine = tk_up(k, out_h + r * 8, 8 * sizeof(float));
    cr_assert_eq(k->ops->lse_scale(k, 3, r, 4, 2, l, mine, NULL), 0);
    float v[8];
    tk_down(k, v, mine, sizeof v);
    for (int i = 0; i < 8; i++) sum[i] += v[i];
    k->ops->free(k, mine);
  }
  for (int i = 0; i < 8; i++) cr_assert_float_eq(sum[i], mh[i], 1e-5, "i=%d", i);
  cr_assert_eq(k->ops->lse_scale(k, 3, 3, 4, 2, l, o, NULL), SC_EINVAL);
  k->ops->free(k, l);
  k->ops->free(k, o);
  k->ops->free(k, m);
  k->ops->free(k, ml);
  sc_kernels_destroy(k);
}

/* ---- attention vs a float64 dense softmax over the same selected rows ---- */

typedef struct {
  int32_t n_tok, n_heads, dc, dr, topk, rows;
  sc_kfmt fmt;
} attn_shape;

/* KV row value as the kernel sees it (bf16 rows are rounded). */
static double kv_val(const float *kv, sc_kfmt fmt, int64_t i) {
  return fmt == SC_KFMT_BF16 ? sc_bf16_to_f32(sc_f32_to_bf16(kv[i])) : kv[i];
}

static void check_attention(const attn_shape *sh, int threads, uint64_t seed) {
  sc_kernels *k = tk_ctx(threads);
  const int64_t w = (int64_t)sh->dc + sh->dr, ldkv = w + 8; /* rows wider than kv_width */
  const int64_t nq = (int64_t)sh->n_tok * sh->n_heads * w;
  float *qh = tk_rand_f32(&seed, (size_t)nq, -1, 1);
  float *kvh = tk_rand_f32(&seed, (size_t)(sh->rows * ldkv), -1, 1);
  int32_t *selh = malloc(sizeof(int32_t) * (size_t)sh->n_tok * sh->topk);
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)sh->rows);
  for (int32_t t = 0; t < sh->n_tok; t++) {
    for (int32_t r = 0; r < sh->rows; r++) perm[r] = r;
    tk_shuffle_i32(&seed, perm, sh->rows);
    const int32_t nsel = t == 1 ? 0 : (int32_t)tk_int(&seed, 1, sh->topk); /* token 1: none */
    for (int32_t i = 0; i < sh->topk; i++) selh[t * sh->topk + i] = i < nsel ? perm[i] : -1;
    tk_shuffle_i32(&seed, selh + t * sh->topk, sh->topk); /* -1 anywhere */
  }
  void *kvbuf;
  if (sh->fmt == SC_KFMT_BF16) {
    uint16_t *b = malloc(sizeof(uint16_t) * (size_t)(sh->rows * ldkv));
    for (int64_t i = 0; i < sh->rows * ldkv; i++) b[i] = sc_f32_to_bf16(kvh[i]);
    kvbuf = tk_up(k, b, sizeof(uint16_t) * (size_t)(sh->rows * ldkv));
    free(b);
  } else {
    kvbuf = tk_up(k, kvh, sizeof(float) * (size_t)(sh->rows * ldkv));
  }
  float *q = tk_up(k, qh, sizeof(float) * (size_t)nq);
  int32_t *sel = tk_up(k, selh, sizeof(int32_t) * (size_t)sh->n_tok * sh->topk);
  const int64_t nout = (int64_t)sh->n_tok * sh->n_heads * sh->dc;
  float *o = tk_zeros(k, sizeof(float) * (size_t)nout);
  float *l = tk_zeros(k, sizeof(float) * (size_t)sh->n_tok * sh->n_heads);
  const float scale = 1.0f / sqrtf((float)w);
  const sc_attn_args a = {.n_tok = sh->n_tok, .n_heads = sh->n_heads, .dc = sh->dc,
                          .dr = sh->dr, .topk = sh->topk, .scale = scale, .q = q,
                          .ld_q = sh->n_heads * w, .kv = {kvbuf, sh->fmt, ldkv, sh->rows},
                          .sel = sel, .ld_sel = sh->topk, .out = o,
                          .ld_out = (int64_t)sh->n_heads * sh->dc, .lse = l,
                          .ld_lse = sh->n_heads};
  cr_assert_eq(k->ops->sparse_attn(k, &a), 0);
  float *oh = malloc(sizeof(float) * (size_t)nout);
  float *lh = malloc(sizeof(float) * (size_t)sh->n_tok * sh->n_heads);
  tk_down(k, oh, o, sizeof(float) * (size_t)nout);
  tk_down(k, lh, l, sizeof(float) * (size_t)sh->n_tok * sh->n_heads);

  double max_err = 0, max_ref = 0;
  double *s = malloc(sizeof(double) * (size_t)sh->topk);
  for (int32_t t = 0; t < sh->n_tok; t++)
    for (int32_t h = 0; h < sh->n_heads; h++) {
      const float *qq = qh + ((int64_t)t * sh->n_heads + h) * w;
      const float *oo = oh + ((int64_t)t * sh->n_heads + h) * sh->dc;
      const float lse = lh[t * sh->n_heads + h];
      int32_t n = 0;
      double m = -INFINITY;
      for (int32_t i = 0; i < sh->topk; i++) {
        const int32_t r = selh[t * sh->topk + i];
        if (r < 0) continue;
        double acc = 0;
        for (int64_t x = 0; x < w; x++) acc += (double)qq[x] * kv_val(kvh, sh->fmt, r * ldkv + x);
        s[n] = acc * scale;
        m = s[n] > m ? s[n] : m;
        n++;
      }
      if (n == 0) {
        cr_assert(isinf(lse) && lse < 0, "t=%d h=%d lse=%g", t, h, lse);
        for (int32_t x = 0; x < sh->dc; x++) cr_assert_eq(oo[x], 0.0f);
        continue;
      }
      double z = 0;
      for (int32_t i = 0; i < n; i++) z += exp(s[i] - m);
      const double ref_lse = m + log(z);
      cr_assert(fabs(lse - ref_lse) <= 1e-6 * fmax(1.0, fabs(ref_lse)),
                "lse %g vs %g", lse, ref_lse);
      for (int32_t x = 0; x < sh->dc; x++) {
        double ref = 0;
        int32_t j = 0;
        for (int32_t i = 0; i < sh->topk; i++) {
          const int32_t r = selh[t * sh->topk + i];
          if (r < 0) continue;
          ref += exp(s[j++] - ref_lse) * kv_val(kvh, sh->fmt, r * ldkv + x);
        }
        max_err = fmax(max_err, fabs(oo[x] - ref));
        max_ref = fmax(max_ref, fabs(ref));
      }
    }
  cr_assert(max_ref > 0);
  cr_assert(max_err / max_ref < 1e-6, "relative error %g", max_err / max_ref);
  free(s);
  free(qh);
  free(kvh);
  free(selh);
  free(perm);
  free(oh);
  free(lh);
  k->ops->free(k, kvbuf);
  k->ops->free(k, q);
  k->ops->free(k, sel);
  k->ops->free(k, o);
  k->ops->free(k, l);
  sc_kernels_destroy(k);
}

Test(kernels_attn, small_f32_vs_float64) {
  check_attention(&(attn_shape){5, 4, 64, 16, 40, 100, SC_KFMT_F32}, 1, 1);
}

Test(kernels_attn, small_bf16_vs_float64_threads) {
  check_attention(&(attn_shape){7, 3, 32, 8, 24, 60, SC_KFMT_BF16}, 2, 2);
}

Test(kernels_attn, real_row_576_vs_float64) {
  check_attention(&(attn_shape){4, 8, 512, 64, 256, 700, SC_KFMT_F32}, 2, 3);
}

/* Attention split over DCP shards and merged equals attention over the union. */
Test(kernels_attn, shards_merge_to_whole) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 7;
  const int32_t n_tok = 6, nh = 4, dc = 48, dr = 16, topk = 64, rows = 200, ns = 3;
  const int64_t w = dc + dr;
  float *qh = tk_rand_f32(&seed, (size_t)(n_tok * nh * w), -2, 2);
  float *kvh = tk_rand_f32(&seed, (size_t)(rows * w), -2, 2);
  int32_t sel_all[6 * 64], sel_sh[3 * 6 * 64];
  int32_t perm[200];
  for (int32_t t = 0; t < n_tok; t++) {
    for (int32_t r = 0; r < rows; r++) perm[r] = r;
    tk_shuffle_i32(&seed, perm, rows);
    for (int32_t i = 0; i < topk; i++) {
      /* token 0 selects rows 0, ns, 2ns, ...: all on shard 0, shards 1 and 2 empty */
      const int32_t r = t == 0 ? i * ns : perm[i];
      sel_all[t * topk + i] = r;
      for (int32_t s = 0; s < ns; s++)
        sel_sh[(s * n_tok + t) * topk + i] = r % ns == s ? r : -1;
    }
  }
  float *q = tk_up(k, qh, sizeof(float) * (size_t)(n_tok * nh * w));
  float *kv = tk_up(k, kvh, sizeof(float) * (size_t)(rows * w));
  int32_t *sa = tk_up(k, sel_all, sizeof sel_all), *ss = tk_up(k, sel_sh, sizeof sel_sh);
  const int64_t per = (int64_t)n_tok * nh * dc;
  float *o_all = tk_zeros(k, sizeof(float) * (size_t)per);
  float *l_all = tk_zeros(k, sizeof(float) * (size_t)(n_tok * nh));
  float *o_sh = tk_zeros(k, sizeof(float) * (size_t)(ns * per));
  float *l_sh = tk_zeros(k, sizeof(float) * (size_t)(ns * n_tok * nh));
  sc_attn_args a = {.n_tok = n_tok, .n_heads = nh, .dc = dc, .dr = dr, .topk = topk,
                    .scale = 0.125f, .q = q, .ld_q = nh * w,
                    .kv = {kv, SC_KFMT_F32, w, rows}, .sel = sa, .ld_sel = topk,
                    .out = o_all, .ld_out = nh * dc, .lse = l_all, .ld_lse = nh};
  cr_assert_eq(k->ops->sparse_attn(k, &a), 0);
  for (int32_t s = 0; s < ns; s++) {
    a.sel = ss + s * n_tok * topk;
    a.out = o_sh + s * per;
    a.lse = l_sh + s * n_tok * nh;
    cr_assert_eq(k->ops->sparse_attn(k, &a), 0);
  }
  float *o_m = tk_zeros(k, sizeof(float) * (size_t)per);
  float *l_m = tk_zeros(k, sizeof(float) * (size_t)(n_tok * nh));
  cr_assert_eq(k->ops->lse_merge(k, ns, n_tok * nh, dc, l_sh, o_sh, o_m, l_m), 0);
  float *x = malloc(sizeof(float) * (size_t)per), *y = malloc(sizeof(float) * (size_t)per);
  tk_down(k, x, o_all, sizeof(float) * (size_t)per);
  tk_down(k, y, o_m, sizeof(float) * (size_t)per);
  double err = 0, ref = 0;
  for (int64_t i = 0; i < per; i++) {
    err = fmax(err, fabs(x[i] - y[i]));
    ref = fmax(ref, fabs(x[i]));
  }
  cr_assert(err / ref < 1e-6, "merge vs whole: %g", err / ref);
  float la[24], lm[24];
  tk_down(k, la, l_all, sizeof la);
  tk_down(k, lm, l_m, sizeof lm);
  for (int i = 0; i < n_tok * nh; i++) cr_assert_float_eq(la[i], lm[i], 1e-5);
  free(qh);
  free(kvh);
  free(x);
  free(y);
  void *bufs[] = {q, kv, sa, ss, o_all, l_all, o_sh, l_sh, o_m, l_m};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}

Test(kernels_attn, rejects_out_of_range_rows_and_bad_shapes) {
  sc_kernels *k = tk_ctx(1);
  float *q = tk_zeros(k, 4 * sizeof(float)), *kv = tk_zeros(k, 8 * sizeof(float));
  float *o = tk_zeros(k, 4 * sizeof(float)), *l = tk_zeros(k, 4 * sizeof(float));
  int32_t *sel = tk_up(k, (int32_t[]){0, 2}, 2 * sizeof(int32_t));
  sc_attn_args a = {.n_tok = 1, .n_heads = 1, .dc = 1, .dr = 1, .topk = 2, .scale = 1,
                    .q = q, .ld_q = 2, .kv = {kv, SC_KFMT_F32, 2, 2}, .sel = sel,
                    .ld_sel = 2, .out = o, .ld_out = 1, .lse = l, .ld_lse = 1};
  cr_assert_eq(k->ops->sparse_attn(k, &a), SC_ERANGE); /* row 2 of 2 */
  a.kv.rows = 3;
  a.kv.ld = 1; /* narrower than dc + dr */
  cr_assert_eq(k->ops->sparse_attn(k, &a), SC_EINVAL);
  a.kv.ld = 2;
  a.kv.fmt = (sc_kfmt)7;
  cr_assert_eq(k->ops->sparse_attn(k, &a), SC_ENOTSUP);
  void *bufs[] = {q, kv, o, l, sel};
  for (size_t i = 0; i < 5; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}

/* Several contexts driven by several threads at once (the threaded harness runs one per
 * rank): every thread must get exactly the single-threaded result. */
typedef struct {
  const float *q, *kv;
  const int32_t *sel;
  int32_t n_tok, nh, topk, rows;
  float *out; /* host result */
  int rc;
} conc_job;

enum { CONC_DC = 128, CONC_DR = 32 };

static void *conc_run(void *p) {
  conc_job *j = p;
  sc_kernels *k = NULL;
  j->rc = sc_kernels_cpu_create(&k, 2);
  if (j->rc != 0) return NULL;
  const int64_t w = CONC_DC + CONC_DR;
  const size_t nq = (size_t)j->n_tok * j->nh * w, nkv = (size_t)j->rows * w;
  const size_t nsel = (size_t)j->n_tok * j->topk, nout = (size_t)j->n_tok * j->nh * CONC_DC;
  void *q = NULL, *kv = NULL, *sel = NULL, *o = NULL, *l = NULL;
  if ((j->rc = k->ops->alloc(k, nq * 4, &q)) || (j->rc = k->ops->alloc(k, nkv * 4, &kv)) ||
      (j->rc = k->ops->alloc(k, nsel * 4, &sel)) || (j->rc = k->ops->alloc(k, nout * 4, &o)) ||
      (j->rc = k->ops->alloc(k, (size_t)j->n_tok * j->nh * 4, &l)) ||
      (j->rc = k->ops->copy(k, q, j->q, nq * 4, SC_KCOPY_H2D)) ||
      (j->rc = k->ops->copy(k, kv, j->kv, nkv * 4, SC_KCOPY_H2D)) ||
      (j->rc = k->ops->copy(k, sel, j->sel, nsel * 4, SC_KCOPY_H2D)))
    goto out;
  const sc_attn_args a = {.n_tok = j->n_tok, .n_heads = j->nh, .dc = CONC_DC, .dr = CONC_DR,
                          .topk = j->topk, .scale = 0.1f, .q = q, .ld_q = j->nh * w,
                          .kv = {kv, SC_KFMT_F32, w, j->rows}, .sel = sel, .ld_sel = j->topk,
                          .out = o, .ld_out = (int64_t)j->nh * CONC_DC, .lse = l,
                          .ld_lse = j->nh};
  for (int rep = 0; rep < 5 && j->rc == 0; rep++) j->rc = k->ops->sparse_attn(k, &a);
  if (j->rc == 0) j->rc = k->ops->copy(k, j->out, o, nout * 4, SC_KCOPY_D2H);
out:
  k->ops->free(k, q);
  k->ops->free(k, kv);
  k->ops->free(k, sel);
  k->ops->free(k, o);
  k->ops->free(k, l);
  sc_kernels_destroy(k);
  return NULL;
}

Test(kernels_attn, concurrent_contexts_agree) {
  uint64_t seed = 99;
  const int32_t n_tok = 24, nh = 8, topk = 96, rows = 400;
  const int64_t w = CONC_DC + CONC_DR;
  float *q = tk_rand_f32(&seed, (size_t)(n_tok * nh * w), -1, 1);
  float *kv = tk_rand_f32(&seed, (size_t)(rows * w), -1, 1);
  int32_t *sel = malloc(sizeof(int32_t) * (size_t)(n_tok * topk));
  for (int32_t i = 0; i < n_tok * topk; i++) sel[i] = (int32_t)tk_int(&seed, -1, rows - 1);
  const size_t nout = (size_t)n_tok * nh * CONC_DC;
  enum { NT = 4 };
  conc_job jobs[NT + 1];
  pthread_t th[NT];
  for (int i = 0; i <= NT; i++) {
    jobs[i] = (conc_job){q, kv, sel, n_tok, nh, topk, rows, calloc(nout, sizeof(float)), 0};
    cr_assert_not_null(jobs[i].out);
  }
  conc_run(&jobs[NT]); /* the reference, alone */
  cr_assert_eq(jobs[NT].rc, 0);
  for (int i = 0; i < NT; i++) cr_assert_eq(pthread_create(&th[i], NULL, conc_run, &jobs[i]), 0);
  for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < NT; i++) {
    cr_assert_eq(jobs[i].rc, 0, "thread %d: %d", i, jobs[i].rc);
    cr_assert(memcmp(jobs[i].out, jobs[NT].out, nout * sizeof(float)) == 0, "thread %d differs", i);
  }
  for (int i = 0; i <= NT; i++) free(jobs[i].out);
  free(q);
  free(kv);
  free(sel);
}
