/* cuda_attn_pairs.cu - sparse MLA attention over bf16 and fp8_ds_mla KV rows, tiles in
 * pairs (sm_90a): the block of cuda_attn_ws.cu (3 warpgroups, one token and 64 heads,
 * 64-row tiles in two slots; shape and numerics in cuda_attn_ws.cuh) with the two
 * consumers' work made symmetric and the slots handed over by halves. sc_kcuda_attn_ws
 * launches it over fp8_ds_mla rows in clusters (below), the one case where it measured
 * faster (SPARSECP_ATTN_PAIRS=1: always, =0: never).
 *
 * Measured (one H100, 2026-12-05, bench/kernels-cuda.md): the symmetric schedule did not
 * pay by itself. k_attn_ws, with the same exp2 and q loading, ran 8% faster on bf16 rows
 * (352 against 326 TFLOP/s decode, 391 against 364 prefill); the pairs win over fp8 rows
 * only through the clusters (272 against ws's 249; one block a group they lost). Why
 * was not profiled: the handovers at four named barriers a pair and the P exchange are
 * the likely cost.
 *
 * The reasoning that led here: in k_attn_ws one consumer computes every tile's S (36
 * wgmma m64n64k16, about half the tile's tensor work) and softmax, and the other only
 * half of P V, so the first is the critical path and the tensor cores wait on its
 * softmax (0.68-0.82 of FlashMLA, H200, 2026-12-05). Here, as FlashMLA's SM90 sparse
 * prefill does (their schedule, our code), tile 2i (slot 0) belongs to WG0 and tile
 * 2i + 1 (slot 1) to WG1; each computes S and the softmax of its own tile while the
 * other's products run, and each keeps its half of O's columns, adding P V of both tiles:
 *   WG0: S0 = Q K0^T; m0 = the running max after S0 -> WG1; P0 = 2^(S0 - m0);
 *        O_L = O_L * 2^(m - m0) + P0 V0_L;  [m1 from WG1]  P0 and O_L rescaled to m1;
 *        P0 -> slot 0; O_L += P1 V1_L (in flight under WG0's next S0)
 *   WG1: S1 = Q K1^T;  [m0 from WG0]  m1 = the running max after S1 -> WG0;
 *        P1 = 2^(S1 - m1) -> p1; O_R = O_R * 2^(m - m1) + P1 V1_R;  [P0]  O_R += P0 V0_R
 * The two maxima pass through shared memory at two named barriers, and each P at one
 * more: P0 into slot 0's rope block (K's columns 512-575, which nothing reads once S0 is
 * done), P1 into p1.
 *
 * Halves. A slot is two halves, L (column blocks 0-3: K's and V's columns 0-255) and R
 * (blocks 4-8), each with its own full and empty barrier, so that a half is refilled as
 * soon as its last reader is done rather than when the whole tile is:
 *   slot 0 L: S0 and P0 V0_L, both WG0's: released by WG0 after its own P V;
 *   slot 0 R: S0 (WG0) and P0 V0_R with P0 in it (WG1, after P0 was written): by WG1;
 *   slot 1 R: S1 and P1 V1_R, both WG1's: by WG1;
 *   slot 1 L: S1 (WG1) and P1 V1_L (WG0, after P1 was written): by WG0.
 * The producer fills a pair's halves in the order 0L, 1R, 0R, 1L (pair_produce), and
 * WG0 scores its tile L then R, WG1 R then L, each starting on the half that comes first.
 * p1 is free again when WG0 releases slot 1 L (WG1 waits for that barrier before writing
 * the next P1).
 *
 * Clusters (fp8_ds_mla rows, a token's two 64-head groups: 128 heads): dequantizing is
 * what bounds an fp8 tile, so the two blocks of a cluster each dequantize half of every
 * tile's rows, once for both, writing each 16 bytes into their own slot and by st.async
 * into the other's (FlashMLA's "crossover"). A half's full barrier then also expects the
 * other block's bytes, its empty barrier also counts the other block's consumers, and
 * the blocks sync as a cluster after setting up their barriers and before either exits.
 *
 * The protocol (these barriers, the halves, the wgmma groups and what each role reads and
 * writes) is modelled step for step in tests/attn_pairs_protocol.py, which runs it under
 * random interleavings on the CPU (no deadlock, race or misread, and broken variants
 * caught): change both together.
 *
 * Each consumer's l sums its own tiles' P (in the order of the tiles) and the two meet
 * at the end: l = l_WG0 + l_WG1, in that order. A pair without a valid row is skipped by
 * both (they read the same selection entries), and either tile of a pair with none
 * skips its products. */
#include "kernels/cuda/cuda_attn_ws.cuh"

/* named barriers of the two consumers (256 threads; at M0-P1 one warpgroup arrives and
 * the other waits, once a pair, in strict turn: see pair_consume; at Q and L both wait) */
#define PR_BAR_Q 1  /* Q converted */
#define PR_BAR_M0 2 /* WG0 wrote m0 */
#define PR_BAR_M1 3 /* WG1 wrote m1 */
#define PR_BAR_P0 4 /* WG0 wrote P0 into slot 0 */
#define PR_BAR_P1 5 /* WG1 wrote P1 into p1 */
#define PR_BAR_L 6  /* both wrote their share of l */

#define PR_P_OFF (8 * WS_CB) /* P0: slot 0's rope block, free once S0 is done */
#define PR_L 0               /* a slot's halves: column blocks 0-3 */
#define PR_R 1               /* and 4-8 */
/* Bytes the other block of a cluster writes into half h of a slot: its 32 rows, bf16. */
#define PR_CROSS_TX(h) ((WS_BN / 2) * ((h) ? 5 : 4) * 128)

struct pair_smem {
  alignas(1024) uint16_t q[WS_BM * WS_D];
  alignas(1024) ws_slot kv[2];
  alignas(1024) uint16_t p1[WS_BM * WS_BN]; /* P1, K-major swizzled: A of WG0's P1 V1_L */
  float m0[WS_BM], m1[WS_BM]; /* per head row: the max after tile 2i, after 2i + 1 */
  float l[2][WS_BM];          /* each consumer's l at the end */
  uint64_t full[2][2], empty[2][2]; /* [slot][half] */
};

/* ---- the producer ---- */

/* Half H of one row of a slot: its 16-byte parts p0 + 4 m (column block m / 2) for m in
 * 0-7 (L) or 8-17 (R). bf16 rows by cp.async; fp8_ds_mla rows dequantized through
 * registers (the half's 8 parts of e4m3 values, loaded before any is converted, times
 * their 128-value tile's scale), the rope (m 16, 17) copied through them too, and in a
 * cluster (CROSS) each 16 bytes also written by st.async into the other block's slot
 * (counted on its full barrier peer_full). A row not read is zeros. */
template <bool FP8, bool CROSS, bool HINTS, int H>
__device__ inline void pair_fill_half(char *slot, uint32_t peer_slot, uint32_t peer_full,
                                      const char *src, bool ok, int row, int p0, uint64_t pol) {
  constexpr int M0 = H ? 8 : 0, M1 = H ? 18 : 8;
  const uint32_t rb = (uint32_t)((row >> 3) * 1024 + (row & 7) * 128);
  if (!FP8) {
#pragma unroll 2
    for (int m = M0; m < M1; m++) {
      const int part = p0 + 4 * m;
      char *dst = slot + (m >> 1) * WS_CB + rb + (((part & 7) ^ (row & 7)) << 4);
      if (HINTS)
        cp_async16_hint(dst, src + (ok ? part * 16 : 0), ok, pol);
      else
        cp_async16(dst, src + (ok ? part * 16 : 0), ok);
    }
    return;
  }
  uint2 v[8];
  float2 sc = make_float2(0.f, 0.f);
  uint4 rope[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
  if (ok) {
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const char *at = src + 8 * (p0 + 4 * (M0 + k));
      v[k] = HINTS ? ld_nc_u2_hint(at, pol) : *(const uint2 *)at;
    }
    sc = *(const float2 *)(src + SC_FP8_SCALE_OFF + 8 * H); /* the half's two tiles */
    if (H)
#pragma unroll
      for (int k = 0; k < 2; k++)
        rope[k] = *(const uint4 *)(src + SC_FP8_ROPE_OFF + 16 * (p0 + 4 * k));
  }
#pragma unroll
  for (int m = M0; m < M1; m++) {
    const int part = p0 + 4 * m;
    const uint4 w = m >= 16 ? rope[m - 16]
                    : ok    ? e4m3x8_to_bf16x8(v[m - M0], ((m - M0) >> 2) ? sc.y : sc.x)
                            : make_uint4(0, 0, 0, 0);
    const uint32_t off = (uint32_t)((m >> 1) * WS_CB) + rb + (((part & 7) ^ (row & 7)) << 4);
    *(uint4 *)(slot + off) = w;
    if (CROSS) st_async16(peer_slot + off, w, peer_full);
  }
}

/* Fills half H of slot s with the rows `rows` of this thread (ROWS of them: rows r0 and
 * r0 + 32 of the tile, or in a cluster r0 + 32 rank alone) once the half's readers of
 * the pair before released it, and announces it: 128 arrivals as the copies land (bf16)
 * or after the stores and the fence for wgmma's async proxy (fp8); in a cluster one more
 * that posts the other block's bytes. */
template <bool FP8, bool CROSS, bool HINTS, int H, int ROWS>
__device__ inline void pair_produce_half(pair_smem &sm, const sc_attn_args &a, int s, int pair,
                                         const int32_t (&rows)[ROWS], int r0, int p0,
                                         unsigned peer, int64_t kv_step, int *flag,
                                         uint64_t pol) {
  if (pair > 0) mbar_wait<CROSS>(&sm.empty[s][H], (pair - 1) & 1);
  if (CROSS && (threadIdx.x & 127) == 0) mbar_arrive_expect_tx(&sm.full[s][H], PR_CROSS_TX(H));
  char *slot = (char *)sm.kv[s];
  const uint32_t peer_slot = CROSS ? cluster_addr(slot, peer) : 0;
  const uint32_t peer_full = CROSS ? cluster_addr(&sm.full[s][H], peer) : 0;
#pragma unroll
  for (int k = 0; k < ROWS; k++) {
    const int32_t r = rows[k];
    const bool ok = ws_row_ok(a, r);
    if (p0 == 0 && !ok && r != -1) sc_dev_raise(flag, SC_ERANGE);
    const char *src = (const char *)a.kv.data + (ok ? (int64_t)r * kv_step : 0);
    pair_fill_half<FP8, CROSS, HINTS, H>(slot, peer_slot, peer_full, src, ok, r0 + 32 * k, p0,
                                         pol);
  }
  if (FP8) {
    fence_async_smem();
    mbar_arrive(&sm.full[s][H]);
  } else {
    mbar_arrive_cp_async(&sm.full[s][H]);
  }
}

/* The producer warpgroup: each pair's halves in the order 0L, 1R, 0R, 1L (see the top);
 * thread (warp w, lane l) fills rows w * 8 + l % 8 (+ 32) of a tile, 16-byte parts
 * l / 8 + 4 m, as ws_produce does; row indices are read a pair ahead. */
template <bool FP8, bool CROSS, bool HINTS>
__device__ inline void pair_produce(pair_smem &sm, const sc_attn_args &a, const int32_t *sel,
                                    int n_tiles, int64_t kv_step, int *flag) {
  static_assert(FP8 || !CROSS, "a cluster shares dequantized rows only");
  constexpr int ROWS = CROSS ? 1 : 2;
  const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, p0 = lane >> 3;
  const unsigned peer = CROSS ? cluster_rank() ^ 1 : 0;
  const int r0 = warp * 8 + (lane & 7) + (CROSS ? 32 * (int)(peer ^ 1) : 0);
  const int n_pairs = (n_tiles + 1) >> 1;
  const uint64_t pol = HINTS ? l2_evict_last() : 0;
  int32_t nxt[2][ROWS]; /* this thread's rows of the next pair's two tiles */
#pragma unroll
  for (int t = 0; t < 2; t++)
#pragma unroll
    for (int k = 0; k < ROWS; k++) {
      const int j = t * WS_BN + r0 + 32 * k;
      nxt[t][k] = t < n_tiles && j < a.topk ? sel[j] : -1;
    }
  for (int i = 0; i < n_pairs; i++) {
    int32_t c0[ROWS], c1[ROWS];
#pragma unroll
    for (int k = 0; k < ROWS; k++) {
      c0[k] = nxt[0][k];
      c1[k] = nxt[1][k];
    }
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
      for (int k = 0; k < ROWS; k++) {
        const int tile = 2 * i + 2 + t, j = tile * WS_BN + r0 + 32 * k;
        nxt[t][k] = tile < n_tiles && j < a.topk ? sel[j] : -1;
      }
    const bool has1 = 2 * i + 1 < n_tiles;
    pair_produce_half<FP8, CROSS, HINTS, PR_L>(sm, a, 0, i, c0, r0, p0, peer, kv_step, flag,
                                               pol);
    if (has1)
      pair_produce_half<FP8, CROSS, HINTS, PR_R>(sm, a, 1, i, c1, r0, p0, peer, kv_step, flag,
                                                 pol);
    pair_produce_half<FP8, CROSS, HINTS, PR_R>(sm, a, 0, i, c0, r0, p0, peer, kv_step, flag,
                                               pol);
    if (has1)
      pair_produce_half<FP8, CROSS, HINTS, PR_L>(sm, a, 1, i, c1, r0, p0, peer, kv_step, flag,
                                                 pol);
  }
  cp_async_wait_all(); /* (no copy outlives its thread) */
}

/* ---- the consumers ---- */

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
  const auto [wr, lane, g, tq] = ws_place_of();
  const int ra = wr * 16 + g;
  ws_row_sums(l_run);
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

/* Waits until half h of slot s holds pair `ph`'s rows (the copies were generic-proxy
 * writes, or the other block's st.async; wgmma reads through the async proxy). */
__device__ inline void pair_wait_full(pair_smem &sm, int s, int h, unsigned ph) {
  mbar_wait(&sm.full[s][h], ph);
  fence_async_smem();
}

/* Releases half h of slot s to the producer, and in a cluster (CROSS) to the other
 * block's too, which writes half of every tile's rows into this block's slots. */
template <bool CROSS>
__device__ inline void pair_release(pair_smem &sm, int s, int h, uint32_t peer_empty) {
  mbar_arrive(&sm.empty[s][h]);
  if (CROSS) mbar_arrive_remote(peer_empty + 8 * (uint32_t)(2 * s + h));
}

/* A consumer: wg 0 takes tile 2i of each pair and O[:, 0:256], wg 1 tile 2i + 1 and
 * O[:, 256:512] (see the top). One program for both, the roles' differences in small
 * warpgroup-uniform branches: with a copy of the loop for each, ptxas spilled 144 bytes
 * at 216 registers where either copy alone spilled 16. Waits on wgmma groups stand
 * without a condition wherever the compiler cannot see which products are in flight: a
 * wait it has to insert itself on a path it thinks divergent serializes every wgmma of
 * the kernel (ptxas C7518, C7520; committing empty groups did the same), and the
 * releases that follow them go by which groups were committed.
 * Barrier turns: WG0 passes P1(i) before it arrives at M0(i + 1), and WG1 arrives at
 * P1(i) after it passed M0(i), so no barrier sees two arrivals of one side before the
 * other side's wait; likewise M1 and P0 through M0. */
template <bool CROSS>
__device__ inline void pair_consume(pair_smem &sm, const sc_attn_args &a, int n_tiles, int64_t t,
                                    int h0, int wg) {
  const auto [wr, lane, g, tq] = ws_place_of();
  const int ra = wr * 16 + g;
  float o[128]; /* rows ra, ra + 8, columns 8 j + 2 tq (+ 1): the wgmma D fragment */
  ws_zero(o);
  const float sl2 = a.scale * 1.4426950408889634f; /* scores in log2 units */
  const uint32_t q_base = smem_u32(sm.q);
  const uint32_t mine = smem_u32(sm.kv[wg]), other = smem_u32(sm.kv[wg ^ 1]);
  /* V is N-major: LBO = the next 64 columns (a column block), SBO = the next 8 rows; a
   * consumer's columns are blocks 4 wg .. 4 wg + 3, the half it releases of its own slot
   * after its P V (WG0: slot 0 L; WG1: slot 1 R) */
  const uint32_t cols = (uint32_t)(wg * 4 * WS_CB);
  /* the other tile's P: WG0 reads P1 from p1, WG1 P0 from slot 0's rope block */
  const uint32_t p_other = wg ? smem_u32(sm.kv[0]) + PR_P_OFF : smem_u32(sm.p1);
  char *const p_mine = wg ? (char *)sm.p1 : (char *)sm.kv[0] + PR_P_OFF;
  const int h_mine = wg ? PR_R : PR_L; /* the half of my slot I release after my P V */
  /* my tile's S half by half as they land: WG0 L first (k16 steps 0-15, then R's
   * 16-35), WG1 R first (steps 16-31, then 32-35 and L's 0-15: the same 16 steps before
   * the second half's wait); both halves are waited for even without a valid row, since
   * their zero-fills must land before the halves are released */
  const int h_first = h_mine, rot = wg ? 16 : 0;
  /* CROSS: the other block's empty barriers (its producer writes into these slots too) */
  const uint32_t peer_empty = CROSS ? cluster_addr(sm.empty, cluster_rank() ^ 1) : 0;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const int32_t *sel = a.sel + t * a.ld_sel;
  int2 nx0 = ws_sel_pair(a, sel, 0, lane), nx1 = ws_sel_pair(a, sel, 1, lane);
  bool owe1 = false; /* WG0: slot 1 L of the last pair not released, its P1 V1_L in flight */
  const int n_pairs = (n_tiles + 1) >> 1;
  for (int i = 0; i < n_pairs; i++) {
    const unsigned ph = i & 1;
    const bool has1 = 2 * i + 1 < n_tiles;
    const uint64_t v0 = ws_valid_bits(a, nx0), v1 = ws_valid_bits(a, nx1);
    nx0 = ws_sel_pair(a, sel, 2 * i + 2, lane);
    nx1 = ws_sel_pair(a, sel, 2 * i + 3, lane);
    const uint64_t vm = wg ? v1 : v0, vo = wg ? v0 : v1; /* my tile's valid rows, the other's */
    float s[32];
    if (wg == 0 || has1) pair_wait_full(sm, wg, h_first, ph);
    if (vm) {
      ws_scores_rotated<0, 16>(s, q_base, mine, rot);
      wg_commit();
    }
    wg_wait1(); /* WG0, S0's first steps committed: the last pair's P1 V1_L is done (no pin
                 * of O here: the compiler cannot tell which group is left) */
    if (owe1 && vm) {
      pair_release<CROSS>(sm, 1, PR_L, peer_empty);
      owe1 = false;
    }
    if (wg == 0 || has1) pair_wait_full(sm, wg, h_first ^ 1, ph);
    if (vm) {
      ws_scores_rotated<16, WS_KSTEPS>(s, q_base, mine, rot);
      wg_commit();
    }
    wg_wait0();
    wg_pin(o);
    wg_pin(s);
    if (owe1) { /* (no S0 this pair: the wait above was the one) */
      pair_release<CROSS>(sm, 1, PR_L, peer_empty);
      owe1 = false;
    }
    if ((v0 | v1) == 0) { /* nothing to add: both halves of both slots released */
      if (wg == 0) {
        pair_release<CROSS>(sm, 0, PR_L, peer_empty);
        if (has1) {
          pair_wait_full(sm, 1, PR_L, ph);
          pair_release<CROSS>(sm, 1, PR_L, peer_empty);
        }
      } else {
        if (has1) pair_release<CROSS>(sm, 1, PR_R, peer_empty);
        pair_wait_full(sm, 0, PR_R, ph);
        pair_release<CROSS>(sm, 0, PR_R, peer_empty);
      }
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
    if (vm) sum = ws_probs(pa, s, sl2, mm[0], mm[1]);
    const float al0 = ws_rescale_factor(m_run[0], mm[0]), al1 = ws_rescale_factor(m_run[1], mm[1]);
    m_run[0] = mm[0];
    m_run[1] = mm[1];
    l_run[0] = l_run[0] * al0 + sum.x;
    l_run[1] = l_run[1] * al1 + sum.y;
    sc_attn_rescale(o, al0, al1);
    if (vm) { /* O += P V of my tile, P from registers */
      wg_pin(o);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ks++)
        wgmma_m64n256_rs(o, pa[ks], wg_desc(mine + cols + 2 * ks * 1024, WS_CB, 1024));
      wg_commit();
    }
    if (wg) { /* P1 is final (m1 is the pair's max): to WG0, once it read the last one
               * (implied already: WG0 waited for all its groups before M0; kept as
               * insurance, it costs a test of a completed barrier). Stored while P1 V1_R
               * runs (the wgmma only reads pa), as FlashMLA's WG1 does: the tensor cores
               * start on it before the stores. */
      if (vm) {
        if (i > 0) mbar_wait(&sm.empty[1][PR_L], (i - 1) & 1);
        ws_store_p(p_mine, pa, wr, g, tq);
        fence_async_smem(); /* WG0's wgmma reads P1 through the async proxy */
      }
      named_arrive(PR_BAR_P1, 256);
    }
    if (wg == 0) { /* P0 and O_L to the pair's max m1, P0 to WG1 */
      wg_wait0();
      wg_pin(o);
      if (vm) wg_pin_a(pa);
      pair_release<CROSS>(sm, 0, PR_L, peer_empty); /* S0 and P0 V0_L done */
      named_sync(PR_BAR_M1, 256);
      const float m1[2] = {sm.m1[ra], sm.m1[ra + 8]};
      const float be0 = ws_rescale_factor(mm[0], m1[0]), be1 = ws_rescale_factor(mm[1], m1[1]);
      m_run[0] = m1[0];
      m_run[1] = m1[1];
      l_run[0] *= be0;
      l_run[1] *= be1;
      sc_attn_rescale(o, be0, be1);
      wg_pin(o);
      if (vm) {
        pair_scale_p(pa, be0, be1);
        ws_store_p(p_mine, pa, wr, g, tq);
        fence_async_smem();
      }
      named_arrive(PR_BAR_P0, 256);
    }
    named_sync(wg ? PR_BAR_P0 : PR_BAR_P1, 256);
    /* O += P V of the other's tile, P from shared memory; its V is the half of the other
     * slot that I release (WG0: slot 1 L; WG1: slot 0 R) */
    const int h_other = wg ? PR_R : PR_L;
    if (wg || has1) pair_wait_full(sm, wg ^ 1, h_other, ph);
    if (vo) { /* (no pin here: WG1's O is in flight; WG0 pinned its rescale above) */
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ks++)
        wgmma_m64n256_ss(o, wg_desc(p_other + 32 * ks, 16, 1024),
                         wg_desc(other + cols + 2 * ks * 1024, WS_CB, 1024));
      wg_commit();
    }
    if (wg) { /* my P V, then the other's: each half released when read (with both in
               * flight, the first wait leaves the other's, the newer) */
      wg_wait1(); /* (no pins between: O may still be in flight) */
      if (has1 && vo) pair_release<CROSS>(sm, 1, h_mine, peer_empty);
      wg_wait0();
      wg_pin(o);
      if (vm) wg_pin_a(pa);
      if (has1 && !vo) pair_release<CROSS>(sm, 1, h_mine, peer_empty);
      pair_release<CROSS>(sm, 0, h_other, peer_empty);
    } else if (vo) {
      owe1 = true; /* WG0 waits for P1 V1_L beside the next pair's S0 */
    } else if (has1) {
      pair_release<CROSS>(sm, 1, h_other, peer_empty);
    }
  }
  wg_wait0();
  wg_pin(o);
  if (owe1) pair_release<CROSS>(sm, 1, PR_L, peer_empty);
  pair_finish(sm, a, o, l_run, m_run, wg, t, h0);
}

/* Thread 0 sets up the halves' barriers: full 128 arrivals (the producer's threads; in a
 * cluster one more, which posts the other block's bytes), empty 128 (the consumer that
 * releases the half; in a cluster 256, the other block's too). Then the block syncs, or
 * the cluster (the other block arrives at these). */
template <bool CROSS>
__device__ inline void pair_init(pair_smem &sm) {
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < 2; s++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        mbar_init(&sm.full[s][h], CROSS ? 129 : 128);
        mbar_init(&sm.empty[s][h], CROSS ? 256 : 128);
      }
    if (CROSS) fence_mbar_init();
  }
  if (CROSS)
    cluster_sync();
  else
    __syncthreads();
}

/* Registers a thread of each role may hold (setmaxnreg): 216 + 216 + 72 = 504 = 3 x 168,
 * the launch's 168 a thread moved between roles (FlashMLA's split): each consumer holds
 * its half of O (128), S (32) and P (16). ptxas -v (2026-12-05): no spills in any of the
 * six instances. */
template <bool FP8, bool CROSS, bool HINTS>
__global__ void __launch_bounds__(WS_THREADS, 1)
    k_attn_pairs(sc_attn_args a, int64_t kv_step, int *flag) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  pair_smem &sm = *(pair_smem *)(smem_raw + ws_smem_pad(smem_raw));
  const ws_block b = ws_block_of(a);
  const int wg = threadIdx.x >> 7;
  pair_init<CROSS>(sm);
  if (wg == 2) {
    ws_setmaxnreg_dec<72>();
    pair_produce<FP8, CROSS, HINTS>(sm, a, b.sel, b.n_tiles, kv_step, flag);
  } else {
    ws_setmaxnreg_inc<216>();
    ws_load_q(sm.q, a, b.t, b.h0, PR_BAR_Q);
    pair_consume<CROSS>(sm, a, b.n_tiles, b.t, b.h0, wg);
  }
  if (CROSS) cluster_sync();
}

/* fp8_ds_mla rows of a model whose tokens have an even number of 64-head groups (128
 * heads: DeepSeek-V3.2's) take the cluster (c->attn_cross; SPARSECP_ATTN_CROSS=0 turns it
 * off: the baseline of a comparison); a cluster's blocks are a token's groups 2j, 2j + 1,
 * whose selected rows are the same. With c->attn_hints (SPARSECP_ATTN_HINTS=1) the
 * producer's loads carry FlashMLA's L2 hints (keep the rows, which other tokens select
 * too; fetch the 256 bytes around each read, the rest of its row): off by default, as
 * they cost fp8 decode 3% (271.6 against 263.2 TFLOP/s without, H100, 2026-12-05) and
 * moved bf16 rows and prefill by under 1%. */
int sc_kcuda_attn_pairs(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step) {
  const bool fp8 = a->kv.fmt == SC_KFMT_FP8_DS_MLA, hints = c->attn_hints != 0;
  static_assert(sizeof(pair_smem) + 1024 <= SC_KCUDA_SMEM_MAX, "one block's shared memory");
  const size_t smem = sizeof(pair_smem) + 1024; /* + alignment of the swizzle atoms */
  if (sc_attn_clusters(c, a))
    return sc_attn_launch_groups(
        c, a, kv_step, hints ? k_attn_pairs<true, true, true> : k_attn_pairs<true, true, false>,
        WS_THREADS, smem, 2, "sparse_attn (tiles in pairs, clusters)");
  void (*const kern)(sc_attn_args, int64_t, int *) =
      fp8 ? (hints ? k_attn_pairs<true, false, true> : k_attn_pairs<true, false, false>)
          : (hints ? k_attn_pairs<false, false, true> : k_attn_pairs<false, false, false>);
  return sc_attn_launch_groups(c, a, kv_step, kern, WS_THREADS, smem, 1,
                               "sparse_attn (tiles in pairs)");
}
