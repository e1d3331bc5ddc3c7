/* cuda_attn_few.cu - sparse MLA attention on the tensor cores for models with few heads
 * (at most 16 over all TP ranks: examples/model-long.json and the default model have 8),
 * over bf16 or fp8_ds_mla KV rows, dc = 512, dr = 64 (SPEC.md §7).
 *
 * Why a kernel of its own: the wgmma kernel computes 64 head rows a block (wgmma's M), so
 * at 8 heads 7/8 of its tensor-core work is padding (30.7 TFLOP/s for model-long's
 * prefill, H200, 2026-12-02), and the split kernel runs on CUDA cores. Here the heads are
 * mma.sync's N dimension (8) and the selected rows its M:
 *  - S^T = K Q^T: a tile of R rows against the block's 8 heads, k = 576 in 36 steps of
 *    m16n8k16; q's B fragments stay in registers for the whole block. R = 64 (decode
 *    tokens): a warp takes 16 rows over all 36 steps; R = 32 (prefill tokens): two warps
 *    take each 16 rows, one the first 18 steps and the other the last 18, and both add
 *    the halves through shared memory (half 0 + half 1: one fixed order).
 *  - an online softmax per head (column of S^T) in log2 units; the 4 warps' tile maxima
 *    and sums meet in shared memory, always added in warp order.
 *  - O^T += V^T P^T: each warp owns 128 of the 512 latent columns (8 m16 tiles, k = the
 *    tile's R rows); V^T comes from the same K tile through ldmatrix.trans, P^T (bf16)
 *    from shared memory.
 * So the work is the model's, with no padding, and a tile of rows loaded once serves all
 * of a token's heads. A row is 1152 bytes and serves 8 heads' 17 kFLOP, so at 8 heads the
 * kernel is about moving rows into shared memory (cp.async), not about the tensor cores.
 * Prefill tokens, most of a long prompt's attention, take 32-row tiles in two stages (the
 * next tile's rows load while one is computed) and two blocks an SM: a 4096-token chunk
 * over 32k rows 1,986-1,990 us against 2,187-2,195 us with one 64-row stage (H100,
 * 2026-12-06), where the same kernel without its loads took 853-860 us and with 43% fewer
 * bytes a row only 11% less: what cost was the loads' latency in a block that waited for
 * each tile before computing it, not bandwidth (bench/long-context.md). Tried before and
 * slower: 8 warps a block splitting a tile's rows (3%); one block an SM with two 64-row
 * stages (62.0 against 66.0 TFLOP/s) or a ring of five 32-row slots (3%; H200,
 * 2026-12-03): at one block an SM 4 warps issue too little.
 *
 * fp8_ds_mla rows (656 bytes where bf16 has 1152: this kernel is about moving rows) land
 * in a staging area of two tiles, which the block dequantizes into its one bf16 tile
 * (value = e4m3 x its 128-value tile's scale, rounded to bf16, as the wgmma kernel's fp8
 * path does) before computing it; the loads run two tiles ahead of the computation.
 *
 * A block takes one token, 8 heads and a span of the token's selected rows: all of them
 * for prefill tokens (the output is written at once), fixed splits of SC_ATTN_FEW_SPLIT
 * rows for decode tokens (a decode step has too few tokens to fill the GPU otherwise),
 * whose partials sc_kcuda_attn_merge combines in split order. Every sum's order depends
 * only on the token's own selected rows and on which of the two it is (decode or
 * prefill, never the batch, the head count of a rank or the layout), so multi-rank runs
 * stay token-identical to one rank (SPEC.md §8; case_attention_batch_invariance).
 * Trailing tiles without a valid row are skipped: such a tile would leave m, l and O
 * unchanged to the bit (its alpha is exactly 1 and its P exactly 0). */
#include <math.h>

#include "kernels/cuda/cuda_attn.cuh"

#define FEW_D 576
#define FEW_DC 512
#define FEW_HEADS 8 /* mma's N: a block's heads */
#define FEW_ROWS 64 /* rows a tile of decode tokens (the most: idx is padded to it) */
#define FEW_ROWS_PREFILL 32
#define FEW_WARPS 4
#define FEW_THREADS (32 * FEW_WARPS)
#define FEW_KSTEPS (FEW_D / 16)
#define FEW_LD 584 /* bf16 stride of a tile row (1168 bytes): the 8 rows an ldmatrix reads
                      fall on 8 different 16-byte bank groups */
#define FEW_PLD 72 /* bf16 stride of a head's P row: conflict-free 32-bit fragment loads */
#define FEW_IDX_MAX SC_KCUDA_TOPK_MAX

/* Two stages of R rows: the next tile loads while one is computed (FP8: two stages of raw
 * rows and one bf16 tile they are dequantized into). Decode tokens: R = 64, one block an
 * SM (a decode step's few blocks; 64 rows against 32 not measured); prefill tokens: R =
 * 32, two blocks an SM (8 warps). */
template <int R, bool FP8> struct few_smem {
  alignas(128) uint16_t kv[FP8 ? 1 : 2][R * FEW_LD];
  alignas(16) uint8_t raw[FP8 ? 2 : 1][FP8 ? R * SC_KFP8_DS_MLA_ROW_BYTES : 16];
  alignas(16) uint16_t q[FEW_HEADS * FEW_LD];
  alignas(16) uint16_t p[FEW_HEADS * FEW_PLD]; /* P^T: [head][row of the tile] */
  float red_max[FEW_WARPS][FEW_HEADS], red_sum[FEW_WARPS][FEW_HEADS];
  /* R = 32: each k half's partial S^T of each row block, [half][row block][lane][4] */
  float part[R < 64 ? 2 : 1][R < 64 ? 2 : 1][R < 64 ? 32 : 1][4];
  int last; /* the span's last valid row, -1: none */
  /* followed by int32 idx[the span's rows, padded to whole tiles] */
};
#define FEW_SMEM_MAX (sizeof(few_smem<FEW_ROWS, true>) + sizeof(int32_t) * FEW_IDX_MAX)
static_assert(sizeof(few_smem<FEW_ROWS, true>) >= sizeof(few_smem<FEW_ROWS, false>),
              "FEW_SMEM_MAX is the largest launch");
static_assert(FEW_SMEM_MAX <= SC_KCUDA_SMEM_MAX, "the few-heads tiles exceed shared memory");
static_assert(FEW_IDX_MAX / SC_ATTN_FEW_SPLIT <= SC_ATTN_SPLITS_MAX,
              "a decode token's splits exceed what the merge takes");

/* Queues the rows idx[0 .. R) (-1: a zero row) into a slot: a warp per row at a time,
 * its lanes on the row's consecutive 16-byte parts (lane, lane + 32, ..): a bf16 row's 72
 * into a tile (rows FEW_LD apart), or an fp8_ds_mla row's 41 into a staging slot (rows
 * 656 bytes apart). Address arithmetic is per row, not per part: the kernel's warps issue
 * every instruction of the loads themselves, and an earlier version that computed each
 * part's row and offset on its own spent more issue slots loading a tile than computing
 * it (ncu, H200, 2026-12-03: one instruction per 3.45 cycles a warp). */
template <int R, bool FP8>
__device__ inline void few_load(void *slot, const int32_t *idx, const sc_attn_args &a,
                                int64_t kv_step) {
  constexpr int PARTS = FP8 ? SC_KFP8_DS_MLA_ROW_BYTES / 16 : FEW_D / 8;
  constexpr int ROW_BYTES = FP8 ? SC_KFP8_DS_MLA_ROW_BYTES : 2 * FEW_LD;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll 4
  for (int row = warp; row < R; row += FEW_WARPS) {
    const int32_t r = idx[row];
    const char *src = (const char *)a.kv.data + (r >= 0 ? (int64_t)r * kv_step : 0) + 16 * lane;
    char *dst = (char *)slot + row * ROW_BYTES + 16 * lane;
#pragma unroll
    for (int k = 0; k < (PARTS + 31) / 32; k++)
      if (32 * k + lane < PARTS) cp_async16(dst + 512 * k, src + 512 * k, r >= 0);
  }
  cp_async_commit();
}

/* A staging slot's R fp8_ds_mla rows -> the bf16 tile: a warp per row, each lane eight
 * e4m3 values twice (values 8 lane and 8 lane + 256: their tiles' scales) and lanes 0-7
 * eight rope values as they are. A zero-filled row (no row selected) gives zeros. Four
 * rows' loads are issued before any of them is converted: one row at a time, each
 * conversion waited for its own shared-memory loads (ncu, H100, 2026-12-06: a short
 * scoreboard the top stall, the block 45% slower than over bf16 rows); batched,
 * model-long's 4096-token chunk took 2,588 us where it took 2,883 (H100, 2026-12-06,
 * bench/long-context.md). */
template <int R>
__device__ inline void few_dequant(uint16_t *tile, const uint8_t *slot) {
  constexpr int BATCH = 4; /* rows a warp loads before converting */
  static_assert(R % (FEW_WARPS * BATCH) == 0, "whole batches of rows");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool rope = lane < SC_KFP8_DS_MLA_ROPE / 8;
  for (int row0 = warp; row0 < R; row0 += FEW_WARPS * BATCH) {
    uint2 v[BATCH][2];
    float sc[BATCH][2];
    uint4 rv[BATCH];
#pragma unroll
    for (int b = 0; b < BATCH; b++) {
      const uint8_t *src = slot + (row0 + b * FEW_WARPS) * SC_KFP8_DS_MLA_ROW_BYTES;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int u = lane + 32 * h; /* values 8 u .. 8 u + 7 */
        v[b][h] = *(const uint2 *)(src + 8 * u);
        sc[b][h] = *(const float *)(src + SC_KFP8_DS_MLA_SCALE_AT +
                                    4 * (8 * u / SC_KFP8_DS_MLA_TILE));
      }
      if (rope) rv[b] = *(const uint4 *)(src + SC_KFP8_DS_MLA_ROPE_AT + 16 * lane);
    }
#pragma unroll
    for (int b = 0; b < BATCH; b++) {
      uint16_t *dst = tile + (row0 + b * FEW_WARPS) * FEW_LD;
#pragma unroll
      for (int h = 0; h < 2; h++)
        *(uint4 *)(dst + 8 * (lane + 32 * h)) = e4m3x8_to_bf16x8(v[b][h], sc[b][h]);
      if (rope) *(uint4 *)(dst + FEW_DC + 8 * lane) = rv[b];
    }
  }
}

__device__ inline float few_warp_max(float v) {
#pragma unroll
  for (int off = 4; off < 32; off <<= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ inline float few_warp_sum(float v) {
#pragma unroll
  for (int off = 4; off < 32; off <<= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

/* blockIdx.x = (token of the chunk, head group, split). n_splits 1: the output and LSE are
 * written; otherwise the split's partials (cuda_attn.cuh). */
template <int R, bool FP8>
__global__ void __launch_bounds__(FEW_THREADS, R < FEW_ROWS ? 2 : 1)
    k_attn_few(sc_attn_args a, int span, int n_splits, int64_t kv_step, int64_t t0,
               float *part_o, float2 *part_ml, int *flag) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(128) unsigned char few_raw[];
  few_smem<R, FP8> &sm = *(few_smem<R, FP8> *)few_raw;
  int32_t *idx = (int32_t *)(few_raw + sizeof(few_smem<R, FP8>));
  /* R = 64: warp w takes rows 16w.. of S over every k step; R = 32: rows 16 (w % 2)..
   * over k steps 18 (w / 2).., the halves added through shared memory (half 0 + half 1) */
  constexpr int RB = R / 16, KS = FEW_WARPS / RB, KSTEPS_W = FEW_KSTEPS / KS;
  static_assert(RB * KS == FEW_WARPS && KSTEPS_W * KS == FEW_KSTEPS, "the warps cover S");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c = lane & 3; /* mma fragment row and column pair */
  const int groups = (a.n_heads + FEW_HEADS - 1) / FEW_HEADS;
  const int64_t tl = blockIdx.x / ((int64_t)groups * n_splits);
  const int hg = (int)(blockIdx.x / n_splits % groups), s = (int)(blockIdx.x % n_splits);
  const int64_t t = t0 + tl;
  const int h0 = hg * FEW_HEADS;
  const int nh = a.n_heads - h0 < FEW_HEADS ? a.n_heads - h0 : FEW_HEADS;
  const int j0 = s * span, nj = a.topk - j0 < span ? a.topk - j0 : span;
  const float sl2 = a.scale * 1.4426950408889634f; /* scores in log2 units */

  /* the span's rows (checked once), q rounded to bf16 */
  if (threadIdx.x == 0) sm.last = -1;
  __syncthreads();
  const int32_t *sel = a.sel + t * a.ld_sel + j0;
  const int padded = (nj + R - 1) / R * R;
  int last = -1;
  /* (the selection 8 loads a thread at a time, q in one batch of 18 pairs: with one load
   * an iteration, which the compiler cannot move past the shared-memory stores it must
   * assume alias, a block paid a global load's latency 16 + 18 times before its first
   * tile, most of a 128-row decode split's time) */
  for (int jb = threadIdx.x; jb < padded; jb += 8 * FEW_THREADS) {
    int32_t rows[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const int j = jb + k * FEW_THREADS;
      rows[k] = j < nj ? sel[j] : -1;
    }
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const int j = jb + k * FEW_THREADS;
      int32_t r = rows[k];
      if (j >= padded) break;
      if (r != -1 && (r < 0 || r >= a.kv.rows)) {
        sc_dev_raise(flag, SC_ERANGE);
        r = -1;
      }
      idx[j] = r;
      if (r >= 0) last = j;
    }
  }
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) last = max(last, __shfl_xor_sync(0xffffffffu, last, off));
  if (lane == 0 && last >= 0) atomicMax(&sm.last, last);
  const float *q = a.q + t * a.ld_q + (int64_t)h0 * FEW_D;
  constexpr int Q_ITER = FEW_HEADS * (FEW_D / 2) / FEW_THREADS;
  static_assert(Q_ITER * FEW_THREADS == FEW_HEADS * (FEW_D / 2), "whole steps a thread");
  float2 qv[Q_ITER];
#pragma unroll
  for (int k = 0; k < Q_ITER; k++) {
    const int i = threadIdx.x + k * FEW_THREADS, hh = i / (FEW_D / 2), x = 2 * (i % (FEW_D / 2));
    qv[k] = hh < nh ? make_float2(q[hh * FEW_D + x], q[hh * FEW_D + x + 1]) : make_float2(0, 0);
  }
#pragma unroll
  for (int k = 0; k < Q_ITER; k++) {
    const int i = threadIdx.x + k * FEW_THREADS, hh = i / (FEW_D / 2), x = 2 * (i % (FEW_D / 2));
    *(uint32_t *)(sm.q + hh * FEW_LD + x) = pack_bf16x2(qv[k].x, qv[k].y);
  }
  __syncthreads();
  const int n_tiles = (sm.last + R) / R;
  if constexpr (FP8) {
    if (n_tiles > 0) few_load<R, true>(sm.raw[0], idx, a, kv_step);
    if (n_tiles > 1) few_load<R, true>(sm.raw[1], idx + R, a, kv_step);
  } else if (n_tiles > 0) {
    few_load<R, false>(sm.kv[0], idx, a, kv_step);
  }
  /* q^T's B fragments of the warp's k steps: k = 2c, 2c + 1 (+ 8) of each, n = head g */
  const int rb = warp % RB, kh = warp / RB; /* the warp's row block and k part */
  uint32_t qf[KSTEPS_W][2];
#pragma unroll
  for (int k = 0; k < KSTEPS_W; k++) {
    const int ks = kh * KSTEPS_W + k;
    qf[k][0] = *(const uint32_t *)(sm.q + g * FEW_LD + 16 * ks + 2 * c);
    qf[k][1] = *(const uint32_t *)(sm.q + g * FEW_LD + 16 * ks + 8 + 2 * c);
  }

  /* O^T: latent columns 128 warp + 16 mt + g (+ 8), heads 2c, 2c + 1 (the D fragment);
   * m, l: heads 2c, 2c + 1 (every warp keeps the same) */
  float o[8][4];
#pragma unroll
  for (int mt = 0; mt < 8; mt++) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int r_lo = 16 * rb + g; /* this thread's rows of S^T: r_lo, r_lo + 8 */
  for (int tt = 0; tt < n_tiles; tt++) {
    if constexpr (FP8) { /* tile tt + 1 stays in flight; tile tt + 2 into the slot tt leaves */
      if (tt + 1 < n_tiles) cp_async_wait_one();
      else cp_async_wait_all();
      __syncthreads();
      few_dequant<R>(sm.kv[0], sm.raw[tt & 1]);
      __syncthreads();
      if (tt + 2 < n_tiles) few_load<R, true>(sm.raw[tt & 1], idx + (tt + 2) * R, a, kv_step);
    } else {
      if (tt + 1 < n_tiles) { /* into the slot the last barrier freed */
        few_load<R, false>(sm.kv[(tt + 1) & 1], idx + (tt + 1) * R, a, kv_step);
        cp_async_wait_one();
      } else {
        cp_async_wait_all();
      }
      __syncthreads();
    }
    const uint16_t *kv = sm.kv[FP8 ? 0 : tt & 1];
    /* S^T of the warp's 16 rows over its k steps, in four independent chains (steps i,
     * i + 4, ..) added in a fixed order, so the tensor cores' latency overlaps */
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    const uint16_t *arow =
        kv + (16 * rb + (lane & 15)) * FEW_LD + 8 * (lane >> 4) + 16 * kh * KSTEPS_W;
#pragma unroll
    for (int k = 0; k < KSTEPS_W; k++) {
      uint32_t af[4];
      ldsm_x4(af, arow + 16 * k);
      mma_bf16_16816(acc[k & 3], af, qf[k]);
    }
    const int32_t *ti = idx + tt * R;
    const bool v_lo = ti[r_lo] >= 0, v_hi = ti[r_lo + 8] >= 0;
    float sv[4];
    float dot[4];
#pragma unroll
    for (int e = 0; e < 4; e++) dot[e] = (acc[0][e] + acc[1][e]) + (acc[2][e] + acc[3][e]);
    if constexpr (KS == 2) { /* the k halves meet: half 0 + half 1, in both warps of a pair */
      *(float4 *)sm.part[kh][rb][lane] = make_float4(dot[0], dot[1], dot[2], dot[3]);
      __syncthreads();
      const float4 h0 = *(const float4 *)sm.part[0][rb][lane];
      const float4 h1 = *(const float4 *)sm.part[1][rb][lane];
      dot[0] = h0.x + h1.x, dot[1] = h0.y + h1.y, dot[2] = h0.z + h1.z, dot[3] = h0.w + h1.w;
    }
#pragma unroll
    for (int e = 0; e < 4; e++) sv[e] = (e < 2 ? v_lo : v_hi) ? dot[e] * sl2 : -INFINITY;
    /* the tile's max per head, over the warps in order */
    float mx[2] = {few_warp_max(fmaxf(sv[0], sv[2])), few_warp_max(fmaxf(sv[1], sv[3]))};
    if (g == 0) sm.red_max[warp][2 * c] = mx[0], sm.red_max[warp][2 * c + 1] = mx[1];
    __syncthreads();
    float alpha[2], p[4];
#pragma unroll
    for (int j = 0; j < 2; j++) {
      float tm = sm.red_max[0][2 * c + j];
#pragma unroll
      for (int w = 1; w < FEW_WARPS; w++) tm = fmaxf(tm, sm.red_max[w][2 * c + j]);
      const float m_new = fmaxf(m[j], tm);
      alpha[j] = m[j] == -INFINITY ? 0.0f : exp2f(m[j] - m_new); /* nothing kept yet: 0 */
      m[j] = m_new;
    }
#pragma unroll
    for (int e = 0; e < 4; e++) p[e] = sv[e] == -INFINITY ? 0.0f : exp2f(sv[e] - m[e & 1]);
    if (kh == 0) { /* (one writer a row block) */
      __nv_bfloat16 *ps = (__nv_bfloat16 *)sm.p;
      ps[(2 * c) * FEW_PLD + r_lo] = __float2bfloat16_rn(p[0]);
      ps[(2 * c + 1) * FEW_PLD + r_lo] = __float2bfloat16_rn(p[1]);
      ps[(2 * c) * FEW_PLD + r_lo + 8] = __float2bfloat16_rn(p[2]);
      ps[(2 * c + 1) * FEW_PLD + r_lo + 8] = __float2bfloat16_rn(p[3]);
    }
    const float su[2] = {few_warp_sum(p[0] + p[2]), few_warp_sum(p[1] + p[3])};
    if (g == 0) sm.red_sum[warp][2 * c] = su[0], sm.red_sum[warp][2 * c + 1] = su[1];
    __syncthreads();
    /* l sums the f32 p while P V takes them rounded to bf16, as the wgmma kernel does;
     * over the row blocks (warps 0 .. RB - 1: with R = 32 warps 2 and 3 hold the same rows
     * as 0 and 1) */
    float rs[2];
#pragma unroll
    for (int j = 0; j < 2; j++)
      rs[j] = RB == 4 ? (sm.red_sum[0][2 * c + j] + sm.red_sum[1][2 * c + j]) +
                            (sm.red_sum[2][2 * c + j] + sm.red_sum[3][2 * c + j])
                      : sm.red_sum[0][2 * c + j] + sm.red_sum[1][2 * c + j];
#pragma unroll
    for (int j = 0; j < 2; j++) l[j] = l[j] * alpha[j] + rs[j];
#pragma unroll
    for (int mt = 0; mt < 8; mt++) {
      o[mt][0] *= alpha[0], o[mt][1] *= alpha[1];
      o[mt][2] *= alpha[0], o[mt][3] *= alpha[1];
    }
    /* O^T += V^T P^T over the tile's R / 16 k16 steps of rows */
    const int vr = (lane & 7) + 8 * ((lane >> 4) & 1), vc = 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int ks = 0; ks < R / 16; ks++) {
      uint32_t pb[2];
      pb[0] = *(const uint32_t *)(sm.p + g * FEW_PLD + 16 * ks + 2 * c);
      pb[1] = *(const uint32_t *)(sm.p + g * FEW_PLD + 16 * ks + 8 + 2 * c);
      const uint16_t *vrow = kv + (16 * ks + vr) * FEW_LD + 128 * warp + vc;
#pragma unroll
      for (int mt = 0; mt < 8; mt++) {
        uint32_t af[4];
        ldsm_x4_trans(af, vrow + 16 * mt);
        mma_bf16_16816(o[mt], af, pb);
      }
    }
    __syncthreads(); /* the slot, P and the sums are rewritten by the next tile */
  }

  const int h = h0 + 2 * c; /* this thread's heads: h, h + 1 */
  if (n_splits == 1) {
    const float inv[2] = {l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f};
#pragma unroll
    for (int j = 0; j < 2; j++) {
      if (2 * c + j >= nh) continue;
      float *out = a.out + t * a.ld_out + (int64_t)(h + j) * FEW_DC + 128 * warp + g;
#pragma unroll
      for (int mt = 0; mt < 8; mt++) {
        out[16 * mt] = o[mt][j] * inv[j];
        out[16 * mt + 8] = o[mt][2 + j] * inv[j];
      }
      if (warp == 0 && g == 0)
        a.lse[t * a.ld_lse + h + j] =
            l[j] > 0.0f ? (m[j] + log2f(l[j])) * 0.6931471805599453f : -INFINITY;
    }
  } else {
    const int64_t base = (tl * a.n_heads + h) * n_splits + s;
#pragma unroll
    for (int j = 0; j < 2; j++) {
      if (2 * c + j >= nh) continue;
      const int64_t i = base + (int64_t)j * n_splits;
      float *po = part_o + i * FEW_DC + 128 * warp + g;
#pragma unroll
      for (int mt = 0; mt < 8; mt++) {
        po[16 * mt] = o[mt][j];
        po[16 * mt + 8] = o[mt][2 + j];
      }
      if (warp == 0 && g == 0)
        part_ml[i] = make_float2(m[j] == -INFINITY ? -INFINITY : m[j] * 0.6931471805599453f, l[j]);
    }
  }
}

bool sc_kcuda_attn_few_takes(const sc_attn_args *a, int64_t kv_step) {
  return (a->kv.fmt == SC_KFMT_BF16 || a->kv.fmt == SC_KFMT_FP8_DS_MLA) && a->dc == FEW_DC &&
         a->dr == FEW_D - FEW_DC && ((uintptr_t)a->kv.data & 15) == 0 && kv_step % 16 == 0 &&
         a->topk <= FEW_IDX_MAX;
}

int sc_kcuda_attn_few(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step) {
  if (a->n_tok == 0) return 0;
  const int groups = (int)sc_cdiv(a->n_heads, FEW_HEADS);
  /* decode tokens: fixed splits; prefill tokens: one span of every selected row (at
   * least one, so that a token without rows still writes out 0 and lse -inf) */
  const int span = a->decode ? SC_ATTN_FEW_SPLIT : (a->topk > 0 ? a->topk : 1);
  const int n_splits = a->decode ? (int)sc_cdiv(a->topk > 0 ? a->topk : 1, span) : 1;
  /* prefill tokens: 32-row tiles, two blocks an SM; decode tokens: 64 (see few_smem) */
  const bool fp8 = a->kv.fmt == SC_KFMT_FP8_DS_MLA;
  void (*const fn)(sc_attn_args, int, int, int64_t, int64_t, float *, float2 *, int *) =
      a->decode ? (fp8 ? k_attn_few<FEW_ROWS, true> : k_attn_few<FEW_ROWS, false>)
                : (fp8 ? k_attn_few<FEW_ROWS_PREFILL, true> : k_attn_few<FEW_ROWS_PREFILL, false>);
  const size_t tiles =
      a->decode ? (fp8 ? sizeof(few_smem<FEW_ROWS, true>) : sizeof(few_smem<FEW_ROWS, false>))
                : (fp8 ? sizeof(few_smem<FEW_ROWS_PREFILL, true>)
                       : sizeof(few_smem<FEW_ROWS_PREFILL, false>));
  const size_t smem = tiles + sizeof(int32_t) * (size_t)sc_cdiv(span, FEW_ROWS) * FEW_ROWS;
  /* (one limit per kernel, the most any launch asks: see cuda_topk.cu's FINAL_SMEM_MAX) */
  int rc = sc_kcuda_err(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)FEW_SMEM_MAX),
                        "attn smem");
  if (rc) return rc;
  if (n_splits == 1) { /* (a decode token with at most one split's rows as well) */
    const int64_t blocks = (int64_t)a->n_tok * groups;
    if (blocks > INT32_MAX) return SC_ERANGE;
    sc_kcuda_launch(c, fn, (unsigned)blocks, FEW_THREADS, smem, *a, span, 1, kv_step, 0,
                    (float *)NULL, (float2 *)NULL, c->err_flag);
    return SC_CUDA_CHECK_LAUNCH("sparse_attn (few heads)");
  }
  size_t per_tok;
  const int64_t chunk = sc_attn_part_chunk(a, n_splits, (int64_t)groups * n_splits, &per_tok);
  char *scratch = (char *)sc_kcuda_scratch(c, per_tok * (size_t)chunk);
  if (scratch == NULL) return SC_ENOMEM;
  float2 *part_ml = (float2 *)scratch;
  float *part_o = (float *)(scratch + sizeof(float2) * (size_t)chunk * a->n_heads * n_splits);
  for (int64_t t0 = 0; t0 < a->n_tok && rc == 0; t0 += chunk) {
    const int64_t n = a->n_tok - t0 < chunk ? a->n_tok - t0 : chunk;
    sc_kcuda_launch(c, fn, (unsigned)(n * groups * n_splits), FEW_THREADS, smem, *a, span, n_splits,
                    kv_step, t0, part_o, part_ml, c->err_flag);
    if ((rc = SC_CUDA_CHECK_LAUNCH("sparse_attn (few heads)"))) break;
    rc = sc_kcuda_attn_merge(c, a, n_splits, t0, n, part_o, part_ml);
  }
  return rc;
}
