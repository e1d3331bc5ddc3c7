/* cuda_elementwise.cu - RMSNorm, LayerNorm, RoPE (interleaved pairs; by theta or by a
 * frequency table), SwiGLU, the MoE combine (weighted_sum_rows), the residual add and
 * the LSE merge / scale of DCP partial results (SPEC.md §7), and the faulting kernel of
 * `--inject devfault`. All f32 on CUDA cores;
 * rows map to blocks (or a 2-D grid), so there is no cross-block dependency. The RoPE
 * angle and the LSE combination are computed in double, as the CPU reference does, so
 * large positions and extreme LSE gaps agree with it. */
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/fp8_e4m3.h"
#include "kernels/lse_math.h"

/* ---- RMSNorm: one block per row, sum of squares reduced in f32 over 256 threads ---- */

/* 1 / sqrt(mean + eps) from each thread's partial sum of squares: the warps' butterflies,
 * then the first warp's over their results (the same order for every row). */
__device__ inline float rms_inv(float ss, int64_t dim, float eps) {
  __shared__ float part[32];
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x == 0) part[0] = v;
  }
  __syncthreads();
  return rsqrtf(part[0] / (float)dim + eps);
}

/* Row r of one RMSNorm, by the block. */
__device__ inline void rmsnorm_row(int64_t r, int64_t dim, const float *x, int64_t ld_x,
                                   const float *w, float eps, float *out, int64_t ld_out) {
  const float *xr = x + r * ld_x;
  float *o = out + r * ld_out;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  const float inv = rms_inv(ss, dim, eps);
  /* in place is allowed: every thread reads its own elements before writing them */
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    o[i] = xr[i] * inv * (w ? w[i] : 1.0f);
}

__global__ void k_rmsnorm(int64_t dim, const float *x, int64_t ld_x, const float *w,
                          float eps, float *out, int64_t ld_out) {
  sc_dev_pdl_enter();
  rmsnorm_row(blockIdx.x, dim, x, ld_x, w, eps, out, ld_out);
}

/* The parts of an rmsnorms op: blockIdx.y the part, blockIdx.x its row, each row as
 * k_rmsnorm normalises it. */
__global__ void k_rmsnorms(sc_rmsnorms a) {
  sc_dev_pdl_enter();
  const sc_rmsnorm_part &p = a.part[blockIdx.y];
  rmsnorm_row(blockIdx.x, p.dim, p.x, p.ld_x, p.w, a.eps, p.out, p.ld_out);
}

/* ---- RMSNorm of rows up to RMS_WARP_DIM wide: a warp a row, the block's sums ----
 *
 * A block of 256 threads for a row of a few hundred values spent its time starting and
 * meeting at its barrier: a 32k prompt's q_norm and kv_norm took 178 us a launch (two
 * parts of 32768 rows; H100, 2026-12-06, bench/long-context.md). Here lane l plays
 * threads l, 32 + l, ..., 224 + l of rmsnorm_row's block: the same partial sums, the
 * same butterfly per warp of them, the same first-warp butterfly over the eight warp
 * sums, so the same 1 / rms to the bit, and each value is scaled as there
 * (test_gpu_kernels compares add_rmsnorm, still the block's, with add then rmsnorm to
 * the bit). Up to RMS_WARP_DIM a lane loads at most 64 values. */
#define RMS_THREADS 256
#define RMS_WARPS (RMS_THREADS / 32)
#define RMS_WARP_DIM 2048

__device__ inline float rms_inv_as_block(const float *xr, int64_t dim, float eps) {
  const int lane = threadIdx.x & 31;
  float warp_sum[RMS_WARPS];
#pragma unroll
  for (int v = 0; v < RMS_WARPS; v++) {
    float ss = 0.0f;
    for (int64_t i = v * 32 + lane; i < dim; i += RMS_THREADS) ss += xr[i] * xr[i];
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    warp_sum[v] = __shfl_sync(0xffffffffu, ss, 0); /* (thread 32 v's part[v]) */
  }
  float p = 0.0f;
#pragma unroll
  for (int v = 0; v < RMS_WARPS; v++) p = lane == v ? warp_sum[v] : p;
  for (int off = 16; off > 0; off >>= 1) p += __shfl_xor_sync(0xffffffffu, p, off);
  return rsqrtf(__shfl_sync(0xffffffffu, p, 0) / (float)dim + eps);
}

/* blockIdx.y the part (rmsnorms; 0 for rmsnorm), warp w of block b its row 8 b + w. */
__global__ void __launch_bounds__(RMS_THREADS) k_rmsnorm_rows(sc_rmsnorms a) {
  sc_dev_pdl_enter();
  const sc_rmsnorm_part &p = a.part[blockIdx.y];
  const int64_t r = (int64_t)blockIdx.x * RMS_WARPS + (threadIdx.x >> 5);
  if (r >= a.n_rows) return; /* (a whole warp: no shuffle waits for it) */
  const float *xr = p.x + r * p.ld_x;
  float *o = p.out + r * p.ld_out;
  const float inv = rms_inv_as_block(xr, p.dim, a.eps);
  /* in place is allowed: the lanes' loads above are done before any store (shuffles) */
  for (int64_t i = threadIdx.x & 31; i < p.dim; i += 32)
    o[i] = xr[i] * inv * (p.w ? p.w[i] : 1.0f);
}

extern "C" int sc_kcuda_rmsnorms(sc_kernels *k, const sc_rmsnorms *a) {
  SC_KCHECK(sc_kcheck_rmsnorms(a));
  if (a->n_rows > INT32_MAX) return SC_ERANGE;
  bool narrow = true;
  for (int i = 0; i < a->n_parts; i++) narrow = narrow && a->part[i].dim <= RMS_WARP_DIM;
  if (narrow)
    sc_kcuda_launch(sc_kcuda_of(k), k_rmsnorm_rows,
                    dim3((unsigned)sc_cdiv(a->n_rows, RMS_WARPS), (unsigned)a->n_parts),
                    RMS_THREADS, 0, *a);
  else
    sc_kcuda_launch(sc_kcuda_of(k), k_rmsnorms, dim3((unsigned)a->n_rows, (unsigned)a->n_parts),
                    RMS_THREADS, 0, *a);
  return SC_CUDA_CHECK_LAUNCH("rmsnorms");
}

extern "C" int sc_kcuda_rmsnorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                                int64_t ld_x, const float *w, float eps, float *out,
                                int64_t ld_out) {
  SC_KCHECK(sc_kcheck_rmsnorm(n_rows, dim, x, ld_x, eps, out, ld_out));
  if (n_rows > INT32_MAX) return SC_ERANGE;
  if (dim <= RMS_WARP_DIM) {
    const sc_rmsnorms one = {.n_rows = n_rows, .eps = eps, .n_parts = 1,
                             .part = {{dim, x, ld_x, w, out, ld_out}}};
    sc_kcuda_launch(sc_kcuda_of(k), k_rmsnorm_rows, (unsigned)sc_cdiv(n_rows, RMS_WARPS),
                    RMS_THREADS, 0, one);
  } else {
    sc_kcuda_launch(sc_kcuda_of(k), k_rmsnorm, (unsigned)n_rows, RMS_THREADS, 0, dim, x, ld_x,
                    w, eps, out, ld_out);
  }
  return SC_CUDA_CHECK_LAUNCH("rmsnorm");
}

/* The residual add and the norm after it: y = y + x as k_add, then k_rmsnorm's sums over
 * the new y, so the results are those of the two kernels (each thread reads back only
 * the elements it wrote). */
__global__ void k_add_rmsnorm(int64_t dim, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                              const float *w, float eps, float *out, int64_t ld_out) {
  sc_dev_pdl_enter();
  const int64_t r = blockIdx.x;
  const float *xr = x + r * ld_x;
  float *yr = y + r * ld_y, *o = out + r * ld_out;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = yr[i] + xr[i];
    yr[i] = v;
    ss += v * v;
  }
  const float inv = rms_inv(ss, dim, eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    o[i] = yr[i] * inv * (w ? w[i] : 1.0f);
}

extern "C" int sc_kcuda_add_rmsnorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                                    int64_t ld_x, float *y, int64_t ld_y, const float *w,
                                    float eps, float *out, int64_t ld_out) {
  /* the checks of add, then of rmsnorm, as the CPU's two calls make them */
  const int ra = sc_kcheck_rows_op(n_rows, dim, x, y, y);
  if (ra < 0) return ra;
  SC_KCHECK(sc_kcheck_rmsnorm(n_rows, dim, y, ld_y, eps, out, ld_out));
  if (ra > 0) return 0;
  if (n_rows > INT32_MAX) return SC_ERANGE;
  sc_kcuda_launch(sc_kcuda_of(k), k_add_rmsnorm, (unsigned)n_rows, 256, 0, dim, x, ld_x, y, ld_y,
                  w, eps, out, ld_out);
  return SC_CUDA_CHECK_LAUNCH("add_rmsnorm");
}

/* ---- RoPE: one thread per (token, group of ROPE_HEADS heads, pair) ----
 * Each thread computes its pair's angle in double (as the CPU reference) and rotates the
 * pair in its group's heads. One thread per (token, pair) looping over every head left a
 * decode step of 4 tokens with 128 threads (32 pairs each), each a chain of 128 dependent
 * loads and stores at examples/model-deep.json's 128 heads: 15 us a launch, 3.7 of a
 * 25 ms step (H200, 2026-12-03, bench/results/gpu-ops-2026-12-03-h200/). Every value
 * goes through the same operations as before, so results do not change. */
#define ROPE_HEADS 4

__device__ inline void rope_pairs(const float *v, int64_t ld_head, float *y, int64_t ld_head_y,
                                  int32_t h0, int32_t h1, float cs, float sn) {
  for (int32_t h = h0; h < h1; h++) {
    const float a = v[h * ld_head], c = v[h * ld_head + 1];
    y[h * ld_head_y] = a * cs - c * sn;
    y[h * ld_head_y + 1] = a * sn + c * cs;
  }
}

/* (token, head group, pair) of the thread in block `block` of the rotation; false past
 * the end */
__device__ inline bool rope_thread(int64_t n_tok, int32_t n_heads, int32_t pairs, int64_t *t,
                                   int32_t *h0, int32_t *h1, int32_t *i,
                                   int64_t block = blockIdx.x) {
  const int64_t id = block * blockDim.x + threadIdx.x;
  const int32_t groups = (n_heads + ROPE_HEADS - 1) / ROPE_HEADS;
  if (id >= n_tok * groups * pairs) return false;
  *i = (int32_t)(id % pairs);
  const int64_t r = id / pairs;
  *t = r / groups;
  *h0 = (int32_t)(r % groups) * ROPE_HEADS;
  *h1 = *h0 + ROPE_HEADS < n_heads ? *h0 + ROPE_HEADS : n_heads;
  return true;
}

static unsigned rope_blocks(int64_t n_tok, int32_t n_heads, int32_t pairs) {
  return (unsigned)sc_cdiv(n_tok * sc_cdiv(n_heads, ROPE_HEADS) * pairs, 256);
}

/* Pair i of token t in heads h0..h1 of x, rotated into y (which may be x): the rope op's
 * rotation, or rope_freq's (inv_freq). */
__device__ inline void rope_rotate(const float *x, int64_t ld_tok, int64_t ld_head, float *y,
                                   int64_t ld_tok_y, int64_t ld_head_y, const int32_t *pos,
                                   int64_t t, int32_t h0, int32_t h1, int32_t i, int32_t rot_dim,
                                   double theta, const double *inv_freq, double factor) {
  const float *v = x + t * ld_tok + 2 * i;
  float *w = y + t * ld_tok_y + 2 * i;
  if (inv_freq == NULL) {
    const double ang = (double)pos[t] * pow(theta, -2.0 * i / (double)rot_dim);
    double sd, cd;
    sincos(ang, &sd, &cd);
    rope_pairs(v, ld_head, w, ld_head_y, h0, h1, (float)cd, (float)sd);
  } else {
    const double ang = (double)pos[t] * inv_freq[i];
    rope_pairs(v, ld_head, w, ld_head_y, h0, h1, (float)(cos(ang) * factor),
               (float)(sin(ang) * factor));
  }
}

__global__ void k_rope(int64_t n_tok, int32_t n_heads, int32_t half, float *x, int64_t ld_tok,
                       int64_t ld_head, const int32_t *pos, double theta, int32_t rot_dim) {
  sc_dev_pdl_enter();
  int64_t t;
  int32_t h0, h1, i;
  if (!rope_thread(n_tok, n_heads, half, &t, &h0, &h1, &i)) return;
  rope_rotate(x, ld_tok, ld_head, x, ld_tok, ld_head, pos, t, h0, h1, i, rot_dim, theta, NULL, 1.0);
}

extern "C" int sc_kcuda_rope(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim,
                             float *x, int64_t ld_tok, int64_t ld_head, const int32_t *pos,
                             float theta) {
  SC_KCHECK(sc_kcheck_rope(n_tok, n_heads, rot_dim, x, ld_head, pos, theta));
  sc_kcuda_launch(sc_kcuda_of(k), k_rope, rope_blocks(n_tok, n_heads, rot_dim / 2), 256, 0, n_tok,
                  n_heads, rot_dim / 2, x, ld_tok, ld_head, pos, (double)theta, rot_dim);
  return SC_CUDA_CHECK_LAUNCH("rope");
}

/* ---- RoPE with the frequencies given (a checkpoint's YaRN table, rot_dim/2 doubles in
 * device memory): as k_rope, the angle in double, both rotated values times factor ---- */
__global__ void k_rope_freq(int64_t n_tok, int32_t n_heads, int32_t half, float *x,
                            int64_t ld_tok, int64_t ld_head, const int32_t *pos,
                            const double *inv_freq, double factor) {
  sc_dev_pdl_enter();
  int64_t t;
  int32_t h0, h1, i;
  if (!rope_thread(n_tok, n_heads, half, &t, &h0, &h1, &i)) return;
  rope_rotate(x, ld_tok, ld_head, x, ld_tok, ld_head, pos, t, h0, h1, i, 2 * half, 0.0, inv_freq,
              factor);
}

extern "C" int sc_kcuda_rope_freq(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim,
                                  float *x, int64_t ld_tok, int64_t ld_head, const int32_t *pos,
                                  const double *inv_freq, float attn_factor) {
  SC_KCHECK(sc_kcheck_rope_freq(n_tok, n_heads, rot_dim, x, ld_head, pos, inv_freq, attn_factor));
  sc_kcuda_launch(sc_kcuda_of(k), k_rope_freq, rope_blocks(n_tok, n_heads, rot_dim / 2), 256, 0,
                  n_tok, n_heads, rot_dim / 2, x, ld_tok, ld_head, pos, inv_freq,
                  (double)attn_factor);
  return SC_CUDA_CHECK_LAUNCH("rope_freq");
}

/* ---- several rotations of the same tokens, one launch: each part's blocks as its own
 * launch would have them (first[p] .. first[p + 1]), so every value is rotated by the
 * same operations as by k_rope or k_rope_freq (into the part's out when it has one) ---- */
typedef struct rope_launch {
  sc_ropes r;
  int64_t first[SC_ROPES_MAX + 1];
} rope_launch;

__global__ void k_ropes(rope_launch a) {
  sc_dev_pdl_enter();
  int p = 0;
  while (p + 1 < a.r.n_parts && blockIdx.x >= a.first[p + 1]) p++;
  const sc_rope_part &q = a.r.part[p];
  int64_t t;
  int32_t h0, h1, i;
  if (!rope_thread(a.r.n_tok, q.n_heads, q.rot_dim / 2, &t, &h0, &h1, &i,
                   (int64_t)blockIdx.x - a.first[p]))
    return;
  float *y = q.out ? q.out : q.x;
  rope_rotate(q.x, q.ld_tok, q.ld_head, y, q.out ? q.ld_tok_out : q.ld_tok,
              q.out ? q.ld_head_out : q.ld_head, a.r.pos, t, h0, h1, i, q.rot_dim,
              (double)a.r.theta, a.r.inv_freq, (double)a.r.attn_factor);
}

extern "C" int sc_kcuda_ropes(sc_kernels *k, const sc_ropes *r) {
  SC_KCHECK(sc_kcheck_ropes(r));
  rope_launch a = {*r, {0}};
  int32_t n = 0; /* the parts with something to rotate */
  for (int32_t p = 0; p < r->n_parts; p++) {
    const sc_rope_part &q = r->part[p];
    if (q.n_heads == 0 || q.rot_dim == 0) continue;
    a.r.part[n] = q;
    a.first[n + 1] = a.first[n] + rope_blocks(r->n_tok, q.n_heads, q.rot_dim / 2);
    n++;
  }
  a.r.n_parts = n;
  if (a.first[n] > INT32_MAX) return SC_ERANGE;
  sc_kcuda_launch(sc_kcuda_of(k), k_ropes, (unsigned)a.first[n], 256, 0, a);
  return SC_CUDA_CHECK_LAUNCH("ropes");
}

/* ---- LayerNorm: one block per row, mean and biased variance in double (two passes, as
 * the CPU reference: the sum, then the squared deviations from the mean) ---- */
__device__ double block_sum_d(double v, double *part) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  __syncthreads(); /* part may still be read from the previous sum */
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    double u = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0;
    for (int off = 16; off > 0; off >>= 1) u += __shfl_xor_sync(0xffffffffu, u, off);
    if (threadIdx.x == 0) part[0] = u;
  }
  __syncthreads();
  return part[0];
}

__global__ void k_layernorm(int64_t dim, const float *x, int64_t ld_x, const float *w,
                            const float *b, float eps, float *out, int64_t ld_out) {
  sc_dev_pdl_enter();
  const int64_t r = blockIdx.x;
  const float *xr = x + r * ld_x;
  float *o = out + r * ld_out;
  __shared__ double part[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i];
  const double mean = block_sum_d(s, part) / (double)dim;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const double dv = (double)xr[i] - mean;
    ss += dv * dv;
  }
  const double inv = 1.0 / sqrt(block_sum_d(ss, part) / (double)dim + (double)eps);
  /* in place is allowed: every thread reads its own elements before writing them */
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    o[i] = (float)(((double)xr[i] - mean) * inv) * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
}

extern "C" int sc_kcuda_layernorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                                  int64_t ld_x, const float *w, const float *b, float eps,
                                  float *out, int64_t ld_out) {
  SC_KCHECK(sc_kcheck_rmsnorm(n_rows, dim, x, ld_x, eps, out, ld_out));
  if (n_rows > INT32_MAX) return SC_ERANGE;
  if (n_rows == 0) return 0;
  sc_kcuda_launch(sc_kcuda_of(k), k_layernorm, (unsigned)n_rows, 256, 0, dim, x, ld_x, w, b, eps,
                  out, ld_out);
  return SC_CUDA_CHECK_LAUNCH("layernorm");
}

/* ---- the MoE combine: one block per token, its threads over the columns, each column's
 * picks summed in their order from 0 and add last (as the CPU reference); a row index out
 * of range raises SC_ERANGE on the error flag ---- */
__global__ void k_weighted_sum_rows(int32_t topk, int64_t width, const float *src,
                                    int64_t ld_src, int64_t src_rows, const int32_t *rows,
                                    const float *weight, const float *add, int64_t ld_add,
                                    float *out, int64_t ld_out, int *flag) {
  sc_dev_pdl_enter();
  const int64_t t = blockIdx.x;
  const int32_t *rt = rows + t * topk;
  const float *wt = weight + t * topk;
  for (int32_t i = 0; i < topk; i++)
    if (rt[i] != -1 && (rt[i] < 0 || rt[i] >= src_rows)) {
      if (threadIdx.x == 0) sc_dev_raise(flag, SC_ERANGE);
      return;
    }
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    float acc = 0.0f;
    for (int32_t i = 0; i < topk; i++)
      if (rt[i] != -1) acc += wt[i] * src[(int64_t)rt[i] * ld_src + c];
    if (add != NULL) acc += add[t * ld_add + c];
    out[t * ld_out + c] = acc;
  }
}

extern "C" int sc_kcuda_weighted_sum_rows(sc_kernels *k, int64_t n_tok, int32_t topk,
                                          int64_t width, const float *src, int64_t ld_src,
                                          int64_t src_rows, const int32_t *rows,
                                          const float *weight, const float *add, int64_t ld_add,
                                          float *out, int64_t ld_out) {
  SC_KCHECK(sc_kcheck_weighted_sum_rows(n_tok, topk, width, src, ld_src, src_rows, rows, weight,
                                        add, ld_add, out, ld_out));
  if (n_tok > INT32_MAX) return SC_ERANGE;
  if (n_tok == 0) return 0;
  sc_kcuda *c = sc_kcuda_of(k);
  sc_kcuda_launch(c, k_weighted_sum_rows, (unsigned)n_tok, 256, 0, topk, width, src, ld_src,
                  src_rows, rows, weight, add, ld_add, out, ld_out, c->err_flag);
  return SC_CUDA_CHECK_LAUNCH("weighted_sum_rows");
}

/* ---- fp8 weights to f32 (kernels.h dequant_fp8): one block per (matrix, row), its
 * threads over the columns; the byte decoded by the host's own rule (fp8_e4m3.h) and
 * multiplied by its block's scale in f32, so the floats equal the host dequantization's */
__global__ void k_dequant_fp8(int64_t rows, int64_t cols, const uint8_t *q, const float *scale,
                              int64_t srows, int64_t scols, int32_t r_off, int32_t c_off,
                              int32_t br, int32_t bc, float *out) {
  sc_dev_pdl_enter();
  const int64_t it = blockIdx.x, m = it / rows, r = it % rows;
  const uint8_t *qr = q + it * cols;
  const float *s = scale + m * srows * scols + ((r + r_off) / br) * scols;
  float *o = out + it * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    o[c] = sc_e4m3_value(qr[c]) * s[(c + c_off) / bc];
}

extern "C" int sc_kcuda_dequant_fp8(sc_kernels *k, int32_t mats, int64_t rows, int64_t cols,
                                    const uint8_t *q, const float *scale, int64_t srows,
                                    int64_t scols, int32_t r_off, int32_t c_off,
                                    int32_t block_rows, int32_t block_cols, float *out) {
  SC_KCHECK(sc_kcheck_dequant_fp8(mats, rows, cols, q, scale, srows, scols, r_off, c_off,
                                  block_rows, block_cols, out));
  const int64_t n = (int64_t)mats * rows;
  if (n > INT32_MAX) return SC_ERANGE;
  sc_kcuda_launch(sc_kcuda_of(k), k_dequant_fp8, (unsigned)n, 256, 0, rows, cols, q, scale, srows,
                  scols, r_off, c_off, block_rows, block_cols, out);
  return SC_CUDA_CHECK_LAUNCH("dequant_fp8");
}

/* ---- SwiGLU and add: 2-D grid, x over the row, y over rows ---- */
__global__ void k_swiglu(int64_t n_rows, int64_t inter, const float *gate, int64_t ld_gate,
                         const float *up, int64_t ld_up, float *out, int64_t ld_out) {
  sc_dev_pdl_enter();
  for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y)
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < inter;
         i += (int64_t)gridDim.x * blockDim.x) {
      const float g = gate[r * ld_gate + i];
      out[r * ld_out + i] = g / (1.0f + expf(-g)) * up[r * ld_up + i];
    }
}

__global__ void k_add(int64_t n_rows, int64_t width, const float *x, int64_t ld_x, float *y,
                      int64_t ld_y) {
  sc_dev_pdl_enter();
  for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y)
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < width;
         i += (int64_t)gridDim.x * blockDim.x)
      y[r * ld_y + i] += x[r * ld_x + i];
}

static dim3 grid2d(int64_t rows, int64_t width) {
  const int64_t gx = sc_cdiv(width, 256) < 64 ? sc_cdiv(width, 256) : 64;
  return dim3((unsigned)gx, (unsigned)(rows < 65535 ? rows : 65535));
}

extern "C" int sc_kcuda_swiglu(sc_kernels *k, int64_t n_rows, int64_t inter,
                               const float *gate, int64_t ld_gate, const float *up,
                               int64_t ld_up, float *out, int64_t ld_out) {
  SC_KCHECK(sc_kcheck_rows_op(n_rows, inter, gate, up, out));
  sc_kcuda_launch(sc_kcuda_of(k), k_swiglu, grid2d(n_rows, inter), 256, 0, n_rows, inter, gate,
                  ld_gate, up, ld_up, out, ld_out);
  return SC_CUDA_CHECK_LAUNCH("swiglu");
}

extern "C" int sc_kcuda_add(sc_kernels *k, int64_t n_rows, int64_t width, const float *x,
                            int64_t ld_x, float *y, int64_t ld_y) {
  SC_KCHECK(sc_kcheck_rows_op(n_rows, width, x, y, y));
  sc_kcuda_launch(sc_kcuda_of(k), k_add, grid2d(n_rows, width), 256, 0, n_rows, width, x, ld_x, y,
                  ld_y);
  return SC_CUDA_CHECK_LAUNCH("add");
}

/* ---- LSE merge: one block per (token, head) row ---- */

/* The merge rule itself is kernels/lse_math.h, shared with the CPU backend. */

__global__ void k_lse_merge(int32_t n_shards, int64_t n_rows, int64_t width, const float *lse,
                            const float *out_in, float *out, float *lse_out) {
  sc_dev_pdl_enter();
  const int64_t i = blockIdx.x;
  const double big_l = sc_lse_merged(lse, n_shards, n_rows, i);
  for (int64_t x = threadIdx.x; x < width; x += blockDim.x) {
    float acc = 0.0f;
    for (int32_t r = 0; r < n_shards; r++) {
      const float f = sc_lse_weight(lse[r * n_rows + i], big_l);
      if (f != 0.0f) acc += f * out_in[(r * n_rows + i) * width + x];
    }
    out[i * width + x] = acc;
  }
  if (lse_out && threadIdx.x == 0) lse_out[i] = (float)big_l;
}

__global__ void k_lse_scale(int32_t n_shards, int32_t shard, int64_t n_rows, int64_t width,
                            const float *lse, float *out, float *lse_out) {
  sc_dev_pdl_enter();
  const int64_t i = blockIdx.x;
  const double big_l = sc_lse_merged(lse, n_shards, n_rows, i);
  const float f = sc_lse_weight(lse[shard * n_rows + i], big_l);
  for (int64_t x = threadIdx.x; x < width; x += blockDim.x) {
    float *o = out + i * width + x;
    *o = f == 0.0f ? 0.0f : f * *o; /* an empty shard's NaN cannot leak */
  }
  if (lse_out && threadIdx.x == 0) lse_out[i] = (float)big_l;
}

extern "C" int sc_kcuda_lse_merge(sc_kernels *k, int32_t n_shards, int64_t n_rows,
                                  int64_t width, const float *lse, const float *out_in,
                                  float *out, float *lse_out) {
  SC_KCHECK(sc_kcheck_lse_merge(n_shards, n_rows, width, lse, out_in, out));
  if (n_rows > INT32_MAX) return SC_ERANGE;
  sc_kcuda_launch(sc_kcuda_of(k), k_lse_merge, (unsigned)n_rows, 128, 0, n_shards, n_rows, width,
                  lse, out_in, out, lse_out);
  return SC_CUDA_CHECK_LAUNCH("lse_merge");
}

extern "C" int sc_kcuda_lse_scale(sc_kernels *k, int32_t n_shards, int32_t shard,
                                  int64_t n_rows, int64_t width, const float *lse, float *out,
                                  float *lse_out) {
  SC_KCHECK(sc_kcheck_lse_scale(n_shards, shard, n_rows, width, lse, out));
  if (n_rows > INT32_MAX) return SC_ERANGE;
  sc_kcuda_launch(sc_kcuda_of(k), k_lse_scale, (unsigned)n_rows, 128, 0, n_shards, shard, n_rows,
                  width, lse, out, lse_out);
  return SC_CUDA_CHECK_LAUNCH("lse_scale");
}

/* ---- fault injection: a store to an address no allocation has (an illegal address) ---- */
__global__ void k_fault(int *nowhere) {
  sc_dev_pdl_enter();
  *(volatile int *)nowhere = 1;
}

extern "C" int sc_kcuda_inject_fault(sc_kernels *k) {
  sc_kcuda_launch(sc_kcuda_of(k), k_fault, 1, 1, 0, (int *)(uintptr_t)0x10);
  return sc_kcuda_launched("fault");
}
