/* cuda_attn.cu - sparse MLA attention over selected KV rows (SPEC.md §7).
 *
 * Two kernels:
 *  - k_attn_mma (bf16 and fp8_ds_mla KV, dc = 512, dr = 64, the real model): one block
 *    per (token, group of 64 heads), 16 warps. All heads of a token share the selected
 *    rows (MLA's latent KV), so a block streams the token's rows in tiles of 32 through
 *    shared memory (cp.async, double buffered) and runs both products on the tensor cores
 *    with mma.sync m16n8k16 bf16: S = Q K^T (64 x 32, k = 576, split over two warps per
 *    output block), an online softmax in f32 over S, then O += P V (64 x 512, k = 32) with
 *    O in registers (64 floats per thread). q is rounded to bf16 once when the block
 *    loads it. fp8 rows are staged raw and dequantized to bf16 in shared memory during
 *    the softmax phase of the tile before. Three block barriers per tile.
 *  - k_attn_warp (f32 KV, other widths, unaligned rows): one warp per (token, head),
 *    f32 on CUDA cores, online softmax. The precise path; also the fallback.
 * Both keep the log-sum-exp in natural log: lse = ln Σ exp(s_j); no selected row gives
 * out 0 and lse -inf. Rows equal to -1 are skipped; other out-of-range rows raise
 * SC_ERANGE (reported at the next sync) and are skipped. */
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"

/* ---- the f32 path: one warp per (token, head) ---- */

#define WARP_DC_MAX 1024
#define WARP_Q_MAX 2048

__global__ void __launch_bounds__(256)
    k_attn_warp(sc_attn_args a, int heads_per_block, int64_t kv_step, int *flag) {
  extern __shared__ float q_s[]; /* [8 warps][width] */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int groups = (a.n_heads + heads_per_block - 1) / heads_per_block;
  const int64_t t = blockIdx.x / groups;
  const int h = (int)(blockIdx.x % groups) * heads_per_block + warp;
  if (h >= a.n_heads) return;
  const int width = a.dc + a.dr;
  float *q = q_s + warp * width;
  for (int x = lane; x < width; x += 32)
    q[x] = a.q[t * a.ld_q + (int64_t)h * width + x];
  __syncwarp();
  float o[WARP_DC_MAX / 32];
#pragma unroll
  for (int i = 0; i < WARP_DC_MAX / 32; i++) o[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int32_t *sel = a.sel + t * a.ld_sel;
  for (int j = 0; j < a.topk; j++) {
    const int32_t r = sel[j];
    if (r == -1) continue;
    if (r < 0 || r >= a.kv.rows) {
      if (lane == 0) sc_dev_raise(flag, SC_ERANGE);
      continue;
    }
    const char *row = (const char *)a.kv.data + (int64_t)r * kv_step;
    float dot = 0.0f;
    for (int x = lane; x < width; x += 32) dot = fmaf(q[x], sc_dev_load(row, a.kv.fmt, x), dot);
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float s = dot * a.scale;
    const float m_new = fmaxf(m, s);
    const float alpha = expf(m - m_new); /* m = -inf the first time: 0 */
    const float p = expf(s - m_new);
    l = l * alpha + p;
#pragma unroll
    for (int i = 0; i < WARP_DC_MAX / 32; i++) {
      const int x = lane + 32 * i;
      if (x < a.dc) o[i] = o[i] * alpha + p * sc_dev_load(row, a.kv.fmt, x);
    }
    m = m_new;
  }
  float *out = a.out + t * a.ld_out + (int64_t)h * a.dc;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int i = 0; i < WARP_DC_MAX / 32; i++) {
    const int x = lane + 32 * i;
    if (x < a.dc) out[x] = o[i] * inv;
  }
  if (lane == 0) a.lse[t * a.ld_lse + h] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/* ---- the tensor-core path ---- */

#define MMA_DC 512
#define MMA_D 576
#define MMA_BM 64            /* heads per block */
#define MMA_BN 32            /* KV rows per tile */
#define MMA_LDS 584          /* bf16 row stride in shared memory: 1168 bytes, conflict free */
#define MMA_SLD 36           /* f32 stride of the S tile */
#define MMA_PLD 40           /* bf16 stride of the P tile (80 bytes) */
/* 16 warps (512 threads, <= 128 registers each): at one block per SM the latency of the
 * dependent ldmatrix -> mma chains needs more than the 2 warps per scheduler that 8 warps
 * give (ncu, 2026-11-29: 0.35 eligible warps per scheduler, 27% issue-slot use). */
#ifndef SC_ATTN_WARPS
#define SC_ATTN_WARPS 16
#endif
#define MMA_THREADS (32 * SC_ATTN_WARPS)
#define MMA_KS (SC_ATTN_WARPS / 8)          /* S phase: warps splitting k = 576 */
#define MMA_KSTEPS (MMA_D / 16 / MMA_KS)    /* k16 steps per S-phase warp */
#define MMA_PV_COLS (MMA_DC * 2 / SC_ATTN_WARPS) /* PV phase: output columns per warp */
#define MMA_NB (MMA_PV_COLS / 8)            /* n8 blocks per PV-phase warp */
#define MMA_TPR (MMA_THREADS / MMA_BM)      /* softmax threads per row */
#define MMA_CPT (MMA_BN / MMA_TPR)          /* softmax columns per thread */

struct mma_smem {
  uint16_t q[MMA_BM * MMA_LDS];
  uint16_t kv[2][MMA_BN * MMA_LDS];
  float s[MMA_KS][MMA_BM * MMA_SLD]; /* partial S of each k slice */
  uint16_t p[MMA_BM * MMA_PLD];
  float m[MMA_BM], l[MMA_BM], alpha[MMA_BM];
  int valid[2][MMA_BN];
  alignas(16) uint8_t raw[MMA_BN * SC_KFP8_DS_MLA_ROW_BYTES]; /* fp8 staging */
};

/* Two floats -> packed bf16x2 (low half = a), one cvt.rn.bf16x2.f32: round to nearest
 * even, the same bits as sc_dev_to_bf16 for every non-NaN value (NaN stays NaN). */
__device__ inline uint32_t pack_bf16x2(float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *(const uint32_t *)&v;
}

__device__ inline uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ inline void ldsm_x4(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

__device__ inline void ldsm_x4_t(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

__device__ inline void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline void cp_async16(void *dst, const void *src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)),
               "l"(src), "r"(pred ? 16 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ inline void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

/* Queues tile `tile` of the token's selected rows into stage `st` (bf16 rows directly,
 * fp8 rows into the raw staging area), zero-filling invalid rows. */
template <bool FP8>
__device__ inline void load_tile(mma_smem &sm, const sc_attn_args &a, const int32_t *sel,
                                 int tile, int st, int64_t kv_step, int *flag) {
  const int chunks = FP8 ? SC_KFP8_DS_MLA_ROW_BYTES / 16 : MMA_D * 2 / 16; /* 41 or 72 */
  for (int c = threadIdx.x; c < MMA_BN * chunks; c += MMA_THREADS) {
    const int row = c / chunks, part = c % chunks;
    const int j = tile * MMA_BN + row;
    const int32_t r = j < a.topk ? sel[j] : -1;
    const bool ok = r >= 0 && r < a.kv.rows;
    if (part == 0) {
      sm.valid[st][row] = ok;
      if (!ok && r != -1) sc_dev_raise(flag, SC_ERANGE);
    }
    const char *src = (const char *)a.kv.data + (ok ? (int64_t)r * kv_step + part * 16 : 0);
    void *dst = FP8 ? (void *)(sm.raw + row * SC_KFP8_DS_MLA_ROW_BYTES + part * 16)
                    : (void *)(sm.kv[st] + row * MMA_LDS + part * 8);
    cp_async16(dst, src, ok);
  }
  cp_async_commit();
}

/* fp8 staging -> bf16 tile: value = e4m3 * scale of its 128-value tile. */
__device__ inline void convert_fp8(mma_smem &sm, int st) {
  for (int c = threadIdx.x; c < MMA_BN * 72; c += MMA_THREADS) {
    const int row = c / 72, part = c % 72;
    const uint8_t *raw = sm.raw + row * SC_KFP8_DS_MLA_ROW_BYTES;
    uint16_t *dst = sm.kv[st] + row * MMA_LDS + part * 8;
    if (part < 64) {
      const float scale = *(const float *)(raw + SC_FP8_SCALE_OFF + 4 * (part / 16));
      const uint2 v = *(const uint2 *)(raw + part * 8);
      const uint32_t w[2] = {v.x, v.y};
      uint32_t outw[4];
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w[i] & 0xffff),
                                                          __NV_E4M3);
        const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w[i] >> 16),
                                                          __NV_E4M3);
        const float2 flo = __half22float2(*(const __half2 *)&lo);
        const float2 fhi = __half22float2(*(const __half2 *)&hi);
        outw[2 * i] = pack_bf16x2(flo.x * scale, flo.y * scale);
        outw[2 * i + 1] = pack_bf16x2(fhi.x * scale, fhi.y * scale);
      }
      *(uint4 *)dst = make_uint4(outw[0], outw[1], outw[2], outw[3]);
    } else {
      *(uint4 *)dst = *(const uint4 *)(raw + SC_FP8_ROPE_OFF + (part - 64) * 16);
    }
  }
}

template <bool FP8>
__global__ void __launch_bounds__(MMA_THREADS, 1)
    k_attn_mma(sc_attn_args a, int64_t kv_step, int *flag) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  mma_smem &sm = *(mma_smem *)smem_raw;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int groups = (a.n_heads + MMA_BM - 1) / MMA_BM;
  const int64_t t = blockIdx.x / groups;
  const int h0 = (int)(blockIdx.x % groups) * MMA_BM;
  const int32_t *sel = a.sel + t * a.ld_sel;
  const int n_tiles = (a.topk + MMA_BN - 1) / MMA_BN;
  const float sl2 = a.scale * 1.4426950408889634f; /* scores in log2 units */

  if (n_tiles > 0) load_tile<FP8>(sm, a, sel, 0, 0, kv_step, flag);
  /* q (f32) -> bf16 rows; heads past n_heads are zero rows whose output is dropped */
  for (int i = threadIdx.x; i < MMA_BM * (MMA_D / 4); i += MMA_THREADS) {
    const int row = i / (MMA_D / 4), c4 = i % (MMA_D / 4);
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (h0 + row < a.n_heads)
      v = *(const float4 *)(a.q + t * a.ld_q + (int64_t)(h0 + row) * MMA_D + c4 * 4);
    uint2 pk;
    pk.x = (uint32_t)sc_f32_to_bf16(v.x) | ((uint32_t)sc_f32_to_bf16(v.y) << 16);
    pk.y = (uint32_t)sc_f32_to_bf16(v.z) | ((uint32_t)sc_f32_to_bf16(v.w) << 16);
    *(uint2 *)(sm.q + row * MMA_LDS + c4 * 4) = pk;
  }
  if (threadIdx.x < MMA_BM) {
    sm.m[threadIdx.x] = -INFINITY;
    sm.l[threadIdx.x] = 0.0f;
  }
  cp_async_wait_all();
  __syncthreads();
  if (FP8 && n_tiles > 0) {
    convert_fp8(sm, 0);
    __syncthreads();
  }

  float o[2][MMA_NB][4];
#pragma unroll
  for (int mb = 0; mb < 2; mb++)
#pragma unroll
    for (int nb = 0; nb < MMA_NB; nb++)
#pragma unroll
      for (int e = 0; e < 4; e++) o[mb][nb][e] = 0.0f;

  const int wm = warp & 3, wn = (warp >> 2) & 1, wk = warp >> 3; /* S phase */
  const int wm2 = warp & 1, wn2 = warp >> 1; /* PV phase: 32 rows x MMA_PV_COLS columns */

  for (int tile = 0; tile < n_tiles; tile++) {
    const int st = tile & 1;
    if (tile + 1 < n_tiles) load_tile<FP8>(sm, a, sel, tile + 1, st ^ 1, kv_step, flag);

    /* S = Q K^T: warp (wm, wn, wk) computes rows 16 wm.., columns 16 wn.. over its k
     * slice wk; the slices are summed by the softmax */
    {
      float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
      const int k0 = wk * MMA_KSTEPS * 16;
      const uint16_t *qa = sm.q + (wm * 16 + (lane & 15)) * MMA_LDS + (lane >> 4) * 8 + k0;
      const uint16_t *kb = sm.kv[st] + (wn * 16 + (lane & 7) + ((lane >> 4) << 3)) * MMA_LDS +
                           ((lane >> 3) & 1) * 8 + k0;
#pragma unroll 6
      for (int kk = 0; kk < MMA_KSTEPS; kk++) {
        uint32_t af[4], bf[4];
        ldsm_x4(af, qa + kk * 16);
        ldsm_x4(bf, kb + kk * 16);
        mma_bf16(s[0], af, bf[0], bf[1]);
        mma_bf16(s[1], af, bf[2], bf[3]);
      }
#pragma unroll
      for (int nb = 0; nb < 2; nb++) {
        const int col = wn * 16 + nb * 8 + 2 * tq;
        float *r0 = sm.s[wk] + (wm * 16 + g) * MMA_SLD + col;
        float *r1 = r0 + 8 * MMA_SLD;
        *(float2 *)r0 = make_float2(s[nb][0], s[nb][1]);
        *(float2 *)r1 = make_float2(s[nb][2], s[nb][3]);
      }
    }
    /* fp8: the raw rows of the next tile (queued at the top of this iteration) must have
     * landed before the softmax phase dequantizes them */
    if (FP8) cp_async_wait_all();
    __syncthreads();

    /* online softmax: MMA_TPR threads per row, MMA_CPT columns each; scores in log2
     * units, invalid rows -inf */
    {
      const int row = threadIdx.x / MMA_TPR, part = threadIdx.x % MMA_TPR;
      const int c0 = part * MMA_CPT;
      float v[MMA_CPT], mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < MMA_CPT; i++) {
        float x = 0.0f;
#pragma unroll
        for (int ks = 0; ks < MMA_KS; ks++) x += sm.s[ks][row * MMA_SLD + c0 + i];
        v[i] = sm.valid[st][c0 + i] ? x * sl2 : -INFINITY;
        mx = fmaxf(mx, v[i]);
      }
#pragma unroll
      for (int off = 1; off < MMA_TPR; off <<= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_old = sm.m[row];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      uint32_t pk[MMA_CPT / 2];
#pragma unroll
      for (int i = 0; i < MMA_CPT; i += 2) {
        const float p0 = m_new == -INFINITY ? 0.0f : exp2f(v[i] - m_new);
        const float p1 = m_new == -INFINITY ? 0.0f : exp2f(v[i + 1] - m_new);
        sum += p0 + p1;
        pk[i / 2] = pack_bf16x2(p0, p1);
      }
#if MMA_CPT == 8
      *(uint4 *)(sm.p + row * MMA_PLD + c0) = make_uint4(pk[0], pk[1], pk[2], pk[3]);
#else
      *(uint2 *)(sm.p + row * MMA_PLD + c0) = make_uint2(pk[0], pk[1]);
#endif
#pragma unroll
      for (int off = 1; off < MMA_TPR; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      __syncwarp();
      if (part == 0) {
        const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m_old - m_new);
        sm.alpha[row] = alpha;
        sm.l[row] = sm.l[row] * alpha + sum;
        sm.m[row] = m_new;
      }
    }
    /* fp8: dequantize the next tile beside the softmax (kv[st ^ 1] was last read by the
     * previous tile's P V, before the end-of-tile barrier), saving a barrier round */
    if (FP8 && tile + 1 < n_tiles) convert_fp8(sm, st ^ 1);
    __syncthreads();

    /* O = O * alpha + P V for this warp's 32 rows x MMA_PV_COLS columns */
    {
#pragma unroll
      for (int mb = 0; mb < 2; mb++) {
        const float al0 = sm.alpha[wm2 * 32 + mb * 16 + g];
        const float al1 = sm.alpha[wm2 * 32 + mb * 16 + g + 8];
#pragma unroll
        for (int nb = 0; nb < MMA_NB; nb++) {
          o[mb][nb][0] *= al0;
          o[mb][nb][1] *= al0;
          o[mb][nb][2] *= al1;
          o[mb][nb][3] *= al1;
        }
      }
#pragma unroll
      for (int ks = 0; ks < MMA_BN / 16; ks++) {
        uint32_t pa[2][4];
#pragma unroll
        for (int mb = 0; mb < 2; mb++)
          ldsm_x4(pa[mb], sm.p + (wm2 * 32 + mb * 16 + (lane & 15)) * MMA_PLD + ks * 16 +
                              (lane >> 4) * 8);
        const uint16_t *vb = sm.kv[st] +
                             (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * MMA_LDS +
                             wn2 * MMA_PV_COLS + (lane >> 4) * 8;
#pragma unroll
        for (int np = 0; np < MMA_NB / 2; np++) {
          uint32_t bf[4];
          ldsm_x4_t(bf, vb + np * 16);
#pragma unroll
          for (int mb = 0; mb < 2; mb++) {
            mma_bf16(o[mb][2 * np], pa[mb], bf[0], bf[1]);
            mma_bf16(o[mb][2 * np + 1], pa[mb], bf[2], bf[3]);
          }
        }
      }
    }
    cp_async_wait_all();
    __syncthreads();
  }

  /* out = O / l; lse = (m + log2 l) ln 2 */
#pragma unroll
  for (int mb = 0; mb < 2; mb++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int row = wm2 * 32 + mb * 16 + g + half * 8;
      const int h = h0 + row;
      if (h >= a.n_heads) continue;
      const float l = sm.l[row];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      float *out = a.out + t * a.ld_out + (int64_t)h * MMA_DC + wn2 * MMA_PV_COLS + 2 * tq;
#pragma unroll
      for (int nb = 0; nb < MMA_NB; nb++)
        *(float2 *)(out + nb * 8) =
            make_float2(o[mb][nb][2 * half] * inv, o[mb][nb][2 * half + 1] * inv);
    }
  if (threadIdx.x < MMA_BM && h0 + (int)threadIdx.x < a.n_heads) {
    const float l = sm.l[threadIdx.x];
    a.lse[t * a.ld_lse + h0 + threadIdx.x] =
        l > 0.0f ? (sm.m[threadIdx.x] + log2f(l)) * 0.6931471805599453f : -INFINITY;
  }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int sc_kcuda_sparse_attn(sc_kernels *k, const sc_attn_args *a) {
  sc_kcuda *c = sc_kcuda_of(k);
  int rc = sc_kcheck_attn(a, sc_kcuda_check_rows);
  if (rc) return rc < 0 ? rc : 0;
  const int64_t width = (int64_t)a->dc + a->dr;
  const int64_t kv_step = sc_kcuda_row_step(&a->kv);
  const bool fp8 = a->kv.fmt == SC_KFMT_FP8_DS_MLA;
  const bool mma_ok = a->kv.fmt != SC_KFMT_F32 && a->dc == MMA_DC && a->dr == MMA_D - MMA_DC &&
                      aligned16(a->kv.data) && kv_step % 16 == 0 && aligned16(a->q) &&
                      (a->n_tok == 1 || a->ld_q % 4 == 0) && ((uintptr_t)a->out & 7) == 0 &&
                      (a->n_tok == 1 || a->ld_out % 2 == 0);
  if (mma_ok) {
    const int groups = (a->n_heads + MMA_BM - 1) / MMA_BM;
    const int64_t blocks = (int64_t)a->n_tok * groups;
    if (blocks > INT32_MAX) return SC_ERANGE;
    const size_t smem = sizeof(mma_smem);
    void (*const kern)(sc_attn_args, int64_t, int *) = fp8 ? k_attn_mma<true> : k_attn_mma<false>;
    if ((rc = sc_kcuda_err(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)smem),
                           "attn smem")))
      return rc;
    kern<<<(unsigned)blocks, MMA_THREADS, smem, c->stream>>>(*a, kv_step, c->err_flag);
    return SC_CUDA_CHECK_LAUNCH("sparse_attn (tensor cores)");
  }
  if (a->dc > WARP_DC_MAX || width > WARP_Q_MAX) return SC_ENOTSUP;
  const int hpb = 8;
  const int groups = (a->n_heads + hpb - 1) / hpb;
  const int64_t blocks = (int64_t)a->n_tok * groups;
  if (blocks > INT32_MAX) return SC_ERANGE;
  const size_t smem = sizeof(float) * 8 * (size_t)width;
  if ((rc = sc_kcuda_err(cudaFuncSetAttribute(k_attn_warp,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)smem),
                         "attn smem")))
    return rc;
  k_attn_warp<<<(unsigned)blocks, 256, smem, c->stream>>>(*a, hpb, kv_step, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("sparse_attn");
}
