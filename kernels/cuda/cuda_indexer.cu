/* cuda_indexer.cu - the lightning indexer (SPEC.md §7) on the tensor cores:
 *   score(t, s) = Σ_h w[t,h] * ReLU(<q[t,h], k_s>), then the top-K of each token.
 *
 * Precision. q and the keys are rounded to bf16 (round to nearest even; bf16 keys are
 * taken as they are), products are exact in the f32 accumulators of mma.sync, and the
 * ReLU x weight sum runs in f32. DeepSeek-V3.2 itself scores in fp8; the CPU reference
 * scores in f32 on the unrounded values, so GPU and CPU may pick differently among keys
 * whose scores lie within the rounding (tests/gpu/test_gpu_kernels.c bounds it).
 *
 * Layout invariance. A pair's score depends only on (q[t], w[t], k_s). A token's heads
 * occupy hp rows of the q tile (hp: the head count rounded up to a power of two below
 * 16, to a multiple of 16 from there; the extra rows are zero with weight zero), and
 * its head sum has one shape fixed by hp alone: from 16 heads, each lane folds its two
 * rows of each of the token's m-tiles in order, then a shuffle over the 8 lanes of a
 * key (xor 4, 8, 16); below, each lane holds one row and a shuffle over the token's hp
 * lanes adds them (log2 hp steps). Every key of a tile goes through the same
 * instructions, the k16 steps run in the same order, and adding a zero row is exact.
 * So a token scores every pair bit-identically whatever its group, chunk, batch or
 * rank, and the exact selection that follows picks the same keys. Tokens of 64 head
 * rows (and rows of 64 or 128) score on wgmma (tc_score_tile_wg), whose head sum has
 * another fixed shape; which of the two scores a launch depends on the model alone
 * (tc_path_of), never on the layout or the keys' format (f32 keys are rounded to bf16
 * on either path).
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
 *     scores). Per token, keys that reach its threshold
 *     are appended to its candidate list in global memory (K + tc_piece(K) keys,
 *     the block's own); a list without room for another tile is cut back by one warp (while
 *     the others cut other tokens' lists) to a set that holds its K best, and the
 *     threshold rises to that set's floor (cuda_select.cuh's warp_cut_topk). At the end
 *     of an item a team of warps per token (all 8 for one token, 4 each for two, 2 for
 *     three or four, one from five on or when no list holds more than K) selects
 *     exactly its K best into the item's output. Scores never leave the tile:
 *     nothing is allocated per (query, key).
 *  2. With one chunk a token, sc_kcuda_topk_finish (cuda_topk.cu) sorts and writes each
 *     token's K survivors; with several, the chunks append their survivors per token and
 *     sc_kcuda_topk_radix (cuda_topk_radix.cu) selects the K over many blocks.
 * The group size and chunk count come from the token count and the caller's bound of a
 * token's keys (max_keys; ops never read buffer contents on the host), so key ranges
 * stay on the device. */
#include "kernels/cuda/cuda_select.cuh"
#include "kernels/cuda/cuda_wgmma.cuh"

/* 8 warps, 16 keys each a tile. With 4 warps (32 keys each) the SM held one warp per
 * scheduler, and a 32k prompt's scoring stalled on dependent instructions and
 * shared-memory loads: 0.15 instructions issued a cycle per scheduler (ncu, H200,
 * 2026-12-02: bench/long-context.md). */
#define TC_THREADS 256
#define TC_WARPS (TC_THREADS / 32)
#define TC_KEYS 128     /* keys per tile; a thread per key when loading their list entries */
#define TC_KW (TC_KEYS / TC_WARPS) /* keys per warp */
#define TC_NT (TC_KW / 8)          /* mma column tiles per warp */
#define TC_MAX_DIM 128
#define TC_GROUP_MAX 32 /* tokens per block: a bit each in a key's token mask */
#define TC_ROWS_MAX 256 /* q rows per block: 16 m-tiles of 16 */
#define TC_PAD 8        /* elements of padding per shared row: conflict-free fragments */
#define TC_SMEM_MAX (SC_KCUDA_SMEM_MAX - 64) /* (the kernel's static words take the rest) */
#define TC_MIN_SEG 512  /* keys of a chunk at least (4 tiles), so a short range spreads less */
#define TC_CHUNKS_MAX 128 /* chunks of a token's range: a decode token over 128k keys takes
                           * 128 blocks of 1024 keys, under the K of a block: no cut */
#define TC_PIECE 1024   /* candidate room per token beyond K, at least (see tc_piece) */
#define TC_SLACK 256    /* candidates a cut may keep beyond K: one radix pass, mostly */

static_assert(TC_KW == 16 && TC_NT == 2,
              "a half-warp per token when appending: 16 keys a warp, two column tiles");
static_assert(TC_PIECE > TC_KEYS + TC_SLACK, "a cut must leave room for the next tile");

/* How a launch is shaped: tokens per block, q rows per token, m-tiles, key stages. None
 * of it changes what is selected. */
typedef struct tc_shape {
  int group, hp, m_tiles, stages;
  int room; /* a token's candidate list in global memory: K + tc_piece(K) keys */
} tc_shape;

/* Shared memory of one block: byte offsets of its arrays, in this order (every part a
 * multiple of 16 bytes, so the 16-byte cp.async and ldmatrix addresses stay aligned):
 *   keys [stages][TC_KEYS rows] in their own format, q bf16 [16 m_tiles rows],
 *   thresholds uint64 [TC_GROUP_MAX], largest score words uint32 [TC_GROUP_MAX] (in
 *   uint64 room), key row byte offsets int64 [2][TC_KEYS], w f32 [16 m_tiles],
 *   scores f32 [TC_WARPS][G][TC_KW], per key of the two tiles: position, token mask int
 *   [2][2][TC_KEYS], cut bins int [TC_WARPS][256], fills and token ranges int
 *   [4][TC_GROUP_MAX], the end-of-item cut teams' counts and bases int [2][TC_WARPS].
 * A key or q row is DIMP + TC_PAD elements (the padding keeps mma.sync's fragment loads
 * conflict-free); with WG (wgmma scoring) DIMP elements in the 128-byte-swizzled layout
 * of cuda_wgmma.cuh, which wants the keys and q 1024-aligned: the kernel aligns the
 * dynamic base by hand, so `total` holds 1024 bytes of slack. */
typedef struct tc_layout {
  size_t k, q, thr, top, koff, w, sc, kpos, kmask, hist, fill, total;
} tc_layout;

__host__ __device__ inline tc_layout tc_lay(const tc_shape &sp, int dimp, int esize, bool wg) {
  const size_t rows = 16 * (size_t)sp.m_tiles, ld = (size_t)dimp + (wg ? 0 : TC_PAD);
  tc_layout l;
  l.k = 0;
  l.q = l.k + (size_t)esize * (size_t)sp.stages * TC_KEYS * ld;
  l.thr = l.q + 2 * rows * ld;
  l.top = l.thr + sizeof(uint64_t) * TC_GROUP_MAX;
  l.koff = l.top + sizeof(uint64_t) * TC_GROUP_MAX;
  l.w = l.koff + sizeof(int64_t) * 2 * TC_KEYS;
  l.sc = l.w + 4 * rows;
  l.kpos = l.sc + 4 * (size_t)TC_WARPS * sp.group * TC_KW;
  l.kmask = l.kpos + sizeof(int) * 2 * TC_KEYS;
  l.hist = l.kmask + sizeof(int) * 2 * TC_KEYS;
  l.fill = l.hist + sizeof(int) * TC_WARPS * 256;
  l.total = l.fill + sizeof(int) * (4 * TC_GROUP_MAX + 2 * TC_WARPS) + (wg ? 1024 : 0);
  return l;
}

/* The B fragment (k = 2c, 2c + 1 and 2c + 8, 2c + 9 of column n) of one key row held in
 * shared memory, as packed bf16 pairs. */
template <int FMT>
__device__ inline void tc_b_frag(uint32_t b[2], const void *row, int k0, int c) {
  if (FMT == SC_KFMT_F32) {
    const float2 lo = *(const float2 *)((const float *)row + k0 + 2 * c);
    const float2 hi = *(const float2 *)((const float *)row + k0 + 2 * c + 8);
    b[0] = pack_bf16x2(lo.x, lo.y);
    b[1] = pack_bf16x2(hi.x, hi.y);
  } else {
    b[0] = *(const uint32_t *)((const uint16_t *)row + k0 + 2 * c);
    b[1] = *(const uint32_t *)((const uint16_t *)row + k0 + 2 * c + 8);
  }
}

/* The group's tokens as the loads see them: key ranges and query positions. */
typedef struct tc_tokens {
  const int *begin, *end, *qpos; /* shared [gn] */
  int gn;
  bool ordered; /* one range start, ends and query positions in order: a prompt's tokens */
} tc_tokens;

/* The first j < n with a[j] >= v (n if none), a[] in order. */
__device__ inline int tc_first_at_least(const int *a, int n, int64_t v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Bit j: token j may see the key at list entry e and position pos. */
__device__ inline unsigned tc_token_mask(const tc_tokens &tk, int64_t e, int32_t pos) {
  if (tk.ordered) { /* both conditions hold from some token on: the later of the two */
    if (e < tk.begin[0]) return 0;
    const int a = tc_first_at_least(tk.end, tk.gn, e + 1);
    const int b = tc_first_at_least(tk.qpos, tk.gn, pos);
    const int from = a > b ? a : b;
    return (unsigned)(((1ull << tk.gn) - 1) & ~((1ull << from) - 1));
  }
  unsigned m = 0;
  for (int j = 0; j < tk.gn; j++)
    if (e >= tk.begin[j] && e < tk.end[j] && pos <= tk.qpos[j]) m |= 1u << j;
  return m;
}

/* A key's list entry: its position and row, read a tile ahead of the tile that queues
 * its row, so that the read is not on the way to the copies (with it there, the loads
 * took a quarter of a 64-head indexer's time: ncu, H200, 2026-12-04). */
typedef struct tc_entry {
  int64_t row;
  int32_t pos;
  bool in; /* within the segment */
} tc_entry;

/* Thread i < TC_KEYS: the entry of key e0 + i of the list (the segment ends at s1). */
__device__ inline tc_entry tc_fetch(const sc_indexer_args &a, int64_t e0, int64_t s1) {
  tc_entry x = {0, -1, false};
  const int64_t e = e0 + threadIdx.x;
  if (threadIdx.x < TC_KEYS && e < s1) {
    x.pos = a.key_pos[e];
    x.row = a.key_rows ? a.key_rows[e] : e;
    x.in = true;
  }
  return x;
}

/* Queues tile [e0, e0 + TC_KEYS) of the key list (entries x, from tc_fetch) into stage
 * `kbuf` and records each key's position, token mask (bit j: token j may see it) and row
 * in kpos/kmask/koff (the byte offset of its row, -1 for a key nobody may see); returns
 * (to every thread) whether any token may see any key of the
 * tile. A bad row of a key some token may see raises SC_ERANGE, and nobody sees it. Keys
 * nobody may see are not read (zeros), and a tile nobody may see is not loaded at all.
 * Each thread reads its key's list entry once, and the pieces of the rows take it from
 * shared memory: when every piece read it again, a 32k-token prefill took 194 ms a layer
 * instead of 74 (H200, 2026-12-02: bench/long-context.md).
 * VEC: rows start 16-byte aligned and span whole 16-byte pieces (cp.async of 16 bytes);
 * a thread copies the same piece of every (TC_THREADS / pieces)-th row, so that its
 * addresses differ by constants (the piece and row arithmetic of each copy was a tenth
 * of a 64-head indexer's instructions). Otherwise element by element through registers
 * (same values, slower). WG: into the swizzled layout that wgmma reads, as bf16: bf16
 * rows by cp.async when VEC, f32 rows (rounded to nearest even, as tc_b_frag rounds them)
 * and unaligned bf16 rows through registers, 8 elements a thread at a time. */
template <int DIMP, int FMT, bool VEC, bool WG>
__device__ inline bool tc_load_tile(const sc_indexer_args &a, const tc_tokens &tk, int64_t e0,
                                    tc_entry x, int64_t kstep, void *kbuf, int *kpos,
                                    unsigned *kmask, int64_t *koff, int *flag) {
  constexpr int ES = FMT == SC_KFMT_F32 ? 4 : 2;
  constexpr int LD = DIMP + TC_PAD;      /* elements per shared row (not WG) */
  constexpr int PIECES = DIMP * ES / 16; /* 16-byte pieces per row: a power of two */
  bool mine = false; /* whether some token may see this thread's key */
  if (threadIdx.x < TC_KEYS) {
    unsigned m = 0;
    if (x.in) {
      m = tc_token_mask(tk, e0 + threadIdx.x, x.pos);
      if (m && (x.row < 0 || x.row >= a.keys.rows)) {
        sc_dev_raise(flag, SC_ERANGE);
        m = 0;
      }
    }
    kpos[threadIdx.x] = x.pos;
    kmask[threadIdx.x] = m;
    koff[threadIdx.x] = m ? x.row * kstep : -1;
    mine = m != 0;
  }
  if (!__syncthreads_or(mine)) return false;
  if (WG && (FMT == SC_KFMT_F32 || !VEC)) {
    constexpr int P8 = DIMP / 8; /* 16-byte pieces of a bf16 row */
    for (int i = threadIdx.x; i < TC_KEYS * P8; i += TC_THREADS) {
      const int j = i / P8, p = i % P8;
      const int64_t off = koff[j];
      float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      if (off >= 0) {
        const char *src = (const char *)a.keys.data + off;
        if (FMT == SC_KFMT_F32 && VEC) { /* rows in whole float4s: dim a multiple of 4 */
          const float4 *f = (const float4 *)src + 2 * p;
          if (8 * p < a.dim) *(float4 *)&v[0] = f[0];
          if (8 * p + 4 < a.dim) *(float4 *)&v[4] = f[1];
        } else {
#pragma unroll
          for (int e = 0; e < 8; e++)
            if (8 * p + e < a.dim)
              v[e] = FMT == SC_KFMT_F32 ? ((const float *)src)[8 * p + e]
                                        : __bfloat162float(__ushort_as_bfloat16(
                                              ((const uint16_t *)src)[8 * p + e]));
        }
      }
      *(uint4 *)((char *)kbuf + wg_off<TC_KEYS>(j, p)) =
          make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]),
                     pack_bf16x2(v[6], v[7]));
    }
  } else if (VEC) {
    static_assert(TC_THREADS % PIECES == 0 && (TC_THREADS / PIECES) % 8 == 0,
                  "a thread's rows 8k apart: one swizzle phase");
    constexpr int RS = TC_THREADS / PIECES; /* rows between a thread's copies */
    constexpr int DST_STEP = WG ? RS * 128 : RS * LD * ES;
    const int piece = threadIdx.x % PIECES, r0 = threadIdx.x / PIECES;
    const bool in_dim = piece * 16 < a.dim * ES;
    char *dst = (char *)kbuf + (WG ? wg_off<TC_KEYS>(r0, piece) : r0 * LD * ES + piece * 16);
    const char *base = (const char *)a.keys.data + piece * 16;
#pragma unroll
    for (int k = 0; k < TC_KEYS / RS; k++) {
      const int64_t off = koff[r0 + k * RS];
      const bool ok = in_dim && off >= 0;
      cp_async16(dst + k * DST_STEP, base + (ok ? off : 0), ok);
    }
  } else {
    for (int i = threadIdx.x; i < TC_KEYS * DIMP; i += TC_THREADS) {
      const int j = i / DIMP, d = i % DIMP;
      const bool ok = koff[j] >= 0 && d < a.dim;
      const char *src = (const char *)a.keys.data + (ok ? koff[j] : 0);
      if (FMT == SC_KFMT_F32)
        ((float *)kbuf)[(size_t)j * LD + d] = ok ? ((const float *)src)[d] : 0.0f;
      else
        ((uint16_t *)kbuf)[(size_t)j * LD + d] = ok ? ((const uint16_t *)src)[d] : 0;
    }
  }
  return true;
}

/* One m-tile (16 q rows from row 16 mt) times a warp's TC_KW keys: acc[nt] holds the
 * products of column tile nt, the k16 steps always in order. */
template <int KS, int LD>
__device__ inline void tc_mtile(float (&acc)[TC_NT][4], const uint16_t *q_s, int mt, int lane,
                                const uint32_t (&b)[KS][TC_NT][2]) {
#pragma unroll
  for (int nt = 0; nt < TC_NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < KS; ks++) {
    uint32_t af[4];
    ldsm_x4(af, q_s + (size_t)(mt * 16 + (lane & 15)) * LD + ks * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int nt = 0; nt < TC_NT; nt++) mma_bf16_16816(acc[nt], af, b[ks][nt]);
  }
}

/* Scores this warp's TC_KW keys of the tile in shared memory `kw` against the group's
 * gn tokens into sc_w[j * TC_KW + key] (the head sums as in the comment at the top). */
template <int DIMP, int FMT>
__device__ inline void tc_score_tile(const unsigned char *kw, const uint16_t *q_s,
                                     const float *w_s, float *sc_w, int gn, int hp, int lane) {
  constexpr int ES = FMT == SC_KFMT_F32 ? 4 : 2;
  constexpr int LD = DIMP + TC_PAD;
  constexpr int KS = DIMP / 16; /* k16 steps */
  const int g = lane >> 2, c = lane & 3;
  uint32_t b[KS][TC_NT][2]; /* this warp's keys: column tiles of 8, every k16 step */
#pragma unroll
  for (int ks = 0; ks < KS; ks++)
#pragma unroll
    for (int nt = 0; nt < TC_NT; nt++)
      tc_b_frag<FMT>(b[ks][nt], kw + (size_t)(nt * 8 + g) * LD * ES, ks * 16, c);
  if (hp >= 16) { /* a token's m-tiles in order, then the 8 lanes of a key */
    const int per = hp / 16;
    for (int j = 0; j < gn; j++) {
      float part[TC_NT][2] = {};
      for (int mt = j * per; mt < (j + 1) * per; mt++) {
        float acc[TC_NT][4];
        tc_mtile<KS, LD>(acc, q_s, mt, lane, b);
        const float w0 = w_s[mt * 16 + g], w1 = w_s[mt * 16 + g + 8];
#pragma unroll
        for (int nt = 0; nt < TC_NT; nt++)
#pragma unroll
          for (int x = 0; x < 2; x++) {
            part[nt][x] = fmaf(w0, fmaxf(acc[nt][x], 0.0f), part[nt][x]);
            part[nt][x] = fmaf(w1, fmaxf(acc[nt][2 + x], 0.0f), part[nt][x]);
          }
      }
#pragma unroll
      for (int nt = 0; nt < TC_NT; nt++)
#pragma unroll
        for (int x = 0; x < 2; x++) {
#pragma unroll
          for (int off = 4; off < 32; off <<= 1)
            part[nt][x] += __shfl_xor_sync(0xffffffffu, part[nt][x], off);
          if (g == 0) sc_w[j * TC_KW + nt * 8 + 2 * c + x] = part[nt][x];
        }
    }
  } else { /* 16 / hp tokens per m-tile: a row per lane, then the token's hp lanes */
    /* hp is a power of two here: shifts and masks, not the integer divisions a runtime
     * divisor costs in every m-tile (ncu, H200, 2026-12-03: a 32k prompt's scoring spent
     * a tenth of its instructions there), and the shuffle steps unrolled */
    const int lhp = 31 - __clz(hp), per = 16 >> lhp;
    for (int mt = 0; mt * per < gn; mt++) {
      float acc[TC_NT][4];
      tc_mtile<KS, LD>(acc, q_s, mt, lane, b);
      const float w0 = w_s[mt * 16 + g], w1 = w_s[mt * 16 + g + 8];
      const int j0 = mt * per + (g >> lhp), j1 = j0 + (8 >> lhp); /* rows g and g + 8 */
#pragma unroll
      for (int nt = 0; nt < TC_NT; nt++)
#pragma unroll
        for (int x = 0; x < 2; x++) {
          float p0 = w0 * fmaxf(acc[nt][x], 0.0f), p1 = w1 * fmaxf(acc[nt][2 + x], 0.0f);
#pragma unroll
          for (int off = 4; off < 32; off <<= 1)
            if (off < 4 * hp) { /* (uniform: every lane takes the same steps) */
              p0 += __shfl_xor_sync(0xffffffffu, p0, off);
              p1 += __shfl_xor_sync(0xffffffffu, p1, off);
            }
          if ((g & (hp - 1)) == 0) {
            if (j0 < gn) sc_w[j0 * TC_KW + nt * 8 + 2 * c + x] = p0;
            if (j1 < gn) sc_w[j1 * TC_KW + nt * 8 + 2 * c + x] = p1;
          }
        }
    }
  }
  __syncwarp();
}

/* The same with wgmma, for tokens of exactly 64 head rows (hp = 64: DeepSeek-V3.2's 64
 * index heads), keys as bf16 in the swizzled layout: warpgroup wgi scores keys 64 wgi .. 64 wgi + 63 of the
 * tile (warp w of the block keys 16 w .. 16 w + 15, as tc_score_tile) against one token
 * at a time, S^T = K Q^T in 8 (DIMP = 128) wgmma m64n64k16 with keys as A and the
 * token's q rows as B, both read from shared memory. Head sum: each thread folds its 16
 * heads (columns 8 n + 2 c + x, n then x in order) of its two keys, then the 4 lanes of a
 * key add theirs (xor 1, 2). The same instructions for every token, whatever its group:
 * a pair's score depends only on (q[t], w[t], k_s). It differs from tc_score_tile's in
 * rounding (another summation order); the choice between the two depends on the model's
 * index heads and width alone, never on the layout. */
template <int DIMP>
__device__ inline void tc_score_tile_wg(uint32_t k_base, uint32_t q_base, int m_rows,
                                        const float *w_s, float *sc_w, int gn, int warp,
                                        int lane) {
  constexpr int KS = DIMP / 16;
  const int g = lane >> 2, c = lane & 3;
  const uint64_t da = wg_desc(k_base + (uint32_t)(warp >> 2) * 8 * 1024, 16, 1024);
  for (int j = 0; j < gn; j++) {
    float d[32];
    const uint64_t db = wg_desc(q_base + (uint32_t)j * 8 * 1024, 16, 1024);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      const uint32_t oa = (ks >> 2) * (TC_KEYS * 128) + (ks & 3) * 32;
      const uint32_t ob = (ks >> 2) * (m_rows * 128) + (ks & 3) * 32;
      wgmma_m64n64(d, wg_desc_add(da, oa), wg_desc_add(db, ob), ks > 0);
    }
    wg_commit();
    wg_wait0();
    wg_pin(d);
    const float *wj = w_s + j * 64 + 2 * c;
    float p0 = 0.0f, p1 = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int x = 0; x < 2; x++) {
        const float wv = wj[8 * n + x];
        p0 = fmaf(wv, fmaxf(d[4 * n + x], 0.0f), p0);
        p1 = fmaf(wv, fmaxf(d[4 * n + 2 + x], 0.0f), p1);
      }
    p0 += __shfl_xor_sync(0xffffffffu, p0, 1);
    p1 += __shfl_xor_sync(0xffffffffu, p1, 1);
    p0 += __shfl_xor_sync(0xffffffffu, p0, 2);
    p1 += __shfl_xor_sync(0xffffffffu, p1, 2);
    if (c == 0) {
      sc_w[j * TC_KW + g] = p0;
      sc_w[j * TC_KW + g + 8] = p1;
    }
  }
  __syncwarp();
}

/* Appends this warp's keys of the tile that reach their token's threshold to the token's
 * list: a half-warp per token (a lane per key), one atomic per half-warp. top[j] keeps
 * the largest high word (score bits) appended, a bound for the cuts (tc_top_bound):
 * 32 bits, so a redux per half-warp and a native shared atomic, where a 64-bit maximum took four
 * shuffle rounds and a compare-and-swap loop on every tile that appended. */
__device__ inline void tc_append(const float *sc_w, unsigned kmask, int32_t kpos, int gn,
                                 const unsigned long long *thr, unsigned *top,
                                 int *fill, uint64_t *cb, int room, int *flag, int lane) {
  const int half = lane >> 4, key = lane & 15;
  const unsigned half_lanes = 0xffffu << (16 * half);
  for (int j0 = 0; j0 < gn; j0 += 2) {
    const int j = j0 + half;
    const bool sees = j < gn && ((kmask >> j) & 1u);
    const uint64_t k = sees ? sc_dev_topk_key(sc_w[j * TC_KW + key], kpos) : 0;
    const bool want = sees && k >= thr[j];
    const unsigned all = __ballot_sync(0xffffffffu, want);
    if (all == 0) continue;
    const unsigned b = all & half_lanes;
    const int leader = b ? __ffs(b) - 1 : 16 * half;
    const unsigned hw = want ? (unsigned)(k >> 32) : 0u; /* for the cuts' range */
    const unsigned m0 = __reduce_max_sync(0xffffffffu, half == 0 ? hw : 0u);
    const unsigned m1 = __reduce_max_sync(0xffffffffu, half == 1 ? hw : 0u);
    const unsigned mk = half ? m1 : m0;
    int base = 0;
    if (b && lane == leader) {
      base = atomicAdd(&fill[j], __popc(b));
      atomicMax(&top[j], mk);
    }
    base = __shfl_sync(0xffffffffu, base, leader);
    if (want) {
      const int slot = base + __popc(b & ((1u << lane) - 1u));
      if (slot < room) cb[(size_t)j * room + slot] = k;
      else sc_dev_raise(flag, SC_EINVAL); /* duplicate positions: a cut leaves room otherwise */
    }
  }
}

/* An upper bound of the keys appended to a list whose largest high word is hw (0: none
 * appended; team_cut_edge then finds the largest itself): real keys have a nonzero high
 * word (cuda_common.cuh's sc_dev_topk_key). */
__device__ inline uint64_t tc_top_bound(unsigned hw) {
  return hw ? ((uint64_t)hw << 32) | 0xffffffffull : 0;
}

/* Scoring blocks. A work item is a group of G consecutive tokens and one chunk of the
 * union of their key ranges; the grid holds as many blocks as fit on the GPU at once,
 * each taking items in turn from the heaviest (the last tokens of a causal prompt see
 * the most keys), so that the candidate lists in global memory are the resident blocks'
 * only: cbuf holds gridDim.x x G x room keys. */
template <int DIMP, int FMT, bool VEC, bool WG>
__global__ void __launch_bounds__(TC_THREADS)
    k_idx_tc(sc_indexer_args a, int n_chunks, tc_shape sp, int64_t n_items, uint64_t *cbuf,
             uint64_t *out_keys, int *counts, int64_t cap, int *flag) {
  sc_dev_pdl_enter();
  constexpr int ES = FMT == SC_KFMT_F32 ? 4 : 2;
  constexpr int LD = WG ? DIMP : DIMP + TC_PAD;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  /* (the swizzle atoms of WG need 1024-byte alignment, which the dynamic base lacks) */
  unsigned char *smem = smem_raw + (WG ? (1024 - (smem_u32(smem_raw) & 1023)) & 1023 : 0);
  const int K = a.topk, G = sp.group, hp = sp.hp, M = 16 * sp.m_tiles, room = sp.room;
  constexpr int KES = WG ? 2 : ES; /* bytes of a key element in shared memory */
  const tc_layout lay = tc_lay(sp, DIMP, KES, WG);
  unsigned char *k_s = smem + lay.k;                          /* [stages][TC_KEYS][LD] */
  uint16_t *q_s = (uint16_t *)(smem + lay.q);                 /* [M][LD] */
  unsigned long long *thr = (unsigned long long *)(smem + lay.thr); /* [TC_GROUP_MAX] */
  unsigned *top = (unsigned *)(smem + lay.top);               /* [TC_GROUP_MAX] */
  int64_t *koff_s = (int64_t *)(smem + lay.koff);             /* [2][TC_KEYS] */
  float *w_s = (float *)(smem + lay.w);                       /* [M] */
  float *sc_s = (float *)(smem + lay.sc);                     /* [TC_WARPS][G][TC_KW] */
  int *kpos_s = (int *)(smem + lay.kpos);                     /* [2][TC_KEYS] */
  unsigned *kmask_s = (unsigned *)(smem + lay.kmask);         /* [2][TC_KEYS] */
  int *hist = (int *)(smem + lay.hist);                       /* [TC_WARPS][256] */
  int *fill = (int *)(smem + lay.fill);                       /* [TC_GROUP_MAX] */
  int *tb = fill + TC_GROUP_MAX, *te = tb + TC_GROUP_MAX, *tq = te + TC_GROUP_MAX;
  int *team_n = tq + TC_GROUP_MAX;                            /* [2][TC_WARPS] */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t kstep = a.keys.ld * ES;
  const size_t stage_bytes = (size_t)TC_KEYS * LD * KES;
  uint64_t *cbase = cbuf + (size_t)blockIdx.x * G * room;
  float *sc_w = sc_s + warp * G * TC_KW;
  int *hist_w = hist + warp * 256;
  const int H = a.n_heads;

  for (int64_t item = blockIdx.x; item < n_items; item += gridDim.x) {
    const int64_t r = n_items - 1 - item; /* the heaviest first */
    const int64_t t0 = r / n_chunks * G;
    const int chunk = (int)(r % n_chunks);
    const int gn = a.n_tok - t0 < G ? (int)(a.n_tok - t0) : G;
    __syncthreads(); /* the previous item is done with the shared words */
    if (WG) { /* 8 elements a thread, a 16-byte store into the swizzled layout */
      for (int i = threadIdx.x; i < M * (DIMP / 8); i += TC_THREADS) {
        const int row = i / (DIMP / 8), p = i % (DIMP / 8), j = row / hp, h = row % hp;
        const float *src = a.q + (t0 + j) * a.ld_q + (int64_t)h * a.dim;
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; e++)
          v[e] = j < gn && h < H && 8 * p + e < a.dim ? src[8 * p + e] : 0.0f;
        *(uint4 *)((char *)q_s + wg_off_n(M, row, p)) =
            make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]),
                       pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
      }
      fence_async_smem(); /* wgmma reads q through the async proxy */
    } else {
      for (int i = threadIdx.x; i < M * LD; i += TC_THREADS) {
        const int row = i / LD, d = i % LD, j = row / hp, h = row % hp;
        const float v = j < gn && h < H && d < a.dim
                            ? a.q[(t0 + j) * a.ld_q + (int64_t)h * a.dim + d]
                            : 0.0f;
        q_s[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
      }
    }
    for (int row = threadIdx.x; row < M; row += TC_THREADS) {
      const int j = row / hp, h = row % hp;
      w_s[row] = j < gn && h < H ? a.w[(t0 + j) * a.ld_w + h] : 0.0f;
    }
    if (threadIdx.x < gn) {
      const int j = threadIdx.x;
      tb[j] = a.key_begin[t0 + j];
      te[j] = a.key_end[t0 + j];
      tq[j] = a.q_pos[t0 + j];
      fill[j] = 0;
      thr[j] = 1; /* every real key is 1 or more */
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
      vis = tc_load_tile<DIMP, FMT, VEC, WG>(a, tk, s0, tc_fetch(a, s0, s1), kstep, k_s, kpos_s,
                                             kmask_s, koff_s, flag);
      cp_async_commit();
      x_next = tc_fetch(a, s0 + TC_KEYS, s1);
    }
    for (int tile = 0; tile < n_tiles; tile++) {
      const int st = sp.stages == 2 ? tile & 1 : 0, kb = (tile & 1) * TC_KEYS, nb = TC_KEYS - kb;
      const int64_t next = s0 + (int64_t)(tile + 1) * TC_KEYS;
      bool vis_next = false;
      if (sp.stages == 2) {
        if (tile + 1 < n_tiles) { /* the next tile loads while this one is scored */
          vis_next = tc_load_tile<DIMP, FMT, VEC, WG>(a, tk, next, x_next, kstep,
                                                      k_s + (st ^ 1) * stage_bytes, kpos_s + nb,
                                                      kmask_s + nb, koff_s + nb, flag);
          x_next = tc_fetch(a, next + TC_KEYS, s1);
        }
        cp_async_commit(); /* (an empty group on the last tile keeps the wait count uniform) */
        cp_async_wait_one();
        if (WG) fence_async_smem();
      } else {
        if (tile > 0) { /* one stage: the previous tile is done with it */
          vis = tc_load_tile<DIMP, FMT, VEC, WG>(a, tk, next - TC_KEYS, x_next, kstep, k_s,
                                                 kpos_s + kb, kmask_s + kb, koff_s + kb, flag);
          x_next = tc_fetch(a, next, s1);
        }
        cp_async_commit();
        cp_async_wait_all();
        if (WG) fence_async_smem();
      }
      __syncthreads(); /* publishes the tile */
      if (vis) {
        if (WG)
          tc_score_tile_wg<DIMP>(smem_u32(k_s + st * stage_bytes), smem_u32(q_s), M, w_s, sc_w,
                                 gn, warp, lane);
        else
          tc_score_tile<DIMP, FMT>(k_s + st * stage_bytes + (size_t)(warp * TC_KW) * LD * ES,
                                   q_s, w_s, sc_w, gn, hp, lane);
        const int col = kb + warp * TC_KW + (lane & 15);
        tc_append(sc_w, kmask_s[col], kpos_s[col], gn, thr, top, fill, cbase, room, flag, lane);
      }
      __syncthreads();
      /* a list without room for the next tile is cut back, a warp per token */
      for (int j = warp; j < gn; j += TC_WARPS)
        if (fill[j] > room - TC_KEYS) {
          const int n = warp_cut_topk(cbase + (size_t)j * room, fill[j], K, K + TC_SLACK, hist_w,
                                      (uint64_t *)&thr[j], tc_top_bound(top[j]));
          if (lane == 0) fill[j] = n;
        }
      __syncthreads();
      if (sp.stages == 2) vis = vis_next;
    }
    cp_async_wait_all();
    /* each token's K best, by a team of TC_WARPS / gn warps (a power of two; one warp
     * from 5 tokens on, or when no list holds more than K: then it is a copy, which
     * the teams' barriers made slower): a list of K (zero-padded) per chunk, or appended
     * to the token's survivors wherever the chunks' blocks finish */
    bool select = false;
    for (int j = 0; j < gn; j++) select = select || fill[j] > K;
    const int tw = !select || gn >= TC_WARPS / 2 + 1 ? 1 : gn > 2 ? 2 : TC_WARPS / gn;
    const int team = warp / tw, teams = TC_WARPS / tw;
    const cut_team tm = {tw, warp % tw, 1 + team};
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
      if (n > K) {
        team_emit_topk(cb, n, K, hist + team * tw * 256, thr[j], tc_top_bound(top[j]), tm,
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

/* The largest group that pays (a step of few tokens wants blocks, not groups) and leaves
 * room for two blocks an SM (with two key stages if they fit, else one); else the
 * largest that fits at all. One block scores while the other waits on its cuts: a 32k
 * prompt's indexer took 1.5x as long with 32 tokens a block and two stages (one block an
 * SM) as with 16 (two blocks an SM); 1024 tokens of 64 heads took 1.2x as long with one
 * token a block and two stages as with two and one stage (H200, 2026-12-02:
 * bench/long-context.md). */
static int tc_choose(const sc_indexer_args *a, int num_sms, int dimp, int es, bool wg,
                     tc_shape *out) {
  const int hp = tc_rows_per_token(a->n_heads);
  /* 228 KB an SM, 1 KB of it reserved per block */
  static const size_t limits[2] = {113 * 1024, TC_SMEM_MAX};
  for (int li = 0; li < 2; li++)
    for (int group = TC_GROUP_MAX; group >= 1; group /= 2) {
      if (group > 1 && (a->n_tok < 2 * (int64_t)num_sms * group || group * hp > TC_ROWS_MAX))
        continue;
      for (int stages = 2; stages >= 1; stages--) {
        const tc_shape sp = {group, hp, (int)sc_cdiv((int64_t)group * hp, 16), stages,
                             a->topk + tc_piece(a->topk)};
        if (tc_lay(sp, dimp, es, wg).total <= limits[li]) {
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
                          int *, int64_t, int *);

template <int FMT>
static tc_kernel tc_instance(int dimp, bool vec) {
  switch (dimp) {
  case 32: return vec ? k_idx_tc<32, FMT, true, false> : k_idx_tc<32, FMT, false, false>;
  case 64: return vec ? k_idx_tc<64, FMT, true, false> : k_idx_tc<64, FMT, false, false>;
  default: return vec ? k_idx_tc<128, FMT, true, false> : k_idx_tc<128, FMT, false, false>;
  }
}

/* How a's keys are read and scored. VEC: 16-byte aligned rows in whole 16-byte pieces
 * (cp.async). WG: wgmma scoring (tc_score_tile_wg): 64 head rows a token (49 to 64 index
 * heads), rows padded to 64 or 128, keys of either format. WG depends on the model
 * alone: a DCP prefill scores over the f32 workspace what one rank scores over its bf16
 * cache, and both must sum alike (bf16 keys only, as it first was, made the picks of a
 * 64-head model depend on the DCP size). VEC only changes how rows are read. */
typedef struct tc_path {
  int dimp, es;
  bool vec, wg;
} tc_path;

static tc_path tc_path_of(const sc_indexer_args *a) {
  tc_path p;
  p.dimp = dim_padded(a->dim);
  p.es = (int)sc_kfmt_size(a->keys.fmt);
  p.vec = (uintptr_t)a->keys.data % 16 == 0 && a->keys.ld * p.es % 16 == 0 &&
          a->dim * p.es % 16 == 0;
  p.wg = p.dimp >= 64 && tc_rows_per_token(a->n_heads) == 64;
  return p;
}

template <int FMT>
static tc_kernel tc_instance_wg(int dimp, bool vec) {
  if (dimp == 64) return vec ? k_idx_tc<64, FMT, true, true> : k_idx_tc<64, FMT, false, true>;
  return vec ? k_idx_tc<128, FMT, true, true> : k_idx_tc<128, FMT, false, true>;
}

static tc_kernel tc_pick(const sc_indexer_args *a, const tc_path &p) {
  const bool f32 = a->keys.fmt == SC_KFMT_F32;
  if (p.wg) return f32 ? tc_instance_wg<SC_KFMT_F32>(p.dimp, p.vec)
                       : tc_instance_wg<SC_KFMT_BF16>(p.dimp, p.vec);
  return f32 ? tc_instance<SC_KFMT_F32>(p.dimp, p.vec) : tc_instance<SC_KFMT_BF16>(p.dimp, p.vec);
}

extern "C" int sc_kcuda_indexer_topk(sc_kernels *k, const sc_indexer_args *a) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_indexer(a, sc_kcuda_check_rows));
  if (a->dim > TC_MAX_DIM || a->topk > SC_KCUDA_TOPK_MAX || a->keys.fmt == SC_KFMT_FP8_DS_MLA)
    return SC_ENOTSUP;
  tc_shape sp;
  const tc_path path = tc_path_of(a);
  const int kes = path.wg ? 2 : path.es; /* keys in shared memory: bf16 for wgmma */
  if (tc_choose(a, c->num_sms, path.dimp, kes, path.wg, &sp)) return SC_ENOTSUP;
  const tc_kernel fn = tc_pick(a, path);
  const size_t smem = tc_lay(sp, path.dimp, kes, path.wg).total;
  int per_sm = 0;
  int rc = sc_kcuda_err(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)TC_SMEM_MAX),
                        "indexer smem");
  if (rc == 0)
    rc = sc_kcuda_err(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, TC_THREADS, smem),
                      "indexer occupancy");
  if (rc) return rc;
  /* with the caller's bound of a token's keys, no more chunks than a group's keys fill
   * at TC_MIN_SEG each: a decode token at a short context was 128 chunks, all but one
   * empty, and a select over all of them (6 passes, a sort and a gather) where one
   * chunk needs only the sort. The chunks change nothing selected. */
  const int64_t groups = sc_cdiv(a->n_tok, sp.group);
  const int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * c->num_sms;
  int64_t most = TC_CHUNKS_MAX;
  if (a->max_keys > 0) {
    const int64_t bound = sc_cdiv((int64_t)a->max_keys * sp.group, TC_MIN_SEG);
    most = bound < most ? bound : most;
  }
  const int n_chunks = tc_chunks(groups, resident, most);
  const int64_t n_items = groups * n_chunks;
  const int64_t grid = n_items < resident ? n_items : resident;
  const size_t list_bytes = sizeof(uint64_t) * (size_t)a->n_tok * (size_t)n_chunks *
                            (size_t)a->topk;
  const size_t cand_bytes = sizeof(uint64_t) * (size_t)grid * sp.group * sp.room;
  const size_t radix_bytes = n_chunks == 1 ? 0 : sc_kcuda_topk_radix_bytes(a->n_tok, a->topk);
  char *scratch = (char *)sc_kcuda_scratch(c, list_bytes + cand_bytes + radix_bytes);
  if (scratch == NULL) return SC_ENOMEM;
  uint64_t *keys = (uint64_t *)scratch, *cand = (uint64_t *)(scratch + list_bytes);
  void *radix = scratch + list_bytes + cand_bytes;
  int *counts = NULL; /* one list per token when NULL: one block per token sorts it */
  if (n_chunks > 1 && (rc = sc_kcuda_topk_radix_begin(c, a->n_tok, radix, &counts)) != 0)
    return rc;
  sc_kcuda_launch(c, fn, (unsigned)grid, TC_THREADS, smem, *a, n_chunks, sp, n_items, cand, keys,
                  counts, (int64_t)n_chunks * a->topk, c->err_flag);
  if ((rc = SC_CUDA_CHECK_LAUNCH("indexer")) != 0) return rc;
  if (n_chunks == 1)
    return sc_kcuda_topk_finish(c, a->n_tok, 1, a->topk, keys, a->out_pos, a->out_cand, NULL);
  /* the chunks appended their survivors per token; a select over many blocks finishes */
  return sc_kcuda_topk_radix(c, a->n_tok, (int64_t)n_chunks * a->topk, a->topk, keys,
                             a->out_pos, a->out_cand, radix);
}
