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

int sc_kernels_ropes_by_ops(sc_kernels *k, const sc_ropes *r) {
  SC_KCHECK(sc_kcheck_ropes(r));
  int rc = 0;
  for (int32_t p = 0; p < r->n_parts && rc == 0; p++) {
    const sc_rope_part *q = &r->part[p];
    rc = r->inv_freq ? k->ops->rope_freq(k, r->n_tok, q->n_heads, q->rot_dim, q->x, q->ld_tok,
                                         q->ld_head, r->pos, r->inv_freq, r->attn_factor)
                     : k->ops->rope(k, r->n_tok, q->n_heads, q->rot_dim, q->x, q->ld_tok,
                                    q->ld_head, r->pos, r->theta);
  }
  return rc;
}
