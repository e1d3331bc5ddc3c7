#include "kernels/kernels_check.h"

#include "actors/runtime/sc_error.h"

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

int sc_kcheck_attn(const sc_attn_args *a, sc_krows_check_fn check_rows) {
  if (a == NULL || a->n_tok < 0 || a->n_heads < 1 || a->dc < 1 || a->dr < 0 || a->topk < 0)
    return SC_EINVAL;
  const int64_t width = (int64_t)a->dc + a->dr;
  const int rc = check_rows(&a->kv, width);
  if (rc) return rc;
  if (a->n_tok == 0) return 1;
  if (a->q == NULL || a->out == NULL || a->lse == NULL || (a->topk > 0 && a->sel == NULL))
    return SC_EINVAL;
  if (a->n_tok > 1 && (a->ld_q < a->n_heads * width || a->ld_out < (int64_t)a->n_heads * a->dc ||
                       a->ld_lse < a->n_heads || a->ld_sel < a->topk))
    return SC_EINVAL;
  return 0;
}

int sc_kcheck_indexer(const sc_indexer_args *a, sc_krows_check_fn check_rows) {
  if (a == NULL || a->n_tok < 0 || a->n_heads < 1 || a->dim < 1 || a->topk < 0)
    return SC_EINVAL;
  const int rc = check_rows(&a->keys, a->dim);
  if (rc) return rc;
  if (a->n_tok == 0 || a->topk == 0) return 1;
  if (a->q == NULL || a->w == NULL || a->q_pos == NULL || a->key_pos == NULL ||
      a->key_begin == NULL || a->key_end == NULL ||
      (a->out_pos == NULL && a->out_cand == NULL) ||
      (a->n_tok > 1 && (a->ld_q < (int64_t)a->n_heads * a->dim || a->ld_w < a->n_heads)))
    return SC_EINVAL;
  return 0;
}
