/* kbuf.h - helpers the model's compute files share: a kernel buffer grown to the largest
 * size asked for (scratch kept from step to step), the linear layer y = alpha * x W^T and
 * the gated pair of SwiGLU, through the kernels' linears op. Any thread that owns the
 * context. */
#ifndef SC_KBUF_H
#define SC_KBUF_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* *buf holds at least `bytes` (contents lost when it grows; 25% headroom so that slowly
 * growing steps do not reallocate every time). Once *rc is non-zero it does nothing and
 * returns NULL, so a run of calls needs one check at the end. */
static inline void *sc_kbuf_grow(sc_kernels *k, void **buf, size_t *cap, size_t bytes, int *rc) {
  if (*rc) return NULL;
  if (*buf == NULL || bytes > *cap) {
    if (*buf) k->ops->free(k, *buf);
    *buf = NULL;
    *cap = 0;
    const size_t c = bytes < 256 ? 256 : bytes + bytes / 4;
    if ((*rc = k->ops->alloc(k, c, buf))) return NULL;
    *cap = c;
  }
  return *buf;
}

/* y[rows][n] = alpha * x[rows][kk] * W^T, W row-major [n][kk] with leading dimension ldw:
 * the kernels' linears op with one part. */
static inline int sc_linear(sc_kernels *k, int64_t rows, int64_t n, int64_t kk, const float *x,
                            int64_t ldx, const float *wt, int64_t ldw, float *y, int64_t ldy,
                            float alpha) {
  const sc_linears a = {.rows = rows, .k = kk, .x = x, .ld_x = ldx, .n_parts = 1,
                        .part = {{wt, n, ldw, alpha, y, ldy}}};
  return k->ops->linears(k, &a);
}

/* g[rows][n] = SwiGLU(x W1^T, x W3^T), W1 and W3 row-major [n][kk], x and the outputs
 * dense (u: scratch of the same shape): the kernels' linears op, gated. */
static inline int sc_linear_gated(sc_kernels *k, int64_t rows, int64_t n, int64_t kk,
                                  const float *x, const float *w1, const float *w3, float *g,
                                  float *u) {
  const sc_linears a = {.rows = rows, .k = kk, .x = x, .ld_x = kk, .n_parts = 2, .gated = true,
                        .part = {{w1, n, kk, 1.0f, g, n}, {w3, n, kk, 1.0f, u, n}}};
  return k->ops->linears(k, &a);
}

#endif
