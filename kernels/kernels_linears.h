/* kernels_linears.h - the linears op (kernels.h, sc_linears) as a sequence of a backend's
 * own ops: one gemm a part, then swiglu when gated. The CPU backend's op, and the CUDA
 * backend's for what its kernel does not take. Same thread rules as the context. */
#ifndef SC_KERNELS_LINEARS_H
#define SC_KERNELS_LINEARS_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

int sc_kernels_linears_by_gemm(sc_kernels *k, const sc_linears *a);

#ifdef __cplusplus
}
#endif

#endif
