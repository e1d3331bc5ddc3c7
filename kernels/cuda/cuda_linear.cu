/* cuda_linear.cu - the linears op (kernels.h, sc_linears) for the few rows of a decode
 * step: one kernel over all the parts that read the same input.
 *
 * Why. A decode step of a small model is some 90 kernels, 25 of them cuBLAS products of
 * 1-4 rows (gemv), each costing its launch and a few microseconds more than its bytes
 * (default model, one H200: 3.2 us a gemv; bench/gpu-step.md). The projections of one
 * normed row (wq_a, wkv_a and the indexer's wk and weights; wq_b and the indexer's wq;
 * w1 and w3) run here as one launch each, SwiGLU folded into w1/w3's, and every launch
 * takes part in programmatic dependent launch, which cuBLAS's do not.
 *
 * Shape. A warp takes R output rows (of any parts: a unit is one row of one part, or of
 * both parts when gated) for every x row. The block stages x through shared memory in
 * chunks of LIN_KC columns; each lane reads W's float4 number lane, lane + 32, ... of each
 * of its rows (once, for all x rows) and keeps one f32 sum per (row, x row).
 *
 * Order of every sum, whatever the row count, parts, R or grid: lane l adds
 * w[4g + c] x[4g + c] for g = l, l + 32, l + 64, ... (g ascending, c = 0..3) with fmaf,
 * then the 32 lanes' sums meet in an xor butterfly (16, 8, 4, 2, 1). So a row's output
 * depends on that row of x alone: a decode token's projections are bit-identical in a
 * batch of 1 or 8 and on every rank, as long as the kernel takes the op (up to 8 rows;
 * cuBLAS, which takes more, picks its kernel by the row count). Then
 * alpha times the sum, as gemm's alpha; gated: g / (1 + exp(-g)) * u, as k_swiglu.
 *
 * What it takes: rows <= LIN_ROWS_MAX, k a multiple of 4, x and every W 16-byte aligned
 * with leading dimensions in whole float4s. Anything else goes to cuBLAS part by part
 * (kernels_composed.c), as do prefill steps, whose many rows want a real GEMM. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/kernels_composed.h"

#define LIN_THREADS 256
#define LIN_WARPS (LIN_THREADS / 32)
#define LIN_ROWS_MAX 8
#define LIN_KC 1024 /* x columns staged at a time: 32 KB of shared memory for 8 rows */
static_assert(LIN_KC % 128 == 0, "a chunk is whole rounds of 32 lanes x float4");

/* Where the parts' units begin in the unit numbering, and how many there are. */
typedef struct lin_plan {
  int64_t start[SC_LINEARS_MAX + 1];
  int64_t units;
} lin_plan;

template <int MB, int R, bool GATED>
__global__ void __launch_bounds__(LIN_THREADS)
    k_linears(sc_linears a, lin_plan pl) {
  sc_dev_pdl_enter();
  extern __shared__ float4 xs[]; /* [MB][LIN_KC / 4] */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rows = (int)a.rows;
  const int64_t units = pl.units;
  const int64_t u0 = ((int64_t)blockIdx.x * LIN_WARPS + warp) * R;
  /* each unit's part, by static indices only (a parameter indexed at run time would be
   * copied to local memory) */
  const float4 *wrow[R], *urow[R]; /* urow: gated, the up part's row of the same unit */
  float *orow[R];
  int64_t ldo[R];
  float alpha[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    const int64_t u = u0 + r < units ? u0 + r : units - 1; /* past the end: a copy of the
                                                               last, computed and dropped */
#pragma unroll
    for (int j = 0; j < SC_LINEARS_MAX; j++)
      if (j < a.n_parts && u >= pl.start[j] && u < pl.start[j + 1]) {
        const int64_t n = u - pl.start[j];
        wrow[r] = (const float4 *)(a.part[j].w + n * a.part[j].ld_w);
        orow[r] = a.part[j].out + n;
        ldo[r] = a.part[j].ld_out;
        alpha[r] = a.part[j].alpha;
        if constexpr (GATED) urow[r] = (const float4 *)(a.part[1].w + n * a.part[1].ld_w);
      }
  }
  float acc[R][MB], accu[GATED ? R : 1][MB];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int m = 0; m < MB; m++) {
      acc[r][m] = 0.0f;
      if constexpr (GATED) accu[r][m] = 0.0f;
    }
  const int64_t k4 = a.k / 4, ldx4 = a.ld_x / 4;
  const float4 *x4 = (const float4 *)a.x;
  for (int64_t c0 = 0; c0 < k4; c0 += LIN_KC / 4) {
    const int kc = (int)(k4 - c0 < LIN_KC / 4 ? k4 - c0 : LIN_KC / 4);
    __syncthreads(); /* the chunk before is read */
    for (int i = threadIdx.x; i < MB * kc; i += LIN_THREADS) {
      const int m = i / kc, c = i - m * kc;
      xs[m * (LIN_KC / 4) + c] = m < rows ? x4[m * ldx4 + c0 + c] : make_float4(0, 0, 0, 0);
    }
    __syncthreads();
#pragma unroll 4
    for (int c = lane; c < kc; c += 32) {
      float4 w[R], wu[GATED ? R : 1];
#pragma unroll
      for (int r = 0; r < R; r++) {
        w[r] = __ldg(wrow[r] + c0 + c);
        if constexpr (GATED) wu[r] = __ldg(urow[r] + c0 + c);
      }
#pragma unroll
      for (int m = 0; m < MB; m++) {
        const float4 x = xs[m * (LIN_KC / 4) + c];
#pragma unroll
        for (int r = 0; r < R; r++) {
          acc[r][m] = fmaf(w[r].x, x.x, acc[r][m]);
          acc[r][m] = fmaf(w[r].y, x.y, acc[r][m]);
          acc[r][m] = fmaf(w[r].z, x.z, acc[r][m]);
          acc[r][m] = fmaf(w[r].w, x.w, acc[r][m]);
          if constexpr (GATED) {
            accu[r][m] = fmaf(wu[r].x, x.x, accu[r][m]);
            accu[r][m] = fmaf(wu[r].y, x.y, accu[r][m]);
            accu[r][m] = fmaf(wu[r].z, x.z, accu[r][m]);
            accu[r][m] = fmaf(wu[r].w, x.w, accu[r][m]);
          }
        }
      }
    }
  }
  /* a + b == b + a in IEEE arithmetic, so every lane ends with the same sums */
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int m = 0; m < MB; m++) {
        acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);
        if constexpr (GATED) accu[r][m] += __shfl_xor_sync(0xffffffffu, accu[r][m], off);
      }
  /* lane m writes x row m's outputs */
#pragma unroll
  for (int r = 0; r < R; r++) {
    if (u0 + r >= units) break;
#pragma unroll
    for (int m = 0; m < MB; m++) {
      if (lane != m || m >= rows) continue;
      float v = alpha[r] * acc[r][m];
      if constexpr (GATED) {
        const float u = a.part[1].alpha * accu[r][m];
        v = v / (1.0f + expf(-v)) * u;
      }
      orow[r][m * ldo[r]] = v;
    }
  }
}

typedef void (*lin_kernel)(sc_linears, lin_plan);

template <int MB, bool GATED>
static lin_kernel lin_pick_r(int r) {
  return r == 4 ? k_linears<MB, 4, GATED> : k_linears<MB, 1, GATED>;
}

template <bool GATED>
static lin_kernel lin_pick(int mb, int r) {
  switch (mb) {
  case 1: return lin_pick_r<1, GATED>(r);
  case 2: return lin_pick_r<2, GATED>(r);
  case 4: return lin_pick_r<4, GATED>(r);
  default: return lin_pick_r<8, GATED>(r);
  }
}

static bool aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }

/* Whether the kernel takes a (see the top). */
static bool lin_fits(const sc_linears *a) {
  if (a->rows > LIN_ROWS_MAX || a->k % 4 != 0 || a->ld_x % 4 != 0 || !aligned16(a->x))
    return false;
  for (int j = 0; j < a->n_parts; j++)
    if (a->part[j].ld_w % 4 != 0 || !aligned16(a->part[j].w)) return false;
  return true;
}

extern "C" int sc_kcuda_linears(sc_kernels *k, const sc_linears *a) {
  SC_KCHECK(sc_kcheck_linears(a));
  if (!lin_fits(a) || a->k == 0) return sc_kernels_linears_by_gemm(k, a);
  sc_kcuda *c = sc_kcuda_of(k);
  lin_plan pl = {};
  const int parts = a->gated ? 1 : a->n_parts; /* gated: a unit is a row of both */
  for (int j = 0; j < parts; j++) pl.start[j + 1] = pl.start[j] + a->part[j].n;
  for (int j = parts; j < a->n_parts; j++) pl.start[j + 1] = pl.start[parts];
  sc_linears args = *a;
  args.n_parts = parts;
  const int64_t units = pl.units = pl.start[parts];
  /* R rows a warp once there are blocks enough without it (two waves of the GPU's SMs):
   * fewer blocks stage x fewer times. R changes no sum (see the top). */
  const int r = sc_cdiv(units, (int64_t)LIN_WARPS * 4) >= 2 * (int64_t)c->num_sms ? 4 : 1;
  const int mb = a->rows <= 1 ? 1 : a->rows <= 2 ? 2 : a->rows <= 4 ? 4 : 8;
  const lin_kernel fn = a->gated ? lin_pick<true>(mb, r) : lin_pick<false>(mb, r);
  const int64_t blocks = sc_cdiv(units, (int64_t)LIN_WARPS * r); /* (units <= 4 x INT32_MAX) */
  const size_t smem = sizeof(float) * (size_t)mb * LIN_KC;
  sc_kcuda_launch(c, fn, (unsigned)blocks, LIN_THREADS, smem, args, pl);
  return SC_CUDA_CHECK_LAUNCH("linears");
}
