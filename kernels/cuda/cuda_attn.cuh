/* cuda_attn.cuh - what the sparse attention kernels share (not a public header):
 * cuda_attn.cu (the split and wgmma kernels, and the op's choice between kernels),
 * cuda_attn_few.cu (the few-heads tensor-core kernel) and cuda_attn_ws.cu (bf16 rows,
 * warpgroups in roles).
 *
 * Split partials. A kernel that cuts a query's selected rows into fixed splits writes,
 * per (token of the chunk tl, head h, split s), at i = (tl * n_heads + h) * n_splits + s:
 * part_ml[i] = (m, l), the split's largest score (natural-log units, scale applied; -inf
 * when it has no row) and Σ exp(score - m), and part_o[i * dc ..] = Σ exp(score - m) v,
 * unnormalized. sc_kcuda_attn_merge combines a query's splits in split order. */
#ifndef SC_KERNELS_CUDA_ATTN_CUH
#define SC_KERNELS_CUDA_ATTN_CUH

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_wgmma.cuh"

#define SC_ATTN_SPLITS_MAX 64 /* a query's splits that sc_kcuda_attn_merge takes */
/* Partials of one token chunk take at most this much scratch. */
#define SC_ATTN_PART_SCRATCH ((size_t)128 << 20)

/* Scratch per token of the partials and how many tokens one chunk takes (>= 1, <= n_tok,
 * and a grid of chunk * blocks_per_token fits an int32). */
static inline int64_t sc_attn_part_chunk(const sc_attn_args *a, int n_splits,
                                         int64_t blocks_per_token, size_t *per_tok) {
  *per_tok = (size_t)a->n_heads * (size_t)(n_splits > 0 ? n_splits : 1) *
             (sizeof(float) * (size_t)a->dc + sizeof(float2));
  int64_t chunk = (int64_t)(SC_ATTN_PART_SCRATCH / *per_tok);
  chunk = chunk < 1 ? 1 : chunk > a->n_tok ? a->n_tok : chunk;
  if (chunk * blocks_per_token > INT32_MAX) chunk = INT32_MAX / blocks_per_token;
  return chunk;
}

/* Queues the merge of tokens t0 .. t0 + n - 1's split partials into a->out and a->lse. */
int sc_kcuda_attn_merge(sc_kcuda *c, const sc_attn_args *a, int n_splits, int64_t t0,
                        int64_t n, const float *part_o, const float2 *part_ml);

/* The few-heads kernel (cuda_attn_few.cu): bf16 rows, dc = 512, dr = 64, 16-byte aligned
 * rows, topk <= SC_KCUDA_TOPK_MAX; decode tokens in fixed splits of SC_ATTN_FEW_SPLIT
 * rows, prefill tokens whole. */
#define SC_ATTN_FEW_SPLIT 128
bool sc_kcuda_attn_few_takes(const sc_attn_args *a, int64_t kv_step);
int sc_kcuda_attn_few(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step);

/* Token t's q rows h0 .. h0 + 63 (f32, width 576) -> bf16 into q_s, 64 rows in the
 * 128-byte-swizzled K-major layout that wgmma reads (cuda_wgmma.cuh), by N threads of
 * which this is thread i0; heads past n_heads are zero rows whose output is dropped. A
 * warp step writes 8 rows x 4 float4 (conflict-free 8-byte stores). Each thread has
 * BATCH loads in flight before it converts any: one at a time (the loads could not pass
 * the shared-memory stores, which the compiler must assume alias q), each paid a global
 * load's whole latency, 36 of them a block before its first product. The caller fences
 * (fence_async_smem) and syncs before wgmma reads it. Shared by k_attn_wg and k_attn_ws. */
template <int N, int BATCH>
__device__ inline void sc_attn_load_q64(uint16_t *q_s, const sc_attn_args &a, int64_t t, int h0,
                                        int i0) {
  constexpr int ITER = 64 * (576 / 4) / N;
  static_assert(ITER * N == 64 * (576 / 4) && ITER % BATCH == 0, "whole batches a thread");
  const float *q = a.q + t * a.ld_q;
#pragma unroll 1
  for (int b = 0; b < ITER; b += BATCH) {
    float4 v[BATCH];
#pragma unroll
    for (int k = 0; k < BATCH; k++) {
      const int i = i0 + (b + k) * N, u = i >> 5, ln = i & 31;
      const int row = (u & 7) * 8 + (ln & 7), c4 = (u >> 3) * 4 + (ln >> 3);
      v[k] = h0 + row < a.n_heads ? *(const float4 *)(q + (int64_t)(h0 + row) * 576 + c4 * 4)
                                  : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int k = 0; k < BATCH; k++) {
      const int i = i0 + (b + k) * N, u = i >> 5, ln = i & 31;
      const int row = (u & 7) * 8 + (ln & 7), c4 = (u >> 3) * 4 + (ln >> 3);
      uint2 pk;
      pk.x = (uint32_t)sc_f32_to_bf16(v[k].x) | ((uint32_t)sc_f32_to_bf16(v[k].y) << 16);
      pk.y = (uint32_t)sc_f32_to_bf16(v[k].z) | ((uint32_t)sc_f32_to_bf16(v[k].w) << 16);
      *(uint2 *)((char *)q_s + wg_off<64>(row, c4 / 2) + (c4 % 2) * 8) = pk;
    }
  }
}

/* Rescales a thread's wgmma D fragment o (rows g and g + 8 of its warp: o[4 j], o[4 j + 1]
 * and o[4 j + 2], o[4 j + 3]) by al0 and al1: skipped by a warp whose rows all keep their
 * max (the running max moves only by more than 2^8, so most tiles rescale nothing). */
template <int N>
__device__ inline void sc_attn_rescale(float (&o)[N], float al0, float al1) {
  if (__any_sync(0xffffffffu, al0 != 1.0f || al1 != 1.0f)) {
#pragma unroll
    for (int j = 0; j < N / 4; j++) {
      o[4 * j] *= al0;
      o[4 * j + 1] *= al0;
      o[4 * j + 2] *= al1;
      o[4 * j + 3] *= al1;
    }
  }
}

/* Launches `kern` over a's tokens, a block of `threads` per token and group of 64 heads,
 * `smem` bytes of dynamic shared memory, in clusters of `cluster` blocks: the launch of
 * the 64-head kernels (k_attn_wg, k_attn_ws). */
inline int sc_attn_launch_groups(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step,
                                 void (*kern)(sc_attn_args, int64_t, int *), int threads,
                                 size_t smem, unsigned cluster, const char *what) {
  const int64_t blocks = (int64_t)a->n_tok * ((a->n_heads + 63) / 64);
  if (blocks > INT32_MAX) return SC_ERANGE;
  if (blocks == 0) return 0;
  int rc = sc_kcuda_err(
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
      "attn smem");
  if (rc) return rc;
  sc_kcuda_launch_cluster(c, cluster, kern, (unsigned)blocks, threads, smem, *a, kv_step,
                          c->err_flag);
  return SC_CUDA_CHECK_LAUNCH(what);
}

/* The kernel of warpgroups in roles (cuda_attn_ws.cu), for what the wgmma kernel takes
 * (sc_kcuda_sparse_attn's mma_ok: bf16 or fp8_ds_mla rows, dc = 512, dr = 64, rows and q
 * 16-byte aligned). */
int sc_kcuda_attn_ws(sc_kcuda *c, const sc_attn_args *a, int64_t kv_step);

#endif
