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
 *  1. k_idx_tc: grid (token groups, chunks), 8 warps. A block takes G consecutive tokens
 *     (G > 1 when a step has many tokens: prefill tokens of one request share their key
 *     range, so each key tile loaded serves G tokens) and a contiguous segment of the
 *     union of their key ranges, in tiles of 128 keys double-buffered in shared memory
 *     with cp.async (raw; f32 keys are rounded when the fragments are built; keys no
 *     token of the group may see are neither loaded nor, when a whole tile is, scored).
 *     The group's q sits in shared memory as bf16; a warp takes 16 keys of the tile,
 *     keeps their fragments for all the m-tiles in registers, runs the k16 steps per
 *     m-tile and folds ReLU x weight as above. Per token, keys that beat its running
 *     threshold (the K-th best key kept so far) are appended to its candidate buffer; a
 *     full buffer is cut back to the K best (cuda_select.cuh) and the threshold rises.
 *     Scores never leave the tile: nothing is allocated per (query, key).
 *  2. With one chunk a token, sc_kcuda_topk_finish (cuda_topk.cu) sorts and writes each
 *     token's K survivors; with several, the chunks append their survivors per token and
 *     sc_kcuda_topk_radix (cuda_topk_radix.cu) selects the K over many blocks.
 * The group size and chunk count come from the token count alone (ops never read
 * buffer contents on the host), so key ranges stay on the device. */
#include "kernels/cuda/cuda_select.cuh"

/* 8 warps, 16 keys each a tile. With 4 warps (32 keys each) the SM held one warp per
 * scheduler (the candidate buffers take one block's worth of shared memory), and a 32k
 * prompt's scoring stalled on dependent instructions and shared-memory loads: 0.15
 * instructions issued a cycle per scheduler (ncu, H200, 2026-12-02: bench/long-context.md). */
#define TC_THREADS 256
#define TC_WARPS (TC_THREADS / 32)
#define TC_KEYS 128     /* keys per tile; a thread per key when loading their list entries */
#define TC_KW (TC_KEYS / TC_WARPS) /* keys per warp */
#define TC_NT (TC_KW / 8)          /* mma column tiles per warp */
#define TC_MAX_DIM 128
#define TC_GROUP_MAX 4  /* tokens per block */
#define TC_ROWS_MAX 128 /* q rows per block: 8 m-tiles of 16 */
#define TC_PAD 8        /* elements of padding per shared row: conflict-free fragments */
#define TC_SMEM_MAX (SC_KCUDA_SMEM_MAX - 64) /* (the kernel's static words take the rest) */
#define TC_MIN_SEG 512  /* keys of a chunk at least (4 tiles), so a short range spreads less */
#define TC_CHUNKS_MAX 128 /* chunks of a token's range: a decode token over 128k keys takes
                           * 128 blocks of 1024 keys, under the K of a block: no cut */

static_assert(TC_KEYS <= TC_THREADS && TC_KW % 8 == 0 && TC_KW <= 32,
              "a thread per key of a tile; whole column tiles per warp, a lane per key");

/* How a launch is shaped: tokens per block, q rows per token and per block, candidate
 * room beyond K per token, key stages. None of it changes what is selected. */
typedef struct tc_shape {
  int group, hp, m_tiles, piece, stages;
} tc_shape;

/* K rounded up to even: the candidate rows and tmp are sized with it, so that they (and
 * with them the key stages and q) stay 16-byte multiples when K is odd. Without it an
 * odd K in a group of 2 or 4 put the key stages and q at 8 mod 16 (cp.async and ldmatrix
 * on misaligned addresses: the launch fails with a misaligned-address error). */
__host__ __device__ inline int tc_keven(int K) { return (K + 1) & ~1; }

/* Shared memory of one block, in bytes, laid out in this order (every part a multiple
 * of 16 bytes, so the 16-byte cp.async and ldmatrix addresses stay aligned; KE is
 * tc_keven(K)):
 *   candidates uint64 [G][KE + piece], tmp uint64 [KE], thresholds uint64 [TC_GROUP_MAX],
 *   key rows int64 [2][TC_KEYS],
 *   keys [stages][TC_KEYS][DIMP + TC_PAD] in their own format,
 *   q bf16 [16 m_tiles][DIMP + TC_PAD], w f32 [16 m_tiles], scores f32 [TC_WARPS][G][32],
 *   per key of the two tiles: position, token mask int [2][2][TC_KEYS],
 *   select words int [SH_WORDS], fills int [TC_GROUP_MAX], token ranges int [3][4]. */
static size_t tc_smem(const tc_shape &sp, int K, int dimp, int esize) {
  const size_t rows = 16 * (size_t)sp.m_tiles;
  const size_t ke = (size_t)tc_keven(K);
  return sizeof(uint64_t) * ((size_t)sp.group * (ke + sp.piece) + ke + TC_GROUP_MAX + 2 * TC_KEYS) +
         (size_t)esize * (size_t)sp.stages * TC_KEYS * (size_t)(dimp + TC_PAD) +
         2 * rows * (size_t)(dimp + TC_PAD) + 4 * rows + 4 * (size_t)TC_WARPS * sp.group * 32 +
         sizeof(int) * (4 * TC_KEYS + SH_WORDS + TC_GROUP_MAX + 3 * TC_GROUP_MAX);
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
} tc_tokens;

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
                                    int *kmask, int64_t *krow, int *flag) {
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
      for (int j = 0; j < tk.gn; j++)
        if (e >= tk.begin[j] && e < tk.end[j] && pos <= tk.qpos[j]) m |= 1u << j;
      if (m && (row < 0 || row >= a.keys.rows)) {
        sc_dev_raise(flag, SC_ERANGE);
        m = 0;
      }
    }
    kpos[threadIdx.x] = pos;
    kmask[threadIdx.x] = (int)m;
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

/* Keeps the K best of token j's candidates and raises its threshold to the K-th. */
__device__ inline void tc_cut(uint64_t *cand, int K, uint64_t *tmp, int *sh, int *fill,
                              unsigned long long *thr, unsigned long long *min_s) {
  const int n = block_keep_topk_counted(cand, *fill, *fill, K, tmp, sh); /* all real keys */
  if (n == K) { /* the K-th best key so far: nothing at or below it can enter */
    if (threadIdx.x == 0) *min_s = ~0ull;
    unsigned long long lo = ~0ull;
    for (int i = threadIdx.x; i < K; i += TC_THREADS) lo = cand[i] < lo ? cand[i] : lo;
    for (int off = 16; off > 0; off >>= 1) {
      const unsigned long long o = __shfl_xor_sync(0xffffffffu, lo, off);
      lo = o < lo ? o : lo;
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) atomicMin(min_s, lo);
    __syncthreads();
    if (threadIdx.x == 0) *thr = *min_s;
  }
  if (threadIdx.x == 0) *fill = n;
  __syncthreads();
}

template <int DIMP, int FMT, bool VEC>
__global__ void __launch_bounds__(TC_THREADS)
    k_idx_tc(sc_indexer_args a, int n_chunks, tc_shape sp, uint64_t *out_keys, int *counts,
             int64_t cap, int *flag) {
  constexpr int ES = FMT == SC_KFMT_F32 ? 4 : 2;
  constexpr int LD = DIMP + TC_PAD;
  constexpr int KS = DIMP / 16; /* k16 steps */
  extern __shared__ __align__(16) unsigned char smem[];
  const int K = a.topk, KE = tc_keven(K), G = sp.group, hp = sp.hp, M = 16 * sp.m_tiles;
  const int room = KE + sp.piece;
  uint64_t *cand = (uint64_t *)smem;                  /* [G][room] */
  uint64_t *tmp = cand + (size_t)G * room;            /* [KE] */
  unsigned long long *thr = (unsigned long long *)(tmp + KE); /* [TC_GROUP_MAX] */
  int64_t *krow_s = (int64_t *)(thr + TC_GROUP_MAX);  /* [2][TC_KEYS] */
  unsigned char *k_s = (unsigned char *)(krow_s + 2 * TC_KEYS); /* [stages][TC_KEYS][LD] */
  uint16_t *q_s = (uint16_t *)(k_s + (size_t)sp.stages * TC_KEYS * LD * ES); /* [M][LD] */
  float *w_s = (float *)(q_s + (size_t)M * LD);       /* [M] */
  float *sc_s = w_s + M;                              /* [TC_WARPS][G][32] */
  int *kpos_s = (int *)(sc_s + TC_WARPS * G * 32);    /* [2][TC_KEYS] */
  int *kmask_s = kpos_s + 2 * TC_KEYS;                /* [2][TC_KEYS] */
  int *sh = kmask_s + 2 * TC_KEYS;                    /* [SH_WORDS] */
  int *fill = sh + SH_WORDS;                          /* [TC_GROUP_MAX] */
  int *tb = fill + TC_GROUP_MAX, *te = tb + TC_GROUP_MAX, *tq = te + TC_GROUP_MAX;
  __shared__ unsigned long long min_s;

  const int64_t t0 = (int64_t)blockIdx.x * G; /* groups on x: prefill chunks are long */
  const int chunk = blockIdx.y;
  const int gn = a.n_tok - t0 < G ? (int)(a.n_tok - t0) : G;
  const int H = a.n_heads;
  for (int i = threadIdx.x; i < M * LD; i += TC_THREADS) {
    const int r = i / LD, d = i % LD, j = r / hp, h = r % hp;
    const float v = j < gn && h < H && d < a.dim ? a.q[(t0 + j) * a.ld_q + (int64_t)h * a.dim + d]
                                                 : 0.0f;
    q_s[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
  for (int r = threadIdx.x; r < M; r += TC_THREADS) {
    const int j = r / hp, h = r % hp;
    w_s[r] = j < gn && h < H ? a.w[(t0 + j) * a.ld_w + h] : 0.0f;
  }
  if (threadIdx.x < gn) {
    const int j = threadIdx.x;
    tb[j] = a.key_begin[t0 + j];
    te[j] = a.key_end[t0 + j];
    tq[j] = a.q_pos[t0 + j];
    fill[j] = 0;
    thr[j] = 0; /* every real key is above 0 */
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
  const int64_t kstep = a.keys.ld * ES;
  const int n_tiles = len > 0 && s1 > s0 ? (int)((s1 - s0 + TC_KEYS - 1) / TC_KEYS) : 0;
  const size_t stage_bytes = (size_t)TC_KEYS * LD * ES;
  const tc_tokens tk = {tb, te, tq, gn};

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  float *sc_w = sc_s + warp * G * 32;
  bool vis = false; /* whether any token may see the tile being scored */
  if (n_tiles > 0) {
    vis = tc_load_tile<DIMP, FMT, VEC>(a, tk, s0, s1, kstep, k_s, kpos_s, kmask_s, krow_s, flag);
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
      if (tile > 0) /* one stage (a large K): the previous tile is done with it */
        vis = tc_load_tile<DIMP, FMT, VEC>(a, tk, next - TC_KEYS, s1, kstep, k_s, kpos_s + kb,
                                           kmask_s + kb, krow_s + kb, flag);
      cp_async_commit();
      cp_async_wait_all();
    }
    __syncthreads(); /* publishes the tile */
    if (vis) {
      const unsigned char *kw = k_s + st * stage_bytes + (size_t)(warp * TC_KW) * LD * ES;
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
              if (g == 0) sc_w[j * 32 + nt * 8 + 2 * c + x] = part[nt][x];
            }
        }
      } else { /* 16 / hp tokens per m-tile: a row per lane, then the token's hp lanes */
        const int per = 16 / hp;
        for (int mt = 0; mt * per < gn; mt++) {
          float acc[TC_NT][4];
          tc_mtile<KS, LD>(acc, q_s, mt, lane, b);
          const float w0 = w_s[mt * 16 + g], w1 = w_s[mt * 16 + g + 8];
          const int j0 = mt * per + g / hp, j1 = j0 + 8 / hp; /* rows g and g + 8 */
#pragma unroll
          for (int nt = 0; nt < TC_NT; nt++)
#pragma unroll
            for (int x = 0; x < 2; x++) {
              float p0 = w0 * fmaxf(acc[nt][x], 0.0f), p1 = w1 * fmaxf(acc[nt][2 + x], 0.0f);
              for (int off = 4; off < 4 * hp; off <<= 1) {
                p0 += __shfl_xor_sync(0xffffffffu, p0, off);
                p1 += __shfl_xor_sync(0xffffffffu, p1, off);
              }
              if (g % hp == 0) {
                if (j0 < gn) sc_w[j0 * 32 + nt * 8 + 2 * c + x] = p0;
                if (j1 < gn) sc_w[j1 * 32 + nt * 8 + 2 * c + x] = p1;
              }
            }
        }
      }
      __syncwarp();
      /* per token, this warp's keys (a lane each) that beat its threshold join its
       * candidates */
      const int col = warp * TC_KW + lane;
      const unsigned m = lane < TC_KW ? (unsigned)kmask_s[kb + col] : 0u;
      const int32_t kp = lane < TC_KW ? kpos_s[kb + col] : 0;
      for (int j = 0; j < gn; j++) {
        const uint64_t key = (m >> j) & 1u ? sc_dev_topk_key(sc_w[j * 32 + lane], kp) : 0;
        const int slot = warp_take_slot(&fill[j], key != 0 && key > thr[j]);
        if (slot >= 0) cand[(size_t)j * room + slot] = key;
      }
    }
    __syncthreads();
    /* room for the next tile, or cut back to the K best and raise the threshold */
    for (int j = 0; j < gn; j++)
      if (fill[j] > room - TC_KEYS)
        tc_cut(cand + (size_t)j * room, K, tmp, sh, &fill[j], &thr[j], &min_s);
    if (sp.stages == 2) vis = vis_next;
  }
  cp_async_wait_all();
  __shared__ int64_t base_s;
  for (int j = 0; j < gn; j++) {
    if (fill[j] > K) tc_cut(cand + (size_t)j * room, K, tmp, sh, &fill[j], &thr[j], &min_s);
    const int n = fill[j];
    if (counts == NULL) { /* the chunk's list of K, zero-padded */
      uint64_t *o = out_keys + ((t0 + j) * n_chunks + chunk) * K;
      for (int i = threadIdx.x; i < K; i += TC_THREADS) o[i] = i < n ? cand[(size_t)j * room + i] : 0;
      continue;
    }
    /* appended to the token's survivors, wherever the chunks' blocks finish */
    if (threadIdx.x == 0) base_s = (t0 + j) * cap + (n ? atomicAdd(&counts[t0 + j], n) : 0);
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += TC_THREADS) out_keys[base_s + i] = cand[(size_t)j * room + i];
    __syncthreads();
  }
}

/* Head rows of one token: hp as in the comment at the top. */
static int tc_rows_per_token(int H) {
  if (H >= 16) return 16 * (int)sc_cdiv(H, 16);
  int p = 1;
  while (p < H) p <<= 1;
  return p;
}

/* The largest group that fits (and pays: a step of few tokens wants blocks, not groups),
 * then the roomiest candidate buffer and two key stages where they fit. */
static int tc_choose(const sc_indexer_args *a, int num_sms, int dimp, int es, tc_shape *out) {
  static const int layouts[5][2] = {{1024, 2}, {256, 2}, {TC_KEYS, 2}, {1024, 1}, {TC_KEYS, 1}};
  const int hp = tc_rows_per_token(a->n_heads);
  for (int group = TC_GROUP_MAX; group >= 1; group /= 2) {
    if (group > 1 && (a->n_tok < 2 * (int64_t)num_sms * group || group * hp > TC_ROWS_MAX))
      continue;
    tc_shape sp = {group, hp, (int)sc_cdiv((int64_t)group * hp, 16), 0, 0};
    for (int li = 0; li < 5; li++) {
      sp.piece = layouts[li][0], sp.stages = layouts[li][1];
      if (tc_smem(sp, a->topk, dimp, es) <= TC_SMEM_MAX) {
        *out = sp;
        return 0;
      }
    }
  }
  return SC_ENOTSUP;
}

template <int DIMP, int FMT, bool VEC>
static int launch_tc(sc_kcuda *c, const sc_indexer_args *a, int n_chunks, const tc_shape &sp,
                     uint64_t *keys, int *counts) {
  int rc = sc_kcuda_err(cudaFuncSetAttribute(k_idx_tc<DIMP, FMT, VEC>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)TC_SMEM_MAX),
                        "indexer smem");
  if (rc) return rc;
  const unsigned groups = (unsigned)sc_cdiv(a->n_tok, sp.group);
  k_idx_tc<DIMP, FMT, VEC><<<dim3(groups, (unsigned)n_chunks), TC_THREADS,
                             tc_smem(sp, a->topk, DIMP, (int)sc_kfmt_size((sc_kfmt)FMT)),
                             c->stream>>>(*a, n_chunks, sp, keys, counts,
                                          (int64_t)n_chunks * a->topk, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("indexer");
}

template <int DIMP, int FMT>
static int launch_tc_vec(sc_kcuda *c, const sc_indexer_args *a, int n_chunks, const tc_shape &sp,
                         uint64_t *keys, int *counts) {
  const int64_t es = (int64_t)sc_kfmt_size((sc_kfmt)FMT);
  const bool vec = (uintptr_t)a->keys.data % 16 == 0 && a->keys.ld * es % 16 == 0 &&
                   a->dim * es % 16 == 0;
  return vec ? launch_tc<DIMP, FMT, true>(c, a, n_chunks, sp, keys, counts)
             : launch_tc<DIMP, FMT, false>(c, a, n_chunks, sp, keys, counts);
}

/* The row width a kernel instance is compiled for: dim padded to 32, 64 or 128. */
static int dim_padded(int dim) { return dim <= 32 ? 32 : dim <= 64 ? 64 : 128; }

template <int FMT>
static int launch_tc_fmt(sc_kcuda *c, const sc_indexer_args *a, int n_chunks, const tc_shape &sp,
                         uint64_t *keys, int *counts) {
  switch (dim_padded(a->dim)) {
  case 32: return launch_tc_vec<32, FMT>(c, a, n_chunks, sp, keys, counts);
  case 64: return launch_tc_vec<64, FMT>(c, a, n_chunks, sp, keys, counts);
  default: return launch_tc_vec<128, FMT>(c, a, n_chunks, sp, keys, counts);
  }
}

extern "C" int sc_kcuda_indexer_topk(sc_kernels *k, const sc_indexer_args *a) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_indexer(a, sc_kcuda_check_rows));
  if (a->dim > TC_MAX_DIM || a->topk > SC_KCUDA_TOPK_MAX || a->keys.fmt == SC_KFMT_FP8_DS_MLA)
    return SC_ENOTSUP;
  tc_shape sp;
  if (tc_choose(a, c->num_sms, dim_padded(a->dim), (int)sc_kfmt_size(a->keys.fmt), &sp))
    return SC_ENOTSUP;
  /* enough blocks to cover the GPU about four times over, from the token count alone */
  const int64_t groups = sc_cdiv(a->n_tok, sp.group);
  int n_chunks = (int)sc_cdiv(4 * (int64_t)c->num_sms, groups);
  n_chunks = n_chunks < 1 ? 1 : n_chunks > TC_CHUNKS_MAX ? TC_CHUNKS_MAX : n_chunks;
  const size_t list_bytes = sizeof(uint64_t) * (size_t)a->n_tok * (size_t)n_chunks *
                            (size_t)a->topk;
  if (n_chunks == 1) { /* one list per token: one block per token sorts it */
    uint64_t *keys = (uint64_t *)sc_kcuda_scratch(c, list_bytes);
    if (keys == NULL) return SC_ENOMEM;
    const int rc = a->keys.fmt == SC_KFMT_F32
                       ? launch_tc_fmt<SC_KFMT_F32>(c, a, 1, sp, keys, NULL)
                       : launch_tc_fmt<SC_KFMT_BF16>(c, a, 1, sp, keys, NULL);
    return rc ? rc : sc_kcuda_topk_finish(c, a->n_tok, 1, a->topk, keys, a->out_pos,
                                          a->out_cand, NULL);
  }
  /* chunks append their survivors per token; a select over many blocks finishes */
  char *scratch =
      (char *)sc_kcuda_scratch(c, list_bytes + sc_kcuda_topk_radix_bytes(a->n_tok, a->topk));
  if (scratch == NULL) return SC_ENOMEM;
  uint64_t *keys = (uint64_t *)scratch;
  int *counts = NULL;
  int rc = sc_kcuda_topk_radix_begin(c, a->n_tok, scratch + list_bytes, &counts);
  if (rc == 0)
    rc = a->keys.fmt == SC_KFMT_F32 ? launch_tc_fmt<SC_KFMT_F32>(c, a, n_chunks, sp, keys, counts)
                                    : launch_tc_fmt<SC_KFMT_BF16>(c, a, n_chunks, sp, keys, counts);
  if (rc) return rc;
  return sc_kcuda_topk_radix(c, a->n_tok, (int64_t)n_chunks * a->topk, a->topk, keys,
                             a->out_pos, a->out_cand, scratch + list_bytes);
}
