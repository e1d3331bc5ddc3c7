/* cuda_attn_ws.cuh - the pieces of the sparse attention kernel of warpgroups in roles
 * (cuda_attn_ws.cu; sm_90a; not a public header): one token and 64 heads a block of 3
 * warpgroups, dc = 512, dr = 64 (DeepSeek-V3.2's attention, SPEC.md §7), tiles of 64
 * selected rows in two shared-memory slots that the producer warpgroup (ws_produce)
 * fills; the shape, the producer, and the pieces of a tile's softmax live here.
 * (A second kernel over the same pieces, cuda_attn_pairs.cu, made the consumers
 * symmetric as FlashMLA's SM90 sparse kernels do; it lost on every case and was removed
 * on 2026-12-05: bench/kernels-cuda.md.)
 *
 * Numerics: q rounded to bf16, scores in log2 units, the running max
 * moves only when a score exceeds it by more than 2^8 (so most tiles rescale nothing),
 * P in bf16 (<= 256), O and the sums in f32; out = O / l, lse = (m + log2 l) ln 2. The
 * order of every sum is fixed by the tile shape, so a query's output and lse depend only
 * on its own selected rows (SPEC §8: whatever P, N, T or the batch). Rows equal to -1
 * are skipped (zeros, masked), other out-of-range rows raise SC_ERANGE and are skipped. */
#ifndef SC_KERNELS_CUDA_ATTN_WS_CUH
#define SC_KERNELS_CUDA_ATTN_WS_CUH

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
/* The registers of the roles (k_attn_ws's setmaxnreg; 3 x 168 a thread in all): WG0
 * holds S, P and half of O; the fp8 producer of clusters two shares of rows
 * (ws_produce_fp8; at 88 it spilled 176 bytes). 240 / 176 / 88 before: the look-ahead
 * with these was 4.6% faster on the fp8 decode, prefill and bf16 decode within 1% (H100,
 * 2026-12-06, bench/kernels-cuda.md). */
#define WS_REGS_WG0 208
#define WS_REGS_WG1 176
#define WS_REGS_PRODUCER 120
static_assert(WS_REGS_WG0 + WS_REGS_WG1 + WS_REGS_PRODUCER == 504, "3 x 168 a thread");

typedef uint16_t ws_slot[WS_BN * WS_D]; /* one tile of rows, bf16, 9 column blocks */

template <int N> __device__ inline void ws_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N) : "memory");
}
template <int N> __device__ inline void ws_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N) : "memory");
}

/* Whether selected row r is read: -1 is no row; other rows out of range are skipped too
 * (the producer raises SC_ERANGE for them). The producer zero-fills the rows it skips and
 * the consumers mask their scores; both ask this. */
__device__ inline bool ws_row_ok(const sc_attn_args &a, int32_t r) {
  return r >= 0 && r < a.kv.rows;
}

/* The rows of tile `tile` that are valid, bit i for row i: each lane reads two entries of
 * the selection (a consumer's warps do it alike, a tile ahead: ws_sel_pair). */
__device__ inline int2 ws_sel_pair(const sc_attn_args &a, const int32_t *sel, int tile, int lane) {
  const int j = tile * WS_BN + lane;
  return make_int2(j < a.topk ? sel[j] : -1, j + 32 < a.topk ? sel[j + 32] : -1);
}
__device__ inline uint64_t ws_valid_bits(const sc_attn_args &a, int2 r) {
  const unsigned lo = __ballot_sync(0xffffffffu, ws_row_ok(a, r.x));
  const unsigned hi = __ballot_sync(0xffffffffu, ws_row_ok(a, r.y));
  return (uint64_t)hi << 32 | lo;
}

/* This thread's share of one fp8_ds_mla row (ws_produce; FP8): its 16 parts p0 + 4 m
 * (m < 16) of the 512 e4m3 values (8 bytes each: a row's 4 lanes read 32 contiguous
 * bytes), its 128-value tiles' scales and its 2 parts of the 64 bf16 rope values, loaded
 * all at once (ws_fp8_load), so a tile costs one load latency (the clusters' first
 * version went by halves, two: 2-3.5% slower on the decode case, H100, 2026-12-05,
 * bench/kernels-cuda.md); then dequantized into the bf16 tile of a slot (ws_fp8_store).
 * A row not read (ok false) is zeros. */
struct ws_fp8_share {
  uint2 v[16];
  float4 sc;
  uint4 rope[2];
  bool ok;
};
__device__ inline ws_fp8_share ws_fp8_load(const char *src, bool ok, int p0) {
  ws_fp8_share x;
  x.ok = ok;
  x.sc = make_float4(0.f, 0.f, 0.f, 0.f);
  x.rope[0] = x.rope[1] = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int m = 0; m < 16; m++) x.v[m] = make_uint2(0, 0);
  if (ok) {
#pragma unroll
    for (int m = 0; m < 16; m++) x.v[m] = *(const uint2 *)(src + 8 * (p0 + 4 * m));
    x.sc = *(const float4 *)(src + SC_KFP8_DS_MLA_SCALE_AT);
#pragma unroll
    for (int k = 0; k < 2; k++)
      x.rope[k] = *(const uint4 *)(src + SC_KFP8_DS_MLA_ROPE_AT + 16 * (p0 + 4 * k));
  }
  return x;
}
/* Each 16 bytes of the share (column block m / 2 of the tile) stored into row `row` of
 * the slot and, PEER (a cluster), by st.async into the other block's slot (counted on
 * its full barrier peer_full). */
template <bool PEER, int M0 = 0, int M1 = 18>
__device__ inline void ws_fp8_store(const ws_fp8_share &x, char *slot, uint32_t peer_slot,
                                    uint32_t peer_full, int row, int p0) {
  const uint32_t rb = (uint32_t)((row >> 3) * 1024 + (row & 7) * 128);
#pragma unroll
  for (int m = M0; m < M1; m++) {
    const int part = p0 + 4 * m;
    const float4 &sc = x.sc;
    const float scale = (m >> 2) == 0 ? sc.x : (m >> 2) == 1 ? sc.y : (m >> 2) == 2 ? sc.z : sc.w;
    const uint4 w = m >= 16 ? x.rope[m - 16]
                    : x.ok  ? e4m3x8_to_bf16x8(x.v[m], scale)
                            : make_uint4(0, 0, 0, 0);
    const uint32_t off = (uint32_t)((m >> 1) * WS_CB) + rb + (((part & 7) ^ (row & 7)) << 4);
    *(uint4 *)(slot + off) = w;
    if (PEER) st_async16(peer_slot + off, w, peer_full);
  }
}

/* Arrivals of the other block of a cluster on a slot's empty barrier: one a consumer warp
 * (ws_release). */
#define WS_PEER_RELEASES 8
/* Bytes the other block of a cluster writes into a slot: its 32 rows, bf16. */
#define WS_CROSS_TX ((WS_BN / 2) * WS_D * 2)
/* Each slot has two full barriers, full[2 s + h]: h = 0 for the tile's column blocks 0-3
 * (WS_LO_BLOCKS, S's k-steps 0-15), 1 for blocks 4-8. WG0 issues S's first 16 k-steps
 * once the first half has landed and waits for the second while they run, as FlashMLA's
 * sparse prefill hands its K tiles over: 2.4-3.8% off every case of kernel.sparse_attn
 * (H100, 2026-12-06, bench/kernels-cuda.md). */
#define WS_LO_BLOCKS 4
#define WS_FP8_LO_PARTS (2 * WS_LO_BLOCKS) /* ws_fp8_store's 16-byte parts m of that half */
#define WS_CROSS_TX_LO ((WS_BN / 2) * WS_LO_BLOCKS * 128)
#define WS_CROSS_TX_HI (WS_CROSS_TX - WS_CROSS_TX_LO)

/* bf16 rows (see ws_produce): rows r0 + 16 k, a row's 8 lanes side by side. */
__device__ inline void ws_produce_bf16(ws_slot *kv, uint64_t *full, uint64_t *empty,
                                       const sc_attn_args &a, const int32_t *sel,
                                       int n_tiles, int64_t kv_step, int *flag) {
  const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, c = lane & 7;
  const int r0 = warp * 4 + (lane >> 3); /* this lane copies chunk c of each column block */
  int32_t nxt[4];
#pragma unroll
  for (int k = 0; k < 4; k++) nxt[k] = r0 + 16 * k < a.topk ? sel[r0 + 16 * k] : -1;
  for (int tile = 0; tile < n_tiles; tile++) {
    const int s = tile & 1;
    if (tile >= 2) mbar_wait<false>(&empty[s], ((tile >> 1) - 1) & 1); /* tile - 2 released */
    int32_t cur[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      cur[k] = nxt[k];
      const int j = (tile + 1) * WS_BN + r0 + 16 * k;
      nxt[k] = tile + 1 < n_tiles && j < a.topk ? sel[j] : -1;
    }
    char *slot = (char *)kv[s];
    const char *src[4];
    bool ok[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int32_t r = cur[k];
      ok[k] = ws_row_ok(a, r);
      if (c == 0 && !ok[k] && r != -1) sc_dev_raise(flag, SC_ERANGE);
      src[k] = (const char *)a.kv.data + (ok[k] ? (int64_t)r * kv_step : 0);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const int row = r0 + 16 * k;
        const uint32_t rb = (uint32_t)((row >> 3) * 1024 + (row & 7) * 128);
#pragma unroll
        for (int m = h ? WS_LO_BLOCKS : 0; m < (h ? 9 : WS_LO_BLOCKS); m++)
          cp_async16(slot + m * WS_CB + rb + ((c ^ (row & 7)) << 4),
                     src[k] + (ok[k] ? 16 * (c + 8 * m) : 0), ok[k]);
      }
      mbar_arrive_cp_async(&full[2 * s + h]); /* when the half's copies land */
    }
  }
  cp_async_wait_all(); /* (no copy outlives its thread) */
}

/* The selected row r of this thread's share read (ws_fp8_load): -1 and rows out of
 * range (SC_ERANGE raised, by one lane of the row's 4) are zeros. */
__device__ inline ws_fp8_share ws_fp8_load_row(const sc_attn_args &a, int32_t r, int64_t kv_step,
                                               int *flag, int p0) {
  const bool ok = ws_row_ok(a, r);
  if (p0 == 0 && !ok && r != -1) sc_dev_raise(flag, SC_ERANGE);
  return ws_fp8_load((const char *)a.kv.data + (ok ? (int64_t)r * kv_step : 0), ok, p0);
}

/* fp8_ds_mla rows, one block a group (see ws_produce): two rows a thread, r0 and
 * r0 + 32, loaded once their slot is free, then dequantized and stored (a tile ahead
 * would need four shares in registers). */
__device__ inline void ws_produce_fp8_block(ws_slot *kv, uint64_t *full, uint64_t *empty,
                                            const sc_attn_args &a, const int32_t *sel,
                                            int n_tiles, int64_t kv_step, int *flag, int r0,
                                            int p0) {
  int32_t nxt[2];
#pragma unroll
  for (int k = 0; k < 2; k++) nxt[k] = r0 + 32 * k < a.topk ? sel[r0 + 32 * k] : -1;
  for (int tile = 0; tile < n_tiles; tile++) {
    const int s = tile & 1;
    if (tile >= 2) mbar_wait<false>(&empty[s], ((tile >> 1) - 1) & 1); /* tile - 2 released */
    int32_t cur[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      cur[k] = nxt[k];
      const int j = (tile + 1) * WS_BN + r0 + 32 * k;
      nxt[k] = tile + 1 < n_tiles && j < a.topk ? sel[j] : -1;
    }
    ws_fp8_share x[2];
#pragma unroll
    for (int k = 0; k < 2; k++) x[k] = ws_fp8_load_row(a, cur[k], kv_step, flag, p0);
#pragma unroll
    for (int k = 0; k < 2; k++)
      ws_fp8_store<false, 0, WS_FP8_LO_PARTS>(x[k], (char *)kv[s], 0, 0, r0 + 32 * k, p0);
    fence_async_smem(); /* the stores, for the async proxy that wgmma reads through */
    mbar_arrive(&full[2 * s]);
#pragma unroll
    for (int k = 0; k < 2; k++)
      ws_fp8_store<false, WS_FP8_LO_PARTS, 18>(x[k], (char *)kv[s], 0, 0, r0 + 32 * k, p0);
    fence_async_smem();
    mbar_arrive(&full[2 * s + 1]);
  }
}

/* fp8_ds_mla rows in a cluster (see ws_produce): one row a thread, r0, into both blocks'
 * slots. The loads of tile j + 1 are issued before tile j's share is converted and
 * stored (two shares in registers: the producer holds WS_REGS_PRODUCER), so a tile's
 * load latency overlaps the tile before's dequantization where it came after it (ncu of
 * the fp8 decode, H100, 2026-12-06: 28% of the stall samples on the first use of the
 * loads; with it the decode case 2% faster, 4.6% with the registers and the releases of
 * one arrival a warp, bench/kernels-cuda.md). */
__device__ inline void ws_produce_fp8_cluster(ws_slot *kv, uint64_t *full, uint64_t *empty,
                                              const sc_attn_args &a, const int32_t *sel,
                                              int n_tiles, int64_t kv_step, int *flag,
                                              int r0, int p0, unsigned peer) {
  const int tid = threadIdx.x & 127;
  ws_fp8_share cur = ws_fp8_load_row(a, r0 < a.topk ? sel[r0] : -1, kv_step, flag, p0);
  int32_t e_next = WS_BN + r0 < a.topk ? sel[WS_BN + r0] : -1; /* tile 1's entry */
  for (int tile = 0; tile < n_tiles; tile++) {
    const int s = tile & 1;
    const ws_fp8_share nxt =
        ws_fp8_load_row(a, tile + 1 < n_tiles ? e_next : -1, kv_step, flag, p0);
    const int j = (tile + 2) * WS_BN + r0;
    e_next = tile + 2 < n_tiles && j < a.topk ? sel[j] : -1;
    if (tile >= 2) mbar_wait<true>(&empty[s], ((tile >> 1) - 1) & 1); /* tile - 2 released */
    if (tid == 0) {
      mbar_arrive_expect_tx(&full[2 * s], WS_CROSS_TX_LO);
      mbar_arrive_expect_tx(&full[2 * s + 1], WS_CROSS_TX_HI);
    }
    char *slot = (char *)kv[s];
    const uint32_t peer_slot = cluster_addr(slot, peer);
    ws_fp8_store<true, 0, WS_FP8_LO_PARTS>(cur, slot, peer_slot,
                                         cluster_addr(&full[2 * s], peer), r0, p0);
    fence_async_smem(); /* the stores, for the async proxy that wgmma reads through */
    mbar_arrive(&full[2 * s]);
    ws_fp8_store<true, WS_FP8_LO_PARTS, 18>(cur, slot, peer_slot,
                                          cluster_addr(&full[2 * s + 1], peer), r0, p0);
    fence_async_smem();
    mbar_arrive(&full[2 * s + 1]);
    cur = nxt;
  }
}

/* fp8_ds_mla rows (see ws_produce): rows r0 + 32 k, a row's 4 lanes side by side (p0 =
 * lane / 8 their part); in a cluster this block's producer writes the rows of the other
 * block's half too. */
template <bool CROSS>
__device__ inline void ws_produce_fp8(ws_slot *kv, uint64_t *full, uint64_t *empty,
                                      const sc_attn_args &a, const int32_t *sel, int n_tiles,
                                      int64_t kv_step, int *flag) {
  const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, p0 = lane >> 3;
  const unsigned peer = CROSS ? cluster_rank() ^ 1 : 0;
  const int r0 = warp * 8 + (lane & 7) + (CROSS ? 32 * (int)(peer ^ 1) : 0);
  if constexpr (CROSS)
    ws_produce_fp8_cluster(kv, full, empty, a, sel, n_tiles, kv_step, flag, r0, p0, peer);
  else
    ws_produce_fp8_block(kv, full, empty, a, sel, n_tiles, kv_step, flag, r0, p0);
}

/* The producer: tile j into slot j % 2 once both consumers released the tile two before
 * (empty[s], 256 arrivals; in a cluster 264, the other block's 8 consumer warps too:
 * WS_PEER_RELEASES, ws_release), announced half by half on full[2 s] and full[2 s + 1]
 * (128 arrivals each, as the copies land or after the stores; in a cluster 129, see
 * below). bf16 rows: thread (warp w, lane l) copies rows w * 4 + l / 8 + 16 k (k < 4) of
 * every tile by cp.async, 16-byte chunk l % 8 of each of the 9 column blocks, so a warp
 * step reads 4 rows' 128 contiguous bytes and writes whole 128-byte swizzle lines (until
 * 2026-12-05 a row's 4 lanes read 64 bytes a step and ncu counted 33% excess shared
 * wavefronts on those stores: this layout took 9-10% off every bf16 case, H100,
 * bench/kernels-cuda.md). fp8_ds_mla rows: thread (w, l) takes rows w * 8 + l % 8 (and
 * 32 more outside a cluster), parts l / 8 + 4 m of the 576 values (a row's 4 lanes read
 * 32 contiguous bytes), dequantized through registers (ws_fp8_load, ws_fp8_store),
 * stored, fenced for the async proxy that wgmma reads through, and announced by an
 * arrive of their own. Row indices are read a tile ahead (a global load on the way to
 * the copies would put its latency on every tile).
 * CROSS (fp8_ds_mla rows, a token's two head groups as a cluster of two blocks: their
 * selected rows are the same): each producer dequantizes only its block's 32 rows of
 * every tile (rows 32 rank ..) and stores each 16 bytes into both blocks' slots, the
 * other's by st.async, which counts the bytes on that block's full barrier: each block's
 * thread 0 arms its own with the other's bytes (expect_tx, the 129th arrival) before its
 * producer's 128 arrive. */
template <bool FP8, bool CROSS>
__device__ inline void ws_produce(ws_slot *kv, uint64_t *full, uint64_t *empty,
                                  const sc_attn_args &a, const int32_t *sel, int n_tiles,
                                  int64_t kv_step, int *flag) {
  static_assert(FP8 || !CROSS, "a cluster shares dequantized rows only (over bf16 rows, "
                                "rows through registers lost 37-41%: bench/kernels-cuda.md)");
  if constexpr (FP8)
    ws_produce_fp8<CROSS>(kv, full, empty, a, sel, n_tiles, kv_step, flag);
  else
    ws_produce_bf16(kv, full, empty, a, sel, n_tiles, kv_step, flag);
}

/* A tile's S = Q K^T: the 36 k16 steps in order, committed as one group; the 16 over
 * the slot's first half are issued before the wait for its second (full_hi). (Unrolled:
 * a loop of wgmma made ptxas serialize every wgmma of the kernel, C7520.) */
__device__ inline void ws_scores(float (&s)[32], uint32_t q_base, uint32_t kv_base,
                                 uint64_t *full_hi, int phase) {
  const uint64_t dq = wg_desc(q_base, 16, 1024), dk = wg_desc(kv_base, 16, 1024);
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < 4 * WS_LO_BLOCKS; kk++) {
    const uint32_t off = (uint32_t)((kk >> 2) * WS_CB + (kk & 3) * 32);
    wgmma_m64n64(s, wg_desc_add(dq, off), wg_desc_add(dk, off), kk > 0);
  }
  mbar_wait(full_hi, phase); /* the tile's second half, while the first's products run */
  fence_async_smem();
#pragma unroll
  for (int kk = 4 * WS_LO_BLOCKS; kk < WS_KSTEPS; kk++) {
    const uint32_t off = (uint32_t)((kk >> 2) * WS_CB + (kk & 3) * 32);
    wgmma_m64n64(s, wg_desc_add(dq, off), wg_desc_add(dk, off), 1);
  }
  wg_commit();
}

/* This thread's 16 raw scores of rows g and g + 8 with the invalid rows of the tile
 * (bits of vb) -inf; returns each row's max over the row's 4 threads (xor 1, 2) in log2
 * units (times sl2 > 0: sc_kcuda_sparse_attn sends no other scale here). The scores stay
 * raw: ws_probs scales each by the same FMA that subtracts the max. */
__device__ inline float2 ws_mask_max(float (&s)[32], uint64_t vb, float sl2, int tq) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 8; j++)
#pragma unroll
    for (int x = 0; x < 2; x++) {
      const bool ok = (vb >> (8 * j + 2 * tq + x)) & 1u;
      s[4 * j + x] = ok ? s[4 * j + x] : -INFINITY;
      s[4 * j + 2 + x] = ok ? s[4 * j + 2 + x] : -INFINITY;
      mx[0] = fmaxf(mx[0], s[4 * j + x]);
      mx[1] = fmaxf(mx[1], s[4 * j + 2 + x]);
    }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
  }
  return make_float2(mx[0] * sl2, mx[1] * sl2);
}

/* The running max after a tile whose row max is mx: it moves only by more than 2^8 (so
 * P = 2^(s - m) <= 256 stays exact in bf16's range, and most tiles rescale nothing). */
__device__ inline float ws_next_max(float m, float mx) { return mx > m + 8.0f ? mx : m; }
/* 2^(from - to), the rescale of sums kept at max `from` to max `to` (>= from); 1 while
 * no row has been seen. */
__device__ inline float ws_rescale_factor(float from, float to) {
  return to == -INFINITY ? 1.0f : ex2_ftz(from - to);
}

/* P = 2^(s sl2 - m) of this thread's raw scores (ws_mask_max) as the A fragments of the
 * 4 k16 steps of P V (step j / 2: a0 row g, its 2 columns, a1 row g + 8, then the 8
 * columns after), and each row's sum of the f32 values. One FMA and one ex2 a score: a
 * row without a max (-inf) has only -inf scores, which its max taken as 0 sends to 0. */
__device__ inline float2 ws_probs(uint32_t (&pa)[4][4], const float (&s)[32], float sl2,
                                  float m0, float m1) {
  const float nm[2] = {m0 == -INFINITY ? 0.0f : -m0, m1 == -INFINITY ? 0.0f : -m1};
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 8; j++) {
    float pv[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      pv[e] = ex2_ftz(fmaf(s[4 * j + e], sl2, nm[e >> 1]));
      sum[e >> 1] += pv[e];
    }
    pa[j >> 1][2 * (j & 1)] = pack_bf16x2(pv[0], pv[1]);
    pa[j >> 1][2 * (j & 1) + 1] = pack_bf16x2(pv[2], pv[3]);
  }
  return make_float2(sum[0], sum[1]);
}

/* Stores this thread's P fragments into pb, a 64 x 64 bf16 block, K-major swizzled: the
 * A operand of another warpgroup's P V. The caller fences for the async proxy. */
__device__ inline void ws_store_p(char *pb, const uint32_t (&pa)[4][4], int wr, int g, int tq) {
  const int ra = wr * 16 + g, rb = ra + 8;
#pragma unroll
  for (int ks = 0; ks < 4; ks++) {
    *(uint32_t *)(pb + wg_off<WS_BM>(ra, 2 * ks) + 4 * tq) = pa[ks][0];
    *(uint32_t *)(pb + wg_off<WS_BM>(rb, 2 * ks) + 4 * tq) = pa[ks][1];
    *(uint32_t *)(pb + wg_off<WS_BM>(ra, 2 * ks + 1) + 4 * tq) = pa[ks][2];
    *(uint32_t *)(pb + wg_off<WS_BM>(rb, 2 * ks + 1) + 4 * tq) = pa[ks][3];
  }
}

/* A consumer thread's place in the wgmma fragments (cuda_wgmma.cuh): warp wr of its
 * warpgroup, lane, row g = lane / 4 of the warp's 16 (and g + 8), column pair tq = lane % 4. */
struct ws_place {
  int wr, lane, g, tq;
};
__device__ inline ws_place ws_place_of() {
  const int tid = threadIdx.x & 127, lane = tid & 31;
  return {tid >> 5, lane, lane >> 2, lane & 3};
}

/* A consumer's half of O, zeroed. */
__device__ inline void ws_zero(float (&o)[128]) {
#pragma unroll
  for (int i = 0; i < 128; i++) o[i] = 0.0f;
}

/* Each row's l summed over the row's 4 threads (xor 1, then 2: one order). */
__device__ inline void ws_row_sums(float (&l)[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
}

/* Stores this thread's part of a consumer's O half (columns c0 ..) as O / l, inv0 and
 * inv1 = 1 / l of rows wr * 16 + g and + 8. */
__device__ inline void ws_store_o(const sc_attn_args &a, const float (&o)[128], float inv0,
                                  float inv1, int64_t t, int h0, int c0, int wr, int g, int tq) {
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int row = wr * 16 + g + half * 8, h = h0 + row;
    if (h >= a.n_heads) continue;
    const float inv = half ? inv1 : inv0;
    float *out = a.out + t * a.ld_out + (int64_t)h * WS_DC + c0 + 2 * tq;
#pragma unroll
    for (int j = 0; j < 32; j++)
      *(float2 *)(out + 8 * j) =
          make_float2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
  }
}

/* q -> bf16 in the swizzled layout, by both consumers (256 threads), then their named
 * barrier `bar` (unaligned: k_attn_ws's consumers call this from their own branches). */
__device__ inline void ws_load_q(uint16_t *q, const sc_attn_args &a, int64_t t, int h0,
                                 int bar) {
  static_assert(WS_BM == 64 && WS_D == 576, "sc_attn_load_q64's shape");
  sc_attn_load_q64<256, 18>(q, a, t, h0, threadIdx.x);
  fence_async_smem();
  named_sync_unaligned(bar, 256);
}

/* ---- the block: which token and heads, its shared memory, its barriers, its launch ---- */

/* Block blockIdx.x's token t, first head h0, its selection and tile count. */
struct ws_block {
  int64_t t;
  int h0, n_tiles;
  const int32_t *sel;
};
__device__ inline ws_block ws_block_of(const sc_attn_args &a) {
  const int groups = (a.n_heads + WS_BM - 1) / WS_BM;
  ws_block b;
  b.t = blockIdx.x / groups;
  b.h0 = (int)(blockIdx.x % groups) * WS_BM;
  b.n_tiles = (a.topk + WS_BN - 1) / WS_BN;
  b.sel = a.sel + b.t * a.ld_sel;
  return b;
}

/* The bytes from the dynamic shared memory's base to the block's structure: the swizzle
 * atoms need 1024-byte alignment, which the base does not promise (the launch asks 1024
 * bytes more). (An offset, not a pointer: the kernel indexes its __shared__ array, so the
 * compiler keeps shared-window addressing; through a returned pointer it lost it, and a
 * kernel of these pieces spilled.) */
__device__ inline uint32_t ws_smem_pad(const unsigned char *raw) {
  return (1024 - (smem_u32(raw) & 1023)) & 1023;
}

/* Thread 0 sets up the slots' barriers (counts: ws_produce), then the block syncs, or in
 * a cluster (CROSS) the cluster, whose other block arrives at these. */
template <bool FP8, bool CROSS>
__device__ inline void ws_init_slots(uint64_t *full, uint64_t *empty) {
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < 2; s++) {
      mbar_init(&full[2 * s], CROSS ? 129 : 128);
      mbar_init(&full[2 * s + 1], CROSS ? 129 : 128);
      mbar_init(&empty[s], CROSS ? 256 + WS_PEER_RELEASES : 256);
    }
    if (CROSS) fence_mbar_init();
  }
  if (CROSS)
    cluster_sync();
  else
    __syncthreads();
}

#endif
