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
 *     its bins to the token's histogram in global memory; the last block to finish (a
 *     ticket) finds the bin that holds the K-th largest key, extends the prefix by it
 *     and clears the histogram. A token is done once its bin holds exactly the keys
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
#include "kernels/cuda/cuda_select.cuh"

#define RSEL_THREADS 256
#define RSEL_BITS 11
#define RSEL_BINS (1 << RSEL_BITS)
#define RSEL_PASSES 6 /* 5 x 11 + 9 bits */
#define RSEL_BATCH 4  /* keys a thread loads at once (rsel_each_key) */
#define RSEL_WRITE_THREADS 512
#define RANK_KEYS 64 /* keys a ranking block places: two a lane of each warp */
static_assert(RANK_KEYS == 64 && RSEL_THREADS >= RANK_KEYS && RSEL_THREADS % 32 == 0,
              "k_rsel_rank: lanes hold keys lane and 32 + lane, threads below RANK_KEYS write");

static_assert(RSEL_BINS % RSEL_THREADS == 0, "whole bins per thread in the scan");

/* One token's select state in global memory (zeroed before the first pass). */
typedef struct rsel_tok {
  unsigned long long prefix, mask; /* digits found so far, and which bits they cover */
  int need;                        /* keys still needed from inside the prefix */
  int done;
  int ticket;                      /* blocks of the current pass that have finished */
  int taken;                       /* gather: keys written so far */
  int passed;                      /* k_rsel_coop: passes whose bin is picked */
  int gathered;                    /* k_rsel_coop: blocks done with the gather */
} rsel_tok;

/* Scratch layout: count int [n_tok] (padded to 16 bytes), rsel_tok [n_tok], hist uint32
 * [n_tok][RSEL_BINS], sel uint64 [n_tok][K]. The first three start zeroed (one memset). */
static size_t rsel_count_bytes(int n_tok) { return 16 * (size_t)sc_cdiv(4 * (int64_t)n_tok, 16); }

static size_t rsel_state_bytes(int n_tok) {
  return rsel_count_bytes(n_tok) + (sizeof(rsel_tok) + sizeof(unsigned) * RSEL_BINS) * (size_t)n_tok;
}

size_t sc_kcuda_topk_radix_bytes(int n_tok, int K) {
  return rsel_state_bytes(n_tok) + sizeof(uint64_t) * (size_t)n_tok * (size_t)K;
}

int sc_kcuda_topk_radix_begin(sc_kcuda *c, int n_tok, void *scratch, int **count) {
  *count = (int *)scratch;
  return sc_kcuda_err(cudaMemsetAsync(scratch, 0, rsel_state_bytes(n_tok), c->stream),
                      "top-K select state");
}

/* The last block of a pass: the bin of the K-th largest key among those still matching,
 * from the token's histogram (cleared for the next pass). h: shared [RSEL_BINS]. */
__device__ void rsel_pick(rsel_tok *st, unsigned *hist, unsigned *h, int K, int shift,
                          int width, bool first) {
  __shared__ int part[RSEL_THREADS / 32];
  __shared__ int total_s;
  /* read by all before the one thread that finds the bin writes it; the state through
   * L2, as every read of it that k_rsel_coop makes after another block's pick */
  int need = __ldcg(&st->need);
  for (int b = threadIdx.x; b < RSEL_BINS; b += RSEL_THREADS) {
    h[b] = __ldcg(&hist[b]);
    hist[b] = 0;
  }
  __syncthreads();
  /* thread i owns bins [i * per, (i + 1) * per); suffix sums from the top bin down */
  constexpr int per = RSEL_BINS / RSEL_THREADS;
  int mine = 0;
  for (int b = 0; b < per; b++) mine += (int)h[(int)threadIdx.x * per + b];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int suf = mine; /* within the warp: bins of lanes >= lane */
  for (int off = 1; off < 32; off <<= 1) {
    const int o = __shfl_down_sync(0xffffffffu, suf, off);
    if (lane + off < 32) suf += o;
  }
  if (lane == 0) part[warp] = suf;
  __syncthreads();
  int above = suf - mine; /* keys in bins above this thread's */
  for (int w = warp + 1; w < RSEL_THREADS / 32; w++) above += part[w];
  if (threadIdx.x == 0) {
    int t = 0;
    for (int w = 0; w < RSEL_THREADS / 32; w++) t += part[w];
    total_s = t;
  }
  __syncthreads();
  if (first) { /* every key is in the first histogram */
    need = total_s < K ? total_s : K;
    if (total_s <= K) { /* all of them: prefix and mask stay 0 */
      if (threadIdx.x == 0) {
        st->need = need;
        st->done = 1;
        st->ticket = 0;
      }
      return;
    }
  }
  const int lo = (int)threadIdx.x * per; /* (signed: b goes below 0 in thread 0) */
  for (int b = lo + per - 1; b >= lo; b--) {
    const int c = (int)h[b];
    if (above < need && above + c >= need) {
      const unsigned long long digit_mask = ((1ull << width) - 1ull) << shift;
      st->prefix = __ldcg(&st->prefix) | (unsigned long long)b << shift;
      st->mask = __ldcg(&st->mask) | digit_mask;
      st->need = need - above;
      st->done = c == need - above || shift == 0;
    }
    above += c;
  }
  if (threadIdx.x == 0) st->ticket = 0;
}

/* f(key) for each of this block's share of a token's n keys at kt (0 for a lane past n:
 * whole warps stay in the loop, so that a warp's collectives in f see every lane). A
 * thread loads RSEL_BATCH keys before f sees any: one wait for them where a loop of one
 * key a turn waited once per key (a decode token over 128k keys gives a thread of a
 * one-block-an-SM grid about four). Through L1: a block reads the same share in every
 * pass and in the gather. */
template <typename F>
__device__ inline void rsel_each_key(const uint64_t *kt, int n, F f) {
  const int stride = gridDim.x * RSEL_THREADS;
  for (int i0 = blockIdx.x * RSEL_THREADS; i0 < n; i0 += RSEL_BATCH * stride) {
    const int i = i0 + (int)threadIdx.x;
    uint64_t kb[RSEL_BATCH];
#pragma unroll
    for (int r = 0; r < RSEL_BATCH; r++) kb[r] = i + r * stride < n ? kt[i + r * stride] : 0;
#pragma unroll
    for (int r = 0; r < RSEL_BATCH; r++) f(kb[r]);
  }
}

/* One pass of token t over this block's share of its keys: the digit at shift (width
 * bits) of every key that matches the token's prefix, counted in h (shared
 * [RSEL_BINS]) and added to the token's histogram; the last block of the pass to finish
 * (a ticket) picks the bin (rsel_pick). Returns whether this block was that one. The
 * state is read through L2 (__ldcg): in k_rsel_coop an earlier pass of the same launch
 * wrote it. */
__device__ bool rsel_count(int64_t cap, int K, int shift, int width, bool first,
                           const uint64_t *keys, const int *count, rsel_tok *st,
                           unsigned *hist, unsigned *h, int t) {
  __shared__ bool last;
  const unsigned long long prefix = __ldcg(&st->prefix), mask = __ldcg(&st->mask);
  for (int b = threadIdx.x; b < RSEL_BINS; b += RSEL_THREADS) h[b] = 0;
  __syncthreads();
  /* equal bins counted once a warp */
  rsel_each_key(keys + (int64_t)t * cap, count[t], [&](uint64_t key) {
    const bool in = key != 0 && (key & mask) == prefix;
    const int bin = in ? (int)((key >> shift) & ((1u << width) - 1u)) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, bin);
    if (in && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&h[bin], __popc(peers));
  });
  __syncthreads();
  for (int b = threadIdx.x; b < RSEL_BINS; b += RSEL_THREADS)
    if (h[b]) atomicAdd(&hist[b], h[b]);
  __threadfence(); /* the bins before the ticket */
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&st->ticket, 1) == (int)gridDim.x - 1;
  __syncthreads();
  if (!last) return false;
  __threadfence(); /* every block's bins after its ticket */
  rsel_pick(st, hist, h, K, shift, width, first);
  return true;
}

/* Every key of this block's share of token t's at or above the prefix, into
 * sel[t][0 .. min(K, count)). */
__device__ void rsel_gather(int64_t cap, int K, const uint64_t *keys, const int *count,
                            rsel_tok *st, uint64_t *sel, int t) {
  const unsigned long long prefix = __ldcg(&st->prefix), mask = __ldcg(&st->mask);
  rsel_each_key(keys + (int64_t)t * cap, count[t], [&](uint64_t key) {
    const int slot = warp_take_slot(&st->taken, key != 0 && (key & mask) >= prefix);
    if (slot >= 0 && slot < K) sel[(int64_t)t * K + slot] = key;
  });
}

__global__ void __launch_bounds__(RSEL_THREADS)
    k_rsel_pass(int64_t cap, int K, int shift, int width, bool first, const uint64_t *keys,
                const int *count, rsel_tok *state, unsigned *hists) {
  sc_dev_pdl_enter();
  __shared__ unsigned h[RSEL_BINS];
  const int t = blockIdx.y;
  rsel_tok *st = &state[t];
  if (st->done) return; /* set by an earlier launch: every block sees the same */
  rsel_count(cap, K, shift, width, first, keys, count, st, hists + (size_t)t * RSEL_BINS, h, t);
}

/* Every key at or above the prefix, into sel[t][0 .. min(K, count)). */
__global__ void __launch_bounds__(RSEL_THREADS)
    k_rsel_gather(int64_t cap, int K, const uint64_t *keys, const int *count, rsel_tok *state,
                  uint64_t *sel) {
  sc_dev_pdl_enter();
  const int t = blockIdx.y;
  rsel_gather(cap, K, keys, count, &state[t], sel, t);
}

/* Ranks, the step after the gather when a step has few tokens: RANK_KEYS keys of token
 * t's selection `all` (n of them, in shared memory), from `first`: the slot of a key is
 * the count of the token's keys at lower positions (positions are distinct, so the slots
 * are those of k_rsel_write's order). Each warp counts over its eighth of the keys, the
 * warps' counts are added in a fixed order. Slots from the token's key count to K get
 * none, as k_rsel_write writes them. part: shared [RSEL_THREADS / 32][RANK_KEYS]. */
__device__ void rsel_rank_keys(const uint64_t *all, int n, int K, int first, int64_t t,
                               int (*part)[RANK_KEYS], int32_t *out_pos, sc_kcand *out_cand) {
  constexpr int warps = RSEL_THREADS / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t x0 = first + lane < n ? all[first + lane] : 0;
  const uint64_t x1 = first + 32 + lane < n ? all[first + 32 + lane] : 0;
  const int per = (n + warps - 1) / warps, lo = warp * per, hi = lo + per < n ? lo + per : n;
  int r0 = 0, r1 = 0;
  const int32_t p0 = sc_dev_topk_pos(x0), p1 = sc_dev_topk_pos(x1);
  for (int j = lo; j < hi; j++) {
    const int32_t p = sc_dev_topk_pos(all[j]);
    r0 += p < p0;
    r1 += p < p1;
  }
  part[warp][lane] = r0;
  part[warp][32 + lane] = r1;
  __syncthreads();
  if (threadIdx.x < RANK_KEYS && first + (int)threadIdx.x < K) {
    const int i = first + (int)threadIdx.x;
    int slot = i; /* past the token's keys: an empty slot of its own */
    uint64_t key = 0;
    if (i < n) {
      slot = 0;
      for (int w = 0; w < warps; w++) slot += part[w][threadIdx.x];
      key = all[i];
    }
    const sc_kcand c = sc_dev_topk_cand(key);
    if (out_pos) out_pos[t * K + slot] = c.pos;
    if (out_cand) out_cand[t * K + slot] = c;
  }
  __syncthreads(); /* (part is read before the next call's writes) */
}

/* Token t's selection (the gather's, its first min(taken, K) of sel), into shared `all`;
 * returns how many. */
__device__ int rsel_stage_sel(int K, const rsel_tok *st, const uint64_t *sel, int64_t t,
                              uint64_t *all) {
  const int taken = __ldcg(&st->taken), n = taken < K ? taken : K;
  for (int i = threadIdx.x; i < n; i += RSEL_THREADS) all[i] = __ldcg(&sel[t * K + i]);
  __syncthreads();
  return n;
}

/* ---- the passes and the gather in one cooperative launch ----
 *
 * A launch a pass pays a kernel boundary for each: a decode token over 128k keys took six
 * passes (four finding the token done and returning, 2.8-2.9 us each), the gather and
 * the ranks, ~41 of its indexer op's ~63 us under ncu (H100, 2026-12-06,
 * bench/long-context.md). Here the same grid takes every pass and the gather in one
 * launch: after a pass a token's blocks meet at its state (rsel_meet), and a token done
 * leaves the passes at once. Blocks that wait for others are safe only where all of
 * them hold an SM at once, which a cooperative launch guarantees (a select in one
 * cluster of 8 blocks a token, session 46, was slower: 8 SMs read the keys). The
 * counting, the picks and the gather are the passes' own (rsel_count, rsel_gather), so
 * the same keys are selected. Measured (kernel.indexer, one decode token of model-long's
 * indexer, H100, 2026-12-07): the op over 131072 keys 47.6-48.1 -> 43.0-43.3 us, over
 * 32768 keys 35.3-36.1 -> 31.5-31.9; less than the ~19 us the launches cost under ncu,
 * since in the stream a launch's set-up overlaps the one before. */

/* Token t's blocks after pass p: the last one to finish it has picked the bin (its
 * `last`) and says so; the others wait until it has. */
__device__ void rsel_meet(rsel_tok *st, bool last, int p) {
  __syncthreads(); /* (the picker's threads have written the state) */
  if (threadIdx.x == 0) {
    if (last) {
      __threadfence();
      atomicExch(&st->passed, p + 1);
    } else {
      while (*(volatile int *)&st->passed <= p) __nanosleep(100);
      __threadfence(); /* (the state's reads after the flag's) */
    }
  }
  __syncthreads();
}

/* Token t's blocks after the gather: each says it is done, and a block that ranks waits
 * for all of them (the others leave). */
__device__ void rsel_gathered(rsel_tok *st, bool wait) {
  __threadfence(); /* each thread's keys in sel before the block's arrival */
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(&st->gathered, 1);
    if (wait) {
      while (*(volatile int *)&st->gathered < (int)gridDim.x) __nanosleep(100);
      __threadfence(); /* (sel's reads after the count's) */
    }
  }
  __syncthreads();
}

/* The passes and the gather of token blockIdx.y; with `rank`, also the ranks (when
 * k_rsel_rank would follow: the step has few tokens), the selection staged in dynamic
 * shared memory [K], a block taking the RANK_KEYS-key pieces blockIdx.x, + gridDim.x, ...
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
  rsel_tok *st = &state[t];
  unsigned *hist = hists + (size_t)t * RSEL_BINS;
  int shift = 64;
  for (int p = 0; p < RSEL_PASSES; p++) {
    const int width = shift < RSEL_BITS ? shift : RSEL_BITS;
    shift -= width;
    const bool last = rsel_count(cap, K, shift, width, p == 0, keys, count, st, hist, h, t);
    rsel_meet(st, last, p);
    if (__ldcg(&st->done)) break; /* (the same in every block of the token) */
  }
  rsel_gather(cap, K, keys, count, st, sel, t);
  if (!rank) return;
  const int pieces = (K + RANK_KEYS - 1) / RANK_KEYS;
  rsel_gathered(st, (int)blockIdx.x < pieces);
  if ((int)blockIdx.x >= pieces) return;
  uint64_t *all = (uint64_t *)smem; /* [K] */
  const int n = rsel_stage_sel(K, st, sel, t, all);
  for (int piece = blockIdx.x; piece < pieces; piece += gridDim.x)
    rsel_rank_keys(all, n, K, piece * RANK_KEYS, t, part, out_pos, out_cand);
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
  const int *count = (const int *)scratch;
  rsel_tok *state = (rsel_tok *)((char *)scratch + rsel_count_bytes(n_tok));
  unsigned *hists = (unsigned *)(state + n_tok);
  uint64_t *sel = (uint64_t *)(hists + (size_t)n_tok * RSEL_BINS);
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
  if (c->topk_coop && n_tok <= c->num_sms) {
    /* at most one block an SM in all (the grid must be resident at once, and other
     * kernels, another rank's under MPS among them, may hold part of each SM) */
    const int64_t fit = c->num_sms / n_tok;
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
      sc_kcuda_launch(c, k_rsel_pass, grid, RSEL_THREADS, 0, cap, K, shift, width, p == 0, keys,
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
