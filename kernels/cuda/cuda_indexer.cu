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
 * rank, and the exact selection that follows picks the same keys.
 *
 * Two stages:
 *  1. k_idx_tc: 8 warps a block, as many blocks as fit on the GPU at once, taking work
 *     items in turn. An item is G consecutive tokens (up to 32, and up to 256 q rows;
 *     G > 1 when a step has many tokens: prefill tokens of one request share their key
 *     range, so each key tile loaded serves G tokens) and a contiguous segment of the
 *     union of their key ranges, in tiles of 128 keys double-buffered in shared memory
 *     with cp.async (raw; f32 keys are rounded when the fragments are built; keys no
 *     token of the group may see are neither loaded nor, when a whole tile is, scored).
 *     The group's q sits in shared memory as bf16; a warp takes 16 keys of the tile,
 *     keeps their fragments for all the m-tiles in registers, runs the k16 steps per
 *     m-tile and folds ReLU x weight as above. Per token, keys that reach its threshold
 *     are appended to its candidate list in global memory (K + TC_PIECE keys, the
 *     block's own); a list without room for another tile is cut back by one warp (while
 *     the others cut other tokens' lists) to a set that holds its K best, and the
 *     threshold rises to that set's floor (cuda_select.cuh's warp_cut_topk). At the end
 *     of an item a warp per token cuts its list to exactly its K best. Scores never
 *     leave the tile: nothing is allocated per (query, key).
 *  2. With one chunk a token, sc_kcuda_topk_finish (cuda_topk.cu) sorts and writes each
 *     token's K survivors; with several, the chunks append their survivors per token and
 *     sc_kcuda_topk_radix (cuda_topk_radix.cu) selects the K over many blocks.
 * The group size and chunk count come from the token count and the caller's bound of a
 * token's keys (max_keys; ops never read buffer contents on the host), so key ranges
 * stay on the device. */
#include "kernels/cuda/cuda_select.cuh"

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
  int room; /* a token's candidate list in global memory: K + TC_PIECE keys */
} tc_shape;

/* Shared memory of one block, in bytes, laid out in this order (every part a multiple
 * of 16 bytes, so the 16-byte cp.async and ldmatrix addresses stay aligned):
 *   thresholds uint64 [TC_GROUP_MAX], largest score words uint32 [TC_GROUP_MAX] (in
 *   uint64 room), key rows int64 [2][TC_KEYS],
 *   keys [stages][TC_KEYS][DIMP + TC_PAD] in their own format,
 *   q bf16 [16 m_tiles][DIMP + TC_PAD], w f32 [16 m_tiles], scores f32 [TC_WARPS][G][TC_KW],
 *   per key of the two tiles: position, token mask int [2][2][TC_KEYS],
 *   cut bins int [TC_WARPS][256], fills and token ranges int [4][TC_GROUP_MAX]. */
static size_t tc_smem(const tc_shape &sp, int dimp, int esize) {
  const size_t rows = 16 * (size_t)sp.m_tiles;
  return sizeof(uint64_t) * (2 * TC_GROUP_MAX + 2 * TC_KEYS) +
         (size_t)esize * (size_t)sp.stages * TC_KEYS * (size_t)(dimp + TC_PAD) +
         2 * rows * (size_t)(dimp + TC_PAD) + 4 * rows + 4 * (size_t)TC_WARPS * sp.group * TC_KW +
         sizeof(int) * (4 * TC_KEYS + TC_WARPS * 256 + 4 * TC_GROUP_MAX);
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

/* Queues tile [e0, e0 + TC_KEYS) of the key list into stage `kbuf` and records each
 * key's position, token mask (bit j: token j may see it) and row in kpos/kmask/krow;
 * returns (to every thread) whether any token may see any key of the tile. A bad row of
 * a key some token may see raises SC_ERANGE, and nobody sees it. Keys nobody may see
 * are not read (zeros), and a tile nobody may see is not loaded at all. Each thread
 * reads its key's list entry once, and the pieces of the rows take it from shared
 * memory: when every piece read it again, a 32k-token prefill took 194 ms a layer
 * instead of 74 (H200, 2026-12-02: bench/long-context.md).
 * VEC: rows start 16-byte aligned and span whole 16-byte pieces
 * (cp.async of 16 bytes); otherwise element by element through registers (same values,
 * slower). */
template <int DIMP, int FMT, bool VEC>
__device__ inline bool tc_load_tile(const sc_indexer_args &a, const tc_tokens &tk, int64_t e0,
                                    int64_t s1, int64_t kstep, void *kbuf, int *kpos,
                                    unsigned *kmask, int64_t *krow, int *flag) {
  constexpr int ES = FMT == SC_KFMT_F32 ? 4 : 2;
  constexpr int LD = DIMP + TC_PAD;      /* elements per shared row */
  constexpr int PIECES = DIMP * ES / 16; /* 16-byte pieces per row */
  bool mine = false; /* whether some token may see this thread's key */
  if (threadIdx.x < TC_KEYS) {
    const int64_t e = e0 + threadIdx.x;
    unsigned m = 0;
    int32_t pos = -1;
    int64_t row = 0;
    if (e < s1) {
      pos = a.key_pos[e];
      row = a.key_rows ? a.key_rows[e] : e;
      m = tc_token_mask(tk, e, pos);
      if (m && (row < 0 || row >= a.keys.rows)) {
        sc_dev_raise(flag, SC_ERANGE);
        m = 0;
      }
    }
    kpos[threadIdx.x] = pos;
    kmask[threadIdx.x] = m;
    krow[threadIdx.x] = row;
    mine = m != 0;
  }
  if (!__syncthreads_or(mine)) return false;
  if (VEC) {
    for (int i = threadIdx.x; i < TC_KEYS * PIECES; i += TC_THREADS) {
      const int j = i / PIECES, piece = i % PIECES;
      const bool ok = kmask[j] != 0 && piece * 16 < a.dim * ES;
      const char *src = (const char *)a.keys.data + (ok ? krow[j] * kstep + piece * 16 : 0);
      cp_async16((char *)kbuf + ((size_t)j * LD * ES + piece * 16), src, ok);
    }
  } else {
    for (int i = threadIdx.x; i < TC_KEYS * DIMP; i += TC_THREADS) {
      const int j = i / DIMP, d = i % DIMP;
      const bool ok = kmask[j] != 0 && d < a.dim;
      const char *src = (const char *)a.keys.data + (ok ? krow[j] * kstep : 0);
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
 * appended; warp_cut_topk then finds the largest itself): real keys have a nonzero high
 * word (cuda_common.cuh's sc_dev_topk_key). */
__device__ inline uint64_t tc_top_bound(unsigned hw) {
  return hw ? ((uint64_t)hw << 32) | 0xffffffffull : 0;
}

/* Scoring blocks. A work item is a group of G consecutive tokens and one chunk of the
 * union of their key ranges; the grid holds as many blocks as fit on the GPU at once,
 * each taking items in turn from the heaviest (the last tokens of a causal prompt see
 * the most keys), so that the candidate lists in global memory are the resident blocks'
 * only: cbuf holds gridDim.x x G x room keys. */
template <int DIMP, int FMT, bool VEC>
__global__ void __launch_bounds__(TC_THREADS)
    k_idx_tc(sc_indexer_args a, int n_chunks, tc_shape sp, int64_t n_items, uint64_t *cbuf,
             uint64_t *out_keys, int *counts, int64_t cap, int *flag) {
  sc_dev_pdl_enter();
  constexpr int ES = FMT == SC_KFMT_F32 ? 4 : 2;
  constexpr int LD = DIMP + TC_PAD;
  extern __shared__ __align__(16) unsigned char smem[];
  const int K = a.topk, G = sp.group, hp = sp.hp, M = 16 * sp.m_tiles, room = sp.room;
  unsigned long long *thr = (unsigned long long *)smem;    /* [TC_GROUP_MAX] */
  unsigned *top = (unsigned *)(thr + TC_GROUP_MAX);        /* [TC_GROUP_MAX] (of u64 room) */
  int64_t *krow_s = (int64_t *)(thr + 2 * TC_GROUP_MAX);   /* [2][TC_KEYS] */
  unsigned char *k_s = (unsigned char *)(krow_s + 2 * TC_KEYS); /* [stages][TC_KEYS][LD] */
  uint16_t *q_s = (uint16_t *)(k_s + (size_t)sp.stages * TC_KEYS * LD * ES); /* [M][LD] */
  float *w_s = (float *)(q_s + (size_t)M * LD);            /* [M] */
  float *sc_s = w_s + M;                                   /* [TC_WARPS][G][TC_KW] */
  int *kpos_s = (int *)(sc_s + TC_WARPS * G * TC_KW);      /* [2][TC_KEYS] */
  unsigned *kmask_s = (unsigned *)(kpos_s + 2 * TC_KEYS);  /* [2][TC_KEYS] */
  int *hist = (int *)(kmask_s + 2 * TC_KEYS);              /* [TC_WARPS][256] */
  int *fill = hist + TC_WARPS * 256;                       /* [TC_GROUP_MAX] */
  int *tb = fill + TC_GROUP_MAX, *te = tb + TC_GROUP_MAX, *tq = te + TC_GROUP_MAX;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t kstep = a.keys.ld * ES;
  const size_t stage_bytes = (size_t)TC_KEYS * LD * ES;
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
    for (int i = threadIdx.x; i < M * LD; i += TC_THREADS) {
      const int row = i / LD, d = i % LD, j = row / hp, h = row % hp;
      const float v = j < gn && h < H && d < a.dim
                          ? a.q[(t0 + j) * a.ld_q + (int64_t)h * a.dim + d]
                          : 0.0f;
      q_s[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
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
    if (n_tiles > 0) {
      vis = tc_load_tile<DIMP, FMT, VEC>(a, tk, s0, s1, kstep, k_s, kpos_s, kmask_s, krow_s,
                                         flag);
      cp_async_commit();
    }
    for (int tile = 0; tile < n_tiles; tile++) {
      const int st = sp.stages == 2 ? tile & 1 : 0, kb = (tile & 1) * TC_KEYS, nb = TC_KEYS - kb;
      const int64_t next = s0 + (int64_t)(tile + 1) * TC_KEYS;
      bool vis_next = false;
      if (sp.stages == 2) {
        if (tile + 1 < n_tiles) /* the next tile loads while this one is scored */
          vis_next = tc_load_tile<DIMP, FMT, VEC>(a, tk, next, s1, kstep,
                                                  k_s + (st ^ 1) * stage_bytes, kpos_s + nb,
                                                  kmask_s + nb, krow_s + nb, flag);
        cp_async_commit(); /* (an empty group on the last tile keeps the wait count uniform) */
        cp_async_wait_one();
      } else {
        if (tile > 0) /* one stage: the previous tile is done with it */
          vis = tc_load_tile<DIMP, FMT, VEC>(a, tk, next - TC_KEYS, s1, kstep, k_s,
                                             kpos_s + kb, kmask_s + kb, krow_s + kb, flag);
        cp_async_commit();
        cp_async_wait_all();
      }
      __syncthreads(); /* publishes the tile */
      if (vis) {
        tc_score_tile<DIMP, FMT>(k_s + st * stage_bytes + (size_t)(warp * TC_KW) * LD * ES, q_s,
                                 w_s, sc_w, gn, hp, lane);
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
    /* each token's K best, a warp per token: a list of K (zero-padded) per chunk, or
     * appended to the token's survivors wherever the chunks' blocks finish */
    for (int j = warp; j < gn; j += TC_WARPS) {
      uint64_t *cb = cbase + (size_t)j * room;
      int n = warp_cut_topk(cb, fill[j], K, K, hist_w, (uint64_t *)&thr[j], tc_top_bound(top[j]));
      n = n < K ? n : K; /* (more only for duplicate keys, which the contract excludes) */
      if (counts == NULL) {
        uint64_t *o = out_keys + ((t0 + j) * n_chunks + chunk) * K;
        for (int i = lane; i < K; i += 32) o[i] = i < n ? cb[i] : 0;
        continue;
      }
      int64_t base = 0;
      if (lane == 0 && n) base = atomicAdd(&counts[t0 + j], n);
      base = (t0 + j) * cap + __shfl_sync(0xffffffffu, base, 0);
      for (int i = lane; i < n; i += 32) out_keys[base + i] = cb[i];
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
static int tc_choose(const sc_indexer_args *a, int num_sms, int dimp, int es, tc_shape *out) {
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
        if (tc_smem(sp, dimp, es) <= limits[li]) {
          *out = sp;
          return 0;
        }
      }
    }
  return SC_ENOTSUP;
}

/* The row width a kernel instance is compiled for: dim padded to 32, 64 or 128. */
static int dim_padded(int dim) { return dim <= 32 ? 32 : dim <= 64 ? 64 : 128; }

typedef void (*tc_kernel)(sc_indexer_args, int, tc_shape, int64_t, uint64_t *, uint64_t *,
                          int *, int64_t, int *);

template <int FMT>
static tc_kernel tc_instance(int dimp, bool vec) {
  switch (dimp) {
  case 32: return vec ? k_idx_tc<32, FMT, true> : k_idx_tc<32, FMT, false>;
  case 64: return vec ? k_idx_tc<64, FMT, true> : k_idx_tc<64, FMT, false>;
  default: return vec ? k_idx_tc<128, FMT, true> : k_idx_tc<128, FMT, false>;
  }
}

/* The kernel instance for a's key format and width. VEC: 16-byte aligned rows in whole
 * 16-byte pieces (cp.async). */
static tc_kernel tc_pick(const sc_indexer_args *a) {
  const int64_t es = (int64_t)sc_kfmt_size(a->keys.fmt);
  const bool vec = (uintptr_t)a->keys.data % 16 == 0 && a->keys.ld * es % 16 == 0 &&
                   a->dim * es % 16 == 0;
  return a->keys.fmt == SC_KFMT_F32 ? tc_instance<SC_KFMT_F32>(dim_padded(a->dim), vec)
                                    : tc_instance<SC_KFMT_BF16>(dim_padded(a->dim), vec);
}

extern "C" int sc_kcuda_indexer_topk(sc_kernels *k, const sc_indexer_args *a) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_indexer(a, sc_kcuda_check_rows));
  if (a->dim > TC_MAX_DIM || a->topk > SC_KCUDA_TOPK_MAX || a->keys.fmt == SC_KFMT_FP8_DS_MLA)
    return SC_ENOTSUP;
  tc_shape sp;
  const int es = (int)sc_kfmt_size(a->keys.fmt);
  if (tc_choose(a, c->num_sms, dim_padded(a->dim), es, &sp)) return SC_ENOTSUP;
  const tc_kernel fn = tc_pick(a);
  const size_t smem = tc_smem(sp, dim_padded(a->dim), es);
  int per_sm = 0;
  int rc = sc_kcuda_err(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)TC_SMEM_MAX),
                        "indexer smem");
  if (rc == 0)
    rc = sc_kcuda_err(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, TC_THREADS, smem),
                      "indexer occupancy");
  if (rc) return rc;
  /* enough items to cover the GPU about four times over, from the token count alone;
   * with the caller's bound of a token's keys, no more chunks than a group's keys fill
   * at TC_MIN_SEG each. A decode token at a short context was 128 chunks, all but one
   * empty, and a select over all of them (6 passes, a sort and a gather) where one
   * chunk needs only the sort. The chunks change nothing selected. */
  const int64_t groups = sc_cdiv(a->n_tok, sp.group);
  int64_t want = sc_cdiv(4 * (int64_t)c->num_sms, groups);
  if (a->max_keys > 0) {
    const int64_t most = sc_cdiv((int64_t)a->max_keys * sp.group, TC_MIN_SEG);
    want = want < most ? want : most;
  }
  const int n_chunks = want < 1 ? 1 : want > TC_CHUNKS_MAX ? TC_CHUNKS_MAX : (int)want;
  const int64_t n_items = groups * n_chunks;
  const int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * c->num_sms;
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
