/* cuda_attn_ws.cu - sparse MLA attention over bf16 and fp8_ds_mla KV rows with
 * warpgroups in roles (sm_90a), one warpgroup computing every tile's S and softmax; the
 * shape, the producer and the numerics are cuda_attn_ws.cuh's. sc_kcuda_sparse_attn
 * (cuda_attn.cu) chooses it.
 *
 * Why another kernel: k_attn_wg (cuda_attn.cu) splits S = Q K^T of a 32-row tile over
 * four warpgroups by k and sums their partials through shared memory, and every phase
 * of a tile waits for all 512 threads at a block barrier: 0.39-0.59x FlashMLA on the
 * same shapes (H200, 2026-12-03, bench/kernels-cuda.md), its tensor cores busy about a
 * quarter of the time. Here, after FlashMLA's SM90 sparse kernels (their roles, our
 * code), a block of 3 warpgroups takes one token and 64 heads, tiles of 64 selected rows:
 *  - WG2, the producer (ws_produce), fills two slots; over fp8_ds_mla rows of 128-head
 *    models the two blocks of a token run as a cluster whose producers each dequantize
 *    half of every tile's rows for both (FlashMLA's "crossover"; see ws_produce).
 *    WG0 reads which rows are valid from the selection itself (two loads a thread a
 *    tile, a tile ahead, and two ballots), so no word but the rows passes between the
 *    roles through shared memory.
 *  - WG0 computes S = Q K^T for the whole tile, the online softmax in registers, writes P
 *    (bf16) and each head's rescale of O to shared memory for WG1, and O[:, 0:256] += P V
 *    with P from its registers.
 *  - WG1 waits for P and does O[:, 256:512] += P V with P from shared memory, while WG0
 *    goes on with the next tile's S: the tensor cores run WG1's half of P V beside WG0's
 *    next S. The two meet at two named barriers a tile (P ready, P free).
 * Each consumer keeps its 64 x 256 half of O in registers (128 a thread; the producer
 * gives registers up to the consumers, setmaxnreg). Q (72 KB), the two slots (144 KB)
 * and P (8 KB) fill the shared memory one block may have. A row's l is summed per thread
 * over the tiles and over a head's 4 threads at the end. */
#include "kernels/cuda/cuda_attn_ws.cuh"

/* named barriers of the two consumers (256 threads) */
#define WS_BAR_Q 1      /* Q converted */
#define WS_BAR_PREADY 2 /* WG0 wrote P and alpha of a tile */
#define WS_BAR_PFREE 3  /* WG1 is done reading them (both wait: ws_pfree) */
#define WS_BAR_L 4      /* WG0 wrote 1 / l */

struct ws_smem {
  alignas(1024) uint16_t q[WS_BM * WS_D];
  alignas(1024) ws_slot kv[2];
  alignas(1024) uint16_t p[WS_BM * WS_BN]; /* P, K-major swizzled: A of WG1's P V */
  float alpha[WS_BM]; /* the current tile's rescale of O, per head row */
  float linv[WS_BM];  /* 1 / l at the end (0: no row) */
  uint64_t full[4], empty[2]; /* full[2 s + h]: slot s's half h (WS_LO_BLOCKS) */
};

/* (The synchronization below, ws_produce's and the clusters' included, is modelled step
 * for step in tests/attn_ws_protocol.py and run there under random interleavings:
 * change both together.) */

/* WG0 waits here before it writes a tile's P and alpha, and WG1 after it read the tile
 * before's: both block (WG1 has nothing to do until WG0's next P anyway), from their own
 * code, so unaligned. With WG1 only arriving (bar.arrive), as before 2026-12-05, the
 * order was the same by PTX's barrier semantics, but compute-sanitizer's racecheck took
 * WG1's read of alpha and WG0's next write as a race (15,626 hazards over
 * case_attention_roles, H100): a checker that reports nothing is worth the wait. */
__device__ inline void ws_pfree() { named_sync_unaligned(WS_BAR_PFREE, 256); }

/* Releases slot s to the producer, and in a cluster (CROSS) to the other block's, which
 * writes half of every tile's rows into this block's slots (peer_empty: that block's
 * empty barriers): there one arrival a warp, by lane 0 once the warp's lanes are past
 * their wgmma wait (the warpgroup's reads of the slot are complete by then). */
template <bool CROSS>
__device__ inline void ws_release(ws_smem &sm, int s, uint32_t peer_empty) {
  mbar_arrive(&sm.empty[s]);
  if (CROSS) {
    __syncwarp();
    if ((threadIdx.x & 31) == 0) mbar_arrive_remote(peer_empty + 8 * (uint32_t)s);
  }
}

/* WG0: S, the softmax, P and alpha for WG1, and O[:, 0:256] (see the top). */
template <bool CROSS>
__device__ inline void ws_consume0(ws_smem &sm, const sc_attn_args &a, int n_tiles, int64_t t,
                                   int h0) {
  const auto [wr, lane, g, tq] = ws_place_of();
  float o[128]; /* rows wr * 16 + g (+ 8), columns 8 j + 2 tq (+ 1): the wgmma D fragment */
  ws_zero(o);
  const float sl2 = a.scale * 1.4426950408889634f; /* scores in log2 units */
  const uint32_t q_base = smem_u32(sm.q);
  const uint32_t peer_empty = CROSS ? cluster_addr(sm.empty, cluster_rank() ^ 1) : 0;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f}; /* rows g, g + 8 */
  const int32_t *sel = a.sel + t * a.ld_sel;
  int2 sel_next = ws_sel_pair(a, sel, 0, lane); /* this lane's entries of the next tile */
  for (int tile = 0; tile < n_tiles; tile++) {
    const int s = tile & 1;
    mbar_wait(&sm.full[2 * s], (tile >> 1) & 1);
    fence_async_smem(); /* the copies were generic-proxy writes; wgmma reads async */
    const uint64_t vb = ws_valid_bits(a, sel_next);
    sel_next = ws_sel_pair(a, sel, tile + 1, lane);
    if (vb == 0) { /* no valid row: skipped (see ws_consume1), the barriers kept */
      mbar_wait(&sm.full[2 * s + 1], (tile >> 1) & 1);
      if (tile > 0) ws_pfree();
      named_arrive(WS_BAR_PREADY, 256);
      ws_release<CROSS>(sm, s, peer_empty);
      continue;
    }
    const uint32_t kv_base = smem_u32(sm.kv[s]);
    float sacc[32];
    ws_scores(sacc, q_base, kv_base, &sm.full[2 * s + 1], (tile >> 1) & 1);
    wg_wait0();
    wg_pin(sacc);
    const float2 mx = ws_mask_max(sacc, vb, sl2, tq);
    float al[2];
    const float m_new[2] = {ws_next_max(m_run[0], mx.x), ws_next_max(m_run[1], mx.y)};
#pragma unroll
    for (int r = 0; r < 2; r++) {
      al[r] = ws_rescale_factor(m_run[r], m_new[r]);
      m_run[r] = m_new[r];
    }
    uint32_t pa[4][4]; /* P as the A fragments of the 4 k16 steps of P V */
    const float2 sum = ws_probs(pa, sacc, sl2, m_run[0], m_run[1]);
    l_run[0] = l_run[0] * al[0] + sum.x;
    l_run[1] = l_run[1] * al[1] + sum.y;
    /* P and alpha to WG1, once it is done with the last tile's */
    if (tile > 0) ws_pfree();
    ws_store_p((char *)sm.p, pa, wr, g, tq);
    if (tq == 0) {
      sm.alpha[wr * 16 + g] = al[0];
      sm.alpha[wr * 16 + g + 8] = al[1];
    }
    fence_async_smem(); /* WG1's wgmma reads P through the async proxy */
    named_arrive(WS_BAR_PREADY, 256);
    /* O[:, 0:256] = O * alpha + P V; V is N-major: LBO = the next 64 columns (a column
     * block of the tile), SBO = the next 8 rows; WG0's columns are blocks 0-3 */
    sc_attn_rescale(o, al[0], al[1]);
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
    ws_release<CROSS>(sm, s, peer_empty);
  }
  /* l over a row's 4 threads; 1 / l to WG1; lse = (m + log2 l) ln 2 */
  ws_row_sums(l_run);
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
  ws_store_o(a, o, sm.linv[wr * 16 + g], sm.linv[wr * 16 + g + 8], t, h0, 0, wr, g, tq);
}

/* WG1: O[:, 256:512] with WG0's P (see the top). */
template <bool CROSS>
__device__ inline void ws_consume1(ws_smem &sm, const sc_attn_args &a, int n_tiles, int64_t t,
                                   int h0) {
  const auto [wr, lane, g, tq] = ws_place_of();
  float o[128];
  ws_zero(o);
  const uint64_t dp = wg_desc(smem_u32(sm.p), 16, 1024);
  const uint32_t peer_empty = CROSS ? cluster_addr(sm.empty, cluster_rank() ^ 1) : 0;
  const int32_t *sel = a.sel + t * a.ld_sel;
  int2 sel_next = ws_sel_pair(a, sel, 0, lane);
  for (int tile = 0; tile < n_tiles; tile++) {
    const int s = tile & 1;
    /* A tile without a valid row leaves m, l and O as they are to the bit (alpha exactly
     * 1, P exactly 0), so both consumers skip its products: a decode token at a short
     * context selects fewer rows than top-K and its list ends in -1 (model-deep's 2048
     * slots at a 64-token context are 31 such tiles of 32). */
    const uint64_t vb = ws_valid_bits(a, sel_next);
    sel_next = ws_sel_pair(a, sel, tile + 1, lane);
    named_sync(WS_BAR_PREADY, 256); /* P and alpha of this tile; its slot is full */
    if (vb == 0) {
      ws_release<CROSS>(sm, s, peer_empty);
      if (tile + 1 < n_tiles) ws_pfree();
      continue;
    }
    fence_async_smem();
    sc_attn_rescale(o, sm.alpha[wr * 16 + g], sm.alpha[wr * 16 + g + 8]);
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
    ws_release<CROSS>(sm, s, peer_empty);
    if (tile + 1 < n_tiles) ws_pfree();
  }
  named_sync(WS_BAR_L, 256);
  ws_store_o(a, o, sm.linv[wr * 16 + g], sm.linv[wr * 16 + g + 8], t, h0, WS_HALF, wr, g, tq);
}

/* Registers a thread of each role may hold (setmaxnreg, WS_REGS_*): 208 + 176 + 120 = 504
 * = 3 x 168, the launch's 168 a thread (65536 / 384, in 8s) moved between roles; more than
 * the producer gives up would leave an inc waiting forever. WG0 holds its half of O
 * (128), S (32) and P (16); WG1 its half of O (176; since 2026-12-06 ptxas fits it in
 * 168 too, not measured). In a
 * cluster (CROSS, see ws_produce) the blocks sync once their barriers are set up and
 * again before either exits: the other block writes into this one's slots and arrives
 * at its barriers until its last tile. */
template <bool FP8, bool CROSS>
__global__ void __launch_bounds__(WS_THREADS, 1)
    k_attn_ws(sc_attn_args a, int64_t kv_step, int *flag) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  ws_smem &sm = *(ws_smem *)(smem_raw + ws_smem_pad(smem_raw));
  const ws_block b = ws_block_of(a);
  const int wg = threadIdx.x >> 7;
  ws_init_slots<FP8, CROSS>(sm.full, sm.empty);
  if (wg == 2) {
    ws_setmaxnreg_dec<WS_REGS_PRODUCER>();
    ws_produce<FP8, CROSS>(sm.kv, sm.full, sm.empty, a, b.sel, b.n_tiles, kv_step, flag);
  } else if (wg == 0) {
    ws_setmaxnreg_inc<WS_REGS_WG0>();
    ws_load_q(sm.q, a, b.t, b.h0, WS_BAR_Q);
    ws_consume0<CROSS>(sm, a, b.n_tiles, b.t, b.h0);
  } else {
    ws_setmaxnreg_inc<WS_REGS_WG1>();
    ws_load_q(sm.q, a, b.t, b.h0, WS_BAR_Q);
    ws_consume1<CROSS>(sm, a, b.n_tiles, b.t, b.h0);
  }
  if (CROSS) cluster_sync();
}

/* fp8_ds_mla rows of a model whose tokens have an even number of 64-head groups (128
 * heads: DeepSeek-V3.2's) run a token's groups 2j, 2j + 1 as a cluster of two blocks
 * that dequantize for each other (c->attn_cross; SPARSECP_ATTN_CROSS=0: one block a
 * group): on one H200 (2026-12-05, bench/kernels-cuda.md) 330 TFLOP/s on the decode case
 * against 247 one block a group. */
static bool ws_clusters(const sc_kcuda *c, const sc_attn_args *a) {
  return a->kv.fmt == SC_KFMT_FP8_DS_MLA && c->attn_cross && (a->n_heads + 63) / 64 % 2 == 0;
}
int sc_kcuda_attn_ws(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step) {
  static_assert(sizeof(ws_smem) + 1024 <= SC_KCUDA_SMEM_MAX, "one block's shared memory");
  const size_t smem = sizeof(ws_smem) + 1024; /* + alignment of the swizzle atoms */
  if (ws_clusters(c, a))
    return sc_attn_launch_groups(c, a, kv_step, k_attn_ws<true, true>, WS_THREADS, smem, 2,
                                 "sparse_attn (warpgroups in roles, clusters)");
  void (*const kern)(sc_attn_args, int64_t, int *) =
      a->kv.fmt == SC_KFMT_FP8_DS_MLA ? k_attn_ws<true, false> : k_attn_ws<false, false>;
  return sc_attn_launch_groups(c, a, kv_step, kern, WS_THREADS, smem, 1,
                               "sparse_attn (warpgroups in roles)");
}
