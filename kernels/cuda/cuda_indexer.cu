/* cuda_indexer.cu - the lightning indexer (SPEC.md §7) on the tensor cores:
 *   score(t, s) = Σ_h w[t,h] * ReLU(<q[t,h], k_s>), then the top-K of each token.
 *
 * Precision. q and the keys are rounded to bf16 (round to nearest even; bf16 keys are
 * taken as they are, and so are the e4m3 values of fp8_index keys, which bf16 holds
 * exactly), products are exact in the f32 accumulators of mma.sync or wgmma, and the
 * ReLU x weight sum runs in f32 (an fp8_index key's then times its scale, once). Over
 * fp8_index keys each head of q is first rounded to e4m3 with a power-of-two scale of
 * its own (kernels.h; exact in bf16 too), and tokens of 64 head rows over rows of up to
 * 128 values score e4m3 products as DeepSeek-V3.2 does (tc_w8: keys and q stay bytes,
 * wgmma m64n64k32, the head scale folded into the weight), whose sums the tensor cores
 * round in their own way. The CPU reference scores in f32 on the unrounded values (on
 * the rounded q over fp8_index keys), so GPU and CPU may pick differently among keys
 * whose scores lie within the rounding (tests/gpu/test_gpu_kernels.c bounds it).
 *
 * Layout invariance. A pair's score depends only on (q[t], w[t], k_s). A token's heads
 * occupy hp rows of the q tile (hp: the head count rounded up to a power of two below
 * 16, to a multiple of 16 from there; the extra rows are zero with weight zero), and
 * its head sum has one shape fixed by hp alone: from 16 heads, each lane folds its two
 * rows of each of the token's m-tiles in order, then a shuffle over the 8 lanes of a
 * key (xor 4, 8, 16); below, the keys are the mma's rows (tc_score_tile's transposed
 * fold), a lane adds a token's two heads it holds, then a shuffle over its hp / 2 lanes
 * (log2 hp - 1 steps): the same tree of pairs. Every key of a tile goes through the same
 * instructions, the k16 steps run in the same order, and adding a zero row is exact.
 * So a token scores every pair bit-identically whatever its group, chunk, batch or
 * rank, and the exact selection that follows picks the same keys. Tokens of 64 head
 * rows (and rows of 64 or 128) score on wgmma (tc_score_tile_wg, or tc_score_tile_w8
 * over fp8_index keys), whose head sum has another fixed shape; which scores a launch
 * depends on the model and on whether the keys are fp8_index (tc_path_of), never on the
 * layout, the keys' alignment, or f32 against bf16 keys (f32 keys are rounded to bf16 on
 * either path). A DCP prefill's workspace holds fp8_index keys as the cache does.
 *
 * Two stages:
 *  1. k_idx_tc: 8 warps a block, as many blocks as fit on the GPU at once, taking work
 *     items in turn. An item is G consecutive tokens (up to 32, and up to 256 q rows;
 *     G > 1 when a step has many tokens: prefill tokens of one request share their key
 *     range, so each key tile loaded serves G tokens) and a contiguous segment of the
 *     union of their key ranges, in tiles of 128 keys double-buffered in shared memory
 *     with cp.async (raw; f32 keys are rounded when the fragments are built, or on the
 *     way in for wgmma; keys no token of the group may see are neither loaded nor, when
 *     a whole tile is, scored).
 *     The group's q sits in shared memory as bf16; a warp takes 16 keys of the tile,
 *     keeps their fragments for all the m-tiles in registers, runs the k16 steps per
 *     m-tile and folds ReLU x weight as above (with wgmma: a warpgroup takes 64 keys
 *     as A, a token's q rows as B, and each of its warps ends with the same 16 keys'
 *     scores; below 16 head rows a token, over rows of 64 values, each lane tests the
 *     sums the fold leaves it and appends from registers: cuda_indexer_few.cuh). Per
 *     token, keys that reach its threshold are appended to its candidate list in global
 *     memory (K + tc_piece(K) keys, the block's own); a list without room for another
 *     tile is cut back by one warp (while the others cut other tokens' lists) to a set
 *     that holds its K best, and the threshold rises to that set's floor (cuda_select.cuh's
 *     warp_cut_topk). At the end of an item a team of warps per token (all 8 for one
 *     token, 4 each for two, 2 for three or four, one from five on or when no list holds
 *     more than K) selects exactly its K best into the item's output. Scores never leave
 *     the tile: nothing is allocated per (query, key).
 *  2. With one chunk a token, sc_kcuda_topk_finish (cuda_topk.cu) writes each token's
 *     K survivors in position order. With several, where the step has tokens enough to
 *     give most SMs one (tc_merge_by_block), each chunk writes a list of K and
 *     sc_kcuda_topk_finish selects a token's K from its lists in one block; else the
 *     chunks append their survivors per token and sc_kcuda_topk_radix
 *     (cuda_topk_radix.cu) selects the K over many blocks; or, for tokens of few heads
 *     over rows of 64 values with the caller's bound, both stages run in one cooperative
 *     launch that keeps each chunk's keys in its block (cuda_indexer_fused.cu).
 * The group size and chunk count come from the token count and the caller's bound of a
 * token's keys (max_keys; ops never read buffer contents on the host), so key ranges
 * stay on the device. A prompt over long lists (one chunk a token) runs stage 1 three
 * times (the sampled floors, below): over a sample of each token's keys, then over all
 * of them from a threshold the sample gives, then again for the groups it misled. */
#include "kernels/cuda/cuda_indexer_few.cuh"

/* Scoring blocks. A work item is a group of G consecutive tokens and one chunk of the
 * union of their key ranges; the grid holds as many blocks as fit on the GPU at once,
 * each taking items in turn from the heaviest (the last tokens of a causal prompt see
 * the most keys), so that the candidate lists in global memory are the resident blocks'
 * only: cbuf holds gridDim.x x G x room keys. */
template <int DIMP, int FMT, bool VEC, bool WG>
__global__ void __launch_bounds__(TC_THREADS)
    k_idx_tc(sc_indexer_args a, int n_chunks, tc_shape sp, int64_t n_items, uint64_t *cbuf,
             uint64_t *out_keys, int *counts, int64_t cap, int *flag, tc_floor fl) {
  sc_dev_pdl_enter();
  constexpr bool FP8 = FMT == SC_KFMT_FP8_INDEX;
  constexpr int ES = FMT == SC_KFMT_F32 ? 4 : FP8 ? 1 : 2; /* bytes of an element in memory */
  constexpr int SFMT = FP8 ? SC_KFMT_BF16 : FMT;           /* the keys' format in shared memory */
  constexpr int LD = WG ? DIMP : DIMP + TC_PAD;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  /* (the swizzle atoms of WG need 1024-byte alignment, which the dynamic base lacks) */
  unsigned char *smem = smem_raw + (WG ? (1024 - (smem_u32(smem_raw) & 1023)) & 1023 : 0);
  const int K = a.topk, G = sp.group, hp = sp.hp, M = 16 * sp.m_tiles, room = sp.room;
  constexpr bool W8 = tc_w8(DIMP, FMT, WG); /* e4m3 products (tc_score_tile_w8) */
  constexpr int KES = W8 ? 1 : WG || FP8 ? 2 : ES; /* bytes of a key element in shared memory */
  constexpr bool RAW = FP8 && VEC && !W8; /* staged raw, widened before scoring (tc_widen_fp8) */
  const tc_layout lay = tc_lay(sp, DIMP, KES, WG, FP8, RAW);
  unsigned char *k_s = smem + lay.k;                          /* [stages][TC_KEYS][LD] */
  unsigned char *raw_s = smem + lay.raw;                      /* RAW: [stages][TC_KEYS][DIMP] */
  uint16_t *q_s = (uint16_t *)(smem + lay.q);                 /* [M][LD] */
  unsigned long long *thr = (unsigned long long *)(smem + lay.thr); /* [TC_GROUP_MAX] */
  unsigned *top = (unsigned *)(smem + lay.top);               /* [TC_GROUP_MAX] */
  int64_t *koff_s = (int64_t *)(smem + lay.koff);             /* [2][TC_KEYS] */
  float *w_s = (float *)(smem + lay.w);                       /* [M] */
  float *qsc_s = (float *)(smem + lay.qsc);                   /* [M] (FP8 only) */
  float *sc_s = (float *)(smem + lay.sc);                     /* [TC_WARPS][G][TC_KW] */
  int *kpos_s = (int *)(smem + lay.kpos);                     /* [2][TC_KEYS] */
  unsigned *kmask_s = (unsigned *)(smem + lay.kmask);         /* [2][TC_KEYS] */
  float *ksc_s = (float *)(smem + lay.ksc);                   /* [2][TC_KEYS] (FP8 only) */
  int *hist = (int *)(smem + lay.hist);                       /* [tc_hist_ints(G)] */
  int *fill = (int *)(smem + lay.fill);                       /* [TC_GROUP_MAX] */
  int *tb = fill + TC_GROUP_MAX, *te = tb + TC_GROUP_MAX, *tq = te + TC_GROUP_MAX;
  int *dropped = tq + TC_GROUP_MAX;                           /* [TC_GROUP_MAX] */
  int *team_n = dropped + TC_GROUP_MAX;                       /* [2][TC_WARPS] */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t kstep = a.keys.ld * ES;
  /* a stage as loaded: raw bytes (RAW), else the keys as scored */
  const size_t stage_bytes = RAW ? (size_t)TC_KEYS * DIMP : (size_t)TC_KEYS * LD * KES;
  unsigned char *load_s = RAW ? raw_s : k_s;
  uint64_t *cbase = cbuf + (size_t)blockIdx.x * G * room;
  float *sc_w = sc_s + warp * G * TC_KW;
  int *hist_w = hist + warp * 256;

  for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x) {
    const int64_t r = n_items - 1 - item; /* the heaviest first */
    const int64_t g = r / n_chunks, t0 = g * G; /* the group, its first token */
    const int chunk = (int)(r % n_chunks);
    const int gn = a.n_tok - t0 < G ? (int)(a.n_tok - t0) : G;
    if (fl.only != NULL && fl.only[g] == 0) continue; /* (the same word for every thread) */
    __syncthreads(); /* the previous item is done with the shared words */
    tc_stage_q<DIMP, FP8, W8, WG>(a, t0, gn, hp, M, q_s, w_s, qsc_s);
    if (threadIdx.x < gn) {
      const int j = threadIdx.x, S = sp.stride; /* (a sample's range: tc_shape) */
      tb[j] = (a.key_begin[t0 + j] + S - 1) / S;
      te[j] = (a.key_end[t0 + j] + S - 1) / S;
      tq[j] = a.q_pos[t0 + j];
      fill[j] = 0;
      dropped[j] = 0;
      thr[j] = fl.thr0 != NULL ? fl.thr0[t0 + j] : 1; /* every real key is 1 or more */
      top[j] = 0;
    }
    __syncthreads();
    /* the union of the group's key ranges, split into n_chunks segments */
    int64_t ub = INT64_MAX, ue = 0;
    for (int j = 0; j < gn; j++)
      if (te[j] > tb[j]) {
        ub = tb[j] < ub ? tb[j] : ub;
        ue = te[j] > ue ? te[j] : ue;
      }
    const int64_t len = ue > ub ? ue - ub : 0;
    int64_t seg = (len + n_chunks - 1) / n_chunks;
    seg = seg < TC_MIN_SEG ? TC_MIN_SEG : seg; /* short ranges take fewer blocks */
    const int64_t s0 = ub + chunk * seg;
    const int64_t s1 = s0 + seg < ue ? s0 + seg : ue;
    const int n_tiles = len > 0 && s1 > s0 ? (int)((s1 - s0 + TC_KEYS - 1) / TC_KEYS) : 0;
    bool ordered = true;
    for (int j = 1; j < gn; j++)
      ordered = ordered && tb[j] == tb[0] && te[j] >= te[j - 1] && tq[j] >= tq[j - 1];
    const tc_tokens tk = {tb, te, tq, gn, ordered};

    bool vis = false; /* whether any token may see the tile being scored */
    tc_entry x_next = {0, -1, false}; /* the entries of the next tile to queue */
    if (n_tiles > 0) {
      vis = tc_load_tile<DIMP, FMT, VEC, WG>(a, tk, s0, tc_fetch(a, s0, s1, sp.stride), kstep,
                                             load_s, kpos_s, kmask_s, koff_s, ksc_s, flag);
      cp_async_commit();
      x_next = tc_fetch(a, s0 + TC_KEYS, s1, sp.stride);
    }
    for (int tile = 0; tile < n_tiles; tile++) {
      const int st = sp.stages == 2 ? tile & 1 : 0, kb = (tile & 1) * TC_KEYS, nb = TC_KEYS - kb;
      const int64_t next = s0 + (int64_t)(tile + 1) * TC_KEYS;
      bool vis_next = false;
      if (sp.stages == 2) {
        if (tile + 1 < n_tiles) { /* the next tile loads while this one is scored */
          vis_next = tc_load_tile<DIMP, FMT, VEC, WG>(a, tk, next, x_next, kstep,
                                                      load_s + (st ^ 1) * stage_bytes, kpos_s + nb,
                                                      kmask_s + nb, koff_s + nb, ksc_s + nb, flag);
          x_next = tc_fetch(a, next + TC_KEYS, s1, sp.stride);
        }
        cp_async_commit(); /* (an empty group on the last tile keeps the wait count uniform) */
        cp_async_wait_one();
        if (WG) fence_async_smem();
      } else {
        if (tile > 0) { /* one stage: the previous tile is done with it */
          vis = tc_load_tile<DIMP, FMT, VEC, WG>(a, tk, next - TC_KEYS, x_next, kstep, load_s,
                                                 kpos_s + kb, kmask_s + kb, koff_s + kb,
                                                 ksc_s + kb, flag);
          x_next = tc_fetch(a, next, s1, sp.stride);
        }
        cp_async_commit();
        cp_async_wait_all();
        if (WG) fence_async_smem();
      }
      __syncthreads(); /* publishes the tile */
      if constexpr (RAW) { /* widened into the one bf16 stage, scored next */
        if (vis) {
          tc_widen_fp8<DIMP, WG>(raw_s + st * stage_bytes, k_s);
          if (WG) fence_async_smem();
        }
        __syncthreads();
      }
      unsigned char *kt = RAW ? k_s : k_s + st * stage_bytes; /* the tile as scored */
      if (tc_few_fits(DIMP, VEC, WG) && vis && sp.few) { /* sums tested in registers */
        const int col = kb + warp * TC_KW + (lane >> 2); /* keys g and g + 8 */
        const tc_lane_keys kk = {{kmask_s[col], kmask_s[col + 8]},
                                 {kpos_s[col], kpos_s[col + 8]},
                                 {FP8 ? ksc_s[col] : 1.0f, FP8 ? ksc_s[col + 8] : 1.0f}};
        tc_score_few<DIMP, SFMT>(hp, kt + (size_t)(warp * TC_KW) * LD * KES, q_s, w_s, gn, kk,
                                 thr, top, fl.thr0 == NULL, fill, cbase, room, flag, lane);
      } else if (vis) {
        if (W8)
          tc_score_tile_w8(smem_u32(kt), smem_u32(q_s), w_s, sc_w, gn, warp, lane);
        else if (WG)
          tc_score_tile_wg<DIMP>(smem_u32(kt), smem_u32(q_s), M, w_s, sc_w, gn, warp, lane);
        else
          tc_score_tile<DIMP, SFMT>(kt + (size_t)(warp * TC_KW) * LD * KES, q_s, w_s, sc_w, gn,
                                    hp, lane);
        const int col = kb + warp * TC_KW + (lane & 15);
        tc_append(sc_w, kmask_s[col], kpos_s[col], FP8 ? ksc_s[col] : 1.0f, gn, thr, top,
                  fl.thr0 == NULL, fill, cbase, room, flag, lane);
      }
      __syncthreads();
      /* a list without room for the next tile is cut back, a warp per token */
      for (int j = warp; j < gn; j += TC_WARPS)
        if (fill[j] > room - TC_KEYS) {
          const int n = warp_cut_topk(cbase + (size_t)j * room, fill[j], K, K + TC_SLACK, hist_w,
                                      (uint64_t *)&thr[j], tc_top_bound(top[j]));
          if (lane == 0) dropped[j] += fill[j] - n, fill[j] = n;
        }
      /* (no barrier here: a cut's lists, fills and thresholds are next read by the scoring
       * of the next tile, after that tile's publishing barrier, which every cutting warp
       * reaches only when done; the loads before it touch none of them) */
      if (sp.stages == 2) vis = vis_next;
    }
    cp_async_wait_all();
    __syncthreads(); /* the last tile's cuts are done */
    /* every key at or above a token's start was appended (and kept or cut): K of them
     * or more, and its K best are among them; fewer, and the repair scores it again */
    if (fl.redo != NULL && threadIdx.x < gn && fl.thr0[t0 + threadIdx.x] > 1 &&
        fill[threadIdx.x] + dropped[threadIdx.x] < K)
      fl.redo[g] = 1;
    /* each token's K best, by a team of TC_WARPS / gn warps (a power of two; one warp
     * from 5 tokens on, or when no list holds more than K: then it is a copy, which
     * the teams' barriers made slower): a list of K (zero-padded) per chunk, or appended
     * to the token's survivors wherever the chunks' blocks finish */
    bool select = false;
    for (int j = 0; j < gn; j++) select = select || fill[j] > K;
    const int tw = !select || gn >= TC_WARPS / 2 + 1 ? 1 : gn > 2 ? 2 : TC_WARPS / gn;
    const int team = warp / tw, teams = TC_WARPS / tw;
    const cut_team tm = {tw, warp % tw, 1 + team};
    int *team_hist = hist + team * tc_team_hist_ints(tw); /* (tc_hist_ints: they fit) */
    int *emitted = team_n + team, *reserved = team_n + TC_WARPS + team;
    for (int j = team; j < gn; j += teams) {
      const int64_t t = t0 + j;
      const int want = fill[j] < K ? fill[j] : K; /* what the cut keeps: distinct keys */
      if (tm.idx == 0 && lane == 0) {
        *emitted = 0;
        *reserved = counts != NULL ? atomicAdd(counts + t, want) : 0; /* one atomic */
      }
      team_sync(tm);
      uint64_t *o = counts != NULL ? out_keys + t * cap + *reserved
                                   : out_keys + (t * n_chunks + chunk) * K;
      const int len = counts != NULL ? want : K;
      const uint64_t *cb = cbase + (size_t)j * room;
      int n = fill[j]; /* K or fewer: all of them, a plain copy */
      if (n > K && n <= tw * TC_RANK_PER_WARP) { /* short: ranked (same K, sorted) */
        team_rank_topk(cb, n, K, (uint64_t *)team_hist, tm, o);
        n = K;
      } else if (n > K) {
        team_emit_topk(cb, n, K, team_hist, thr[j], tc_top_bound(top[j]), tm,
                       emitted, o, len);
        team_sync(tm);
        n = *emitted;
      } else {
        for (int i = tm.idx * 32 + lane; i < n; i += tw * 32) o[i] = cb[i];
      }
      for (int i = n + tm.idx * 32 + lane; i < len; i += tw * 32) o[i] = 0; /* padding */
      team_sync(tm); /* every warp has read the counts before the next token's reset */
    }
  }
}

/* Head rows of one token: hp as in the comment at the top. */
static int tc_rows_per_token(int H) {
  if (H >= 16) return 16 * (int)sc_cdiv(H, 16);
  int p = 1;
  while (p < H) p <<= 1;
  return p;
}

/* Candidate room beyond K. A cut costs a few passes over a list, and a list fills again
 * after room - K - TC_SLACK appends: with K = 2048, a 32k prompt's indexer took 1.37x as
 * long with room K + 1024 as with K + 6144 (H200, 2026-12-02), and 1.11x as long with
 * K + 2K as with K + 4K (16.2 against 14.6 ms a layer, bf16 keys, 2026-12-03: a cut
 * stops its block's other warps at the tile's last barrier; bench/long-context.md). The
 * lists are the resident blocks' only (264 blocks x 32 tokens x 10240 keys, 0.7 GB, at
 * K = 2048; the kernel context's scratch, which grows in powers of two, then holds a 32k
 * prompt's in 2 GiB where it held them in 1 GiB), so from K = 2048 on the room stays at
 * max(8192, 2K): K + 4K up to K = 2048, K + max(8192, 2K) beyond, at least K + 1024. */
static int tc_piece(int K) {
  int p = 4 * K;
  if (p > 8192) p = 2 * K > 8192 ? 2 * K : 8192;
  return p > TC_PIECE ? p : TC_PIECE;
}

/* The largest group that pays and leaves room for two blocks an SM (with two key stages
 * if they fit, else one); else the largest that fits at all. One block scores while the
 * other waits on its cuts: a 32k prompt's indexer took 1.5x as long with 32 tokens a
 * block and two stages (one block an SM) as with 16 (two blocks an SM); 1024 tokens of 64
 * heads took 1.2x as long with one token a block and two stages as with two and one stage
 * (H200, 2026-12-02: bench/long-context.md). A group pays while the step's groups give at
 * least 7 of every 8 of those blocks one (a step of few tokens wants blocks, not groups):
 * a group scores each key tile it loads for all its tokens, and 1024 tokens of 64 heads
 * (256 groups of 4 for 264 blocks) took 730-737 us over fp8_index keys and 788-794 over
 * bf16 keys (there at one key stage, tc_hist_ints) against 910-912 and 995 in groups of
 * 2, the choice of the rule before, which asked for a block each (H100, 2026-12-07,
 * bench/long-context.md). group_max > 0 (SPARSECP_INDEXER_GROUP) caps the group and drops
 * the token-count rule: the other side of a comparison in one run. */
static int tc_choose(const sc_indexer_args *a, int num_sms, int group_max, int dimp, int es,
                     bool wg, bool scaled, bool raw, tc_shape *out) {
  const int hp = tc_rows_per_token(a->n_heads);
  /* 228 KB an SM, 1 KB of it reserved per block */
  static const size_t limits[2] = {113 * 1024, TC_SMEM_MAX};
  for (int li = 0; li < 2; li++)
    for (int group = group_max > 0 ? group_max : TC_GROUP_MAX; group >= 1; group /= 2) {
      if (group > 1 && ((group_max == 0 && 8 * a->n_tok < 7 * 2 * (int64_t)num_sms * group) ||
                        group * hp > TC_ROWS_MAX))
        continue;
      for (int stages = 2; stages >= 1; stages--) {
        const tc_shape sp = {group, hp, (int)sc_cdiv((int64_t)group * hp, 16), stages,
                             a->topk + tc_piece(a->topk), 1, 0};
        if (tc_lay(sp, dimp, es, wg, scaled, raw).total <= limits[li]) {
          *out = sp;
          return 0;
        }
      }
    }
  return SC_ENOTSUP;
}

/* Chunks of each group's key range (1 to most). With as many groups as resident blocks
 * or more, one: no select over the chunks' survivors follows (two chunks for 1024 tokens
 * of 64 heads made that select a fifth of the op: ncu, H200, 2026-12-04), and the
 * heaviest-first order of the items balances the blocks. With fewer, up to as many
 * chunks as give every resident block an item, the count that keeps the resident blocks' rounds
 * per group's worth of work, ceil(groups c / resident) / c, the fewest (the fewer
 * chunks of two with as few rounds): 128 decode tokens on 264 blocks take two chunks
 * where three would take two rounds of a third each. */
static int tc_chunks(int64_t groups, int64_t resident, int64_t most) {
  if (groups >= resident) return 1;
  const int64_t cap = sc_cdiv(resident, groups);
  most = most < cap ? most : cap;
  int64_t best = 1, best_rounds = 1;
  for (int64_t ch = 2; ch <= most; ch++) {
    const int64_t rounds = sc_cdiv(groups * ch, resident);
    if (rounds * best < best_rounds * ch) best = ch, best_rounds = rounds; /* fewer per unit */
  }
  return (int)best;
}

/* The row width a kernel instance is compiled for: dim padded to 32, 64 or 128. */
static int dim_padded(int dim) { return dim <= 32 ? 32 : dim <= 64 ? 64 : 128; }

typedef void (*tc_kernel)(sc_indexer_args, int, tc_shape, int64_t, uint64_t *, uint64_t *,
                          int *, int64_t, int *, tc_floor);

template <int FMT>
static tc_kernel tc_instance(int dimp, bool vec) {
  switch (dimp) {
  case 32: return vec ? k_idx_tc<32, FMT, true, false> : k_idx_tc<32, FMT, false, false>;
  case 64: return vec ? k_idx_tc<64, FMT, true, false> : k_idx_tc<64, FMT, false, false>;
  default: return vec ? k_idx_tc<128, FMT, true, false> : k_idx_tc<128, FMT, false, false>;
  }
}

/* How a's keys are read and scored. VEC: 16-byte aligned rows in whole 16-byte pieces
 * (cp.async; f32 keys for wgmma: float4 loads through registers). WG: wgmma scoring
 * (tc_score_tile_wg): 64 head rows a token (49 to 64 index
 * heads), rows padded to 64 or 128, keys of either format. WG depends on the model
 * alone: a DCP prefill scores over the f32 workspace what one rank scores over its bf16
 * cache, and both must sum alike (bf16 keys only, as it first was, made the picks of a
 * 64-head model depend on the DCP size). VEC only changes how rows are read. */
typedef struct tc_path {
  int dimp, es;
  bool vec, wg, fp8, w8;
} tc_path;

static tc_path tc_path_of(const sc_indexer_args *a) {
  tc_path p;
  p.dimp = dim_padded(a->dim);
  p.fp8 = a->keys.fmt == SC_KFMT_FP8_INDEX;
  p.es = p.fp8 ? 1 : (int)sc_kfmt_size(a->keys.fmt);
  p.vec = (uintptr_t)a->keys.data % 16 == 0 && a->keys.ld * p.es % 16 == 0 &&
          a->dim * p.es % 16 == 0;
  p.wg = p.dimp >= 64 && tc_rows_per_token(a->n_heads) == 64;
  p.w8 = tc_w8(p.dimp, a->keys.fmt, p.wg);
  return p;
}

template <int FMT>
static tc_kernel tc_instance_wg(int dimp, bool vec) {
  if (dimp == 64) return vec ? k_idx_tc<64, FMT, true, true> : k_idx_tc<64, FMT, false, true>;
  return vec ? k_idx_tc<128, FMT, true, true> : k_idx_tc<128, FMT, false, true>;
}

static tc_kernel tc_pick(const sc_indexer_args *a, const tc_path &p) {
  const bool f32 = a->keys.fmt == SC_KFMT_F32;
  if (p.wg) return p.fp8 ? tc_instance_wg<SC_KFMT_FP8_INDEX>(p.dimp, p.vec)
                   : f32 ? tc_instance_wg<SC_KFMT_F32>(p.dimp, p.vec)
                         : tc_instance_wg<SC_KFMT_BF16>(p.dimp, p.vec);
  return p.fp8 ? tc_instance<SC_KFMT_FP8_INDEX>(p.dimp, p.vec)
         : f32 ? tc_instance<SC_KFMT_F32>(p.dimp, p.vec)
               : tc_instance<SC_KFMT_BF16>(p.dimp, p.vec);
}

/* Sampled floors. Where a token sees many keys, much of the indexer's time went to
 * appending candidates and cutting lists (most of it where scoring is cheap, few head
 * rows of few values as model-long's 4 x 64; at 64 heads of 128 the floors still take
 * 17% off: tc_sample_stride): a threshold that starts at 1 lets a token's first K +
 * tc_piece(K) keys in, all of them, and the cuts that follow read them again (a 32k
 * prompt of model-long: ~14 ms a layer on an H100, its products a fraction of one). So a first
 * pass scores every S-th key of each token's list and selects each token's r best of
 * them (r a little above K / S); the r-th, a key some token truly has, starts its
 * threshold in the full pass. Keys at or above it are r S of the token's keys or so,
 * a little above K: no cuts, a short list to select from. Exact whatever the sample:
 * a start at or below the token's K-th best key loses nothing; a start above it shows as
 * fewer than K keys appended, and a repair pass scores that token's group again from 1
 * (r sits 4 standard deviations of a uniform sample's rank above K / S, so that is rare;
 * a sample that is not uniform, scores periodic in the list, costs time, never keys).
 * The picks never depend on S, r or the repair; the three launches always run, whatever
 * the keys (a decision on the device, none on the host). */
__global__ void k_idx_floor(const uint64_t *sample, int r, int n_tok, int G,
                            unsigned long long *thr0, int *redo) {
  sc_dev_pdl_enter();
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n_tok) return;
  /* the sample pass wrote each token's r best, or all it had and zeros after them */
  const uint64_t *row = sample + t * r;
  uint64_t lo = ~0ull;
  int n = 0;
  for (int i = 0; i < r; i++)
    if (row[i] != 0) lo = row[i] < lo ? row[i] : lo, n++;
  thr0[t] = n == r ? lo : 1; /* fewer than r sampled: no start, every key appends */
  if (t % G == 0) redo[t / G] = 0;
}

/* The sample's stride S for the floors (1: none). Only where a token's list is one chunk
 * (a prompt of many tokens: decode tokens and short chunks spread a token over chunks
 * instead), over lists of 8K keys or more (max_keys). The sample pass costs a tile's
 * fixed work per sampled tile, and its products; the floors save the appends of most
 * keys, the cuts, and most of the end-of-item select. Few products a tile (hp x dimp <=
 * 1024: model-long's 4 x 64): S the largest power of two up to 32 with K / S >= 64 (r's
 * margin, 4 sqrt(K / S), at most half of K / S): at S = 8 the sample pass was a sixth of
 * a 32k prompt's indexer, at 32 a twentieth, and 64 was no faster (H100, 2026-12-06).
 * Many (DeepSeek-V3.2's 64 x 128): the products are most of the sample pass, so a
 * sparser sample pays: up to 128 with K / S >= 16; 1024 causal tokens over 16384 keys
 * took 1,249 us with no floors, 1,169-1,176 at S = 16, 1,082-1,088 at 32 and 1,034 at 64
 * (bf16 keys; fp8_index 1,130-1,132 / 1,006-1,008 / 961-964 / 937-943), and in a later
 * tree 1,017-1,018 at 64 against 990 at 128 (fp8_index 923-924 / 906; H100, 2026-12-06,
 * bench/long-context.md; larger S not measured: r's margin grows with S, m + 4 sqrt(m)
 * sampled keys for m = K / S).
 * SPARSECP_INDEXER_FLOORS=S (a power of two) fixes it, for comparisons in one run. */
static int tc_sample_stride(const sc_kcuda *c, const sc_indexer_args *a, const tc_shape &sp,
                            int dimp, int n_chunks) {
  if (c->idx_floors == 0 || n_chunks != 1 || a->max_keys < 8 * (int64_t)a->topk) return 1;
  if (c->idx_floors > 1) return c->idx_floors;
  const bool few = sp.hp * dimp <= 1024;
  const int most = few ? 32 : 128, per = few ? 64 : 16; /* S at most; K / S at least */
  int S = 1;
  while (2 * S <= most && 2 * S <= a->topk / per) S *= 2;
  return S >= 4 ? S : 1;
}

/* The sample's r: K / S and four standard deviations of a uniform sample's count. */
static int tc_sample_r(int K, int S) {
  const int m = (int)sc_cdiv(K, S);
  int sd = 1;
  while (sd * sd < m) sd++;
  return m + 4 * sd + 4;
}

/* How the survivors of several chunks a token are selected: by one block a token
 * (k_topk_final over the token's chunk lists in shared memory, one launch) where the
 * step has tokens enough to give most SMs a block, else by the radix select over many
 * blocks a token (cuda_topk_radix.cu, a launch a pass). 128 decode tokens of 64 heads
 * over 16384 keys each (two chunks a token): 261 us against 307 over bf16 keys, 247
 * against 264 over fp8_index keys (H100, 2026-12-06, bench/long-context.md). Both are
 * exact and write in position order: the choice changes no pick.
 * SPARSECP_INDEXER_MERGE=block or radix fixes it (c->idx_merge). */
static bool tc_merge_by_block(const sc_kcuda *c, int n_tok) {
  if (c->idx_merge != 0) return c->idx_merge == 1;
  return 2 * (int64_t)n_tok >= c->num_sms;
}

/* Whether a step takes the dense path (cuda_indexer_dense.cu): tokens that share no key
 * tiles (one a block, sp.group 1) and are enough to give most SMs one, 64 head rows of 128
 * values (dims of 65-128) on wgmma over bf16 or fp8_index keys in 16-byte pieces (f32
 * keys take the scoring kernel, which rounds them to the same bf16), and the caller's
 * bound of a token's range at most SC_KCUDA_DENSE_MAX_KEYS. Both paths score a pair to
 * the same bits and select exactly, so the choice changes no pick. */
static bool tc_dense(const sc_kcuda *c, const sc_indexer_args *a, const tc_path &p,
                     const tc_shape &sp) {
  return c->idx_dense && p.wg && p.dimp == 128 && p.vec &&
         (p.w8 || a->keys.fmt == SC_KFMT_BF16) && sp.group == 1 && a->max_keys > 0 &&
         a->max_keys <= SC_KCUDA_DENSE_MAX_KEYS && 2 * (int64_t)a->n_tok >= c->num_sms;
}

extern "C" int sc_kcuda_indexer_topk(sc_kernels *k, const sc_indexer_args *a) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_indexer(a));
  if (a->dim > TC_MAX_DIM || a->topk > SC_KCUDA_TOPK_MAX || a->keys.fmt == SC_KFMT_FP8_DS_MLA)
    return SC_ENOTSUP;
  tc_shape sp;
  const tc_path path = tc_path_of(a);
  /* keys in shared memory: e4m3 for W8, else bf16 for wgmma and for fp8_index keys */
  const int kes = path.w8 ? 1 : path.wg || path.fp8 ? 2 : path.es;
  const bool raw = path.fp8 && path.vec && !path.w8; /* staged raw (tc_widen_fp8) */
  if (tc_choose(a, c->num_sms, c->idx_group, path.dimp, kes, path.wg, path.fp8, raw, &sp))
    return SC_ENOTSUP;
  sp.few = c->idx_few && sp.hp < 16 && tc_few_fits(path.dimp, path.vec, path.wg);
  if (tc_dense(c, a, path, sp)) return sc_kcuda_indexer_dense(c, a, path.w8);
  const tc_kernel fn = tc_pick(a, path);
  const size_t smem = tc_lay(sp, path.dimp, kes, path.wg, path.fp8, raw).total;
  int per_sm = 0;
  int rc = sc_kcuda_err(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)TC_SMEM_MAX),
                        "indexer smem");
  if (rc == 0)
    rc = sc_kcuda_err(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, TC_THREADS, smem),
                      "indexer occupancy");
  if (rc) return rc;
  /* with the caller's bound of a token's keys, no more chunks than a group's keys fill
   * at TC_MIN_SEG each, and one up to TC_SPLIT_MIN keys: a decode token at a short
   * context was TC_CHUNKS_MAX chunks, all but one empty, and a select over all of them
   * where one chunk needs only the write. The chunks change nothing selected. */
  const int64_t groups = sc_cdiv(a->n_tok, sp.group);
  const int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * c->num_sms;
  int64_t most = TC_CHUNKS_MAX;
  if (a->max_keys > 0) {
    const int64_t span = (int64_t)a->max_keys * sp.group; /* a group's keys at most */
    const int64_t bound = span <= TC_SPLIT_MIN ? 1 : sc_cdiv(span, TC_MIN_SEG);
    most = bound < most ? bound : most;
  }
  const int n_chunks = tc_chunks(groups, resident, most);
  const int64_t n_items = groups * n_chunks;
  const int64_t grid = n_items < resident ? n_items : resident;
  const size_t list_bytes = sizeof(uint64_t) * (size_t)a->n_tok * (size_t)n_chunks *
                            (size_t)a->topk;
  const size_t cand_bytes = sizeof(uint64_t) * (size_t)grid * sp.group * sp.room;
  const bool by_block = n_chunks > 1 && tc_merge_by_block(c, a->n_tok);
  /* few tokens over long ranges, few heads over rows of 64: scoring and select in one
   * cooperative launch where it fits (cuda_indexer_fused.cu), the same picks */
  if (n_chunks > 1 && !by_block && sp.few && c->idx_fused && path.dimp == 64 && path.vec &&
      !path.wg && !path.fp8) {
    const int frc = sc_kcuda_indexer_fused(c, a, sp.hp);
    if (frc != SC_ENOTSUP) return frc;
  }
  /* the select after the chunks: a block's tree levels, or the radix select's state */
  const size_t merge_bytes = n_chunks == 1 ? 0
                             : by_block    ? sc_kcuda_topk_tree_bytes(a->n_tok, n_chunks, a->topk)
                                           : sc_kcuda_topk_radix_bytes(a->n_tok, a->topk);
  const int S = tc_sample_stride(c, a, sp, path.dimp, n_chunks), r = tc_sample_r(a->topk, S);
  const size_t floor_bytes = S == 1 ? 0
                                    : sizeof(uint64_t) * (size_t)a->n_tok * r +
                                          sizeof(uint64_t) * (size_t)a->n_tok +
                                          sizeof(int) * (size_t)groups;
  char *scratch =
      (char *)sc_kcuda_scratch(c, list_bytes + cand_bytes + merge_bytes + floor_bytes);
  if (scratch == NULL) return SC_ENOMEM;
  uint64_t *keys = (uint64_t *)scratch, *cand = (uint64_t *)(scratch + list_bytes);
  void *merge = scratch + list_bytes + cand_bytes;
  tc_floor none = {NULL, NULL, NULL}, fl = none;
  if (S > 1) { /* the sample pass, its floors, then the full pass and its repair */
    char *f = scratch + list_bytes + cand_bytes + merge_bytes;
    uint64_t *sample = (uint64_t *)f;
    unsigned long long *thr0 =
        (unsigned long long *)(f + sizeof(uint64_t) * (size_t)a->n_tok * r);
    int *redo = (int *)((char *)thr0 + sizeof(uint64_t) * (size_t)a->n_tok);
    sc_indexer_args as = *a;
    as.topk = r;
    tc_shape ss = sp;
    ss.stride = S;
    /* a list that holds every sampled key of a token: no cuts (within the full pass's
     * candidate memory, which the sample pass uses before it) */
    const int64_t all = sc_cdiv(a->max_keys, S) + TC_KEYS;
    ss.room = r + tc_piece(r);
    if (ss.room < all) ss.room = all < sp.room ? (int)all : sp.room;
    sc_kcuda_launch(c, fn, (unsigned)grid, TC_THREADS, smem, as, 1, ss, n_items, cand, sample,
                    (int *)NULL, (int64_t)r, c->err_flag, none);
    if ((rc = SC_CUDA_CHECK_LAUNCH("indexer sample")) != 0) return rc;
    sc_kcuda_launch(c, k_idx_floor, (unsigned)sc_cdiv(a->n_tok, 256), 256, 0,
                    (const uint64_t *)sample, r, a->n_tok, sp.group, thr0, redo);
    if ((rc = SC_CUDA_CHECK_LAUNCH("indexer floors")) != 0) return rc;
    fl = {thr0, redo, NULL};
  }
  int *counts = NULL; /* one list per token when NULL: one block per token writes it */
  if (n_chunks > 1 && !by_block &&
      (rc = sc_kcuda_topk_radix_begin(c, a->n_tok, merge, &counts)) != 0)
    return rc;
  sc_kcuda_launch(c, fn, (unsigned)grid, TC_THREADS, smem, *a, n_chunks, sp, n_items, cand, keys,
                  counts, (int64_t)n_chunks * a->topk, c->err_flag, fl);
  if ((rc = SC_CUDA_CHECK_LAUNCH("indexer")) != 0) return rc;
  if (S > 1) { /* the repair: the groups whose start was above a token's K-th best */
    const tc_floor repair = {NULL, NULL, fl.redo};
    sc_kcuda_launch(c, fn, (unsigned)grid, TC_THREADS, smem, *a, n_chunks, sp, n_items, cand,
                    keys, counts, (int64_t)n_chunks * a->topk, c->err_flag, repair);
    if ((rc = SC_CUDA_CHECK_LAUNCH("indexer repair")) != 0) return rc;
  }
  if (n_chunks == 1 || by_block) /* a list of K per chunk: one block a token selects */
    return sc_kcuda_topk_finish(c, a->n_tok, n_chunks, a->topk, keys, a->out_pos, a->out_cand,
                                (uint64_t *)merge);
  /* the chunks appended their survivors per token; a select over many blocks finishes */
  return sc_kcuda_topk_radix(c, a->n_tok, (int64_t)n_chunks * a->topk, a->topk, keys,
                             a->out_pos, a->out_cand, merge);
}
