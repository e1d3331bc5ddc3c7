/* cpu_internal.h - shared pieces of the CPU reference backend (not a public header).
 *
 * sc_kcpu is the backend state behind sc_kernels.impl: a small persistent worker pool
 * that splits an op over its rows (tokens), and one grow-only scratch area per worker so
 * that an op allocates nothing in steady state. The op entry points are defined in the
 * cpu_*.c files and collected into the ops table by cpu_ctx.c.
 *
 * Threads: the context is driven by one caller thread; sc_kcpu_parallel runs fn on the
 * caller and the pool workers and returns when all are done. fn(worker) may only touch
 * scratch slot `worker`.
 */
#ifndef SC_KERNELS_CPU_INTERNAL_H
#define SC_KERNELS_CPU_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "base/error.h"
#include "kernels/bf16.h"
#include "kernels/kernels.h"
#include "kernels/kernels_check.h"

typedef struct sc_kcpu sc_kcpu;

static inline sc_kcpu *sc_kcpu_of(sc_kernels *k) { return (sc_kcpu *)k->impl; }

/* fn handles items [begin, end) on worker `worker` (0 = the caller) and returns 0 or a
 * negative SC_E* code; the first failure is returned by sc_kcpu_parallel. Items are
 * handed out in blocks of `grain`. */
typedef int (*sc_kcpu_fn)(void *arg, int64_t begin, int64_t end, int worker);
int sc_kcpu_parallel(sc_kcpu *c, int64_t n, int64_t grain, sc_kcpu_fn fn, void *arg);

/* Number of threads of the context (the caller plus its workers). */
int sc_kcpu_threads(const sc_kcpu *c);

/* Scratch area `slot` (< SC_KCPU_SCRATCH_SLOTS) of at least `bytes` (64-byte aligned),
 * private to `worker`, valid until the next call for the same worker and slot; NULL
 * when it cannot grow. */
#define SC_KCPU_SCRATCH_SLOTS 2
void *sc_kcpu_scratch(sc_kcpu *c, int worker, int slot, size_t bytes);

/* Row r of a row set. */
static inline const void *sc_kcpu_row(const sc_krows *r, int64_t row) {
  return (const char *)r->data + row * sc_krows_stride(r);
}

/* Converts `width` elements of a row to f32 (dst must not alias src). */
void sc_kcpu_row_to_f32(const void *src, sc_kfmt fmt, int64_t width, float *dst);

/* The total order of top-K selection: a ranks before b when its score is higher, or
 * equal with a lower position. NaN scores are stored as -inf before they get here. */
static inline int sc_kcand_better(sc_kcand a, sc_kcand b) {
  return a.score > b.score || (a.score == b.score && a.pos < b.pos);
}

/* Top-K selection over a stream of candidates into a caller-provided heap of capacity
 * k: push every candidate, then sc_ktopk_finish writes k results in order, padding with
 * (-inf, -1). */
typedef struct sc_ktopk {
  sc_kcand *heap; /* worst candidate at heap[0] */
  int32_t n, k;
} sc_ktopk;

static inline void sc_ktopk_init(sc_ktopk *h, sc_kcand *storage, int32_t k) {
  h->heap = storage;
  h->n = 0;
  h->k = k;
}
void sc_ktopk_push(sc_ktopk *h, sc_kcand c);
void sc_ktopk_finish(sc_ktopk *h, int32_t *out_pos, sc_kcand *out_cand);

/* Op entry points (one job per file). */
int sc_kcpu_gemm(sc_kernels *k, const sc_gemm *g);
int sc_kcpu_rmsnorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                    int64_t ld_x, const float *w, float eps, float *out, int64_t ld_out);
int sc_kcpu_rope(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim, float *x,
                 int64_t ld_tok, int64_t ld_head, const int32_t *pos, float theta);
int sc_kcpu_rope_freq(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim,
                      float *x, int64_t ld_tok, int64_t ld_head, const int32_t *pos,
                      const double *inv_freq, float attn_factor);
int sc_kcpu_layernorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                      int64_t ld_x, const float *w, const float *b, float eps, float *out,
                      int64_t ld_out);
int sc_kcpu_weighted_sum_rows(sc_kernels *k, int64_t n_tok, int32_t topk, int64_t width,
                              const float *src, int64_t ld_src, int64_t src_rows,
                              const int32_t *rows, const float *weight, const float *add,
                              int64_t ld_add, float *out, int64_t ld_out);
int sc_kcpu_dequant_fp8(sc_kernels *k, int32_t mats, int64_t rows, int64_t cols,
                        const uint8_t *q, const float *scale, int64_t srows, int64_t scols,
                        int32_t r_off, int32_t c_off, int32_t block_rows, int32_t block_cols,
                        float *out);
int sc_kcpu_swiglu(sc_kernels *k, int64_t n_rows, int64_t inter, const float *gate,
                   int64_t ld_gate, const float *up, int64_t ld_up, float *out,
                   int64_t ld_out);
int sc_kcpu_add(sc_kernels *k, int64_t n_rows, int64_t width, const float *x,
                int64_t ld_x, float *y, int64_t ld_y);
int sc_kcpu_gather_rows(sc_kernels *k, int64_t n, int64_t width, sc_krows src,
                        const int32_t *idx, sc_krows dst);
int sc_kcpu_kv_write(sc_kernels *k, int64_t n, int64_t width, const float *src,
                     int64_t ld_src, const int32_t *slots, sc_krows cache);
int sc_kcpu_indexer_topk(sc_kernels *k, const sc_indexer_args *a);
int sc_kcpu_topk_merge(sc_kernels *k, int32_t n_tok, int32_t n_shards, int32_t topk,
                       const sc_kcand *cand, int32_t *out_pos, sc_kcand *out_cand);
int sc_kcpu_topk_to_workspace(sc_kernels *k, int32_t n_tok, int32_t topk,
                              const int32_t *pos, const int32_t *base,
                              int32_t shard_rows_total, int32_t n, int32_t il,
                              int32_t *out);
int sc_kcpu_argmax_rows(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                        int32_t *out, float *margin);
int sc_kcpu_draw_rows(sc_kernels *k, int64_t n, int64_t width, const float *x, int64_t ld,
                      const float *temperature, const uint64_t *seed, const int32_t *index,
                      int32_t *tokens);
int sc_kcpu_take_tokens(sc_kernels *k, int32_t n, const int32_t *at, const int32_t *row,
                        const int32_t *src, int32_t *ids);
int sc_kcpu_cache_keys(sc_kernels *k, int32_t n_ranges, int32_t n_keys, const int32_t *req,
                       const int32_t *begin, const int32_t *end, const int32_t *bt,
                       int32_t max_blocks, int32_t block_size, int32_t n, int32_t il,
                       int32_t dcp_rank, int32_t *pos, int32_t *slot);
int sc_kcpu_topk_to_slots(sc_kernels *k, int32_t n_tok, int32_t topk, const int32_t *pos,
                          const int32_t *req, const int32_t *bt, int32_t max_blocks,
                          int32_t block_size, int32_t n, int32_t il, int32_t dcp_rank,
                          int32_t *out);
int sc_kcpu_sparse_attn(sc_kernels *k, const sc_attn_args *a);
int sc_kcpu_lse_merge(sc_kernels *k, int32_t n_shards, int64_t n_rows, int64_t width,
                      const float *lse, const float *out_in, float *out, float *lse_out);
int sc_kcpu_lse_scale(sc_kernels *k, int32_t n_shards, int32_t shard, int64_t n_rows,
                      int64_t width, const float *lse, float *out, float *lse_out);

#endif
