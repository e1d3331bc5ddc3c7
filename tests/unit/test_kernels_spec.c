/* test_kernels_spec.c - independent checks of SPEC.md §7 kernel semantics:
 * indexer top-K (ties, causality, K > context, direct f32 path over > 256 keys), the DCP
 * candidate merge with exact cross-shard ties, sparse attention vs float64, LSE merge
 * edge cases. Brute force is written from SPEC.md, not from the kernels. */
#include <math.h>
#include <string.h>

#include "plan/dcp.h"
#include "test_kernels.h"

typedef struct { double s; int32_t p; } bc;
static int bc_cmp(const void *x, const void *y) {
  const bc *a = x, *b = y;
  if (a->s != b->s) return a->s > b->s ? -1 : 1;
  return (a->p > b->p) - (a->p < b->p);
}

/* identity key rows (key_rows NULL), f32, positions 0..n-1 in order: the direct path */
static void indexer_direct(int32_t nkeys, int32_t topk, uint64_t seed, int threads) {
  sc_kernels *k = tk_ctx(threads);
  const int32_t n_tok = 9, nh = 3, dim = 5;
  float *qh = malloc(sizeof(float) * n_tok * nh * dim), *wh = malloc(sizeof(float) * n_tok * nh);
  float *kh = malloc(sizeof(float) * (size_t)nkeys * dim);
  for (int32_t i = 0; i < n_tok * nh * dim; i++) qh[i] = (float)tk_int(&seed, -1, 1);
  for (int32_t i = 0; i < n_tok * nh; i++) wh[i] = (float)tk_int(&seed, -1, 2);
  for (int32_t i = 0; i < nkeys * dim; i++) kh[i] = (float)tk_int(&seed, -1, 1);
  int32_t *kp = malloc(sizeof(int32_t) * nkeys);
  for (int32_t i = 0; i < nkeys; i++) kp[i] = i;
  int32_t qpos[9], kb[9], ke[9];
  const int32_t qp_fix[9] = {0, 1, 2, 255, 256, 257, 511, 512, 100000};
  for (int32_t t = 0; t < n_tok; t++) { qpos[t] = qp_fix[t]; kb[t] = 0; ke[t] = nkeys; }
  kb[8] = 3; /* a range not starting at 0 */
  float *q = tk_up(k, qh, sizeof(float) * n_tok * nh * dim), *w = tk_up(k, wh, sizeof(float) * n_tok * nh);
  float *keys = tk_up(k, kh, sizeof(float) * (size_t)nkeys * dim);
  int32_t *dkp = tk_up(k, kp, sizeof(int32_t) * nkeys), *dq = tk_up(k, qpos, sizeof qpos),
          *dkb = tk_up(k, kb, sizeof kb), *dke = tk_up(k, ke, sizeof ke);
  sc_kcand *oc = tk_zeros(k, sizeof(sc_kcand) * n_tok * topk);
  int32_t *op = tk_zeros(k, sizeof(int32_t) * n_tok * topk);
  const sc_indexer_args a = {.n_tok = n_tok, .n_heads = nh, .dim = dim, .topk = topk, .q = q,
                             .ld_q = nh * dim, .w = w, .ld_w = nh, .q_pos = dq,
                             .keys = {keys, SC_KFMT_F32, dim, nkeys}, .key_rows = NULL,
                             .key_pos = dkp, .key_begin = dkb, .key_end = dke,
                             .out_pos = op, .out_cand = oc};
  cr_assert_eq(k->ops->indexer_topk(k, &a), 0);
  sc_kcand *got = malloc(sizeof(sc_kcand) * n_tok * topk);
  int32_t *gp = malloc(sizeof(int32_t) * n_tok * topk);
  tk_down(k, got, oc, sizeof(sc_kcand) * n_tok * topk);
  tk_down(k, gp, op, sizeof(int32_t) * n_tok * topk);
  bc *all = malloc(sizeof(bc) * nkeys);
  for (int32_t t = 0; t < n_tok; t++) {
    int32_t n = 0;
    for (int32_t s = kb[t]; s < ke[t]; s++) {
      if (s > qpos[t]) continue;
      double sc = 0;
      for (int32_t h = 0; h < nh; h++) {
        double d = 0;
        for (int32_t x = 0; x < dim; x++) d += (double)qh[(t * nh + h) * dim + x] * kh[s * dim + x];
        sc += wh[t * nh + h] * (d > 0 ? d : 0);
      }
      all[n++] = (bc){sc, s};
    }
    qsort(all, (size_t)n, sizeof *all, bc_cmp);
    for (int32_t i = 0; i < topk; i++) {
      const sc_kcand c = got[t * topk + i];
      cr_assert_eq(gp[t * topk + i], c.pos);
      if (i < n) {
        cr_assert_eq(c.pos, all[i].p, "n=%d K=%d t=%d i=%d: pos %d want %d", nkeys, topk, t, i, c.pos, all[i].p);
        cr_assert_eq((double)c.score, all[i].s);
      } else {
        cr_assert_eq(c.pos, -1);
        cr_assert(isinf(c.score) && c.score < 0);
      }
    }
  }
  free(qh); free(wh); free(kh); free(kp); free(got); free(gp); free(all);
  void *b[] = {q, w, keys, dkp, dq, dkb, dke, oc, op};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) k->ops->free(k, b[i]);
  sc_kernels_destroy(k);
}

Test(spec, indexer_direct_path_ties_causal_k_gt_context) {
  indexer_direct(700, 16, 5, 1);
  indexer_direct(700, 600, 6, 2);  /* K > most contexts */
  indexer_direct(300, 1000, 7, 1); /* K > every context */
  indexer_direct(1, 3, 8, 1);
}

/* Decode under DCP with exact cross-shard ties: every rank's local top-K of its owned
 * keys, merged, must equal the global top-K by (score desc, position asc). */
Test(spec, dcp_merge_exact_cross_shard_ties) {
  sc_kernels *k = tk_ctx(1);
  uint64_t seed = 99;
  for (int iter = 0; iter < 30; iter++) {
    const int32_t N = (int32_t)tk_int(&seed, 2, 4), I = 1 << tk_int(&seed, 0, 2);
    const int32_t len = (int32_t)tk_int(&seed, 1, 80), topk = (int32_t)tk_int(&seed, 1, 40);
    const int32_t nh = 2, dim = 2;
    float qh[4], wh[2];
    for (int i = 0; i < 4; i++) qh[i] = (float)tk_int(&seed, 0, 1);
    wh[0] = 1, wh[1] = 1;
    float *kh = malloc(sizeof(float) * (size_t)len * dim);
    for (int i = 0; i < len * dim; i++) kh[i] = (float)tk_int(&seed, 0, 1); /* heavy ties */
    const int32_t qpos = len - 1;
    float *q = tk_up(k, qh, sizeof qh), *w = tk_up(k, wh, sizeof wh);
    float *keys = tk_up(k, kh, sizeof(float) * (size_t)len * dim);
    int32_t *dq = tk_up(k, &qpos, sizeof qpos);
    sc_kcand *gathered = tk_zeros(k, sizeof(sc_kcand) * (size_t)N * topk);
    int32_t *own = malloc(sizeof(int32_t) * (size_t)len);
    for (int32_t r = 0; r < N; r++) {
      int32_t m = 0;
      for (int32_t p = 0; p < len; p++) if (sc_dcp_owner(p, N, I) == r) own[m++] = p;
      const int32_t b0 = 0;
      int32_t *dov = tk_up(k, own, sizeof(int32_t) * (size_t)(m ? m : 1));
      int32_t *db = tk_up(k, &b0, 4), *de = tk_up(k, &m, 4);
      const sc_indexer_args a = {.n_tok = 1, .n_heads = nh, .dim = dim, .topk = topk, .q = q,
                                 .ld_q = nh * dim, .w = w, .ld_w = nh, .q_pos = dq,
                                 .keys = {keys, SC_KFMT_F32, dim, len}, .key_rows = dov,
                                 .key_pos = dov, .key_begin = db, .key_end = de,
                                 .out_cand = gathered + (size_t)r * topk};
      cr_assert_eq(k->ops->indexer_topk(k, &a), 0);
      k->ops->free(k, dov); k->ops->free(k, db); k->ops->free(k, de);
    }
    int32_t *op = tk_zeros(k, sizeof(int32_t) * topk);
    cr_assert_eq(k->ops->topk_merge(k, 1, N, topk, gathered, op, NULL), 0);
    int32_t *got = malloc(sizeof(int32_t) * topk);
    tk_down(k, got, op, sizeof(int32_t) * topk);
    bc *all = malloc(sizeof(bc) * (size_t)len);
    for (int32_t s = 0; s < len; s++) {
      double sc = 0;
      for (int h = 0; h < nh; h++) {
        double d = qh[h * dim] * kh[s * dim] + qh[h * dim + 1] * kh[s * dim + 1];
        sc += wh[h] * (d > 0 ? d : 0);
      }
      all[s] = (bc){sc, s};
    }
    qsort(all, (size_t)len, sizeof *all, bc_cmp);
    for (int32_t i = 0; i < topk; i++)
      cr_assert_eq(got[i], i < len ? all[i].p : -1, "iter %d N%d I%d len %d K%d i%d", iter, N, I, len, topk, i);
    free(kh); free(own); free(got); free(all);
    void *b[] = {q, w, keys, dq, gathered, op};
    for (size_t i = 0; i < sizeof b / sizeof *b; i++) k->ops->free(k, b[i]);
  }
  sc_kernels_destroy(k);
}

/* Sparse MLA vs float64 written from SPEC §7, incl. large scores (softmax stability),
 * duplicated and -1 selections, and lse in natural log. */
Test(spec, sparse_attn_vs_float64_large_scores) {
  sc_kernels *k = tk_ctx(2);
  uint64_t seed = 3;
  const int32_t n_tok = 5, nh = 3, dc = 7, dr = 3, topk = 6, rows = 20, w = dc + dr;
  float *qh = tk_rand_f32(&seed, (size_t)n_tok * nh * w, -30, 30);
  float *kvh = tk_rand_f32(&seed, (size_t)rows * w, -3, 3);
  int32_t sel[5 * 6] = {0, 1, 2, 3, 4, 5,  -1, -1, -1, -1, -1, -1,  7, -1, 7, 19, -1, 2,
                        10, 11, 12, 13, 14, 15,  -1, 3, -1, -1, -1, -1};
  const float scale = 0.37f;
  float *q = tk_up(k, qh, sizeof(float) * n_tok * nh * w), *kv = tk_up(k, kvh, sizeof(float) * rows * w);
  int32_t *ds = tk_up(k, sel, sizeof sel);
  float *o = tk_zeros(k, sizeof(float) * n_tok * nh * dc), *l = tk_zeros(k, sizeof(float) * n_tok * nh);
  const sc_attn_args a = {.n_tok = n_tok, .n_heads = nh, .dc = dc, .dr = dr, .topk = topk,
                          .scale = scale, .q = q, .ld_q = nh * w, .kv = {kv, SC_KFMT_F32, w, rows},
                          .sel = ds, .ld_sel = topk, .out = o, .ld_out = nh * dc, .lse = l,
                          .ld_lse = nh};
  cr_assert_eq(k->ops->sparse_attn(k, &a), 0);
  float out[5 * 3 * 7], lse[15];
  tk_down(k, out, o, sizeof out);
  tk_down(k, lse, l, sizeof lse);
  for (int t = 0; t < n_tok; t++)
    for (int h = 0; h < nh; h++) {
      double s[6], mx = -INFINITY, z = 0, ref[7] = {0};
      int js[6], n = 0;
      for (int i = 0; i < topk; i++) {
        const int j = sel[t * topk + i];
        if (j < 0) continue;
        double d = 0;
        for (int x = 0; x < w; x++) d += (double)qh[(t * nh + h) * w + x] * kvh[j * w + x];
        s[n] = scale * d; js[n++] = j;
        mx = fmax(mx, scale * d);
      }
      if (n == 0) {
        cr_assert(isinf(lse[t * nh + h]) && lse[t * nh + h] < 0);
        for (int x = 0; x < dc; x++) cr_assert_eq(out[(t * nh + h) * dc + x], 0.0f);
        continue;
      }
      for (int i = 0; i < n; i++) z += exp(s[i] - mx);
      for (int i = 0; i < n; i++)
        for (int x = 0; x < dc; x++) ref[x] += exp(s[i] - mx) / z * kvh[js[i] * w + x];
      const double L = mx + log(z);
      cr_assert(fabs(lse[t * nh + h] - L) <= 1e-5 * fmax(1, fabs(L)), "lse %g want %g", lse[t * nh + h], L);
      for (int x = 0; x < dc; x++)
        cr_assert(fabs(out[(t * nh + h) * dc + x] - ref[x]) <= 1e-5, "out %g want %g",
                  out[(t * nh + h) * dc + x], ref[x]);
    }
  free(qh); free(kvh);
  void *b[] = {q, kv, ds, o, l};
  for (size_t i = 0; i < sizeof b / sizeof *b; i++) k->ops->free(k, b[i]);
  sc_kernels_destroy(k);
}

/* SPEC §7 merge rule over awkward inputs: all -inf, NaN/+inf with finite, -inf with NaN
 * output, huge magnitudes. */
Test(spec, lse_merge_edge_cases) {
  sc_kernels *k = tk_ctx(1);
  const int S = 3, R = 5;
  const float lh[15] = {-INFINITY, NAN, 1000.0f, -1000.0f, 0.0f,
                        -INFINITY, INFINITY, 1000.0f, -1001.0f, -INFINITY,
                        -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  float oh[15];
  for (int i = 0; i < 15; i++) oh[i] = (float)(i + 1);
  oh[10 + 4] = NAN; /* shard 2 row 4 is -inf with NaN output */
  float *l = tk_up(k, lh, sizeof lh), *o = tk_up(k, oh, sizeof oh);
  float *m = tk_zeros(k, sizeof(float) * R), *ml = tk_zeros(k, sizeof(float) * R);
  cr_assert_eq(k->ops->lse_merge(k, S, R, 1, l, o, m, ml), 0);
  float mo[5], mlo[5];
  tk_down(k, mo, m, sizeof mo);
  tk_down(k, mlo, ml, sizeof mlo);
  cr_assert_eq(mo[0], 0.0f); cr_assert(isinf(mlo[0]) && mlo[0] < 0);   /* all -inf */
  cr_assert_eq(mo[1], 0.0f); cr_assert(isinf(mlo[1]) && mlo[1] < 0);   /* NaN, +inf, -inf */
  cr_assert_float_eq(mlo[2], 1000.0f + logf(2.0f), 1e-3);               /* equal huge lse */
  cr_assert_float_eq(mo[2], 0.5f * (3 + 8), 1e-4);
  const double L3 = -1000.0 + log(1 + exp(-1.0));
  cr_assert_float_eq(mlo[3], (float)L3, 1e-3);
  cr_assert_float_eq(mo[3], (float)(exp(-1000.0 - L3) * 4 + exp(-1001.0 - L3) * 9), 1e-4);
  cr_assert_eq(mo[4], 5.0f); cr_assert_eq(mlo[4], 0.0f);                /* one finite shard */
  void *b[] = {l, o, m, ml};
  for (size_t i = 0; i < 4; i++) k->ops->free(k, b[i]);
  sc_kernels_destroy(k);
}
