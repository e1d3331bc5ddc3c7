/* cuda_topk.cu - merging top-K lists: the candidates gathered from DCP shards
 * (SPEC.md §7) and the per-chunk survivors of the indexer (cuda_indexer.cu).
 *
 * Order. Each candidate is one 64-bit key (cuda_common.cuh) whose unsigned order is
 * exactly (score desc, position asc), so selection is "the K largest keys" and ties need
 * no special case. Keys are distinct because positions within a token's list are.
 *
 * k_topk_final: blocks stream lists through the block select of cuda_select.cuh (as
 * many lists per round as fit in ~200 KB of shared memory, so a DCP merge of 4 x 2048
 * candidates is one select); with more lists than that, a tree of blocks reduces them
 * first; the last block per token writes the K winners in position order
 * (cuda_select.cuh), as positions and/or (score, position). topk_merge reads sc_kcand
 * lists (position -1 = padding). */
#include "kernels/cuda/cuda_select.cuh"

#define TOPK_THREADS 256
/* A launch of fewer blocks than half the SMs (a decode step's merge: one block a token)
 * leaves the GPU idle but for those blocks, so each block's time is the op's: there the
 * blocks take TOPK_THREADS_WIDE threads, which walk the same keys in a quarter of the
 * steps (the selection is exact and the order is by position: the same output for any
 * width). 4 tokens' merge of 4 x 2048 candidates took ~20 us where it took ~35 (H100,
 * 2026-12-08, bench/long-context.md). Only where a block has at least two keys a wide
 * thread: over a few hundred keys (the default model's top-K of 64) the wider block's
 * barriers would cost what its walk saves, and those were not measured apart.
 * SPARSECP_TOPK_WIDE=0: TOPK_THREADS always (the comparison in one binary). */
#define TOPK_THREADS_WIDE 1024

/* ---- launch 2: merge lists (a tree of blocks when there are many), write ----
 *
 * A block merges lists [g * per_block, ...) of its token, per_round lists per select.
 * With TO_KEYS it writes its K survivors (unsorted, 0 = none) as one list of the next
 * level; the last level (one block per token) writes them in position order, as
 * positions and/or candidates. A tree, not one block streaming every list: a decode
 * token's 32 chunk lists in one block took 0.24 ms a layer (the block loads 512 KB and
 * selects four times), while the GPU sat idle. The selection is exact, so how lists
 * are grouped cannot change which keys win. */

template <bool FROM_CAND, bool TO_KEYS, int THREADS>
__global__ void __launch_bounds__(THREADS)
    k_topk_final(int n_tok, int n_lists, int per_block, int K, int per_round,
                 const uint64_t *keys, const sc_kcand *cand, int32_t *out_pos,
                 sc_kcand *out_cand, uint64_t *out_keys) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(16) unsigned char smem[];
  uint64_t *buf = (uint64_t *)smem;        /* [K * (1 + per_round)] */
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
    /* one list of K (the indexer's with one chunk a token, one DCP shard, a tree level's
     * last group) holds no more than K keys: nothing to select. Its zero padding stays
     * where it is: the writer and a next level's select skip it. The
     * select's count and compaction were a quarter of a 32k prompt's final top-K (ncu,
     * H200, 2026-12-03). */
    if (n + take * K <= K) n += take * K;
    else n = block_keep_topk(buf, n + take * K, K, tmp, sh);
  }
  if constexpr (TO_KEYS) {
    uint64_t *o = out_keys + ((int64_t)t * n_groups + g) * K;
    for (int i = threadIdx.x; i < K; i += blockDim.x) o[i] = i < n ? buf[i] : 0;
  } else {
    block_write_by_position(buf, n, K, out_pos ? out_pos + t * K : NULL,
                            out_cand ? out_cand + t * K : NULL);
  }
}
static_assert(POS_WORDS % TOPK_THREADS == 0 && POS_WORDS % TOPK_THREADS_WIDE == 0,
              "block_write_by_position: whole words a thread");

/* Lists merged per select round: as many as fit in about 200 KB of shared memory. */
static int final_per_round(int K, int n_lists) {
  const int avail = 200 * 1024 / 8;
  int r = (avail - 2 * K) / K;
  r = r < 1 ? 1 : r;
  return r < n_lists ? r : n_lists;
}

/* Whether blocks reduce the lists in a tree before the last level: only with more lists
 * than a round takes, and at least two a round, or a level would not shrink them (at
 * K > 6400 a round takes one list: the last level's block then streams them all; before,
 * the tree's loop launched levels of as many lists for ever). */
static bool final_tree(int per_round, int n_lists) { return per_round >= 2 && n_lists > per_round; }

static size_t final_smem(int K, int per_round) {
  return sizeof(uint64_t) * (size_t)K * (size_t)(2 + per_round) + sizeof(int) * SH_WORDS;
}

/* The dynamic shared memory limits handed to cudaFuncSetAttribute: one constant per
 * kernel, the most any launch asks for. The attribute is process-wide, so setting it to
 * each launch's own size let a thread lower it between another thread's set and launch
 * (two kernel contexts in one process: the launch then fails). final_per_round keeps
 * K * (2 + per_round) within 200 KB / 8 for every K <= SC_KCUDA_TOPK_MAX. */
#define FINAL_SMEM_MAX (200 * 1024 + sizeof(int) * SH_WORDS)
static_assert(FINAL_SMEM_MAX + POS_SMEM <= SC_KCUDA_SMEM_MAX,
              "k_topk_final exceeds the sm_90 opt-in limit");

/* The tree's scratch: the lists of every level after the first (ping-pong). */
size_t sc_kcuda_topk_tree_bytes(int n_tok, int n_lists, int K) {
  const int per_round = final_per_round(K, n_lists);
  if (!final_tree(per_round, n_lists)) return 0;
  return 2 * sizeof(uint64_t) * (size_t)n_tok * (size_t)sc_cdiv(n_lists, per_round) *
         (size_t)K;
}

template <bool FROM_CAND, bool TO_KEYS, int THREADS>
static int launch_width(sc_kcuda *c, int64_t blocks, int n_tok, int n_lists, int per_block,
                        int K, int per_round, const uint64_t *keys, const sc_kcand *cand,
                        int32_t *out_pos, sc_kcand *out_cand, uint64_t *out_keys) {
  int rc = sc_kcuda_err(cudaFuncSetAttribute(k_topk_final<FROM_CAND, TO_KEYS, THREADS>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)FINAL_SMEM_MAX),
                        "topk smem");
  if (rc) return rc;
  sc_kcuda_launch(c, k_topk_final<FROM_CAND, TO_KEYS, THREADS>, (unsigned)blocks, THREADS,
                  final_smem(K, per_round), n_tok, n_lists, per_block, K, per_round, keys, cand,
                  out_pos, out_cand, out_keys);
  return SC_CUDA_CHECK_LAUNCH("topk merge");
}

template <bool FROM_CAND, bool TO_KEYS>
static int launch_level(sc_kcuda *c, int n_tok, int n_lists, int per_block, int K,
                        int per_round, const uint64_t *keys, const sc_kcand *cand,
                        int32_t *out_pos, sc_kcand *out_cand, uint64_t *out_keys) {
  const int64_t blocks = (int64_t)n_tok * sc_cdiv(n_lists, per_block);
  if (blocks > INT32_MAX) return SC_ERANGE;
  if (c->topk_wide && blocks < c->num_sms / 2 &&
      (int64_t)per_block * K >= 2 * TOPK_THREADS_WIDE)
    return launch_width<FROM_CAND, TO_KEYS, TOPK_THREADS_WIDE>(
        c, blocks, n_tok, n_lists, per_block, K, per_round, keys, cand, out_pos, out_cand,
        out_keys);
  return launch_width<FROM_CAND, TO_KEYS, TOPK_THREADS>(c, blocks, n_tok, n_lists, per_block,
                                                        K, per_round, keys, cand, out_pos,
                                                        out_cand, out_keys);
}

/* Merges n_lists lists of K per token (keys, or candidates when FROM_CAND) into the
 * sorted top-K: while there are more lists than one select round takes, blocks of
 * per_round lists each reduce theirs to one list (into tree: sc_kcuda_topk_tree_bytes() of
 * scratch), then one block per token finishes. */
template <bool FROM_CAND>
static int launch_final(sc_kcuda *c, int n_tok, int n_lists, int K, const uint64_t *keys,
                        const sc_kcand *cand, int32_t *out_pos, sc_kcand *out_cand,
                        uint64_t *tree) {
  const int per_round = final_per_round(K, n_lists);
  if (final_smem(K, per_round) > FINAL_SMEM_MAX) return SC_ENOTSUP; /* (see final_per_round) */
  const size_t level_len = sc_kcuda_topk_tree_bytes(n_tok, n_lists, K) / 2 / sizeof(uint64_t);
  int rc = 0, level = 0;
  while (rc == 0 && final_tree(per_round, n_lists)) {
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

int sc_kcuda_topk_finish(sc_kcuda *c, int n_tok, int n_lists, int K, const uint64_t *keys,
                         int32_t *out_pos, sc_kcand *out_cand, uint64_t *tree) {
  return launch_final<false>(c, n_tok, n_lists, K, keys, NULL, out_pos, out_cand, tree);
}

extern "C" int sc_kcuda_topk_merge(sc_kernels *k, int32_t n_tok, int32_t n_shards,
                                   int32_t topk, const sc_kcand *cand, int32_t *out_pos,
                                   sc_kcand *out_cand) {
  SC_KCHECK(sc_kcheck_topk_merge(n_tok, n_shards, topk, cand, out_pos, out_cand));
  if (topk > SC_KCUDA_TOPK_MAX) return SC_ENOTSUP;
  sc_kcuda *c = sc_kcuda_of(k);
  uint64_t *tree = NULL;
  const size_t tb = sc_kcuda_topk_tree_bytes(n_tok, n_shards, topk);
  if (tb > 0 && (tree = (uint64_t *)sc_kcuda_scratch(c, tb)) == NULL) return SC_ENOMEM;
  return launch_final<true>(c, n_tok, n_shards, topk, NULL, cand, out_pos, out_cand, tree);
}
