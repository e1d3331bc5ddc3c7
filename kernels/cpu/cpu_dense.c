/* cpu_dense.c - dense products through cblas_sgemm (OpenBLAS). Row-major; a batched
 * product is a loop of sgemm calls on strided operands. OpenBLAS uses its own threads. */
#include <cblas.h>

#include "kernels/cpu/cpu_internal.h"

int sc_kcpu_gemm(sc_kernels *k, const sc_gemm *g) {
  (void)k;
  if (g == NULL || g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 0) return SC_EINVAL;
  if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX) return SC_ERANGE;
  const int64_t rows_a = g->trans_a ? g->k : g->m, cols_a = g->trans_a ? g->m : g->k;
  const int64_t rows_b = g->trans_b ? g->n : g->k, cols_b = g->trans_b ? g->k : g->n;
  (void)rows_a;
  (void)rows_b;
  if (g->lda < (cols_a > 1 ? cols_a : 1) || g->ldb < (cols_b > 1 ? cols_b : 1) ||
      g->ldc < (g->n > 1 ? g->n : 1) || g->lda > INT32_MAX || g->ldb > INT32_MAX ||
      g->ldc > INT32_MAX)
    return SC_EINVAL;
  if (g->m == 0 || g->n == 0) return 0;
  if (g->c == NULL || (g->k > 0 && (g->a == NULL || g->b == NULL))) return SC_EINVAL;
  const int64_t batch = g->batch > 1 ? g->batch : 1;
  for (int64_t i = 0; i < batch; i++)
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                g->trans_b ? CblasTrans : CblasNoTrans, (blasint)g->m, (blasint)g->n,
                (blasint)g->k, g->alpha, g->a + i * g->stride_a, (blasint)g->lda,
                g->b + i * g->stride_b, (blasint)g->ldb, g->beta, g->c + i * g->stride_c,
                (blasint)g->ldc);
  return 0;
}
