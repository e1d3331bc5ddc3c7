/* cuda_topk.cu - the lightning indexer with top-K selection, and the merge of top-K
 * candidates gathered from DCP shards (SPEC.md §7).
 *
 * Order. Each candidate becomes one 64-bit key (cuda_common.cuh) whose unsigned order is
 * exactly (score desc, position asc), so selection is "the K largest keys" and ties need
 * no special case. Keys are distinct because positions within a token's list are.
 *
 * Indexer, two launches:
 *  1. k_idx_chunk: grid (tokens, chunks). A block scores a contiguous segment of its
 *     token's key range in pieces of IDX_PIECE keys (one thread per key: the key row in
 *     registers, the token's queries and weights in shared memory, heads summed in a
 *     fixed order with four interleaved partial dot products), appends the keys to a
 *     shared buffer and, whenever the buffer holds more than K, keeps only the K largest
 *     (block radix select, 8 bits per pass from the top, stopping as soon as the
 *     threshold bucket is taken whole). Its survivors go to scratch.
 *  2. k_topk_final: blocks stream the chunks' survivors through the same select (as many
 *     lists per round as fit in ~200 KB of shared memory, so a DCP merge of 4 x 2048
 *     candidates is one select); with more lists than that, a tree of blocks reduces them
 *     first; the last block per token bitonic-sorts the K winners and writes positions
 *     and/or (score, position).
 * The score of a (token, key) pair depends only on that pair, so shards and the
 * single-rank run score identically (the property the CPU reference also keeps). The
 * number of chunks is chosen on the host from the token count alone (ops never read
 * buffer contents on the host), so the key-range lengths can stay on the device.
 * topk_merge is launch 2 reading sc_kcand lists (position -1 = padding). */
#include "kernels/cuda/cuda_common.cuh"

#define IDX_THREADS 256
#define IDX_PIECE 2048
#define IDX_MAX_DIM 128

/* Shared control words after the 256 histogram bins. */
enum { SH_BIN = 256, SH_NEED, SH_EQ, SH_CNT, SH_CNT2, SH_WORDS };

/* The helpers below are called by every thread of the block with the same n, and loop
 * over [0, n) in steps of the block so that the lanes of a warp stay together: they
 * aggregate their shared-memory atomics per warp. Scores cluster (the top bytes of most
 * keys agree), and one atomic per key on the same bin or counter serialized whole warps
 * (a decode token's merge of 32 lists took 0.24 ms a layer, H200, 2026-12-01). */

/* A slot for each lane that wants one in *counter's array: the warp takes its slots
 * with one atomic, the lanes in lane order. All lanes of the warp call it. */
__device__ inline int warp_take_slot(int *counter, bool want) {
  const unsigned b = __ballot_sync(0xffffffffu, want);
  if (b == 0) return -1;
  const int lane = threadIdx.x & 31, leader = __ffs(b) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(counter, __popc(b));
  base = __shfl_sync(0xffffffffu, base, leader);
  return want ? base + __popc(b & ((1u << lane) - 1u)) : -1;
}

__device__ inline int block_count_nonzero(const uint64_t *buf, int n, int *sh) {
  if (threadIdx.x == 0) sh[SH_CNT] = 0;
  __syncthreads();
  int local = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) local += buf[i] != 0;
  for (int off = 16; off > 0; off >>= 1) local += __shfl_xor_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(&sh[SH_CNT], local);
  __syncthreads();
  const int v = sh[SH_CNT];
  __syncthreads();
  return v;
}

/* Keeps the min(K, nonzero) largest keys of buf[0..n) in buf[0..result) (any order).
 * tmp holds at least K keys; sh at least SH_WORDS ints. All threads call it. */
__device__ int block_keep_topk(uint64_t *buf, int n, int K, uint64_t *tmp, int *sh) {
  const int nvalid = block_count_nonzero(buf, n, sh);
  if (nvalid <= K) {
    if (threadIdx.x == 0) sh[SH_CNT2] = 0;
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += blockDim.x) {
      const int i = i0 + (int)threadIdx.x;
      const uint64_t key = i < n ? buf[i] : 0;
      const int slot = warp_take_slot(&sh[SH_CNT2], key != 0);
      if (slot >= 0) tmp[slot] = key;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nvalid; i += blockDim.x) buf[i] = tmp[i];
    __syncthreads();
    return nvalid;
  }
  uint64_t prefix = 0, mask = 0;
  int need = K;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += blockDim.x) {
      const int i = i0 + (int)threadIdx.x;
      const uint64_t key = i < n ? buf[i] : 0;
      const bool in = key != 0 && (key & mask) == prefix;
      const int bin = in ? (int)((key >> shift) & 255) : -1;
      const unsigned peers = __match_any_sync(0xffffffffu, bin); /* lanes with my bin */
      if (in && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&sh[bin], __popc(peers));
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      int s = 0;
      for (int b = 0; b < 8; b++) s += sh[lane * 8 + b];
      int suf = s; /* sum over lanes >= lane */
      for (int off = 1; off < 32; off <<= 1) {
        const int o = __shfl_down_sync(0xffffffffu, suf, off);
        if (lane + off < 32) suf += o;
      }
      int running = suf - s; /* keys in higher buckets than this lane's */
      for (int b = lane * 8 + 7; b >= lane * 8; b--) {
        const int c = sh[b];
        if (running < need && running + c >= need) {
          sh[SH_BIN] = b;
          sh[SH_NEED] = need - running;
          sh[SH_EQ] = c;
        }
        running += c;
      }
    }
    __syncthreads();
    const int b = sh[SH_BIN];
    need = sh[SH_NEED];
    const int eq = sh[SH_EQ];
    prefix |= (uint64_t)b << shift;
    mask |= (uint64_t)0xff << shift;
    __syncthreads();
    if (eq == need) break;
  }
  if (threadIdx.x == 0) sh[SH_CNT] = sh[SH_CNT2] = 0;
  __syncthreads();
  const int above = K - need;
  for (int i0 = 0; i0 < n; i0 += blockDim.x) {
    const int i = i0 + (int)threadIdx.x;
    const uint64_t key = i < n ? buf[i] : 0;
    const uint64_t m = key & mask;
    const int hi = warp_take_slot(&sh[SH_CNT], key != 0 && m > prefix);
    const int eq = warp_take_slot(&sh[SH_CNT2], key != 0 && m == prefix);
    if (hi >= 0) tmp[hi] = key;
    if (eq >= 0 && eq < need) tmp[above + eq] = key;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < K; i += blockDim.x) buf[i] = tmp[i];
  __syncthreads();
  return K;
}

/* Sorts buf[0..m) descending; m a power of two. */
__device__ void block_sort_desc(uint64_t *buf, int m) {
  for (int k = 2; k <= m; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < m; i += blockDim.x) {
        const int ixj = i ^ j;
        if (ixj > i) {
          const uint64_t a = buf[i], b = buf[ixj];
          const bool desc = (i & k) == 0;
          if (desc ? a < b : a > b) {
            buf[i] = b;
            buf[ixj] = a;
          }
        }
      }
      __syncthreads();
    }
}

static int pow2_at_least(int v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

/* ---- launch 1: scores and per-chunk survivors ---- */

template <int DIMP, int FMT>
__global__ void __launch_bounds__(IDX_THREADS)
    k_idx_chunk(sc_indexer_args a, int n_chunks, uint64_t *out_keys, int *flag) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int H = a.n_heads, K = a.topk;
  float *q_s = (float *)smem;                        /* [H][DIMP], zero padded */
  float *w_s = q_s + (size_t)H * DIMP;               /* [H] */
  uint64_t *buf = (uint64_t *)(w_s + ((H + 3) & ~3)); /* [K + IDX_PIECE] */
  uint64_t *tmp = buf + K + IDX_PIECE;               /* [K] */
  int *sh = (int *)(tmp + K);                        /* [SH_WORDS] */

  const int64_t t = blockIdx.x; /* tokens on x: prefill chunks exceed 65535 tokens */
  const int chunk = blockIdx.y;
  const float *qt = a.q + t * a.ld_q;
  for (int i = threadIdx.x; i < H * DIMP; i += blockDim.x) {
    const int h = i / DIMP, d = i % DIMP;
    q_s[i] = d < a.dim ? qt[(int64_t)h * a.dim + d] : 0.0f;
  }
  for (int h = threadIdx.x; h < H; h += blockDim.x) w_s[h] = a.w[t * a.ld_w + h];
  const int32_t qpos = a.q_pos[t];
  const int64_t begin = a.key_begin[t], end = a.key_end[t];
  const int64_t len = end > begin ? end - begin : 0;
  const int64_t seg = (len + n_chunks - 1) / n_chunks;
  const int64_t s0 = begin + chunk * seg;
  const int64_t s1 = s0 + seg < end ? s0 + seg : end;
  const int64_t kstep = FMT == SC_KFMT_F32 ? a.keys.ld * 4 : a.keys.ld * 2;
  __syncthreads();

  int n = 0;
  for (int64_t p0 = s0; p0 < s1; p0 += IDX_PIECE) {
    const int cnt = (int)(s1 - p0 < IDX_PIECE ? s1 - p0 : IDX_PIECE);
    for (int j = threadIdx.x; j < cnt; j += blockDim.x) {
      const int64_t e = p0 + j;
      uint64_t key = 0;
      const int32_t kp = a.key_pos[e];
      const int64_t row = a.key_rows ? a.key_rows[e] : e;
      if (kp <= qpos) {
        if (row < 0 || row >= a.keys.rows) {
          sc_dev_raise(flag, SC_ERANGE);
        } else {
          const char *kr = (const char *)a.keys.data + row * kstep;
          float kv[DIMP];
#pragma unroll
          for (int d = 0; d < DIMP; d++)
            kv[d] = d < a.dim ? (FMT == SC_KFMT_F32 ? ((const float *)kr)[d]
                                                    : sc_bf16_to_f32(((const uint16_t *)kr)[d]))
                              : 0.0f;
          float score = 0.0f;
          for (int h = 0; h < H; h++) {
            const float4 *qh = (const float4 *)(q_s + h * DIMP);
            float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
#pragma unroll
            for (int d = 0; d < DIMP / 4; d++) {
              const float4 qq = qh[d];
              d0 = fmaf(qq.x, kv[4 * d], d0);
              d1 = fmaf(qq.y, kv[4 * d + 1], d1);
              d2 = fmaf(qq.z, kv[4 * d + 2], d2);
              d3 = fmaf(qq.w, kv[4 * d + 3], d3);
            }
            const float dot = (d0 + d1) + (d2 + d3);
            score += w_s[h] * fmaxf(dot, 0.0f);
          }
          key = sc_dev_topk_key(score, kp);
        }
      }
      buf[n + j] = key;
    }
    __syncthreads();
    n += cnt;
    if (n > K) n = block_keep_topk(buf, n, K, tmp, sh);
  }
  uint64_t *o = out_keys + ((int64_t)t * n_chunks + chunk) * K;
  for (int i = threadIdx.x; i < K; i += blockDim.x) o[i] = i < n ? buf[i] : 0;
}

/* ---- launch 2: merge lists (a tree of blocks when there are many), sort, write ----
 *
 * A block merges lists [g * per_block, ...) of its token, per_round lists per select.
 * With TO_KEYS it writes its K survivors (unsorted, 0 = none) as one list of the next
 * level; the last level (one block per token) sorts them and writes positions and/or
 * candidates. A tree, not one block streaming every list: a decode token's 32 chunk lists
 * in one block took 0.24 ms a layer (the block loads 512 KB and selects four times),
 * while the GPU sat idle. The selection is exact, so how lists are grouped cannot change
 * which keys win. */

template <bool FROM_CAND, bool TO_KEYS>
__global__ void __launch_bounds__(IDX_THREADS)
    k_topk_final(int n_tok, int n_lists, int per_block, int K, int M, int per_round,
                 const uint64_t *keys, const sc_kcand *cand, int32_t *out_pos,
                 sc_kcand *out_cand, uint64_t *out_keys) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint64_t *buf = (uint64_t *)smem;        /* [K * (1 + per_round)] >= K + M */
  uint64_t *tmp = buf + K * (1 + per_round); /* [K] */
  int *sh = (int *)(tmp + K);
  const int n_groups = (n_lists + per_block - 1) / per_block;
  const int64_t t = blockIdx.x / n_groups;
  const int g = (int)(blockIdx.x % n_groups);
  const int first = g * per_block;
  const int last = first + per_block < n_lists ? first + per_block : n_lists;
  int n = 0;
  /* per_round lists join the survivors before each select: fewer select rounds */
  for (int l0 = first; l0 < last; l0 += per_round) {
    const int take = last - l0 < per_round ? last - l0 : per_round;
    for (int l = 0; l < take; l++) {
      uint64_t *dst = buf + n + l * K;
#pragma unroll 4 /* several loads in flight per thread */
      for (int i = threadIdx.x; i < K; i += blockDim.x) {
        uint64_t key;
        if (FROM_CAND) {
          const sc_kcand c = cand[((int64_t)(l0 + l) * n_tok + t) * K + i];
          key = c.pos < 0 ? 0 : sc_dev_topk_key(c.score, c.pos);
        } else {
          key = keys[((int64_t)t * n_lists + l0 + l) * K + i];
        }
        dst[i] = key;
      }
    }
    __syncthreads();
    n = block_keep_topk(buf, n + take * K, K, tmp, sh);
  }
  if (TO_KEYS) {
    uint64_t *o = out_keys + ((int64_t)t * n_groups + g) * K;
    for (int i = threadIdx.x; i < K; i += blockDim.x) o[i] = i < n ? buf[i] : 0;
  } else {
    for (int i = n + threadIdx.x; i < M; i += blockDim.x) buf[i] = 0;
    __syncthreads();
    block_sort_desc(buf, M);
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
      const sc_kcand c = sc_dev_topk_cand(buf[i]);
      if (out_pos) out_pos[t * K + i] = c.pos;
      if (out_cand) out_cand[t * K + i] = c;
    }
  }
}

/* Lists merged per select round: as many as fit in about 200 KB of shared memory. */
static int final_per_round(int K, int n_lists) {
  const int avail = 200 * 1024 / 8;
  int r = (avail - 2 * K) / K;
  r = r < 1 ? 1 : r;
  return r < n_lists ? r : n_lists;
}

static size_t final_smem(int K, int per_round) {
  return sizeof(uint64_t) * (size_t)K * (size_t)(2 + per_round) + sizeof(int) * SH_WORDS;
}

/* The dynamic shared memory limits handed to cudaFuncSetAttribute: one constant per
 * kernel, the most any launch asks for. The attribute is process-wide, so setting it to
 * each launch's own size let a thread lower it between another thread's set and launch
 * (two kernel contexts in one process: the launch then fails). final_per_round keeps
 * K * (2 + per_round) within 200 KB / 8 for every K <= SC_KCUDA_TOPK_MAX. */
#define FINAL_SMEM_MAX (200 * 1024 + sizeof(int) * SH_WORDS)
#define CHUNK_SMEM_MAX (227 * 1024)
static_assert(FINAL_SMEM_MAX <= CHUNK_SMEM_MAX, "k_topk_final exceeds the sm_90 opt-in limit");

/* The tree's scratch: the lists of every level after the first (ping-pong). */
static size_t tree_bytes(int n_tok, int n_lists, int K) {
  const int per_round = final_per_round(K, n_lists);
  if (n_lists <= per_round) return 0;
  return 2 * sizeof(uint64_t) * (size_t)n_tok * (size_t)sc_cdiv(n_lists, per_round) *
         (size_t)K;
}

template <bool FROM_CAND, bool TO_KEYS>
static int launch_level(sc_kcuda *c, int n_tok, int n_lists, int per_block, int K,
                        int per_round, const uint64_t *keys, const sc_kcand *cand,
                        int32_t *out_pos, sc_kcand *out_cand, uint64_t *out_keys) {
  int rc = sc_kcuda_err(cudaFuncSetAttribute(k_topk_final<FROM_CAND, TO_KEYS>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)FINAL_SMEM_MAX),
                        "topk smem");
  if (rc) return rc;
  const int64_t blocks = (int64_t)n_tok * sc_cdiv(n_lists, per_block);
  if (blocks > INT32_MAX) return SC_ERANGE;
  k_topk_final<FROM_CAND, TO_KEYS><<<(unsigned)blocks, IDX_THREADS,
                                     final_smem(K, per_round), c->stream>>>(
      n_tok, n_lists, per_block, K, pow2_at_least(K), per_round, keys, cand, out_pos,
      out_cand, out_keys);
  return SC_CUDA_CHECK_LAUNCH("topk merge");
}

/* Merges n_lists lists of K per token (keys, or candidates when FROM_CAND) into the
 * sorted top-K: while there are more lists than one select round takes, blocks of
 * per_round lists each reduce theirs to one list (into tree, tree_bytes() of scratch),
 * then one block per token finishes. */
template <bool FROM_CAND>
static int launch_final(sc_kcuda *c, int n_tok, int n_lists, int K, const uint64_t *keys,
                        const sc_kcand *cand, int32_t *out_pos, sc_kcand *out_cand,
                        uint64_t *tree) {
  const int per_round = final_per_round(K, n_lists);
  if (final_smem(K, per_round) > FINAL_SMEM_MAX) return SC_ENOTSUP; /* (see final_per_round) */
  const size_t level_len = tree_bytes(n_tok, n_lists, K) / 2 / sizeof(uint64_t);
  int rc = 0, level = 0;
  while (rc == 0 && n_lists > per_round) {
    uint64_t *next = tree + (level & 1) * level_len;
    rc = level == 0 ? launch_level<FROM_CAND, true>(c, n_tok, n_lists, per_round, K, per_round,
                                                     keys, cand, NULL, NULL, next)
                    : launch_level<false, true>(c, n_tok, n_lists, per_round, K, per_round,
                                                keys, NULL, NULL, NULL, next);
    keys = next;
    n_lists = (int)sc_cdiv(n_lists, per_round);
    level++;
  }
  if (rc) return rc;
  return level == 0 ? launch_level<FROM_CAND, false>(c, n_tok, n_lists, n_lists, K, per_round,
                                                      keys, cand, out_pos, out_cand, NULL)
                    : launch_level<false, false>(c, n_tok, n_lists, n_lists, K,
                                                 final_per_round(K, n_lists), keys, NULL,
                                                 out_pos, out_cand, NULL);
}

template <int DIMP, int FMT>
static int launch_chunks(sc_kcuda *c, const sc_indexer_args *a, int n_chunks, uint64_t *keys) {
  const size_t smem = sizeof(float) * ((size_t)a->n_heads * DIMP + ((a->n_heads + 3) & ~3)) +
                      sizeof(uint64_t) * (size_t)(2 * a->topk + IDX_PIECE) +
                      sizeof(int) * SH_WORDS;
  if (smem > CHUNK_SMEM_MAX) return SC_ENOTSUP;
  int rc = sc_kcuda_err(cudaFuncSetAttribute(k_idx_chunk<DIMP, FMT>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)CHUNK_SMEM_MAX),
                        "indexer smem");
  if (rc) return rc;
  k_idx_chunk<DIMP, FMT><<<dim3((unsigned)a->n_tok, (unsigned)n_chunks), IDX_THREADS, smem,
                           c->stream>>>(*a, n_chunks, keys, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("indexer");
}

template <int FMT>
static int launch_chunks_fmt(sc_kcuda *c, const sc_indexer_args *a, int n_chunks,
                             uint64_t *keys) {
  if (a->dim <= 32) return launch_chunks<32, FMT>(c, a, n_chunks, keys);
  if (a->dim <= 64) return launch_chunks<64, FMT>(c, a, n_chunks, keys);
  return launch_chunks<128, FMT>(c, a, n_chunks, keys);
}

extern "C" int sc_kcuda_indexer_topk(sc_kernels *k, const sc_indexer_args *a) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_indexer(a, sc_kcuda_check_rows));
  if (a->dim > IDX_MAX_DIM || a->topk > SC_KCUDA_TOPK_MAX || a->keys.fmt == SC_KFMT_FP8_DS_MLA)
    return SC_ENOTSUP;
  /* enough blocks to cover the GPU about four times over, from the token count alone */
  int n_chunks = (int)sc_cdiv(4 * (int64_t)c->num_sms, a->n_tok);
  n_chunks = n_chunks < 1 ? 1 : n_chunks > 32 ? 32 : n_chunks;
  const size_t list_bytes = sizeof(uint64_t) * (size_t)a->n_tok * (size_t)n_chunks *
                            (size_t)a->topk;
  uint64_t *keys = (uint64_t *)sc_kcuda_scratch(
      c, list_bytes + tree_bytes(a->n_tok, n_chunks, a->topk));
  if (keys == NULL) return SC_ENOMEM;
  const int rc = a->keys.fmt == SC_KFMT_F32 ? launch_chunks_fmt<SC_KFMT_F32>(c, a, n_chunks, keys)
                                        : launch_chunks_fmt<SC_KFMT_BF16>(c, a, n_chunks, keys);
  if (rc) return rc;
  return launch_final<false>(c, a->n_tok, n_chunks, a->topk, keys, NULL, a->out_pos,
                             a->out_cand, keys + list_bytes / sizeof(uint64_t));
}

extern "C" int sc_kcuda_topk_merge(sc_kernels *k, int32_t n_tok, int32_t n_shards,
                                   int32_t topk, const sc_kcand *cand, int32_t *out_pos,
                                   sc_kcand *out_cand) {
  SC_KCHECK(sc_kcheck_topk_merge(n_tok, n_shards, topk, cand, out_pos, out_cand));
  if (topk > SC_KCUDA_TOPK_MAX) return SC_ENOTSUP;
  sc_kcuda *c = sc_kcuda_of(k);
  uint64_t *tree = NULL;
  const size_t tb = tree_bytes(n_tok, n_shards, topk);
  if (tb > 0 && (tree = (uint64_t *)sc_kcuda_scratch(c, tb)) == NULL) return SC_ENOMEM;
  return launch_final<true>(c, n_tok, n_shards, topk, NULL, cand, out_pos, out_cand, tree);
}
