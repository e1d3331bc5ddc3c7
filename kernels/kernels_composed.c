#include "kernels/kernels_composed.h"

#include "kernels/kernels_check.h"

int sc_kernels_linears_by_gemm(sc_kernels *k, const sc_linears *a) {
  SC_KCHECK(sc_kcheck_linears(a));
  for (int32_t j = 0; j < a->n_parts; j++) {
    const sc_linear_part *p = &a->part[j];
    const sc_gemm g = {.trans_b = true, .m = a->rows, .n = p->n, .k = a->k, .alpha = p->alpha,
                       .a = a->x, .lda = a->ld_x, .b = p->w, .ldb = p->ld_w, .c = p->out,
                       .ldc = p->ld_out, .batch = 1};
    const int rc = k->ops->gemm(k, &g);
    if (rc) return rc;
  }
  if (!a->gated) return 0;
  const sc_linear_part *g = &a->part[0], *u = &a->part[1];
  return k->ops->swiglu(k, a->rows, g->n, g->out, g->ld_out, u->out, u->ld_out, g->out,
                        g->ld_out);
}

int sc_kernels_add_rmsnorm_by_ops(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                                  int64_t ld_x, float *y, int64_t ld_y, const float *w,
                                  float eps, float *out, int64_t ld_out) {
  const int rc = k->ops->add(k, n_rows, dim, x, ld_x, y, ld_y);
  return rc ? rc : k->ops->rmsnorm(k, n_rows, dim, y, ld_y, w, eps, out, ld_out);
}

int sc_kernels_rmsnorms_by_ops(sc_kernels *k, const sc_rmsnorms *a) {
  SC_KCHECK(sc_kcheck_rmsnorms(a));
  int rc = 0;
  for (int32_t p = 0; p < a->n_parts && rc == 0; p++) {
    const sc_rmsnorm_part *q = &a->part[p];
    rc = k->ops->rmsnorm(k, a->n_rows, q->dim, q->x, q->ld_x, q->w, a->eps, q->out, q->ld_out);
  }
  return rc;
}

/* A part's rotary values copied to its out, by gather_rows: one call when its (token,
 * head) rows step evenly on both sides, else one a token. */
static int rope_part_copy(sc_kernels *k, int64_t n_tok, const sc_rope_part *q) {
  const bool even = q->n_heads == 1 || (q->ld_tok == q->n_heads * q->ld_head &&
                                        q->ld_tok_out == q->n_heads * q->ld_head_out);
  if (even) {
    const int64_t n = n_tok * q->n_heads;
    const int64_t sx = q->n_heads > 1 ? q->ld_head : q->ld_tok;
    const int64_t so = q->n_heads > 1 ? q->ld_head_out : q->ld_tok_out;
    return k->ops->gather_rows(k, n, q->rot_dim, (sc_krows){q->x, SC_KFMT_F32, sx, n}, NULL,
                               (sc_krows){q->out, SC_KFMT_F32, so, n});
  }
  int rc = 0;
  for (int64_t t = 0; t < n_tok && rc == 0; t++)
    rc = k->ops->gather_rows(
        k, q->n_heads, q->rot_dim, (sc_krows){q->x + t * q->ld_tok, SC_KFMT_F32, q->ld_head, q->n_heads},
        NULL, (sc_krows){q->out + t * q->ld_tok_out, SC_KFMT_F32, q->ld_head_out, q->n_heads});
  return rc;
}

/* Out of place: the copy, then the rotation in place there (the same values). */
int sc_kernels_ropes_by_ops(sc_kernels *k, const sc_ropes *r) {
  SC_KCHECK(sc_kcheck_ropes(r));
  int rc = 0;
  for (int32_t p = 0; p < r->n_parts && rc == 0; p++) {
    const sc_rope_part *q = &r->part[p];
    if (q->n_heads == 0 || q->rot_dim == 0) continue;
    float *x = q->x;
    int64_t ld_tok = q->ld_tok, ld_head = q->ld_head;
    if (q->out != NULL) {
      if ((rc = rope_part_copy(k, r->n_tok, q))) break;
      x = q->out, ld_tok = q->ld_tok_out, ld_head = q->ld_head_out;
    }
    rc = r->inv_freq ? k->ops->rope_freq(k, r->n_tok, q->n_heads, q->rot_dim, x, ld_tok, ld_head,
                                         r->pos, r->inv_freq, r->attn_factor)
                     : k->ops->rope(k, r->n_tok, q->n_heads, q->rot_dim, x, ld_tok, ld_head,
                                    r->pos, r->theta);
  }
  return rc;
}
