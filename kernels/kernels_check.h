/* kernels_check.h - the argument rules of kernels.h that every backend applies the same
 * way, so a backend differs from another only in what it computes. A backend passes its
 * own row-set check (which formats it supports). Each returns a negative SC_E* code for
 * invalid arguments, 1 when the op has nothing to do (empty shapes), 0 to run it.
 * Pure functions; any thread. */
#ifndef SC_KERNELS_CHECK_H
#define SC_KERNELS_CHECK_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*sc_krows_check_fn)(const sc_krows *rows, int64_t width);

int sc_kcheck_gemm(const sc_gemm *g);
int sc_kcheck_attn(const sc_attn_args *a, sc_krows_check_fn check_rows);
int sc_kcheck_indexer(const sc_indexer_args *a, sc_krows_check_fn check_rows);

#ifdef __cplusplus
}
#endif

#endif
