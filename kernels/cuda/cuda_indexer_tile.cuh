/* cuda_indexer_tile.cuh - what the indexer's scoring kernel (cuda_indexer.cu) does with
 * one tile of keys: the launch shape and shared-memory layout it is compiled against,
 * which tokens may see which keys, the tile's loads into shared memory, its scores (mma.sync,
 * or wgmma for 64 head rows) with the ReLU x weight fold, and the appends of the keys that
 * reach a token's threshold. The item loop, the cuts and the launch policy are in
 * cuda_indexer.cu, whose header comment tells the whole design; not a public header. */
#ifndef SC_KERNELS_CUDA_INDEXER_TILE_CUH
#define SC_KERNELS_CUDA_INDEXER_TILE_CUH

#include "kernels/cuda/cuda_select.cuh"
#include "kernels/cuda/cuda_wgmma.cuh"
#include "kernels/fp8_e4m3.h"
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
#define TC_MIN_SEG 256  /* keys of a chunk at least (2 tiles), so a short range spreads less */
#define TC_SPLIT_MIN 512 /* keys of a group's range below which it is one chunk (no select
                          * after the scores, only the write of one list) */
#define TC_CHUNKS_MAX 256 /* chunks of a token's range: a decode token over 128k keys takes
                           * 256 blocks of 512 keys, under the K of a block: no cut. Its
                           * op took 45.7 us, 49.8 with at most 128 chunks of at least 512
                           * keys; over 32k keys 37-39 us against 43-46 (H200, 2026-12-04):
                           * a block's few tiles wait on memory one after another */
#define TC_PIECE 1024   /* candidate room per token beyond K, at least (see tc_piece) */
#define TC_SLACK 256    /* candidates a cut may keep beyond K: one radix pass, mostly */
#define TC_RANK_PER_WARP 64 /* keys a warp of an end-of-item team ranks at most (a list
                             * of up to 64 w keys for a team of w warps, staged in the
                             * team's cut bins, tc_team_hist_ints): team_rank_topk */

static_assert(TC_KW == 16 && TC_NT == 2,
              "a half-warp per token when appending: 16 keys a warp, two column tiles");
static_assert(TC_PIECE > TC_KEYS + TC_SLACK, "a cut must leave room for the next tile");

/* Whether a kernel instance scores e4m3 products (tc_score_tile_w8): fp8_index keys, 64
 * head rows (WG), rows of up to 128 bytes (DIMP 128: one swizzle row). Its keys and q stay
 * e4m3 bytes in shared memory; the other fp8_index instances widen both to bf16 (exactly)
 * and score as over bf16 keys. Like WG it depends on the model and the keys' format
 * alone, never on their alignment (which only changes how rows are read): a DCP prefill's
 * workspace and a rank's cache hold the same fp8 rows at other strides, and their scores
 * must sum alike. */
__host__ __device__ constexpr bool tc_w8(int dimp, int fmt, bool wg) {
  return fmt == SC_KFMT_FP8_INDEX && wg && dimp == 128;
}

/* How a launch is shaped: tokens per block, q rows per token, m-tiles, key stages. None
 * of it changes what is selected. */
typedef struct tc_shape {
  int group, hp, m_tiles, stages;
  int room;   /* a token's candidate list in global memory: K + tc_piece(K) keys */
  int stride; /* 1; S: a sample pass, over every S-th entry of the key list (a token's
               * range [b, e) becomes entries [ceil(b/S), ceil(e/S)) of the sample,
               * sample entry i being list entry i S: cuda_indexer.cu's floors) */
  int few;    /* hp < 16 where tc_few_fits: scored and appended in one go
               * (cuda_indexer_few.cuh); 0: tc_score_tile, then tc_append (the same keys) */
} tc_shape;

/* Where a token's threshold starts, and the pass that repairs a wrong start (the sampled
 * floors of cuda_indexer.cu). All NULL: every threshold starts at 1, every group is
 * scored. */
typedef struct tc_floor {
  const unsigned long long *thr0; /* [n_tok] the first threshold of each token */
  int *redo;       /* [groups]: set where a token of the group appended fewer than K keys
                    * from a start above 1, so its K best may lie below the start (only
                    * with thr0) */
  const int *only; /* [groups]: only the groups set here are scored (the repair) */
} tc_floor;

/* Shared memory of one block: byte offsets of its arrays, in this order (every part a
 * multiple of 16 bytes, so the 16-byte cp.async and ldmatrix addresses stay aligned):
 *   keys [stages][TC_KEYS rows] in their own format (bf16 for wgmma, whatever the keys'
 *   format, and for fp8_index keys on either path; fp8_index keys in 16-byte pieces take
 *   one bf16 stage and their raw bytes [stages][TC_KEYS][DIMP] after it, widened into the
 *   bf16 stage just before their tile is scored, except on wgmma at DIMP 128, where
 *   they stay e4m3 bytes, W8), q bf16 [16 m_tiles rows] (W8: e4m3 bytes),
 *   thresholds uint64 [TC_GROUP_MAX], largest score words uint32 [TC_GROUP_MAX] (in
 *   uint64 room), key row byte offsets int64 [2][TC_KEYS], w f32 [16 m_tiles], the
 *   scales of q's heads f32 [16 m_tiles] (fp8_index keys only),
 *   scores f32 [TC_WARPS][G][TC_KW], per key of the two tiles: position, token mask int
 *   [2][2][TC_KEYS], the scales of fp8_index keys f32 [2][TC_KEYS] (none for other
 *   formats), cut bins int [tc_hist_ints(G)], fills, token ranges and keys dropped by
 *   cuts int [5][TC_GROUP_MAX], the end-of-item cut teams' counts and bases int
 *   [2][TC_WARPS].
 * A key or q row is DIMP + TC_PAD elements (the padding keeps mma.sync's fragment loads
 * conflict-free); with WG (wgmma scoring) DIMP elements in the 128-byte-swizzled layout
 * of cuda_wgmma.cuh, which wants the keys and q 1024-aligned: the kernel aligns the
 * dynamic base by hand, so `total` holds 1024 bytes of slack. */
typedef struct tc_layout {
  size_t k, raw, q, thr, top, koff, w, qsc, sc, kpos, kmask, ksc, hist, fill, total;
} tc_layout;

/* The cut bins of an end-of-item team of tw warps: 256 for its cuts (team_cut_edge), or
 * room for a staged list of up to TC_RANK_PER_WARP keys a warp of 64 bits
 * (team_rank_topk). */
__host__ __device__ constexpr int tc_team_hist_ints(int tw) {
  return 2 * TC_RANK_PER_WARP * tw > 256 ? 2 * TC_RANK_PER_WARP * tw : 256;
}
/* The cut bins of a block of G tokens: 256 a warp for the warps that cut a token's list
 * between tiles (warp j cuts token j), and the end-of-item teams' (k_idx_tc: up to 4
 * tokens, TC_WARPS / tw <= 4 teams of tw >= 2 warps, 1024 bins in all; from 5, teams of
 * one warp). A block of 4 tokens of 64 heads over bf16 keys then fits two blocks an SM
 * (at one key stage), which 8 KB of bins a block whatever its group did not. */
__host__ __device__ constexpr int tc_hist_ints(int G) {
  return G <= TC_WARPS / 2 ? 256 * (TC_WARPS / 2) : 256 * TC_WARPS;
}
static_assert(TC_WARPS * tc_team_hist_ints(1) <= tc_hist_ints(TC_WARPS) &&
                  (TC_WARPS / 2) * tc_team_hist_ints(2) <= tc_hist_ints(TC_WARPS / 2) &&
                  tc_team_hist_ints(TC_WARPS) <= tc_hist_ints(1),
              "the end-of-item teams' bins fit the block's");

/* scaled: fp8_index keys (their scales, and q's head scales); raw: and staged raw (in
 * 16-byte pieces). esize 1: keys and q as e4m3 bytes (tc_score_tile_w8). */
__host__ __device__ inline tc_layout tc_lay(const tc_shape &sp, int dimp, int esize, bool wg,
                                            bool scaled, bool raw) {
  const size_t rows = 16 * (size_t)sp.m_tiles, ld = (size_t)dimp + (wg ? 0 : TC_PAD);
  tc_layout l;
  l.k = 0;
  l.raw = l.k + (size_t)esize * (size_t)(raw ? 1 : sp.stages) * TC_KEYS * ld;
  l.q = l.raw + (raw ? (size_t)sp.stages * TC_KEYS * (size_t)dimp : 0);
  l.thr = l.q + (esize == 1 ? 1 : 2) * rows * ld;
  l.top = l.thr + sizeof(uint64_t) * TC_GROUP_MAX;
  l.koff = l.top + sizeof(uint64_t) * TC_GROUP_MAX;
  l.w = l.koff + sizeof(int64_t) * 2 * TC_KEYS;
  l.qsc = l.w + 4 * rows;
  l.sc = l.qsc + (scaled ? 4 * rows : 0);
  l.kpos = l.sc + 4 * (size_t)TC_WARPS * sp.group * TC_KW;
  l.kmask = l.kpos + sizeof(int) * 2 * TC_KEYS;
  l.ksc = l.kmask + sizeof(int) * 2 * TC_KEYS;
  l.hist = l.ksc + (scaled ? sizeof(float) * 2 * TC_KEYS : 0);
  l.fill = l.hist + sizeof(int) * (size_t)tc_hist_ints(sp.group);
  l.total = l.fill + sizeof(int) * (5 * TC_GROUP_MAX + 2 * TC_WARPS) + (wg ? 1024 : 0);
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

/* Thread i < TC_KEYS: the entry of key e0 + i of the list, or of its sample of every
 * stride-th entry (the segment ends at s1). */
__device__ inline tc_entry tc_fetch(const sc_indexer_args &a, int64_t e0, int64_t s1,
                                    int stride) {
  tc_entry x = {0, -1, false};
  const int64_t e = (e0 + threadIdx.x) * stride;
  if (threadIdx.x < TC_KEYS && e0 + threadIdx.x < s1) {
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
 * and unaligned bf16 rows through registers, 8 elements a thread at a time.
 * FP8 (fp8_index keys, kernels.h): each key's scale into ksc (0 for a key nobody may
 * see), for the score (tc_append). VEC: the raw bytes by cp.async (16-byte pieces as the
 * bf16 path's, the scale by a 4-byte one) into the raw stage kbuf, widened by
 * tc_widen_fp8 once the tile has come; otherwise their e4m3 values widened to bf16
 * (exactly) through registers, 8 a thread at a time, into either path's layout as bf16
 * keys would be (those loads wait for their bytes before the tile before is scored). */
template <int DIMP, int FMT, bool VEC, bool WG>
__device__ inline bool tc_load_tile(const sc_indexer_args &a, const tc_tokens &tk, int64_t e0,
                                    tc_entry x, int64_t kstep, void *kbuf, int *kpos,
                                    unsigned *kmask, int64_t *koff, float *ksc, int *flag) {
  /* W8 (tc_w8): fp8_index bytes straight into the swizzled layout, as bf16 rows go */
  constexpr bool W8 = tc_w8(DIMP, FMT, WG);
  constexpr int ES = W8 ? 1 : FMT == SC_KFMT_F32 ? 4 : 2;
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
    if constexpr (FMT == SC_KFMT_FP8_INDEX) {
      const uint8_t *sp = (const uint8_t *)a.keys.data + (m ? x.row * kstep : 0) +
                          SC_KFP8_INDEX_SCALE_AT(a.dim);
      if (VEC) { /* (rows 16-byte aligned: the scale is 4-byte aligned) */
        cp_async4(&ksc[threadIdx.x], sp, m != 0);
      } else { /* byte loads: ld need not keep it aligned */
        const uint32_t u = m ? (uint32_t)sp[0] | (uint32_t)sp[1] << 8 | (uint32_t)sp[2] << 16 |
                                   (uint32_t)sp[3] << 24
                             : 0u;
        ksc[threadIdx.x] = __uint_as_float(u);
      }
    }
  }
  if (!__syncthreads_or(mine)) return false;
  if constexpr (FMT == SC_KFMT_FP8_INDEX && VEC && !W8) { /* raw 16-byte pieces, as bf16's below */
    constexpr int PIECES = DIMP / 16;
    constexpr int RS = TC_THREADS / PIECES; /* rows between a thread's copies */
    const int piece = threadIdx.x % PIECES, r0 = threadIdx.x / PIECES;
    const bool in_dim = piece * 16 < a.dim;
    char *dst = (char *)kbuf + r0 * DIMP + piece * 16;
    const char *base = (const char *)a.keys.data + piece * 16;
#pragma unroll
    for (int k = 0; k < TC_KEYS / RS; k++) {
      const int64_t off = koff[r0 + k * RS];
      const bool ok = in_dim && off >= 0;
      cp_async16(dst + k * RS * DIMP, base + (ok ? off : 0), ok);
    }
  } else if constexpr (FMT == SC_KFMT_FP8_INDEX && !W8) {
    constexpr int P8 = DIMP / 8;        /* 8-element pieces of a row */
    constexpr int LDB = DIMP + TC_PAD;  /* bf16 elements per shared row (not WG) */
    for (int i = threadIdx.x; i < TC_KEYS * P8; i += TC_THREADS) {
      const int j = i / P8, p = i % P8;
      const int64_t off = koff[j];
      uint2 raw = make_uint2(0, 0); /* e4m3 zeros */
      if (off >= 0 && 8 * p < a.dim) {
        const uint8_t *src = (const uint8_t *)a.keys.data + off + 8 * p;
        uint32_t b[2] = {0, 0};
#pragma unroll
        for (int e = 0; e < 8; e++)
          if (8 * p + e < a.dim) b[e >> 2] |= (uint32_t)src[e] << (8 * (e & 3));
        raw = make_uint2(b[0], b[1]);
      }
      const uint4 v = e4m3x8_to_bf16x8(raw, 1.0f);
      if (WG) *(uint4 *)((char *)kbuf + wg_off<TC_KEYS>(j, p)) = v;
      else *(uint4 *)((char *)kbuf + ((size_t)j * LDB + 8 * p) * 2) = v;
    }
  } else if constexpr (W8 && !VEC) { /* e4m3 bytes, 16 a thread, into the swizzled layout */
    constexpr int P16 = DIMP / 16;
    for (int i = threadIdx.x; i < TC_KEYS * P16; i += TC_THREADS) {
      const int j = i / P16, p = i % P16;
      const int64_t off = koff[j];
      uint32_t b[4] = {0, 0, 0, 0};
      if (off >= 0 && 16 * p < a.dim) {
        const uint8_t *src = (const uint8_t *)a.keys.data + off + 16 * p;
#pragma unroll
        for (int e = 0; e < 16; e++)
          if (16 * p + e < a.dim) b[e >> 2] |= (uint32_t)src[e] << (8 * (e & 3));
      }
      *(uint4 *)((char *)kbuf + wg_off<TC_KEYS>(j, p)) = make_uint4(b[0], b[1], b[2], b[3]);
    }
  } else if (WG && (FMT == SC_KFMT_F32 || !VEC)) {
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

/* fp8_index keys staged raw (tc_load_tile, VEC): the tile's e4m3 values widened to bf16
 * (exactly) from the raw stage into the bf16 stage kbuf, in either path's layout; rows
 * nobody may see were staged as zeros and stay zeros. */
template <int DIMP, bool WG>
__device__ inline void tc_widen_fp8(const unsigned char *raw, void *kbuf) {
  constexpr int P16 = DIMP / 16;       /* 16-byte pieces of a raw row */
  constexpr int LDB = DIMP + TC_PAD;   /* bf16 elements per shared row (not WG) */
  for (int i = threadIdx.x; i < TC_KEYS * P16; i += TC_THREADS) {
    const int j = i / P16, q = i % P16;
    const uint4 v = *(const uint4 *)(raw + (size_t)j * DIMP + 16 * q);
    const uint4 lo = e4m3x8_to_bf16x8(make_uint2(v.x, v.y), 1.0f);
    const uint4 hi = e4m3x8_to_bf16x8(make_uint2(v.z, v.w), 1.0f);
    if (WG) {
      *(uint4 *)((char *)kbuf + wg_off<TC_KEYS>(j, 2 * q)) = lo;
      *(uint4 *)((char *)kbuf + wg_off<TC_KEYS>(j, 2 * q + 1)) = hi;
    } else {
      uint4 *dst = (uint4 *)((char *)kbuf + ((size_t)j * LDB + 16 * q) * 2);
      dst[0] = lo;
      dst[1] = hi;
    }
  }
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
  } else { /* 16 / hp tokens per m-tile, scored transposed: keys as the rows */
    /* The warp's 16 keys are the A operand (their fragments are b's registers: keys g
     * and g + 8 are column g of b's two column tiles) and each half of the m-tile's q
     * rows a B operand (the halves of the same ldmatrix load), so a lane holds keys g
     * and g + 8 against q rows 2c and 2c + 1 of each half: two heads of one token from
     * hp = 2 on, added in the lane, then xor 1 (and 2) over the token's 4 (8) rows' lanes.
     * That is the tree the rows-as-q fold added (heads h and h ^ 1, then pairs, then
     * fours; each product w x ReLU rounded alone, __fmul_rn: no fused multiply-add), in a
     * quarter of its shuffles, which were the scoring's largest stall (ncu, H100,
     * 2026-12-06: a 32k prompt's full pass). hp is a power of two below 16. */
    const int lhp = 31 - __clz(hp), per = 16 >> lhp;
    for (int mt = 0; mt * per < gn; mt++) {
      float acc[2][4]; /* [half of the m-tile][key g: q rows 2c, 2c + 1; key g + 8: same] */
#pragma unroll
      for (int h = 0; h < 2; h++) acc[h][0] = acc[h][1] = acc[h][2] = acc[h][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < KS; ks++) {
        uint32_t qf[4];
        ldsm_x4(qf, q_s + (size_t)(mt * 16 + (lane & 15)) * LD + ks * 16 + (lane >> 4) * 8);
        const uint32_t ka[4] = {b[ks][0][0], b[ks][1][0], b[ks][0][1], b[ks][1][1]};
        const uint32_t q0[2] = {qf[0], qf[2]}, q1[2] = {qf[1], qf[3]};
        mma_bf16_16816(acc[0], ka, q0);
        mma_bf16_16816(acc[1], ka, q1);
      }
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = mt * 16 + h * 8 + 2 * c; /* q rows row, row + 1 */
        const float w0 = w_s[row], w1 = w_s[row + 1];
        float p[2]; /* keys g, g + 8 */
#pragma unroll
        for (int y = 0; y < 2; y++) {
          const float e0 = __fmul_rn(w0, fmaxf(acc[h][2 * y], 0.0f));
          const float e1 = __fmul_rn(w1, fmaxf(acc[h][2 * y + 1], 0.0f));
          p[y] = e0; /* hp = 1: rows row and row + 1 are two tokens */
          if (hp >= 2) p[y] = e0 + e1;
          if (hp >= 4) p[y] += __shfl_xor_sync(0xffffffffu, p[y], 1);
          if (hp >= 8) p[y] += __shfl_xor_sync(0xffffffffu, p[y], 2);
        }
        const int j = row >> lhp;
        if ((row & (hp - 1)) == 0) { /* the token's first lane */
          if (j < gn) sc_w[j * TC_KW + g] = p[0], sc_w[j * TC_KW + 8 + g] = p[1];
          if (hp == 1 && j + 1 < gn) /* the second token of the pair */
            sc_w[(j + 1) * TC_KW + g] = __fmul_rn(w1, fmaxf(acc[h][1], 0.0f)),
            sc_w[(j + 1) * TC_KW + 8 + g] = __fmul_rn(w1, fmaxf(acc[h][3], 0.0f));
        }
      }
    }
  }
  __syncwarp();
}

/* A token's ReLU x weight fold over its 64 head rows from one m64n64 accumulator (keys as
 * rows, heads as columns): each thread folds its 16 heads (columns 8 n + 2 c + x, n then
 * x in order) of its two keys, then the 4 lanes of a key add theirs (xor 1, 2): every lane
 * of the key's 4 ends with the sums of keys lane / 4 (s0) and lane / 4 + 8 (s1) of the
 * warp's 16; tc_fold_wg puts them in sc[0..16). w: the token's 64 weights. The dense
 * decode path (cuda_indexer_dense.cu) folds with the same function: one sum, one
 * score. */
__device__ inline void tc_fold_wg_sums(const float (&d)[32], const float *w, int lane, float &s0,
                                       float &s1) {
  const int c = lane & 3;
  const float2 *wj = (const float2 *)(w + 2 * c); /* (w: 8-byte aligned) heads 2c, 2c + 1 */
  float p0 = 0.0f, p1 = 0.0f;
#pragma unroll
  for (int n = 0; n < 8; n++) {
    const float2 wv = wj[4 * n]; /* one 8-byte load of the pair's two weights */
    p0 = fmaf(wv.x, fmaxf(d[4 * n], 0.0f), p0);
    p1 = fmaf(wv.x, fmaxf(d[4 * n + 2], 0.0f), p1);
    p0 = fmaf(wv.y, fmaxf(d[4 * n + 1], 0.0f), p0);
    p1 = fmaf(wv.y, fmaxf(d[4 * n + 3], 0.0f), p1);
  }
  p0 += __shfl_xor_sync(0xffffffffu, p0, 1);
  p1 += __shfl_xor_sync(0xffffffffu, p1, 1);
  p0 += __shfl_xor_sync(0xffffffffu, p0, 2);
  p1 += __shfl_xor_sync(0xffffffffu, p1, 2);
  s0 = p0, s1 = p1;
}
__device__ inline void tc_fold_wg(const float (&d)[32], const float *w, float *sc, int lane) {
  const int g = lane >> 2;
  float p0, p1;
  tc_fold_wg_sums(d, w, lane, p0, p1);
  if ((lane & 3) == 0) {
    sc[g] = p0;
    sc[g + 8] = p1;
  }
}

/* The same with wgmma, for tokens of exactly 64 head rows (hp = 64: DeepSeek-V3.2's 64
 * index heads), keys as bf16 in the swizzled layout: warpgroup wgi scores keys 64 wgi ..
 * 64 wgi + 63 of the tile (warp w of the block keys 16 w .. 16 w + 15, as tc_score_tile)
 * against one token
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
  const uint64_t da = wg_desc(wg_uniform(k_base + (uint32_t)(warp >> 2) * 8 * 1024), 16, 1024);
  q_base = wg_uniform(q_base), m_rows = (int)wg_uniform((uint32_t)m_rows);
  gn = (int)wg_uniform((uint32_t)gn);
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
    tc_fold_wg(d, w_s + j * 64, sc_w + j * TC_KW, lane);
  }
  __syncwarp();
}

/* tc_score_tile_wg over e4m3 keys and q (W8): 4 wgmma m64n64k32 for rows of 128 bytes
 * (one swizzle row, the keys and the token's q rows as there), e4m3 products summed in
 * the tensor cores' own order; w_s holds each head's weight times its q scale, so the
 * fold is tc_score_tile_wg's and the key's scale comes in tc_append. */
__device__ inline void tc_score_tile_w8(uint32_t k_base, uint32_t q_base, const float *w_s,
                                        float *sc_w, int gn, int warp, int lane) {
  const uint64_t da = wg_desc(wg_uniform(k_base + (uint32_t)(warp >> 2) * 8 * 1024), 16, 1024);
  q_base = wg_uniform(q_base), gn = (int)wg_uniform((uint32_t)gn);
  for (int j = 0; j < gn; j++) {
    float d[32];
    const uint64_t db = wg_desc(q_base + (uint32_t)j * 8 * 1024, 16, 1024);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
      wgmma_m64n64_e4m3(d, wg_desc_add(da, 32 * ks), wg_desc_add(db, 32 * ks), ks > 0);
    wg_commit();
    wg_wait0();
    wg_pin(d);
    tc_fold_wg(d, w_s + j * 64, sc_w + j * TC_KW, lane);
  }
  __syncwarp();
}

/* The group's q rows (M = 16 m-tiles: token j's heads at rows j hp ..) into q_s in the
 * layout its scoring reads (W8: e4m3 bytes, swizzled; WG: bf16, swizzled; else bf16
 * rows of DIMP + TC_PAD), the weights into w_s, and over fp8_index keys each head's
 * scale into qsc_s (kernels.h: q rounded as an fp8_index row would hold it; W8 folds the
 * scale into the weight). Rows past the group's tokens or heads are zeros of weight
 * zero. Every thread of the block calls it; the caller's barrier publishes the rows
 * (each writer fenced them for wgmma's async proxy). The scoring kernel and the dense
 * decode path (cuda_indexer_dense.cu) stage alike: a pair scores the same in both. */
template <int DIMP, bool FP8, bool W8, bool WG>
__device__ inline void tc_stage_q(const sc_indexer_args &a, int64_t t0, int gn, int hp, int M,
                                  uint16_t *q_s, float *w_s, float *qsc_s) {
  constexpr int LD = WG ? DIMP : DIMP + TC_PAD;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, H = a.n_heads;
  if constexpr (FP8) { /* over fp8_index keys each head of q is rounded (kernels.h): its
                        * scale, the host's rule on its amax (a warp a row) */
    for (int row = warp; row < M; row += TC_WARPS) {
      const int j = row / hp, h = row % hp;
      float amax = 0.0f;
      if (j < gn && h < H) {
        const float *src = a.q + (t0 + j) * a.ld_q + (int64_t)h * a.dim;
        for (int d = lane; d < a.dim; d += 32) amax = fmaxf(amax, fabsf(src[d]));
      }
      for (int off = 16; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      if (lane == 0) qsc_s[row] = sc_kfp8_index_scale(amax);
    }
    __syncthreads();
  }
  if (W8) { /* 16 e4m3 bytes a thread (of q / its scale), a 16-byte store, swizzled */
    for (int i = threadIdx.x; i < M * (DIMP / 16); i += TC_THREADS) {
      const int row = i / (DIMP / 16), p = i % (DIMP / 16), j = row / hp, h = row % hp;
      const float *src = a.q + (t0 + j) * a.ld_q + (int64_t)h * a.dim;
      const float qs = qsc_s[row];
      uint32_t b[4] = {0, 0, 0, 0};
#pragma unroll
      for (int e = 0; e < 16; e++)
        if (j < gn && h < H && 16 * p + e < a.dim)
          b[e >> 2] |= (uint32_t)sc_e4m3_encode(src[16 * p + e] / qs) << (8 * (e & 3));
      *(uint4 *)((char *)q_s + wg_off_n(M, row, p)) = make_uint4(b[0], b[1], b[2], b[3]);
    }
    fence_async_smem(); /* wgmma reads q through the async proxy */
  } else if (WG) { /* 8 elements a thread, a 16-byte store into the swizzled layout */
    for (int i = threadIdx.x; i < M * (DIMP / 8); i += TC_THREADS) {
      const int row = i / (DIMP / 8), p = i % (DIMP / 8), j = row / hp, h = row % hp;
      const float *src = a.q + (t0 + j) * a.ld_q + (int64_t)h * a.dim;
      float v[8];
#pragma unroll
      for (int e = 0; e < 8; e++) {
        v[e] = j < gn && h < H && 8 * p + e < a.dim ? src[8 * p + e] : 0.0f;
        if (FP8) v[e] = sc_kfp8_index_round(v[e], qsc_s[row]); /* (exact in bf16) */
      }
      *(uint4 *)((char *)q_s + wg_off_n(M, row, p)) =
          make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]),
                     pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
    }
    fence_async_smem(); /* wgmma reads q through the async proxy */
  } else {
    for (int i = threadIdx.x; i < M * LD; i += TC_THREADS) {
      const int row = i / LD, d = i % LD, j = row / hp, h = row % hp;
      float v = j < gn && h < H && d < a.dim ? a.q[(t0 + j) * a.ld_q + (int64_t)h * a.dim + d]
                                             : 0.0f;
      if (FP8) v = sc_kfp8_index_round(v, qsc_s[row]); /* (exact in bf16) */
      q_s[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
  }
  for (int row = threadIdx.x; row < M; row += TC_THREADS) {
    const int j = row / hp, h = row % hp;
    /* (W8: q's scale with the weight, exact: a power of two) */
    w_s[row] = j < gn && h < H ? a.w[(t0 + j) * a.ld_w + h] * (W8 ? qsc_s[row] : 1.0f) : 0.0f;
  }
}

/* Appends this warp's keys of the tile that reach their token's threshold to the token's
 * list: a half-warp per token (a lane per key), one atomic per half-warp. A key's score
 * is its head sum times kscale (an fp8_index key's scale; 1 for the other formats, which
 * leaves every score as it is). With track_top, top[j] keeps
 * the largest high word (score bits) appended, a bound for the cuts (tc_top_bound;
 * without, top stays 0 and a cut finds the largest itself: behind a sampled floor
 * lists are rarely cut, and the bound's reductions and atomic were ~8% of the pass's
 * stalls, ncu, H100, 2026-12-06):
 * 32 bits, so a redux per half-warp and a native shared atomic, where a 64-bit maximum took four
 * shuffle rounds and a compare-and-swap loop on every tile that appended. */
__device__ inline void tc_append(const float *sc_w, unsigned kmask, int32_t kpos, float kscale,
                                 int gn, const unsigned long long *thr, unsigned *top,
                                 bool track_top, int *fill, uint64_t *cb, int room, int *flag,
                                 int lane) {
  const int half = lane >> 4, key = lane & 15;
  const unsigned half_lanes = 0xffffu << (16 * half);
  for (int j0 = 0; j0 < gn; j0 += 2) {
    const int j = j0 + half;
    const bool sees = j < gn && ((kmask >> j) & 1u);
    const uint64_t k = sees ? sc_dev_topk_key(sc_w[j * TC_KW + key] * kscale, kpos) : 0;
    const bool want = sees && k >= thr[j];
    const unsigned all = __ballot_sync(0xffffffffu, want);
    if (all == 0) continue;
    const unsigned b = all & half_lanes;
    const int leader = b ? __ffs(b) - 1 : 16 * half;
    unsigned mk = 0;
    if (track_top) { /* (uniform) */
      const unsigned hw = want ? (unsigned)(k >> 32) : 0u; /* for the cuts' range */
      const unsigned m0 = __reduce_max_sync(0xffffffffu, half == 0 ? hw : 0u);
      const unsigned m1 = __reduce_max_sync(0xffffffffu, half == 1 ? hw : 0u);
      mk = half ? m1 : m0;
    }
    int base = 0;
    if (b && lane == leader) {
      base = atomicAdd(&fill[j], __popc(b));
      if (track_top) atomicMax(&top[j], mk);
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

#endif
