/* cuda_attn_ws.cu - sparse MLA attention over bf16 KV rows with warpgroups in roles
 * (sm_90a): dc = 512, dr = 64, 64 head rows a block, the shape of DeepSeek-V3.2's
 * attention (SPEC.md §7). sc_kcuda_sparse_attn (cuda_attn.cu) chooses it.
 *
 * Why another kernel: k_attn_wg (cuda_attn.cu) splits S = Q K^T of a 32-row tile over
 * four warpgroups by k and sums their partials through shared memory, and every phase
 * of a tile waits for all 512 threads at a block barrier: 0.39-0.59x FlashMLA on the
 * same shapes (H200, 2026-12-03, bench/kernels-cuda.md), its tensor cores busy about a
 * quarter of the time. Here, as in FlashMLA's SM90 sparse kernels (their schedule, our
 * code), a block of 3 warpgroups takes one token and 64 heads, tiles of 64 selected rows:
 *  - WG2, the producer, copies each tile's rows (cp.async, 1152 bytes a row) into one of
 *    two slots and records which rows are valid; an mbarrier per slot says full (its
 *    copies landed), another says empty (both consumers are done with it).
 *  - WG0 computes S = Q K^T for the whole tile (36 wgmma m64n64k16, Q and K from shared
 *    memory), the online softmax in registers, writes P (bf16) and each head's rescale
 *    of O to shared memory for WG1, and O[:, 0:256] += P V with P from its registers.
 *  - WG1 waits for P and does O[:, 256:512] += P V with P from shared memory, while WG0
 *    goes on with the next tile's S: the tensor cores run WG1's half of P V beside WG0's
 *    next S. The two meet at two named barriers a tile (P ready, P free).
 * Each consumer keeps its 64 x 256 half of O in registers (128 a thread; the producer
 * gives registers up to the consumers, setmaxnreg). Q (72 KB), the two slots (144 KB)
 * and P (8 KB) fill the shared memory one block may have.
 *
 * Numerics as k_attn_wg's: q rounded to bf16, scores in log2 units, the running max moves
 * only when a score exceeds it by more than 2^8 (so most tiles rescale nothing), P in
 * bf16, O and the sums in f32; out = O / l, lse = (m + log2 l) ln 2. A row's l is summed
 * per thread over the tiles and over a head's 4 threads at the end: one order, fixed by
 * the tile shape, so a query's output and lse depend only on its own selected rows (SPEC
 * §8: whatever P, N, T or the batch). Rows equal to -1 are skipped (zeros, masked), other
 * out-of-range rows raise SC_ERANGE and are skipped. */
#include <math.h>

#include "kernels/cuda/cuda_attn.cuh"
#include "kernels/cuda/cuda_wgmma.cuh"

#define WS_BM 64 /* head rows a block: wgmma's M */
#define WS_BN 64 /* selected rows a tile */
#define WS_D 576
#define WS_DC 512
#define WS_HALF (WS_DC / 2) /* O columns a consumer owns */
#define WS_THREADS 384
#define WS_KSTEPS (WS_D / 16)
#define WS_CB (WS_BN * 128) /* bytes of a 64-column block of a tile (or of Q, or P) */

/* named barriers of the two consumers (256 threads) */
#define WS_BAR_Q 1      /* Q converted */
#define WS_BAR_PREADY 2 /* WG0 wrote P and alpha of a tile */
#define WS_BAR_PFREE 3  /* WG1 is done reading them */
#define WS_BAR_L 4      /* WG0 wrote 1 / l */

struct ws_smem {
  alignas(1024) uint16_t q[WS_BM * WS_D];
  alignas(1024) uint16_t kv[2][WS_BN * WS_D];
  alignas(1024) uint16_t p[WS_BM * WS_BN]; /* P, K-major swizzled: A of WG1's P V */
  float alpha[WS_BM]; /* the current tile's rescale of O, per head row */
  float linv[WS_BM];  /* 1 / l at the end (0: no row) */
  /* per slot, bit r % 8 of byte r / 8: row r of the tile is valid. Written by the
   * producer before its arrive on the slot's full barrier (a release), read by WG0 after
   * its wait (an acquire). compute-sanitizer's racecheck reported hazards whose pattern fits
   * these bytes, as if it did not count the mbarrier (2026-12-05, bench/kernels-cuda.md;
   * not mapped to source lines) */
  alignas(8) uint8_t valid[2][8];
  uint64_t full[2], empty[2];
};

/* Registers a thread of each role may hold (setmaxnreg): 240 + 176 + 88 = 504 = 3 x 168,
 * the launch's 168 a thread (65536 / 384, in 8s) moved between roles; more than the
 * producer gives up would leave an inc waiting forever. WG0 holds its half of O (128),
 * S (32) and P (16) and spilled at 232; WG1 its half of O, and spilled at 168. */
template <int N> __device__ inline void ws_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N) : "memory");
}
template <int N> __device__ inline void ws_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N) : "memory");
}

/* The producer: thread (warp w, lane l) copies rows w * 8 + l % 8 and 32 more of every
 * tile, 16-byte parts l / 8 + 4 m (m < 18): per warp step the 8 lanes of a part write 8
 * rows of one swizzle atom (conflict-free), and a row's 4 lanes read 64 contiguous bytes.
 * Row indices are read a tile ahead (a global load on the way to the copies would put
 * its latency on every tile). */
__device__ inline void ws_produce(ws_smem &sm, const sc_attn_args &a, const int32_t *sel,
                                  int n_tiles, int64_t kv_step, int *flag) {
  const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31;
  const int r0 = warp * 8 + (lane & 7), p0 = lane >> 3;
  int32_t nxt[2];
#pragma unroll
  for (int k = 0; k < 2; k++) nxt[k] = r0 + 32 * k < a.topk ? sel[r0 + 32 * k] : -1;
  for (int tile = 0; tile < n_tiles; tile++) {
    const int s = tile & 1;
    if (tile >= 2) mbar_wait(&sm.empty[s], ((tile >> 1) - 1) & 1); /* tile - 2 released */
    int32_t cur[2] = {nxt[0], nxt[1]};
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const int j = (tile + 1) * WS_BN + r0 + 32 * k;
      nxt[k] = tile + 1 < n_tiles && j < a.topk ? sel[j] : -1;
    }
    char *slot = (char *)sm.kv[s];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const int row = r0 + 32 * k;
      const int32_t r = cur[k];
      const bool ok = r >= 0 && r < a.kv.rows;
      const unsigned bits = __ballot_sync(0xffffffffu, ok);
      if (lane == 0) sm.valid[s][warp + 4 * k] = (uint8_t)(bits & 0xffu);
      if (p0 == 0 && !ok && r != -1) sc_dev_raise(flag, SC_ERANGE);
      const char *src = (const char *)a.kv.data + (ok ? (int64_t)r * kv_step : 0);
      const uint32_t rb = (uint32_t)((row >> 3) * 1024 + (row & 7) * 128);
#pragma unroll 2 /* (all 18 unrolled held 36 addresses: 104 registers) */
      for (int m = 0; m < 18; m++) {
        const int part = p0 + 4 * m; /* column block m / 2, chunk p0 + 4 (m % 2) */
        cp_async16(slot + (m >> 1) * WS_CB + rb + ((((part & 7) ^ (row & 7))) << 4),
                   src + (ok ? part * 16 : 0), ok);
      }
    }
    mbar_arrive_cp_async(&sm.full[s]); /* the copies, when they land */
    mbar_arrive(&sm.full[s]);          /* the valid bits (release) */
  }
  cp_async_wait_all(); /* (no copy outlives its thread) */
}

/* Rescales this thread's O rows (wr * 16 + g and + 8) by al0, al1: skipped by a warp whose
 * rows all keep their max (the common case, see the top). */
__device__ inline void ws_rescale(float (&o)[128], float al0, float al1) {
  if (__any_sync(0xffffffffu, al0 != 1.0f || al1 != 1.0f)) {
#pragma unroll
    for (int j = 0; j < 32; j++) {
      o[4 * j] *= al0;
      o[4 * j + 1] *= al0;
      o[4 * j + 2] *= al1;
      o[4 * j + 3] *= al1;
    }
  }
}

/* Stores this thread's part of a consumer's O half (columns c0 ..) as O / l. */
__device__ inline void ws_store_o(const sc_attn_args &a, const float (&o)[128], const float *linv,
                                  int64_t t, int h0, int c0, int wr, int g, int tq) {
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int row = wr * 16 + g + half * 8, h = h0 + row;
    if (h >= a.n_heads) continue;
    const float inv = linv[row];
    float *out = a.out + t * a.ld_out + (int64_t)h * WS_DC + c0 + 2 * tq;
#pragma unroll
    for (int j = 0; j < 32; j++)
      *(float2 *)(out + 8 * j) =
          make_float2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
  }
}

/* q -> bf16 in the swizzled layout, by both consumers (256 threads), then their barrier. */
__device__ inline void ws_load_q(ws_smem &sm, const sc_attn_args &a, int64_t t, int h0) {
  static_assert(WS_BM == 64 && WS_D == 576, "sc_attn_load_q64's shape");
  sc_attn_load_q64(sm.q, a, t, h0, threadIdx.x, 256);
  fence_async_smem();
  named_sync(WS_BAR_Q, 256);
}

/* WG0: S, the softmax, P and alpha for WG1, and O[:, 0:256] (see the top). */
__device__ inline void ws_consume0(ws_smem &sm, const sc_attn_args &a, int n_tiles, int64_t t,
                                   int h0) {
  const int tid = threadIdx.x & 127, wr = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  /* O rows wr * 16 + g (+ 8), columns 8 j + 2 tq (+ 1): the wgmma D fragment */
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; i++) o[i] = 0.0f;
  const float sl2 = a.scale * 1.4426950408889634f; /* scores in log2 units */
  const uint32_t q_base = smem_u32(sm.q);
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f}; /* rows g, g + 8 */
  for (int tile = 0; tile < n_tiles; tile++) {
    const int s = tile & 1;
    mbar_wait(&sm.full[s], (tile >> 1) & 1);
    fence_async_smem(); /* the copies were generic-proxy writes; wgmma reads async */
    const uint32_t kv_base = smem_u32(sm.kv[s]);
    float sacc[32];
    {
      const uint64_t dq = wg_desc(q_base, 16, 1024), dk = wg_desc(kv_base, 16, 1024);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < WS_KSTEPS; kk++) {
        const uint32_t off = (uint32_t)((kk >> 2) * WS_CB + (kk & 3) * 32);
        wgmma_m64n64(sacc, wg_desc_add(dq, off), wg_desc_add(dk, off), kk > 0);
      }
      wg_commit();
      wg_wait0();
      wg_pin(sacc);
    }
    /* online softmax over this thread's 16 columns of rows g and g + 8 (a row's 4
     * threads: xor 1, 2), invalid rows of the tile -inf */
    const uint64_t vb = *(const uint64_t *)sm.valid[s];
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int x = 0; x < 2; x++) {
        const bool ok = (vb >> (8 * j + 2 * tq + x)) & 1u;
        sacc[4 * j + x] = ok ? sacc[4 * j + x] * sl2 : -INFINITY;
        sacc[4 * j + 2 + x] = ok ? sacc[4 * j + 2 + x] * sl2 : -INFINITY;
        mx[0] = fmaxf(mx[0], sacc[4 * j + x]);
        mx[1] = fmaxf(mx[1], sacc[4 * j + 2 + x]);
      }
    float al[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      /* the max moves only by more than 2^8 (P <= 256: exact in bf16's range) */
      const float m_new = mx[r] > m_run[r] + 8.0f ? mx[r] : m_run[r];
      al[r] = m_new == -INFINITY ? 1.0f : exp2f(m_run[r] - m_new);
      m_run[r] = m_new;
    }
    uint32_t pa[4][4]; /* P as the A fragments of the 4 k16 steps of P V */
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 8; j++) {
      float pv[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float mr = m_run[e >> 1];
        pv[e] = mr == -INFINITY ? 0.0f : exp2f(sacc[4 * j + e] - mr);
        sum[e >> 1] += pv[e];
      }
      /* step j / 2: a0 (row g, its 2 columns), a1 (row g + 8), then the 8 columns after */
      pa[j >> 1][2 * (j & 1)] = pack_bf16x2(pv[0], pv[1]);
      pa[j >> 1][2 * (j & 1) + 1] = pack_bf16x2(pv[2], pv[3]);
    }
    l_run[0] = l_run[0] * al[0] + sum[0];
    l_run[1] = l_run[1] * al[1] + sum[1];
    /* P and alpha to WG1, once it is done with the last tile's */
    if (tile > 0) named_sync(WS_BAR_PFREE, 256);
    {
      char *pb = (char *)sm.p;
      const int ra = wr * 16 + g, rb = ra + 8;
#pragma unroll
      for (int ks = 0; ks < 4; ks++) {
        *(uint32_t *)(pb + wg_off<WS_BM>(ra, 2 * ks) + 4 * tq) = pa[ks][0];
        *(uint32_t *)(pb + wg_off<WS_BM>(rb, 2 * ks) + 4 * tq) = pa[ks][1];
        *(uint32_t *)(pb + wg_off<WS_BM>(ra, 2 * ks + 1) + 4 * tq) = pa[ks][2];
        *(uint32_t *)(pb + wg_off<WS_BM>(rb, 2 * ks + 1) + 4 * tq) = pa[ks][3];
      }
      if (tq == 0) {
        sm.alpha[ra] = al[0];
        sm.alpha[rb] = al[1];
      }
    }
    fence_async_smem(); /* WG1's wgmma reads P through the async proxy */
    named_arrive(WS_BAR_PREADY, 256);
    /* O[:, 0:256] = O * alpha + P V; V is N-major: LBO = the next 64 columns (a column
     * block of the tile), SBO = the next 8 rows; WG0's columns are blocks 0-3 */
    ws_rescale(o, al[0], al[1]);
    {
      const uint64_t dv = wg_desc(kv_base, WS_CB, 1024);
      wg_pin(o);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ks++)
        wgmma_m64n256_rs(o, pa[ks], wg_desc_add(dv, (uint32_t)(2 * ks * 1024)));
      wg_commit();
      wg_wait0();
      wg_pin(o);
    }
    mbar_arrive(&sm.empty[s]);
  }
  /* l over a row's 4 threads; 1 / l to WG1; lse = (m + log2 l) ln 2 */
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  if (tq == 0) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int row = wr * 16 + g + 8 * r, h = h0 + row;
      sm.linv[row] = l_run[r] > 0.0f ? 1.0f / l_run[r] : 0.0f;
      if (h < a.n_heads)
        a.lse[t * a.ld_lse + h] =
            l_run[r] > 0.0f ? (m_run[r] + log2f(l_run[r])) * 0.6931471805599453f : -INFINITY;
    }
  }
  named_arrive(WS_BAR_L, 256);
  __syncwarp();
  ws_store_o(a, o, sm.linv, t, h0, 0, wr, g, tq);
}

/* WG1: O[:, 256:512] with WG0's P (see the top). */
__device__ inline void ws_consume1(ws_smem &sm, const sc_attn_args &a, int n_tiles, int64_t t,
                                   int h0) {
  const int tid = threadIdx.x & 127, wr = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; i++) o[i] = 0.0f;
  const uint64_t dp = wg_desc(smem_u32(sm.p), 16, 1024);
  for (int tile = 0; tile < n_tiles; tile++) {
    const int s = tile & 1;
    named_sync(WS_BAR_PREADY, 256); /* P and alpha of this tile; its slot is full */
    fence_async_smem();
    ws_rescale(o, sm.alpha[wr * 16 + g], sm.alpha[wr * 16 + g + 8]);
    const uint64_t dv = wg_desc(smem_u32(sm.kv[s]) + 4 * WS_CB, WS_CB, 1024); /* blocks 4-7 */
    wg_pin(o);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
      wgmma_m64n256_ss(o, wg_desc_add(dp, (uint32_t)(32 * ks)),
                       wg_desc_add(dv, (uint32_t)(2 * ks * 1024)));
    wg_commit();
    wg_wait0();
    wg_pin(o);
    mbar_arrive(&sm.empty[s]);
    if (tile + 1 < n_tiles) named_arrive(WS_BAR_PFREE, 256);
  }
  named_sync(WS_BAR_L, 256);
  ws_store_o(a, o, sm.linv, t, h0, WS_HALF, wr, g, tq);
}

__global__ void __launch_bounds__(WS_THREADS, 1)
    k_attn_ws(sc_attn_args a, int64_t kv_step, int *flag) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  /* the swizzle atoms need 1024-byte alignment, which the dynamic base does not promise */
  ws_smem &sm = *(ws_smem *)(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));
  const int wg = threadIdx.x >> 7;
  const int groups = (a.n_heads + WS_BM - 1) / WS_BM;
  const int64_t t = blockIdx.x / groups;
  const int h0 = (int)(blockIdx.x % groups) * WS_BM;
  const int32_t *sel = a.sel + t * a.ld_sel;
  const int n_tiles = (a.topk + WS_BN - 1) / WS_BN;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < 2; s++) {
      mbar_init(&sm.full[s], 256);  /* the producer's 128 threads: copies and bits */
      mbar_init(&sm.empty[s], 256); /* both consumers */
    }
  }
  __syncthreads();

  if (wg == 2) {
    ws_setmaxnreg_dec<88>();
    ws_produce(sm, a, sel, n_tiles, kv_step, flag);
  } else if (wg == 0) {
    ws_setmaxnreg_inc<240>();
    ws_load_q(sm, a, t, h0);
    ws_consume0(sm, a, n_tiles, t, h0);
  } else {
    ws_setmaxnreg_inc<176>();
    ws_load_q(sm, a, t, h0);
    ws_consume1(sm, a, n_tiles, t, h0);
  }
}

int sc_kcuda_attn_ws(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step) {
  const int groups = (a->n_heads + WS_BM - 1) / WS_BM;
  const int64_t blocks = (int64_t)a->n_tok * groups;
  if (blocks > INT32_MAX) return SC_ERANGE;
  if (blocks == 0) return 0;
  const size_t smem = sizeof(ws_smem) + 1024; /* + alignment of the swizzle atoms */
  static_assert(sizeof(ws_smem) + 1024 <= SC_KCUDA_SMEM_MAX, "one block's shared memory");
  int rc = sc_kcuda_err(
      cudaFuncSetAttribute(k_attn_ws, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "attn smem");
  if (rc) return rc;
  sc_kcuda_launch(c, k_attn_ws, (unsigned)blocks, WS_THREADS, smem, *a, kv_step, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("sparse_attn (warpgroups in roles)");
}
