/* The recorder (kernels/kernels_recorder.h): recordings by keeping the calls, on the CPU
 * backend. The contract of kernels.h's record_begin: nothing runs while recording; a
 * replay reads the buffers as they are then; refused calls fail the recording. */
#include <string.h>

#include "kernels/kernels_recorder.h"
#include "test_kernels.h"

static sc_kernels *recorder(void) {
  sc_kernels *cpu = NULL, *k = NULL;
  cr_assert_eq(sc_kernels_cpu_create(&cpu, 1), 0);
  cr_assert_eq(sc_kernels_recorder_wrap(cpu, &k), 0);
  cr_assert_eq(sc_kernels_recorder_wrap(k, &(sc_kernels *){NULL}), SC_EINVAL,
               "a backend that records already is not wrapped");
  return k;
}

static float *buf(sc_kernels *k, const float *h, size_t n) {
  float *b = NULL;
  cr_assert_eq(k->ops->alloc(k, n * sizeof *b, (void **)&b), 0);
  cr_assert_eq(k->ops->copy(k, b, h, n * sizeof *b, SC_KCOPY_H2D), 0);
  return b;
}

Test(recorder, a_replay_reads_the_buffers_as_they_are_then) {
  sc_kernels *k = recorder();
  enum { N = 100 };
  float x0[N], x1[N], y0[N], got[N];
  for (int i = 0; i < N; i++) x0[i] = (float)i, x1[i] = 0.5f * (float)i, y0[i] = 1.0f;
  float *x = buf(k, x0, N), *y = buf(k, y0, N);
  sc_krecording *r = NULL;
  cr_assert_eq(k->ops->record_begin(k), 0);
  cr_assert_eq(k->ops->add(k, 1, N, x, N, y, N), 0);
  cr_assert_eq(k->ops->mark(k, 1), 0);
  cr_assert_eq(k->ops->record_end(k, &r), 0);
  cr_assert_not_null(r);
  cr_assert_eq(k->ops->copy(k, got, y, sizeof got, SC_KCOPY_D2H), 0);
  cr_assert_eq(memcmp(got, y0, sizeof got), 0, "the recording ran its op");
  cr_assert_eq(k->ops->replay(k, r), 0);
  cr_assert_eq(k->ops->copy(k, x, x1, sizeof x1, SC_KCOPY_H2D), 0);
  cr_assert_eq(k->ops->replay(k, r), 0);
  cr_assert_eq(k->ops->copy(k, got, y, sizeof got, SC_KCOPY_D2H), 0);
  for (int i = 0; i < N; i++) cr_assert_eq(got[i], (y0[i] + x0[i]) + x1[i], "element %d", i);
  /* stale (as CUDA's once scratch moves): the replay runs nothing */
  cr_assert_eq(sc_kernels_recorder_invalidate(k), 0);
  cr_assert_eq(k->ops->replay(k, r), SC_EAGAIN);
  float again[N];
  cr_assert_eq(k->ops->copy(k, again, y, sizeof again, SC_KCOPY_D2H), 0);
  cr_assert_eq(memcmp(again, got, sizeof got), 0, "a stale replay ran");
  sc_kernels *cpu = NULL;
  cr_assert_eq(sc_kernels_cpu_create(&cpu, 1), 0);
  cr_assert_eq(sc_kernels_recorder_invalidate(cpu), SC_EINVAL, "not a recorder");
  sc_kernels_destroy(cpu);
  k->ops->recording_free(k, r);
  k->ops->free(k, x);
  k->ops->free(k, y);
  sc_kernels_destroy(k);
}

Test(recorder, a_refused_call_fails_the_recording_and_nothing_runs) {
  sc_kernels *k = recorder();
  enum { N = 16 };
  float h[N], y0[N], got[N];
  for (int i = 0; i < N; i++) h[i] = 2.0f, y0[i] = 1.0f;
  float *x = buf(k, h, N), *y = buf(k, y0, N);
  sc_krecording *r = NULL;
  void *p = NULL;
  cr_assert_eq(k->ops->record_begin(k), 0);
  cr_assert_eq(k->ops->record_begin(k), SC_EINVAL, "one recording at a time");
  cr_assert_eq(k->ops->add(k, 1, N, x, N, y, N), 0);
  cr_assert_eq(k->ops->copy(k, x, h, sizeof h, SC_KCOPY_H2D), SC_EAGAIN);
  cr_assert_eq(k->ops->alloc(k, 64, &p), SC_EAGAIN);
  cr_assert_null(p);
  cr_assert_eq(k->ops->sync(k), SC_EAGAIN);
  cr_assert_eq(k->ops->record_end(k, &r), SC_EAGAIN);
  cr_assert_null(r);
  cr_assert_eq(k->ops->copy(k, got, y, sizeof got, SC_KCOPY_D2H), 0);
  cr_assert_eq(memcmp(got, y0, sizeof got), 0, "an op of the failed recording ran");
  cr_assert_eq(k->ops->replay(k, NULL), SC_EINVAL);
  cr_assert_eq(k->ops->add(k, 1, N, x, N, y, N), 0, "ops run again once it has ended");
  cr_assert_eq(k->ops->copy(k, got, y, sizeof got, SC_KCOPY_D2H), 0);
  cr_assert_eq(got[0], 3.0f);
  k->ops->free(k, x);
  k->ops->free(k, y);
  sc_kernels_destroy(k);
}

/* ---- every kept op made again with the same arguments ----
 *
 * Each case issues one op (some after a device copy that sets up their in-place input)
 * into an output area: run directly, and recorded then replayed, the outputs must be the
 * same bytes. A runner that dropped or swapped an argument would differ (or fail). */

enum { T = 6, H = 2, W = 16, S = 3, K = 4, ROWS = 12, OUT_BYTES = 4096 };

typedef struct fixture {
  float *x;        /* [ROWS][W] inputs */
  float *w, *b;    /* [W] */
  int32_t *pos;    /* [T * K] positions below ROWS, some -1 */
  int32_t *small;  /* [T * K] indices below ROWS */
  float *wt;       /* [T * K] weights */
  double *freq;    /* [W / 2] rotary frequencies */
  uint8_t *q8;     /* [ROWS][W] e4m3 bytes */
  float *scale8;   /* [2][2] block scales */
  sc_kcand *cand;  /* [S][T][K] */
  float *lse;      /* [S][T * H] */
  int32_t *req, *rb, *re, *bt; /* cache_keys: 2 ranges of 5 and 7 keys, block table */
} fixture;

typedef int (*op_case)(sc_kernels *k, const fixture *f, char *out);

static int c_memset(sc_kernels *k, const fixture *f, char *out) {
  (void)f;
  return k->ops->memset(k, out + 64, 0x5a, 100);
}
static int c_copy(sc_kernels *k, const fixture *f, char *out) {
  return k->ops->copy(k, out, f->x, sizeof(float) * ROWS * W, SC_KCOPY_D2D);
}
static int c_rope_freq(sc_kernels *k, const fixture *f, char *out) {
  float *x = (float *)out;
  int rc = k->ops->copy(k, x, f->x, sizeof(float) * T * H * 4, SC_KCOPY_D2D);
  return rc ? rc : k->ops->rope_freq(k, T, H, 4, x + 1, H * 4, 4, f->small, f->freq, 1.25f);
}
static int c_layernorm(sc_kernels *k, const fixture *f, char *out) {
  return k->ops->layernorm(k, T, W - 2, f->x + 1, W, f->w, f->b, 1e-5f, (float *)out, W);
}
static int c_wsum(sc_kernels *k, const fixture *f, char *out) {
  return k->ops->weighted_sum_rows(k, T, K, W - 1, f->x, W, ROWS, f->pos, f->wt, f->x + 2, W,
                                   (float *)out, W);
}
static int c_dequant(sc_kernels *k, const fixture *f, char *out) {
  return k->ops->dequant_fp8(k, 1, ROWS, W, f->q8, f->scale8, 2, 2, 1, 2, 8, 9, (float *)out);
}
static int c_topk_merge(sc_kernels *k, const fixture *f, char *out) {
  return k->ops->topk_merge(k, T, S, K, f->cand, (int32_t *)out,
                            (sc_kcand *)(out + sizeof(int32_t) * T * K));
}
static int c_topk_ws(sc_kernels *k, const fixture *f, char *out) {
  return k->ops->topk_to_workspace(k, T, K, f->pos, f->small, 40, 2, 1, (int32_t *)out);
}
static int c_cache_keys(sc_kernels *k, const fixture *f, char *out) {
  int32_t *pos = (int32_t *)out, *slot = pos + 16;
  return k->ops->cache_keys(k, 2, 12, f->req, f->rb, f->re, f->bt, 4, 4, 2, 1, 1, pos, slot);
}
static int c_lse_merge(sc_kernels *k, const fixture *f, char *out) {
  float *lse_out = (float *)out + S * T * H * 4;
  return k->ops->lse_merge(k, S, T * H, 4, f->lse, f->x, (float *)out, lse_out);
}
static int c_lse_scale(sc_kernels *k, const fixture *f, char *out) {
  float *o = (float *)out, *lse_out = o + T * H * 4;
  int rc = k->ops->copy(k, o, f->x, sizeof(float) * T * H * 4, SC_KCOPY_D2D);
  return rc ? rc : k->ops->lse_scale(k, S, 1, T * H, 4, f->lse, o, lse_out);
}

static void *dev(sc_kernels *k, const void *h, size_t bytes) {
  void *b = NULL;
  cr_assert_eq(k->ops->alloc(k, bytes, &b), 0);
  cr_assert_eq(k->ops->copy(k, b, h, bytes, SC_KCOPY_H2D), 0);
  return b;
}

Test(recorder, every_kept_op_is_made_again_with_its_arguments) {
  sc_kernels *k = recorder();
  uint64_t seed = 42;
  float x[ROWS * W], w[W], b[W], wt[T * K], lse[S * T * H], sc8[4] = {0.5f, 2.0f, 1.5f, 0.25f};
  int32_t pos[T * K], small[T * K];
  double freq[W / 2];
  uint8_t q8[ROWS * W];
  sc_kcand cand[S * T * K];
  sc_test_rng_fill_f32(&seed, x, ROWS * W, -2, 2);
  sc_test_rng_fill_f32(&seed, w, W, 0.5, 1.5);
  sc_test_rng_fill_f32(&seed, b, W, -1, 1);
  sc_test_rng_fill_f32(&seed, wt, T * K, 0, 1);
  sc_test_rng_fill_f32(&seed, lse, S * T * H, -3, 3);
  for (int i = 0; i < T * K; i++) {
    pos[i] = i % 5 == 4 ? -1 : (int32_t)sc_test_rng_int(&seed, 0, ROWS - 1);
    small[i] = (int32_t)sc_test_rng_int(&seed, 0, ROWS - 1);
  }
  for (int i = 0; i < W / 2; i++) freq[i] = 1.0 / (1.0 + i);
  for (int i = 0; i < ROWS * W; i++) q8[i] = (uint8_t)sc_test_rng_int(&seed, 0, 0x7e);
  for (int s = 0; s < S; s++) /* each shard's list sorted by score, distinct positions */
    for (int t = 0; t < T; t++)
      for (int i = 0; i < K; i++)
        cand[(s * T + t) * K + i] = (sc_kcand){(float)(10 - i) + 0.1f * (float)s, s * 100 + t * K + i};
  const int32_t req[2] = {0, 1}, rb[2] = {0, 5}, re[2] = {5, 12};
  const int32_t bt[8] = {3, 1, 0, 2, 5, 4, 7, 6};
  const fixture f = {dev(k, x, sizeof x), dev(k, w, sizeof w), dev(k, b, sizeof b),
                     dev(k, pos, sizeof pos), dev(k, small, sizeof small), dev(k, wt, sizeof wt),
                     dev(k, freq, sizeof freq), dev(k, q8, sizeof q8), dev(k, sc8, sizeof sc8),
                     dev(k, cand, sizeof cand), dev(k, lse, sizeof lse), dev(k, req, sizeof req),
                     dev(k, rb, sizeof rb), dev(k, re, sizeof re), dev(k, bt, sizeof bt)};
  static const struct {
    const char *name;
    op_case run;
  } cases[] = {{"memset", c_memset},         {"copy", c_copy},
               {"rope_freq", c_rope_freq},   {"layernorm", c_layernorm},
               {"weighted_sum_rows", c_wsum}, {"dequant_fp8", c_dequant},
               {"topk_merge", c_topk_merge}, {"topk_to_workspace", c_topk_ws},
               {"cache_keys", c_cache_keys}, {"lse_merge", c_lse_merge},
               {"lse_scale", c_lse_scale}};
  char *out[2];
  static char got[2][OUT_BYTES];
  for (int i = 0; i < 2; i++) cr_assert_eq(k->ops->alloc(k, OUT_BYTES, (void **)&out[i]), 0);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int i = 0; i < 2; i++) cr_assert_eq(k->ops->memset(k, out[i], 0x11, OUT_BYTES), 0);
    cr_assert_eq(cases[c].run(k, &f, out[0]), 0, "%s, run directly", cases[c].name);
    sc_krecording *r = NULL;
    cr_assert_eq(k->ops->record_begin(k), 0);
    cr_assert_eq(cases[c].run(k, &f, out[1]), 0, "%s, recorded", cases[c].name);
    cr_assert_eq(k->ops->record_end(k, &r), 0, "%s", cases[c].name);
    cr_assert_eq(k->ops->replay(k, r), 0, "%s, replayed", cases[c].name);
    k->ops->recording_free(k, r);
    for (int i = 0; i < 2; i++)
      cr_assert_eq(k->ops->copy(k, got[i], out[i], OUT_BYTES, SC_KCOPY_D2H), 0);
    cr_assert_eq(memcmp(got[0], got[1], OUT_BYTES), 0, "%s: the replay wrote other bytes",
                 cases[c].name);
    int changed = 0; /* (the op wrote something: an op that did nothing would also match) */
    for (int i = 0; i < OUT_BYTES; i++) changed += got[0][i] != 0x11;
    cr_assert_gt(changed, 0, "%s wrote nothing", cases[c].name);
  }
  for (int i = 0; i < 2; i++) k->ops->free(k, out[i]);
  void *bufs[] = {f.x, f.w, f.b, f.pos, f.small, f.wt, f.freq, f.q8, f.scale8, f.cand, f.lse,
                  f.req, f.rb, f.re, f.bt};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) k->ops->free(k, bufs[i]);
  sc_kernels_destroy(k);
}
