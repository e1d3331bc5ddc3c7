/* cuda_select.cuh - block-wide selection of the K largest 64-bit top-K keys
 * (cuda_common.cuh's sc_dev_topk_key order) and the writing of a selection in position
 * order, shared by the indexer's scoring kernel and the top-K merge (not a public
 * header).
 *
 * The block helpers are called by every thread of the block with the same n (the cuts
 * at the end, by one warp or a team of warps: see there), and loop over [0, n) in steps
 * of the block so that the lanes of a warp stay together: they aggregate
 * their shared-memory atomics per warp. Scores cluster (the top bytes of most keys
 * agree), and one atomic per key on the same bin or counter serialized whole warps (a
 * decode token's merge of 32 lists took 0.24 ms a layer, H200, 2026-12-01). */
#ifndef SC_KERNELS_CUDA_SELECT_CUH
#define SC_KERNELS_CUDA_SELECT_CUH

#include "kernels/cuda/cuda_common.cuh"

/* Shared control words after the 256 histogram bins. */
enum { SH_BIN = 256, SH_NEED, SH_EQ, SH_CNT, SH_CNT2, SH_WORDS };

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

/* block_keep_topk (below) when the caller knows that nvalid of buf[0..n) are nonzero. */
__device__ inline int block_keep_topk_counted(uint64_t *buf, int n, int nvalid, int K,
                                              uint64_t *tmp, int *sh) {
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

/* Keeps the min(K, nonzero) largest keys of buf[0..n) in buf[0..result) (any order).
 * tmp holds at least K keys; sh at least SH_WORDS ints. All threads call it. */
__device__ inline int block_keep_topk(uint64_t *buf, int n, int K, uint64_t *tmp, int *sh) {
  return block_keep_topk_counted(buf, n, block_count_nonzero(buf, n, sh), K, tmp, sh);
}

/* ---- a token's selection written in position order ----
 *
 * Every CUDA top-K output (indexer_topk, topk_merge) lists a token's selected keys by
 * ascending position, padding (-1) last. SPEC.md §7-8 fix the selected set, not an
 * order, and any order that is a function of the set alone keeps every layout's lists
 * the same (kernels.h); the CPU reference lists by score. Position order needs no sort:
 * a key's slot is the number of selected positions below its own, read off a bitmap of
 * the token's positions with a prefix count over its words. The bitonic sort by score it
 * replaces was 2.0 of a 32k prompt's 10.2 ms indexer a layer (k_topk_final, H100,
 * 2026-12-06, bench/long-context.md); the rows also reach the attention in the order
 * the KV cache holds them.
 *
 * Positions are taken in windows of POS_WINDOW (one pass for contexts up to 32k, four
 * at 128k), so any position a 32-bit int holds works. */
#define POS_WORDS 1024
#define POS_WINDOW (32 * POS_WORDS)
/* the writer's static shared memory (its callers' budgets count it) */
#define POS_SMEM (sizeof(uint32_t) * POS_WORDS + sizeof(int) * (POS_WORDS + 32 + 2))

/* Writes the nonzero keys of buf[0..n) (shared memory, at most K of them, distinct
 * positions; zero keys are padding) as out_pos[0..K) and/or out_cand[0..K) (either NULL)
 * by ascending position, the rest padded as (-inf, -1). All threads of the block call
 * it; blockDim.x is a power of two from 32 to POS_WORDS. */
__device__ inline void block_write_by_position(const uint64_t *buf, int n, int K,
                                               int32_t *out_pos, sc_kcand *out_cand) {
  __shared__ uint32_t bits[POS_WORDS]; /* the window's positions */
  __shared__ int below[POS_WORDS];     /* selected positions before each word */
  __shared__ int warp_sum[32];
  __shared__ int range[2];             /* the token's lowest and highest position */
  const int tid = (int)threadIdx.x, nthr = (int)blockDim.x, lane = tid & 31;
  const int warp = tid >> 5, warps = nthr >> 5, per = POS_WORDS / nthr;
  if (tid == 0) range[0] = INT32_MAX, range[1] = -1;
  __syncthreads();
  int lo = INT32_MAX, hi = -1;
  for (int i = tid; i < n; i += nthr)
    if (buf[i] != 0) {
      const int32_t p = sc_dev_topk_pos(buf[i]);
      lo = p < lo ? p : lo;
      hi = p > hi ? p : hi;
    }
  for (int off = 16; off > 0; off >>= 1) {
    const int l = __shfl_xor_sync(0xffffffffu, lo, off);
    const int h = __shfl_xor_sync(0xffffffffu, hi, off);
    lo = l < lo ? l : lo;
    hi = h > hi ? h : hi;
  }
  if (lane == 0 && hi >= 0) atomicMin(&range[0], lo), atomicMax(&range[1], hi);
  __syncthreads();
  lo = range[0], hi = range[1];
  int written = 0;
  /* (no key at all: hi is -1 and no window runs) */
  for (int64_t w0 = (int64_t)lo / POS_WINDOW * POS_WINDOW; w0 <= hi; w0 += POS_WINDOW) {
    for (int w = tid; w < POS_WORDS; w += nthr) bits[w] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += nthr) {
      const int64_t d = buf[i] != 0 ? sc_dev_topk_pos(buf[i]) - w0 : -1;
      if (d >= 0 && d < POS_WINDOW) atomicOr(&bits[d >> 5], 1u << (d & 31));
    }
    __syncthreads();
    /* the prefix count: each thread sums its `per` words, the block scans the sums */
    int mine = 0;
    for (int j = 0; j < per; j++) mine += __popc(bits[tid * per + j]);
    int incl = mine;
    for (int off = 1; off < 32; off <<= 1) {
      const int o = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += o;
    }
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();
    int before = written + incl - mine, total = 0;
    for (int v = 0; v < warps; v++) {
      const int s = warp_sum[v];
      before += v < warp ? s : 0;
      total += s;
    }
    for (int j = 0; j < per; j++) {
      below[tid * per + j] = before;
      before += __popc(bits[tid * per + j]);
    }
    __syncthreads();
    for (int i = tid; i < n; i += nthr) {
      const int64_t d = buf[i] != 0 ? sc_dev_topk_pos(buf[i]) - w0 : -1;
      if (d < 0 || d >= POS_WINDOW) continue;
      const int slot = below[d >> 5] + __popc(bits[d >> 5] & ((1u << (d & 31)) - 1u));
      const sc_kcand c = sc_dev_topk_cand(buf[i]);
      if (out_pos) out_pos[slot] = c.pos;
      if (out_cand) out_cand[slot] = c;
    }
    written += total;
    __syncthreads(); /* (every thread has read the window before the next one clears it) */
  }
  for (int i = written + tid; i < K; i += nthr) {
    if (out_pos) out_pos[i] = -1;
    if (out_cand) out_cand[i] = sc_dev_topk_cand(0);
  }
}

/* ---- cuts of a candidate list in global memory, by one warp or a team of warps ----
 *
 * The indexer's scoring blocks keep each token's candidates in global memory and let a
 * warp cut one token's list while the other warps cut others' (a block-wide select of
 * one token at a time, over candidates in shared memory, held a 32k prompt's blocks
 * idle for most of their time and left room for 4 tokens a block: bench/long-context.md).
 * At the end of a work item, when the block has fewer tokens than warps, the warps
 * split into teams, one list a team. */

#define WARP_CUT_UNROLL 8 /* loads in flight per lane: the lists live in L2 or DRAM */

/* Entries i0 + 32u + lane of buf[0..n) (0 past the end): one batch of the loads in flight. */
__device__ inline void warp_load_batch(const uint64_t *buf, int n, int i0, int lane,
                                       uint64_t (&v)[WARP_CUT_UNROLL]) {
#pragma unroll
  for (int u = 0; u < WARP_CUT_UNROLL; u++) {
    const int i = i0 + u * 32 + lane;
    v[u] = i < n ? buf[i] : 0;
  }
}

/* The largest key of buf[0..n) (0 if none), to every lane of the warp. */
__device__ inline uint64_t warp_max_key(const uint64_t *buf, int n) {
  const int lane = threadIdx.x & 31;
  uint64_t m = 0;
  for (int i0 = 0; i0 < n; i0 += 32 * WARP_CUT_UNROLL) {
    uint64_t v[WARP_CUT_UNROLL];
    warp_load_batch(buf, n, i0, lane, v);
#pragma unroll
    for (int u = 0; u < WARP_CUT_UNROLL; u++) m = v[u] > m ? v[u] : m;
  }
  for (int off = 16; off > 0; off >>= 1) {
    const uint64_t o = __shfl_xor_sync(0xffffffffu, m, off);
    m = o > m ? o : m;
  }
  return m;
}

/* The warps that cut one list together: w consecutive warps (w a power of two, at most
 * 8), this one the idx-th, meeting at named barrier `bar` (1 + the team's index: 0 is
 * __syncthreads'); a team of one meets at __syncwarp. Each warp takes the batches idx,
 * idx + w, .. of the list. */
typedef struct cut_team {
  int w, idx, bar;
} cut_team;

__device__ inline void team_sync(const cut_team &tm) {
  if (tm.w == 1) __syncwarp();
  else asm volatile("bar.sync %0, %1;\n" ::"r"(tm.bar), "r"(tm.w * 32) : "memory");
}

/* The edge of a cut of the distinct nonzero keys buf[0..n) (every one >= lo, none above
 * top; top 0: not known): a key that the K largest reach and such that at most keep_max
 * keys (K <= keep_max) reach it, or failing that (fewer than K keys in range: broken
 * input) lo. The team's warps call it with the same arguments; hist is 256 ints of
 * shared memory of the team's own.
 *
 * A radix select whose 256 bins span [lo, hi], the range still in question, so that a
 * pass resolves 8 bits of the range rather than 8 bits of the key: the top-K of a list
 * share most of their high bits, and the first pass usually ends it with keep_max a few
 * hundred above K. With keep_max == K it narrows until the K-th key is a bin of its own
 * (at most 8 passes). Every warp of the team adds its batches to the one histogram, then
 * reads it whole and takes the same decision. */
__device__ inline uint64_t team_cut_edge(const uint64_t *buf, int n, int K, int keep_max,
                                         int *hist, uint64_t lo, uint64_t top,
                                         const cut_team &tm) {
  const int lane = threadIdx.x & 31;
  uint64_t hi = top ? top : warp_max_key(buf, n), edge = lo;
  int need = K, above = 0; /* above: keys over hi, kept whatever the edge */
  for (;;) {
    const uint64_t span = hi - lo;
    const int shift = (span >> 8) == 0 ? 0 : 56 - __clzll((long long)span); /* span >> shift < 256 */
    for (int b = tm.idx * 32 + lane; b < 256; b += tm.w * 32) hist[b] = 0;
    team_sync(tm);
    for (int i0 = tm.idx * 32 * WARP_CUT_UNROLL; i0 < n; i0 += tm.w * 32 * WARP_CUT_UNROLL) {
      uint64_t v[WARP_CUT_UNROLL];
      warp_load_batch(buf, n, i0, lane, v);
#pragma unroll
      for (int u = 0; u < WARP_CUT_UNROLL; u++) {
        const bool in = v[u] != 0 && v[u] >= lo && v[u] <= hi;
        /* one shared atomic a key: the bins span the range still in question, so a
         * warp's keys seldom share one, and a match of the lanes of each bin first (the
         * largest stall of a 32k prompt's full pass, 9% of its samples) cost more than
         * the contention it saved: without it the 64-head prompt's indexer is 10-13%
         * faster, the 4-head 32k prompt's 8.5-9% (H100, 2026-12-06, bench/long-context.md).
         * The radix selects over whole digits (k_rsel_pass, block_keep_topk_counted),
         * whose keys crowd a few bins, keep the match. */
        if (in) atomicAdd(&hist[(int)((v[u] - lo) >> shift)], 1);
      }
    }
    team_sync(tm);
    /* the bin holding the need-th largest key of the range: lane l owns bins 8l..8l+7 */
    int s = 0;
    for (int b = 0; b < 8; b++) s += hist[lane * 8 + b];
    int suf = s; /* keys in the bins of lanes >= this one */
    for (int off = 1; off < 32; off <<= 1) {
      const int o = __shfl_down_sync(0xffffffffu, suf, off);
      if (lane + off < 32) suf += o;
    }
    int running = suf - s, found = -1, higher = 0, here = 0;
    for (int b = lane * 8 + 7; b >= lane * 8; b--) {
      const int c = hist[b];
      if (running < need && running + c >= need) found = b, higher = running, here = c;
      running += c;
    }
    const unsigned who = __ballot_sync(0xffffffffu, found >= 0);
    team_sync(tm); /* every lane has read hist before the next pass clears it */
    if (who == 0) break; /* fewer than need keys in range: broken input; keep all from lo */
    const int src = __ffs(who) - 1;
    found = __shfl_sync(0xffffffffu, found, src);
    higher = __shfl_sync(0xffffffffu, higher, src);
    here = __shfl_sync(0xffffffffu, here, src);
    edge = lo + ((uint64_t)found << shift);
    if (above + higher + here <= keep_max || shift == 0) break;
    above += higher, need -= higher; /* narrow to the bin */
    lo = edge;
    const uint64_t width = ((uint64_t)1 << shift) - 1;
    hi = hi - lo > width ? lo + width : hi;
  }
  return edge;
}

/* Keeps, of the distinct nonzero keys buf[0..n) (every one >= *floor, none above top;
 * top 0: not known), a set that holds their K largest and at most keep_max keys
 * (K <= keep_max), compacted to the front of buf in their order; raises *floor to a key
 * that every kept key reaches and no dropped key does, and returns how many were kept
 * (n when n <= keep_max: nothing to do). Duplicate keys (the callers' keys are
 * distinct: positions are) could keep more than keep_max; callers bound their writes by
 * their buffers anyway. All lanes of one warp call it; hist is 256 ints of shared memory
 * of this warp's own. */
__device__ inline int warp_cut_topk(uint64_t *buf, int n, int K, int keep_max, int *hist,
                                    uint64_t *floor, uint64_t top) {
  if (n <= keep_max) return n;
  const int lane = threadIdx.x & 31;
  const cut_team one = {1, 0, 0};
  const uint64_t edge = team_cut_edge(buf, n, K, keep_max, hist, *floor, top, one);
  int kept = 0; /* in place: a lane writes at or before what it read */
  for (int i0 = 0; i0 < n; i0 += 32 * WARP_CUT_UNROLL) {
    uint64_t v[WARP_CUT_UNROLL];
    warp_load_batch(buf, n, i0, lane, v);
#pragma unroll
    for (int u = 0; u < WARP_CUT_UNROLL; u++) {
      const bool keep = v[u] != 0 && v[u] >= edge;
      const unsigned b = __ballot_sync(0xffffffffu, keep);
      if (keep) buf[kept + __popc(b & ((1u << lane) - 1u))] = v[u];
      kept += __popc(b);
    }
  }
  __syncwarp();
  if (lane == 0) *floor = edge;
  __syncwarp();
  return kept;
}

/* The K largest of the distinct nonzero keys buf[0..n) (every one >= floor, none above
 * top; top 0: not known; all of them when there are K or fewer), written to dst at
 * slots taken from *counter (shared or global memory), those below `limit` (duplicate
 * keys, which the callers' contract excludes, could take more than K). The keys land in
 * no particular order: the callers sort or select them next. The team's warps call it
 * with the same arguments; hist as team_cut_edge's. A cut by one warp while the block's
 * other warps waited at the next barrier took a third of the 64-head indexer's time
 * (ncu, H200, 2026-12-04: bench/long-context.md). */
__device__ inline void team_emit_topk(const uint64_t *buf, int n, int K, int *hist,
                                      uint64_t floor, uint64_t top, const cut_team &tm,
                                      int *counter, uint64_t *dst, int limit) {
  const int lane = threadIdx.x & 31;
  const uint64_t edge = n <= K ? floor : team_cut_edge(buf, n, K, K, hist, floor, top, tm);
  for (int i0 = tm.idx * 32 * WARP_CUT_UNROLL; i0 < n; i0 += tm.w * 32 * WARP_CUT_UNROLL) {
    uint64_t v[WARP_CUT_UNROLL];
    warp_load_batch(buf, n, i0, lane, v);
#pragma unroll
    for (int u = 0; u < WARP_CUT_UNROLL; u++) {
      const bool keep = v[u] != 0 && v[u] >= edge;
      const int slot = warp_take_slot(counter, keep);
      if (keep && slot < limit) dst[slot] = v[u];
    }
  }
}

/* The K largest of the distinct nonzero keys buf[0..n) (K < n <= the stage's room), in
 * descending order at dst[0..K): a key's slot is the count of larger keys, each thread
 * ranking its keys against all n staged in shared memory (`stage`, the team's own; the
 * reads are broadcasts). For a short list this beats team_emit_topk's radix passes,
 * which with keep_max == K narrow until the K-th key has a bin of its own: up to eight
 * passes of three barriers and a read of the list each (a decode token of the default
 * model, K = 64 over a 64-128-token context: the indexer's one block took 16-17 us,
 * ncu, H200, 2026-12-04: bench/gpu-step.md). The team's warps call it alike. */
__device__ inline void team_rank_topk(const uint64_t *buf, int n, int K, uint64_t *stage,
                                      const cut_team &tm, uint64_t *dst) {
  const int first = tm.idx * 32 + (threadIdx.x & 31), step = tm.w * 32;
  for (int i = first; i < n; i += step) stage[i] = buf[i];
  team_sync(tm);
  for (int i = first; i < n; i += step) {
    const uint64_t v = stage[i];
    int r = 0;
    for (int j = 0; j < n; j++) r += stage[j] > v;
    if (r < K) dst[r] = v;
  }
  team_sync(tm); /* the stage is the team's histogram again after this */
}

#endif
