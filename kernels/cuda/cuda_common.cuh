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

/* ---- launches: programmatic dependent launch ----
 *
 * A decode step is some 90 short kernels back to back, and the time between one kernel's
 * end and the next one's start was a third of it (default model, one H200: the device
 * busy 0.28 ms of a 0.42 ms kernel span, bench/gpu-step.md). So every kernel of this
 * backend is launched by sc_kcuda_launch, with programmatic stream serialization allowed
 * (or by sc_kcuda_launch_spread, below, without), and begins with sc_dev_pdl_enter():
 *  - griddepcontrol.wait: nothing before it touches memory, and it returns once the
 *    kernel before in the stream has finished and its writes are visible. So what a
 *    kernel reads and writes, and so what it computes, is what it was without PDL;
 *  - griddepcontrol.launch_dependents: then the kernel after it may be launched. Its
 *    blocks are scheduled beside this kernel's last wave and wait there, so the launch
 *    latency is hidden. Waiting first and triggering second means at most one kernel
 *    waits ahead of the one running: triggers before waits would let every kernel of a
 *    step be launched, each one parking blocks on the SMs.
 * Kernels launched by others (cuBLAS) are ordered as usual: theirs has no attribute, and
 * ours after them waits for them to finish. Without the attribute (c->pdl 0), the wait
 * and the trigger do nothing. A kernel that touched memory before the wait would race
 * with the one before it, on the GPU only and only sometimes: tests/cuda_pdl.py checks
 * that every kernel here begins with sc_dev_pdl_enter() and none is launched with <<<>>>.
 * Measured (bench/gpu-step.md, "Launch gaps"): TPOT 3-6% lower on the small models. */
__device__ __forceinline__ void sc_dev_pdl_enter() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

/* kernel<<<grid, block, smem, stream>>>(args...), with PDL allowed when pdl, in clusters
 * of `cluster` blocks along x when more than 1, cooperative (every block resident at
 * once) when coop. The launch's error is also the thread's last error, as a <<<>>>
 * launch's, which is what SC_CUDA_CHECK_LAUNCH reads. */
template <typename... KernelArgs, typename... Args>
static inline cudaError_t sc_kcuda_launch_on(cudaStream_t stream, bool pdl, unsigned cluster,
                                             bool coop, void (*kernel)(KernelArgs...),
                                             dim3 grid, dim3 block, size_t smem,
                                             Args &&...args) {
  cudaLaunchAttribute attr[3];
  unsigned n = 0;
  if (coop) {
    attr[n].id = cudaLaunchAttributeCooperative;
    attr[n++].val.cooperative = 1;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster;
    attr[n].val.clusterDim.y = 1;
    attr[n++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = n ? attr : NULL;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args &&>(args)...);
}

/* The backend's launch: on c's stream, PDL allowed when c->pdl. */
template <typename... KernelArgs, typename... Args>
static inline cudaError_t sc_kcuda_launch(const sc_kcuda *c, void (*kernel)(KernelArgs...),
                                          dim3 grid, dim3 block, size_t smem, Args &&...args) {
  return sc_kcuda_launch_on(c->stream, c->pdl != 0, 1, false, kernel, grid, block, smem,
                            static_cast<Args &&>(args)...);
}

/* The same in clusters of `cluster` blocks (consecutive along x). */
template <typename... KernelArgs, typename... Args>
static inline cudaError_t sc_kcuda_launch_cluster(const sc_kcuda *c, unsigned cluster,
                                                  void (*kernel)(KernelArgs...), dim3 grid,
                                                  dim3 block, size_t smem, Args &&...args) {
  return sc_kcuda_launch_on(c->stream, c->pdl != 0, cluster, false, kernel, grid, block, smem,
                            static_cast<Args &&>(args)...);
}

/* A launch without PDL, for a kernel of a few blocks that each compute much: launched
 * early, its blocks are placed beside the kernel before's, where that one leaves room,
 * and may crowd onto a few SMs. With the top-K ranking's 32 blocks (cuda_topk_radix.cu)
 * launched with PDL, a decode token's indexer op took 12-19 us more than without (over
 * 32k-128k keys, H200, 2026-12-04). */
template <typename... KernelArgs, typename... Args>
static inline cudaError_t sc_kcuda_launch_spread(const sc_kcuda *c, void (*kernel)(KernelArgs...),
                                                 dim3 grid, dim3 block, size_t smem,
                                                 Args &&...args) {
  return sc_kcuda_launch_on(c->stream, false, 1, false, kernel, grid, block, smem,
                            static_cast<Args &&>(args)...);
}

/* A cooperative launch (cudaLaunchAttributeCooperative: every block of the grid resident
 * at once, so blocks may wait for each other; the grid must fit the device), without
 * PDL: blocks launched early beside the kernel before's might not all find room. */
template <typename... KernelArgs, typename... Args>
static inline cudaError_t sc_kcuda_launch_coop(const sc_kcuda *c, void (*kernel)(KernelArgs...),
                                               dim3 grid, dim3 block, size_t smem,
                                               Args &&...args) {
  return sc_kcuda_launch_on(c->stream, false, 1, true, kernel, grid, block, smem,
                            static_cast<Args &&>(args)...);
}

/* The largest top-K this backend takes: the indexer's select and the attention's split
 * count are both sized for it. */
#define SC_KCUDA_TOPK_MAX 8192

/* Records the first error code a kernel raises; the host sees it at the next sync. */
__device__ inline void sc_dev_raise(int *flag, int code) { atomicCAS(flag, 0, code); }


/* ---- fp8_ds_mla (SPEC.md §7, kernels.h): [512 x e4m3][4 x f32 scale][64 x bf16] ---- */

__device__ inline float sc_dev_e4m3(uint8_t v) {
  __nv_fp8_e4m3 x;
  x.__x = v;
  return (float)x;
}

/* Element i (< 576) of an fp8_ds_mla row, dequantized. */
__device__ inline float sc_dev_fp8_elem(const uint8_t *row, int64_t i) {
  if (i < SC_KFP8_DS_MLA_NOPE) {
    const float s = *(const float *)(row + SC_KFP8_DS_MLA_SCALE_AT + 4 * (i / SC_KFP8_DS_MLA_TILE));
    return sc_dev_e4m3(row[i]) * s;
  }
  const uint16_t *rope = (const uint16_t *)(row + SC_KFP8_DS_MLA_ROPE_AT);
  return sc_bf16_to_f32(rope[i - SC_KFP8_DS_MLA_NOPE]);
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

/* The position of a nonzero key (of 0: -1, as sc_dev_topk_cand gives it). */
__device__ inline int32_t sc_dev_topk_pos(uint64_t key) {
  return (int32_t)(0xffffffffu - (uint32_t)key);
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
  c.pos = sc_dev_topk_pos(key);
  return c;
}

/* ---- tensor-core and asynchronous-copy helpers ---- */

/* 2^x by the special-function unit alone, results under 2^-126 flushed to 0. exp2f
 * without --use_fast_math also scales subnormal results (a compare and two predicated
 * multiplies around each ex2), which the softmax's probabilities never need: P is
 * rounded to bf16, and a term under 2^-126 of a sum whose largest term is >= 1 is lost
 * in any case. The same on every layout, so no token depends on it. */
__device__ inline float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Two floats -> packed bf16x2 (low half = a), one cvt.rn.bf16x2.f32: round to nearest
 * even, the same bits as sc_f32_to_bf16 (kernels/bf16.h) for every non-NaN value (NaN
 * stays NaN). */
__device__ inline uint32_t pack_bf16x2(float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *(const uint32_t *)&v;
}

/* Eight e4m3fn bytes (little-endian in v) -> eight bf16 of their values times scale, in
 * order (the conversion to f16 is exact, and so is scale 1: every e4m3 value is a bf16). */
__device__ inline uint4 e4m3x8_to_bf16x8(uint2 v, float scale) {
  const uint32_t w[2] = {v.x, v.y};
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w[i] & 0xffff),
                                                      __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w[i] >> 16),
                                                      __NV_E4M3);
    const float2 flo = __half22float2(*(const __half2 *)&lo);
    const float2 fhi = __half22float2(*(const __half2 *)&hi);
    o[2 * i] = pack_bf16x2(flo.x * scale, flo.y * scale);
    o[2 * i + 1] = pack_bf16x2(fhi.x * scale, fhi.y * scale);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

__device__ inline uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ inline void ldsm_x4(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

/* The same, each 8 x 8 matrix transposed on the way (an A fragment from a matrix stored
 * K-major, as V^T from V's rows). */
__device__ inline void ldsm_x4_trans(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

__device__ inline void cp_async16(void *dst, const void *src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)),
               "l"(src), "r"(pred ? 16 : 0));
}
/* 4 bytes global -> shared, asynchronous (the source 4-byte aligned); pred false writes
 * zeros. */
__device__ inline void cp_async4(void *dst, const void *src, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)),
               "l"(src), "r"(pred ? 4 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ inline void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
__device__ inline void cp_async_wait_one() { /* all but the newest group */
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

/* d += a * b, one m16n8k16 bf16 tile with f32 accumulation (the mma.sync fragment
 * layouts: a row-major 16 x 16, b column-major 16 x 8, d 16 x 8). */
__device__ inline void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static inline int64_t sc_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif
