/* cuda_indexer_fused.cu - the lightning indexer's scoring and its top-K in one
 * cooperative launch, for steps of few tokens over long key ranges (a decode token at
 * a 32k-256k context) with few index heads over rows of 64 values: model-long's and the
 * default model's indexer (4 heads x 64).
 *
 * Why: such a token's op was three kernels, k_idx_tc scoring 256 chunks of 512 keys and
 * appending every key to the token's list in global memory, then the radix select
 * (k_rsel_coop: two passes and a gather over that list, each pass a count, a ticket,
 * the last block's pick and a meet), its ranks; under ncu 17 + 22 + 6 us for one token
 * over 131072 bf16 keys (H100, 2026-12-07), the scoring at a third of the HBM rate: an
 * item of four tiles in two stages paid about four load latencies in a row, and its
 * copy of its survivors to the token's list and an atomic that 256 blocks shared. Here a
 * block takes one chunk of a token's keys (at most FU_LIST), its tiles through a ring of
 * stages (fu_stages: every tile of a 128k decode token's chunk in flight at once),
 * scores them as k_idx_tc's few-heads tile does (tc_score_few, the same instructions on
 * the same tile layout: the same sums, bit for bit) into a list in its shared memory,
 * every visible key (threshold 1: a chunk holds far fewer than K), and then takes part
 * in the token's radix select over the keys it holds (cuda_rsel.cuh's
 * rsel_coop_token: the passes, the gather and the ranks, as k_rsel_coop runs them over a
 * list in global memory). No list in global memory, no kernel boundary, no key read
 * twice from L2. Measured (H100, 2026-12-07, kernel.indexer): one decode token over
 * 131072 bf16 keys 38.3-38.6 -> 36.9-37.0 us, over 32768 31.0 -> 27.6-27.7; far
 * less than the ~20 us the three kernels' ncu times promised, but model-long's 128k TPOT
 * fell 0.357-0.375 -> 0.344-0.345 ms (bench/long-context.md, session 52). Where its
 * time went (ncu, session 53): a quarter of the stall samples at the barrier that ended
 * a select pass's meet (the last block's pick, published behind a flag), the scoring's
 * costliest lines 7.6%, DRAM at 13% of peak: the select's serialized chain a pass, not
 * bytes. Since every block picks each pass's bin itself (rsel_pass_coop, session 54):
 * 37.2-37.3 -> 31.2-31.4 us over 131072 bf16 keys, 27.6-28.1 -> 22.2-22.4 over 32768.
 *
 * Layout invariance: each pair's score is k_idx_tc's, the selection is exact (keys are
 * distinct), so the picks are the unfused path's whatever the chunks (test_gpu_kernels'
 * invariance cases compare them with SPARSECP_TOPK_COOP=0, which takes that path).
 *
 * The grid: one block an SM over the step's tokens, of this rank's share of the SMs
 * (coop_sms: a cooperative grid must be resident at once, and a block's shared memory
 * leaves room for no other, so ranks sharing the GPU under MPS each take a share: with
 * grids of every SM, run --verify of two ranks over ipc under MPS timed out in its
 * collectives; with shares it gave single rank's tokens, H100, session 52), a token's
 * range split evenly over its blocks; a step whose bound of a token's keys (max_keys)
 * needs chunks of more than FU_LIST keys takes the unfused path (cuda_indexer.cu decides;
 * SPARSECP_INDEXER_FUSED=0: never), and a range longer than the blocks hold, which only a
 * bound shorter than the ranges lets through, is SC_EINVAL (kernels.h's max_keys). */
#include "kernels/cuda/cuda_indexer_few.cuh"
#include "kernels/cuda/cuda_rsel.cuh"

#define FU_DIMP 64     /* rows of up to 64 values (tc_few_fits) */
#define FU_LIST 4096   /* keys a block scores at most: its list in shared memory (32 KB;
                          the forward pass's bound of a 128k context's keys is 262144,
                          its block table's width in powers of two, 1986 keys a block on
                          132 SMs, 4096 on 64) */
#define FU_Q_ROWS 16   /* q's rows: one m-tile, hp < 16 */

static_assert(TC_THREADS == RSEL_THREADS, "a block both scores and selects");

/* Key stages: eight 128-key tiles of bf16 rows in flight, or four of f32 rows (the same
 * 147,456 bytes; one block an SM leaves room): a 128k decode token's chunk (eight tiles of
 * bf16 rows on 132 SMs) is queued at once, one load latency where the scoring kernel paid
 * about one a tile. */
__host__ __device__ constexpr int fu_stages(int fmt) { return fmt == SC_KFMT_F32 ? 4 : 8; }
__host__ __device__ constexpr size_t fu_stage_bytes(int fmt) {
  return (size_t)TC_KEYS * (FU_DIMP + TC_PAD) * (fmt == SC_KFMT_F32 ? 4 : 2);
}

/* Dynamic shared memory, byte offsets (each part a multiple of 16 bytes): key stages
 * [stages][TC_KEYS rows] (after the scoring: the ranks' staged selection, K keys), q bf16
 * [FU_Q_ROWS][FU_DIMP + TC_PAD], w f32 [FU_Q_ROWS], per key of each stage: row byte
 * offset int64, position int, token mask uint32 [stages][TC_KEYS], the block's keys
 * uint64 [FU_LIST]. */
typedef struct fu_layout {
  size_t q, w, koff, kpos, kmask, list, total;
} fu_layout;

__host__ __device__ constexpr fu_layout fu_lay(int fmt) {
  const size_t S = (size_t)fu_stages(fmt), q = S * fu_stage_bytes(fmt);
  const size_t w = q + 2 * FU_Q_ROWS * (FU_DIMP + TC_PAD), koff = w + 4 * FU_Q_ROWS;
  const size_t kpos = koff + 8 * S * TC_KEYS, kmask = kpos + 4 * S * TC_KEYS;
  const size_t list = kmask + 4 * S * TC_KEYS;
  return fu_layout{q, w, koff, kpos, kmask, list, list + 8 * FU_LIST};
}
static_assert(fu_stages(SC_KFMT_BF16) * fu_stage_bytes(SC_KFMT_BF16) >=
                      sizeof(uint64_t) * SC_KCUDA_TOPK_MAX &&
                  fu_stages(SC_KFMT_F32) * fu_stage_bytes(SC_KFMT_F32) >=
                      sizeof(uint64_t) * SC_KCUDA_TOPK_MAX,
              "the ranks stage a token's K keys where the key stages were");
static_assert(fu_lay(SC_KFMT_BF16).total <= SC_KCUDA_SMEM_MAX &&
                  fu_lay(SC_KFMT_F32).total <= SC_KCUDA_SMEM_MAX,
              "k_idx_fused's shared memory");

/* cp.async.wait_group N for the ring's N = stages - 1 (an immediate). */
template <int N> __device__ inline void fu_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Token blockIdx.y's chunk blockIdx.x of gridDim.x: scored into the block's list, then
 * the token's select (hp: the token's head rows, tc_rows_per_token; state, hists, sel:
 * the radix select's scratch, cleared before). */
template <int FMT>
__global__ void __launch_bounds__(TC_THREADS)
    k_idx_fused(sc_indexer_args a, int hp, rsel_tok *state, unsigned *hists, uint64_t *sel,
                int *flag) {
  sc_dev_pdl_enter();
  constexpr int S = fu_stages(FMT), LD = FU_DIMP + TC_PAD, ES = FMT == SC_KFMT_F32 ? 4 : 2;
  constexpr size_t STAGE = fu_stage_bytes(FMT);
  constexpr fu_layout L = fu_lay(FMT);
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char *k_s = smem;
  uint16_t *q_s = (uint16_t *)(smem + L.q);
  float *w_s = (float *)(smem + L.w);
  int64_t *koff_s = (int64_t *)(smem + L.koff);
  int *kpos_s = (int *)(smem + L.kpos);
  unsigned *kmask_s = (unsigned *)(smem + L.kmask);
  uint64_t *list = (uint64_t *)(smem + L.list);
  __shared__ unsigned long long thr[1];
  __shared__ unsigned top[1];
  __shared__ int fill[1], tb[1], te[1], tq[1];
  __shared__ unsigned h[RSEL_BINS];
  __shared__ int part[RSEL_THREADS / 32][RANK_KEYS];
  const int64_t t = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t kstep = a.keys.ld * ES;

  tc_stage_q<FU_DIMP, false, false, false>(a, t, 1, hp, FU_Q_ROWS, q_s, w_s, (float *)NULL);
  if (threadIdx.x == 0) {
    tb[0] = a.key_begin[t];
    te[0] = a.key_end[t];
    tq[0] = a.q_pos[t];
    fill[0] = 0;
    thr[0] = 1; /* every real key is 1 or more: all of the chunk's visible keys */
    top[0] = 0;
  }
  __syncthreads();
  const int64_t len = te[0] > tb[0] ? (int64_t)te[0] - tb[0] : 0;
  const int64_t seg = (len + gridDim.x - 1) / gridDim.x;
  const int64_t s0 = tb[0] + (int64_t)blockIdx.x * seg;
  const int64_t s1 = s0 + seg < te[0] ? s0 + seg : te[0];
  int n_tiles = s1 > s0 ? (int)((s1 - s0 + TC_KEYS - 1) / TC_KEYS) : 0;
  if (seg > FU_LIST) { /* (a range past what the blocks hold: a bound shorter than it) */
    if (threadIdx.x == 0) sc_dev_raise(flag, SC_EINVAL);
    n_tiles = 0;
  }
  const tc_tokens tk = {tb, te, tq, 1, true};

  /* the ring: tiles 0 .. S-1 queued at once (their list entries read first, together),
   * then tile i + S into tile i's stage once i is scored; one commit group a tile (an
   * empty one past the last), so tile i is in when at most S - 1 groups are pending */
  unsigned vis = 0; /* bit s: some key of stage s's tile is visible (block-uniform) */
  tc_entry xs[S];
#pragma unroll
  for (int i = 0; i < S; i++) xs[i] = tc_fetch(a, s0 + (int64_t)i * TC_KEYS, s1, 1);
#pragma unroll
  for (int i = 0; i < S; i++) {
    if (i < n_tiles) {
      const bool v = tc_load_tile<FU_DIMP, FMT, true, false>(
          a, tk, s0 + (int64_t)i * TC_KEYS, xs[i], kstep, k_s + i * STAGE, kpos_s + i * TC_KEYS,
          kmask_s + i * TC_KEYS, koff_s + i * TC_KEYS, (float *)NULL, flag);
      vis |= (unsigned)v << i;
    }
    cp_async_commit();
  }
  for (int tile = 0; tile < n_tiles; tile++) {
    const int st = tile % S;
    const int64_t next = s0 + (int64_t)(tile + S) * TC_KEYS;
    const tc_entry x_next = tc_fetch(a, next, s1, 1); /* (used after the scoring) */
    fu_wait_group<S - 1>();
    __syncthreads(); /* publishes the tile */
    if ((vis >> st) & 1u) {
      const int col = st * TC_KEYS + warp * TC_KW + (lane >> 2); /* keys g and g + 8 */
      const tc_lane_keys kk = {{kmask_s[col], kmask_s[col + 8]},
                               {kpos_s[col], kpos_s[col + 8]},
                               {1.0f, 1.0f}};
      tc_score_few<FU_DIMP, FMT>(hp, k_s + st * STAGE + (size_t)(warp * TC_KW) * LD * ES, q_s,
                                 w_s, 1, kk, thr, top, true, fill, list, FU_LIST, flag, lane);
    }
    __syncthreads(); /* the stage is free */
    if (tile + S < n_tiles) {
      const bool v = tc_load_tile<FU_DIMP, FMT, true, false>(
          a, tk, next, x_next, kstep, k_s + st * STAGE, kpos_s + st * TC_KEYS,
          kmask_s + st * TC_KEYS, koff_s + st * TC_KEYS, (float *)NULL, flag);
      vis = (vis & ~(1u << st)) | (unsigned)v << st;
    }
    cp_async_commit();
  }
  cp_async_wait_all();
  __syncthreads(); /* the list is complete, the key stages free */
  const int n = fill[0] < FU_LIST ? fill[0] : FU_LIST;
  rsel_coop_token(rsel_share_local{list, n}, a.topk, &state[t], hists, h, sel, t, true,
                  (uint64_t *)k_s, part, a.out_pos, a.out_cand);
}

extern "C" int sc_kcuda_indexer_fused(sc_kcuda *c, const sc_indexer_args *a, int hp) {
  const bool f32 = a->keys.fmt == SC_KFMT_F32;
  if ((!f32 && a->keys.fmt != SC_KFMT_BF16) || a->max_keys <= 0 || a->n_tok <= 0 ||
      a->n_tok > 65535 || a->topk > SC_KCUDA_TOPK_MAX || !c->topk_coop)
    return SC_ENOTSUP;
  /* blocks a token: one an SM over the step's tokens, whatever the bound (so that a
   * bound that is not one, shorter than the ranges, still fits where the ranges do: it
   * shapes the launch only, as on the unfused path), if that holds the bound's keys in
   * chunks of at most FU_LIST */
  const int64_t per = c->coop_sms / a->n_tok;
  if (per < 1 || sc_cdiv(a->max_keys, per) > FU_LIST) return SC_ENOTSUP;
  void (*fn)(sc_indexer_args, int, rsel_tok *, unsigned *, uint64_t *, int *) =
      f32 ? k_idx_fused<SC_KFMT_F32> : k_idx_fused<SC_KFMT_BF16>;
  const size_t smem = f32 ? fu_lay(SC_KFMT_F32).total : fu_lay(SC_KFMT_BF16).total;
  int rc = sc_kcuda_err(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem),
                        "fused indexer smem");
  if (rc) return rc;
  char *scratch = (char *)sc_kcuda_scratch(c, sc_kcuda_topk_radix_bytes(a->n_tok, a->topk));
  if (scratch == NULL) return SC_ENOMEM;
  int *count; /* (unused: the keys stay in the blocks) */
  if ((rc = sc_kcuda_topk_radix_begin(c, a->n_tok, scratch, &count))) return rc;
  const rsel_scratch rs = rsel_scratch_at(scratch, a->n_tok);
  const dim3 grid((unsigned)per, (unsigned)a->n_tok);
  return sc_kcuda_err(sc_kcuda_launch_coop(c, fn, grid, TC_THREADS, smem, *a, hp, rs.state,
                                           rs.hists, rs.sel, c->err_flag),
                      "fused indexer");
}
