/* cpu_dense.c - dense products through cblas_sgemm (OpenBLAS). Row-major. OpenBLAS runs
 * single-threaded (cpu_ctx.c says why); a product is split over the context's workers by
 * blocks of C rows, or by batch entries for a batched product, each block one sgemm. */
#include <cblas.h>

#include "kernels/cpu/cpu_internal.h"

/* Rows of C per block: enough that each sgemm keeps its micro-kernels busy. */
#define SC_KGEMM_MIN_ROWS 32

typedef struct {
  const sc_gemm *g;
  int64_t rows_per_block; /* > 0: split C rows of a single product; 0: split batches */
} gemm_job;

static void one_sgemm(const sc_gemm *g, int64_t batch, int64_t r0, int64_t r1) {
  const float *a = g->a + batch * g->stride_a + (g->trans_a ? r0 : r0 * g->lda);
  cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
              g->trans_b ? CblasTrans : CblasNoTrans, (blasint)(r1 - r0), (blasint)g->n,
              (blasint)g->k, g->alpha, a, (blasint)g->lda, g->b + batch * g->stride_b,
              (blasint)g->ldb, g->beta, g->c + batch * g->stride_c + r0 * g->ldc,
              (blasint)g->ldc);
}

static int gemm_part(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const gemm_job *j = p;
  if (j->rows_per_block == 0) {
    for (int64_t i = b; i < e; i++) one_sgemm(j->g, i, 0, j->g->m);
    return 0;
  }
  for (int64_t blk = b; blk < e; blk++) {
    const int64_t r0 = blk * j->rows_per_block;
    const int64_t r1 = r0 + j->rows_per_block < j->g->m ? r0 + j->rows_per_block : j->g->m;
    one_sgemm(j->g, 0, r0, r1);
  }
  return 0;
}

int sc_kcpu_gemm(sc_kernels *k, const sc_gemm *g) {
  SC_KCHECK(sc_kcheck_gemm(g));
  sc_kcpu *c = sc_kcpu_of(k);
  const int threads = sc_kcpu_threads(c);
  if (g->batch > 1) {
    gemm_job j = {g, 0};
    return sc_kcpu_parallel(c, g->batch, 1, gemm_part, &j);
  }
  int64_t rows = (g->m + threads - 1) / threads;
  if (rows < SC_KGEMM_MIN_ROWS) rows = SC_KGEMM_MIN_ROWS;
  gemm_job j = {g, rows};
  return sc_kcpu_parallel(c, (g->m + rows - 1) / rows, 1, gemm_part, &j);
}
