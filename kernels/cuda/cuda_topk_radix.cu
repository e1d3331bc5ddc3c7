/* cuda_topk_radix.cu - the top-K of tokens with many candidates, over many blocks per
 * token: the indexer's chunk survivors when a step has few tokens (decode, short prefill
 * chunks), where one block per token left the GPU idle (cuda_topk.cu's tree took about
 * 160 us a layer for one decode token over 32k keys, H200, 2026-12-01).
 *
 * Input: per token t, count[t] keys (cuda_common.cuh's 64-bit order, 0 = none) at
 * keys[t * cap ...], in any order (the indexer's chunk blocks append them as they finish).
 *
 * An exact radix select over the 64-bit keys, most significant digit first, the passes
 * and the gather in one cooperative launch (k_rsel_coop, below: the default) or a launch
 * each (SPARSECP_TOPK_COOP=0, or a device without cooperative launches):
 *   passes (RSEL_PASSES of them): every block of a token histograms
 *     the digit of its share of the keys that still match the token's prefix and adds
 *     its bins to the token's histogram of the pass in global memory; the bin that holds
 *     the K-th largest key extends the prefix (found by the last block to finish, a
 *     ticket, in a launch a pass; by every block once all have counted, in the
 *     cooperative launch). A token is done once its bin holds exactly the keys
 *     still needed (usually after the score's 32 bits and a few of the position's), or
 *     from the first pass when it has at most K keys; later passes skip it.
 *   gather: every key whose masked value is at least the prefix is one of the K.
 *   write: one block per token writes its K keys in position order (cuda_select.cuh's
 *     bitmap); or, when the step has few tokens, RANK_KEYS keys a block are ranked
 *     against all of the token's K (a key's slot is the count of keys at lower
 *     positions), many blocks a token: when this step was a sort by score, one block's
 *     bitonic sort of 2048 keys took 15.3 us of a decode token's ~60 us at 128k keys,
 *     the ranks in 32 blocks 6.9 us (ncu, H200, 2026-12-04); the op 57 -> 50 us. The
 *     ranks run in the cooperative launch when it runs (after a meet of the token's
 *     blocks), else in a launch of their own (k_rsel_rank).
 * Keys are distinct (positions are), so the selection is exact and the result (in
 * position order) does not depend on how the keys were split over chunks, blocks or
 * launches: layout invariance needs nothing more (SPEC.md §8). */
#include "kernels/cuda/cuda_rsel.cuh"

size_t sc_kcuda_topk_radix_bytes(int n_tok, int K) {
  return rsel_state_bytes(n_tok) + sizeof(uint64_t) * (size_t)n_tok * (size_t)K;
}

int sc_kcuda_topk_radix_begin(sc_kcuda *c, int n_tok, void *scratch, int **count) {
  *count = (int *)scratch;
  return sc_kcuda_err(cudaMemsetAsync(scratch, 0, rsel_state_bytes(n_tok), c->stream),
                      "top-K select state");
}

__global__ void __launch_bounds__(RSEL_THREADS)
    k_rsel_pass(int64_t cap, int K, int shift, int width, int p, const uint64_t *keys,
                const int *count, rsel_tok *state, unsigned *hists) {
  sc_dev_pdl_enter();
  __shared__ unsigned h[RSEL_BINS];
  const int t = blockIdx.y;
  rsel_tok *st = &state[t];
  if (st->done) return; /* set by an earlier launch: every block sees the same */
  rsel_pass_launch(rsel_share_global{keys + (int64_t)t * cap, count[t]}, K, shift, width, p == 0,
                   st, rsel_hist(hists, t, p), h);
}

/* Every key at or above the prefix, into sel[t][0 .. min(K, count)). */
__global__ void __launch_bounds__(RSEL_THREADS)
    k_rsel_gather(int64_t cap, int K, const uint64_t *keys, const int *count, rsel_tok *state,
                  uint64_t *sel) {
  sc_dev_pdl_enter();
  const int t = blockIdx.y;
  rsel_tok *st = &state[t];
  rsel_gather(rsel_share_global{keys + (int64_t)t * cap, count[t]}, K, st->prefix, st->mask,
              &st->taken, sel, t);
}

/* ---- the passes and the gather in one cooperative launch ----
 *
 * A launch a pass pays a kernel boundary for each: a decode token over 128k keys took six
 * passes (four finding the token done and returning, 2.8-2.9 us each), the gather and
 * the ranks, ~41 of its indexer op's ~63 us under ncu (H100, 2026-12-06,
 * bench/long-context.md). Here the same grid takes every pass and the gather in one
 * launch: after a pass a token's blocks wait for one another and each picks the bin
 * (rsel_pass_coop), and a token done leaves the passes at once. Blocks that wait for others are safe only where all of
 * them hold an SM at once, which a cooperative launch guarantees (a select in one
 * cluster of 8 blocks a token, session 46, was slower: 8 SMs read the keys). The
 * counting, the pick and the gather are the passes' own (rsel_count, rsel_find,
 * rsel_gather), so the same keys are selected. Measured (kernel.indexer, one decode token of model-long's
 * indexer, H100, 2026-12-07): the op over 131072 keys 47.6-48.1 -> 43.0-43.3 us, over
 * 32768 keys 35.3-36.1 -> 31.5-31.9; less than the ~19 us the launches cost under ncu,
 * since in the stream a launch's set-up overlaps the one before. */

/* The passes and the gather of token blockIdx.y (rsel_coop_token); with `rank`, also
 * the ranks (when k_rsel_rank would follow: the step has few tokens), the selection
 * staged in dynamic shared memory [K].
 * A kernel boundary less: k_rsel_rank took 6.2 us beside the cooperative launch's 21.7
 * under ncu for a decode token over 128k keys; with the ranks here (and rsel_each_key's batches)
 * its indexer op over bf16 keys took 38.2-38.3 us against 40.4-40.6 (H100, 2026-12-07,
 * bench/long-context.md). */
__global__ void __launch_bounds__(RSEL_THREADS)
    k_rsel_coop(int64_t cap, int K, const uint64_t *keys, const int *count, rsel_tok *state,
                unsigned *hists, uint64_t *sel, bool rank, int32_t *out_pos,
                sc_kcand *out_cand) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned h[RSEL_BINS];
  __shared__ int part[RSEL_THREADS / 32][RANK_KEYS];
  const int t = blockIdx.y;
  rsel_coop_token(rsel_share_global{keys + (int64_t)t * cap, count[t]}, K, &state[t], hists, h,
                  sel, t, rank, (uint64_t *)smem, part, out_pos, out_cand);
}

/* One block per token: its keys written in position order, as positions / candidates. */
__global__ void __launch_bounds__(RSEL_WRITE_THREADS)
    k_rsel_write(int K, const rsel_tok *state, const uint64_t *sel, int32_t *out_pos,
                 sc_kcand *out_cand) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(16) unsigned char smem[];
  uint64_t *buf = (uint64_t *)smem; /* [K] */
  const int64_t t = blockIdx.x;
  const int n = state[t].taken < K ? state[t].taken : K;
  for (int i = threadIdx.x; i < n; i += RSEL_WRITE_THREADS) buf[i] = sel[t * K + i];
  __syncthreads();
  block_write_by_position(buf, n, K, out_pos ? out_pos + t * K : NULL,
                          out_cand ? out_cand + t * K : NULL);
}
static_assert(POS_WORDS % RSEL_WRITE_THREADS == 0,
              "block_write_by_position: whole words a thread");
static_assert(sizeof(uint64_t) * SC_KCUDA_TOPK_MAX + POS_SMEM <= SC_KCUDA_SMEM_MAX,
              "k_rsel_write's shared memory");

/* RANK_KEYS keys of token blockIdx.y's selection from blockIdx.x * RANK_KEYS. */
__global__ void __launch_bounds__(RSEL_THREADS)
    k_rsel_rank(int K, const rsel_tok *state, const uint64_t *sel, int32_t *out_pos,
                sc_kcand *out_cand) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(16) unsigned char smem[];
  uint64_t *all = (uint64_t *)smem; /* [n] */
  __shared__ int part[RSEL_THREADS / 32][RANK_KEYS];
  const int64_t t = blockIdx.y;
  const int n = rsel_stage_sel(K, &state[t], sel, t, all);
  rsel_rank_keys(all, n, K, blockIdx.x * RANK_KEYS, t, part, out_pos, out_cand);
}

int sc_kcuda_topk_radix(sc_kcuda *c, int n_tok, int64_t cap, int K, const uint64_t *keys,
                        int32_t *out_pos, sc_kcand *out_cand, void *scratch) {
  if (n_tok <= 0) return 0;
  if (n_tok > 65535 || K > SC_KCUDA_TOPK_MAX) return SC_ENOTSUP;
  const rsel_scratch rs = rsel_scratch_at(scratch, n_tok);
  const int *count = rs.count;
  rsel_tok *state = rs.state;
  unsigned *hists = rs.hists;
  uint64_t *sel = rs.sel;
  int rc = 0;
  /* about two blocks per SM in all, at most one per 1024 keys of capacity */
  int64_t per = sc_cdiv(2 * (int64_t)c->num_sms, n_tok);
  const int64_t most = sc_cdiv(cap, 4 * RSEL_THREADS);
  per = per > most ? most : per;
  /* ranks when one block a token would leave most SMs idle: at most about two ranking
   * blocks an SM */
  const int rank_blocks = (int)sc_cdiv(K, RANK_KEYS);
  const bool rank = (int64_t)n_tok * rank_blocks <= 2 * (int64_t)c->num_sms;
  const size_t all = sizeof(uint64_t) * (size_t)K; /* a token's selection, staged */
  if (c->topk_coop && n_tok <= c->coop_sms) {
    /* at most one block an SM in all, of this rank's share of them (the grid must be
     * resident at once, beside other kernels and other ranks' grids: coop_sms) */
    const int64_t fit = c->coop_sms / n_tok;
    const dim3 grid((unsigned)(per < fit ? per : fit), (unsigned)n_tok);
    if (rank && (rc = sc_kcuda_err(cudaFuncSetAttribute(
                                       k_rsel_coop, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)(sizeof(uint64_t) * SC_KCUDA_TOPK_MAX)),
                                   "top-K select smem")))
      return rc;
    rc = sc_kcuda_err(sc_kcuda_launch_coop(c, k_rsel_coop, grid, RSEL_THREADS, rank ? all : 0,
                                           cap, K, keys, count, state, hists, sel, rank, out_pos,
                                           out_cand),
                      "top-K select");
    if (rc || rank) return rc;
  } else {
    const dim3 grid((unsigned)(per < 1 ? 1 : per), (unsigned)n_tok);
    int width = RSEL_BITS, shift = 64;
    for (int p = 0; p < RSEL_PASSES; p++) {
      width = shift < RSEL_BITS ? shift : RSEL_BITS;
      shift -= width;
      sc_kcuda_launch(c, k_rsel_pass, grid, RSEL_THREADS, 0, cap, K, shift, width, p, keys,
                      count, state, hists);
      if ((rc = SC_CUDA_CHECK_LAUNCH("top-K select pass"))) return rc;
    }
    sc_kcuda_launch(c, k_rsel_gather, grid, RSEL_THREADS, 0, cap, K, keys, count, state, sel);
    if ((rc = SC_CUDA_CHECK_LAUNCH("top-K select gather"))) return rc;
  }
  if (rank) {
    rc = sc_kcuda_err(cudaFuncSetAttribute(k_rsel_rank, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)(sizeof(uint64_t) * SC_KCUDA_TOPK_MAX)),
                      "top-K rank smem");
    if (rc) return rc;
    sc_kcuda_launch_spread(c, k_rsel_rank, dim3((unsigned)rank_blocks, (unsigned)n_tok),
                           RSEL_THREADS, all, K, state, sel, out_pos, out_cand);
    return SC_CUDA_CHECK_LAUNCH("top-K rank");
  }
  const size_t smem = sizeof(uint64_t) * (size_t)K;
  rc = sc_kcuda_err(cudaFuncSetAttribute(k_rsel_write,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)(sizeof(uint64_t) * SC_KCUDA_TOPK_MAX)),
                    "top-K write smem");
  if (rc) return rc;
  sc_kcuda_launch(c, k_rsel_write, (unsigned)n_tok, RSEL_WRITE_THREADS, smem, K, state, sel,
                  out_pos, out_cand);
  return SC_CUDA_CHECK_LAUNCH("top-K write");
}
