/* cuda_common.cuh - device helpers shared by the CUDA kernels (not a public header):
 * element loads by format, the fp8_ds_mla row layout, the error flag, and the 64-bit
 * composite key that encodes the top-K order (score desc, position asc). */
#ifndef SC_KERNELS_CUDA_COMMON_CUH
#define SC_KERNELS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "kernels/bf16.h"
#include "kernels/cuda/cuda_internal.h"

#define SC_CUDA_CHECK_LAUNCH(what) sc_kcuda_launched(what)

/* The largest top-K this backend takes: the indexer's select and the attention's split
 * count are both sized for it. */
#define SC_KCUDA_TOPK_MAX 8192

/* Records the first error code a kernel raises; the host sees it at the next sync. */
__device__ inline void sc_dev_raise(int *flag, int code) { atomicCAS(flag, 0, code); }


/* ---- fp8_ds_mla (SPEC.md §7): [512 x e4m3][4 x f32 scale][64 x bf16] = 656 bytes ---- */
#define SC_FP8_NOPE 512
#define SC_FP8_ROPE 64
#define SC_FP8_TILE 128
#define SC_FP8_SCALE_OFF 512
#define SC_FP8_ROPE_OFF 528

__device__ inline float sc_dev_e4m3(uint8_t v) {
  __nv_fp8_e4m3 x;
  x.__x = v;
  return (float)x;
}

/* Element i (< 576) of an fp8_ds_mla row, dequantized. */
__device__ inline float sc_dev_fp8_elem(const uint8_t *row, int64_t i) {
  if (i < SC_FP8_NOPE) {
    const float s = *(const float *)(row + SC_FP8_SCALE_OFF + 4 * (i / SC_FP8_TILE));
    return sc_dev_e4m3(row[i]) * s;
  }
  return sc_bf16_to_f32(((const uint16_t *)(row + SC_FP8_ROPE_OFF))[i - SC_FP8_NOPE]);
}

/* Element i of row `r` of a row set, as f32. */
__device__ inline float sc_dev_load(const void *row, int fmt, int64_t i) {
  if (fmt == SC_KFMT_F32) return ((const float *)row)[i];
  if (fmt == SC_KFMT_BF16) return sc_bf16_to_f32(((const uint16_t *)row)[i]);
  return sc_dev_fp8_elem((const uint8_t *)row, i);
}

/* ---- top-K order as one unsigned 64-bit key: larger key = better candidate ----
 * high 32 bits: the score mapped to an order-preserving unsigned (NaN -> -inf, -0 -> +0),
 * low 32 bits: 0xffffffff - pos, so among equal scores the lower position is larger.
 * Every real candidate (pos >= 0) has a nonzero key; 0 marks "no candidate". */
__device__ inline uint64_t sc_dev_topk_key(float score, int32_t pos) {
  if (isnan(score)) score = -INFINITY;
  if (score == 0.0f) score = 0.0f;
  uint32_t u = __float_as_uint(score);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ((uint64_t)u << 32) | (uint64_t)(0xffffffffu - (uint32_t)pos);
}

__device__ inline sc_kcand sc_dev_topk_cand(uint64_t key) {
  sc_kcand c;
  if (key == 0) {
    c.score = -INFINITY;
    c.pos = -1;
    return c;
  }
  uint32_t u = (uint32_t)(key >> 32);
  u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
  c.score = __uint_as_float(u);
  c.pos = (int32_t)(0xffffffffu - (uint32_t)key);
  return c;
}

static inline int64_t sc_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif
