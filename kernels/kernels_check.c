#include "kernels/kernels_check.h"

#include "base/error.h"

int sc_kcheck_gemm(const sc_gemm *g) {
  if (g == NULL || g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 0) return SC_EINVAL;
  /* BLAS interfaces take 32-bit sizes */
  if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX) return SC_ERANGE;
  const int64_t cols_a = g->trans_a ? g->m : g->k, cols_b = g->trans_b ? g->k : g->n;
  if (g->lda < (cols_a > 1 ? cols_a : 1) || g->ldb < (cols_b > 1 ? cols_b : 1) ||
      g->ldc < (g->n > 1 ? g->n : 1) || g->lda > INT32_MAX || g->ldb > INT32_MAX ||
      g->ldc > INT32_MAX)
    return SC_EINVAL;
  if (g->m == 0 || g->n == 0) return 1;
  if (g->c == NULL || (g->k > 0 && (g->a == NULL || g->b == NULL))) return SC_EINVAL;
  return 0;
}

int sc_kcheck_linears(const sc_linears *a) {
  if (a == NULL || a->rows < 0 || a->k < 0 || a->n_parts < 1 || a->n_parts > SC_LINEARS_MAX ||
      (a->gated && (a->n_parts != 2 || a->part[0].n != a->part[1].n)))
    return SC_EINVAL;
  /* the parts go to gemm, whose BLAS interfaces take 32-bit sizes */
  if (a->rows > INT32_MAX || a->k > INT32_MAX || a->ld_x > INT32_MAX) return SC_ERANGE;
  if (a->ld_x < (a->k > 1 ? a->k : 1)) return SC_EINVAL;
  bool work = false;
  for (int32_t j = 0; j < a->n_parts; j++) {
    const sc_linear_part *p = &a->part[j];
    if (p->n < 0 || p->n > INT32_MAX) return p->n < 0 ? SC_EINVAL : SC_ERANGE;
    if (p->ld_w < (a->k > 1 ? a->k : 1) || p->ld_out < (p->n > 1 ? p->n : 1) ||
        p->ld_w > INT32_MAX || p->ld_out > INT32_MAX)
      return SC_EINVAL;
    if (a->rows > 0 && p->n > 0) {
      if (p->out == NULL || (a->k > 0 && (p->w == NULL || a->x == NULL))) return SC_EINVAL;
      work = true;
    }
  }
  return work ? 0 : 1;
}

int sc_kcheck_attn(const sc_attn_args *a) {
  if (a == NULL || a->n_tok < 0 || a->n_heads < 1 || a->dc < 1 || a->dr < 0 || a->topk < 0)
    return SC_EINVAL;
  const int64_t width = (int64_t)a->dc + a->dr;
  const int rc = sc_kcheck_rows(&a->kv, width);
  if (rc) return rc;
  if (a->n_tok == 0) return 1;
  if (a->q == NULL || a->out == NULL || a->lse == NULL || (a->topk > 0 && a->sel == NULL))
    return SC_EINVAL;
  if (a->n_tok > 1 && (a->ld_q < a->n_heads * width || a->ld_out < (int64_t)a->n_heads * a->dc ||
                       a->ld_lse < a->n_heads || a->ld_sel < a->topk))
    return SC_EINVAL;
  return 0;
}

/* Rows of index keys in the fp8_index layout (kernels.h: width is the key's dim, ld
 * counts bytes), or rows of the other formats. */
static int check_key_rows(const sc_krows *r, int64_t width) {
  if (r->fmt != SC_KFMT_FP8_INDEX) return sc_kcheck_rows(r, width);
  if (width < 0 || width > INT32_MAX || r->rows < 0 ||
      (r->rows > 1 && r->ld < SC_KFP8_INDEX_ROW_BYTES(width)) ||
      (r->rows > 0 && r->data == NULL))
    return SC_EINVAL;
  return 0;
}

int sc_kcheck_indexer(const sc_indexer_args *a) {
  if (a == NULL || a->n_tok < 0 || a->n_heads < 1 || a->dim < 1 || a->topk < 0 ||
      a->max_keys < 0)
    return SC_EINVAL;
  const int rc = check_key_rows(&a->keys, a->dim);
  if (rc) return rc;
  if (a->n_tok == 0 || a->topk == 0) return 1;
  if (a->q == NULL || a->w == NULL || a->q_pos == NULL || a->key_pos == NULL ||
      a->key_begin == NULL || a->key_end == NULL ||
      (a->out_pos == NULL && a->out_cand == NULL) ||
      (a->n_tok > 1 && (a->ld_q < (int64_t)a->n_heads * a->dim || a->ld_w < a->n_heads)))
    return SC_EINVAL;
  return 0;
}

int sc_kcheck_rows(const sc_krows *r, int64_t width) {
  if (r->fmt == SC_KFMT_FP8_DS_MLA) { /* one layout: 576 values in 656 bytes */
    if (r->rows > 0 && width != (int64_t)SC_KFP8_DS_MLA_NOPE + SC_KFP8_DS_MLA_ROPE)
      return SC_ENOTSUP;
    if (r->rows < 0 || (r->rows > 1 && r->ld < SC_KFP8_DS_MLA_ROW_BYTES) ||
        (r->rows > 0 && r->data == NULL))
      return SC_EINVAL;
    return 0;
  }
  if (sc_kfmt_size(r->fmt) == 0) return SC_ENOTSUP;
  if (width < 0 || r->rows < 0 || (r->rows > 1 && r->ld < width)) return SC_EINVAL;
  if (r->rows > 0 && r->data == NULL) return SC_EINVAL;
  return 0;
}

int sc_kcheck_rmsnorm(int64_t n_rows, int64_t dim, const float *x, int64_t ld_x, float eps,
                      const float *out, int64_t ld_out) {
  if (n_rows < 0 || dim < 1 || eps < 0) return SC_EINVAL;
  if (n_rows == 0) return 1;
  if (x == NULL || out == NULL || (n_rows > 1 && (ld_x < dim || ld_out < dim)))
    return SC_EINVAL;
  return 0;
}

int sc_kcheck_rope(int64_t n_tok, int32_t n_heads, int32_t rot_dim, const float *x,
                   int64_t ld_head, const int32_t *pos, float theta) {
  if (n_tok < 0 || n_heads < 0 || rot_dim < 0 || rot_dim % 2 != 0 || !(theta > 0))
    return SC_EINVAL;
  if (n_tok == 0 || n_heads == 0 || rot_dim == 0) return 1;
  if (x == NULL || pos == NULL || (n_heads > 1 && ld_head < rot_dim)) return SC_EINVAL;
  return 0;
}

int sc_kcheck_rope_freq(int64_t n_tok, int32_t n_heads, int32_t rot_dim, const float *x,
                        int64_t ld_head, const int32_t *pos, const double *inv_freq,
                        float attn_factor) {
  if (!(attn_factor > 0) || (rot_dim > 0 && inv_freq == NULL)) return SC_EINVAL;
  return sc_kcheck_rope(n_tok, n_heads, rot_dim, x, ld_head, pos, 1.0f);
}

/* 0: some part has rows to normalise; 1: nothing to do; or SC_EINVAL. */
int sc_kcheck_rmsnorms(const sc_rmsnorms *a) {
  if (a == NULL || a->n_parts < 0 || a->n_parts > SC_RMSNORMS_MAX) return SC_EINVAL;
  bool any = false;
  for (int32_t p = 0; p < a->n_parts; p++) {
    const sc_rmsnorm_part *q = &a->part[p];
    const int rc = sc_kcheck_rmsnorm(a->n_rows, q->dim, q->x, q->ld_x, a->eps, q->out, q->ld_out);
    if (rc < 0) return rc;
    any = any || rc == 0;
  }
  return any ? 0 : 1;
}

/* 0: every part is to be rotated; 1: nothing to do; or SC_EINVAL. Parts with nothing to
 * rotate (no heads, no rotary values) are allowed and skipped. */
int sc_kcheck_ropes(const sc_ropes *r) {
  if (r == NULL || r->n_parts < 0 || r->n_parts > SC_ROPES_MAX) return SC_EINVAL;
  bool any = false;
  for (int32_t p = 0; p < r->n_parts; p++) {
    const sc_rope_part *q = &r->part[p];
    const int rc = r->inv_freq ? sc_kcheck_rope_freq(r->n_tok, q->n_heads, q->rot_dim, q->x,
                                                     q->ld_head, r->pos, r->inv_freq,
                                                     r->attn_factor)
                               : sc_kcheck_rope(r->n_tok, q->n_heads, q->rot_dim, q->x,
                                                q->ld_head, r->pos, r->theta);
    if (rc < 0) return rc;
    if (rc == 0 && q->out != NULL && q->n_heads > 1 && q->ld_head_out < q->rot_dim)
      return SC_EINVAL;
    any = any || rc == 0;
  }
  return any ? 0 : 1;
}

int sc_kcheck_weighted_sum_rows(int64_t n_tok, int32_t topk, int64_t width, const float *src,
                                int64_t ld_src, int64_t src_rows, const int32_t *rows,
                                const float *weight, const float *add, int64_t ld_add,
                                const float *out, int64_t ld_out) {
  if (n_tok < 0 || topk < 0 || width < 0 || src_rows < 0) return SC_EINVAL;
  if (n_tok == 0 || width == 0) return 1;
  if (out == NULL || (n_tok > 1 && ld_out < width) || (add != NULL && n_tok > 1 && ld_add < width))
    return SC_EINVAL;
  if (topk > 0 && (rows == NULL || weight == NULL || (src_rows > 0 && src == NULL) ||
                   (src_rows > 1 && ld_src < width)))
    return SC_EINVAL;
  return 0;
}

int sc_kcheck_dequant_fp8(int32_t mats, int64_t rows, int64_t cols, const uint8_t *q,
                          const float *scale, int64_t srows, int64_t scols, int32_t r_off,
                          int32_t c_off, int32_t block_rows, int32_t block_cols,
                          const float *out) {
  if (mats < 0 || rows < 0 || cols < 0 || block_rows < 1 || block_cols < 1 || r_off < 0 ||
      c_off < 0 || r_off >= block_rows || c_off >= block_cols)
    return SC_EINVAL;
  if (mats == 0 || rows == 0 || cols == 0) return 1;
  if (q == NULL || scale == NULL || out == NULL) return SC_EINVAL;
  /* the scale table must cover the slice's last block */
  if ((rows - 1 + r_off) / block_rows >= srows || (cols - 1 + c_off) / block_cols >= scols)
    return SC_ERANGE;
  return 0;
}

int sc_kcheck_rows_op(int64_t n_rows, int64_t width, const void *a, const void *b,
                      const void *c) {
  if (n_rows < 0 || width < 0) return SC_EINVAL;
  if (n_rows == 0 || width == 0) return 1;
  if (a == NULL || b == NULL || c == NULL) return SC_EINVAL;
  return 0;
}

int sc_kcheck_lse_merge(int32_t n_shards, int64_t n_rows, int64_t width, const float *lse,
                        const float *out_in, const float *out) {
  if (n_shards < 1 || n_rows < 0 || width < 0) return SC_EINVAL;
  if (n_rows == 0) return 1;
  if (lse == NULL || out == NULL || (width > 0 && out_in == NULL)) return SC_EINVAL;
  return 0;
}

int sc_kcheck_lse_scale(int32_t n_shards, int32_t shard, int64_t n_rows, int64_t width,
                        const float *lse, const float *out) {
  if (n_shards < 1 || shard < 0 || shard >= n_shards || n_rows < 0 || width < 0)
    return SC_EINVAL;
  if (n_rows == 0) return 1;
  if (lse == NULL || (width > 0 && out == NULL)) return SC_EINVAL;
  return 0;
}

int sc_kcheck_gather_rows(int64_t n, int64_t width, const sc_krows *src, const sc_krows *dst) {
  int rc;
  if (n < 0) return SC_EINVAL;
  if ((dst->fmt == SC_KFMT_FP8_INDEX) != (src->fmt == SC_KFMT_FP8_INDEX) ||
      (dst->fmt == SC_KFMT_FP8_DS_MLA && src->fmt != SC_KFMT_FP8_DS_MLA))
    return SC_ENOTSUP; /* fp8 rows are copied, made by kv_write */
  if ((rc = check_key_rows(src, width)) || (rc = check_key_rows(dst, width)))
    return rc;
  if (n == 0 || width == 0) return 1;
  if (dst->rows < n) return SC_ERANGE;
  return 0;
}

int sc_kcheck_kv_write(int64_t n, int64_t width, const float *src, int64_t ld_src,
                       const int32_t *slots, const sc_krows *cache) {
  int rc;
  if (n < 0) return SC_EINVAL;
  if ((rc = check_key_rows(cache, width))) return rc;
  if (n == 0 || width == 0) return 1;
  if (src == NULL || slots == NULL || (n > 1 && ld_src < width)) return SC_EINVAL;
  return 0;
}

int sc_kcheck_topk_to_workspace(int32_t n_tok, int32_t topk, const int32_t *pos,
                                const int32_t *base, int32_t shard_rows_total, int32_t n,
                                int32_t il, const int32_t *out) {
  if (n_tok < 0 || topk < 0 || n < 1 || il < 1 || shard_rows_total < 0) return SC_EINVAL;
  if (n_tok == 0 || topk == 0) return 1;
  if (pos == NULL || base == NULL || out == NULL) return SC_EINVAL;
  return 0;
}

int sc_kcheck_topk_to_slots(int32_t n_tok, int32_t topk, const int32_t *pos,
                            const int32_t *req, const int32_t *bt, int32_t max_blocks,
                            int32_t block_size, int32_t n, int32_t il, int32_t dcp_rank,
                            const int32_t *out) {
  if (n_tok < 0 || topk < 0 || n < 1 || il < 1 || block_size < 1 || max_blocks < 0 ||
      dcp_rank < 0 || dcp_rank >= n || block_size % il != 0)
    return SC_EINVAL;
  if (n_tok == 0 || topk == 0) return 1;
  if (pos == NULL || req == NULL || bt == NULL || out == NULL) return SC_EINVAL;
  return 0;
}

int sc_kcheck_cache_keys(int32_t n_ranges, int32_t n_keys, const int32_t *req,
                         const int32_t *begin, const int32_t *end, const int32_t *bt,
                         int32_t max_blocks, int32_t block_size, int32_t n, int32_t il,
                         int32_t dcp_rank, const int32_t *pos, const int32_t *slot) {
  if (n_ranges < 0 || n_keys < 0 || n < 1 || il < 1 || block_size < 1 || max_blocks < 0 ||
      dcp_rank < 0 || dcp_rank >= n || block_size % il != 0 || (n_ranges == 0 && n_keys > 0))
    return SC_EINVAL;
  if (n_keys == 0) return 1;
  if (req == NULL || begin == NULL || end == NULL || bt == NULL || pos == NULL || slot == NULL)
    return SC_EINVAL;
  return 0;
}

int sc_kcheck_topk_merge(int32_t n_tok, int32_t n_shards, int32_t topk, const sc_kcand *cand,
                         const int32_t *out_pos, const sc_kcand *out_cand) {
  if (n_tok < 0 || n_shards < 1 || topk < 0) return SC_EINVAL;
  if (n_tok == 0 || topk == 0) return 1;
  if (cand == NULL || (out_pos == NULL && out_cand == NULL)) return SC_EINVAL;
  return 0;
}
