/* cuda_attn.cu - sparse MLA attention over selected KV rows (SPEC.md §7).
 *
 * Two kernels here; rows of the real model's shape, bf16 or fp8_ds_mla, take the
 * kernel of warpgroups in roles (cuda_attn_ws.cu: 1.4-1.7x this file's k_attn_wg in
 * one run, bench/kernels-cuda.md), and
 * models with few heads over bf16 rows cuda_attn_few.cu's (sc_kcuda_sparse_attn below
 * chooses):
 *  - k_attn_wg (with SPARSECP_ATTN_WS=0, the baseline of a comparison; dc = 512, dr = 64;
 *    sm_90a): one block per (token, group of 64 heads), 4 warpgroups. All heads of a
 *    token share the selected rows (MLA's latent KV), so a block streams the token's rows
 *    in tiles of 32 through shared memory (cp.async) and runs both products on wgmma: S =
 *    Q K^T (64 x 32, k = 576 split over the 4 warpgroups), an online softmax in f32 over
 *    S, then O += P V (64 x 512, each warpgroup 128 columns) with O in registers (64
 *    floats per thread). q is rounded to bf16 once when the block loads it. fp8 rows are
 *    staged raw and dequantized to bf16 in shared memory while the tensor cores run the S
 *    of the tile before. See the section comment below for the layout and the schedule.
 *  - k_attn_split + k_attn_merge (f32 KV, other widths, unaligned rows, and the decode
 *    tokens of few-heads models over fp8 rows): f32 on CUDA cores, each query's selected
 *    rows in fixed splits (128 rows; 32 up to a top-K of 256) scored and reduced in
 *    parallel, then merged with their log-sum-exp in split order (the merge also serves
 *    the few-heads kernel's decode splits). The precise path; also the fallback. See its
 *    section comment.
 * All keep the log-sum-exp in natural log: lse = ln Σ exp(s_j); no selected row gives
 * out 0 and lse -inf. Rows equal to -1 are skipped; other out-of-range rows raise
 * SC_ERANGE (reported at the next sync) and are skipped. */
#include <math.h>

#include "kernels/cuda/cuda_attn.cuh"
#include "kernels/cuda/cuda_wgmma.cuh"

/* ---- the split path: CUDA cores, each query's selected rows in fixed splits ----
 *
 * For what the tensor-core kernels do not take: f32 KV, other widths, and the decode
 * tokens of models with few heads over fp8 rows (the wgmma kernel would pad most of its
 * 64-row tiles; over bf16 rows they take cuda_attn_few.cu). A block takes one token, a group
 * of HB heads (8, or 2 when the launch would have few blocks) and one split of selected
 * rows; it streams the split in tiles of SPLIT_TILE rows through shared memory (converted
 * to f32 once), scores the tile in two stages (below), an online softmax per head (a warp
 * per head), then P V with each thread holding SPLIT_COLS latent columns of every head. It
 * writes the split's (max, sum, unnormalized output); k_attn_merge combines a query's
 * splits in split order.
 *
 * Why splits: a decode step has one token per request, and a token's 2048 rows in one
 * block ran on one SM for milliseconds (5.8 ms a layer at model-long's 8 heads, H200,
 * 2026-12-01). Why fixed: the split size depends on the top-K (split_rows; and on
 * whether the tokens are decode tokens, which no layout changes), so a query's result
 * (the order of every sum) depends on its own selected rows only, never on the batch or
 * the layout (SPEC.md §7-8; multi-rank runs stay token-identical). Long
 * batches are cut into token chunks only to bound the partials' scratch, which changes
 * no per-token sum. Nor does HB: a (head, row) score is summed in the same order in
 * every group shape (see the scores below), and every head's softmax and P V are its own.
 *
 * Why HB = 2 for few blocks: the default model's decode token (8 heads, 64 rows) was one
 * block of ~10k instructions a warp on one SM, 29 us a layer (ncu, H200, 2026-12-03:
 * bench/gpu-step.md); four groups of 2 heads and splits of 32 rows make it 8 blocks. */

#define SPLIT_TILE 32   /* = the warp size: a lane per row when scoring */
#define SPLIT_WARPS 8   /* = the score slices: warp w sums the elements x = w (mod 8) */
#define SPLIT_THREADS 256
#define SPLIT_DC_MAX 1024
#define SPLIT_COLS (SPLIT_DC_MAX / SPLIT_THREADS)
#define SPLIT_W_MAX 1280                     /* dc + dr: the shared tile must fit */
#define SPLIT_ROWS_MAX 128
#define SPLIT_SMALL_TOPK 256 /* up to this top-K a split is one tile */

#define SPLIT_DECODE_ROWS 64 /* a decode token's split (SC_ATTN_SPLITS_MAX at most) */

/* Rows a split takes: 128, or one tile when the top-K is small enough that 128 would
 * leave a token's rows to one or two blocks; a decode token's 64 (more where the top-K
 * would need more than SC_ATTN_SPLITS_MAX splits), since a decode step's few tokens are
 * a few blocks each: model-long's decode token over f32 rows took 28.5-28.7 us with 64
 * against 33.2-33.5 with 128 and 36.6-36.8 with 32 (the merge's share grows), H100,
 * 2026-12-06, bench/long-context.md. A function of the top-K and of whether the tokens
 * are decode tokens, which no layout changes (see above). */
static inline int split_rows(int32_t topk, bool decode) {
  if (topk <= SPLIT_SMALL_TOPK) return SPLIT_TILE;
  if (!decode) return SPLIT_ROWS_MAX;
  const int fit = (int)sc_cdiv(sc_cdiv(topk, SC_ATTN_SPLITS_MAX), SPLIT_TILE) * SPLIT_TILE;
  return fit > SPLIT_DECODE_ROWS ? fit : SPLIT_DECODE_ROWS;
}

static constexpr size_t split_smem(int64_t width, int hb) {
  return sizeof(float) * ((size_t)(SPLIT_TILE + hb) * (size_t)(width + 1) +
                          (size_t)(SPLIT_WARPS + 1) * hb * SPLIT_TILE + hb) +
         sizeof(int) * SPLIT_TILE;
}

static_assert(split_smem(SPLIT_W_MAX, 8) <= 227 * 1024,
              "the split tile exceeds sm_90's shared memory");

/* 4 bytes global -> shared, asynchronous; pred false writes 0 (src is still a valid
 * address). cp.async.wait_all before the data is read. */
__device__ inline void split_cp_async4(float *dst, const void *src, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(
                   (uint32_t)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(pred ? 4 : 0)
               : "memory");
}

template <int FMT, int HB>
__global__ void __launch_bounds__(SPLIT_THREADS)
    k_attn_split(sc_attn_args a, int n_splits, int rows_per_split, int64_t kv_step, int64_t t0,
                 float *part_o, float2 *part_ml, int *flag) {
  sc_dev_pdl_enter();
  static_assert(HB == 2 || HB == 4 || HB == 8, "a lane's (head pair, row group) layout");
  /* score stage 1: lane = (head pair, row group), HB / 2 pairs, RPL rows a lane */
  constexpr int PAIRS = HB / 2, RPL = SPLIT_TILE * PAIRS / 32;
  extern __shared__ float sm[];
  const int width = a.dc + a.dr, ws = width + 1; /* +1: lanes read rows without conflicts */
  float *kv_s = sm;                              /* [SPLIT_TILE][ws] */
  float *q_s = kv_s + SPLIT_TILE * ws;           /* [HB][ws] */
  float *red_s = q_s + HB * ws;                  /* [slice][HB][SPLIT_TILE] */
  float *p_s = red_s + SPLIT_WARPS * HB * SPLIT_TILE; /* [HB][SPLIT_TILE] */
  float *alpha_s = p_s + HB * SPLIT_TILE;        /* [HB] */
  int *row_s = (int *)(alpha_s + HB);            /* [SPLIT_TILE] */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int groups = (a.n_heads + HB - 1) / HB;
  const int64_t tl = blockIdx.x / ((int64_t)groups * n_splits); /* token within the chunk */
  const int g = (int)(blockIdx.x / n_splits % groups), s = (int)(blockIdx.x % n_splits);
  const int64_t t = t0 + tl;
  const int h0 = g * HB;
  const int nh = a.n_heads - h0 < HB ? a.n_heads - h0 : HB;
  /* q, all of it in flight at once (the tile's wait, or the one after the loop, ends it) */
  const float *qt = a.q + t * a.ld_q + (int64_t)h0 * width;
  for (int i = threadIdx.x; i < HB * width; i += SPLIT_THREADS) {
    const int hh = i / width, x = i - hh * width;
    split_cp_async4(q_s + hh * ws + x, hh < nh ? qt + i : a.q, hh < nh);
  }
  float m = -INFINITY, l = 0.0f; /* warp w's head (w < HB): running max and sum */
  float o[HB][SPLIT_COLS];
#pragma unroll
  for (int hh = 0; hh < HB; hh++)
#pragma unroll
    for (int c = 0; c < SPLIT_COLS; c++) o[hh][c] = 0.0f;
  const int32_t *sel = a.sel + t * a.ld_sel;
  const int jb = s * rows_per_split;
  const int j1 = jb + rows_per_split < a.topk ? jb + rows_per_split : a.topk;
  for (int jt = jb; jt < j1; jt += SPLIT_TILE) {
    int32_t mine = -1; /* this thread's row of the tile */
    if (threadIdx.x < SPLIT_TILE) {
      const int j = jt + (int)threadIdx.x;
      mine = j < j1 ? sel[j] : -1;
      if (mine != -1 && (mine < 0 || mine >= a.kv.rows)) {
        sc_dev_raise(flag, SC_ERANGE);
        mine = -1;
      }
      row_s[threadIdx.x] = mine;
    }
    /* A tile without a valid row is skipped: it would leave m, l and o unchanged to the
     * bit (alpha exactly 1, or 0 times a zero o; p 0). A decode token at a short context
     * selects fewer rows than top-K and its list ends in -1: model-deep's 16 splits of
     * 2048 slots at a 64-token context computed 32 times the rows there were. */
    if (!__syncthreads_or(mine >= 0)) continue;
    /* the tile, a warp per row: f32 rows go straight to shared memory (4-byte async
     * copies, all in flight at once; a skipped row is zero-filled by the copy); others are
     * converted on the way, several loads in flight per thread */
    for (int rr = warp; rr < SPLIT_TILE; rr += SPLIT_WARPS) {
      const int32_t r = row_s[rr];
      const char *row = (const char *)a.kv.data + (r >= 0 ? r : 0) * kv_step;
      float *dst = kv_s + rr * ws;
      if (FMT == SC_KFMT_F32) {
        for (int x = lane; x < width; x += 32) split_cp_async4(dst + x, row + 4 * x, r >= 0);
      } else {
#pragma unroll 4
        for (int x = lane; x < width; x += 32) dst[x] = r >= 0 ? sc_dev_load(row, FMT, x) : 0.0f;
      }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
    /* scores, in two stages so that each shared-memory load feeds more than one FMA:
     * warp w sums the elements x = w, w + 8, ... of 2 heads x RPL rows (lane: heads
     * 2 (lane % PAIRS) + {0, 1}, rows RPL (lane / PAIRS) + {0..RPL-1}), then warp = head,
     * lane = row adds the 8 slices in slice order: a fixed order, whatever the batch and
     * HB */
    {
      const int hp = 2 * (lane % PAIRS), r0 = RPL * (lane / PAIRS);
      const float *q0 = q_s + hp * ws, *k0 = kv_s + r0 * ws;
      float d[2][RPL];
#pragma unroll
      for (int i = 0; i < RPL; i++) d[0][i] = d[1][i] = 0.0f;
      for (int x = warp; x < width; x += SPLIT_WARPS) {
        const float qa = q0[x], qb = q0[ws + x];
#pragma unroll
        for (int i = 0; i < RPL; i++) {
          const float k = k0[i * ws + x];
          d[0][i] = fmaf(qa, k, d[0][i]);
          d[1][i] = fmaf(qb, k, d[1][i]);
        }
      }
#pragma unroll
      for (int j = 0; j < 2; j++)
#pragma unroll
        for (int i = 0; i < RPL; i++)
          red_s[(warp * HB + hp + j) * SPLIT_TILE + r0 + i] = d[j][i];
    }
    __syncthreads();
    if (warp < HB) {
      float sc = -INFINITY;
      if (warp < nh && row_s[lane] >= 0) {
        float dot = 0.0f;
#pragma unroll
        for (int xs = 0; xs < SPLIT_WARPS; xs++)
          dot += red_s[(xs * HB + warp) * SPLIT_TILE + lane];
        sc = dot * a.scale;
      }
      float mt = sc;
      for (int off = 16; off > 0; off >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
      const float m_new = fmaxf(m, mt);
      const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new); /* nothing kept yet: 0 */
      const float p = sc == -INFINITY ? 0.0f : expf(sc - m_new);
      float ps = p;
      for (int off = 16; off > 0; off >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, off);
      l = l * alpha + ps;
      m = m_new;
      p_s[warp * SPLIT_TILE + lane] = p;
      if (lane == 0) alpha_s[warp] = alpha;
    }
    __syncthreads();
    /* O = alpha O + P V: this thread's columns of every head */
#pragma unroll
    for (int hh = 0; hh < HB; hh++) {
      const float al = alpha_s[hh];
#pragma unroll
      for (int c = 0; c < SPLIT_COLS; c++) o[hh][c] *= al;
    }
    for (int rr = 0; rr < SPLIT_TILE; rr++) {
      if (row_s[rr] < 0) continue; /* (the same for every thread: no divergence) */
      float pv[HB];
#pragma unroll
      for (int hh = 0; hh < HB; hh++) pv[hh] = p_s[hh * SPLIT_TILE + rr];
#pragma unroll
      for (int c = 0; c < SPLIT_COLS; c++) {
        const int x = (int)threadIdx.x + SPLIT_THREADS * c;
        if (x < a.dc) {
          const float v = kv_s[rr * ws + x];
#pragma unroll
          for (int hh = 0; hh < HB; hh++) o[hh][c] = fmaf(pv[hh], v, o[hh][c]);
        }
      }
    }
    __syncthreads(); /* the next tile overwrites rows, p and alpha */
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory"); /* q, when every tile was skipped */
  const int64_t base = (tl * a.n_heads + h0) * n_splits + s;
#pragma unroll
  for (int hh = 0; hh < HB; hh++) {
    if (hh >= nh) break;
#pragma unroll
    for (int c = 0; c < SPLIT_COLS; c++) {
      const int x = (int)threadIdx.x + SPLIT_THREADS * c;
      if (x < a.dc) part_o[(base + (int64_t)hh * n_splits) * a.dc + x] = o[hh][c];
    }
  }
  if (warp < nh && lane == 0) part_ml[base + (int64_t)warp * n_splits] = make_float2(m, l);
}

/* One block per (token, head) of the chunk: the splits' partials in split order (their
 * weights exp(m_s - M) computed once, by one thread, in that order). */
#define SPLIT_MAX SC_ATTN_SPLITS_MAX /* (the merge's w_s array) */
static_assert(SC_KCUDA_TOPK_MAX / SPLIT_ROWS_MAX <= SPLIT_MAX &&
                  SPLIT_SMALL_TOPK / SPLIT_TILE <= SPLIT_MAX,
              "the largest top-K splits too finely");
__global__ void __launch_bounds__(128)
    k_attn_merge(sc_attn_args a, int n_splits, int64_t t0, const float *part_o,
                 const float2 *part_ml) {
  sc_dev_pdl_enter();
  __shared__ float w_s[SPLIT_MAX];
  __shared__ float inv_s;
  const int64_t tl = blockIdx.x / a.n_heads;
  const int h = (int)(blockIdx.x % a.n_heads);
  const int64_t t = t0 + tl, base = (tl * a.n_heads + h) * n_splits;
  if (threadIdx.x == 0) {
    float M = -INFINITY, L = 0.0f;
    for (int s = 0; s < n_splits; s++) M = fmaxf(M, part_ml[base + s].x);
    for (int s = 0; s < n_splits; s++) {
      const float2 ml = part_ml[base + s];
      w_s[s] = ml.x == -INFINITY ? 0.0f : expf(ml.x - M);
      L += ml.y * w_s[s];
    }
    inv_s = L > 0.0f ? 1.0f / L : 0.0f;
    a.lse[t * a.ld_lse + h] = L > 0.0f ? M + logf(L) : -INFINITY;
  }
  __syncthreads();
  const float *po = part_o + base * a.dc;
  for (int x = threadIdx.x; x < a.dc; x += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 8
    for (int s = 0; s < n_splits; s++) acc = fmaf(w_s[s], po[(int64_t)s * a.dc + x], acc);
    a.out[t * a.ld_out + (int64_t)h * a.dc + x] = acc * inv_s;
  }
}

int sc_kcuda_attn_merge(sc_kcuda *c, const sc_attn_args *a, int n_splits, int64_t t0,
                        int64_t n, const float *part_o, const float2 *part_ml) {
  /* (n_splits <= SPLIT_MAX: both callers assert it of the largest top-K) */
  sc_kcuda_launch(c, k_attn_merge, (unsigned)(n * a->n_heads), 128, 0, *a, n_splits, t0, part_o,
                  part_ml);
  return SC_CUDA_CHECK_LAUNCH("sparse_attn (merge)");
}

typedef void (*split_kernel)(sc_attn_args, int, int, int64_t, int64_t, float *, float2 *, int *);

template <int FMT>
static int launch_split(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step) {
  const int64_t width = (int64_t)a->dc + a->dr;
  const int rows = split_rows(a->topk, a->decode);
  const int n_splits = (int)sc_cdiv(a->topk, rows); /* 0 when topk is: out 0 */
  if (n_splits > SPLIT_MAX) return SC_ENOTSUP;
  /* two heads a block when groups of 8 would not give every SM a block (HB changes no
   * sum: see the section comment) */
  const int hb = a->n_tok * sc_cdiv(a->n_heads, 8) * (n_splits > 0 ? n_splits : 1) <
                         (int64_t)c->num_sms
                     ? 2
                     : 8;
  const int groups = (int)sc_cdiv(a->n_heads, hb);
  const split_kernel fn = hb == 2 ? k_attn_split<FMT, 2> : k_attn_split<FMT, 8>;
  size_t per_tok;
  const int64_t chunk =
      sc_attn_part_chunk(a, n_splits, (int64_t)groups * (n_splits > 0 ? n_splits : 1), &per_tok);
  char *scratch = (char *)sc_kcuda_scratch(c, per_tok * (size_t)chunk);
  if (scratch == NULL) return SC_ENOMEM;
  float2 *part_ml = (float2 *)scratch;
  float *part_o = (float *)(scratch + sizeof(float2) * (size_t)chunk * a->n_heads * n_splits);
  int rc = sc_kcuda_err(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)split_smem(SPLIT_W_MAX, 8)),
                        "attn smem");
  for (int64_t t0 = 0; t0 < a->n_tok && rc == 0; t0 += chunk) {
    const int64_t n = a->n_tok - t0 < chunk ? a->n_tok - t0 : chunk;
    if (n_splits > 0) {
      sc_kcuda_launch(c, fn, (unsigned)(n * groups * n_splits), SPLIT_THREADS,
                      split_smem(width, hb), *a, n_splits, rows, kv_step, t0, part_o, part_ml,
                      c->err_flag);
      if ((rc = SC_CUDA_CHECK_LAUNCH("sparse_attn (split)"))) break;
    }
    rc = sc_kcuda_attn_merge(c, a, n_splits, t0, n, part_o, part_ml);
  }
  return rc;
}

/* ---- the wgmma path (sm_90a): k_attn_wg ----
 *
 * One block per (token, 64 heads), 4 warpgroups (512 threads, <= 128 registers each),
 * tiles of 32 selected rows. Both products run on wgmma, which reads its B operand (and
 * here Q) straight from shared memory. The mma.sync kernel this replaces (2026-11-29,
 * 16 warps) was bound by shared-memory traffic and latency in the S phase: each warp
 * loaded 16 x 16 fragments of Q and K with ldmatrix for every k16 step (~295 KB of reads
 * per tile for 1.2 M MACs) and ran 18 dependent ldmatrix -> mma steps.
 *  - S = Q K^T: each warpgroup computes the whole 64 x 32 S over its quarter of the k16
 *    steps (wg, wg + 4, .., wg + 32: 9 wgmma m64n32k16 issued back to back, one wait)
 *    and stores it as a partial; the softmax sums the 4 partials.
 *  - online softmax: 8 threads per row; the running max moves only by more than 2^8, so
 *    most tiles need no rescaling of O (a warp skips it when all its alphas are 1).
 *  - O += P V: P (bf16, row-major) goes to registers with ldmatrix (wgmma's A from
 *    registers), V is the same K tile read as an N-major B; each warpgroup owns 128 of
 *    the 512 output columns (2 wgmma m64n128k16, O in 64 registers per thread).
 * Q and the KV tiles use the 128-byte-swizzled K-major layout (cuda_wgmma.cuh). The first
 * version kept wgmma's unswizzled "core matrix" layout and ran at 155 (bf16 decode)
 * TFLOP/s: wgmma's reads of it conflict on the banks; the swizzle gave 196.
 *
 * Schedule. bf16: a ring of 3 KV slots and two block barriers per tile: after the first,
 * tile t + 2 is queued (cp.async) and S of tile t + 1 is issued to run on the tensor
 * cores beside the softmax of tile t; after the second, P V of tile t, then a wait for
 * both and the store of the next S partial. fp8: rows arrive raw (656 bytes) in a
 * staging area two tiles ahead and are dequantized into the next tile's slot while the
 * tensor cores run S (three barriers per tile). Each thread loads the same row of every
 * tile and prefetches its row index a tile ahead (a global load on the way to the
 * cp.async had put its latency on every tile). Ordinary stores and cp.async write
 * through the generic proxy and wgmma reads through the async proxy, so every writer
 * fences (fence.proxy.async) before the barrier that publishes a tile. */
#define WG_BM 64
#define WG_BN 32
#define WG_D 576
#define WG_DC 512
#define WG_THREADS 512
#define WG_KSTEPS (WG_D / 16 / 4) /* k16 steps of S per warpgroup: 9 */
#define WG_SLD 36                  /* f32 stride of a partial S row: conflict-free float2 */
#define WG_PLD 40                  /* bf16 stride of P (80 bytes): conflict-free ldmatrix */

struct wg_smem {
  alignas(1024) uint16_t q[WG_BM * WG_D];
  /* bf16: a ring of 3 tiles (S of tile t + 1 runs beside the softmax of tile t while
   * tile t + 2 lands); fp8: 2 tiles, the third slot holds the raw rows (see wg_raw) */
  alignas(1024) uint16_t kv[3][WG_BN * WG_D];
  alignas(16) float s[4][WG_BM * WG_SLD]; /* partial S of each warpgroup's k quarter */
  alignas(16) uint16_t p[WG_BM * WG_PLD];
  float m[WG_BM], l[WG_BM], alpha[WG_BM];
  int valid[4][WG_BN]; /* per tile, tile % 4: tiles are queued two ahead of their softmax */
};
/* fp8 staging of 32 raw rows, row-major (20992 bytes), in the third kv slot */
__device__ inline uint8_t *wg_raw(wg_smem &sm) { return (uint8_t *)sm.kv[2]; }

#define wg_kv_off wg_off<WG_BN>

/* Queues tile `tile` (bf16: into kv slot tile % 3; fp8: its raw rows into the staging
 * area) and records which of its rows are valid (slot tile % 4). Each thread always
 * serves the same row of a tile, (warp % 4) * 8 + lane % 8, so it needs one index per
 * tile, `r` (prefetched a tile ahead into a register: loading it here, on the way to the
 * cp.async, had put a global load's latency on every tile's critical path). Per warp
 * step, 8 rows x 4 consecutive 16-byte parts: lanes 0-7 write 8 rows of one swizzle atom
 * (conflict-free), lanes i, i+8, i+16, i+24 read 64 contiguous bytes of row i. */
template <bool FP8>
__device__ inline void wg_load_tile(wg_smem &sm, const sc_attn_args &a, int32_t r, int tile,
                                    int64_t kv_step, int *flag) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = (warp & 3) * 8 + (lane & 7), p0 = (warp >> 2) * 4 + (lane >> 3);
  const bool ok = r >= 0 && r < a.kv.rows;
  if (p0 == 0) {
    sm.valid[tile & 3][row] = ok;
    if (!ok && r != -1) sc_dev_raise(flag, SC_ERANGE);
  }
  const char *src = (const char *)a.kv.data + (ok ? (int64_t)r * kv_step : 0);
  if (FP8) {
    for (int p = p0; p < SC_KFP8_DS_MLA_ROW_BYTES / 16; p += 16)
      cp_async16(wg_raw(sm) + row * SC_KFP8_DS_MLA_ROW_BYTES + p * 16, src + (ok ? p * 16 : 0), ok);
  } else {
    /* parts p0 + 16 k: the same swizzle phase, column block + 2 k */
    char *dst = (char *)sm.kv[tile % 3] + wg_kv_off(row, p0);
#pragma unroll
    for (int k = 0; k < 5; k++)
      if (p0 + 16 * k < WG_D / 8)
        cp_async16(dst + k * 2 * (WG_BN * 128), src + (ok ? (p0 + 16 * k) * 16 : 0), ok);
  }
  cp_async_commit();
}

/* this thread's row index of tile `tile` (-1 past top-K) */
__device__ inline int32_t wg_sel(const sc_attn_args &a, const int32_t *sel, int tile) {
  const int j = tile * WG_BN + ((threadIdx.x >> 5) & 3) * 8 + (threadIdx.x & 7);
  return j < a.topk ? sel[j] : -1;
}

/* fp8 staging -> bf16 tile in the swizzled layout (value = e4m3 * scale of its
 * 128-value tile); the same chunk order as the bf16 load (conflict-free stores). */
__device__ inline void wg_convert_fp8(wg_smem &sm, int st) {
  for (int c = threadIdx.x; c < WG_BN * (WG_D / 8); c += WG_THREADS) {
    const int u = c >> 5, ln = c & 31;
    const int row = (u & 3) * 8 + (ln & 7), part = (u >> 2) * 4 + (ln >> 3);
    const uint8_t *raw = wg_raw(sm) + row * SC_KFP8_DS_MLA_ROW_BYTES;
    uint4 *dst = (uint4 *)((char *)sm.kv[st] + wg_kv_off(row, part));
    if (part < 64) {
      const float scale = *(const float *)(raw + SC_KFP8_DS_MLA_SCALE_AT + 4 * (part / 16));
      *dst = e4m3x8_to_bf16x8(*(const uint2 *)(raw + part * 8), scale);
    } else {
      *dst = *(const uint4 *)(raw + SC_KFP8_DS_MLA_ROPE_AT + (part - 64) * 16);
    }
  }
}

/* Issues this warpgroup's S = Q K^T over its k16 steps wg, wg + 4, .., wg + 32 into s (64
 * x 32, the wgmma D fragment; overwritten: scale-d 0 on the first step), async: the
 * caller waits. Step 4 kk + wg is column block kk, bytes 32 wg into its rows, so the
 * descriptors are one base plus constants. */
__device__ inline void wg_issue_s(float (&s)[16], uint32_t q_base, uint32_t kv_base, int wg) {
  const uint64_t dq = wg_desc(q_base + wg * 32, 16, 1024);
  const uint64_t dk = wg_desc(kv_base + wg * 32, 16, 1024);
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < WG_KSTEPS; kk++)
    wgmma_m64n32(s, dq + (uint64_t)(kk * (WG_BM * 128) >> 4),
                 dk + (uint64_t)(kk * (WG_BN * 128) >> 4), kk > 0);
  wg_commit();
}

/* Stores this thread's part of its warpgroup's partial S (summed by the softmax). */
__device__ inline void wg_store_s(wg_smem &sm, const float (&s)[16], int wg, int wr, int g,
                                  int tq) {
  float *r0 = sm.s[wg] + (wr * 16 + g) * WG_SLD + 2 * tq;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    *(float2 *)(r0 + 8 * j) = make_float2(s[4 * j], s[4 * j + 1]);
    *(float2 *)(r0 + 8 * WG_SLD + 8 * j) = make_float2(s[4 * j + 2], s[4 * j + 3]);
  }
}

template <bool FP8>
__global__ void __launch_bounds__(WG_THREADS, 1)
    k_attn_wg(sc_attn_args a, int64_t kv_step, int *flag) {
  sc_dev_pdl_enter();
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  /* the swizzle atoms need 1024-byte alignment, which the dynamic base does not promise */
  wg_smem &sm = *(wg_smem *)(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int wg = warp >> 2, wr = warp & 3; /* warpgroup; its warp's 16-row block */
  const int groups = (a.n_heads + WG_BM - 1) / WG_BM;
  const int64_t t = blockIdx.x / groups;
  const int h0 = (int)(blockIdx.x % groups) * WG_BM;
  const int32_t *sel = a.sel + t * a.ld_sel;
  const int n_tiles = (a.topk + WG_BN - 1) / WG_BN;
  const float sl2 = a.scale * 1.4426950408889634f; /* scores in log2 units */
  /* descriptor strides (bytes). K-major (Q, K): SBO = next 8 rows (one atom); LBO is
   * unused (a k16 step stays inside a 128-byte row). N-major (V): LBO = next 64 columns
   * (column block), SBO = next 8 rows. */
  const uint32_t v_l = WG_BN * 128, v_s = 1024;

  if (n_tiles > 0) wg_load_tile<FP8>(sm, a, wg_sel(a, sel, 0), 0, kv_step, flag);
  int32_t r_next = wg_sel(a, sel, 1); /* this thread's row of the next tile to queue */
  static_assert(WG_BM == 64 && WG_D == 576, "sc_attn_load_q64's shape");
  sc_attn_load_q64<WG_THREADS, 1>(sm.q, a, t, h0, threadIdx.x); /* (9 or 18 at a time spilled) */
  if (threadIdx.x < WG_BM) {
    sm.m[threadIdx.x] = -INFINITY;
    sm.l[threadIdx.x] = 0.0f;
  }
  cp_async_wait_all();
  fence_async_smem();
  __syncthreads();
  if (FP8 && n_tiles > 0) { /* tile 0 converted, tile 1's raw rows in place (see below) */
    wg_convert_fp8(sm, 0);
    fence_async_smem();
    __syncthreads();
    if (n_tiles > 1) wg_load_tile<FP8>(sm, a, r_next, 1, kv_step, flag);
    r_next = wg_sel(a, sel, 2);
    cp_async_wait_all();
    __syncthreads();
  }

  /* O rows wr*16 + g (+8), columns wg*128 + 8j + 2tq (+1): the wgmma D fragment */
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; i++) o[i] = 0.0f;
  const uint32_t q_base = smem_u32(sm.q);
  float s[16]; /* S accumulators; bf16: S of the next tile, in flight beside the softmax */
#pragma unroll
  for (int i = 0; i < 16; i++) s[i] = 0.0f; /* defined once; each S starts with scale-d 0 */
  if (!FP8 && n_tiles > 0) { /* queue tile 1, then S of tile 0 */
    if (n_tiles > 1) wg_load_tile<FP8>(sm, a, r_next, 1, kv_step, flag);
    r_next = wg_sel(a, sel, 2);
    wg_issue_s(s, q_base, smem_u32(sm.kv[0]), wg);
    wg_wait0();
    wg_pin(s);
    wg_store_s(sm, s, wg, wr, g, tq);
  }

  for (int tile = 0; tile < n_tiles; tile++) {
    const int st = tile & 1; /* fp8's kv slot */
    const uint32_t kv_base = smem_u32(sm.kv[FP8 ? st : tile % 3]);
    if (FP8) {
      /* S of this tile; meanwhile dequantize the next tile (its raw rows landed before the
       * last barrier) into kv[st ^ 1] (last read by the previous tile's P V) */
      wg_issue_s(s, q_base, kv_base, wg);
      if (tile + 1 < n_tiles) wg_convert_fp8(sm, st ^ 1);
      wg_wait0();
      wg_pin(s);
      wg_store_s(sm, s, wg, wr, g, tq);
      fence_async_smem(); /* the converted tile is read by wgmma next tile */
      __syncthreads();
      /* the staging area is free again: queue the raw rows of tile + 2; they have this
       * softmax and P V to land (waited for at the end of the tile) */
      if (tile + 2 < n_tiles) {
        wg_load_tile<FP8>(sm, a, r_next, tile + 2, kv_step, flag);
        r_next = wg_sel(a, sel, tile + 3);
      }
    } else {
      /* this tile's partial S (stored at the end of the last tile) and the next tile's
       * rows are complete; every warpgroup is past the last P V, so its kv slot, P and
       * alpha are free */
      cp_async_wait_all();
      fence_async_smem();
      __syncthreads();
      if (tile + 2 < n_tiles) { /* into the slot the last P V read */
        wg_load_tile<FP8>(sm, a, r_next, tile + 2, kv_step, flag);
        r_next = wg_sel(a, sel, tile + 3);
      }
      /* S of the next tile runs on the tensor cores beside this tile's softmax */
      if (tile + 1 < n_tiles) wg_issue_s(s, q_base, smem_u32(sm.kv[(tile + 1) % 3]), wg);
    }

    /* online softmax: 8 threads per row, 4 columns each; scores in log2 units, invalid
     * rows -inf; P (bf16, row-major) */
    {
      const int row = threadIdx.x >> 3, part = threadIdx.x & 7;
      const int c0 = part * 4;
      float4 x = *(const float4 *)(sm.s[0] + row * WG_SLD + c0);
#pragma unroll
      for (int ks = 1; ks < 4; ks++) {
        const float4 y = *(const float4 *)(sm.s[ks] + row * WG_SLD + c0);
        x.x += y.x, x.y += y.y, x.z += y.z, x.w += y.w;
      }
      float v[4] = {x.x, x.y, x.z, x.w}, mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < 4; i++) {
        v[i] = sm.valid[tile & 3][c0 + i] ? v[i] * sl2 : -INFINITY;
        mx = fmaxf(mx, v[i]);
      }
#pragma unroll
      for (int off = 1; off < 8; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      /* the running max moves only when a score exceeds it by more than 2^8 (P <= 256,
       * exact in bf16's range; out = O / l and lse = m + log2 l hold for any m), so most
       * tiles keep alpha = 1 and P V skips rescaling O */
      const float m_old = sm.m[row];
      const float m_new = mx > m_old + 8.0f ? mx : m_old;
      float pr[4], sum = 0.0f;
#pragma unroll
      for (int i = 0; i < 4; i++) {
        pr[i] = m_new == -INFINITY ? 0.0f : exp2f(v[i] - m_new);
        sum += pr[i];
      }
      *(uint2 *)(sm.p + row * WG_PLD + c0) =
          make_uint2(pack_bf16x2(pr[0], pr[1]), pack_bf16x2(pr[2], pr[3]));
#pragma unroll
      for (int off = 1; off < 8; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      __syncwarp();
      if (part == 0) {
        const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m_old - m_new);
        sm.alpha[row] = alpha;
        sm.l[row] = sm.l[row] * alpha + sum;
        sm.m[row] = m_new;
      }
    }
    __syncthreads();

    /* O = O * alpha + P V: this warpgroup's 128 columns, k = 32 in two steps */
    {
      sc_attn_rescale(o, sm.alpha[wr * 16 + g], sm.alpha[wr * 16 + g + 8]);
      /* P (A) from registers: this warp's 16 rows, the mma.sync A fragment layout */
      uint32_t pa[WG_BN / 16][4];
#pragma unroll
      for (int ks = 0; ks < WG_BN / 16; ks++)
        ldsm_x4(pa[ks], sm.p + (wr * 16 + (lane & 15)) * WG_PLD + ks * 16 + (lane >> 4) * 8);
      wg_pin(o);
      wg_fence();
      /* V: rows 16 ks.. (atoms 2 ks, 2 ks + 1), columns wg * 128.. (column blocks 2 wg,
       * 2 wg + 1) */
      const uint64_t dv = wg_desc(kv_base + 2 * wg * (WG_BN * 128), v_l, v_s);
#pragma unroll
      for (int ks = 0; ks < WG_BN / 16; ks++)
        wgmma_m64n128_rs(o, pa[ks], dv + (uint64_t)(2 * ks * 1024 >> 4));
      wg_commit();
      wg_wait0(); /* bf16: also the next tile's S */
      wg_pin(o);
    }
    if (FP8) {
      cp_async_wait_all(); /* the raw rows of tile + 2 */
      __syncthreads();
    } else if (tile + 1 < n_tiles) {
      wg_pin(s);
      wg_store_s(sm, s, wg, wr, g, tq); /* every thread read this tile's S before P V */
    }
  }

  /* out = O / l; lse = (m + log2 l) ln 2 */
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int row = wr * 16 + g + half * 8;
    const int h = h0 + row;
    if (h >= a.n_heads) continue;
    const float l = sm.l[row];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float *out = a.out + t * a.ld_out + (int64_t)h * WG_DC + wg * 128 + 2 * tq;
#pragma unroll
    for (int j = 0; j < 16; j++)
      *(float2 *)(out + 8 * j) =
          make_float2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
  }
  if (threadIdx.x < WG_BM && h0 + (int)threadIdx.x < a.n_heads) {
    const float l = sm.l[threadIdx.x];
    a.lse[t * a.ld_lse + h0 + threadIdx.x] =
        l > 0.0f ? (sm.m[threadIdx.x] + log2f(l)) * 0.6931471805599453f : -INFINITY;
  }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int sc_kcuda_sparse_attn(sc_kernels *k, const sc_attn_args *a) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_attn(a));
  const int64_t width = (int64_t)a->dc + a->dr;
  const int64_t kv_step = sc_krows_stride(&a->kv);
  const bool fp8 = a->kv.fmt == SC_KFMT_FP8_DS_MLA;
  /* Models with few heads (at most 16 over all TP ranks) take the few-heads kernel over
   * bf16 and fp8_ds_mla rows (cuda_attn_few.cu: the heads as mma's N, no padding), and
   * the split kernel for their decode tokens over f32 rows: the wgmma kernel computes 64
   * head rows a block and runs a token's rows through one block, so 8 heads (model-long)
   * cost 166 us a layer for a decode token, where the split kernel spreads them over 16
   * blocks (60 us over f32 rows; H200, 2026-12-02, bench/long-context.md). The choice
   * goes by the model's heads, not this rank's: under TP a 64-head model has 16 a rank at
   * T = 4, and its tokens must take the kernel they take at T = 1. f32 rows stay on the
   * split kernel, the precise path. */
  const int32_t model_heads = a->model_heads > 0 ? a->model_heads : a->n_heads;
  const bool few_heads = model_heads * 4 <= WG_BM;
  if (few_heads && sc_kcuda_attn_few_takes(a, kv_step)) return sc_kcuda_attn_few(c, a, kv_step);
  const bool few_heads_decode = a->decode && few_heads;
  const bool mma_ok = !few_heads_decode && a->kv.fmt != SC_KFMT_F32 && a->dc == WG_DC &&
                      a->dr == WG_D - WG_DC && aligned16(a->kv.data) && kv_step % 16 == 0 &&
                      aligned16(a->q) && (a->n_tok == 1 || a->ld_q % 4 == 0) &&
                      ((uintptr_t)a->out & 7) == 0 &&
                      (a->n_tok == 1 || a->ld_out % 2 == 0);
  /* (the warpgroup-role kernels take the max of raw scores and scale it: scale > 0) */
  if (mma_ok && c->attn_ws && a->scale > 0.0f) return sc_kcuda_attn_ws(c, a, kv_step);
  if (mma_ok) /* (+ 1024: alignment of the swizzle atoms) */
    return sc_attn_launch_groups(c, a, kv_step, fp8 ? k_attn_wg<true> : k_attn_wg<false>,
                                 WG_THREADS, sizeof(wg_smem) + 1024, 1, "sparse_attn (wgmma)");
  if (a->dc > SPLIT_DC_MAX || width > SPLIT_W_MAX) return SC_ENOTSUP;
  if (a->n_tok == 0) return 0;
  /* (one constant shared-memory limit per kernel: the attribute is process-wide, see
   * cuda_topk.cu) */
  return a->kv.fmt == SC_KFMT_F32    ? launch_split<SC_KFMT_F32>(c, a, kv_step)
         : a->kv.fmt == SC_KFMT_BF16 ? launch_split<SC_KFMT_BF16>(c, a, kv_step)
                                     : launch_split<SC_KFMT_FP8_DS_MLA>(c, a, kv_step);
}
