/* kernels_check.h - the argument rules of kernels.h that every backend applies the same
 * way, so a backend differs from another only in what it computes (every backend takes
 * every row format of kernels.h). Each returns a negative SC_E* code for
 * invalid arguments, 1 when the op has nothing to do (empty shapes), 0 to run it.
 * Pure functions; any thread. */
#ifndef SC_KERNELS_CHECK_H
#define SC_KERNELS_CHECK_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns from the calling op: with the error, or 0 when there is nothing to do. */
#define SC_KCHECK(expr)                    \
  do {                                     \
    const int sc_kcheck_rc_ = (expr);      \
    if (sc_kcheck_rc_)                     \
      return sc_kcheck_rc_ < 0 ? sc_kcheck_rc_ : 0; \
  } while (0)

/* A row set of KV rows `width` values wide: f32, bf16 (ld >= width) or fp8_ds_mla (width
 * 576, ld >= 656 bytes); the fp8_index key rows are the indexer's, kv_write's and
 * gather_rows' (checked inside those). */
int sc_kcheck_rows(const sc_krows *r, int64_t width);

int sc_kcheck_gemm(const sc_gemm *g);
int sc_kcheck_linears(const sc_linears *a);
int sc_kcheck_attn(const sc_attn_args *a);
int sc_kcheck_indexer(const sc_indexer_args *a);
int sc_kcheck_rmsnorm(int64_t n_rows, int64_t dim, const float *x, int64_t ld_x, float eps,
                      const float *out, int64_t ld_out);
int sc_kcheck_rope(int64_t n_tok, int32_t n_heads, int32_t rot_dim, const float *x,
                   int64_t ld_head, const int32_t *pos, float theta);
int sc_kcheck_ropes(const sc_ropes *r);
int sc_kcheck_rmsnorms(const sc_rmsnorms *a);
int sc_kcheck_rope_freq(int64_t n_tok, int32_t n_heads, int32_t rot_dim, const float *x,
                        int64_t ld_head, const int32_t *pos, const double *inv_freq,
                        float attn_factor);
int sc_kcheck_weighted_sum_rows(int64_t n_tok, int32_t topk, int64_t width, const float *src,
                                int64_t ld_src, int64_t src_rows, const int32_t *rows,
                                const float *weight, const float *add, int64_t ld_add,
                                const float *out, int64_t ld_out);
int sc_kcheck_dequant_fp8(int32_t mats, int64_t rows, int64_t cols, const uint8_t *q,
                          const float *scale, int64_t srows, int64_t scols, int32_t r_off,
                          int32_t c_off, int32_t block_rows, int32_t block_cols,
                          const float *out);
/* swiglu and add: n_rows x width over three buffers (add passes y twice). */
int sc_kcheck_rows_op(int64_t n_rows, int64_t width, const void *a, const void *b,
                      const void *c);
int sc_kcheck_lse_merge(int32_t n_shards, int64_t n_rows, int64_t width, const float *lse,
                        const float *out_in, const float *out);
int sc_kcheck_lse_scale(int32_t n_shards, int32_t shard, int64_t n_rows, int64_t width,
                        const float *lse, const float *out);
int sc_kcheck_gather_rows(int64_t n, int64_t width, const sc_krows *src, const sc_krows *dst);
int sc_kcheck_kv_write(int64_t n, int64_t width, const float *src, int64_t ld_src,
                       const int32_t *slots, const sc_krows *cache);
int sc_kcheck_topk_to_workspace(int32_t n_tok, int32_t topk, const int32_t *pos,
                                const int32_t *base, int32_t shard_rows_total, int32_t n,
                                int32_t il, const int32_t *out);
int sc_kcheck_cache_keys(int32_t n_ranges, int32_t n_keys, const int32_t *req,
                         const int32_t *begin, const int32_t *end, const int32_t *bt,
                         int32_t max_blocks, int32_t block_size, int32_t n, int32_t il,
                         int32_t dcp_rank, const int32_t *pos, const int32_t *slot);
int sc_kcheck_topk_to_slots(int32_t n_tok, int32_t topk, const int32_t *pos,
                            const int32_t *req, const int32_t *bt, int32_t max_blocks,
                            int32_t block_size, int32_t n, int32_t il, int32_t dcp_rank,
                            const int32_t *out);
int sc_kcheck_topk_merge(int32_t n_tok, int32_t n_shards, int32_t topk, const sc_kcand *cand,
                         const int32_t *out_pos, const sc_kcand *out_cand);

#ifdef __cplusplus
}
#endif

#endif
