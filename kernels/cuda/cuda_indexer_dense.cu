/* cuda_indexer_dense.cu - the lightning indexer's dense path (SPEC.md §7): steps of many
 * tokens with a key list each (decode: one token a request over its own context), 64
 * index heads of 128 values, bf16 or fp8_index keys, every token's range within a known
 * bound of at most DN_MAX_KEYS keys.
 *
 * Why a path of its own. The scoring kernel of cuda_indexer.cu serves every shape: groups
 * of tokens sharing key tiles, thresholds, appends to candidate lists, cuts. A decode
 * step shares nothing between tokens, so all of that is overhead: 128 tokens over 16384
 * fp8_index keys each took 246 us there, 171 here; over bf16 keys 261 and 221 (H100,
 * 2026-12-06, bench/long-context.md), where the scoring kernel's blocks take their tiles
 * one at a time behind three barriers and append every key. Here:
 *
 *  1. k_idx_dense: a block takes (unit, chunk) items in turn (a unit: a token, or several,
 *     below); its two warpgroups take the chunk's 64-key tiles alternately, each through
 *     a ring of DN_STAGES tiles of its own (cp.async, a tile's copies issued
 *     DN_STAGES - 1 tiles ahead, its list entries DN_STAGES - 1 tiles before that), so the only
 *     barriers in the loop are a warpgroup's own. A tile is scored as the scoring kernel
 *     scores it (the same q staging, tc_stage_q; the same wgmma instructions in the same
 *     order; the same fold, tc_fold_wg_sums; the same product by an fp8_index key's
 *     scale), so a pair's score is the same bits on either path and the choice of path
 *     changes no pick (SPEC.md §8). Each key's score goes out as the high word of its
 *     64-bit order key (cuda_common.cuh), 0 for a key the token may not see: 4 bytes a
 *     key of the list, n_tok x cap words in all (a decode step's keys are its tokens'
 *     own, so these are the keys' count, not a per-(query, key) product of a prompt;
 *     8 MB for 128 tokens over 16384 keys, the keys themselves 277 MB in fp8_index). A
 *     prompt's chunk takes this path only while its tokens are too few for the scoring
 *     kernel's groups (tc_choose: from 7/8 of 2 x SMs x 2 tokens on) and its keys within
 *     16384: at most 461 x 16384 words, 30 MB, on 132 SMs; longer prompts never allocate
 *     per pair. Such a chunk's tokens share their key list, and where the caller says so
 *     (sc_indexer_args.keys_shared) a unit of consecutive tokens of one list (four over
 *     bf16 keys, two over fp8_index keys: dense_units) loads each tile once for all:
 *     128 tokens over one shared list of 16384 bf16 keys read 537 MB through L2 one
 *     token a unit, 268 in pairs, 134 in fours; over bf16 keys a unit's tokens are
 *     scored two at a time by interleaved wgmma chains (dn_score_tokens). One token a
 *     unit over bf16 keys (a decode batch's own contexts) takes its tiles two at a
 *     time the same way (dn_tile_pairs).
 *  2. k_topk_dense: one block of 1024 threads a token holds its (at most 16384) words in
 *     registers, with each key's position (key_pos) as the low word, selects the K
 *     largest 64-bit keys by radix passes of 11 bits over a shared histogram (usually
 *     three: the scores' 32 bits decide), and writes them in position order
 *     (block_write_by_position). Exact: keys are distinct, as positions are.
 *
 * The bound. cap (words a token) comes from max_keys, the caller's bound of every
 * token's range; a longer range raises SC_EINVAL and is scored up to cap only (an error
 * on the step, never a silent pick): the forward pass's bound is its block table's
 * width, a true one. */
#include "kernels/cuda/cuda_indexer_tile.cuh"

#define DN_MAX_KEYS SC_KCUDA_DENSE_MAX_KEYS
#define DN_WGS 2                     /* warpgroups a block, each streaming its tiles */
#define DN_THREADS (128 * DN_WGS)
#define DN_KEYS 64                   /* keys a tile: wgmma's M */
#ifndef DN_STAGES /* (a build may set it: the other side of a comparison) */
#define DN_STAGES 4                  /* a warpgroup's ring of tiles */
#endif
#define DN_MIN_TILES 16              /* tiles an item at least (8 a warpgroup: two rings) */
#define DN_SEL_THREADS 1024
#define DN_SEL_PER (DN_MAX_KEYS / DN_SEL_THREADS) /* keys a select thread holds */
#define DN_BITS 11                   /* radix digit */
static_assert(DN_THREADS == TC_THREADS, "tc_stage_q strides by TC_THREADS");
static_assert(DN_MAX_KEYS % DN_SEL_THREADS == 0, "whole keys a select thread");
static_assert((1 << DN_BITS) == 2 * DN_SEL_THREADS, "two histogram bins a select thread");

/* Shared memory of k_idx_dense (1024-aligned by hand: the swizzle atoms): tiles
 * [DN_WGS][STAGES] of 64 rows of 128 values (e4m3 bytes or bf16), q 64 rows a token of
 * the item (GMAX) alike, the tokens' weights and head scales f32 [GMAX][64] each, per
 * tile slot the keys' positions (-1: seen by no token of the pass) and fp8_index scales
 * [DN_WGS][STAGES][64] each, then the list entries in flight, position and row
 * [DN_WGS][ENT_SLOTS][2][64] (STAGES: DN_STAGES, or one more, below). */
template <bool W8, int GMAX> struct dn_layout {
  /* a warpgroup's ring: one slot more for the kernel that scores two tiles at a time
   * (one token a unit over bf16 keys: dn_tile_pairs), which keeps three tiles in flight
   * as the others do; six would pass the 227 KB a block may have (192.5 KB with five) */
  static constexpr bool TILE_PAIRS = !W8 && GMAX == 1;
  static constexpr int STAGES = TILE_PAIRS ? DN_STAGES + 1 : DN_STAGES;
  static constexpr int ENT_SLOTS = 2 * STAGES; /* tiles' list entries in flight */
  static constexpr int ROWB = W8 ? 128 : 256; /* bytes of a row of 128 values */
  static constexpr int TILE = DN_KEYS * ROWB;
  static constexpr int SLOTS = DN_WGS * STAGES;
  static constexpr size_t Q = (size_t)SLOTS * TILE;
  static constexpr size_t W = Q + (size_t)GMAX * 64 * ROWB;
  static constexpr size_t QSC = W + GMAX * 64 * sizeof(float);
  static constexpr size_t KPOS = QSC + GMAX * 64 * sizeof(float);
  static constexpr size_t KSC = KPOS + (size_t)SLOTS * DN_KEYS * sizeof(int);
  static constexpr size_t ENT = KSC + (size_t)SLOTS * DN_KEYS * sizeof(float);
  static constexpr size_t TOTAL =
      ENT + (size_t)DN_WGS * ENT_SLOTS * 2 * DN_KEYS * sizeof(int) + 1024;
};

/* Whether list index i (position pos) of a token's range [kb, kb + len) is one the
 * token sees, as the scoring kernel decides it (tc_token_mask and tc_load_tile for one
 * token): within the range and at or before the query's position. */
__device__ inline bool dn_vis(int64_t i, int64_t len, int32_t pos, int32_t qpos) {
  return i < len && pos <= qpos;
}

/* Whether a seen key's row is one of the keys (a bad row raises SC_ERANGE when `raise`:
 * its key's owner). */
__device__ inline bool dn_row_ok(const sc_indexer_args &a, int64_t row, bool raise, int *flag) {
  if (row >= 0 && row < a.keys.rows) return true;
  if (raise) sc_dev_raise(flag, SC_ERANGE);
  return false;
}

template <int N> __device__ inline void dn_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* S^T = K Q^T of N (1 or 2) tile-token pairs, as tc_score_tile_w8 / tc_score_tile_wg
 * issue one: keys as A (64 rows at k_addr[i]), a token's 64 head rows as B (at
 * q_addr[i], in a layout of q_rows rows: the item's tokens), k in order. Two chains go
 * out interleaved, k-step by k-step, so that one's products run in the other's latency:
 * each accumulator gets the instructions it gets alone, so the same bits. */
template <bool W8, int N>
__device__ inline void dn_score_async(float (&d)[N][32], const uint32_t (&k_addr)[N],
                                      const uint32_t (&q_addr)[N], int q_rows) {
  static_assert(N == 1 || N == 2, "one chain or two");
  uint64_t da[N], db[N];
#pragma unroll
  for (int i = 0; i < N; i++)
    da[i] = wg_desc(wg_uniform(k_addr[i]), 16, 1024), db[i] = wg_desc(wg_uniform(q_addr[i]), 16, 1024);
  wg_fence();
  if constexpr (W8) {
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
#pragma unroll
      for (int i = 0; i < N; i++)
        wgmma_m64n64_e4m3(d[i], wg_desc_add(da[i], 32 * ks), wg_desc_add(db[i], 32 * ks), ks > 0);
  } else {
#pragma unroll
    for (int ks = 0; ks < 8; ks++) {
      const uint32_t oa = (ks >> 2) * (DN_KEYS * 128) + (ks & 3) * 32;
      const uint32_t ob = (ks >> 2) * (q_rows * 128) + (ks & 3) * 32;
#pragma unroll
      for (int i = 0; i < N; i++)
        wgmma_m64n64(d[i], wg_desc_add(da[i], oa), wg_desc_add(db[i], ob), ks > 0);
    }
  }
  wg_commit();
}
/* ... and waits for them. */
template <bool W8, int N>
__device__ inline void dn_score(float (&d)[N][32], const uint32_t (&k_addr)[N],
                                const uint32_t (&q_addr)[N], int q_rows) {
  dn_score_async<W8, N>(d, k_addr, q_addr, q_rows);
  wg_wait0();
#pragma unroll
  for (int i = 0; i < N; i++) wg_pin(d[i]);
}
/* A unit's token tk (and tk + 1) over one tile: their 64 rows start 8 KB apart in
 * either q layout. */
template <bool W8, int N>
__device__ inline void dn_score_tokens(float (&d)[N][32], uint32_t k_addr, uint32_t q_addr, int tk,
                                       int q_rows) {
  uint32_t ka[N], qa[N];
#pragma unroll
  for (int i = 0; i < N; i++) ka[i] = k_addr, qa[i] = q_addr + (uint32_t)((tk + i) * 64 * 128);
  dn_score<W8, N>(d, ka, qa, q_rows);
}

/* The ring of one warpgroup for one token a pass over bf16 keys, two tiles at a time:
 * tiles a and a + 1 are scored by interleaved wgmma chains (dn_score_async: each gets
 * the instructions it got alone, so the same bits), the chains' latencies overlapping
 * where one tile's chain ran alone behind the barrier. Tile t sits in slot t % S, one
 * cp.async group a tile, issued S - 2 tiles ahead, into the slot of tile t - S (done by
 * the pair before this iteration's barrier), so that `wait_group<1>` finds tiles a and
 * a + 1 landed while a + 2 may still be on its way, and three tiles are in flight beside
 * the two scored; a tile's list entries ride in the group of the tile four before it
 * (entry slot t % 2 S, rewritten six tiles after its read, past a barrier). An odd last
 * tile is scored alone. request / issue: the kernel's; in_range(j): whether tile j holds
 * keys of the token's range (uniform; two tiles past it issue no chain, a tile past it
 * scores zeros); write(j, s0, s1): tile j's words from its folded sums. */
template <int S, typename Req, typename Iss, typename InRange, typename Write>
__device__ inline void dn_tile_pairs(int mine, Req &&request, Iss &&issue, InRange &&in_range,
                                     uint32_t tiles_addr, int tile_bytes, uint32_t q_addr,
                                     const float *w_s, Write &&write, int wg, int lane) {
  static_assert(S == 5, "two tiles scored, one landed or landing, two issued");
  for (int t = 0; t < S - 1; t++) request(t); /* tiles 0 .. 3's entries */
  cp_async_commit();
  cp_async_wait_all();
  named_sync(1 + wg, 128);
  for (int t = 0; t < S - 2; t++) { /* tiles 0 .. 2, a group each, with 4 .. 6's entries */
    if (t < mine) issue(t);
    request(t + 4);
    cp_async_commit();
  }
  auto slot = [&](int t) { return tiles_addr + (uint32_t)((t % S) * tile_bytes); };
  for (int a = 0; a < mine; a += 2) {
    dn_cp_async_wait<1>();   /* my copies of tiles a and a + 1 (a + 2's may be pending) */
    fence_async_smem();      /* (for wgmma's async proxy) */
    named_sync(1 + wg, 128); /* everyone's have; tiles a - 2 and a - 1 are done */
#pragma unroll
    for (int t = a + 3; t <= a + 4; t++) {
      if (t < mine) issue(t);
      request(t + 4);
      cp_async_commit(); /* (an empty group past the end keeps the count) */
    }
    float s[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    if (a + 1 < mine) {
      if (in_range(a) || in_range(a + 1)) {
        float d[2][32];
        const uint32_t ka[2] = {slot(a), slot(a + 1)}, qa[2] = {q_addr, q_addr};
        dn_score<false, 2>(d, ka, qa, 64);
        tc_fold_wg_sums(d[0], w_s, lane, s[0][0], s[0][1]);
        tc_fold_wg_sums(d[1], w_s, lane, s[1][0], s[1][1]);
      }
      write(a, s[0][0], s[0][1]);
      write(a + 1, s[1][0], s[1][1]);
    } else {
      if (in_range(a)) {
        float d[1][32];
        const uint32_t ka[1] = {slot(a)}, qa[1] = {q_addr};
        dn_score<false, 1>(d, ka, qa, 64);
        tc_fold_wg_sums(d[0], w_s, lane, s[0][0], s[0][1]);
      }
      write(a, s[0][0], s[0][1]);
    }
  }
  cp_async_wait_all();
}

/* Scores: item r is unit r / n_chunks (tokens GMAX u .. GMAX u + GMAX - 1, those that
 * exist) and list indices [chunk * per, (chunk + 1) * per) of its tokens' cap words (per =
 * cap / n_chunks, a multiple of 64); words[t * cap + i] is the order key's high word of
 * list entry key_begin[t] + i, 0 where the token does not see it or past its range. W8:
 * fp8_index keys (e4m3 products); else bf16 keys. With GMAX 2 or 4 (the caller's hint
 * that consecutive tokens share their key list, sc_indexer_args.keys_shared) a unit's
 * tokens, all of one key_begin, take one pass: each tile is loaded once for all (a key
 * any of them sees) and scored for each with the instructions it takes alone, so the
 * bytes read shrink by GMAX and no score changes; a unit of other lists takes a pass a
 * token. */
template <bool W8, int GMAX>
__global__ void __launch_bounds__(DN_THREADS)
    k_idx_dense(sc_indexer_args a, int n_chunks, int64_t n_items, int cap, uint32_t *words,
                int *flag) {
  sc_dev_pdl_enter();
  using L = dn_layout<W8, GMAX>;
  constexpr int S = L::STAGES, ES_N = L::ENT_SLOTS;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint16_t *q_s = (uint16_t *)(smem + L::Q);
  float *w_s = (float *)(smem + L::W), *qsc_s = (float *)(smem + L::QSC);
  const int wg = threadIdx.x >> 7, wt = threadIdx.x & 127, lane = threadIdx.x & 31;
  /* A tile's copies: thread wt copies 16-byte piece wt % PIECES of rows wt / PIECES + R k,
   * so a warp's copy reads whole rows (a row's 128 or 256 bytes by 8 or 16 lanes side by
   * side; when each lane took half a row, each copy read half of every 32-byte sector it
   * touched, and L2 ran at 93% of its throughput with DRAM at 60%: ncu, H100,
   * 2026-12-06). Thread wt < 64 owns key wt: its list entry, visibility and scale. */
  constexpr int ES = W8 ? 1 : 2, PIECES = 128 * ES / 16, R = 128 / PIECES;
  const int piece = wt % PIECES, r0 = wt / PIECES;
  const bool owner = wt < DN_KEYS;
  unsigned char *tiles = smem + (size_t)wg * S * L::TILE;
  int *kpos_s = (int *)(smem + L::KPOS) + wg * S * DN_KEYS;
  float *ksc_s = (float *)(smem + L::KSC) + wg * S * DN_KEYS;
  int *ent_s = (int *)(smem + L::ENT) + wg * ES_N * 2 * DN_KEYS; /* [slot][pos, row][64] */
  const int64_t kstep = a.keys.ld * ES;
  const char *kbase = (const char *)a.keys.data;
  const bool in_dim = 16 * piece < a.dim * ES;
  const int per = cap / n_chunks, n_tiles = per / DN_KEYS;
  const int mine = n_tiles > wg ? (n_tiles - wg + DN_WGS - 1) / DN_WGS : 0;

  for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x) {
    const int64_t tu = item / n_chunks * GMAX; /* the unit's first token */
    const int64_t i0 = (item % n_chunks) * (int64_t)per;
    const int in_unit = a.n_tok - tu < GMAX ? (int)(a.n_tok - tu) : GMAX;
    bool together = in_unit > 1; /* every token of the unit on the first one's list */
    for (int tk = 1; tk < in_unit; tk++)
      together = together && a.key_begin[tu + tk] == a.key_begin[tu];
    /* tokens a pass: a constant 1 in the kernel of one token a unit, whose passes are
     * then those before units (with gn at run time it took 2.4% longer on 128 decode
     * tokens over their own 16384 bf16 keys, H200, 2026-12-07, bench/long-context.md) */
    const int gn = GMAX == 1 ? 1 : together ? in_unit : 1;
    for (int64_t t0 = tu; t0 < tu + in_unit; t0 += gn) {
      __syncthreads(); /* the previous pass is done with q and the weights */
      tc_stage_q<128, W8, W8, true>(a, t0, gn, 64, 64 * gn, q_s, w_s, qsc_s);
      const int64_t kb = a.key_begin[t0];
      int64_t len[GMAX], len_u = 0; /* each token's range and their union (one start) */
      int32_t qpos[GMAX];
#pragma unroll
      for (int tk = 0; tk < GMAX; tk++) {
        len[tk] = 0, qpos[tk] = -1;
        if (tk >= gn) continue;
        const int64_t ke = a.key_end[t0 + tk];
        len[tk] = ke > kb ? ke - kb : 0;
        qpos[tk] = a.q_pos[t0 + tk];
        if (len[tk] > cap) { /* the caller's bound was not one */
          if (threadIdx.x == 0 && i0 == 0) sc_dev_raise(flag, SC_EINVAL);
          len[tk] = cap;
        }
        len_u = len[tk] > len_u ? len[tk] : len_u;
      }
      __syncthreads(); /* q and the weights */
      /* my j-th tile: the chunk's tile wg + DN_WGS j, list indices ti(j) .. + 63 */
      auto ti = [&](int j) { return i0 + (int64_t)(wg + DN_WGS * j) * DN_KEYS; };
      /* whether any token of the pass sees list index i at position pos */
      auto seen = [&](int64_t i, int32_t pos) {
        bool v = false;
#pragma unroll
        for (int tk = 0; tk < GMAX; tk++) v = v || dn_vis(i, len[tk], pos, qpos[tk]);
        return v;
      };
      /* Tile j's list entries reach entry slot j % ES_N by cp.async from their
       * owners, in the group of tile j - S + 1's copies (or the item's first group), and are
       * read by every thread once that group has landed and the warpgroup has met: no
       * global load stands between two tiles' copies (with the entries read one tile
       * ahead in registers, their latency set the pace: 301 us for the bf16 decode shape,
       * H100, 2026-12-06). A slot is written again 2 S tiles later, past a meeting that
       * follows every read of it. */
      auto request = [&](int j) {
        const int64_t i = ti(j) + wt;
        if (!owner || j >= mine || i >= len_u) return;
        int *e = ent_s + (j % ES_N) * 2 * DN_KEYS + wt;
        cp_async4(e, a.key_pos + kb + i, true);
        if (a.key_rows) cp_async4(e + DN_KEYS, a.key_rows + kb + i, true);
      };
      /* tile j into its slot j % S: the rows' pieces, the owners' positions (-1: seen by no
       * token of the pass; which of them sees it is decided again at the write) and, W8,
       * scales */
      auto issue = [&](int j) {
        const int sl = j % S;
        const int *e = ent_s + (j % ES_N) * 2 * DN_KEYS;
        const int64_t i0t = ti(j);
        unsigned char *tile = tiles + sl * L::TILE;
#pragma unroll
        for (int k = 0; k < DN_KEYS / R; k++) {
          const int r = r0 + R * k;
          const int64_t i = i0t + r, row = i < len_u && a.key_rows ? e[DN_KEYS + r] : kb + i;
          const bool ok = seen(i, i < len_u ? e[r] : 0) && dn_row_ok(a, row, false, flag);
          cp_async16(tile + wg_off_n(DN_KEYS, r, piece),
                     kbase + (ok ? row * kstep : 0) + 16 * piece, ok && in_dim);
        }
        if (owner) {
          const int64_t i = i0t + wt, row = i < len_u && a.key_rows ? e[DN_KEYS + wt] : kb + i;
          const int32_t pos = i < len_u ? e[wt] : 0;
          const bool ok = seen(i, pos) && dn_row_ok(a, row, true, flag);
          kpos_s[sl * DN_KEYS + wt] = ok ? pos : -1;
          if (W8)
            cp_async4(&ksc_s[sl * DN_KEYS + wt],
                      kbase + (ok ? row * kstep : 0) + SC_KFP8_INDEX_SCALE_AT(a.dim), ok);
        }
      };
      if constexpr (L::TILE_PAIRS) {
        dn_tile_pairs<S>(mine, request, issue, [&](int j) { return ti(j) < len[0]; },
                       smem_u32(tiles), L::TILE, smem_u32(q_s), w_s, [&](int j, float s0, float s1) {
                         const int c = lane & 3, kk = ((wt >> 5) << 4) + (lane >> 2) + 8 * c;
                         if (c >= 2) return;
                         const int32_t pos = kpos_s[(j % S) * DN_KEYS + kk]; /* (-1: not seen) */
                         words[t0 * cap + ti(j) + kk] =
                             pos >= 0 ? (uint32_t)(sc_dev_topk_key(c ? s1 : s0, pos) >> 32) : 0u;
                       }, wg, lane);
      } else {
        for (int j = 0; j < S - 1; j++) request(j); /* the ring's first tiles' entries */
        cp_async_commit();
        cp_async_wait_all();
        named_sync(1 + wg, 128);
        for (int j = 0; j < S - 1; j++) { /* the ring's first tiles */
          if (j < mine) issue(j);
          request(j + S - 1);
          cp_async_commit();
        }
        for (int j = 0; j < mine; j++) {
          const int st = j % S;
          dn_cp_async_wait<S - 2>(); /* my copies of tile j, my entries of tile j + S - 1 */
          fence_async_smem();        /* (for wgmma's async proxy) */
          named_sync(1 + wg, 128);   /* everyone's have, and tile j - 1's slot is read */
          if (j + S - 1 < mine) issue(j + S - 1);
          request(j + 2 * S - 2);
          cp_async_commit(); /* (an empty group past the end keeps the count) */
          float s0[GMAX], s1[GMAX];
          const uint32_t k_addr = smem_u32(tiles + st * L::TILE);
#pragma unroll
          for (int tk = 0; tk < GMAX; tk++) s0[tk] = s1[tk] = 0.0f;
          /* a tile past a token's range is zeros to it (uniform); over bf16 keys two tokens
           * that both see some of it are scored together (dn_score_tokens), a token alone
           * else.
           * (Not over fp8_index keys: two accumulators take that kernel from 114 registers
           * to 132, past the 128 that let two blocks share an SM; over bf16 keys the shared
           * memory holds one block an SM whatever the registers, 158 with them. Token tk's
           * 64 rows start 8 KB on in either q layout.) */
#pragma unroll
          for (int tk = 0; tk < GMAX; tk += 2) {
            const bool h0 = tk < gn && ti(j) < len[tk];
            const bool h1 = tk + 1 < GMAX && tk + 1 < gn && ti(j) < len[tk + 1];
            if (!W8 && h0 && h1) {
              float d[2][32];
              dn_score_tokens<W8, 2>(d, k_addr, smem_u32(q_s), tk, 64 * gn);
              tc_fold_wg_sums(d[0], w_s + 64 * tk, lane, s0[tk], s1[tk]);
              tc_fold_wg_sums(d[1], w_s + 64 * (tk + 1), lane, s0[tk + 1], s1[tk + 1]);
              continue;
            }
#pragma unroll
            for (int i = 0; i < 2; i++) {
              if (!(i ? h1 : h0)) continue;
              float d[1][32];
              dn_score_tokens<W8, 1>(d, k_addr, smem_u32(q_s), tk + i, 64 * gn);
              tc_fold_wg_sums(d[0], w_s + 64 * (tk + i), lane, s0[tk + i], s1[tk + i]);
            }
          }
          /* lane 4 g + c of warp w holds keys 16 w + g (s0) and 16 w + g + 8 (s1) of every
           * token: c = 0 and 1 write those of the even tokens, c = 2 and 3 of the odd */
          const int c = lane & 3, kk = ((wt >> 5) << 4) + (lane >> 2) + 8 * (c & 1);
          const int32_t pos = kpos_s[st * DN_KEYS + kk]; /* (-1: no token of the pass sees it) */
          const float ks = W8 ? ksc_s[st * DN_KEYS + kk] : 1.0f;
#pragma unroll
          for (int tk = 0; tk < GMAX; tk++) {
            if ((tk & 1) != (c >> 1) || tk >= gn) continue;
            /* (one token a pass: its position -1 already says it does not see the key) */
            const bool vis = pos >= 0 && (GMAX == 1 || dn_vis(ti(j) + kk, len[tk], pos, qpos[tk]));
            words[(t0 + tk) * cap + ti(j) + kk] =
                vis ? (uint32_t)(sc_dev_topk_key((c & 1 ? s1[tk] : s0[tk]) * ks, pos) >> 32) : 0u;
          }
        }
        cp_async_wait_all();
      }
    }
  }
}

/* The top-K of each token's words (one block a token): keys (word, ~position) in
 * registers, radix passes over the bits still undecided, then position order. */
__global__ void __launch_bounds__(DN_SEL_THREADS, 1)
    k_topk_dense(const uint32_t *words, int cap, int K, const int32_t *key_pos,
                 const int32_t *key_begin, int32_t *out_pos, sc_kcand *out_cand) {
  sc_dev_pdl_enter();
  extern __shared__ uint64_t sel_buf[]; /* [K] the selected keys */
  __shared__ int hist[1 << DN_BITS];
  __shared__ int wsum[DN_SEL_THREADS / 32];
  __shared__ int ctl[5]; /* bin, need, equal count; then the two slot counters */
  __shared__ unsigned wmin_s[DN_SEL_THREADS / 32], wmax_s[DN_SEL_THREADS / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t t = blockIdx.x, kb = key_begin[t];
  uint64_t k[DN_SEL_PER];
  int mine = 0;
  unsigned wmin = 0xffffffffu, wmax = 0; /* the least and largest nonzero word */
#pragma unroll
  for (int j = 0; j < DN_SEL_PER; j++) {
    const int i = j * DN_SEL_THREADS + tid;
    const uint32_t w = i < cap ? words[t * cap + i] : 0u;
    k[j] = w ? (uint64_t)w << 32 | (0xffffffffu - (uint32_t)key_pos[kb + i]) : 0;
    mine += k[j] != 0;
    if (w) wmin = min(wmin, w), wmax = max(wmax, w);
  }
  for (int off = 16; off > 0; off >>= 1) {
    mine += __shfl_xor_sync(0xffffffffu, mine, off);
    wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, off));
    wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, off));
  }
  if (lane == 0) wsum[warp] = mine, wmin_s[warp] = wmin, wmax_s[warp] = wmax;
  __syncthreads();
  int total = 0;
  for (int v = 0; v < DN_SEL_THREADS / 32; v++)
    total += wsum[v], wmin = min(wmin, wmin_s[v]), wmax = max(wmax, wmax_s[v]);
  const bool all = total <= K;
  /* The words' high bits that every key shares (those of the least and the largest) are
   * decided before any pass: the first digit starts below them, where the scores differ
   * (from the top bit, scores within a few powers of two would share most of its bins;
   * not measured apart from the rest of this select). */
  const int common = wmax > wmin ? __clz(wmax ^ wmin) : 32;
  uint64_t mask = common ? (~0ull << (64 - common)) : 0,
           prefix = ((uint64_t)wmax << 32) & mask;
  int need = K;
  for (int shift = 64 - common; !all && shift > 0;) {
    const int width = shift < DN_BITS ? shift : DN_BITS;
    shift -= width;
    const unsigned nb = 1u << width;
    hist[2 * tid] = hist[2 * tid + 1] = 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < DN_SEL_PER; j++)
      if (k[j] != 0 && (k[j] & mask) == prefix) atomicAdd(&hist[(k[j] >> shift) & (nb - 1)], 1);
    __syncthreads();
    /* thread i holds bins 2i, 2i + 1: the keys above them are the sums of higher threads */
    const int c0 = hist[2 * tid], c1 = hist[2 * tid + 1], s = c0 + c1;
    int suf = s; /* over this warp's lanes >= lane */
    for (int off = 1; off < 32; off <<= 1) {
      const int o = __shfl_down_sync(0xffffffffu, suf, off);
      if (lane + off < 32) suf += o;
    }
    if (lane == 0) wsum[warp] = suf;
    __syncthreads();
    int above = suf - s;
    for (int v = warp + 1; v < DN_SEL_THREADS / 32; v++) above += wsum[v];
    if (above < need && above + s >= need) {
      const bool hi = above + c1 >= need;
      ctl[0] = hi ? 2 * tid + 1 : 2 * tid;
      ctl[1] = hi ? need - above : need - above - c1;
      ctl[2] = hi ? c1 : c0;
    }
    __syncthreads();
    prefix |= (uint64_t)ctl[0] << shift;
    mask |= (uint64_t)(nb - 1) << shift;
    need = ctl[1];
    const bool done = ctl[2] == need;
    __syncthreads(); /* (ctl and wsum read before the next pass writes them) */
    if (done) break;
  }
  if (tid == 0) ctl[3] = ctl[4] = 0;
  __syncthreads();
  const int above = K - need; /* keys above the prefix: slots [0, above) */
#pragma unroll
  for (int j = 0; j < DN_SEL_PER; j++) {
    const uint64_t m = k[j] & mask;
    const int hi = warp_take_slot(&ctl[3], k[j] != 0 && (all || m > prefix));
    const int eq = warp_take_slot(&ctl[4], k[j] != 0 && !all && m == prefix);
    if (hi >= 0) sel_buf[hi] = k[j];
    if (eq >= 0 && eq < need) sel_buf[above + eq] = k[j];
  }
  __syncthreads();
  block_write_by_position(sel_buf, all ? total : K, K, out_pos ? out_pos + t * K : NULL,
                          out_cand ? out_cand + t * K : NULL);
}

template <bool W8, int GMAX> static int dense_launch(sc_kcuda *c, const sc_indexer_args *a) {
  using L = dn_layout<W8, GMAX>;
  const auto kernel = k_idx_dense<W8, GMAX>;
  int per_sm = 0;
  int rc = sc_kcuda_err(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)L::TOTAL),
                        "indexer dense smem");
  if (rc == 0)
    rc = sc_kcuda_err(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, DN_THREADS,
                                                                    L::TOTAL),
                      "indexer dense occupancy");
  if (rc) return rc;
  /* chunks: as many as give every resident block an item (the units' items in one
   * round), each at least DN_MIN_TILES tiles, cap within DN_MAX_KEYS */
  const int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * c->num_sms;
  const int64_t units = sc_cdiv(a->n_tok, GMAX);
  const int tiles = (int)sc_cdiv(a->max_keys, DN_KEYS);
  int n_chunks = (int)(resident / units);
  if (n_chunks > tiles / DN_MIN_TILES) n_chunks = tiles / DN_MIN_TILES;
  if (n_chunks < 1) n_chunks = 1;
  while (n_chunks > 1 && sc_cdiv(tiles, n_chunks) * n_chunks * DN_KEYS > DN_MAX_KEYS) n_chunks--;
  const int cap = (int)sc_cdiv(tiles, n_chunks) * n_chunks * DN_KEYS;
  uint32_t *words =
      (uint32_t *)sc_kcuda_scratch(c, sizeof(uint32_t) * (size_t)a->n_tok * (size_t)cap);
  if (words == NULL) return SC_ENOMEM;
  const int64_t n_items = units * n_chunks;
  const int64_t grid = n_items < resident ? n_items : resident;
  sc_kcuda_launch(c, kernel, (unsigned)grid, DN_THREADS, L::TOTAL, *a, n_chunks, n_items, cap,
                  words, c->err_flag);
  if ((rc = SC_CUDA_CHECK_LAUNCH("indexer dense")) != 0) return rc;
  const size_t sel = sizeof(uint64_t) * (size_t)a->topk;
  rc = sc_kcuda_err(cudaFuncSetAttribute(k_topk_dense, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)(sizeof(uint64_t) * SC_KCUDA_TOPK_MAX)),
                    "indexer dense select smem");
  if (rc) return rc;
  sc_kcuda_launch(c, k_topk_dense, (unsigned)a->n_tok, DN_SEL_THREADS, sel,
                  (const uint32_t *)words, cap, a->topk, a->key_pos, a->key_begin, a->out_pos,
                  a->out_cand);
  return SC_CUDA_CHECK_LAUNCH("indexer dense select");
}

/* Units of GMAX tokens where the caller says consecutive tokens share their key list,
 * else one token a unit. GMAX by the keys' format unless SPARSECP_INDEXER_SHARE says 1, 2
 * or 4 (c->idx_share): 4 over bf16 keys, 2 over fp8_index keys. 128 decode tokens over
 * one shared list of 16384 keys on an H200 (2026-12-07, bench/long-context.md), us, one /
 * two / four tokens a unit: bf16 231 / 174 / 141, fp8_index 141.5 / 123.4 / 148.2 (the
 * fp8 kernel of four holds 122 registers where that of two holds 114). */
template <bool W8> static int dense_units(sc_kcuda *c, const sc_indexer_args *a) {
  const int share = !a->keys_shared ? 1 : c->idx_share ? c->idx_share : W8 ? 2 : 4;
  return share >= 4 ? dense_launch<W8, 4>(c, a)
         : share == 2 ? dense_launch<W8, 2>(c, a)
                      : dense_launch<W8, 1>(c, a);
}

int sc_kcuda_indexer_dense(sc_kcuda *c, const sc_indexer_args *a, bool w8) {
  return w8 ? dense_units<true>(c, a) : dense_units<false>(c, a);
}
