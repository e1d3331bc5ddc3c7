/* cuda_attn_pairs.cu - sparse MLA attention over bf16 and fp8_ds_mla KV rows, tiles in
 * pairs (sm_90a): the block of cuda_attn_ws.cu (3 warpgroups, one token and 64 heads,
 * 64-row tiles in two slots filled by ws_produce; shape and numerics in
 * cuda_attn_ws.cuh) with the two consumers' work made symmetric. sc_kcuda_attn_ws
 * launches it unless SPARSECP_ATTN_PAIRS=0.
 *
 * Why: in k_attn_ws one consumer computes every tile's S (36 of the tile's 52 wgmma
 * steps of tensor time) and softmax, and the other only half of P V, so the first is the
 * critical path and the tensor cores wait on its softmax (0.68-0.82 of FlashMLA, H200,
 * 2026-12-05). Here, as FlashMLA's SM90 sparse prefill does (their schedule, our code),
 * tile 2i (slot 0) belongs to WG0 and tile 2i + 1 (slot 1) to WG1; each computes S and
 * the softmax of its own tile while the other's products run, and each keeps its half
 * of O's columns, adding P V of both tiles:
 *   WG0: S0 = Q K0^T; m0 = the running max after S0 -> WG1; P0 = 2^(S0 - m0);
 *        O_L = O_L * 2^(m - m0) + P0 V0_L;  [m1 from WG1]  P0 and O_L rescaled to m1;
 *        P0 -> slot 0; O_L += P1 V1_L (P1 from slot 1, in flight under WG0's next S)
 *   WG1: S1 = Q K1^T;  [m0 from WG0]  m1 = the running max after S1 -> WG0;
 *        P1 = 2^(S1 - m1) -> slot 1; O_R = O_R * 2^(m - m1) + P1 V1_R;  [P0]  O_R += P0 V0_R
 * The two maxima pass through shared memory at two named barriers, and each P at one
 * more: it goes into its own slot's rope block (K's columns 512-575), which nothing
 * reads once the slot's S is done, so the slots, Q and a few hundred bytes are all the
 * shared memory (FlashMLA keeps one of its two P there). A slot is released (empty, 256
 * arrivals) once both consumers are done with it: WG0 with S0 and P0 V0_L, WG1 with
 * P0 V0_R, and the reverse for slot 1.
 * Each consumer's l sums its own tiles' P (in the order of the tiles) and the two meet
 * at the end: l = l_WG0 + l_WG1, in that order. A pair without a valid row is skipped by
 * both (they read the same selection entries), and either tile of a pair with none
 * skips its products. */
#include "kernels/cuda/cuda_attn_ws.cuh"

/* named barriers of the two consumers (256 threads: one warpgroup arrives, the other
 * waits, once a pair; each is passed in strict turn, see pair_consume) */
#define PR_BAR_Q 1  /* Q converted */
#define PR_BAR_M0 2 /* WG0 wrote m0 */
#define PR_BAR_M1 3 /* WG1 wrote m1 */
#define PR_BAR_P0 4 /* WG0 wrote P0 into slot 0 */
#define PR_BAR_P1 5 /* WG1 wrote P1 into slot 1 */
#define PR_BAR_L 6  /* both wrote their share of l */

#define PR_P_OFF (8 * WS_CB) /* a slot's P: its rope block, free once its S is done */

struct pair_smem {
  alignas(1024) uint16_t q[WS_BM * WS_D];
  alignas(1024) ws_slot kv[2];
  float m0[WS_BM], m1[WS_BM]; /* per head row: the max after tile 2i, after 2i + 1 */
  float l[2][WS_BM];          /* each consumer's l at the end */
  uint64_t full[2], empty[2];
};

/* P fragments rescaled by be0 (row g) and be1 (row g + 8): only after the max moved by
 * more than 2^8 in the other tile of the pair (rare); bf16 rounded again. */
__device__ inline void pair_scale_p(uint32_t (&pa)[4][4], float be0, float be1) {
  if (be0 == 1.0f && be1 == 1.0f) return;
#pragma unroll
  for (int ks = 0; ks < 4; ks++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const float be = (e & 1) ? be1 : be0;
      const float2 v = __bfloat1622float2(*(const __nv_bfloat162 *)&pa[ks][e]);
      pa[ks][e] = pack_bf16x2(v.x * be, v.y * be);
    }
}

/* l over a row's 4 threads and over both consumers (l_WG0 + l_WG1, the same in both),
 * lse by WG0, and this consumer's half of O stored as O / l. */
__device__ inline void pair_finish(pair_smem &sm, const sc_attn_args &a, const float (&o)[128],
                                   float (&l_run)[2], const float (&m_run)[2], int wg,
                                   int64_t t, int h0) {
  const int tid = threadIdx.x & 127, wr = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int ra = wr * 16 + g;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  if (tq == 0) {
    sm.l[wg][ra] = l_run[0];
    sm.l[wg][ra + 8] = l_run[1];
  }
  named_sync(PR_BAR_L, 256);
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int row = ra + 8 * r, h = h0 + row;
    const float l = sm.l[0][row] + sm.l[1][row];
    inv[r] = l > 0.0f ? 1.0f / l : 0.0f;
    if (wg == 0 && tq == 0 && h < a.n_heads)
      a.lse[t * a.ld_lse + h] = l > 0.0f ? (m_run[r] + log2f(l)) * 0.6931471805599453f : -INFINITY;
  }
  ws_store_o(a, o, inv[0], inv[1], t, h0, wg * WS_HALF, wr, g, tq);
}

/* Releases slot s to the producer, and in a cluster (CROSS) to the other block's too,
 * which writes half of every tile into this block's slots. */
template <bool CROSS>
__device__ inline void pair_release(pair_smem &sm, int s, uint32_t peer_empty) {
  mbar_arrive(&sm.empty[s]);
  if (CROSS) mbar_arrive_remote(peer_empty + 8 * (uint32_t)s);
}

/* A consumer: wg 0 takes tile 2i of each pair and O[:, 0:256], wg 1 tile 2i + 1 and
 * O[:, 256:512] (see the top). One program for both, the roles' differences in small
 * warpgroup-uniform branches: with a copy of the loop for each, ptxas spilled 144 bytes
 * at 216 registers where either copy alone spilled 16.
 * Barrier turns: WG0 passes P1(i) before it arrives at M0(i + 1), and WG1 arrives at
 * P1(i) after it passed M0(i), so no barrier sees two arrivals of one side before the
 * other side's wait; likewise M1 and P0 through M0. */
template <bool CROSS>
__device__ inline void pair_consume(pair_smem &sm, const sc_attn_args &a, int n_tiles, int64_t t,
                                    int h0, int wg) {
  const int tid = threadIdx.x & 127, wr = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int ra = wr * 16 + g;
  float o[128]; /* rows ra, ra + 8, columns 8 j + 2 tq (+ 1): the wgmma D fragment */
#pragma unroll
  for (int i = 0; i < 128; i++) o[i] = 0.0f;
  const float sl2 = a.scale * 1.4426950408889634f; /* scores in log2 units */
  const uint32_t q_base = smem_u32(sm.q);
  const uint32_t mine = smem_u32(sm.kv[wg]), other = smem_u32(sm.kv[wg ^ 1]);
  /* V is N-major: LBO = the next 64 columns (a column block), SBO = the next 8 rows; a
   * consumer's columns are blocks 4 wg .. 4 wg + 3 */
  const uint32_t cols = (uint32_t)(wg * 4 * WS_CB);
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const int32_t *sel = a.sel + t * a.ld_sel;
  int2 nx0 = ws_sel_pair(a, sel, 0, lane), nx1 = ws_sel_pair(a, sel, 1, lane);
  bool owe1 = false; /* WG0: slot 1 of the last pair not released, its P1 V1_L in flight */
  /* CROSS: the other block's empty barriers (its producer writes into these slots too) */
  const uint32_t peer_empty = CROSS ? cluster_addr(sm.empty, cluster_rank() ^ 1) : 0;
  const int n_pairs = (n_tiles + 1) >> 1;
  for (int i = 0; i < n_pairs; i++) {
    const unsigned ph = i & 1;
    const bool has1 = 2 * i + 1 < n_tiles;
    const uint64_t v0 = ws_valid_bits(a, nx0), v1 = ws_valid_bits(a, nx1);
    nx0 = ws_sel_pair(a, sel, 2 * i + 2, lane);
    nx1 = ws_sel_pair(a, sel, 2 * i + 3, lane);
    const uint64_t vm = wg ? v1 : v0, vo = wg ? v0 : v1; /* my tile's valid rows, the other's */
    /* (also before releasing a tile without rows: its zero-fills must land first) */
    if (wg == 0 || has1) {
      mbar_wait(&sm.full[wg], ph);
      fence_async_smem(); /* the copies were generic-proxy writes; wgmma reads async */
    }
    float s[32];
    if (vm) ws_scores(s, q_base, mine); /* (WG0: beside the last pair's P1 V1_L) */
    /* Waits without a condition, here and below, wherever the compiler cannot see which
     * products are in flight: a wait it has to insert itself on a path it thinks
     * divergent serializes every wgmma of the kernel (ptxas C7518). */
    wg_wait0();
    wg_pin(o);
    wg_pin(s);
    if (owe1) {
      pair_release<CROSS>(sm, 1, peer_empty);
      owe1 = false;
    }
    if ((v0 | v1) == 0) {
      pair_release<CROSS>(sm, 0, peer_empty);
      if (has1) pair_release<CROSS>(sm, 1, peer_empty);
      continue;
    }
    const float2 mx = vm ? ws_mask_max(s, vm, sl2, tq) : make_float2(-INFINITY, -INFINITY);
    /* the max after my tile: WG0 from its own, WG1 from WG0's (m0) */
    float m_in[2] = {m_run[0], m_run[1]};
    if (wg) {
      named_sync(PR_BAR_M0, 256);
      m_in[0] = sm.m0[ra];
      m_in[1] = sm.m0[ra + 8];
    }
    const float mm[2] = {ws_next_max(m_in[0], mx.x), ws_next_max(m_in[1], mx.y)};
    if (tq == 0) {
      float *m_out = wg ? sm.m1 : sm.m0;
      m_out[ra] = mm[0];
      m_out[ra + 8] = mm[1];
    }
    named_arrive(wg ? PR_BAR_M1 : PR_BAR_M0, 256);
    uint32_t pa[4][4];
    float2 sum = make_float2(0.0f, 0.0f);
    if (vm) sum = ws_probs(pa, s, mm[0], mm[1]);
    const float al0 = ws_rescale_factor(m_run[0], mm[0]), al1 = ws_rescale_factor(m_run[1], mm[1]);
    m_run[0] = mm[0];
    m_run[1] = mm[1];
    l_run[0] = l_run[0] * al0 + sum.x;
    l_run[1] = l_run[1] * al1 + sum.y;
    ws_rescale(o, al0, al1);
    if (wg) { /* P1 is final (m1 is the pair's max): to WG0 before its registers are read */
      if (vm) {
        ws_store_p((char *)sm.kv[1] + PR_P_OFF, pa, wr, g, tq);
        fence_async_smem(); /* WG0's wgmma reads P1 through the async proxy */
      }
      named_arrive(PR_BAR_P1, 256);
    }
    if (vm) { /* O += P V of my tile, P from registers */
      wg_pin(o);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ks++)
        wgmma_m64n256_rs(o, pa[ks], wg_desc(mine + cols + 2 * ks * 1024, WS_CB, 1024));
      wg_commit();
    }
    if (wg == 0) { /* P0 and O_L to the pair's max m1, P0 to WG1; slot 0 done */
      wg_wait0();
      wg_pin(o);
      if (vm) wg_pin_a(pa);
      named_sync(PR_BAR_M1, 256);
      const float m1[2] = {sm.m1[ra], sm.m1[ra + 8]};
      const float be0 = ws_rescale_factor(mm[0], m1[0]), be1 = ws_rescale_factor(mm[1], m1[1]);
      m_run[0] = m1[0];
      m_run[1] = m1[1];
      l_run[0] *= be0;
      l_run[1] *= be1;
      ws_rescale(o, be0, be1);
      if (vm) {
        pair_scale_p(pa, be0, be1);
        ws_store_p((char *)sm.kv[0] + PR_P_OFF, pa, wr, g, tq);
        fence_async_smem();
      }
      named_arrive(PR_BAR_P0, 256);
      pair_release<CROSS>(sm, 0, peer_empty);
    }
    named_sync(wg ? PR_BAR_P0 : PR_BAR_P1, 256);
    if (vo) { /* O += P V of the other's tile, P from its slot */
      mbar_wait(&sm.full[wg ^ 1], ph);
      fence_async_smem();
      wg_pin(o);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ks++)
        wgmma_m64n256_ss(o, wg_desc(other + PR_P_OFF + 32 * ks, 16, 1024),
                         wg_desc(other + cols + 2 * ks * 1024, WS_CB, 1024));
      wg_commit();
    }
    if (wg) { /* both products done: both slots released */
      wg_wait0();
      wg_pin(o);
      if (vm) wg_pin_a(pa);
      pair_release<CROSS>(sm, 0, peer_empty);
      if (has1) pair_release<CROSS>(sm, 1, peer_empty);
    } else if (vo) {
      owe1 = true; /* WG0 waits for P1 V1_L beside the next pair's S0 */
    } else if (has1) {
      pair_release<CROSS>(sm, 1, peer_empty);
    }
  }
  wg_wait0();
  wg_pin(o);
  if (owe1) pair_release<CROSS>(sm, 1, peer_empty);
  pair_finish(sm, a, o, l_run, m_run, wg, t, h0);
}

/* Registers a thread of each role may hold (setmaxnreg): 216 + 216 + 72 = 504 = 3 x 168,
 * the launch's 168 a thread moved between roles (FlashMLA's split): each consumer holds
 * its half of O (128), S (32) and P (16). CROSS (fp8_ds_mla rows, a token's two head
 * groups in a cluster of two blocks): each producer dequantizes half of every tile for
 * both (ws_fp8_row_cross), FlashMLA's "crossover", since dequantizing is what bounds an
 * fp8 tile; the blocks sync as a cluster after their barriers are set up and before
 * either exits (the other may still write into its slots or arrive at its barriers).
 * Spills (ptxas -v, 2026-12-05): see sc_kcuda_attn_pairs. */
template <bool FP8, bool CROSS>
__global__ void __launch_bounds__(WS_THREADS, 1)
    k_attn_pairs(sc_attn_args a, int64_t kv_step, int *flag) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  pair_smem &sm = *(pair_smem *)(smem_raw + ws_smem_pad(smem_raw));
  const ws_block b = ws_block_of(a);
  const int wg = threadIdx.x >> 7;
  ws_init_slots<FP8, CROSS>(sm.full, sm.empty);
  if (wg == 2) {
    ws_setmaxnreg_dec<72>();
    ws_produce<FP8, CROSS>(sm.kv, sm.full, sm.empty, a, b.sel, b.n_tiles, kv_step, flag);
  } else {
    ws_setmaxnreg_inc<216>();
    ws_load_q(sm.q, a, b.t, b.h0, PR_BAR_Q);
    pair_consume<CROSS>(sm, a, b.n_tiles, b.t, b.h0, wg);
  }
  if (CROSS) cluster_sync();
}

/* fp8_ds_mla rows of a model whose tokens have an even number of 64-head groups (128
 * heads: DeepSeek-V3.2's) take the cluster (c->attn_cross, SPARSECP_ATTN_CROSS=0 turns it
 * off: the baseline of a comparison); the pairs of blocks are a token's groups 2j, 2j + 1,
 * whose selected rows are the same. Spills (ptxas -v, 2026-12-05): none over bf16 rows,
 * 20 bytes over fp8 rows, 36 in clusters, where neither role alone spills at these
 * register counts (208 / 88 and 224 / 56 spilled more). */
int sc_kcuda_attn_pairs(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step) {
  const bool fp8 = a->kv.fmt == SC_KFMT_FP8_DS_MLA;
  const int groups = (a->n_heads + WS_BM - 1) / WS_BM;
  if (fp8 && c->attn_cross && groups % 2 == 0)
    return ws_launch<pair_smem>(c, a, kv_step, k_attn_pairs<true, true>, 2,
                                "sparse_attn (tiles in pairs, clusters)");
  return ws_launch<pair_smem>(c, a, kv_step,
                              fp8 ? k_attn_pairs<true, false> : k_attn_pairs<false, false>, 1,
                              "sparse_attn (tiles in pairs)");
}
