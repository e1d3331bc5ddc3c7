/* kernels_composed.h - ops that a backend may run as a sequence of its own other ops:
 *  - linears (kernels.h, sc_linears): one gemm a part, then swiglu when gated;
 *  - add_rmsnorm: add, then rmsnorm;
 *  - rmsnorms and ropes: their parts one after another.
 * The CPU backend's ops (so that they compute exactly what the separate calls did), and
 * the CUDA backend's for what its own kernels do not take. Same thread rules as the
 * context. */
#ifndef SC_KERNELS_COMPOSED_H
#define SC_KERNELS_COMPOSED_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

int sc_kernels_linears_by_gemm(sc_kernels *k, const sc_linears *a);
int sc_kernels_add_rmsnorm_by_ops(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                                  int64_t ld_x, float *y, int64_t ld_y, const float *w,
                                  float eps, float *out, int64_t ld_out);
int sc_kernels_rmsnorms_by_ops(sc_kernels *k, const sc_rmsnorms *a);
int sc_kernels_ropes_by_ops(sc_kernels *k, const sc_ropes *r);

#ifdef __cplusplus
}
#endif

#endif
