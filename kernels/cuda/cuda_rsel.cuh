/* cuda_rsel.cuh - the radix select's device parts (cuda_topk_radix.cu says how it
 * selects), shared by its launches there and by the fused decode indexer
 * (cuda_indexer_fused.cu), which selects from keys its blocks hold in shared memory:
 * the state and scratch layout, a pass's counting and pick, the gather, the meets of a
 * cooperative launch and the ranks. Not a public header. */
#ifndef SC_KERNELS_CUDA_RSEL_CUH
#define SC_KERNELS_CUDA_RSEL_CUH

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
  int ticket;   /* a launch a pass: blocks of the current pass that have finished;
                   k_rsel_coop: blocks' arrivals over all passes so far */
  int taken;    /* gather: keys written so far */
  int gathered; /* k_rsel_coop: blocks done with the gather */
} rsel_tok;

/* Scratch layout: count int [n_tok] (padded to 16 bytes), rsel_tok [n_tok], hist uint32
 * [n_tok][RSEL_PASSES][RSEL_BINS] (a histogram a pass: none is cleared for the next, so
 * that in a cooperative launch every block reads a pass's bins while others already
 * count the next), sel uint64 [n_tok][K]. The first three start zeroed (one memset). */
static inline size_t rsel_count_bytes(int n_tok) { return 16 * (size_t)sc_cdiv(4 * (int64_t)n_tok, 16); }

static inline size_t rsel_state_bytes(int n_tok) {
  return rsel_count_bytes(n_tok) +
         (sizeof(rsel_tok) + sizeof(unsigned) * RSEL_PASSES * RSEL_BINS) * (size_t)n_tok;
}

/* The parts of a select's scratch (the layout above). */
typedef struct rsel_scratch {
  int *count;
  rsel_tok *state;
  unsigned *hists;
  uint64_t *sel;
} rsel_scratch;

static inline rsel_scratch rsel_scratch_at(void *scratch, int n_tok) {
  rsel_scratch r;
  r.count = (int *)scratch;
  r.state = (rsel_tok *)((char *)scratch + rsel_count_bytes(n_tok));
  r.hists = (unsigned *)(r.state + n_tok);
  r.sel = (uint64_t *)(r.hists + (size_t)n_tok * RSEL_PASSES * RSEL_BINS);
  return r;
}

/* Token t's histogram of pass p. */
__host__ __device__ inline unsigned *rsel_hist(unsigned *hists, int64_t t, int p) {
  return hists + ((size_t)t * RSEL_PASSES + (size_t)p) * RSEL_BINS;
}

/* How far a token's select is, as a pick leaves it (the fields of rsel_tok's). */
typedef struct rsel_prog {
  unsigned long long prefix, mask;
  int need, done;
} rsel_prog;

/* The bin of the K-th largest key among those still matching, from a pass's histogram h
 * (shared [RSEL_BINS], read by all): extends *pg (shared, block-uniform before and after)
 * by it. Every thread of the block calls it. */
__device__ inline void rsel_find(const unsigned *h, int K, int shift, int width, bool first,
                                 rsel_prog *pg) {
  __shared__ int part[RSEL_THREADS / 32];
  __shared__ int total_s;
  int need = pg->need; /* (read by all before the one thread that finds the bin writes) */
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
        pg->need = need;
        pg->done = 1;
      }
      __syncthreads();
      return;
    }
  }
  const int lo = (int)threadIdx.x * per; /* (signed: b goes below 0 in thread 0) */
  for (int b = lo + per - 1; b >= lo; b--) {
    const int c = (int)h[b];
    if (above < need && above + c >= need) {
      pg->prefix |= (unsigned long long)b << shift;
      pg->mask |= ((1ull << width) - 1ull) << shift;
      pg->need = need - above;
      pg->done = c == need - above || shift == 0;
    }
    above += c;
  }
  __syncthreads();
}

/* The last block of a pass in a launch a pass: the pick from the token's histogram of
 * the pass (hist), into its state. h: shared [RSEL_BINS]. */
__device__ inline void rsel_pick(rsel_tok *st, const unsigned *hist, unsigned *h, int K,
                                 int shift, int width, bool first) {
  __shared__ rsel_prog pg;
  if (threadIdx.x == 0) pg = rsel_prog{st->prefix, st->mask, st->need, 0};
  for (int b = threadIdx.x; b < RSEL_BINS; b += RSEL_THREADS) h[b] = __ldcg(&hist[b]);
  __syncthreads();
  rsel_find(h, K, shift, width, first, &pg);
  if (threadIdx.x == 0) {
    st->prefix = pg.prefix;
    st->mask = pg.mask;
    st->need = pg.need;
    st->done = pg.done;
    st->ticket = 0;
  }
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

/* A block's share of a token's keys, as the counting and the gather walk them: `each(f)`
 * calls f(key) for every key of the share, whole warps at a time (0 for a lane past the
 * end), so that a warp's collectives in f see every lane. rsel_share_global: a grid's
 * share of a token's list in global memory (cuda_topk_radix.cu); rsel_share_local: a
 * block's own keys in shared memory (cuda_indexer_fused.cu). */
struct rsel_share_global {
  const uint64_t *kt; /* the token's list */
  int n;
  template <typename F> __device__ void operator()(F f) const { rsel_each_key(kt, n, f); }
};

struct rsel_share_local {
  const uint64_t *keys; /* shared */
  int n;
  template <typename F> __device__ void operator()(F f) const {
    for (int i0 = 0; i0 < n; i0 += RSEL_THREADS) {
      const int i = i0 + (int)threadIdx.x;
      f(i < n ? keys[i] : (uint64_t)0);
    }
  }
};

/* This block's share (`each`) of a pass of a token: the digit at shift (width bits) of
 * every key that matches the prefix, counted in h (shared [RSEL_BINS]) and added to the
 * pass's histogram (hist); the bins are visible device-wide when it returns. */
template <typename Each>
__device__ inline void rsel_count(Each each, unsigned long long prefix, unsigned long long mask,
                                  int shift, int width, unsigned *hist, unsigned *h) {
  for (int b = threadIdx.x; b < RSEL_BINS; b += RSEL_THREADS) h[b] = 0;
  __syncthreads();
  each([&](uint64_t key) { /* equal bins counted once a warp */
    const bool in = key != 0 && (key & mask) == prefix;
    const int bin = in ? (int)((key >> shift) & ((1u << width) - 1u)) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, bin);
    if (in && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&h[bin], __popc(peers));
  });
  __syncthreads();
  for (int b = threadIdx.x; b < RSEL_BINS; b += RSEL_THREADS)
    if (h[b]) atomicAdd(&hist[b], h[b]);
  __threadfence(); /* the bins before whatever tells other blocks this one is done */
  __syncthreads();
}

/* A pass in a launch of its own (k_rsel_pass): the count, then the last block of the
 * pass to finish (a ticket) picks the bin into the token's state (rsel_pick). */
template <typename Each>
__device__ inline void rsel_pass_launch(Each each, int K, int shift, int width, bool first,
                                        rsel_tok *st, unsigned *hist, unsigned *h) {
  __shared__ bool last;
  rsel_count(each, st->prefix, st->mask, shift, width, hist, h);
  if (threadIdx.x == 0) last = atomicAdd(&st->ticket, 1) == (int)gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence(); /* every block's bins after its ticket */
  rsel_pick(st, hist, h, K, shift, width, first);
}

/* Pass p in a cooperative launch: the count, then every block of the token waits for
 * the others' arrivals (st->ticket counts them over all passes: p + 1 passes' worth) and
 * picks the bin itself from the same bins into *pg (shared). Every block reaches the
 * same pick, so no block waits for another's: a pick by the last block, published in the
 * state behind a flag, cost the others a second wait a pass (a write, a fence, the flag,
 * then the state's read). */
template <typename Each>
__device__ inline void rsel_pass_coop(Each each, int K, int shift, int width, int p,
                                      rsel_tok *st, unsigned *hist, unsigned *h,
                                      rsel_prog *pg) {
  rsel_count(each, pg->prefix, pg->mask, shift, width, hist, h);
  if (threadIdx.x == 0) {
    const int all = (p + 1) * (int)gridDim.x;
    if (atomicAdd(&st->ticket, 1) + 1 < all)
      while (*(volatile int *)&st->ticket < all) __nanosleep(100);
    __threadfence(); /* (the bins' reads after the count's) */
  }
  __syncthreads();
  for (int b = threadIdx.x; b < RSEL_BINS; b += RSEL_THREADS) h[b] = __ldcg(&hist[b]);
  __syncthreads();
  rsel_find(h, K, shift, width, p == 0, pg);
}

/* Every key of this block's share at or above the prefix, into sel[t][0 .. min(K,
 * count)) (taken: the token's count of keys written). */
template <typename Each>
__device__ inline void rsel_gather(Each each, int K, unsigned long long prefix,
                                   unsigned long long mask, int *taken, uint64_t *sel,
                                   int64_t t) {
  each([&](uint64_t key) {
    const int slot = warp_take_slot(taken, key != 0 && (key & mask) >= prefix);
    if (slot >= 0 && slot < K) sel[t * K + slot] = key;
  });
}
/* Ranks, the step after the gather when a step has few tokens: RANK_KEYS keys of token
 * t's selection `all` (n of them, in shared memory), from `first`: the slot of a key is
 * the count of the token's keys at lower positions (positions are distinct, so the slots
 * are those of k_rsel_write's order). Each warp counts over its eighth of the keys, the
 * warps' counts are added in a fixed order. Slots from the token's key count to K get
 * none, as k_rsel_write writes them. part: shared [RSEL_THREADS / 32][RANK_KEYS]. */
__device__ inline void rsel_rank_keys(const uint64_t *all, int n, int K, int first, int64_t t,
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
__device__ inline int rsel_stage_sel(int K, const rsel_tok *st, const uint64_t *sel, int64_t t,
                              uint64_t *all) {
  const int taken = __ldcg(&st->taken), n = taken < K ? taken : K;
  for (int i = threadIdx.x; i < n; i += RSEL_THREADS) all[i] = __ldcg(&sel[t * K + i]);
  __syncthreads();
  return n;
}

/* Token t's blocks after the gather: each says it is done, and a block that ranks waits
 * for all of them (the others leave). */
__device__ inline void rsel_gathered(rsel_tok *st, bool wait) {
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

/* The whole select of token t in a cooperative launch, its blocks (gridDim.x of them,
 * blockIdx.y = t) each over its share (`each`): every pass (rsel_pass_coop: each block
 * picks), the gather and, with `rank`, the ranks (a meet after the gather, then the
 * RANK_KEYS-key pieces blockIdx.x, + gridDim.x, ..., the selection staged in `all`,
 * shared [K]). hists: the scratch's (rsel_hist); h: shared [RSEL_BINS]; part: shared,
 * rsel_rank_keys'. */
template <typename Each>
__device__ inline void rsel_coop_token(Each each, int K, rsel_tok *st, unsigned *hists,
                                       unsigned *h, uint64_t *sel, int64_t t, bool rank,
                                       uint64_t *all, int (*part)[RANK_KEYS],
                                       int32_t *out_pos, sc_kcand *out_cand) {
  __shared__ rsel_prog pg;
  if (threadIdx.x == 0) pg = rsel_prog{0, 0, 0, 0};
  __syncthreads();
  int shift = 64;
  for (int p = 0; p < RSEL_PASSES; p++) {
    const int width = shift < RSEL_BITS ? shift : RSEL_BITS;
    shift -= width;
    rsel_pass_coop(each, K, shift, width, p, st, rsel_hist(hists, t, p), h, &pg);
    if (pg.done) break; /* (the same in every block of the token) */
  }
  rsel_gather(each, K, pg.prefix, pg.mask, &st->taken, sel, t);
  if (!rank) return;
  const int pieces = (K + RANK_KEYS - 1) / RANK_KEYS;
  rsel_gathered(st, (int)blockIdx.x < pieces);
  if ((int)blockIdx.x >= pieces) return;
  const int n = rsel_stage_sel(K, st, sel, t, all);
  for (int piece = blockIdx.x; piece < pieces; piece += gridDim.x)
    rsel_rank_keys(all, n, K, piece * RANK_KEYS, t, part, out_pos, out_cand);
}

#endif
