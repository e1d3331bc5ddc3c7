/* cpu_attn.c - sparse MLA attention over selected KV rows, and the exact LSE merge of
 * partial results from DCP shards (SPEC.md §7).
 *
 * Per token: the selected rows are gathered (converted to f32) into a dense block, the
 * scores of all heads come from one sgemm (n_heads x n_sel x (dc + dr)), the softmax
 * runs per head with the max subtracted and the normaliser summed in double, and the
 * latent output is a second sgemm (n_heads x dc x n_sel) against the block's first dc
 * columns. LSE is the natural log of the normaliser: lse = m + ln Σ exp(s_j - m). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/lse_math.h"

/* Rows prefetched ahead of the one being gathered. */
#define SC_KATTN_PREFETCH 4

typedef struct {
  const sc_attn_args *a;
  sc_kcpu *c;
} attn_job;

static int attn_tokens(void *p, int64_t b, int64_t e, int worker) {
  const attn_job *j = p;
  const sc_attn_args *a = j->a;
  const int64_t width = (int64_t)a->dc + a->dr, nh = a->n_heads;
  const size_t bytes = sizeof(float) * (size_t)((int64_t)a->topk * width + nh * a->topk);
  float *kv = sc_kcpu_scratch(j->c, worker, 0, bytes);
  if (kv == NULL) return SC_ENOMEM;
  float *s = kv + (int64_t)a->topk * width;
  const int64_t row_bytes = sc_kfmt_row_bytes(a->kv.fmt, width);

  for (int64_t t = b; t < e; t++) {
    const int32_t *sel = a->sel + t * a->ld_sel;
    float *out = a->out + t * a->ld_out, *lse = a->lse + t * a->ld_lse;
    int32_t n = 0;
    for (int32_t i = 0; i < a->topk; i++) {
      /* Selected rows are scattered over the cache: without a prefetch a few rows ahead
       * every row costs a chain of cache misses (the gather dominated the profile). */
      if (i + SC_KATTN_PREFETCH < a->topk) {
        const int32_t ahead = sel[i + SC_KATTN_PREFETCH];
        if (ahead >= 0 && ahead < a->kv.rows) {
          const char *pr = sc_kcpu_row(&a->kv, ahead);
          for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(pr + off);
        }
      }
      const int32_t r = sel[i];
      if (r == -1) continue;
      if (r < 0 || r >= a->kv.rows) return SC_ERANGE;
      sc_kcpu_row_to_f32(sc_kcpu_row(&a->kv, r), a->kv.fmt, width, kv + n * width);
      n++;
    }
    if (n == 0) { /* an empty shard: contributes nothing to the merge */
      for (int64_t h = 0; h < nh; h++) {
        memset(out + h * a->dc, 0, sizeof(float) * (size_t)a->dc);
        lse[h] = -INFINITY;
      }
      continue;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)nh, n, (blasint)width,
                a->scale, a->q + t * a->ld_q, (blasint)width, kv, (blasint)width, 0.0f, s,
                n);
    for (int64_t h = 0; h < nh; h++) {
      float *sh = s + h * n;
      float m = sh[0];
      for (int32_t i = 1; i < n; i++) m = sh[i] > m ? sh[i] : m;
      double sum = 0;
      for (int32_t i = 0; i < n; i++) {
        sh[i] = expf(sh[i] - m);
        sum += sh[i];
      }
      const float inv = (float)(1.0 / sum);
      for (int32_t i = 0; i < n; i++) sh[i] *= inv;
      lse[h] = (float)((double)m + log(sum));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)nh, a->dc, n, 1.0f, s,
                n, kv, (blasint)width, 0.0f, out, a->dc);
  }
  return 0;
}

int sc_kcpu_sparse_attn(sc_kernels *k, const sc_attn_args *a) {
  SC_KCHECK(sc_kcheck_attn(a));
  attn_job j = {a, sc_kcpu_of(k)};
  return sc_kcpu_parallel(j.c, a->n_tok, 1, attn_tokens, &j);
}

/* ---- LSE merge ---- */

/* The merge rule itself is kernels/lse_math.h, shared with the CUDA backend. */

int sc_kcpu_lse_merge(sc_kernels *k, int32_t n_shards, int64_t n_rows, int64_t width,
                      const float *lse, const float *out_in, float *out, float *lse_out) {
  (void)k;
  SC_KCHECK(sc_kcheck_lse_merge(n_shards, n_rows, width, lse, out_in, out));
  for (int64_t i = 0; i < n_rows; i++) {
    const double big_l = sc_lse_merged(lse, n_shards, n_rows, i);
    float *o = out + i * width;
    for (int64_t x = 0; x < width; x++) o[x] = 0.0f;
    for (int32_t r = 0; r < n_shards; r++) {
      const float f = sc_lse_weight(lse[r * n_rows + i], big_l);
      if (f == 0.0f) continue;
      const float *src = out_in + (r * n_rows + i) * width;
      for (int64_t x = 0; x < width; x++) o[x] += f * src[x];
    }
    if (lse_out) lse_out[i] = (float)big_l;
  }
  return 0;
}

int sc_kcpu_lse_scale(sc_kernels *k, int32_t n_shards, int32_t shard, int64_t n_rows,
                      int64_t width, const float *lse, float *out, float *lse_out) {
  (void)k;
  SC_KCHECK(sc_kcheck_lse_scale(n_shards, shard, n_rows, width, lse, out));
  for (int64_t i = 0; i < n_rows; i++) {
    const double big_l = sc_lse_merged(lse, n_shards, n_rows, i);
    const float f = sc_lse_weight(lse[shard * n_rows + i], big_l);
    float *o = out + i * width;
    /* a zero factor writes zeros, so a NaN in an empty shard's output cannot leak */
    for (int64_t x = 0; x < width; x++) o[x] = f == 0.0f ? 0.0f : f * o[x];
    if (lse_out) lse_out[i] = (float)big_l;
  }
  return 0;
}
