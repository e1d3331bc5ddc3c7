/* test_gpu_kernels.c - every op of the CUDA backend against the CPU reference backend
 * (sc_kernels_cpu_create) on fresh random inputs (never zeros), plus the fp8_ds_mla
 * layout against the CPU reference in fp8_ref.c.
 *
 * Outputs are poisoned (0xff bytes: NaN for floats, -1 for indices) before every op, so
 * an element the kernel fails to write shows up as NaN or a mismatch. Tolerances:
 * row movement, KV write (f32, bf16, fp8 bytes), top-K merge and position maps must match
 * exactly; f32 math within 1e-5 relative (norm-wise); attention over bf16 / fp8 KV on the
 * tensor cores within 1e-2; the indexer (bf16 operands on the tensor cores) must score
 * the bf16-rounded values to 1e-5 of their scale and select their exact top-K up to ties
 * that close, and may differ from the f32 CPU reference only within the rounding (see
 * indexer_case). */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/error.h"
#include "kernels/bf16.h"
#include "kernels/fp8_e4m3.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/kernels.h"
#include "model/sampling.h"
#include "tests/common/fp8_ref.h"
#include "tests/gpu/gpu_spin.h"
#include "tests/gpu/gpu_test.h"

GPU_TEST_GLOBALS

static sc_kernels *G, *C; /* the CUDA backend under test, the CPU reference */

typedef struct {
  void *g, *c;
} pbuf;

static void *up(sc_kernels *k, const void *h, size_t bytes) {
  void *b = NULL;
  if (k->ops->alloc(k, bytes, &b) != 0) abort();
  if (bytes && k->ops->copy(k, b, h, bytes, SC_KCOPY_H2D) != 0) abort();
  return b;
}
static pbuf both(const void *h, size_t bytes) { return (pbuf){up(G, h, bytes), up(C, h, bytes)}; }
static pbuf both_poison(size_t bytes) {
  pbuf p = {NULL, NULL};
  if (G->ops->alloc(G, bytes, &p.g) || C->ops->alloc(C, bytes, &p.c)) abort();
  if (G->ops->memset(G, p.g, 0xff, bytes) || C->ops->memset(C, p.c, 0xff, bytes)) abort();
  return p;
}
static void pfree(pbuf p) {
  G->ops->free(G, p.g);
  C->ops->free(C, p.c);
}
/* Both results to host; returns the first error of the GPU side (copy or sync). */
static int down(pbuf p, void *hg, void *hc, size_t bytes) {
  int rc = G->ops->copy(G, hg, p.g, bytes, SC_KCOPY_D2H);
  const int rs = G->ops->sync(G);
  if (hc && C->ops->copy(C, hc, p.c, bytes, SC_KCOPY_D2H) != 0) abort();
  return rc ? rc : rs;
}

/* ---- memory ---- */

static void case_memory(void) {
  const size_t n = (20u << 20) + 12345; /* larger than the pinned staging buffers */
  uint8_t *h = malloc(n), *back = malloc(n);
  for (size_t i = 0; i < n; i++) h[i] = (uint8_t)gt_next();
  void *a = up(G, h, n), *b = NULL;
  REQUIRE(G->ops->alloc(G, n, &b) == 0, "alloc");
  CHECK(G->ops->copy(G, b, a, n, SC_KCOPY_D2D) == 0, "d2d");
  CHECK(G->ops->memset(G, (char *)b + 1000, 0x5a, 777) == 0, "memset");
  CHECK(G->ops->copy(G, back, b, n, SC_KCOPY_D2H) == 0, "d2h");
  CHECK(G->ops->sync(G) == 0, "sync");
  memset(h + 1000, 0x5a, 777);
  CHECK(memcmp(h, back, n) == 0, "round trip differs");
  void *z = NULL;
  CHECK(G->ops->alloc(G, 0, &z) == 0 && z != NULL, "alloc of 0 bytes");
  G->ops->free(G, z);
  G->ops->free(G, a);
  G->ops->free(G, b);
  free(h);
  free(back);
}

/* ---- gemm ---- */

/* Returns the relative error against the CPU reference, after checking it is below tol. */
static double gemm_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch,
                        double tol) {
  const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
  const int64_t ra = ta ? k : m, rb = tb ? n : k;
  const int64_t bt = batch > 1 ? batch : 1;
  const int64_t sa = ra * lda + 7, sb = rb * ldb + 1, sc = m * ldc + 3;
  float *a = gt_rand_f32((size_t)(sa * bt), -1, 1), *b = gt_rand_f32((size_t)(sb * bt), -1, 1);
  float *c0 = gt_rand_f32((size_t)(sc * bt), -1, 1);
  pbuf A = both(a, sizeof(float) * (size_t)(sa * bt)), B = both(b, sizeof(float) * (size_t)(sb * bt));
  pbuf Cc = both(c0, sizeof(float) * (size_t)(sc * bt));
  sc_gemm g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 0.7f,
               .beta = 0.3f, .lda = lda, .stride_a = sa, .ldb = ldb, .stride_b = sb,
               .ldc = ldc, .stride_c = sc, .batch = batch};
  g.a = A.g, g.b = B.g, g.c = Cc.g;
  CHECK(G->ops->gemm(G, &g) == 0, "gpu gemm");
  g.a = A.c, g.b = B.c, g.c = Cc.c;
  CHECK(C->ops->gemm(C, &g) == 0, "cpu gemm");
  const size_t bytes = sizeof(float) * (size_t)(sc * bt);
  float *hg = malloc(bytes), *hc = malloc(bytes);
  CHECK(down(Cc, hg, hc, bytes) == 0, "gpu sync");
  const double e = gt_rel_err(hg, hc, (size_t)(sc * bt));
  CHECK(e < tol, "gemm ta=%d tb=%d batch=%lld rel err %.3g", ta, tb, (long long)batch, e);
  pfree(A), pfree(B), pfree(Cc);
  free(a), free(b), free(c0), free(hg), free(hc);
  return e;
}

static void case_gemm(void) {
  gemm_case(false, false, 67, 45, 33, 0, 1e-5);
  gemm_case(true, false, 31, 70, 129, 0, 1e-5);
  gemm_case(false, true, 128, 96, 200, 0, 1e-5);
  gemm_case(true, true, 9, 17, 65, 0, 1e-5);
  gemm_case(false, true, 16, 24, 40, 3, 1e-5);
  /* TF32 on: tensor-core rounding (10-bit mantissa) is visible but bounded; off again:
   * back to f32 */
  CHECK(sc_kernels_cuda_set_tf32(G, true) == 0, "tf32 on");
  const double e_tf32 = gemm_case(false, true, 128, 96, 512, 0, 1e-2);
  CHECK(e_tf32 > 1e-6, "tf32 on changed nothing (rel err %.3g)", e_tf32);
  CHECK(sc_kernels_cuda_set_tf32(G, false) == 0, "tf32 off");
  gemm_case(false, true, 128, 96, 512, 0, 1e-5);
}

/* ---- linears ---- */

/* Up to 4 parts over one x, each with its own W (leading dimension ld_w) and its own
 * output buffer (leading dimension n + 3, so that a write into the next row's columns or
 * with another part's ld shows). */
#define LIN_PARTS 4
typedef struct {
  int64_t k, ldx, x_off; /* x_off: x starts this many floats into its buffer */
  int n_parts;
  bool gated;
  int64_t n[LIN_PARTS], ld_w[LIN_PARTS];
  pbuf x, w[LIN_PARTS];
} lin_setup;

static int64_t lin_ldo(const lin_setup *ls, int j) { return ls->n[j] + 3; }

static lin_setup lin_make(int64_t k, int64_t rows_max, int n_parts, const int64_t *n,
                          int64_t ld_w_extra, int64_t x_off, bool gated) {
  lin_setup ls = {.k = k, .ldx = k + 4, .x_off = x_off, .n_parts = n_parts, .gated = gated};
  const size_t xn = (size_t)(rows_max * ls.ldx + x_off);
  float *x = gt_rand_f32(xn, -1, 1);
  ls.x = both(x, sizeof(float) * xn);
  free(x);
  for (int j = 0; j < n_parts; j++) {
    ls.n[j] = n[j], ls.ld_w[j] = k + ld_w_extra + 4 * j;
    const size_t wn = (size_t)((n[j] > 0 ? n[j] : 1) * ls.ld_w[j]);
    float *w = gt_rand_f32(wn, -1, 1);
    ls.w[j] = both(w, sizeof(float) * wn);
    free(w);
  }
  return ls;
}

static void lin_free(lin_setup *ls) {
  pfree(ls->x);
  for (int j = 0; j < ls->n_parts; j++) pfree(ls->w[j]);
}

/* Parts [j0, j1) of ls over rows r0 .. r0 + rows - 1 on both backends (gated: both
 * parts, out in part 0's). hg[j] / hc[j]: part j's output, rows x ldo; checks that
 * the GPU left every column past n as it was poisoned. */
static void lin_run(const lin_setup *ls, int j0, int j1, int64_t r0, int64_t rows,
                    float **hg, float **hc) {
  pbuf out[LIN_PARTS];
  for (int j = j0; j < j1; j++) out[j] = both_poison(sizeof(float) * (size_t)(rows * lin_ldo(ls, j)));
  for (int side = 0; side < 2; side++) {
    sc_kernels *k = side ? C : G;
    const float *x = (const float *)(side ? ls->x.c : ls->x.g) + ls->x_off + r0 * ls->ldx;
    sc_linears a = {.rows = rows, .k = ls->k, .x = x, .ld_x = ls->ldx, .n_parts = j1 - j0,
                    .gated = ls->gated};
    for (int j = j0; j < j1; j++)
      a.part[j - j0] = (sc_linear_part){side ? ls->w[j].c : ls->w[j].g, ls->n[j], ls->ld_w[j],
                                        1.0f - 0.375f * (float)j,
                                        side ? out[j].c : out[j].g, lin_ldo(ls, j)};
    CHECK(k->ops->linears(k, &a) == 0, "%s linears", side ? "cpu" : "gpu");
  }
  for (int j = j0; j < j1; j++) {
    const int64_t ldo = lin_ldo(ls, j);
    CHECK(down(out[j], hg[j], hc[j], sizeof(float) * (size_t)(rows * ldo)) == 0, "gpu sync");
    pfree(out[j]);
    if (ls->gated && j == 1) continue; /* scratch */
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = ls->n[j]; c < ldo; c++) {
        uint32_t bits;
        memcpy(&bits, hg[j] + r * ldo + c, 4);
        CHECK(bits == 0xffffffffu, "linears: part %d row %lld column %lld (past n %lld) written",
              j, (long long)r, (long long)c, (long long)ls->n[j]);
        hg[j][r * ldo + c] = hc[j][r * ldo + c] = 0.0f; /* (compared below) */
      }
  }
}

/* Against the CPU for 1, 2, 3, 8 rows (the kernel, where it takes the operands) and 11
 * (cuBLAS part by part); where the kernel runs, its promise: a row's outputs are
 * bit-identical whatever the rows beside it and whatever parts share the op. */
static void lin_case(const char *what, int64_t k, int n_parts, const int64_t *n,
                     int64_t ld_w_extra, int64_t x_off, bool gated, bool kernel) {
  const int64_t rmax = 11;
  lin_setup ls = lin_make(k, rmax, n_parts, n, ld_w_extra, x_off, gated);
  float *hg[LIN_PARTS], *hc[LIN_PARTS], *one[LIN_PARTS], *tmp[LIN_PARTS];
  for (int j = 0; j < n_parts; j++) {
    const size_t sz = sizeof(float) * (size_t)(rmax * lin_ldo(&ls, j));
    hg[j] = malloc(sz), hc[j] = malloc(sz), one[j] = malloc(sz), tmp[j] = malloc(sz);
  }
  const int outs = gated ? 1 : n_parts;
  const int64_t counts[] = {1, 2, 3, 8, 11};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    const int64_t rows = counts[i];
    lin_run(&ls, 0, n_parts, 0, rows, hg, hc);
    for (int j = 0; j < outs; j++) {
      const double e = gt_rel_err(hg[j], hc[j], (size_t)(rows * lin_ldo(&ls, j)));
      CHECK(e < 1e-5, "linears %s: rows %lld, part %d: rel err %.3g", what, (long long)rows, j,
            e);
    }
    if (rows > 8 || !kernel) continue;
    for (int64_t r = 0; r < rows; r++) { /* row r alone */
      lin_run(&ls, 0, n_parts, r, 1, one, tmp);
      for (int j = 0; j < outs; j++)
        CHECK(memcmp(one[j], hg[j] + r * lin_ldo(&ls, j), sizeof(float) * (size_t)ls.n[j]) == 0,
              "linears %s: row %lld alone differs from row %lld of %lld (part %d)", what,
              (long long)r, (long long)r, (long long)rows, j);
    }
    for (int j = 0; j < n_parts && !gated; j++) { /* part j alone */
      lin_run(&ls, j, j + 1, 0, rows, one, tmp);
      CHECK(memcmp(one[j], hg[j], sizeof(float) * (size_t)(rows * lin_ldo(&ls, j))) == 0,
            "linears %s: part %d alone differs from itself among %d parts (%lld rows)", what, j,
            n_parts, (long long)rows);
    }
  }
  printf("     linears %s: against the CPU%s\n", what,
         kernel ? "; alone, batched and among other parts identical" : "");
  lin_free(&ls);
  for (int j = 0; j < n_parts; j++) free(hg[j]), free(hc[j]), free(one[j]), free(tmp[j]);
}

static void case_linears(void) {
  const int64_t three[3] = {96, 300, 37}, with_empty[4] = {96, 300, 0, 37};
  const int64_t gate[2] = {96, 96}, wide[2] = {9000, 40};
  lin_case("3 parts", 512, 3, three, 0, 0, false, true);
  lin_case("4 parts, one empty", 512, 4, with_empty, 8, 0, false, true);
  lin_case("gated", 512, 2, gate, 0, 0, true, true);
  lin_case("3 chunks of x", 2052, 3, three, 0, 0, false, true);
  lin_case("3 chunks of x, gated", 2052, 2, gate, 0, 0, true, true);
  /* 9040 rows: 4 a warp (the LM head's shape), and the part of 40 beside it */
  lin_case("4 rows a warp", 512, 2, wide, 0, 0, false, true);
  lin_case("x not 16-byte aligned (cuBLAS)", 512, 3, three, 0, 1, false, false);
  lin_case("ld_w not in float4s (cuBLAS)", 512, 3, three, 1, 0, false, false);
  lin_case("k not in float4s (cuBLAS)", 10, 3, three, 0, 0, false, false);
}

/* ---- elementwise ---- */

static void case_elementwise(void) {
  const int64_t rows = 37, dim = 300, ld = 310;
  const size_t nx = (size_t)(rows * ld);
  float *x = gt_rand_f32(nx, -2, 2), *w = gt_rand_f32((size_t)dim, 0.5, 1.5);
  float *hg = malloc(sizeof(float) * nx), *hc = malloc(sizeof(float) * nx);
  pbuf X = both(x, sizeof(float) * nx), W = both(w, sizeof(float) * (size_t)dim);
  pbuf O = both_poison(sizeof(float) * nx);
  CHECK(G->ops->rmsnorm(G, rows, dim, X.g, ld, W.g, 1e-6f, O.g, ld) == 0, "rmsnorm");
  CHECK(C->ops->rmsnorm(C, rows, dim, X.c, ld, W.c, 1e-6f, O.c, ld) == 0, "rmsnorm cpu");
  CHECK(down(O, hg, hc, sizeof(float) * nx) == 0, "sync");
  for (int64_t r = 0; r < rows; r++) /* compare the written columns only */
    CHECK(gt_rel_err(hg + r * ld, hc + r * ld, (size_t)dim) < 1e-5, "rmsnorm row %lld",
          (long long)r);
  /* in place, no weight */
  CHECK(G->ops->rmsnorm(G, rows, dim, X.g, ld, NULL, 1e-5f, X.g, ld) == 0, "rmsnorm in place");
  CHECK(C->ops->rmsnorm(C, rows, dim, X.c, ld, NULL, 1e-5f, X.c, ld) == 0, "rmsnorm cpu");
  CHECK(down(X, hg, hc, sizeof(float) * nx) == 0, "sync");
  CHECK(gt_rel_err(hg, hc, nx) < 1e-5, "rmsnorm in place: %.3g", gt_rel_err(hg, hc, nx));

  /* rope on a [tok][head] layout with padding */
  const int64_t nt = 9, ldh = 80, ldt = 5 * 80 + 3;
  const int32_t heads = 5, rot = 64;
  float *q = gt_rand_f32((size_t)(nt * ldt), -1, 1);
  int32_t pos[9];
  for (int i = 0; i < 9; i++) pos[i] = (int32_t)gt_int(0, 150000);
  pbuf Q = both(q, sizeof(float) * (size_t)(nt * ldt)), P = both(pos, sizeof pos);
  CHECK(G->ops->rope(G, nt, heads, rot, Q.g, ldt, ldh, P.g, 10000.0f) == 0, "rope");
  CHECK(C->ops->rope(C, nt, heads, rot, Q.c, ldt, ldh, P.c, 10000.0f) == 0, "rope cpu");
  float *qg = malloc(sizeof(float) * (size_t)(nt * ldt)), *qc = malloc(sizeof(float) * (size_t)(nt * ldt));
  CHECK(down(Q, qg, qc, sizeof(float) * (size_t)(nt * ldt)) == 0, "sync");
  CHECK(gt_rel_err(qg, qc, (size_t)(nt * ldt)) < 1e-5, "rope %.3g",
        gt_rel_err(qg, qc, (size_t)(nt * ldt)));

  /* swiglu and add */
  float *gate = gt_rand_f32(nx, -4, 4), *upv = gt_rand_f32(nx, -2, 2);
  pbuf Gt = both(gate, sizeof(float) * nx), U = both(upv, sizeof(float) * nx);
  pbuf S = both_poison(sizeof(float) * nx);
  CHECK(G->ops->swiglu(G, rows, dim, Gt.g, ld, U.g, ld, S.g, ld) == 0, "swiglu");
  CHECK(C->ops->swiglu(C, rows, dim, Gt.c, ld, U.c, ld, S.c, ld) == 0, "swiglu cpu");
  CHECK(down(S, hg, hc, sizeof(float) * nx) == 0, "sync");
  for (int64_t r = 0; r < rows; r++)
    CHECK(gt_rel_err(hg + r * ld, hc + r * ld, (size_t)dim) < 1e-5, "swiglu row %lld",
          (long long)r);
  CHECK(G->ops->add(G, rows, dim, Gt.g, ld, U.g, ld) == 0, "add");
  CHECK(C->ops->add(C, rows, dim, Gt.c, ld, U.c, ld) == 0, "add cpu");
  CHECK(down(U, hg, hc, sizeof(float) * nx) == 0, "sync");
  CHECK(memcmp(hg, hc, sizeof(float) * nx) == 0, "add differs");
  /* add_rmsnorm: the sums as add's (exactly), the norm against the CPU, and both to the
   * bit what the GPU's add and rmsnorm give as two launches */
  float *hy = malloc(sizeof(float) * nx), *hy2 = malloc(sizeof(float) * nx);
  pbuf Y = both(upv, sizeof(float) * nx), Y2 = both(upv, sizeof(float) * nx);
  pbuf N = both_poison(sizeof(float) * nx), N2 = both_poison(sizeof(float) * nx);
  CHECK(G->ops->add_rmsnorm(G, rows, dim, Gt.g, ld, Y.g, ld, W.g, 1e-6f, N.g, ld) == 0,
        "add_rmsnorm");
  CHECK(C->ops->add_rmsnorm(C, rows, dim, Gt.c, ld, Y.c, ld, W.c, 1e-6f, N.c, ld) == 0,
        "add_rmsnorm cpu");
  CHECK(G->ops->add(G, rows, dim, Gt.g, ld, Y2.g, ld) == 0 &&
            G->ops->rmsnorm(G, rows, dim, Y2.g, ld, W.g, 1e-6f, N2.g, ld) == 0,
        "add, rmsnorm");
  CHECK(down(Y, hg, hc, sizeof(float) * nx) == 0 && down(Y2, hy2, NULL, sizeof(float) * nx) == 0,
        "sync");
  CHECK(memcmp(hg, hc, sizeof(float) * nx) == 0, "add_rmsnorm: the sums differ from the CPU's");
  CHECK(memcmp(hg, hy2, sizeof(float) * nx) == 0, "add_rmsnorm: the sums differ from add's");
  CHECK(down(N, hg, hc, sizeof(float) * nx) == 0 && down(N2, hy, NULL, sizeof(float) * nx) == 0,
        "sync");
  for (int64_t r = 0; r < rows; r++) {
    CHECK(gt_rel_err(hg + r * ld, hc + r * ld, (size_t)dim) < 1e-5, "add_rmsnorm row %lld",
          (long long)r);
    CHECK(memcmp(hg + r * ld, hy + r * ld, sizeof(float) * (size_t)dim) == 0,
          "add_rmsnorm row %lld differs from add then rmsnorm", (long long)r);
  }
  /* in place (out = y), no weight, rows shorter than the block: as add then rmsnorm */
  CHECK(G->ops->add_rmsnorm(G, rows, 100, Gt.g, ld, Y.g, ld, NULL, 1e-6f, Y.g, ld) == 0 &&
            G->ops->add(G, rows, 100, Gt.g, ld, Y2.g, ld) == 0 &&
            G->ops->rmsnorm(G, rows, 100, Y2.g, ld, NULL, 1e-6f, Y2.g, ld) == 0,
        "add_rmsnorm in place");
  CHECK(down(Y, hg, NULL, sizeof(float) * nx) == 0 && down(Y2, hy, NULL, sizeof(float) * nx) == 0,
        "sync");
  CHECK(memcmp(hg, hy, sizeof(float) * nx) == 0,
        "add_rmsnorm in place without weight differs from add then rmsnorm");
  pfree(Y), pfree(Y2), pfree(N), pfree(N2);
  free(hy), free(hy2);
  pfree(X), pfree(W), pfree(O), pfree(Q), pfree(P), pfree(Gt), pfree(U), pfree(S);
  free(x), free(w), free(hg), free(hc), free(q), free(qg), free(qc), free(gate), free(upv);
}

/* rmsnorms: one launch of two parts normalises each to the bit as its own rmsnorm launch
 * does (one in place, one out of place without weight). */
static void case_rmsnorms(void) {
  enum { NR = 5, DA = 256, LA = 260, DB = 512, LB = 640 };
  const size_t n = (size_t)NR * (LA + LB);
  float *x = gt_rand_f32(n, -3, 3), *w = gt_rand_f32(DA, 0.5, 1.5);
  float *one = malloc(sizeof(float) * n), *all = malloc(sizeof(float) * n);
  pbuf A = both(x, sizeof(float) * n), B = both(x, sizeof(float) * n), W = both(w, sizeof(float) * DA);
  pbuf OA = both_poison(sizeof(float) * n), OB = both_poison(sizeof(float) * n);
  float *a = (float *)A.g, *b = (float *)B.g;
  const sc_rmsnorms r = {.n_rows = NR, .eps = 1e-6f, .n_parts = 2,
                         .part = {{DA, a, LA, (const float *)W.g, a, LA},
                                  {DB, a + NR * LA, LB, NULL, (float *)OA.g, LB}}};
  CHECK(G->ops->rmsnorms(G, &r) == 0, "rmsnorms");
  CHECK(G->ops->rmsnorm(G, NR, DA, b, LA, (const float *)W.g, 1e-6f, b, LA) == 0 &&
            G->ops->rmsnorm(G, NR, DB, b + NR * LA, LB, NULL, 1e-6f, (float *)OB.g, LB) == 0,
        "rmsnorm");
  CHECK(down(A, all, NULL, sizeof(float) * n) == 0 && down(B, one, NULL, sizeof(float) * n) == 0,
        "sync");
  CHECK(memcmp(all, one, sizeof(float) * n) == 0, "rmsnorms in place differ from rmsnorm");
  CHECK(down(OA, all, NULL, sizeof(float) * n) == 0 && down(OB, one, NULL, sizeof(float) * n) == 0,
        "sync");
  for (int r0 = 0; r0 < NR; r0++)
    CHECK(memcmp(all + r0 * LB, one + r0 * LB, sizeof(float) * DB) == 0,
          "rmsnorms row %d differs from rmsnorm", r0);
  sc_rmsnorms bad = r;
  bad.n_parts = 3;
  CHECK(G->ops->rmsnorms(G, &bad) == SC_EINVAL, "3 parts accepted");
  pfree(A), pfree(B), pfree(W), pfree(OA), pfree(OB);
  free(x), free(w), free(one), free(all);
}

/* ropes: one launch of several parts rotates each part to the bit as its own rope (or
 * rope_freq) launch does; parts of different head counts, widths and strides, one of
 * them empty, one rotated into another buffer (its input left as it was), with theta
 * and with a table. */
static void case_ropes(void) {
  enum { NT = 7, LA = 5 * 80 + 3, LB = 70, LC = 3 * 40 + 1, LO = 3 * 36 };
  const size_t n = (size_t)NT * (LA + LB + LC), no = (size_t)NT * LO;
  int32_t pos[NT];
  for (int i = 0; i < NT; i++) pos[i] = (int32_t)gt_int(0, 150000);
  double inv[32];
  for (int i = 0; i < 32; i++) inv[i] = pow(10000.0, -2.0 * i / 64.0) * (i < 9 ? 1.0 : 0.04);
  float *x = gt_rand_f32(n, -1, 1), *one = malloc(sizeof(float) * n),
        *all = malloc(sizeof(float) * n), *yo = malloc(sizeof(float) * no);
  pbuf P = both(pos, sizeof pos), F = both(inv, sizeof inv);
  for (int table = 0; table < 2; table++) {
    pbuf A = both(x, sizeof(float) * n), B = both(x, sizeof(float) * n), O = both_poison(sizeof(float) * no);
    float *a = (float *)A.g, *b = (float *)B.g;
    sc_ropes r = {.n_tok = NT, .pos = (const int32_t *)P.g, .theta = 10000.0f,
                  .inv_freq = table ? (const double *)F.g : NULL, .attn_factor = 1.1f,
                  .n_parts = 4};
    const int64_t oa = 0, ob = (int64_t)NT * LA, oc = ob + (int64_t)NT * LB;
    r.part[0] = (sc_rope_part){.n_heads = 5, .rot_dim = 64, .x = a + oa, .ld_tok = LA, .ld_head = 80};
    r.part[1] = (sc_rope_part){.n_heads = 1, .rot_dim = 64, .x = a + ob, .ld_tok = LB, .ld_head = 64};
    r.part[2] = (sc_rope_part){.n_heads = 0, .rot_dim = 64, .x = a + ob + 1, .ld_tok = LB,
                               .ld_head = 64}; /* nothing to rotate */
    r.part[3] = (sc_rope_part){.n_heads = 3, .rot_dim = 32, .x = a + oc, .ld_tok = LC, .ld_head = 40,
                               .out = (float *)O.g, .ld_tok_out = LO, .ld_head_out = 36};
    CHECK(G->ops->ropes(G, &r) == 0, "ropes (table %d)", table);
    for (int p = 0; p < 4; p++) {
      const sc_rope_part q = r.part[p];
      float *xb = b + (q.x - a);
      CHECK((table ? G->ops->rope_freq(G, NT, q.n_heads, q.rot_dim, xb, q.ld_tok, q.ld_head,
                                       r.pos, r.inv_freq, r.attn_factor)
                   : G->ops->rope(G, NT, q.n_heads, q.rot_dim, xb, q.ld_tok, q.ld_head, r.pos,
                                  r.theta)) == 0,
            "rope part %d", p);
    }
    CHECK(down(A, all, NULL, sizeof(float) * n) == 0 && down(B, one, NULL, sizeof(float) * n) == 0 &&
              down(O, yo, NULL, sizeof(float) * no) == 0,
          "sync");
    CHECK(memcmp(all, one, sizeof(float) * oc) == 0, "ropes differ from rope (table %d)", table);
    CHECK(memcmp(all, x, sizeof(float) * oc) != 0, "ropes rotated nothing");
    CHECK(memcmp(all + oc, x + oc, sizeof(float) * (n - oc)) == 0,
          "an out-of-place part changed its input (table %d)", table);
    for (int t = 0; t < NT; t++)
      for (int h = 0; h < 3; h++)
        CHECK(memcmp(yo + t * LO + h * 36, one + oc + t * LC + h * 40, sizeof(float) * 32) == 0,
              "out of place, token %d head %d, differs from rope (table %d)", t, h, table);
    pfree(A), pfree(B), pfree(O);
  }
  sc_ropes bad = {.n_tok = 1, .pos = (const int32_t *)P.g, .theta = 1.0f, .n_parts = 5};
  CHECK(G->ops->ropes(G, &bad) == SC_EINVAL, "5 parts accepted");
  pfree(P), pfree(F);
  free(x), free(one), free(all), free(yo);
}

/* The ops a checkpoint's model adds (rope_freq, layernorm, weighted_sum_rows) against the
 * CPU reference: the same tolerances as their synthetic-model siblings; the combine's sum
 * is taken in the same order on both (picks in order from 0, the shared expert last), so
 * it differs only by contraction; an index out of range raises SC_ERANGE on the device. */
static void case_checkpoint_ops(void) {
  /* rope_freq: a YaRN-like table (not theta's), a factor != 1, padded [tok][head] rows */
  const int64_t nt = 11, ldh = 72, ldt = 3 * 72 + 5;
  const int32_t heads = 3, rot = 64;
  double inv[32];
  for (int i = 0; i < 32; i++) inv[i] = pow(10000.0, -2.0 * i / 64.0) * (i < 12 ? 1.0 : 0.025);
  float *q = gt_rand_f32((size_t)(nt * ldt), -1, 1);
  int32_t pos[11];
  for (int i = 0; i < 11; i++) pos[i] = (int32_t)gt_int(0, 150000);
  pbuf Q = both(q, sizeof(float) * (size_t)(nt * ldt)), P = both(pos, sizeof pos),
       F = both(inv, sizeof inv);
  CHECK(G->ops->rope_freq(G, nt, heads, rot, Q.g, ldt, ldh, P.g, F.g, 1.1f) == 0, "rope_freq");
  CHECK(C->ops->rope_freq(C, nt, heads, rot, Q.c, ldt, ldh, P.c, F.c, 1.1f) == 0, "cpu");
  float *qg = malloc(sizeof(float) * (size_t)(nt * ldt)), *qc = malloc(sizeof(float) * (size_t)(nt * ldt));
  CHECK(down(Q, qg, qc, sizeof(float) * (size_t)(nt * ldt)) == 0, "sync");
  CHECK(gt_rel_err(qg, qc, (size_t)(nt * ldt)) < 1e-5, "rope_freq %.3g",
        gt_rel_err(qg, qc, (size_t)(nt * ldt)));

  /* layernorm with weight and bias, and without (ones, zeros), in place */
  const int64_t rows = 29, dim = 333, ld = 340;
  const size_t nx = (size_t)(rows * ld);
  float *x = gt_rand_f32(nx, -3, 5), *w = gt_rand_f32((size_t)dim, 0.5, 1.5),
        *b = gt_rand_f32((size_t)dim, -0.5, 0.5);
  float *hg = malloc(sizeof(float) * nx), *hc = malloc(sizeof(float) * nx);
  pbuf X = both(x, sizeof(float) * nx), W = both(w, sizeof(float) * (size_t)dim),
       B = both(b, sizeof(float) * (size_t)dim), O = both_poison(sizeof(float) * nx);
  CHECK(G->ops->layernorm(G, rows, dim, X.g, ld, W.g, B.g, 1e-6f, O.g, ld) == 0, "layernorm");
  CHECK(C->ops->layernorm(C, rows, dim, X.c, ld, W.c, B.c, 1e-6f, O.c, ld) == 0, "cpu");
  CHECK(down(O, hg, hc, sizeof(float) * nx) == 0, "sync");
  for (int64_t r = 0; r < rows; r++)
    CHECK(gt_rel_err(hg + r * ld, hc + r * ld, (size_t)dim) < 1e-5, "layernorm row %lld: %.3g",
          (long long)r, gt_rel_err(hg + r * ld, hc + r * ld, (size_t)dim));
  CHECK(G->ops->layernorm(G, rows, dim, X.g, ld, NULL, NULL, 1e-5f, X.g, ld) == 0, "in place");
  CHECK(C->ops->layernorm(C, rows, dim, X.c, ld, NULL, NULL, 1e-5f, X.c, ld) == 0, "cpu");
  CHECK(down(X, hg, hc, sizeof(float) * nx) == 0, "sync");
  CHECK(gt_rel_err(hg, hc, nx) < 1e-5, "layernorm in place: %.3g", gt_rel_err(hg, hc, nx));

  /* weighted_sum_rows: 23 tokens x 4 picks over 40 expert rows (some picks -1), a shared
   * expert's rows added last, padded strides */
  const int64_t nt2 = 23, width = 270, lds = 280, ldo = 275, src_rows = 40;
  const int32_t topk = 4;
  float *src = gt_rand_f32((size_t)(src_rows * lds), -2, 2), *add = gt_rand_f32((size_t)(nt2 * ldo), -1, 1);
  float *wt = gt_rand_f32((size_t)(nt2 * topk), 0, 1);
  int32_t rws[23 * 4];
  for (int i = 0; i < 23 * 4; i++) rws[i] = i % 7 == 3 ? -1 : (int32_t)gt_int(0, src_rows - 1);
  pbuf S = both(src, sizeof(float) * (size_t)(src_rows * lds)), A = both(add, sizeof(float) * (size_t)(nt2 * ldo)),
       Wt = both(wt, sizeof(float) * (size_t)(nt2 * topk)), R = both(rws, sizeof rws),
       Y = both_poison(sizeof(float) * (size_t)(nt2 * ldo));
  float *yg = malloc(sizeof(float) * (size_t)(nt2 * ldo)), *yc = malloc(sizeof(float) * (size_t)(nt2 * ldo));
  for (int with_add = 0; with_add < 2; with_add++) {
    CHECK(G->ops->weighted_sum_rows(G, nt2, topk, width, S.g, lds, src_rows, R.g, Wt.g,
                                    with_add ? A.g : NULL, ldo, Y.g, ldo) == 0, "combine");
    CHECK(C->ops->weighted_sum_rows(C, nt2, topk, width, S.c, lds, src_rows, R.c, Wt.c,
                                    with_add ? A.c : NULL, ldo, Y.c, ldo) == 0, "cpu");
    CHECK(down(Y, yg, yc, sizeof(float) * (size_t)(nt2 * ldo)) == 0, "sync");
    for (int64_t t = 0; t < nt2; t++)
      CHECK(gt_rel_err(yg + t * ldo, yc + t * ldo, (size_t)width) < 1e-6, "combine row %lld: %.3g",
            (long long)t, gt_rel_err(yg + t * ldo, yc + t * ldo, (size_t)width));
  }
  /* dequant_fp8: 3 matrices of 70 x 300 bytes, a slice starting at (20, 50) inside its
   * 128 x 128 scale blocks; every byte value: bit-identical floats (NaN for NaN codes) */
  {
    const int32_t mats = 3;
    const int64_t drows = 70, dcols = 300, srows = 1, scols = 3;
    const size_t nq = (size_t)(mats * drows * dcols), ns = (size_t)(mats * srows * scols);
    uint8_t *hq8 = malloc(nq);
    for (size_t i = 0; i < nq; i++) hq8[i] = (uint8_t)(i * 37 + 11);
    float *hsc = gt_rand_f32(ns, 1e-4, 2);
    pbuf Q8 = both(hq8, nq), SC = both(hsc, sizeof(float) * ns),
         D = both_poison(sizeof(float) * nq);
    float *dg = malloc(sizeof(float) * nq), *dc = malloc(sizeof(float) * nq);
    CHECK(G->ops->dequant_fp8(G, mats, drows, dcols, Q8.g, SC.g, srows, scols, 20, 50, 128, 128,
                              D.g) == 0, "dequant_fp8");
    CHECK(C->ops->dequant_fp8(C, mats, drows, dcols, Q8.c, SC.c, srows, scols, 20, 50, 128, 128,
                              D.c) == 0, "cpu");
    CHECK(down(D, dg, dc, sizeof(float) * nq) == 0, "sync");
    size_t differ = 0; /* NaN codes give a NaN on both (the GPU's canonical one) */
    for (size_t i = 0; i < nq; i++)
      differ += isnan(dg[i]) ? !isnan(dc[i]) : memcmp(&dg[i], &dc[i], sizeof(float)) != 0;
    CHECK(differ == 0, "dequant_fp8: %zu floats differ from the CPU's", differ);
    pfree(Q8), pfree(SC), pfree(D);
    free(hq8), free(hsc), free(dg), free(dc);
  }
  /* a pick past the expert rows: the device's error flag, read at the sync */
  rws[5] = (int32_t)src_rows;
  pbuf Rbad = both(rws, sizeof rws);
  CHECK(G->ops->weighted_sum_rows(G, nt2, topk, width, S.g, lds, src_rows, Rbad.g, Wt.g, NULL,
                                  ldo, Y.g, ldo) == 0, "combine, bad row (queued)");
  CHECK(G->ops->sync(G) == SC_ERANGE, "a row out of range is reported");
  pfree(Q), pfree(P), pfree(F), pfree(X), pfree(W), pfree(B), pfree(O), pfree(S), pfree(A);
  pfree(Wt), pfree(R), pfree(Y), pfree(Rbad);
  free(q), free(qg), free(qc), free(x), free(w), free(b), free(hg), free(hc), free(src);
  free(add), free(wt), free(yg), free(yc);
}

/* ---- gather and KV write ---- */

static void gather_case(sc_kfmt sf, sc_kfmt df, int64_t width, int64_t sld, int64_t dld,
                        bool with_idx) {
  const int64_t srows = 500, n = 300;
  const size_t ssz = sc_kfmt_size(sf), dsz = sc_kfmt_size(df);
  const size_t sbytes = (size_t)(srows * sld) * ssz, dbytes = (size_t)(n * dld) * dsz;
  uint8_t *src = malloc(sbytes);
  for (int64_t i = 0; i < srows * sld; i++) {
    const float v = (float)gt_unif(-3, 3);
    if (sf == SC_KFMT_F32) ((float *)src)[i] = v;
    else ((uint16_t *)src)[i] = sc_f32_to_bf16(v);
  }
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)gt_int(-1, srows - 1);
  pbuf S = both(src, sbytes), I = both(idx, sizeof(int32_t) * (size_t)n), D = both_poison(dbytes);
  CHECK(G->ops->gather_rows(G, n, width, (sc_krows){S.g, sf, sld, srows}, with_idx ? I.g : NULL,
                            (sc_krows){D.g, df, dld, n}) == 0,
        "gather");
  CHECK(C->ops->gather_rows(C, n, width, (sc_krows){S.c, sf, sld, srows}, with_idx ? I.c : NULL,
                            (sc_krows){D.c, df, dld, n}) == 0,
        "gather cpu");
  uint8_t *hg = malloc(dbytes), *hc = malloc(dbytes);
  CHECK(down(D, hg, hc, dbytes) == 0, "sync");
  int bad = 0;
  for (int64_t r = 0; r < n; r++)
    bad += memcmp(hg + (size_t)(r * dld) * dsz, hc + (size_t)(r * dld) * dsz, (size_t)width * dsz) != 0;
  CHECK(bad == 0, "gather %d->%d width %lld: %d rows differ", sf, df, (long long)width, bad);
  pfree(S), pfree(I), pfree(D);
  free(src), free(idx), free(hg), free(hc);
}

static void case_gather(void) {
  gather_case(SC_KFMT_F32, SC_KFMT_F32, 70, 75, 70, true);
  gather_case(SC_KFMT_BF16, SC_KFMT_BF16, 704, 704, 704, true); /* 16-byte path */
  gather_case(SC_KFMT_BF16, SC_KFMT_BF16, 33, 35, 33, true);    /* 2-byte path */
  gather_case(SC_KFMT_F32, SC_KFMT_BF16, 64, 64, 72, true);
  gather_case(SC_KFMT_BF16, SC_KFMT_F32, 64, 80, 64, false);
  gather_case(SC_KFMT_F32, SC_KFMT_F32, 128, 128, 128, false);  /* 16-byte identity */
}

/* fp8_index keys (the KV cache's index keys with --index-format fp8): written by kv_write
 * and copied by gather_rows on the GPU as on the CPU, byte for byte (rows of zeros, of
 * other magnitudes and with a NaN, untouched slots included); 128 wide in 144-byte rows
 * as the cache lays them out, 40 wide in 48-byte rows. */
static void fp8_index_rows_case(int32_t dim, int64_t ld) {
  const int64_t n = 300, rows = 500, ldx = dim + 5;
  float *x = gt_rand_f32((size_t)(n * ldx), -4, 4);
  for (int64_t i = 0; i < dim; i++) x[2 * ldx + i] = 0.0f;
  for (int64_t r = 3; r < n; r += 11)
    for (int64_t i = 0; i < dim; i++) x[r * ldx + i] *= r % 2 ? 3000.0f : 1e-4f;
  x[4 * ldx + 1] = NAN; /* the NaN byte, the row's scale from the others */
  int32_t *slots = malloc(sizeof(int32_t) * (size_t)n), *perm = malloc(sizeof(int32_t) * (size_t)rows);
  for (int32_t i = 0; i < rows; i++) perm[i] = i;
  gt_shuffle_i32(perm, rows);
  for (int64_t i = 0; i < n; i++) slots[i] = gt_int(0, 9) == 0 ? -1 : perm[i];
  const size_t bytes = (size_t)(rows * ld);
  uint8_t *init = malloc(bytes);
  for (size_t i = 0; i < bytes; i++) init[i] = (uint8_t)(gt_next() & 0x77); /* no NaN byte */
  for (int64_t r = 0; r < rows; r++) { /* a finite scale in every row, written or not */
    const float one = 1.0f;
    memcpy(init + r * ld + SC_KFP8_INDEX_SCALE_AT(dim), &one, sizeof one);
  }
  pbuf X = both(x, sizeof(float) * (size_t)(n * ldx)), Sl = both(slots, sizeof(int32_t) * (size_t)n),
       K = both(init, bytes);
  const sc_krows kg = {K.g, SC_KFMT_FP8_INDEX, ld, rows}, kc = {K.c, SC_KFMT_FP8_INDEX, ld, rows};
  CHECK(G->ops->kv_write(G, n, dim, X.g, ldx, Sl.g, kg) == 0, "kv_write fp8_index");
  CHECK(C->ops->kv_write(C, n, dim, X.c, ldx, Sl.c, kc) == 0, "kv_write fp8_index cpu");
  uint8_t *hg = malloc(bytes), *hc = malloc(bytes);
  CHECK(down(K, hg, hc, bytes) == 0, "sync");
  CHECK(memcmp(hg, hc, bytes) == 0, "kv_write fp8_index dim %d: bytes differ", dim);
  { /* copied as they are into rows of 4 dim bytes (a DCP shard's key room) */
    const size_t cb = (size_t)(n * 4 * dim);
    pbuf D = both_poison(cb);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)gt_int(-1, rows - 1);
    pbuf I = both(idx, sizeof(int32_t) * (size_t)n);
    const sc_krows dg = {D.g, SC_KFMT_FP8_INDEX, 4 * dim, n}, dc = {D.c, SC_KFMT_FP8_INDEX, 4 * dim, n};
    CHECK(G->ops->gather_rows(G, n, dim, kg, I.g, dg) == 0, "copy fp8_index");
    CHECK(C->ops->gather_rows(C, n, dim, kc, I.c, dc) == 0, "copy fp8_index cpu");
    uint8_t *cg = malloc(cb), *cc = malloc(cb);
    CHECK(down(D, cg, cc, cb) == 0, "sync");
    int bad = 0;
    for (int64_t r = 0; r < n; r++)
      bad += memcmp(cg + r * 4 * dim, cc + r * 4 * dim, (size_t)SC_KFP8_INDEX_ROW_BYTES(dim)) != 0;
    CHECK(bad == 0, "copied fp8_index dim %d: %d rows differ", dim, bad);
    pfree(D), pfree(I);
    free(idx), free(cg), free(cc);
  }
  pfree(X), pfree(Sl), pfree(K);
  free(x), free(slots), free(perm), free(init), free(hg), free(hc);
}

static void case_fp8_index_rows(void) {
  fp8_index_rows_case(128, 144);
  fp8_index_rows_case(40, 48);
}

static void case_kv_write(void) {
  const int64_t n = 200, width = 576, rows = 400;
  float *src = gt_rand_f32((size_t)(n * width), -2, 2);
  for (int64_t i = 0; i < width; i++) src[5 * width + i] *= (i < 128) ? 0.0f : 1.0f; /* a zero tile */
  for (int64_t i = 0; i < 128; i++) src[7 * width + 256 + i] *= 1e-6f; /* a tiny tile */
  int32_t *slots = malloc(sizeof(int32_t) * (size_t)n), *perm = malloc(sizeof(int32_t) * (size_t)rows);
  for (int32_t i = 0; i < rows; i++) perm[i] = i;
  gt_shuffle_i32(perm, rows);
  for (int64_t i = 0; i < n; i++) slots[i] = gt_int(0, 9) == 0 ? -1 : perm[i];
  pbuf X = both(src, sizeof(float) * (size_t)(n * width)), Sl = both(slots, sizeof(int32_t) * (size_t)n);
  /* f32 and bf16 caches against the CPU backend, bit for bit (untouched rows included);
   * 576 wide takes the vectorized path, 70 wide in 75-element rows the scalar one */
  for (int f = 0; f < 4; f++) {
    const sc_kfmt fmt = f & 1 ? SC_KFMT_BF16 : SC_KFMT_F32;
    const int64_t kw = f < 2 ? width : 70, kld = f < 2 ? width : 75;
    const size_t bytes = (size_t)(rows * kld) * sc_kfmt_size(fmt);
    uint8_t *init = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) init[i] = (uint8_t)gt_next();
    pbuf K = both(init, bytes);
    CHECK(G->ops->kv_write(G, n, kw, X.g, width, Sl.g, (sc_krows){K.g, fmt, kld, rows}) == 0,
          "kv_write");
    CHECK(C->ops->kv_write(C, n, kw, X.c, width, Sl.c, (sc_krows){K.c, fmt, kld, rows}) == 0,
          "kv_write cpu");
    uint8_t *hg = malloc(bytes), *hc = malloc(bytes);
    CHECK(down(K, hg, hc, bytes) == 0, "sync");
    CHECK(memcmp(hg, hc, bytes) == 0, "kv_write fmt %d width %lld differs", fmt, (long long)kw);
    pfree(K);
    free(init), free(hg), free(hc);
  }
  /* fp8_ds_mla against the CPU reference quantizer */
  const int64_t rb = SC_KFP8_DS_MLA_ROW_BYTES;
  const size_t bytes = (size_t)(rows * rb);
  void *cache = NULL;
  REQUIRE(G->ops->alloc(G, bytes, &cache) == 0, "alloc");
  CHECK(G->ops->memset(G, cache, 0xff, bytes) == 0, "memset");
  CHECK(G->ops->kv_write(G, n, width, X.g, width, Sl.g,
                         (sc_krows){cache, SC_KFMT_FP8_DS_MLA, rb, rows}) == 0,
        "kv_write fp8");
  uint8_t *hg = malloc(bytes), ref[SC_KFP8_DS_MLA_ROW_BYTES];
  CHECK(G->ops->copy(G, hg, cache, bytes, SC_KCOPY_D2H) == 0, "copy");
  CHECK(G->ops->sync(G) == 0, "sync");
  int bad_rows = 0, bad_bytes = 0;
  for (int64_t i = 0; i < n; i++) {
    if (slots[i] < 0) continue;
    sc_ref_fp8_quantize_row(src + i * width, ref);
    const uint8_t *got = hg + (size_t)slots[i] * (size_t)rb;
    int diff = 0;
    for (int b = 0; b < rb; b++) diff += got[b] != ref[b];
    bad_rows += diff != 0;
    bad_bytes += diff;
  }
  CHECK(bad_rows == 0, "fp8 quantization differs from the reference: %d rows, %d bytes",
        bad_rows, bad_bytes);
  /* the CPU backend's rows: the same bytes (untouched rows included) */
  void *cc = NULL;
  REQUIRE(C->ops->alloc(C, bytes, &cc) == 0, "alloc");
  CHECK(C->ops->memset(C, cc, 0xff, bytes) == 0 &&
            C->ops->kv_write(C, n, width, X.c, width, Sl.c,
                             (sc_krows){cc, SC_KFMT_FP8_DS_MLA, rb, rows}) == 0,
        "kv_write fp8 cpu");
  uint8_t *hc = malloc(bytes);
  CHECK(C->ops->copy(C, hc, cc, bytes, SC_KCOPY_D2H) == 0, "copy");
  CHECK(memcmp(hg, hc, bytes) == 0, "fp8_ds_mla rows of the CPU backend differ from the GPU's");
  C->ops->free(C, cc);
  free(hc);
  /* fp8 -> f32 / bf16 dequantizing gather, and fp8 -> fp8 copy */
  const int64_t ng = 150;
  int32_t *gidx = malloc(sizeof(int32_t) * (size_t)ng);
  for (int64_t i = 0; i < ng; i++) gidx[i] = i % 11 == 0 ? -1 : slots[gt_int(0, n - 1)];
  for (int64_t i = 0; i < ng; i++)
    if (gidx[i] < -1) gidx[i] = -1;
  void *gi = up(G, gidx, sizeof(int32_t) * (size_t)ng), *df = NULL, *d8 = NULL;
  REQUIRE(G->ops->alloc(G, sizeof(float) * (size_t)(ng * width), &df) == 0 &&
              G->ops->alloc(G, (size_t)(ng * rb), &d8) == 0,
          "alloc");
  G->ops->memset(G, df, 0xff, sizeof(float) * (size_t)(ng * width));
  CHECK(G->ops->gather_rows(G, ng, width, (sc_krows){cache, SC_KFMT_FP8_DS_MLA, rb, rows}, gi,
                            (sc_krows){df, SC_KFMT_F32, width, ng}) == 0,
        "gather fp8->f32");
  CHECK(G->ops->gather_rows(G, ng, width, (sc_krows){cache, SC_KFMT_FP8_DS_MLA, rb, rows}, gi,
                            (sc_krows){d8, SC_KFMT_FP8_DS_MLA, rb, ng}) == 0,
        "gather fp8->fp8");
  float *hf = malloc(sizeof(float) * (size_t)(ng * width)), deq[576];
  uint8_t *h8 = malloc((size_t)(ng * rb));
  CHECK(G->ops->copy(G, hf, df, sizeof(float) * (size_t)(ng * width), SC_KCOPY_D2H) == 0 &&
            G->ops->copy(G, h8, d8, (size_t)(ng * rb), SC_KCOPY_D2H) == 0 && G->ops->sync(G) == 0,
        "copy");
  int bad = 0;
  for (int64_t i = 0; i < ng; i++) {
    if (gidx[i] < 0) {
      for (int64_t x = 0; x < width; x++) bad += hf[i * width + x] != 0.0f;
      continue;
    }
    const uint8_t *row = hg + (size_t)gidx[i] * (size_t)rb;
    sc_ref_fp8_dequantize_row(row, deq);
    bad += memcmp(hf + i * width, deq, sizeof deq) != 0;
    bad += memcmp(h8 + i * rb, row, (size_t)rb) != 0;
  }
  CHECK(bad == 0, "fp8 gather: %d mismatches", bad);
  G->ops->free(G, gi), G->ops->free(G, df), G->ops->free(G, d8), G->ops->free(G, cache);
  pfree(X), pfree(Sl);
  free(src), free(slots), free(perm), free(hg), free(gidx), free(hf), free(h8);
}

/* ---- indexer ---- */

/* exact score of token t against key row `row` (double) */
/* score(t, s) in double, and its scale Σ_h |w_h| Σ_d |q_d k_d| (what rounding errors
 * are relative to). */
static double exact_score(const float *q, const float *w, int32_t heads, int32_t dim,
                          const float *keys_f32, int64_t row, double *scale) {
  double s = 0, m = 0;
  for (int32_t h = 0; h < heads; h++) {
    double d = 0, a = 0;
    for (int32_t x = 0; x < dim; x++) {
      const double p = (double)q[h * dim + x] * keys_f32[row * dim + x];
      d += p;
      a += fabs(p);
    }
    s += (double)w[h] * (d > 0 ? d : 0);
    m += fabs((double)w[h]) * a;
  }
  if (scale) *scale = m;
  return s;
}

static float round_bf16(float v) { return sc_bf16_to_f32(sc_f32_to_bf16(v)); }

/* exact_score of a key with a scale (an fp8_index key: its e4m3 values in keys_f32, its
 * scale in scales[row]; scales NULL: 1), the scale of the error bound scaled alike. */
static double scaled_score(const float *q, const float *w, int32_t heads, int32_t dim,
                           const float *keys_f32, const float *scales, int64_t row,
                           double *scale) {
  const double s = scales ? scales[row] : 1.0;
  const double v = exact_score(q, w, heads, dim, keys_f32, row, scale);
  if (scale) *scale *= s;
  return v * s;
}

/* R rows of dim values as fp8_index rows (ld bytes each, 16-byte multiples), the
 * quantizer's scales into scales[R], and vals[] replaced by the e4m3 values (what the
 * kernels score before the scale). */
static uint8_t *fp8_index_rows(float *vals, int32_t R, int32_t dim, int64_t *ld, float *scales) {
  *ld = SC_KFP8_INDEX_ROW_STEP(dim);
  uint8_t *b = calloc((size_t)R * (size_t)*ld, 1);
  for (int64_t r = 0; r < R; r++) {
    uint8_t *row = b + r * *ld;
    sc_kfp8_index_quantize(vals + r * dim, dim, row);
    memcpy(&scales[r], row + SC_KFP8_INDEX_SCALE_AT(dim), sizeof(float));
    for (int32_t x = 0; x < dim; x++) vals[r * dim + x] = sc_e4m3_value(row[x]);
  }
  return b;
}

/* q's heads as the indexer rounds them over fp8_index keys (kernels.h), in place. */
static void round_heads_fp8(float *q, int64_t n_rows, int32_t dim) {
  for (int64_t r = 0; r < n_rows; r++) {
    float amax = 0.0f, *x = q + r * dim;
    for (int32_t i = 0; i < dim; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float sc = sc_kfp8_index_scale(amax);
    for (int32_t i = 0; i < dim; i++) x[i] = sc_kfp8_index_round(x[i], sc);
  }
}

/* Whether the GPU scores these keys with e4m3 products (cuda_indexer_tile.cuh's tc_w8:
 * fp8_index rows, 64 head rows, rows of 65 to 128 values): their sums then round as the
 * tensor cores' fp8 path does, not to f32 accumulation. */
static bool takes_w8(sc_kfmt fmt, int32_t heads, int32_t dim) {
  return fmt == SC_KFMT_FP8_INDEX && heads > 48 && heads <= 64 && dim > 64 && dim <= 128;
}

static int cmp_desc(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* How an indexer case is laid out (bits). IDX_PROMPT: the tokens of one prompt in order,
 * each seeing the first request's entries up to its own position (the ranges the metadata
 * gives a causal prompt: cuda_indexer.cu's ordered tokens); else the two requests below,
 * at random positions. IDX_BOUND: max_keys given (the first request's length, a bound of
 * every range), which lets a prompt of few head rows take the sampled floors
 * (cuda_indexer.cu). IDX_PERIODIC: and every 32nd entry of the list a key 8 times as
 * long, so that a sample of every 4th entry over-rates a token's keys and starts its
 * threshold above its K-th best wherever it sees ~2400 keys or more (a simulation of
 * these distributions in Python: 2 of 3 tokens at 2400 keys, 3 of 3 from 3200, none up
 * to 1600): the repair's case, which must then find the K best. IDX_SHARED: the caller's
 * hint that neighbours share their key list (keys_shared: the dense path's units). */
enum { IDX_PROMPT = 1, IDX_BOUND = 2, IDX_PERIODIC = 4, IDX_SHARED = 8 };

static void indexer_case_as(sc_kfmt fmt, int32_t heads, int32_t dim, int32_t topk, int32_t n_tok,
                            int how) {
  const bool prompt = how & IDX_PROMPT;
  /* two requests sharing one key list: tokens of the first see entries [0, L0), of the
   * second [L0, L), rows permuted, positions 0.. within each range */
  const int32_t L0 = 4000, L = 6000, R = 7000;
  float *q = gt_rand_f32((size_t)n_tok * heads * dim, -1, 1);
  float *w = gt_rand_f32((size_t)n_tok * heads, 0.01, 0.1);
  float *kf = gt_rand_f32((size_t)R * dim, -1, 1);
  int32_t *rows = malloc(sizeof(int32_t) * R), *kpos = malloc(sizeof(int32_t) * L);
  for (int32_t i = 0; i < R; i++) rows[i] = i;
  gt_shuffle_i32(rows, R);
  if (how & IDX_PERIODIC)
    for (int32_t e = 0; e < L; e += 32)
      for (int32_t d = 0; d < dim; d++) kf[(size_t)rows[e] * dim + d] *= 8.0f;
  uint16_t *kb = malloc(sizeof(uint16_t) * (size_t)R * dim);
  for (int64_t i = 0; i < (int64_t)R * dim; i++) {
    kb[i] = sc_f32_to_bf16(kf[i]);
    if (fmt == SC_KFMT_BF16) kf[i] = sc_bf16_to_f32(kb[i]); /* the values actually scored */
  }
  /* fp8_index: kf becomes the e4m3 values, each row's score scaled by ks[row] */
  int64_t ld = dim;
  float *ks = fmt == SC_KFMT_FP8_INDEX ? malloc(sizeof(float) * R) : NULL;
  uint8_t *k8 = ks ? fp8_index_rows(kf, R, dim, &ld, ks) : NULL;
  for (int32_t e = 0; e < L; e++) kpos[e] = e < L0 ? e : e - L0;
  int32_t *qpos = malloc(sizeof(int32_t) * (size_t)n_tok), *kbeg = malloc(sizeof(int32_t) * (size_t)n_tok),
          *kend = malloc(sizeof(int32_t) * (size_t)n_tok);
  for (int32_t t = 0; t < n_tok; t++) {
    const bool first = t < n_tok / 2;
    kbeg[t] = first ? 0 : L0;
    kend[t] = first ? L0 : L;
    /* some tokens see fewer than topk keys (padding), most see many more */
    const int32_t last = kend[t] - kbeg[t] - 1;
    qpos[t] = t % 5 == 0 ? (int32_t)gt_int(0, topk / 2)
                         : (int32_t)gt_int(topk < last ? topk : last, last);
    if (prompt) {
      qpos[t] = (int32_t)((int64_t)t * (L0 - 1) / (n_tok > 1 ? n_tok - 1 : 1));
      kbeg[t] = 0;
      kend[t] = t % 7 == 3 ? L0 : qpos[t] + 1; /* (a longer end changes nothing) */
      if (t > 0 && kend[t] < kend[t - 1]) kend[t] = kend[t - 1];
    }
  }
  pbuf Q = both(q, sizeof(float) * (size_t)n_tok * heads * dim);
  pbuf W = both(w, sizeof(float) * (size_t)n_tok * heads);
  pbuf K = k8 ? both(k8, (size_t)R * (size_t)ld)
           : fmt == SC_KFMT_F32 ? both(kf, sizeof(float) * (size_t)R * dim)
                                : both(kb, sizeof(uint16_t) * (size_t)R * dim);
  pbuf Rw = both(rows, sizeof(int32_t) * R), Kp = both(kpos, sizeof(int32_t) * L);
  pbuf Qp = both(qpos, sizeof(int32_t) * (size_t)n_tok), Kb = both(kbeg, sizeof(int32_t) * (size_t)n_tok),
       Ke = both(kend, sizeof(int32_t) * (size_t)n_tok);
  const size_t ncand = (size_t)n_tok * topk;
  pbuf Oc = both_poison(sizeof(sc_kcand) * ncand), Op = both_poison(sizeof(int32_t) * ncand);
  sc_indexer_args a = {.n_tok = n_tok, .n_heads = heads, .dim = dim, .topk = topk,
                       .ld_q = (int64_t)heads * dim, .ld_w = heads};
  a.q = Q.g, a.w = W.g, a.q_pos = Qp.g, a.keys = (sc_krows){K.g, fmt, ld, R};
  a.key_rows = Rw.g, a.key_pos = Kp.g, a.key_begin = Kb.g, a.key_end = Ke.g;
  a.out_pos = Op.g, a.out_cand = Oc.g;
  a.max_keys = how & (IDX_BOUND | IDX_PERIODIC) ? L0 : 0;
  a.keys_shared = (how & IDX_SHARED) != 0;
  CHECK(G->ops->indexer_topk(G, &a) == 0, "indexer");
  a.q = Q.c, a.w = W.c, a.q_pos = Qp.c, a.keys = (sc_krows){K.c, fmt, ld, R};
  a.key_rows = Rw.c, a.key_pos = Kp.c, a.key_begin = Kb.c, a.key_end = Ke.c;
  a.out_pos = Op.c, a.out_cand = Oc.c;
  CHECK(C->ops->indexer_topk(C, &a) == 0, "indexer cpu");
  sc_kcand *cg = malloc(sizeof(sc_kcand) * ncand), *cc = malloc(sizeof(sc_kcand) * ncand);
  int32_t *pg = malloc(sizeof(int32_t) * ncand);
  CHECK(down(Oc, cg, cc, sizeof(sc_kcand) * ncand) == 0, "sync");
  CHECK(down(Op, pg, NULL, sizeof(int32_t) * ncand) == 0, "sync");
  /* The GPU scores q and keys rounded to bf16 (cuda_indexer.cu). Against those values
   * scored exactly, its scores must be right to f32 accumulation (1e-5 of the scale; with
   * e4m3 products, 2^-12) and its picks the exact top-K up to ties within that. Against
   * the CPU reference (f32 on the unrounded values) the picks may differ only where the
   * rounding (2^-7 of the scale: both operands) can reorder scores. Over fp8_index keys
   * both round q's heads to e4m3 first (kernels.h), which the host does here too. */
  const size_t nq = (size_t)n_tok * heads * dim;
  float *qr = malloc(sizeof(float) * nq), *kr = malloc(sizeof(float) * (size_t)R * dim);
  for (size_t i = 0; i < nq; i++) qr[i] = round_bf16(q[i]);
  if (fmt == SC_KFMT_FP8_INDEX) {
    memcpy(qr, q, sizeof(float) * nq);
    round_heads_fp8(qr, (int64_t)n_tok * heads, dim);
    memcpy(q, qr, sizeof(float) * nq); /* (what the CPU reference scores, below) */
  }
  const double acc_tol = takes_w8(fmt, heads, dim) ? 0x1p-12 : 1e-5;
  for (size_t i = 0; i < (size_t)R * dim; i++) kr[i] = round_bf16(kf[i]);
  double *all = malloc(sizeof(double) * L);
  int ties = 0, cpu_diff = 0, bad = 0;
  for (int32_t t = 0; t < n_tok; t++) {
    const sc_kcand *g = cg + (size_t)t * topk, *c = cc + (size_t)t * topk;
    int ng = 0, nc = 0;
    for (int32_t i = 0; i < topk; i++) {
      ng += g[i].pos >= 0;
      nc += c[i].pos >= 0;
      if (pg[(size_t)t * topk + i] != g[i].pos) bad++;
      /* GPU order: ascending position (kernels.h), padding last: written as (-inf, -1),
       * not left as the poison (a score of NaN) */
      if (i > 0 && g[i].pos >= 0 && !(g[i - 1].pos < g[i].pos)) bad++;
      if (g[i].pos < 0 && (g[i].pos != -1 || !(g[i].score == -INFINITY) ||
                           (i + 1 < topk && g[i + 1].pos >= 0)))
        bad++;
    }
    const int expect = qpos[t] + 1 < topk ? qpos[t] + 1 : topk;
    if (ng != expect || nc != expect) {
      bad++;
      continue;
    }
    const float *qt = q + (size_t)t * heads * dim, *qrt = qr + (size_t)t * heads * dim;
    const float *wt = w + (size_t)t * heads;
    const int32_t base = kbeg[t];
    /* the exact top-K of the rounded values: the K-th best score */
    int nv = 0;
    for (int32_t p = 0; p <= qpos[t]; p++)
      all[nv++] = scaled_score(qrt, wt, heads, dim, kr, ks, rows[base + p], NULL);
    qsort(all, (size_t)nv, sizeof(double), cmp_desc);
    const double kth_r = all[ng - 1];
    double kscale;
    const double kth_c = scaled_score(qt, wt, heads, dim, kf, ks, rows[base + c[nc - 1].pos], &kscale);
    for (int32_t i = 0; i < ng; i++) {
      double sc;
      const int64_t row = rows[base + g[i].pos];
      const double ex = scaled_score(qrt, wt, heads, dim, kr, ks, row, &sc);
      const double tol = acc_tol * (1.0 + sc);
      if (fabs(ex - g[i].score) > tol) bad++;          /* the GPU score itself */
      if (ex < kth_r - tol) bad++;                      /* a pick below the exact K-th */
      else if (ex < kth_r) ties++;                      /* ... within the accumulation */
      bool in_c = false;
      for (int32_t j = 0; j < nc && !in_c; j++) in_c = c[j].pos == g[i].pos;
      if (!in_c) {
        double fs;
        const double f = scaled_score(qt, wt, heads, dim, kf, ks, row, &fs);
        if (fabs(f - kth_c) <= 0x1p-7 * (fs + kscale) + tol) cpu_diff++;
        else bad++;
      }
    }
  }
  free(qr), free(kr), free(all);
  const char *as = how == 0 ? "" : how == IDX_PROMPT ? " (a prompt)"
                      : how & IDX_PERIODIC ? " (bounded, periodic keys)"
                      : how & IDX_SHARED   ? " (bounded, keys_shared)"
                                           : " (bounded)";
  CHECK(bad == 0, "indexer fmt %d heads %d dim %d topk %d tokens %d%s: %d mismatches (%d ties)",
        fmt, heads, dim, topk, n_tok, as, bad, ties);
  printf("     indexer fmt=%d heads=%d dim=%d topk=%d tokens=%d%s: %d picks tied with the K-th, "
         "%d picks unlike the f32 CPU reference within the bf16 rounding\n",
         fmt, heads, dim, topk, n_tok, as, ties, cpu_diff);
  pfree(Q), pfree(W), pfree(K), pfree(Rw), pfree(Kp), pfree(Qp), pfree(Kb), pfree(Ke),
      pfree(Oc), pfree(Op);
  free(q), free(w), free(kf), free(kb), free(rows), free(kpos), free(qpos), free(kbeg),
      free(kend), free(cg), free(cc), free(pg), free(ks), free(k8);
}

static void indexer_case(sc_kfmt fmt, int32_t heads, int32_t dim, int32_t topk, int32_t n_tok) {
  indexer_case_as(fmt, heads, dim, topk, n_tok, 0);
}

static void case_indexer(void) {
  indexer_case_as(SC_KFMT_F32, 4, 64, 256, 9000, IDX_PROMPT); /* 32 tokens a block */
  /* ... with its bound: the sampled floors, and keys that make them wrong (the repair) */
  indexer_case_as(SC_KFMT_BF16, 4, 64, 256, 9000, IDX_PROMPT | IDX_BOUND);
  indexer_case_as(SC_KFMT_BF16, 4, 64, 256, 9000, IDX_PROMPT | IDX_PERIODIC);
  indexer_case_as(SC_KFMT_F32, 4, 64, 256, 1102, IDX_BOUND); /* groups across requests */
  indexer_case_as(SC_KFMT_BF16, 64, 128, 300, 1100, IDX_PROMPT);
  /* ... with its bound: the floors on wgmma (bf16, e4m3 products; S = 16, r = 36), and
   * the repair: every 32nd entry is in a stride-16 sample, half of it, so from ~1150
   * keys a token's r-th sampled key is one of the long ones, and only ~2 r = 72 keys
   * reach it, fewer than K */
  indexer_case_as(SC_KFMT_BF16, 64, 128, 256, 1100, IDX_PROMPT | IDX_BOUND);
  indexer_case_as(SC_KFMT_FP8_INDEX, 64, 128, 256, 1100, IDX_PROMPT | IDX_BOUND);
  indexer_case_as(SC_KFMT_BF16, 64, 128, 256, 1100, IDX_PROMPT | IDX_PERIODIC);
  indexer_case(SC_KFMT_F32, 16, 64, 300, 24);
  indexer_case(SC_KFMT_BF16, 8, 128, 2048, 10);
  indexer_case(SC_KFMT_F32, 4, 40, 17, 12);
  /* below 4 head rows the transposed fold's other shapes: one head (a q row a token),
   * two (both in a lane), three (four rows, one of weight zero) */
  indexer_case(SC_KFMT_BF16, 1, 64, 100, 24);
  indexer_case(SC_KFMT_F32, 2, 64, 128, 40);
  indexer_case(SC_KFMT_BF16, 3, 64, 64, 1102);
  indexer_case(SC_KFMT_F32, 4, 64, 2048, 1); /* a decode token: chunks, the many-block select */
  indexer_case(SC_KFMT_F32, 4, 64, 256, 1102); /* grouped tokens, a group across requests */
  indexer_case(SC_KFMT_BF16, 8, 36, 100, 12);  /* rows not in 16-byte pieces: no cp.async */
  indexer_case(SC_KFMT_BF16, 8, 64, 255, 1102); /* an odd K in groups: shared memory aligned */
  /* 64 head rows score on wgmma: 50 heads (14 zero rows), rows of 64 */
  indexer_case(SC_KFMT_BF16, 50, 64, 256, 24);
  indexer_case(SC_KFMT_F32, 64, 128, 256, 20); /* f32 keys rounded on the way to wgmma */
  indexer_case(SC_KFMT_F32, 64, 70, 128, 12);  /* ... element by element: not in float4s */
  /* fp8_index keys (e4m3 widened to bf16 on the way in, the scale on the head sum): wgmma
   * and mma.sync, 8-byte loads and byte by byte, a prompt and decode tokens */
  indexer_case_as(SC_KFMT_FP8_INDEX, 64, 128, 300, 1100, IDX_PROMPT);
  indexer_case(SC_KFMT_FP8_INDEX, 64, 128, 2048, 20);
  indexer_case(SC_KFMT_FP8_INDEX, 4, 64, 2048, 1);
  /* 200 tokens of 64 heads x 128 with the caller's bound: the dense path */
  indexer_case_as(SC_KFMT_BF16, 64, 128, 2048, 200, IDX_BOUND);
  indexer_case_as(SC_KFMT_FP8_INDEX, 64, 128, 2048, 200, IDX_BOUND);
  /* ... in units of one key list (keys_shared; by default four over bf16 keys, two over
   * fp8_index keys): a prompt's nested ranges, its last token (201 = 50 x 4 + 1) alone;
   * two requests' tokens over e4m3 products */
  indexer_case_as(SC_KFMT_BF16, 64, 128, 2048, 201, IDX_PROMPT | IDX_BOUND | IDX_SHARED);
  indexer_case_as(SC_KFMT_FP8_INDEX, 64, 128, 2048, 200, IDX_BOUND | IDX_SHARED);
  indexer_case(SC_KFMT_FP8_INDEX, 8, 36, 100, 12); /* rows not in 16-byte pieces */
  indexer_case(SC_KFMT_FP8_INDEX, 64, 70, 128, 12); /* e4m3 products over rows read by bytes */
  indexer_case(SC_KFMT_FP8_INDEX, 64, 96, 256, 30); /* ... by cp.async, 2 pieces zero */
}

/* The indexer's layout invariance (SPEC.md §8): one token alone (its keys in many chunks,
 * the many-block select), the same token among many (one chunk each once the groups fill
 * the resident blocks), the key list split into two DCP-like shards whose lists are then
 * merged, and bf16 keys against f32 keys of the same values (one rank's cache against a
 * DCP prefill's workspace), all pick the same positions with bit-identical scores. */
static void idx_run(sc_indexer_args a, int32_t first_tok, int32_t n_tok, const int32_t *kb,
                    const int32_t *ke, sc_kcand *out) {
  const size_t n = (size_t)n_tok * a.topk;
  void *b = up(G, kb + first_tok, sizeof(int32_t) * (size_t)n_tok);
  void *e = up(G, ke + first_tok, sizeof(int32_t) * (size_t)n_tok), *o = NULL;
  if (G->ops->alloc(G, sizeof(sc_kcand) * n, &o) != 0) abort();
  a.n_tok = n_tok;
  a.q += (size_t)first_tok * a.ld_q, a.w += (size_t)first_tok * a.ld_w, a.q_pos += first_tok;
  a.key_begin = b, a.key_end = e, a.out_pos = NULL, a.out_cand = o;
  CHECK(G->ops->indexer_topk(G, &a) == 0, "indexer");
  CHECK(G->ops->copy(G, out, o, sizeof(sc_kcand) * n, SC_KCOPY_D2H) == 0 && G->ops->sync(G) == 0,
        "sync");
  G->ops->free(G, b), G->ops->free(G, e), G->ops->free(G, o);
}

/* idx_run on context k, another CUDA context of the device (the other side of a knob
 * read when a context is created), its buffers from k. */
static void idx_run_on(sc_kernels *k, sc_indexer_args a, int32_t first_tok, int32_t n_tok,
                       const int32_t *kb, const int32_t *ke, sc_kcand *out) {
  sc_kernels *was = G;
  G = k;
  idx_run(a, first_tok, n_tok, kb, ke, out);
  G = was;
}

/* a's n_tok tokens over the same keys held otherwise (`bytes` of host memory: a's rows in
 * format fmt, ld apart) pick as in `full`, scores to the bit; scratch: room for them. */
static void same_over(sc_indexer_args a, const void *host, size_t bytes, sc_kfmt fmt, int64_t ld,
                      int32_t n_tok, const int32_t *rb, const int32_t *re, const sc_kcand *full,
                      sc_kcand *scratch, const char *what) {
  a.keys = (sc_krows){up(G, host, bytes), fmt, ld, a.keys.rows};
  idx_run(a, 0, n_tok, rb, re, scratch);
  CHECK(memcmp(scratch, full, sizeof(sc_kcand) * (size_t)n_tok * a.topk) == 0,
        "%s pick differently", what);
  G->ops->free(G, (void *)a.keys.data);
}

/* A CUDA context whose few-heads indexer tiles sum through shared memory
 * (SPARSECP_INDEXER_FEW=0, read when a context is created): the other side of the fused
 * tile of cuda_indexer_few.cuh, which must pick alike. Made by case_indexer_invariance. */
static sc_kernels *G_nofew;
/* ... and two whose dense path takes two and four tokens a unit over shared key lists
 * (SPARSECP_INDEXER_SHARE=2, =4; by default four over bf16 keys, two over fp8_index
 * keys): they must pick alike too */
static sc_kernels *G_share[2];
/* ... and one whose radix select (tokens fewer than half the SMs, several chunks each)
 * takes a launch a pass (SPARSECP_TOPK_COOP=0) where the default takes every pass and the
 * gather in one cooperative launch */
static sc_kernels *G_nocoop;
/* ... and one told that four ranks share the GPU (sc_kernels_cuda_set_gpu_ranks): its
 * cooperative grids take a quarter of the SMs, so a token's range is split otherwise */
static sc_kernels *G_quarter;

/* distinct > 0: only that many distinct key rows (row i repeats row i % distinct), so
 * many keys tie exactly and the lower positions must win at the K-th. */
static void indexer_invariance_case(sc_kfmt fmt, int32_t heads, int32_t dim, int32_t topk,
                                    int32_t n_tok, int32_t distinct, int32_t max_keys) {
  const int32_t L = 9000, half = 4321;
  const size_t es = fmt == SC_KFMT_F32 ? 4 : 2; /* (fp8_index: rows of ld bytes) */
  float *q = gt_rand_f32((size_t)n_tok * heads * dim, -1, 1);
  float *w = gt_rand_f32((size_t)n_tok * heads, 0.01, 0.1);
  float *kf = gt_rand_f32((size_t)L * dim, -1, 1);
  /* (over fp8_index keys the indexer rounds q's heads to e4m3, kernels.h: rounded here
   * already, q scores alike over the f32 keys compared below) */
  if (fmt == SC_KFMT_FP8_INDEX) round_heads_fp8(q, (int64_t)n_tok * heads, dim);
  for (int32_t i = distinct; distinct > 0 && i < L; i++)
    memcpy(kf + (size_t)i * dim, kf + (size_t)(i % distinct) * dim, sizeof(float) * dim);
  void *kh = kf;
  uint16_t *kb16 = NULL;
  int64_t ld = dim;
  size_t kbytes = es * (size_t)L * dim;
  float *k8s = NULL;
  uint8_t *k8 = NULL;
  if (fmt == SC_KFMT_FP8_INDEX) {
    k8s = malloc(sizeof(float) * L);
    k8 = fp8_index_rows(kf, L, dim, &ld, k8s);
    kh = k8, kbytes = (size_t)L * (size_t)ld;
  } else if (fmt == SC_KFMT_BF16) {
    kb16 = malloc(sizeof(uint16_t) * (size_t)L * dim);
    for (size_t i = 0; i < (size_t)L * dim; i++) kb16[i] = sc_f32_to_bf16(kf[i]);
    kh = kb16;
  }
  const size_t nt = (size_t)n_tok;
  int32_t *kpos = malloc(sizeof(int32_t) * L), *qpos = malloc(sizeof(int32_t) * nt);
  int32_t *rb = malloc(sizeof(int32_t) * nt), *re = malloc(sizeof(int32_t) * nt);
  int32_t *lo_e = malloc(sizeof(int32_t) * nt), *hi_b = malloc(sizeof(int32_t) * nt);
  for (int32_t i = 0; i < L; i++) kpos[i] = i;
  for (int32_t t = 0; t < n_tok; t++) {
    /* neighbours with different key ranges share a block when tokens are grouped; the
     * starts go in twelves: two units of four of one start (0-3, 8-11) and one of two
     * (4-7: 4, 5 apart and 6, 7 alike), so the dense path's units (keys_shared) take
     * their tokens together and apart; the ends (period 3) differ within a unit */
    rb[t] = t % 12 < 4 || t % 12 == 5 ? 1000 : 0;
    re[t] = t % 3 == 2 ? L - 500 : L;
    qpos[t] = re[t] - 1 - (int32_t)gt_int(0, 3000); /* causal: each token sees a prefix */
    lo_e[t] = re[t] < half ? re[t] : half;          /* shard 0: [rb, half) */
    hi_b[t] = rb[t] > half ? rb[t] : half;          /* shard 1: [half, re) */
  }
  void *Q = up(G, q, sizeof(float) * nt * heads * dim), *W = up(G, w, sizeof(float) * nt * heads);
  void *K = up(G, kh, kbytes), *Kp = up(G, kpos, sizeof(int32_t) * L);
  void *Qp = up(G, qpos, sizeof(int32_t) * nt);
  const sc_indexer_args a = {.n_heads = heads, .dim = dim, .topk = topk, .q = Q,
                             .ld_q = (int64_t)heads * dim, .w = W, .ld_w = heads, .q_pos = Qp,
                             .keys = {K, fmt, ld, L}, .key_pos = Kp, .max_keys = max_keys};
  const size_t per = (size_t)topk, nall = nt * per;
  sc_kcand *full = malloc(sizeof(sc_kcand) * nall), *one = malloc(sizeof(sc_kcand) * per),
           *sh = malloc(sizeof(sc_kcand) * 2 * nall), *merged = malloc(sizeof(sc_kcand) * nall);
  idx_run(a, 0, n_tok, rb, re, full);
  if (max_keys > 0) { /* the hint that neighbours share their key list shapes the launch
                       * only (the dense path's units): rb gives units of one list and of
                       * two, which pick as one token a unit does, scores to the bit */
    sc_indexer_args h = a;
    h.keys_shared = 1;
    idx_run(h, 0, n_tok, rb, re, merged);
    CHECK(memcmp(merged, full, sizeof(sc_kcand) * nall) == 0,
          "tokens in the format's units (keys_shared) pick differently from one a unit");
    for (int u = 0; u < 2; u++) {
      if (G_share[u] == NULL) continue;
      idx_run_on(G_share[u], h, 0, n_tok, rb, re, merged);
      CHECK(memcmp(merged, full, sizeof(sc_kcand) * nall) == 0,
            "tokens in %s (keys_shared) pick differently from one a unit", u ? "fours" : "pairs");
    }
  }
  if (max_keys > 0) { /* a bound that is not one: the dense path refuses the step */
    sc_indexer_args b = a;
    b.max_keys = 100;
    b.n_tok = n_tok;
    b.key_begin = up(G, rb, sizeof(int32_t) * nt), b.key_end = up(G, re, sizeof(int32_t) * nt);
    CHECK(G->ops->alloc(G, sizeof(sc_kcand) * nall, (void **)&b.out_cand) == 0, "alloc");
    CHECK(G->ops->indexer_topk(G, &b) == 0, "indexer launch");
    CHECK(G->ops->sync(G) == SC_EINVAL, "a range past max_keys must surface as SC_EINVAL");
    CHECK(G->ops->sync(G) == 0, "the flag is cleared once reported");
    G->ops->free(G, (void *)b.key_begin), G->ops->free(G, (void *)b.key_end);
    G->ops->free(G, b.out_cand);
  }
  if (fmt == SC_KFMT_BF16) { /* the same values as f32 keys, as a DCP prefill's workspace */
    float *kr = malloc(sizeof(float) * (size_t)L * dim);
    for (size_t i = 0; i < (size_t)L * dim; i++) kr[i] = sc_bf16_to_f32(kb16[i]);
    same_over(a, kr, sizeof(float) * (size_t)L * dim, SC_KFMT_F32, dim, n_tok, rb, re, full,
              merged, "f32 keys holding the bf16 keys' values");
    free(kr);
  }
  if (fmt == SC_KFMT_FP8_INDEX) {
    /* the same rows at other strides: as a DCP prefill's workspace holds them (the room
     * of dim f32 values a row), and 4 bytes more (no 16-byte pieces: read otherwise,
     * scored alike): the same picks and scores to the bit */
    for (int v = 0; v < 2; v++) {
      const int64_t ldw = 4 * (int64_t)dim + 4 * v;
      uint8_t *kw = calloc((size_t)L, (size_t)ldw);
      for (int64_t r = 0; r < L; r++)
        memcpy(kw + r * ldw, k8 + r * ld, (size_t)SC_KFP8_INDEX_ROW_BYTES(dim));
      same_over(a, kw, (size_t)L * (size_t)ldw, SC_KFMT_FP8_INDEX, ldw, n_tok, rb, re, full,
                merged, v ? "fp8_index rows at an unaligned stride"
                          : "fp8_index rows at a workspace's stride");
      free(kw);
    }
  }
  if (fmt == SC_KFMT_FP8_INDEX && !takes_w8(fmt, heads, dim)) {
    /* f32 keys holding the dequantized values (e4m3 x a power-of-two scale, exact in
     * bf16): every product, sum and fold is the fp8 path's scaled by that power of two,
     * which the fp8 path applies once at the end, so the same picks and scores to the bit
     * (not with e4m3 products, which sum otherwise than bf16 ones) */
    float *kd = malloc(sizeof(float) * (size_t)L * dim);
    for (size_t i = 0; i < (size_t)L * dim; i++) kd[i] = kf[i] * k8s[i / (size_t)dim];
    same_over(a, kd, sizeof(float) * (size_t)L * dim, SC_KFMT_F32, dim, n_tok, rb, re, full,
              merged, "f32 keys holding the fp8_index keys' dequantized values");
    free(kd);
  }
  if (G_nocoop != NULL) {
    idx_run_on(G_nocoop, a, 0, n_tok, rb, re, merged);
    CHECK(memcmp(merged, full, sizeof(sc_kcand) * nall) == 0,
          "the radix select a launch a pass picks differently from one cooperative launch");
  }
  if (max_keys == 0 && heads <= 8) {
    /* with the caller's bound, few tokens over long ranges (the radix select's steps)
     * score and select in one cooperative launch where they fit (cuda_indexer_fused.cu):
     * the same picks (a token alone takes it below, with both bounds) */
    sc_indexer_args b = a;
    b.max_keys = L;
    idx_run(b, 0, n_tok, rb, re, merged);
    CHECK(memcmp(merged, full, sizeof(sc_kcand) * nall) == 0,
          "with max_keys %d the batch picks differently", L);
    if (G_quarter != NULL) {
      idx_run_on(G_quarter, b, 0, n_tok, rb, re, merged);
      CHECK(memcmp(merged, full, sizeof(sc_kcand) * nall) == 0,
            "with max_keys %d on a quarter of the SMs the batch picks differently", L);
    }
  }
  if (heads <= 8 && G_nofew != NULL) { /* (head rows below 16: the fused tile) */
    idx_run_on(G_nofew, a, 0, n_tok, rb, re, merged);
    CHECK(memcmp(merged, full, sizeof(sc_kcand) * nall) == 0,
          "the few-heads tile picks differently from sums through shared memory");
  }
  const int32_t picks[3] = {0, 17 % n_tok, n_tok - 1};
  for (int i = 0; i < 3; i++) {
    idx_run(a, picks[i], 1, rb, re, one);
    CHECK(memcmp(one, full + picks[i] * per, sizeof(sc_kcand) * per) == 0,
          "token %d alone picks differently than among %d tokens", picks[i], n_tok);
    if (G_nocoop != NULL) { /* (a token alone: the radix select over up to an SM's worth) */
      idx_run_on(G_nocoop, a, picks[i], 1, rb, re, one);
      CHECK(memcmp(one, full + picks[i] * per, sizeof(sc_kcand) * per) == 0,
            "token %d alone picks differently a launch a pass", picks[i]);
    }
    /* the caller's bound of a token's keys shapes the launch only (fewer chunks): a true
     * bound, and one far too small, pick the same */
    const int32_t bounds[2] = {L, 100};
    for (int j = 0; j < 2; j++) {
      sc_indexer_args b = a;
      b.max_keys = bounds[j];
      idx_run(b, picks[i], 1, rb, re, one);
      CHECK(memcmp(one, full + picks[i] * per, sizeof(sc_kcand) * per) == 0,
            "token %d alone with max_keys %d picks differently", picks[i], bounds[j]);
    }
  }
  idx_run(a, 0, n_tok, rb, lo_e, sh);
  idx_run(a, 0, n_tok, hi_b, re, sh + nall);
  void *Sh = up(G, sh, sizeof(sc_kcand) * 2 * nall), *Mo = NULL;
  CHECK(G->ops->alloc(G, sizeof(sc_kcand) * nall, &Mo) == 0, "alloc");
  CHECK(G->ops->topk_merge(G, n_tok, 2, topk, Sh, NULL, Mo) == 0, "merge");
  CHECK(G->ops->copy(G, merged, Mo, sizeof(sc_kcand) * nall, SC_KCOPY_D2H) == 0 &&
            G->ops->sync(G) == 0, "sync");
  CHECK(memcmp(merged, full, sizeof(sc_kcand) * nall) == 0,
        "two shards merged differ from the whole key list");
  printf("     indexer fmt=%d heads=%d dim=%d topk=%d tokens=%d distinct=%d: alone, batched%s%s "
         "and sharded identical\n", fmt, heads, dim, topk, n_tok, distinct,
         fmt == SC_KFMT_F32 ? "" : ", as f32 keys",
         heads <= 8 && G_nofew != NULL ? ", with SPARSECP_INDEXER_FEW=0" : "");
  G->ops->free(G, Q), G->ops->free(G, W), G->ops->free(G, K), G->ops->free(G, Kp);
  G->ops->free(G, Qp), G->ops->free(G, Sh), G->ops->free(G, Mo);
  free(q), free(w), free(kf), free(kb16), free(kpos), free(qpos), free(rb), free(re);
  free(lo_e), free(hi_b), free(full), free(one), free(sh), free(merged), free(k8s), free(k8);
}

/* A CUDA context created with environment variable var set to val (read when a context
 * is created), the variable restored after. */
static sc_kernels *context_with(const char *var, const char *val) {
  const char *was = getenv(var);
  char *saved = was ? strdup(was) : NULL;
  setenv(var, val, 1);
  sc_kernels *k = NULL;
  CHECK(sc_kernels_cuda_create(&k, 0, NULL) == 0, "a CUDA context with %s=%s", var, val);
  if (saved) setenv(var, saved, 1);
  else unsetenv(var);
  free(saved);
  return k;
}

/* Tokens are grouped per block from 2 x SMs x group tokens on (cuda_indexer.cu): the
 * large cases take the grouped path, 4 tokens a block at 4 heads, 2 at 64 (from 528
 * tokens on a 132-SM GPU; 4 at rows of 64 from 1056, which no case reaches: at rows of
 * 128 the shared memory of 4 leaves no room for two blocks an SM). 64 heads take the
 * wgmma scoring, whatever the keys' format. */
static void case_indexer_invariance(void) {
  G_nofew = context_with("SPARSECP_INDEXER_FEW", "0");
  G_share[0] = context_with("SPARSECP_INDEXER_SHARE", "2");
  G_share[1] = context_with("SPARSECP_INDEXER_SHARE", "4");
  G_nocoop = context_with("SPARSECP_TOPK_COOP", "0");
  CHECK(sc_kernels_cuda_create(&G_quarter, 0, NULL) == 0 &&
            sc_kernels_cuda_set_gpu_ranks(G_quarter, 4) == 0,
        "a CUDA context of four ranks a GPU");
  indexer_invariance_case(SC_KFMT_BF16, 64, 128, 2048, 40, 0, 0);
  indexer_invariance_case(SC_KFMT_BF16, 64, 128, 2048, 1100, 0, 0);
  indexer_invariance_case(SC_KFMT_BF16, 64, 64, 256, 600, 0, 0);
  indexer_invariance_case(SC_KFMT_BF16, 64, 36, 128, 300, 0, 0); /* rows not in 16-byte pieces */
  indexer_invariance_case(SC_KFMT_F32, 4, 64, 2048, 40, 0, 0);
  indexer_invariance_case(SC_KFMT_F32, 20, 40, 100, 40, 0, 0);
  indexer_invariance_case(SC_KFMT_F32, 4, 64, 2048, 1100, 0, 0);
  indexer_invariance_case(SC_KFMT_BF16, 64, 128, 512, 600, 0, 0);
  indexer_invariance_case(SC_KFMT_F32, 3, 40, 64, 2200, 0, 0);
  indexer_invariance_case(SC_KFMT_BF16, 5, 36, 64, 1100, 0, 0);
  indexer_invariance_case(SC_KFMT_F32, 4, 64, 33, 1100, 0, 0); /* odd K, groups of 4 */
  /* K = 8100 (not a multiple of 64, 64 KB of ranks' shared memory): three tokens take the
   * radix select's sort, one alone its ranks (cuda_topk_radix.cu), some with fewer keys
   * than K (padding compared too) */
  indexer_invariance_case(SC_KFMT_F32, 4, 64, 8100, 3, 0, 0);
  /* exact ties at the K-th: a token alone (the many-block select of cuda_topk_radix.cu)
   * against batched (one list a token) and sharded (the merge) */
  indexer_invariance_case(SC_KFMT_F32, 4, 64, 2048, 2200, 37, 0);
  indexer_invariance_case(SC_KFMT_BF16, 64, 128, 300, 40, 5, 0);
  indexer_invariance_case(SC_KFMT_FP8_INDEX, 64, 128, 2048, 1100, 0, 0);
  indexer_invariance_case(SC_KFMT_FP8_INDEX, 4, 64, 2048, 40, 0, 0);
  indexer_invariance_case(SC_KFMT_FP8_INDEX, 64, 128, 300, 40, 5, 0);
  indexer_invariance_case(SC_KFMT_FP8_INDEX, 64, 70, 256, 300, 0, 0); /* e4m3 products, bytes */
  /* with the caller's bound, 200 tokens of 64 heads x 128 take the dense path
   * (cuda_indexer_dense.cu, on GPUs of up to 400 SMs), a token alone and the f32 keys the
   * scoring kernel: the same scores to the bit, and the same picks, also at ties */
  indexer_invariance_case(SC_KFMT_BF16, 64, 128, 2048, 200, 0, 9000);
  indexer_invariance_case(SC_KFMT_FP8_INDEX, 64, 128, 2048, 200, 0, 9000);
  indexer_invariance_case(SC_KFMT_BF16, 64, 128, 300, 200, 5, 9000);
  indexer_invariance_case(SC_KFMT_FP8_INDEX, 64, 96, 512, 200, 5, 9000); /* pieces past dim */
  /* the fused tile's other head-row counts (rows of 64 values in 16-byte pieces: 3 heads
   * over rows of 40 above take 4 head rows; 5 over rows of 36 keep the shared-memory path
   * on both sides): 1, 2 (with ties) and 8 */
  indexer_invariance_case(SC_KFMT_BF16, 1, 64, 256, 1100, 0, 0);
  indexer_invariance_case(SC_KFMT_F32, 2, 64, 300, 600, 7, 0);
  indexer_invariance_case(SC_KFMT_BF16, 6, 64, 128, 600, 0, 0);
  /* few tokens (the radix select's steps) with a bound: the fused path
   * (cuda_indexer_fused.cu); on a 132-SM GPU 16 tokens take 8 blocks of 9 tiles each and
   * 8 tokens 16 of 5, so the ring of stages wraps (8 of bf16 rows, 4 of f32); 5 with ties
   * at the K-th */
  indexer_invariance_case(SC_KFMT_BF16, 4, 64, 2048, 16, 0, 0);
  indexer_invariance_case(SC_KFMT_F32, 4, 64, 2048, 8, 0, 0);
  indexer_invariance_case(SC_KFMT_BF16, 4, 64, 512, 5, 37, 0);
  if (G_nofew) sc_kernels_destroy(G_nofew);
  if (G_nocoop) sc_kernels_destroy(G_nocoop), G_nocoop = NULL;
  if (G_quarter) sc_kernels_destroy(G_quarter), G_quarter = NULL;
  for (int u = 0; u < 2; u++)
    if (G_share[u]) sc_kernels_destroy(G_share[u]), G_share[u] = NULL;
  G_nofew = NULL;
}

/* ---- top-K merge and position maps ---- */

static int cmp_cand_pos(const void *x, const void *y) {
  const int32_t a = ((const sc_kcand *)x)->pos, b = ((const sc_kcand *)y)->pos;
  return (a > b) - (a < b);
}

/* shards 23 at topk 2048: more lists than one select round takes, so a tree of blocks */
static void topk_merge_case(int32_t n_tok, int32_t shards, int32_t topk) {
  const size_t n = (size_t)n_tok * shards * topk;
  sc_kcand *cand = malloc(sizeof(sc_kcand) * n);
  for (int32_t r = 0; r < shards; r++)
    for (int32_t t = 0; t < n_tok; t++)
      for (int32_t i = 0; i < topk; i++) {
        sc_kcand *c = cand + ((size_t)r * n_tok + t) * topk + i;
        c->pos = i * shards + r; /* distinct across shards */
        c->score = (float)gt_int(-20, 20) * 0.25f; /* many exact ties */
        const int64_t u = gt_int(0, 99);
        if (u < 8) *c = (sc_kcand){-INFINITY, -1};       /* padding */
        else if (u < 10) c->score = NAN;                  /* counts as -inf */
        else if (u < 12) c->score = -INFINITY;
      }
  pbuf Cd = both(cand, sizeof(sc_kcand) * n);
  pbuf Oc = both_poison(sizeof(sc_kcand) * (size_t)n_tok * topk), Op = both_poison(sizeof(int32_t) * (size_t)n_tok * topk);
  CHECK(G->ops->topk_merge(G, n_tok, shards, topk, Cd.g, Op.g, Oc.g) == 0, "merge");
  CHECK(C->ops->topk_merge(C, n_tok, shards, topk, Cd.c, Op.c, Oc.c) == 0, "merge cpu");
  const size_t bytes = sizeof(sc_kcand) * (size_t)n_tok * topk;
  sc_kcand *hg = malloc(bytes), *hc = malloc(bytes);
  int32_t *pg = malloc(bytes), *pc = malloc(bytes);
  CHECK(down(Oc, hg, hc, bytes) == 0 && down(Op, pg, pc, sizeof(int32_t) * (size_t)n_tok * topk) == 0,
        "sync");
  /* the CPU reference lists best-first, CUDA by position (kernels.h): the same set in
   * the GPU's order, padding last in both */
  for (int32_t t = 0; t < n_tok; t++) {
    sc_kcand *c = hc + (size_t)t * topk;
    int32_t nv = 0;
    while (nv < topk && c[nv].pos >= 0) nv++;
    qsort(c, (size_t)nv, sizeof *c, cmp_cand_pos);
    for (int32_t i = 0; i < topk; i++) pc[(size_t)t * topk + i] = c[i].pos;
  }
  CHECK(memcmp(hg, hc, bytes) == 0, "merged candidates differ");
  CHECK(memcmp(pg, pc, sizeof(int32_t) * (size_t)n_tok * topk) == 0, "merged positions differ");
  printf("     merge tok=%d shards=%d topk=%d: equal to the reference\n", n_tok, shards, topk);
  pfree(Cd), pfree(Oc), pfree(Op);
  free(cand), free(hg), free(hc), free(pg), free(pc);
}

/* Launches of fewer blocks than half the SMs, each of at least 2048 keys, run them 1024
 * threads wide, others 256 (cuda_topk.cu): the few-token cases of 2048 and more take the
 * first; 10 tokens of 4 x 100 and 80 tokens (on up to 160 SMs) the second; and the 4 x
 * 2048 merge a decode step makes again with SPARSECP_TOPK_WIDE=0. */
static void case_topk_merge(void) {
  topk_merge_case(10, 4, 100);
  topk_merge_case(3, 23, 2048);
  topk_merge_case(2, 3, 8000); /* a round takes one list: no tree (it never ended before) */
  topk_merge_case(2, 4, 2048);
  topk_merge_case(80, 4, 2048);
  sc_kernels *wide = G;
  G = context_with("SPARSECP_TOPK_WIDE", "0");
  if (G != NULL) {
    topk_merge_case(2, 4, 2048);
    sc_kernels_destroy(G);
  }
  G = wide;
}

/* n_tok <= 20, three requests of maxb <= 10 blocks */
static void topk_maps_case(int32_t n_tok, int32_t topk, int32_t n, int32_t il, int32_t bs,
                           int32_t maxb, int32_t rank) {
  const size_t m = (size_t)n_tok * topk;
  int32_t *pos = malloc(sizeof(int32_t) * m), base[20], req[20], bt[3 * 10];
  for (size_t i = 0; i < m; i++) pos[i] = (int32_t)gt_int(-1, maxb * bs * n - 1);
  for (int i = 0; i < n_tok; i++) base[i] = (int32_t)gt_int(0, 1000), req[i] = (int32_t)gt_int(0, 2);
  for (int i = 0; i < 3 * maxb; i++) bt[i] = (int32_t)gt_int(0, 500);
  pbuf P = both(pos, sizeof(int32_t) * m), B = both(base, sizeof base), Rq = both(req, sizeof req),
       Bt = both(bt, sizeof bt);
  pbuf O1 = both_poison(sizeof(int32_t) * m), O2 = both_poison(sizeof(int32_t) * m);
  CHECK(G->ops->topk_to_workspace(G, n_tok, topk, P.g, B.g, 777, n, il, O1.g) == 0, "ws");
  CHECK(C->ops->topk_to_workspace(C, n_tok, topk, P.c, B.c, 777, n, il, O1.c) == 0, "ws cpu");
  CHECK(G->ops->topk_to_slots(G, n_tok, topk, P.g, Rq.g, Bt.g, maxb, bs, n, il, rank, O2.g) == 0,
        "slots");
  CHECK(C->ops->topk_to_slots(C, n_tok, topk, P.c, Rq.c, Bt.c, maxb, bs, n, il, rank, O2.c) == 0,
        "slots cpu");
  int32_t *hg = malloc(sizeof(int32_t) * m), *hc = malloc(sizeof(int32_t) * m);
  CHECK(down(O1, hg, hc, sizeof(int32_t) * m) == 0, "sync");
  CHECK(memcmp(hg, hc, sizeof(int32_t) * m) == 0, "topk_to_workspace differs");
  CHECK(down(O2, hg, hc, sizeof(int32_t) * m) == 0, "sync");
  CHECK(memcmp(hg, hc, sizeof(int32_t) * m) == 0, "topk_to_slots differs (n %d il %d)", n, il);
  pfree(P), pfree(B), pfree(Rq), pfree(Bt), pfree(O1), pfree(O2);
  free(pos), free(hg), free(hc);
}

static void case_topk_maps(void) {
  topk_maps_case(20, 64, 4, 2, 8, 10, 1);
  /* one rank (no owner test), an odd K: a thread's entries cross tokens, a short tail */
  topk_maps_case(7, 37, 1, 1, 16, 10, 0);
}

/* The cache key list from its ranges: bit-equal to the CPU backend (tests/unit/test_metadata.c
 * checks that one against the DCP formulas); a missing block is SC_ERANGE. */
static void case_cache_keys(void) {
  enum { R = 5, MAXB = 400 };
  const int32_t n = 2, il = 4, bs = 16, rank = 1;
  int32_t req[R] = {3, 0, 4, 1, 2}, b[R], e[R], *bt = malloc(sizeof(int32_t) * 5 * MAXB);
  int32_t nk = 0;
  for (int r = 0; r < R; r++) { /* up to 6000 keys a range: blocks of 16 local indices */
    b[r] = nk;
    nk += r == 2 ? 0 : (int32_t)gt_int(1, 6000);
    e[r] = nk;
  }
  for (int i = 0; i < 5 * MAXB; i++) bt[i] = (int32_t)gt_int(0, 100000);
  pbuf Rq = both(req, sizeof req), Bg = both(b, sizeof b), En = both(e, sizeof e),
       Bt = both(bt, sizeof(int32_t) * 5 * MAXB);
  pbuf Op = both_poison(sizeof(int32_t) * (size_t)nk), Os = both_poison(sizeof(int32_t) * (size_t)nk);
  CHECK(G->ops->cache_keys(G, R, nk, Rq.g, Bg.g, En.g, Bt.g, MAXB, bs, n, il, rank, Op.g, Os.g) == 0,
        "cache_keys");
  CHECK(C->ops->cache_keys(C, R, nk, Rq.c, Bg.c, En.c, Bt.c, MAXB, bs, n, il, rank, Op.c, Os.c) == 0,
        "cache_keys cpu");
  int32_t *hg = malloc(sizeof(int32_t) * (size_t)nk), *hc = malloc(sizeof(int32_t) * (size_t)nk);
  CHECK(down(Op, hg, hc, sizeof(int32_t) * (size_t)nk) == 0, "sync");
  CHECK(memcmp(hg, hc, sizeof(int32_t) * (size_t)nk) == 0, "cache_keys positions differ");
  CHECK(down(Os, hg, hc, sizeof(int32_t) * (size_t)nk) == 0, "sync");
  CHECK(memcmp(hg, hc, sizeof(int32_t) * (size_t)nk) == 0, "cache_keys slots differ");
  bt[0 * MAXB + 0] = -1; /* request 0's first block (range 1): an error on both */
  CHECK(G->ops->copy(G, Bt.g, bt, sizeof(int32_t), SC_KCOPY_H2D) == 0, "copy");
  CHECK(G->ops->cache_keys(G, R, nk, Rq.g, Bg.g, En.g, Bt.g, MAXB, bs, n, il, rank, Op.g, Os.g) == 0 &&
            G->ops->sync(G) == SC_ERANGE, "cache_keys: a missing block must be SC_ERANGE");
  memcpy(Bt.c, bt, sizeof(int32_t));
  CHECK(C->ops->cache_keys(C, R, nk, Rq.c, Bg.c, En.c, Bt.c, MAXB, bs, n, il, rank, Op.c, Os.c) ==
            SC_ERANGE, "cache_keys cpu: a missing block must be SC_ERANGE");
  bt[0] = 5; /* the block back, then ranges that leave a key out: an error on both */
  CHECK(G->ops->copy(G, Bt.g, bt, sizeof(int32_t), SC_KCOPY_H2D) == 0, "copy");
  memcpy(Bt.c, bt, sizeof(int32_t));
  b[3] += 1;
  pbuf Bg2 = both(b, sizeof b);
  CHECK(G->ops->cache_keys(G, R, nk, Rq.g, Bg2.g, En.g, Bt.g, MAXB, bs, n, il, rank, Op.g, Os.g) == 0 &&
            G->ops->sync(G) == SC_ERANGE, "cache_keys: ranges with a gap must be SC_ERANGE");
  CHECK(C->ops->cache_keys(C, R, nk, Rq.c, Bg2.c, En.c, Bt.c, MAXB, bs, n, il, rank, Op.c, Os.c) ==
            SC_ERANGE, "cache_keys cpu: ranges with a gap must be SC_ERANGE");
  pfree(Bg2);
  printf("     cache keys: %d entries in %d ranges, equal to the reference\n", nk, R);
  pfree(Rq), pfree(Bg), pfree(En), pfree(Bt), pfree(Op), pfree(Os);
  free(bt), free(hg), free(hc);
}

/* ---- sparse attention ---- */

/* Rows in increasing order, the empty entries (-1) last: sorted with them first, the
 * short-context token below would keep 70 empty entries and no row. */
static int cmp_sel(const void *x, const void *y) {
  const uint32_t a = (uint32_t) * (const int32_t *)x, b = (uint32_t) * (const int32_t *)y;
  return (a > b) - (a < b);
}

/* Random attention inputs: q (n_tok x heads x width), KV rows (rows x width) and each
 * token's topk selected rows, about one in `skip` of them -1. */
static void attn_rand_inputs(int32_t n_tok, int32_t heads, int64_t width, int64_t rows,
                             int32_t topk, int skip, float **q, float **kv, int32_t **sel) {
  *q = gt_rand_f32((size_t)n_tok * heads * width, -1, 1);
  *kv = gt_rand_f32((size_t)(rows * width), -1, 1);
  *sel = malloc(sizeof(int32_t) * (size_t)n_tok * topk);
  for (int64_t i = 0; i < (int64_t)n_tok * topk; i++)
    (*sel)[i] = gt_int(0, skip - 1) == 0 ? -1 : (int32_t)gt_int(0, rows - 1);
}

/* KV rows kv (f32, rows x width) on the device in format fmt (bf16 rounded here, fp8_ds_mla
 * quantized by the GPU's kv_write), their stride in *ld; kv is left holding the values the
 * device holds (the CPU reference reads them). */
static void *attn_kv_up(float *kv, int64_t rows, int64_t width, sc_kfmt fmt, int64_t *ld) {
  void *gkv = NULL;
  *ld = width;
  if (fmt == SC_KFMT_F32) {
    gkv = up(G, kv, sizeof(float) * (size_t)(rows * width));
  } else if (fmt == SC_KFMT_BF16) {
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(rows * width));
    for (int64_t i = 0; i < rows * width; i++) {
      h[i] = sc_f32_to_bf16(kv[i]);
      kv[i] = sc_bf16_to_f32(h[i]);
    }
    gkv = up(G, h, sizeof(uint16_t) * (size_t)(rows * width));
    free(h);
  } else { /* fp8: the GPU quantizes with kv_write; the CPU reads the reference's values */
    *ld = SC_KFP8_DS_MLA_ROW_BYTES;
    void *src = up(G, kv, sizeof(float) * (size_t)(rows * width));
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)rows);
    for (int32_t i = 0; i < rows; i++) slots[i] = i;
    void *sl = up(G, slots, sizeof(int32_t) * (size_t)rows);
    if (G->ops->alloc(G, (size_t)(rows * *ld), &gkv)) abort();
    CHECK(G->ops->kv_write(G, rows, width, src, width, sl,
                           (sc_krows){gkv, SC_KFMT_FP8_DS_MLA, *ld, rows}) == 0,
          "kv_write fp8");
    uint8_t row[SC_KFP8_DS_MLA_ROW_BYTES];
    for (int64_t r = 0; r < rows; r++) {
      sc_ref_fp8_quantize_row(kv + r * width, row);
      sc_ref_fp8_dequantize_row(row, kv + r * width);
    }
    G->ops->free(G, src), G->ops->free(G, sl);
    free(slots);
  }
  return gkv;
}

/* kvfmt: the format given to the GPU; the CPU gets f32 rows holding the values the GPU
 * reads (bf16-rounded, or fp8-dequantized through the reference).
 * ramp: scores that grow along each token's selection (row r's first value 60 r / rows, q's
 * 1, the selection sorted), so that the running max moves by more than the 2^8 the
 * tensor-core kernels let it lag (cuda_attn_ws.cuh) in later tiles: their rescales of O
 * and P run. */
static void attn_case_as(sc_kfmt kvfmt, int32_t n_tok, int32_t heads, int32_t dc, int32_t dr,
                         int32_t topk, float scale, double tol, bool decode, bool ramp) {
  const int64_t rows = 3000, width = dc + dr;
  float *q, *kv;
  int32_t *sel;
  attn_rand_inputs(n_tok, heads, width, rows, topk, 10, &q, &kv, &sel);
  if (ramp) {
    for (int64_t r = 0; r < rows; r++) kv[r * width] = (float)(60.0 * (double)r / (double)rows);
    for (int64_t i = 0; i < (int64_t)n_tok * heads; i++) q[i * width] = 1.0f;
    for (int32_t t = 0; t < n_tok; t++)
      qsort(sel + (size_t)t * topk, (size_t)topk, sizeof *sel, cmp_sel);
  }
  for (int32_t i = 0; i < topk; i++) sel[(n_tok - 1) * topk + i] = -1; /* an empty shard */
  if (n_tok >= 3) /* a short context: 70 rows, then -1 (kernels skip tiles without a row) */
    for (int32_t i = 70; i < topk; i++) sel[(n_tok - 2) * topk + i] = -1;
  int64_t gld;
  void *gkv = attn_kv_up(kv, rows, width, kvfmt, &gld);
  void *ckv = up(C, kv, sizeof(float) * (size_t)(rows * width));
  pbuf Q = both(q, sizeof(float) * (size_t)n_tok * heads * width);
  pbuf S = both(sel, sizeof(int32_t) * (size_t)n_tok * topk);
  const size_t no = (size_t)n_tok * heads * dc, nl = (size_t)n_tok * heads;
  pbuf O = both_poison(sizeof(float) * no), Ls = both_poison(sizeof(float) * nl);
  sc_attn_args a = {.n_tok = n_tok, .n_heads = heads, .dc = dc, .dr = dr, .topk = topk,
                    .scale = scale, .ld_q = heads * width, .ld_sel = topk,
                    .ld_out = (int64_t)heads * dc, .ld_lse = heads, .decode = decode};
  a.q = Q.g, a.kv = (sc_krows){gkv, kvfmt, gld, rows}, a.sel = S.g, a.out = O.g, a.lse = Ls.g;
  CHECK(G->ops->sparse_attn(G, &a) == 0, "attn");
  a.q = Q.c, a.kv = (sc_krows){ckv, SC_KFMT_F32, width, rows}, a.sel = S.c, a.out = O.c,
  a.lse = Ls.c;
  CHECK(C->ops->sparse_attn(C, &a) == 0, "attn cpu");
  float *og = malloc(sizeof(float) * no), *oc = malloc(sizeof(float) * no);
  float *lg = malloc(sizeof(float) * nl), *lc = malloc(sizeof(float) * nl);
  CHECK(down(O, og, oc, sizeof(float) * no) == 0 && down(Ls, lg, lc, sizeof(float) * nl) == 0,
        "sync");
  const double e = gt_rel_err(og, oc, no);
  double lmax = 0;
  int empty_bad = 0;
  for (size_t i = 0; i < nl; i++) {
    if (i >= (size_t)(n_tok - 1) * heads) { /* the empty shard */
      empty_bad += !(lg[i] == -INFINITY);
      continue;
    }
    const double d = lg[i] == lc[i] ? 0 : fabs((double)lg[i] - lc[i]); /* -inf == -inf */
    lmax = isnan(d) ? INFINITY : d > lmax ? d : lmax;
  }
  for (size_t i = (size_t)(n_tok - 1) * heads * dc; i < no; i++) empty_bad += og[i] != 0.0f;
  CHECK(e < tol && lmax < 10 * tol, "attn fmt %d heads %d dc %d: out rel err %.3g, lse max diff %.3g",
        kvfmt, heads, dc, e, lmax);
  CHECK(empty_bad == 0, "empty selection must give out 0 and lse -inf (%d bad)", empty_bad);
  printf("     attn fmt=%d tok=%d heads=%d dc=%d dr=%d topk=%d scale=%.3f%s%s: rel err %.3g, lse "
         "diff %.3g\n", kvfmt, n_tok, heads, dc, dr, topk, scale, decode ? " decode" : "",
         ramp ? " ramp" : "", e, lmax);
  G->ops->free(G, gkv), C->ops->free(C, ckv);
  pfree(Q), pfree(S), pfree(O), pfree(Ls);
  free(q), free(kv), free(sel), free(og), free(oc), free(lg), free(lc);
}

static void attn_case(sc_kfmt kvfmt, int32_t n_tok, int32_t heads, int32_t dc, int32_t dr,
                      int32_t topk, float scale, double tol, bool decode) {
  attn_case_as(kvfmt, n_tok, heads, dc, dr, topk, scale, tol, decode, false);
}

static void case_attention(void) {
  attn_case(SC_KFMT_F32, 7, 5, 64, 16, 50, 0.125f, 1e-5, false);     /* split kernel, f32 */
  attn_case(SC_KFMT_BF16, 5, 6, 64, 16, 70, 0.125f, 1e-5, false);    /* split kernel, bf16 */
  attn_case(SC_KFMT_F32, 3, 16, 512, 64, 100, 0.0417f, 1e-5, false); /* f32 at the model width */
  attn_case(SC_KFMT_F32, 3, 8, 512, 64, 2048, 0.0417f, 1e-5, false); /* model-long: 16 splits */
  attn_case(SC_KFMT_F32, 3, 8, 512, 64, 2048, 0.0417f, 1e-5, true);  /* its decode: 32 splits */
  attn_case(SC_KFMT_F32, 4, 8, 512, 64, 64, 0.0417f, 1e-5, true);    /* the default model:
                                                                 splits of 32, 2 heads a block */
  attn_case(SC_KFMT_F32, 150, 12, 512, 64, 200, 0.0417f, 1e-5, false); /* 8 heads a block, the
                                                                 second group partial */
  attn_case(SC_KFMT_F32, 2, 20, 100, 13, 301, 0.1f, 1e-5, false);    /* odd width, partial head
                                                                 group, split and tile */
  /* few heads over bf16 rows: the few-heads kernel (model-long with --kv-format bf16),
   * prefill tokens whole, decode tokens in splits; partial tiles, head groups and splits */
  attn_case(SC_KFMT_BF16, 3, 8, 512, 64, 2048, 0.0417f, 1e-2, false);
  attn_case(SC_KFMT_BF16, 3, 8, 512, 64, 2048, 0.0417f, 1e-2, true);
  attn_case(SC_KFMT_BF16, 4, 16, 512, 64, 300, 0.0417f, 1e-2, false);
  attn_case(SC_KFMT_BF16, 4, 5, 512, 64, 300, 0.0417f, 1e-2, true);
  attn_case(SC_KFMT_BF16, 3, 12, 512, 64, 77, 0.15f, 1e-2, false);
  attn_case(SC_KFMT_BF16, 3, 12, 512, 64, 100, 0.15f, 1e-2, true); /* one split */
  attn_case(SC_KFMT_BF16, 2, 64, 512, 64, 2048, 0.0417f, 1e-2, true); /* 64 heads decode: tensor cores */
  /* 128 heads (clusters of two blocks a token) on long selections; the short ones are
   * case_attention_roles' */
  attn_case_as(SC_KFMT_BF16, 3, 128, 512, 64, 2048, 0.15f, 1e-2, true, true);
  attn_case_as(SC_KFMT_FP8_DS_MLA, 3, 128, 512, 64, 1024, 0.15f, 1e-2, false, true);
  attn_case(SC_KFMT_FP8_DS_MLA, 3, 64, 512, 64, 2048, 0.1f, 1e-2, false);
  /* few heads over fp8 rows: the few-heads kernel's staged and dequantized tiles (model-long
   * with --kv-format fp8_ds_mla), the same shapes as bf16's, and a moving max */
  attn_case(SC_KFMT_FP8_DS_MLA, 3, 8, 512, 64, 2048, 0.0417f, 1e-2, false);
  attn_case(SC_KFMT_FP8_DS_MLA, 3, 8, 512, 64, 2048, 0.0417f, 1e-2, true);
  attn_case(SC_KFMT_FP8_DS_MLA, 4, 16, 512, 64, 300, 0.0417f, 1e-2, false);
  attn_case(SC_KFMT_FP8_DS_MLA, 4, 5, 512, 64, 300, 0.0417f, 1e-2, true);
  attn_case(SC_KFMT_FP8_DS_MLA, 3, 12, 512, 64, 77, 0.15f, 1e-2, false);
  attn_case(SC_KFMT_FP8_DS_MLA, 3, 12, 512, 64, 100, 0.15f, 1e-2, true); /* one split */
  attn_case_as(SC_KFMT_FP8_DS_MLA, 3, 8, 512, 64, 1024, 0.15f, 1e-2, false, true);
}

/* The kernel of warpgroups in roles (cuda_attn_ws.cu) on a few tiles a token: 64 and 128
 * heads (a token's two head groups in a cluster that reads rows for both), a partial head
 * group, bf16 and fp8_ds_mla rows, a max that moves. Small enough for compute-sanitizer's
 * racecheck (SC_GPU_CASES=attention_roles), which ran past 100 s on case_attention's
 * 2048-row cases. */
static void case_attention_roles(void) {
  attn_case(SC_KFMT_BF16, 5, 128, 512, 64, 200, 0.0417f, 1e-2, false);
  attn_case(SC_KFMT_BF16, 4, 72, 512, 64, 77, 0.15f, 1e-2, false);
  attn_case(SC_KFMT_BF16, 4, 64, 512, 64, 150, 0.15f, 1e-2, false);
  attn_case(SC_KFMT_FP8_DS_MLA, 4, 128, 512, 64, 150, 0.15f, 1e-2, true);
  attn_case(SC_KFMT_FP8_DS_MLA, 5, 128, 512, 64, 200, 0.0417f, 1e-2, false);
}

/* An invariance case's inputs on the device (random q, KV rows in fmt, selections about
 * one in `skip` -1; dc 512, dr 64, scale 0.05), the args of the whole batch, which write
 * into o and l, and room for the same tokens computed another way (o1, l1). */
typedef struct {
  void *q, *kv, *sel, *o, *l, *o1, *l1;
  size_t no, nl;
  sc_attn_args a;
} attn_fixture;

static attn_fixture attn_fixture_make(sc_kfmt fmt, int32_t n_tok, int32_t heads, int32_t topk,
                                      int64_t rows, int skip) {
  const int32_t dc = 512, dr = 64;
  const int64_t width = dc + dr;
  float *q, *kv;
  int32_t *sel;
  attn_rand_inputs(n_tok, heads, width, rows, topk, skip, &q, &kv, &sel);
  attn_fixture x = {.no = (size_t)n_tok * heads * dc, .nl = (size_t)n_tok * heads};
  int64_t ld_kv;
  x.kv = attn_kv_up(kv, rows, width, fmt, &ld_kv);
  x.q = up(G, q, sizeof(float) * (size_t)n_tok * heads * width);
  x.sel = up(G, sel, sizeof(int32_t) * (size_t)n_tok * topk);
  const size_t bo = sizeof(float) * x.no, bl = sizeof(float) * x.nl;
  if (G->ops->alloc(G, bo, &x.o) || G->ops->alloc(G, bl, &x.l) || G->ops->alloc(G, bo, &x.o1) ||
      G->ops->alloc(G, bl, &x.l1))
    abort();
  x.a = (sc_attn_args){.n_tok = n_tok, .n_heads = heads, .dc = dc, .dr = dr, .topk = topk,
                       .scale = 0.05f, .q = x.q, .ld_q = heads * width,
                       .kv = {x.kv, fmt, ld_kv, rows}, .sel = x.sel, .ld_sel = topk,
                       .out = x.o, .ld_out = (int64_t)heads * dc, .lse = x.l, .ld_lse = heads};
  free(q), free(kv), free(sel);
  return x;
}

/* Whether the two results are the same to the bit; frees the fixture. */
static bool attn_fixture_same(attn_fixture *x) {
  float *o = malloc(sizeof(float) * x->no), *o1 = malloc(sizeof(float) * x->no);
  float *l = malloc(sizeof(float) * x->nl), *l1 = malloc(sizeof(float) * x->nl);
  CHECK(G->ops->copy(G, o, x->o, sizeof(float) * x->no, SC_KCOPY_D2H) == 0 &&
            G->ops->copy(G, o1, x->o1, sizeof(float) * x->no, SC_KCOPY_D2H) == 0 &&
            G->ops->copy(G, l, x->l, sizeof(float) * x->nl, SC_KCOPY_D2H) == 0 &&
            G->ops->copy(G, l1, x->l1, sizeof(float) * x->nl, SC_KCOPY_D2H) == 0 &&
            G->ops->sync(G) == 0,
        "download");
  const bool same =
      memcmp(o, o1, sizeof(float) * x->no) == 0 && memcmp(l, l1, sizeof(float) * x->nl) == 0;
  free(o), free(o1), free(l), free(l1);
  void *ps[] = {x->q, x->kv, x->sel, x->o, x->l, x->o1, x->l1};
  for (int i = 0; i < 7; i++) G->ops->free(G, ps[i]);
  return same;
}

/* A token's attention is the same to the bit whatever batch it comes in (SPEC.md §8: a
 * multi-rank run batches tokens otherwise than a single rank): each token of a batch
 * computed again alone, on the split kernel (f32), the wgmma kernel (bf16, 64 heads) and
 * the few-heads kernel (bf16 and fp8_ds_mla, 8 heads; prefill and decode tokens); a
 * batch of 150 over a top-K of 200 on the split kernel, which takes 8 heads a block for
 * the batch and 2 for a token alone; and batches of the kernel of warpgroups in roles with more blocks than the
 * GPU runs at once, over bf16 rows and over fp8_ds_mla rows in clusters of two. */
static void case_attention_batch_invariance(void) {
  static const struct {
    sc_kfmt fmt;
    int32_t n_tok, heads, topk;
    bool decode;
  } vs[] = {
      {SC_KFMT_F32, 9, 8, 700, false},
      {SC_KFMT_BF16, 9, 64, 700, false},
      {SC_KFMT_BF16, 9, 8, 700, false},
      {SC_KFMT_BF16, 9, 8, 700, true},
      {SC_KFMT_F32, 150, 8, 200, false}, /* 150 tokens x 7 splits, more blocks than SMs */
      {SC_KFMT_BF16, 300, 64, 300, true},        /* 300 blocks of 5 tiles */
      {SC_KFMT_FP8_DS_MLA, 200, 128, 200, true}, /* 400 blocks in clusters of two */
      {SC_KFMT_FP8_DS_MLA, 9, 8, 700, false},    /* the few-heads kernel's fp8 tiles */
      {SC_KFMT_FP8_DS_MLA, 9, 8, 700, true},
  };
  for (size_t v = 0; v < sizeof vs / sizeof vs[0]; v++) {
    const int32_t n_tok = vs[v].n_tok, heads = vs[v].heads, topk = vs[v].topk;
    attn_fixture x = attn_fixture_make(vs[v].fmt, n_tok, heads, topk, 2000, 8);
    x.a.decode = vs[v].decode;
    CHECK(G->ops->sparse_attn(G, &x.a) == 0, "attn batch");
    for (int32_t t = 0; t < n_tok; t++) { /* token t alone, written at its own place */
      sc_attn_args b = x.a;
      b.n_tok = 1;
      b.q = (const float *)x.q + (size_t)t * x.a.ld_q;
      b.sel = (const int32_t *)x.sel + (size_t)t * topk;
      b.out = (float *)x.o1 + (size_t)t * x.a.ld_out;
      b.lse = (float *)x.l1 + (size_t)t * heads;
      CHECK(G->ops->sparse_attn(G, &b) == 0, "attn alone");
    }
    CHECK(attn_fixture_same(&x),
          "fmt %d heads %d%s: a token's attention differs between a batch of %d and alone",
          vs[v].fmt, heads, vs[v].decode ? " decode" : "", n_tok);
    printf("     attn fmt=%d heads=%d%s: %d tokens, batched == alone, bit for bit\n", vs[v].fmt,
           heads, vs[v].decode ? " decode" : "", n_tok);
  }
}

/* A token's heads give the same bits whether one launch takes all 128 (over fp8_ds_mla
 * rows: a token's two head groups as a cluster of two blocks that dequantize half of
 * every tile's rows each, for both) or two launches take 64 each (one block a group, as
 * each rank under TP = 2; SPEC.md §8): the slots hold the same bf16 values either way,
 * and every sum is a block's own. bf16 rows too (one block a group in both). */
static void case_attention_head_groups(void) {
  for (int f = 0; f < 2; f++) {
    const sc_kfmt fmt = f ? SC_KFMT_FP8_DS_MLA : SC_KFMT_BF16;
    attn_fixture x = attn_fixture_make(fmt, 3, 128, 300, 1500, 10);
    CHECK(G->ops->sparse_attn(G, &x.a) == 0, "attn 128 heads");
    for (int grp = 0; grp < 2; grp++) { /* heads 64 grp .. 64 grp + 63, strides kept */
      sc_attn_args b = x.a;
      b.n_heads = 64;
      b.q = (const float *)x.q + (size_t)grp * 64 * (x.a.dc + x.a.dr);
      b.out = (float *)x.o1 + (size_t)grp * 64 * x.a.dc;
      b.lse = (float *)x.l1 + (size_t)grp * 64;
      CHECK(G->ops->sparse_attn(G, &b) == 0, "attn 64 heads");
    }
    CHECK(attn_fixture_same(&x), "fmt %d: 128 heads in one launch differ from two launches of 64",
          fmt);
    printf("     attn fmt=%d: 128 heads in one launch == two launches of 64, bit for bit\n", fmt);
  }
}

/* ---- LSE merge and scale ---- */

static void case_lse(void) {
  const int32_t shards = 3;
  const int64_t nr = 50, width = 40;
  float *lse = gt_rand_f32((size_t)(shards * nr), -5, 5);
  float *out = gt_rand_f32((size_t)(shards * nr * width), -1, 1);
  for (int64_t i = 0; i < shards * nr; i++) {
    const int64_t u = gt_int(0, 19);
    if (u == 0) lse[i] = -INFINITY;
    else if (u == 1) lse[i] = NAN;
    else if (u == 2) lse[i] = INFINITY;
  }
  for (int32_t r = 0; r < shards; r++) lse[r * nr + 7] = -INFINITY; /* all empty */
  pbuf L = both(lse, sizeof(float) * (size_t)(shards * nr));
  pbuf In = both(out, sizeof(float) * (size_t)(shards * nr * width));
  pbuf O = both_poison(sizeof(float) * (size_t)(nr * width)), Lo = both_poison(sizeof(float) * (size_t)nr);
  CHECK(G->ops->lse_merge(G, shards, nr, width, L.g, In.g, O.g, Lo.g) == 0, "merge");
  CHECK(C->ops->lse_merge(C, shards, nr, width, L.c, In.c, O.c, Lo.c) == 0, "merge cpu");
  float *hg = malloc(sizeof(float) * (size_t)(nr * width)), *hc = malloc(sizeof(float) * (size_t)(nr * width));
  float lg[50], lc[50];
  CHECK(down(O, hg, hc, sizeof(float) * (size_t)(nr * width)) == 0 && down(Lo, lg, lc, sizeof lg) == 0,
        "sync");
  CHECK(gt_rel_err(hg, hc, (size_t)(nr * width)) < 1e-5, "lse_merge out %.3g",
        gt_rel_err(hg, hc, (size_t)(nr * width)));
  int bad = 0;
  for (int i = 0; i < nr; i++)
    bad += !(lg[i] == lc[i] || fabsf(lg[i] - lc[i]) < 1e-5f * (1 + fabsf(lc[i])));
  CHECK(bad == 0, "lse_merge lse: %d differ", bad);
  /* scale shard 1's own output in place */
  pbuf Own = both(out + nr * width, sizeof(float) * (size_t)(nr * width));
  CHECK(G->ops->lse_scale(G, shards, 1, nr, width, L.g, Own.g, Lo.g) == 0, "scale");
  CHECK(C->ops->lse_scale(C, shards, 1, nr, width, L.c, Own.c, Lo.c) == 0, "scale cpu");
  CHECK(down(Own, hg, hc, sizeof(float) * (size_t)(nr * width)) == 0, "sync");
  CHECK(gt_rel_err(hg, hc, (size_t)(nr * width)) < 1e-5, "lse_scale %.3g",
        gt_rel_err(hg, hc, (size_t)(nr * width)));
  pfree(L), pfree(In), pfree(O), pfree(Lo), pfree(Own);
  free(lse), free(out), free(hg), free(hc);
}

/* ---- errors reported at the next sync ---- */

static void case_errors(void) {
  const int32_t topk = 8, width = 80;
  float *q = gt_rand_f32((size_t)4 * width, -1, 1), *kv = gt_rand_f32((size_t)10 * width, -1, 1);
  int32_t sel[8] = {0, 1, 2, 10, -1, 3, 4, 5}; /* 10 is out of range for 10 rows */
  void *Q = up(G, q, sizeof(float) * 4 * width), *K = up(G, kv, sizeof(float) * 10 * width);
  void *S = up(G, sel, sizeof sel), *O = NULL, *L = NULL;
  G->ops->alloc(G, sizeof(float) * 4 * 64, &O);
  G->ops->alloc(G, sizeof(float) * 4, &L);
  sc_attn_args a = {.n_tok = 1, .n_heads = 4, .dc = 64, .dr = 16, .topk = topk, .scale = 0.1f,
                    .q = Q, .ld_q = 4 * width, .kv = {K, SC_KFMT_F32, width, 10}, .sel = S,
                    .ld_sel = topk, .out = O, .ld_out = 4 * 64, .lse = L, .ld_lse = 4};
  CHECK(G->ops->sparse_attn(G, &a) == 0, "launch");
  CHECK(G->ops->sync(G) == SC_ERANGE, "bad row must surface as SC_ERANGE at sync");
  CHECK(G->ops->sync(G) == 0, "the flag is cleared once reported");
  int32_t idx[2] = {3, -7};
  void *I = up(G, idx, sizeof idx), *D = NULL;
  G->ops->alloc(G, sizeof(float) * 2 * width, &D);
  CHECK(G->ops->gather_rows(G, 2, width, (sc_krows){K, SC_KFMT_F32, width, 10}, I,
                            (sc_krows){D, SC_KFMT_F32, width, 2}) == 0,
        "launch");
  CHECK(G->ops->sync(G) == SC_ERANGE, "bad gather index must surface as SC_ERANGE");
  CHECK(G->ops->gather_rows(G, 2, 576, (sc_krows){K, SC_KFMT_FP8_DS_MLA, 100, 10}, I,
                            (sc_krows){D, SC_KFMT_F32, 576, 2}) == SC_EINVAL,
        "fp8 rows shorter than 656 bytes are refused");
  void *ps[] = {Q, K, S, O, L, I, D};
  for (int i = 0; i < 7; i++) G->ops->free(G, ps[i]);
  free(q), free(kv);
}

/* ---- the greedy token: argmax_rows and take_tokens ---- */

/* The device names the token the host's sc_logits_top2 names: ties to the lowest index,
 * both zeros alike, NaN below everything (a row of NaN: 0), -inf rows, and a vocabulary
 * as large as DeepSeek-V3.2's. */
static void case_greedy(void) {
  const int64_t width = 129280;
  enum { ROWS = 9 };
  float *x = malloc(sizeof(float) * ROWS * (size_t)width);
  for (int64_t i = 0; i < ROWS * width; i++) x[i] = (float)gt_unif(-4.0, 4.0);
  float *r;
  r = x + 1 * width; r[7] = 9.0f; r[100000] = 9.0f; r[129279] = 9.0f;     /* ties */
  r = x + 2 * width; for (int64_t i = 0; i < width; i++) r[i] = NAN;       /* all NaN */
  r = x + 3 * width; for (int64_t i = 0; i < width; i++) r[i] = -INFINITY; /* all -inf */
  r = x + 4 * width; for (int64_t i = 0; i < width; i++) r[i] = i % 3 ? -0.0f : 0.0f;
  r = x + 5 * width; r[0] = NAN; r[5] = 50.0f; r[6] = NAN;                 /* NaN first */
  r = x + 6 * width; r[width - 1] = INFINITY;
  r = x + 7 * width; for (int64_t i = 0; i < width; i++) r[i] = (float)(i % 1000);
  int32_t want[ROWS], got[ROWS];
  float mwant[ROWS], mgot[ROWS];
  pbuf X = both(x, sizeof(float) * ROWS * (size_t)width), O = both_poison(sizeof got),
       M = both_poison(sizeof mgot);
  CHECK(G->ops->argmax_rows(G, ROWS, width, X.g, width, O.g, M.g) == 0, "argmax_rows");
  CHECK(C->ops->argmax_rows(C, ROWS, width, X.c, width, O.c, M.c) == 0, "argmax_rows (cpu)");
  CHECK(down(O, got, want, sizeof got) == 0, "download");
  CHECK(down(M, mgot, mwant, sizeof mgot) == 0, "download");
  for (int i = 0; i < ROWS; i++) {
    int32_t host;
    float margin;
    sc_logits_top2(x + i * width, (int32_t)width, &host, &margin);
    CHECK(got[i] == host && want[i] == host, "row %d: device %d, cpu kernel %d, host %d", i,
          got[i], want[i], host);
    /* the margin to the bit (a NaN margin, of a row without two numbers, as NaN) */
    CHECK((memcmp(&mgot[i], &margin, sizeof margin) == 0 || (isnan(mgot[i]) && isnan(margin))) &&
              (memcmp(&mwant[i], &margin, sizeof margin) == 0 ||
               (isnan(mwant[i]) && isnan(margin))),
          "row %d: margin device %a, cpu kernel %a, host %a", i, mgot[i], mwant[i], margin);
  }
  CHECK(got[1] == 7 && got[2] == 0 && got[3] == 0 && got[5] == 5 && got[7] == 999,
        "rows 1, 2, 3, 5, 7: %d %d %d %d %d", got[1], got[2], got[3], got[5], got[7]);
  /* rows narrower than a block and than the cluster's stride, with a stride of their own */
  for (int w = 1; w <= 4100; w += 4099 / 3) {
    enum { NR = 3, LD = 4104 };
    float *y = malloc(sizeof(float) * NR * LD);
    for (int i = 0; i < NR * LD; i++) y[i] = (float)gt_unif(-1.0, 1.0);
    y[LD + w - 1] = 5.0f; /* row 1: the last element */
    int32_t g3[NR];
    float m3[NR];
    pbuf Y = both(y, sizeof(float) * NR * LD), P = both_poison(sizeof g3),
         Q = both_poison(sizeof m3);
    CHECK(G->ops->argmax_rows(G, NR, w, Y.g, LD, P.g, Q.g) == 0, "argmax_rows width %d", w);
    CHECK(down(P, g3, NULL, sizeof g3) == 0, "download");
    CHECK(down(Q, m3, NULL, sizeof m3) == 0, "download");
    for (int i = 0; i < NR; i++) {
      int32_t host;
      float margin;
      sc_logits_top2(y + i * LD, w, &host, &margin);
      CHECK(g3[i] == host && memcmp(&m3[i], &margin, sizeof margin) == 0,
            "width %d row %d: device %d (margin %a), host %d (%a)", w, i, g3[i], m3[i], host,
            margin);
    }
    /* without margins: the tokens alone */
    CHECK(G->ops->argmax_rows(G, NR, w, Y.g, LD, P.g, NULL) == 0, "argmax_rows width %d", w);
    CHECK(down(P, g3, NULL, sizeof g3) == 0, "download");
    for (int i = 0; i < NR; i++) {
      int32_t host;
      float margin;
      sc_logits_top2(y + i * LD, w, &host, &margin);
      CHECK(g3[i] == host, "width %d row %d: device %d, host %d", w, i, g3[i], host);
    }
    pfree(Y), pfree(P), pfree(Q);
    free(y);
  }
  /* take_tokens: ids[at[j]] = src[row[j]] */
  int32_t ids[16], at[3] = {2, 9, 15}, row[3] = {4, 0, 7}, back[16];
  for (int i = 0; i < 16; i++) ids[i] = 1000 + i;
  pbuf Id = both(ids, sizeof ids), At = both(at, sizeof at), Rw = both(row, sizeof row);
  CHECK(G->ops->take_tokens(G, 3, At.g, Rw.g, O.g, Id.g) == 0, "take_tokens");
  CHECK(down(Id, back, NULL, sizeof back) == 0, "download");
  for (int i = 0; i < 16; i++) {
    const int32_t w = i == 2 ? got[4] : i == 9 ? got[0] : i == 15 ? got[7] : 1000 + i;
    CHECK(back[i] == w, "ids[%d] = %d, expected %d", i, back[i], w);
  }
  pfree(X), pfree(O), pfree(M), pfree(Id), pfree(At), pfree(Rw);
  free(x);
}

/* draw_rows: the device draws the host's token (sc_sample_temperature) to the bit, over
 * DeepSeek-V3.2's vocabulary and narrow rows, peaked and flat temperatures, NaN and -inf
 * sprinkled, an infinity (the greedy token) and rows at temperature 0 (theirs kept). */
static void case_draw(void) {
  for (int wi = 0; wi < 3; wi++) {
    const int64_t width = wi == 0 ? 129280 : wi == 1 ? 1000 : 3;
    enum { ROWS = 24 };
    float *x = malloc(sizeof(float) * ROWS * (size_t)width);
    for (int64_t i = 0; i < ROWS * width; i++) x[i] = (float)gt_unif(-6.0, 6.0);
    float temp[ROWS];
    uint64_t seed[ROWS];
    int32_t index[ROWS];
    for (int r = 0; r < ROWS; r++) {
      const float ts[] = {0.0f, 0.05f, 0.3f, 0.7f, 1.0f, 1.5f, 2.0f, 4.0f};
      temp[r] = ts[r % 8];
      seed[r] = 1000u + (uint64_t)r;
      index[r] = 3 * r;
      float *row = x + r * width;
      if (r % 5 == 1) row[r % width] = NAN;
      if (r % 5 == 2) row[(r + 1) % width] = -INFINITY;
    }
    x[(ROWS - 1) * width + width / 2] = INFINITY; /* the last row: the greedy token */
    int32_t want[ROWS], got[ROWS];
    pbuf X = both(x, sizeof(float) * ROWS * (size_t)width), T = both(temp, sizeof temp),
         S = both(seed, sizeof seed), I = both(index, sizeof index),
         O = both_poison(sizeof got);
    CHECK(G->ops->argmax_rows(G, ROWS, width, X.g, width, O.g, NULL) == 0, "argmax_rows");
    CHECK(G->ops->draw_rows(G, ROWS, width, X.g, width, T.g, S.g, I.g, O.g) == 0, "draw_rows");
    CHECK(down(O, got, NULL, sizeof got) == 0, "download");
    int drawn = 0;
    for (int r = 0; r < ROWS; r++) {
      want[r] = sc_sample_temperature(x + r * width, (int32_t)width, temp[r], seed[r], index[r]);
      drawn += want[r] != sc_sample_greedy(x + r * width, (int32_t)width);
      CHECK(got[r] == want[r], "width %lld row %d (t %g): device %d, host %d", (long long)width,
            r, (double)temp[r], got[r], want[r]);
    }
    CHECK(width < 1000 || drawn > ROWS / 4, "width %lld: only %d draws left the greedy token",
          (long long)width, drawn);
    pfree(X), pfree(T), pfree(S), pfree(I), pfree(O);
    free(x);
  }
}

/* ---- notify and deferred reads: the host queues and goes on ---- */

typedef struct notice {
  atomic_int fired, status;
  uint64_t at_ns;
  const uint32_t *landed; /* checked inside the callback: the read is there already */
  size_t n;
  atomic_int bad;
} notice;

static void on_notice(void *arg, int status) {
  notice *nt = arg;
  int bad = 0;
  for (size_t i = 0; i < nt->n; i++) bad += nt->landed[i] != 0x5a5a5a5au;
  atomic_store(&nt->bad, bad);
  atomic_store(&nt->status, status);
  nt->at_ns = sc_now_ns();
  atomic_store(&nt->fired, 1);
}

static void wait_fired(notice *nt) {
  const uint64_t until = sc_now_ns() + 10000000000ull;
  while (!atomic_load(&nt->fired) && sc_now_ns() < until) {
    const struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

static void case_notify(void) {
  const size_t n = 1 << 20;
  void *B = NULL;
  uint32_t *host = calloc(n, sizeof *host);
  REQUIRE(G->ops->alloc(G, n * sizeof *host, &B) == 0, "alloc");
  const uint64_t t0 = sc_now_ns();
  REQUIRE(sc_test_gpu_spin(sc_kernels_cuda_stream(G), 300) == 0, "spin");
  CHECK(G->ops->memset(G, B, 0x5a, n * sizeof *host) == 0, "memset");
  CHECK(G->ops->copy(G, host, B, n * sizeof *host, SC_KCOPY_D2H_DEFERRED) == 0, "deferred read");
  notice nt = {.landed = host, .n = n};
  CHECK(G->ops->notify(G, on_notice, &nt) == 0, "notify");
  const double queued_s = (double)(sc_now_ns() - t0) * 1e-9;
  CHECK(queued_s < 0.2, "queueing behind 0.3 s of work returned after %.3f s", queued_s);
  CHECK(!atomic_load(&nt.fired), "the callback waits for the work");
  /* a second step queued behind it (an overlapped step): its read and notify queue at
   * once, into the other batch, and land their own bytes; a third waits for the first */
  uint32_t *host2 = calloc(n, sizeof *host2);
  void *B2 = NULL;
  REQUIRE(G->ops->alloc(G, n * sizeof *host2, &B2) == 0, "alloc");
  REQUIRE(sc_test_gpu_spin(sc_kernels_cuda_stream(G), 300) == 0, "spin");
  CHECK(G->ops->memset(G, B2, 0x5a, n * sizeof *host2) == 0, "memset");
  CHECK(G->ops->memset(G, B, 0, n * sizeof *host) == 0, "memset (after the first read)");
  CHECK(G->ops->copy(G, host2, B2, n * sizeof *host2, SC_KCOPY_D2H_DEFERRED) == 0,
        "second deferred read");
  notice nt2 = {.landed = host2, .n = n};
  CHECK(G->ops->notify(G, on_notice, &nt2) == 0, "a second notify while the first is pending");
  const double queued2_s = (double)(sc_now_ns() - t0) * 1e-9;
  CHECK(queued2_s < 0.2, "the second step queued after %.3f s", queued2_s);
  notice nt3 = {.n = 0};
  CHECK(G->ops->notify(G, on_notice, &nt3) == 0, "a third notify");
  CHECK(atomic_load(&nt.fired), "a third notify waits for the first's callback");
  wait_fired(&nt);
  CHECK(atomic_load(&nt.fired) && atomic_load(&nt.status) == 0, "fired with status 0");
  CHECK((double)(nt.at_ns - t0) * 1e-9 >= 0.29, "fired after the spin (%.3f s)",
        (double)(nt.at_ns - t0) * 1e-9);
  CHECK(atomic_load(&nt.bad) == 0, "%d values had not landed when the callback ran",
        atomic_load(&nt.bad));
  wait_fired(&nt2);
  wait_fired(&nt3);
  CHECK(atomic_load(&nt2.fired) && atomic_load(&nt2.status) == 0 && atomic_load(&nt2.bad) == 0,
        "the second callback: fired %d, status %d, %d values missing", atomic_load(&nt2.fired),
        atomic_load(&nt2.status), atomic_load(&nt2.bad));
  CHECK(nt2.at_ns >= nt.at_ns && nt3.at_ns >= nt2.at_ns, "the callbacks ran in order");
  CHECK((double)(nt2.at_ns - t0) * 1e-9 >= 0.59, "the second fired after both spins (%.3f s)",
        (double)(nt2.at_ns - t0) * 1e-9);
  G->ops->free(G, B2);
  free(host2);
  CHECK(G->ops->memset(G, B, 0x5a, n * sizeof *host) == 0, "memset");

  /* a kernel's error reaches the callback, and is cleared for the next one */
  const int32_t width = 80;
  int32_t idx[2] = {3, -7};
  void *I = up(G, idx, sizeof idx), *D = NULL;
  G->ops->alloc(G, sizeof(float) * 2 * width, &D);
  CHECK(G->ops->gather_rows(G, 2, width, (sc_krows){B, SC_KFMT_F32, width, 10}, I,
                            (sc_krows){D, SC_KFMT_F32, width, 2}) == 0,
        "launch");
  notice bad = {.landed = host, .n = 0};
  CHECK(G->ops->notify(G, on_notice, &bad) == 0, "notify");
  wait_fired(&bad);
  CHECK(atomic_load(&bad.status) == SC_ERANGE, "a bad index reaches the callback (%d)",
        atomic_load(&bad.status));
  CHECK(G->ops->sync(G) == 0, "the flag was cleared by the notify");
  G->ops->free(G, B), G->ops->free(G, I), G->ops->free(G, D);
  free(host);
}

/* The callback does not hold the compute stream: work queued behind a notify runs, and a
 * read of it returns, while the callback still runs. (Until 2026-12-07 the callback sat
 * on the compute stream, so the next step, queued behind it, waited for it: the default
 * model's decode token 0.29 -> 0.21 ms once it moved, bench/gpu-step.md.) */
static atomic_int hold_started, hold_release;

static void on_hold(void *arg, int status) {
  atomic_store(&hold_started, 1);
  const uint64_t until = sc_now_ns() + 3000000000ull;
  while (!atomic_load(&hold_release) && sc_now_ns() < until) {
    const struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  on_notice(arg, status);
}

static void case_notify_beside_stream(void) {
  notice nt = {.n = 0};
  CHECK(G->ops->notify(G, on_hold, &nt) == 0, "notify");
  const uint64_t until = sc_now_ns() + 10000000000ull;
  while (!atomic_load(&hold_started) && sc_now_ns() < until) {
    const struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  REQUIRE(atomic_load(&hold_started), "the callback never started");
  void *B = NULL;
  uint32_t v = 0;
  REQUIRE(G->ops->alloc(G, sizeof v, &B) == 0, "alloc");
  CHECK(G->ops->memset(G, B, 0x5a, sizeof v) == 0, "memset");
  const uint64_t t0 = sc_now_ns();
  CHECK(G->ops->copy(G, &v, B, sizeof v, SC_KCOPY_D2H) == 0, "read");
  const double read_s = (double)(sc_now_ns() - t0) * 1e-9;
  const bool held = !atomic_load(&nt.fired);
  atomic_store(&hold_release, 1);
  wait_fired(&nt);
  CHECK(held && read_s < 1.0,
        "a read queued behind a notify waited %.3f s, for its callback (still running: %d)",
        read_s, held);
  CHECK(v == 0x5a5a5a5au, "read %#x", v);
  CHECK(atomic_load(&nt.fired) && atomic_load(&nt.status) == 0, "the callback: fired %d, status %d",
        atomic_load(&nt.fired), atomic_load(&nt.status));
  G->ops->free(G, B);
}

/* Step stamps (sc_forward_gap's): the time between two is the stream's, a spin of 50 ms
 * between them included; read before the second has passed, SC_EAGAIN; refused while
 * recording, as a host copy is. */
static void case_stamps(void) {
  int64_t ns = -1;
  CHECK(G->ops->stamp_gap(G, 6, 7, &ns) == SC_EINVAL, "stamps never recorded");
  REQUIRE(G->ops->stamp(G, 0) == 0, "stamp 0");
  REQUIRE(sc_test_gpu_spin(sc_kernels_cuda_stream(G), 50) == 0, "spin");
  REQUIRE(G->ops->stamp(G, 1) == 0, "stamp 1");
  CHECK(G->ops->stamp_gap(G, 0, 1, &ns) == SC_EAGAIN, "read before stamp 1 passed");
  REQUIRE(G->ops->sync(G) == 0, "sync");
  CHECK(G->ops->stamp_gap(G, 0, 1, &ns) == 0 && ns >= 49000000 && ns < 5000000000,
        "50 ms of spin between the stamps: %lld ns", (long long)ns);
  CHECK(G->ops->stamp_gap(G, 1, 0, &ns) == 0 && ns < 0, "backwards: %lld ns", (long long)ns);
  CHECK(G->ops->stamp(G, SC_KSTAMP_MAX) == SC_EINVAL, "stamp out of range");
  REQUIRE(G->ops->record_begin(G) == 0, "record_begin");
  CHECK(G->ops->stamp(G, 2) == SC_EAGAIN, "a stamp while recording");
  sc_krecording *r = NULL;
  CHECK(G->ops->record_end(G, &r) == SC_EAGAIN, "the recording with a stamp in it");
  G->ops->recording_free(G, r);
}

/* A device error (here an illegal address) still reaches the notify's callback, as
 * SC_EDEVICE: a host function (cudaLaunchHostFunc) is never called once the context has
 * one, and the executor waited for its step forever. The two device-fault cases run
 * last, in this order: the context is unusable afterwards. */
static void case_device_fault(void) {
  REQUIRE(G->ops->inject_fault(G) == 0, "fault kernel");
  notice nt = {.n = 0};
  CHECK(G->ops->notify(G, on_notice, &nt) == 0, "notify");
  wait_fired(&nt);
  CHECK(atomic_load(&nt.fired), "the callback never ran after a device error");
  CHECK(atomic_load(&nt.status) == SC_EDEVICE, "status %d, expected SC_EDEVICE",
        atomic_load(&nt.status));
}

/* After case_device_fault the context has a device error. What an executor sees of
 * it when the error surfaced before its notify (a kernel that faulted mid-step, or the
 * step after): notify fails, so it syncs and takes sync's status as the step's. That
 * status must say SC_EDEVICE too, or the scheduler treats a dead device as one failed
 * step and runs the next one on it. */
static void case_device_fault_seen_before_notify(void) {
  notice nt = {.n = 0};
  const int nrc = G->ops->notify(G, on_notice, &nt);
  if (nrc == 0) {
    wait_fired(&nt);
    CHECK(atomic_load(&nt.status) == SC_EDEVICE, "notify status %d", atomic_load(&nt.status));
  } else {
    printf("  notify after the error returned %d (%s)\n", nrc, sc_strerror(nrc));
  }
  const int src = G->ops->sync(G);
  CHECK(src == SC_EDEVICE, "sync after a device error returned %d (%s), expected SC_EDEVICE",
        src, sc_strerror(src));
}

int main(void) {
  if (sc_cuda_device_count() == 0) {
    printf("no CUDA device: GPU kernel tests skipped\n");
    return GPU_TEST_SKIP;
  }
  gt_init_seed();
  if (sc_kernels_cuda_create(&G, 0, NULL) != 0 || sc_kernels_cpu_create(&C, 8) != 0) {
    fprintf(stderr, "cannot create the kernel contexts\n");
    return 1;
  }
  RUN_CASE(case_memory);
  RUN_CASE(case_gemm);
  RUN_CASE(case_linears);
  RUN_CASE(case_elementwise);
  RUN_CASE(case_checkpoint_ops);
  RUN_CASE(case_ropes);
  RUN_CASE(case_rmsnorms);
  RUN_CASE(case_gather);
  RUN_CASE(case_kv_write);
  RUN_CASE(case_fp8_index_rows);
  RUN_CASE(case_indexer);
  RUN_CASE(case_indexer_invariance);
  RUN_CASE(case_cache_keys);
  RUN_CASE(case_topk_merge);
  RUN_CASE(case_topk_maps);
  RUN_CASE(case_attention);
  RUN_CASE(case_attention_roles);
  RUN_CASE(case_attention_batch_invariance);
  RUN_CASE(case_attention_head_groups);
  RUN_CASE(case_lse);
  RUN_CASE(case_greedy);
  RUN_CASE(case_errors);
  RUN_CASE(case_draw);
  RUN_CASE(case_notify);
  RUN_CASE(case_notify_beside_stream);
  RUN_CASE(case_stamps);
  RUN_CASE(case_device_fault);
  RUN_CASE(case_device_fault_seen_before_notify);
  sc_kernels_destroy(G);
  sc_kernels_destroy(C);
  printf("%s: %d failure(s)\n", gt_failures ? "FAILED" : "PASSED", gt_failures);
  return gt_failures ? 1 : 0;
}
