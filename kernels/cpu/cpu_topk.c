/* cpu_topk.c - the lightning indexer with top-K selection, and the merge of top-K
 * candidates gathered from DCP shards (SPEC.md §7).
 *
 * Determinism matters more than speed here: the distributed run must select exactly the
 * single-rank run's top-K sets, so the score of a (token, key) pair must not depend on
 * which other keys share its sgemm call. Keys are therefore scored in blocks of exactly
 * SC_KIDX_BLOCK rows (the last block zero-padded), so every logits product has the same
 * shape (n_heads x SC_KIDX_BLOCK x dim) and each logit comes from the same micro-kernel
 * path; the head sum runs in a fixed order.
 *
 * Selection is under the total order (score desc, position asc). The indexer collects
 * every causal candidate of a token, moves the K best to the front with a quickselect
 * (O(n) whatever the score trend: a bounded heap degrades to O(n log K) when later keys
 * score higher, as recent context often does) and sorts those K with a heap sort. */
#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/fp8_e4m3.h"

#define SC_KIDX_BLOCK 256

/* ---- bounded top-K heap: the worst kept candidate at the root ---- */

static void sift_down(sc_kcand *h, int32_t n, int32_t i) {
  for (;;) {
    int32_t l = 2 * i + 1, w = i;
    if (l < n && sc_kcand_better(h[w], h[l])) w = l;
    if (l + 1 < n && sc_kcand_better(h[w], h[l + 1])) w = l + 1;
    if (w == i) return;
    const sc_kcand t = h[i];
    h[i] = h[w];
    h[w] = t;
    i = w;
  }
}

void sc_ktopk_push(sc_ktopk *h, sc_kcand c) {
  if (h->k == 0) return;
  if (h->n < h->k) {
    int32_t i = h->n++;
    h->heap[i] = c;
    while (i > 0) { /* sift up: the parent must be worse than (or equal to) the child */
      const int32_t p = (i - 1) / 2;
      if (!sc_kcand_better(h->heap[p], h->heap[i])) break;
      const sc_kcand t = h->heap[p];
      h->heap[p] = h->heap[i];
      h->heap[i] = t;
      i = p;
    }
  } else if (sc_kcand_better(c, h->heap[0])) {
    h->heap[0] = c;
    sift_down(h->heap, h->n, 0);
  }
}

void sc_ktopk_finish(sc_ktopk *h, int32_t *out_pos, sc_kcand *out_cand) {
  /* heap sort: popping the worst to the end leaves the array best-first */
  for (int32_t i = h->n - 1; i > 0; i--) {
    const sc_kcand t = h->heap[0];
    h->heap[0] = h->heap[i];
    h->heap[i] = t;
    sift_down(h->heap, i, 0);
  }
  for (int32_t i = 0; i < h->k; i++) {
    const sc_kcand c = i < h->n ? h->heap[i] : (sc_kcand){-INFINITY, -1};
    if (out_pos) out_pos[i] = c.pos;
    if (out_cand) out_cand[i] = c;
  }
}

/* ---- indexer ---- */

typedef struct {
  const sc_indexer_args *a;
  sc_kcpu *c;
} idx_job;

/* Moves the k best of v[0..n) (0 < k < n) to v[0..k), in no particular order: a
 * quickselect for the k-th best with a median-of-three pivot and Hoare partitions. */
static void select_best(sc_kcand *v, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1;
  const int64_t target = k - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    sc_kcand a = v[lo], b = v[mid], c = v[hi], pivot;
    if (sc_kcand_better(a, b)) {
      const sc_kcand t = a;
      a = b;
      b = t;
    } /* now b better than a (or equal) */
    pivot = sc_kcand_better(c, b) ? b : (sc_kcand_better(c, a) ? c : a);
    int64_t i = lo, j = hi;
    while (i <= j) {
      while (sc_kcand_better(v[i], pivot)) i++;
      while (sc_kcand_better(pivot, v[j])) j--;
      if (i <= j) {
        const sc_kcand t = v[i];
        v[i] = v[j];
        v[j] = t;
        i++;
        j--;
      }
    }
    if (target <= j) {
      hi = j;
    } else if (target >= i) {
      lo = i;
    } else {
      return; /* v[target] sits between the parts: everything before it is at least as good */
    }
  }
}

/* Writes the best min(n, k) of v[0..n) in order, padded to k (destroys v). */
static void emit_topk(sc_kcand *v, int64_t n, int32_t k, int32_t *out_pos,
                      sc_kcand *out_cand) {
  if (n > k) select_best(v, n, k);
  const int32_t m = n < k ? (int32_t)n : k;
  for (int32_t i = m / 2 - 1; i >= 0; i--) sift_down(v, m, i); /* heapify: worst on top */
  sc_ktopk h = {v, m, k};
  sc_ktopk_finish(&h, out_pos, out_cand);
}

/* Scores the `nb` keys of a block of SC_KIDX_BLOCK key rows, ldk apart (rows beyond nb
 * are zero), and appends them to cands; sblk: the keys' scales (fp8_index keys, whose
 * rows hold their e4m3 values), or NULL. */
static void score_block(const sc_indexer_args *a, const float *qt, const float *wt,
                        const float *kblk, int64_t ldk, const int32_t *pblk,
                        const float *sblk, int32_t nb, float *logits, float *score,
                        sc_kcand *cands) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->n_heads, SC_KIDX_BLOCK, a->dim,
              1.0f, qt, a->dim, kblk, (blasint)ldk, 0.0f, logits, SC_KIDX_BLOCK);
  /* over the whole block (padding rows score 0 and are not pushed): a constant trip
   * count lets the compiler vectorise; the head order is fixed either way */
  float *restrict acc = score;
  for (int32_t s = 0; s < SC_KIDX_BLOCK; s++) acc[s] = 0.0f;
  for (int32_t h = 0; h < a->n_heads; h++) {
    const float *restrict l = logits + (int64_t)h * SC_KIDX_BLOCK;
    const float wh = wt[h];
    for (int32_t s = 0; s < SC_KIDX_BLOCK; s++) {
      const float v = l[s] > 0.0f ? l[s] : 0.0f;
      acc[s] += wh * v;
    }
  }
  if (sblk != NULL)
    for (int32_t s = 0; s < nb; s++) score[s] = sblk[s] * score[s];
  for (int32_t s = 0; s < nb; s++)
    cands[s] = (sc_kcand){isnan(score[s]) ? -INFINITY : score[s], pblk[s]};
}

/* A key row as the scorer takes it: its values in f32 (an fp8_index row's e4m3 values,
 * without the scale, which *scale receives; 1 for the other formats). */
static void key_to_f32(const sc_krows *keys, int64_t row, int32_t dim, float *dst,
                       float *scale) {
  const void *src = sc_kcpu_row(keys, row);
  if (keys->fmt != SC_KFMT_FP8_INDEX) {
    sc_kcpu_row_to_f32(src, keys->fmt, dim, dst);
    *scale = 1.0f;
    return;
  }
  const uint8_t *b = src;
  for (int32_t i = 0; i < dim; i++) dst[i] = sc_e4m3_value(b[i]);
  memcpy(scale, b + SC_KFP8_INDEX_SCALE_AT(dim), sizeof *scale);
}

static int idx_tokens(void *p, int64_t b, int64_t e, int worker) {
  const idx_job *j = p;
  const sc_indexer_args *a = j->a;
  const int64_t kb = SC_KIDX_BLOCK;
  const size_t bytes = sizeof(float) * (size_t)(kb * a->dim + (int64_t)a->n_heads * kb + 2 * kb) +
                       sizeof(int32_t) * (size_t)kb +
                       (a->keys.fmt == SC_KFMT_FP8_INDEX
                            ? sizeof(float) * (size_t)a->n_heads * (size_t)a->dim
                            : 0);
  char *mem = sc_kcpu_scratch(j->c, worker, 0, bytes);
  if (mem == NULL) return SC_ENOMEM;
  float *kblk = (float *)mem;
  float *logits = kblk + kb * a->dim;
  float *score = logits + (int64_t)a->n_heads * kb;
  float *sblk = score + kb; /* the keys' scales (fp8_index) */
  int32_t *pblk = (int32_t *)(sblk + kb);
  float *qround = (float *)(pblk + kb); /* a token's rounded q (fp8_index keys) */
  const bool direct = a->key_rows == NULL && a->keys.fmt == SC_KFMT_F32;
  const bool scaled = a->keys.fmt == SC_KFMT_FP8_INDEX;

  for (int64_t t = b; t < e; t++) {
    const float *qt = a->q + t * a->ld_q, *wt = a->w + t * a->ld_w;
    if (scaled) { /* each head rounded as an fp8_index row (kernels.h) */
      for (int32_t h = 0; h < a->n_heads; h++) {
        const float *x = qt + (int64_t)h * a->dim;
        float amax = 0.0f;
        for (int32_t i = 0; i < a->dim; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        const float sc = sc_kfp8_index_scale(amax);
        for (int32_t i = 0; i < a->dim; i++)
          qround[(int64_t)h * a->dim + i] = sc_kfp8_index_round(x[i], sc);
      }
      qt = qround;
    }
    const int32_t qpos = a->q_pos[t];
    const int64_t end = a->key_end[t], len = end - a->key_begin[t];
    if (a->key_begin[t] < 0) return SC_ERANGE;
    /* every candidate of the token (at most len), plus room for one padded block */
    sc_kcand *cands =
        sc_kcpu_scratch(j->c, worker, 1, sizeof(sc_kcand) * (size_t)((len > 0 ? len : 0) + kb));
    if (cands == NULL) return SC_ENOMEM;
    int64_t nc = 0;
    int32_t nb = 0;
    for (int64_t en = a->key_begin[t]; en < end; en++) {
      /* A whole block of consecutive f32 rows, all causal (a prefill context): score it
       * in place. sgemm packs its operands, so the row stride does not change a bit. */
      if (direct && nb == 0 && en + kb <= end && en >= 0 && en + kb <= a->keys.rows &&
          a->key_pos[en + kb - 1] <= qpos) {
        bool causal = true;
        for (int64_t x = en; x < en + kb && causal; x++) causal = a->key_pos[x] <= qpos;
        if (causal) {
          score_block(a, qt, wt, (const float *)sc_kcpu_row(&a->keys, en), a->keys.ld,
                      a->key_pos + en, NULL, (int32_t)kb, logits, score, cands + nc);
          nc += kb;
          en += kb - 1;
          continue;
        }
      }
      const int32_t kp = a->key_pos[en];
      if (kp > qpos) continue; /* causality by position */
      const int64_t row = a->key_rows ? a->key_rows[en] : en;
      if (row < 0 || row >= a->keys.rows) return SC_ERANGE;
      key_to_f32(&a->keys, row, a->dim, kblk + (int64_t)nb * a->dim, &sblk[nb]);
      pblk[nb++] = kp;
      if (nb == kb) {
        score_block(a, qt, wt, kblk, a->dim, pblk, scaled ? sblk : NULL, nb, logits, score,
                    cands + nc);
        nc += nb;
        nb = 0;
      }
    }
    if (nb > 0) {
      memset(kblk + (int64_t)nb * a->dim, 0, sizeof(float) * (size_t)((kb - nb) * a->dim));
      score_block(a, qt, wt, kblk, a->dim, pblk, scaled ? sblk : NULL, nb, logits, score,
                  cands + nc);
      nc += nb;
    }
    emit_topk(cands, nc, a->topk, a->out_pos ? a->out_pos + t * a->topk : NULL,
              a->out_cand ? a->out_cand + t * a->topk : NULL);
  }
  return 0;
}

int sc_kcpu_indexer_topk(sc_kernels *k, const sc_indexer_args *a) {
  SC_KCHECK(sc_kcheck_indexer(a));
  idx_job j = {a, sc_kcpu_of(k)};
  return sc_kcpu_parallel(j.c, a->n_tok, 1, idx_tokens, &j);
}

/* ---- candidate merge ---- */

typedef struct {
  int32_t n_tok, n_shards, topk;
  const sc_kcand *cand;
  int32_t *out_pos;
  sc_kcand *out_cand;
  sc_kcpu *c;
} merge_job;

/* Whether a shard's list is what indexer_topk writes: best-first under the selection
 * order, no NaN, padding only at the end. Then a k-way merge of the heads is exact. */
static bool list_sorted(const sc_kcand *l, int32_t k) {
  for (int32_t i = 0; i < k; i++) {
    if (isnan(l[i].score)) return false;
    if (i == 0) continue;
    if (l[i - 1].pos < 0) {
      if (l[i].pos >= 0) return false;
    } else if (l[i].pos >= 0 && !sc_kcand_better(l[i - 1], l[i])) {
      return false;
    }
  }
  return true;
}

/* k-way merge of sorted lists: O(topk * n_shards), against O(n_shards * topk * log topk)
 * for the heap. Positions are distinct across shards, so the order is strict. */
static void merge_sorted(const merge_job *j, int64_t t, int32_t *head) {
  for (int32_t r = 0; r < j->n_shards; r++) head[r] = 0;
  for (int32_t i = 0; i < j->topk; i++) {
    int32_t best = -1;
    sc_kcand bc = {-INFINITY, -1};
    for (int32_t r = 0; r < j->n_shards; r++) {
      if (head[r] >= j->topk) continue;
      const sc_kcand c = j->cand[((int64_t)r * j->n_tok + t) * j->topk + head[r]];
      if (c.pos < 0) continue;
      if (best < 0 || sc_kcand_better(c, bc)) {
        best = r;
        bc = c;
      }
    }
    if (best >= 0) head[best]++;
    if (j->out_pos) j->out_pos[t * j->topk + i] = bc.pos;
    if (j->out_cand) j->out_cand[t * j->topk + i] = bc;
  }
}

static int merge_tokens(void *p, int64_t b, int64_t e, int worker) {
  const merge_job *j = p;
  sc_kcand *heapbuf = sc_kcpu_scratch(
      j->c, worker, 0, sizeof(sc_kcand) * (size_t)j->topk + sizeof(int32_t) * (size_t)j->n_shards);
  if (heapbuf == NULL) return SC_ENOMEM;
  for (int64_t t = b; t < e; t++) {
    bool sorted = true;
    for (int32_t r = 0; r < j->n_shards && sorted; r++)
      sorted = list_sorted(j->cand + ((int64_t)r * j->n_tok + t) * j->topk, j->topk);
    if (sorted) {
      merge_sorted(j, t, (int32_t *)(heapbuf + j->topk));
      continue;
    }
    sc_ktopk heap;
    sc_ktopk_init(&heap, heapbuf, j->topk);
    for (int64_t r = 0; r < j->n_shards; r++) {
      const sc_kcand *src = j->cand + (r * j->n_tok + t) * j->topk;
      for (int32_t i = 0; i < j->topk; i++) {
        sc_kcand c = src[i];
        if (c.pos < 0) continue; /* padding */
        if (isnan(c.score)) c.score = -INFINITY;
        sc_ktopk_push(&heap, c);
      }
    }
    sc_ktopk_finish(&heap, j->out_pos ? j->out_pos + t * j->topk : NULL,
                    j->out_cand ? j->out_cand + t * j->topk : NULL);
  }
  return 0;
}

int sc_kcpu_topk_merge(sc_kernels *k, int32_t n_tok, int32_t n_shards, int32_t topk,
                       const sc_kcand *cand, int32_t *out_pos, sc_kcand *out_cand) {
  SC_KCHECK(sc_kcheck_topk_merge(n_tok, n_shards, topk, cand, out_pos, out_cand));
  merge_job j = {n_tok, n_shards, topk, cand, out_pos, out_cand, sc_kcpu_of(k)};
  return sc_kcpu_parallel(j.c, n_tok, 4, merge_tokens, &j);
}
