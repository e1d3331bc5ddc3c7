/* cuda_rows.cu - row movement: gather with format conversion (the workspace deinterleave,
 * shard packing, embedding lookup), KV write by slot mapping (f32, bf16 and the
 * fp8_ds_mla quantization), the maps from top-K positions to workspace rows and to local
 * KV slots, and each row's greedy token (argmax_rows: a thread block cluster a row). One
 * warp per row; a row whose bytes, base and strides are 16-byte aligned and needs no
 * conversion moves as 16-byte vectors (the deinterleave case, which is a pure bandwidth
 * problem). Bad indices raise SC_ERANGE through the error flag. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/fp8_e4m3.h"
#include "plan/dcp.h"

#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define ROWS_PER_BLOCK 8

/* dst row i = src row idx[i], same format, `words` units of T per row. */
template <typename T>
__global__ void k_gather_same(int64_t n, int64_t words, const char *src, int64_t src_step,
                              int64_t src_rows, const int32_t *idx, char *dst,
                              int64_t dst_step, int *flag) {
  sc_dev_pdl_enter();
  const int64_t i = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (i >= n) return;
  T *d = (T *)(dst + i * dst_step);
  const int64_t r = idx ? idx[i] : i;
  if (r == -1) {
    for (int64_t w = lane; w < words; w += 32) d[w] = T{};
    return;
  }
  if (r < 0 || r >= src_rows) {
    if (lane == 0) sc_dev_raise(flag, SC_ERANGE);
    return;
  }
  const T *s = (const T *)(src + r * src_step);
  /* up to four independent loads in flight per lane before the first store, the last
   * batch of a row too (predicated): a 1408-byte row (the deinterleave's 704 bf16) is 88
   * 16-byte words, under one unpredicated batch of 128, and its three words a lane went
   * load, store, load, store: 86% of the copy rate (H200, 2026-12-03) */
  for (int64_t w = lane; w < words; w += 128) {
    T v[4];
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (w + 32 * u < words) v[u] = s[w + 32 * u];
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (w + 32 * u < words) d[w + 32 * u] = v[u];
  }
}

/* Converting gather: dst f32 or bf16 from f32, bf16 or fp8_ds_mla. */
__global__ void k_gather_conv(int64_t n, int64_t width, const char *src, int sfmt,
                              int64_t src_step, int64_t src_rows, const int32_t *idx, char *dst,
                              int dfmt, int64_t dst_step, int *flag) {
  sc_dev_pdl_enter();
  const int64_t i = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (i >= n) return;
  char *d = dst + i * dst_step;
  const int64_t r = idx ? idx[i] : i;
  if (r != -1 && (r < 0 || r >= src_rows)) {
    if (lane == 0) sc_dev_raise(flag, SC_ERANGE);
    return;
  }
  const char *s = r == -1 ? NULL : src + r * src_step;
  for (int64_t x = lane; x < width; x += 32) {
    const float v = s ? sc_dev_load(s, sfmt, x) : 0.0f;
    if (dfmt == SC_KFMT_F32) ((float *)d)[x] = v;
    else ((uint16_t *)d)[x] = sc_f32_to_bf16(v);
  }
}

static bool aligned(const void *p, int64_t a) { return ((uintptr_t)p % (uintptr_t)a) == 0; }

extern "C" int sc_kcuda_gather_rows(sc_kernels *k, int64_t n, int64_t width, sc_krows src,
                                    const int32_t *idx, sc_krows dst) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_gather_rows(n, width, &src, &dst));
  const int64_t ss = sc_krows_stride(&src), ds = sc_krows_stride(&dst);
  const unsigned grid = (unsigned)sc_cdiv(n, ROWS_PER_BLOCK);
  if (src.fmt == dst.fmt) {
    const int64_t bytes = sc_kfmt_row_bytes(src.fmt, width);
    const int64_t a = (bytes % 16 == 0 && ss % 16 == 0 && ds % 16 == 0 &&
                       aligned(src.data, 16) && aligned(dst.data, 16))  ? 16
                      : (bytes % 4 == 0 && ss % 4 == 0 && ds % 4 == 0 &&
                         aligned(src.data, 4) && aligned(dst.data, 4)) ? 4
                      : (bytes % 2 == 0 && ss % 2 == 0 && ds % 2 == 0)  ? 2
                                                                        : 1;
    const char *sp = (const char *)src.data;
    char *dp = (char *)dst.data;
    if (a == 16)
      sc_kcuda_launch(c, k_gather_same<uint4>, grid, 256, 0, n, bytes / 16, sp, ss, src.rows, idx,
                      dp, ds, c->err_flag);
    else if (a == 4)
      sc_kcuda_launch(c, k_gather_same<uint32_t>, grid, 256, 0, n, bytes / 4, sp, ss, src.rows, idx,
                      dp, ds, c->err_flag);
    else if (a == 2)
      sc_kcuda_launch(c, k_gather_same<uint16_t>, grid, 256, 0, n, bytes / 2, sp, ss, src.rows, idx,
                      dp, ds, c->err_flag);
    else
      sc_kcuda_launch(c, k_gather_same<uint8_t>, grid, 256, 0, n, bytes, sp, ss, src.rows, idx, dp,
                      ds, c->err_flag);
    return SC_CUDA_CHECK_LAUNCH("gather_rows");
  }
  sc_kcuda_launch(c, k_gather_conv, grid, 256, 0, n, width, (const char *)src.data, src.fmt, ss,
                  src.rows, idx, (char *)dst.data, dst.fmt, ds, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("gather_rows");
}

/* ---- KV write ---- */

__global__ void k_kv_write(int64_t n, int64_t width, const float *src, int64_t ld_src,
                           const int32_t *slots, char *cache, int fmt, int64_t step,
                           int64_t rows, bool vec4, int *flag) {
  sc_dev_pdl_enter();
  const int64_t i = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (i >= n) return;
  const int64_t s = slots[i];
  if (s == -1) return;
  if (s < 0 || s >= rows) {
    if (lane == 0) sc_dev_raise(flag, SC_ERANGE);
    return;
  }
  const float *x = src + i * ld_src;
  char *d = cache + s * step;
  if (vec4) { /* 16-byte loads; 16-byte (f32) or 8-byte (bf16) stores */
    const float4 *x4 = (const float4 *)x;
    for (int64_t e = lane; e < width / 4; e += 32) {
      const float4 v = x4[e];
      if (fmt == SC_KFMT_F32) {
        ((float4 *)d)[e] = v;
      } else {
        uint2 w;
        w.x = (uint32_t)sc_f32_to_bf16(v.x) | ((uint32_t)sc_f32_to_bf16(v.y) << 16);
        w.y = (uint32_t)sc_f32_to_bf16(v.z) | ((uint32_t)sc_f32_to_bf16(v.w) << 16);
        ((uint2 *)d)[e] = w;
      }
    }
  } else if (fmt == SC_KFMT_F32) {
    for (int64_t e = lane; e < width; e += 32) ((float *)d)[e] = x[e];
  } else if (fmt == SC_KFMT_BF16) {
    for (int64_t e = lane; e < width; e += 32) ((uint16_t *)d)[e] = sc_f32_to_bf16(x[e]);
  } else if (fmt == SC_KFMT_FP8_INDEX) {
    /* sc_kfp8_index_quantize's row, its amax reduced over the warp (a maximum: the order
     * does not matter, NaN is left out by fmaxf as by the host's comparison) */
    float amax = 0.0f;
    for (int64_t e = lane; e < width; e += 32) amax = fmaxf(amax, fabsf(x[e]));
    for (int off = 16; off > 0; off >>= 1)
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float scale = sc_kfp8_index_scale(amax);
    uint8_t *b = (uint8_t *)d;
    for (int64_t e = lane; e < width; e += 32) b[e] = sc_e4m3_encode(x[e] / scale);
    const int64_t at = SC_KFP8_INDEX_SCALE_AT(width);
    for (int64_t e = width + lane; e < at; e += 32) b[e] = 0;
    if (lane == 0) *(float *)(b + at) = scale;
  } else {
    /* fp8_ds_mla: per 128-value tile, scale = amax / 448 (1 for an all-zero tile), each
     * value x / scale rounded to nearest-even e4m3 with saturation */
    for (int tile = 0; tile < 4; tile++) {
      float v[4], amax = 0.0f;
      for (int j = 0; j < 4; j++) {
        v[j] = x[tile * SC_KFP8_DS_MLA_TILE + lane * 4 + j];
        amax = fmaxf(amax, fabsf(v[j]));
      }
      for (int off = 16; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      const float scale = sc_kfp8_ds_mla_scale(amax);
      uint32_t packed = 0;
      for (int j = 0; j < 4; j++) {
        const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(v[j] / scale, __NV_SATFINITE,
                                                           __NV_E4M3);
        packed |= (uint32_t)q << (8 * j);
      }
      *(uint32_t *)(d + tile * SC_KFP8_DS_MLA_TILE + lane * 4) = packed;
      if (lane == 0) *(float *)(d + SC_KFP8_DS_MLA_SCALE_AT + 4 * tile) = scale;
    }
    uint16_t *rope = (uint16_t *)(d + SC_KFP8_DS_MLA_ROPE_AT);
    for (int e = lane; e < SC_KFP8_DS_MLA_ROPE; e += 32)
      rope[e] = sc_f32_to_bf16(x[SC_KFP8_DS_MLA_NOPE + e]);
  }
}

extern "C" int sc_kcuda_kv_write(sc_kernels *k, int64_t n, int64_t width, const float *src,
                                 int64_t ld_src, const int32_t *slots, sc_krows cache) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_kv_write(n, width, src, ld_src, slots, &cache));
  if (sc_kfmt_bytes(cache.fmt) && (cache.ld % 4 != 0 || !aligned(cache.data, 4)))
    return SC_EINVAL; /* scales are f32 words */
  const int64_t step = sc_krows_stride(&cache);
  const bool vec4 = !sc_kfmt_bytes(cache.fmt) && width % 4 == 0 && aligned(src, 16) &&
                    (n == 1 || ld_src % 4 == 0) && aligned(cache.data, 16) && step % 16 == 0;
  sc_kcuda_launch(c, k_kv_write, (unsigned)sc_cdiv(n, ROWS_PER_BLOCK), 256, 0, n, width, src,
                  ld_src, slots, (char *)cache.data, cache.fmt, step, cache.rows, vec4,
                  c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("kv_write");
}

/* ---- the greedy token: argmax_rows, take_tokens ---- */

/* A logit as a key whose unsigned order is sc_logits_top2's: numbers in their order (both
 * zeros alike), every NaN below them all; the lowest index wins among equal ones. */
__device__ __forceinline__ uint64_t argmax_key(float v, int32_t i) {
  uint32_t u;
  if (v != v) {
    u = 0;
  } else {
    u = __float_as_uint(v == 0.0f ? 0.0f : v);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
  return ((uint64_t)u << 32) | (uint32_t)~(uint32_t)i;
}

/* The two largest values met so far, an equal value counting as the second and a NaN
 * never counting (sc_logits_top2's margin): a value in, and the merge of two such
 * pairs, whose result is the pair of the values of both whatever the split. */
struct top2 {
  float a, b;
};
__device__ __forceinline__ void top2_add(top2 &t, float v) {
  if (v > t.a) {
    t.b = t.a;
    t.a = v;
  } else if (v > t.b) {
    t.b = v;
  }
}
__device__ __forceinline__ top2 top2_merge(top2 x, top2 y) {
  return top2{fmaxf(x.a, y.a), fmaxf(fminf(x.a, y.a), fmaxf(x.b, y.b))};
}
__device__ __forceinline__ top2 top2_shfl(top2 t, int o) {
  return top2{__shfl_xor_sync(0xffffffffu, t.a, o), __shfl_xor_sync(0xffffffffu, t.b, o)};
}

/* A row's best key and top two values over this thread's elements and then the block's
 * (in every thread of warp 0), from element `first` on in steps of `stride`. Four loads
 * in flight a thread: a row is the vocabulary (DeepSeek-V3.2's: 129,280 logits), read
 * once. */
__device__ __forceinline__ uint64_t argmax_block(const float *row, int64_t width,
                                                 int64_t first, int64_t stride,
                                                 uint64_t *warp_best, top2 *warp_top,
                                                 top2 *top) {
  uint64_t best = 0;
  top2 t = {-INFINITY, -INFINITY};
  int64_t i = first;
  for (; i + 3 * stride < width; i += 4 * stride) {
    const float v0 = row[i], v1 = row[i + stride], v2 = row[i + 2 * stride],
                v3 = row[i + 3 * stride];
    uint64_t k = argmax_key(v0, (int32_t)i);
    k = max(k, argmax_key(v1, (int32_t)(i + stride)));
    k = max(k, argmax_key(v2, (int32_t)(i + 2 * stride)));
    k = max(k, argmax_key(v3, (int32_t)(i + 3 * stride)));
    best = max(best, k);
    top2_add(t, v0), top2_add(t, v1), top2_add(t, v2), top2_add(t, v3);
  }
  for (; i < width; i += stride) {
    best = max(best, argmax_key(row[i], (int32_t)i));
    top2_add(t, row[i]);
  }
  for (int o = 16; o > 0; o >>= 1) {
    best = max(best, __shfl_xor_sync(0xffffffffu, best, o));
    t = top2_merge(t, top2_shfl(t, o));
  }
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best, warp_top[threadIdx.x >> 5] = t;
  __syncthreads();
  if (threadIdx.x < 32) {
    const bool in = threadIdx.x < (blockDim.x >> 5);
    best = in ? warp_best[threadIdx.x] : 0;
    t = in ? warp_top[threadIdx.x] : top2{-INFINITY, -INFINITY};
    for (int o = 16; o > 0; o >>= 1) {
      best = max(best, __shfl_xor_sync(0xffffffffu, best, o));
      t = top2_merge(t, top2_shfl(t, o));
    }
  }
  *top = t;
  return best;
}

/* A cluster of ARGMAX_CTAS blocks a row: one block a row took 30 us over the default
 * model's 32,768 logits, the largest kernel of its decode step (ncu, H200, 2026-12-04:
 * bench/gpu-step.md). Each block takes every ARGMAX_CTAS-th stretch of the row, and block
 * 0 takes the largest of the blocks' keys, and merges their top two values, from their
 * shared memory. Keys are distinct (the index is in them), so the maximum is the same
 * whatever the split, and so are the top two values (margin: NULL, not written). */
#define ARGMAX_CTAS 8
#define ARGMAX_THREADS 512
__global__ void __cluster_dims__(ARGMAX_CTAS, 1, 1) __launch_bounds__(ARGMAX_THREADS)
    k_argmax_rows(int64_t width, const float *x, int64_t ld, int32_t *out, float *margin) {
  sc_dev_pdl_enter();
  __shared__ uint64_t warp_best[32];
  __shared__ top2 warp_top[32];
  cg::cluster_group cluster = cg::this_cluster();
  const int r = (int)cluster.block_rank();
  const int64_t row = blockIdx.x / ARGMAX_CTAS;
  top2 t;
  const uint64_t best =
      argmax_block(x + row * ld, width, (int64_t)r * ARGMAX_THREADS + threadIdx.x,
                   (int64_t)ARGMAX_CTAS * ARGMAX_THREADS, warp_best, warp_top, &t);
  if (threadIdx.x == 0) warp_best[0] = best, warp_top[0] = t; /* (warp 0 has read the others) */
  cluster.sync(); /* every block's best is in its warp_best[0] */
  if (r == 0 && threadIdx.x == 0) {
    uint64_t b = 0;
    top2 all = {-INFINITY, -INFINITY};
    for (int c = 0; c < ARGMAX_CTAS; c++) {
      b = max(b, *cluster.map_shared_rank(warp_best, c));
      all = top2_merge(all, *cluster.map_shared_rank(warp_top, c));
    }
    out[row] = (int32_t)~(uint32_t)b;
    if (margin != NULL) {
      const float m = all.a - all.b;
      margin[row] = width < 2 || m == 0.0f ? 0.0f : m;
    }
  }
  cluster.sync(); /* no block leaves while block 0 reads its shared memory */
}

extern "C" int sc_kcuda_argmax_rows(sc_kernels *k, int64_t n, int64_t width, const float *x,
                                    int64_t ld, int32_t *out, float *margin) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (n < 0 || width < 1 || width > INT32_MAX || ld < width || n > INT32_MAX / ARGMAX_CTAS ||
      (n > 0 && (x == NULL || out == NULL)))
    return SC_EINVAL;
  if (n == 0) return 0;
  sc_kcuda_launch(c, k_argmax_rows, (unsigned)(n * ARGMAX_CTAS), ARGMAX_THREADS, 0, width, x, ld,
                  out, margin);
  return SC_CUDA_CHECK_LAUNCH("argmax_rows");
}

/* ---- draws at a temperature: draw_rows ----
 *
 * base/tempered_draw.h's draw, operation for operation: the same float weights (each
 * product, sum and conversion rounded alone, as the host's ISO C computes them without
 * contraction), each block of SC_DRAW_BLOCK logits summed in its four lanes in the
 * host's order, the block sums and the walk in double in the host's order; so the
 * device draws the host's token to the bit (test_gpu_kernels' case_draw). One block a
 * row: its threads sum the blocks, then one thread draws (a few hundred double adds and
 * at most one block's weights). */
#define DRAW_BLOCK 256 /* base/tempered_draw.h's SC_DRAW_BLOCK (a C header: not includable) */
__device__ __forceinline__ float draw_weight(float l, float mx, float k) {
  const float y = __fmul_rn(__fsub_rn(l, mx), k);
  if (!(y >= -126.0f)) return 0.0f; /* (NaN, -inf, below 2^-126) */
  const int m = __float2int_rz(__fsub_rn(0.5f, y));
  const float f = __fadd_rn(y, __int2float_rn(m));
  float p = __fadd_rn(__fmul_rn(f, 1.5403530393381609e-4f), 1.3333558146428443e-3f);
  p = __fadd_rn(__fmul_rn(p, f), 9.6181291076284772e-3f);
  p = __fadd_rn(__fmul_rn(p, f), 5.5504108664821580e-2f);
  p = __fadd_rn(__fmul_rn(p, f), 2.4022650695910071e-1f);
  p = __fadd_rn(__fmul_rn(p, f), 6.9314718055994531e-1f);
  p = __fadd_rn(__fmul_rn(p, f), 1.0f);
  return __fmul_rn(p, __int_as_float((127 - m) << 23));
}

__device__ __forceinline__ double draw_block(const float *row, int32_t width, int32_t b,
                                             float mx, float k) {
  const int32_t lo = b * DRAW_BLOCK, end = min(lo + DRAW_BLOCK, width);
  float lane[4];
  for (int j = 0; j < 4; j++) {
    float acc = 0.0f;
    for (int32_t i = lo + j; i < end; i += 4) acc = __fadd_rn(acc, draw_weight(row[i], mx, k));
    lane[j] = acc;
  }
  return __dadd_rn(__dadd_rn(__dadd_rn((double)lane[0], (double)lane[1]), (double)lane[2]),
                   (double)lane[3]);
}

/* base/hash.h's sc_mix64, on the device */
__device__ __forceinline__ uint64_t draw_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

#define DRAW_THREADS 256
__global__ void __launch_bounds__(DRAW_THREADS)
    k_draw_rows(int32_t width, const float *x, int64_t ld, const float *temperature,
                const uint64_t *seed, const int32_t *index, int32_t *tokens, double *sums,
                int32_t nb) {
  sc_dev_pdl_enter();
  const int64_t r = blockIdx.x;
  const float t = temperature[r];
  const int32_t best = tokens[r];
  const float *row = x + r * ld;
  if (!(t > 0.0f)) return;
  const float mx = row[best];
  if (!isfinite(mx)) return;
  const float k = __double2float_rn(__ddiv_rn(1.4426950408889634, (double)t));
  double *bs = sums + r * nb;
  for (int32_t b = threadIdx.x; b < nb; b += DRAW_THREADS) bs[b] = draw_block(row, width, b, mx, k);
  __syncthreads();
  if (threadIdx.x != 0) return;
  double sum = 0.0;
  for (int32_t b = 0; b < nb; b++) sum = __dadd_rn(sum, bs[b]);
  const uint64_t h = draw_mix64(draw_mix64(seed[r]) ^ (uint64_t)index[r]);
  const double u = __dmul_rn(__dmul_rn((double)(h >> 11), 1.0 / 9007199254740992.0), sum);
  double acc = 0.0;
  int32_t b = 0;
  for (; b < nb; b++) {
    if (u < __dadd_rn(acc, bs[b])) break;
    acc = __dadd_rn(acc, bs[b]);
  }
  if (b == nb) return; /* (best) */
  const int32_t end = min((b + 1) * DRAW_BLOCK, width);
  int32_t last = -1;
  for (int32_t i = b * DRAW_BLOCK; i < end; i++) {
    const float w = draw_weight(row[i], mx, k);
    if (w == 0.0f) continue;
    acc = __dadd_rn(acc, (double)w);
    last = i;
    if (u < acc) break;
  }
  if (last >= 0) tokens[r] = last;
}

extern "C" int sc_kcuda_draw_rows(sc_kernels *k, int64_t n, int64_t width, const float *x,
                                  int64_t ld, const float *temperature, const uint64_t *seed,
                                  const int32_t *index, int32_t *tokens) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (n < 0 || n > INT32_MAX || width < 1 || width > INT32_MAX || ld < width ||
      (n > 0 && (x == NULL || temperature == NULL || seed == NULL || index == NULL ||
                 tokens == NULL)))
    return SC_EINVAL;
  if (n == 0) return 0;
  const int32_t nb = (int32_t)((width + DRAW_BLOCK - 1) / DRAW_BLOCK);
  double *sums = (double *)sc_kcuda_scratch(c, sizeof(double) * (size_t)n * (size_t)nb);
  if (sums == NULL) return SC_ENOMEM;
  sc_kcuda_launch(c, k_draw_rows, (unsigned)n, DRAW_THREADS, 0, (int32_t)width, x, ld,
                  temperature, seed, index, tokens, sums, nb);
  return SC_CUDA_CHECK_LAUNCH("draw_rows");
}

__global__ void k_take_tokens(int32_t n, const int32_t *at, const int32_t *row,
                              const int32_t *src, int32_t *ids) {
  sc_dev_pdl_enter();
  const int32_t j = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
  if (j < n) ids[at[j]] = src[row[j]];
}

extern "C" int sc_kcuda_take_tokens(sc_kernels *k, int32_t n, const int32_t *at,
                                    const int32_t *row, const int32_t *src, int32_t *ids) {
  sc_kcuda *c = sc_kcuda_of(k);
  if (n < 0 || (n > 0 && (at == NULL || row == NULL || src == NULL || ids == NULL)))
    return SC_EINVAL;
  if (n == 0) return 0;
  sc_kcuda_launch(c, k_take_tokens, (unsigned)sc_cdiv(n, 256), 256, 0, n, at, row, src, ids);
  return SC_CUDA_CHECK_LAUNCH("take_tokens");
}

/* ---- top-K position maps ---- */

__global__ void k_topk_to_ws(int64_t total, int32_t topk, const int32_t *pos,
                             const int32_t *base, int32_t srt, int32_t n, int32_t il,
                             int32_t *out, int *flag) {
  sc_dev_pdl_enter();
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int32_t p = pos[e];
  if (p < 0) {
    out[e] = -1;
    return;
  }
  const int64_t row = (int64_t)sc_dcp_owner(p, n, il) * srt + base[e / topk] +
                      sc_dcp_local_index(p, n, il);
  if (row > INT32_MAX) {
    sc_dev_raise(flag, SC_ERANGE);
    return;
  }
  out[e] = (int32_t)row;
}

extern "C" int sc_kcuda_topk_to_workspace(sc_kernels *k, int32_t n_tok, int32_t topk,
                                          const int32_t *pos, const int32_t *base,
                                          int32_t shard_rows_total, int32_t n, int32_t il,
                                          int32_t *out) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_topk_to_workspace(n_tok, topk, pos, base, shard_rows_total, n, il, out));
  const int64_t total = (int64_t)n_tok * topk;
  sc_kcuda_launch(c, k_topk_to_ws, (unsigned)sc_cdiv(total, 256), 256, 0, total, topk, pos, base,
                  shard_rows_total, n, il, out, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("topk_to_workspace");
}

/* One thread per key: its range by binary search over begin (ranges tile the list in
 * order), then the position and slot of its local index. */
__global__ void k_cache_keys(int32_t n_ranges, int32_t n_keys, const int32_t *req,
                             const int32_t *begin, const int32_t *end, const int32_t *bt,
                             int32_t max_blocks, int32_t bs, int32_t n, int32_t il,
                             int32_t rank, int32_t *pos, int32_t *slot, int *flag) {
  sc_dev_pdl_enter();
  const int32_t e = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
  if (e >= n_keys) return;
  int32_t lo = 0, hi = n_ranges - 1; /* the last range with begin <= e */
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (begin[mid] <= e) lo = mid;
    else hi = mid - 1;
  }
  /* the ranges must tile the list (what the CPU backend checks): this key's range starts
   * where the one before ends, and the last ends at n_keys */
  if (req[lo] < 0 || e < begin[lo] || e >= end[lo] || begin[lo] != (lo ? end[lo - 1] : 0) ||
      (e == 0 && end[n_ranges - 1] != n_keys)) {
    sc_dev_raise(flag, SC_ERANGE);
    return;
  }
  const int64_t j = e - begin[lo], v = j / bs;
  const int32_t *row = bt + (int64_t)req[lo] * max_blocks;
  const int64_t s = v < max_blocks && row[v] >= 0 ? (int64_t)row[v] * bs + j % bs : -1;
  if (s < 0 || s > INT32_MAX) {
    sc_dev_raise(flag, SC_ERANGE);
    return;
  }
  pos[e] = (int32_t)sc_dcp_position(j, n, il, rank);
  slot[e] = (int32_t)s;
}

extern "C" int sc_kcuda_cache_keys(sc_kernels *k, int32_t n_ranges, int32_t n_keys,
                                   const int32_t *req, const int32_t *begin, const int32_t *end,
                                   const int32_t *bt, int32_t max_blocks, int32_t block_size,
                                   int32_t n, int32_t il, int32_t dcp_rank, int32_t *pos,
                                   int32_t *slot) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_cache_keys(n_ranges, n_keys, req, begin, end, bt, max_blocks, block_size,
                                 n, il, dcp_rank, pos, slot));
  sc_kcuda_launch(c, k_cache_keys, (unsigned)sc_cdiv(n_keys, 256), 256, 0, n_ranges, n_keys, req,
                  begin, end, bt, max_blocks, block_size, n, il, dcp_rank, pos, slot, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("cache_keys");
}

/* plan/dcp.h's map of a position to this rank's cache slot (-1: another rank's or
 * none), in 32 bits: the 64-bit divisions of the shared functions (six an entry) made
 * the op instruction-bound, 0.70 ms a layer for a 32k prompt's 64M entries (ncu, H100,
 * 2026-12-06). The host checks that positions, n * il and block_size * n fit. -2: the
 * position's block is outside the table (an error). */
__device__ inline int64_t slot_of_position(uint32_t p, const int32_t *row, int32_t max_blocks,
                                           uint32_t bs, uint32_t n, uint32_t il, uint32_t rank) {
  uint32_t local = p;
  if (n > 1) {
    if (p / il % n != rank) return -1;
    local = p / (n * il) * il + p % il;
  }
  const uint32_t v = local / bs; /* = p / (bs * n): block_size is a multiple of il */
  if (v >= (uint32_t)max_blocks || row[v] < 0) return -2;
  return (int64_t)row[v] * bs + (local - v * bs);
}

#define SLOTS_PER_THREAD 4 /* consecutive entries: one division for their token */

__global__ void k_topk_to_slots(int64_t total, int32_t topk, const int32_t *pos,
                                const int32_t *req, const int32_t *bt, int32_t max_blocks,
                                int32_t bs, int32_t n, int32_t il, int32_t rank, int32_t *out,
                                int *flag) {
  sc_dev_pdl_enter();
  const int64_t e0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * SLOTS_PER_THREAD;
  if (e0 >= total) return;
  int64_t t = e0 / topk;
  int32_t i = (int32_t)(e0 - t * topk); /* entry e0's index within its token */
#pragma unroll
  for (int u = 0; u < SLOTS_PER_THREAD; u++, i++) {
    const int64_t e = e0 + u;
    if (e >= total) break;
    if (i == topk) t++, i = 0;
    const int32_t p = pos[e];
    int64_t slot = -1;
    if (p >= 0)
      slot = slot_of_position((uint32_t)p, bt + (int64_t)req[t] * max_blocks, max_blocks,
                              (uint32_t)bs, (uint32_t)n, (uint32_t)il, (uint32_t)rank);
    if (slot < -1 || slot > INT32_MAX) {
      sc_dev_raise(flag, SC_ERANGE);
      return;
    }
    out[e] = (int32_t)slot;
  }
}

extern "C" int sc_kcuda_topk_to_slots(sc_kernels *k, int32_t n_tok, int32_t topk,
                                      const int32_t *pos, const int32_t *req,
                                      const int32_t *bt, int32_t max_blocks, int32_t block_size,
                                      int32_t n, int32_t il, int32_t dcp_rank, int32_t *out) {
  sc_kcuda *c = sc_kcuda_of(k);
  SC_KCHECK(sc_kcheck_topk_to_slots(n_tok, topk, pos, req, bt, max_blocks, block_size, n, il,
                                    dcp_rank, out));
  if ((int64_t)n * il > INT32_MAX || (int64_t)block_size * n > INT32_MAX) return SC_ERANGE;
  const int64_t total = (int64_t)n_tok * topk;
  sc_kcuda_launch(c, k_topk_to_slots, (unsigned)sc_cdiv(total, 256 * SLOTS_PER_THREAD), 256, 0,
                  total, topk, pos, req,
                  bt, max_blocks, block_size, n, il, dcp_rank, out, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("topk_to_slots");
}
