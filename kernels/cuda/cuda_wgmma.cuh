/* cuda_wgmma.cuh - Hopper's warpgroup matrix products (wgmma, sm_90a) as the kernels use
 * them: the 128-byte-swizzled shared-memory layout, its descriptors, the fences and the
 * instruction shapes. Shared by the sparse attention (cuda_attn.cu) and the indexer's
 * scoring of tokens of 64 head rows (cuda_indexer_tile.cuh); not a public header.
 *
 * A warpgroup is 4 consecutive warps (128 threads) that issue each wgmma together. The
 * f32 accumulator of m64nNk16 is the mma.sync m16n8 fragment repeated: warp w of the
 * warpgroup holds rows 16 w + lane / 4 (d[4 j], d[4 j + 1]) and 16 w + lane / 4 + 8
 * (d[4 j + 2], d[4 j + 3]), columns 8 j + 2 (lane % 4) and the one after. */
#ifndef SC_KERNELS_CUDA_WGMMA_CUH
#define SC_KERNELS_CUDA_WGMMA_CUH

#include "kernels/cuda/cuda_common.cuh"

/* Byte offset of 16-byte chunk p (elements 8p..8p+7) of row r in a tile of n_rows rows in
 * the 128-byte-swizzled K-major layout: column blocks of 64 elements (cb = p / 8), each
 * n_rows x 128 bytes in atoms of 8 rows x 128 bytes (1024 bytes, 1024-aligned), chunk
 * c = p % 8 of row r stored at c ^ (r % 8). */
__device__ inline uint32_t wg_off_n(int n_rows, int r, int p) {
  return (uint32_t)((p >> 3) * (n_rows * 128) + (r >> 3) * 1024 + (r & 7) * 128 +
                    (((p & 7) ^ (r & 7)) << 4));
}
template <int N_ROWS>
__device__ inline uint32_t wg_off(int r, int p) {
  return wg_off_n(N_ROWS, r, p);
}

/* A wgmma shared-memory matrix descriptor, 128-byte swizzle: start address, leading and
 * stride byte offsets (16-byte units), mode 1 in bits 62-63. For a K-major operand in the
 * layout above: SBO = 1024 (the next 8 rows), LBO unused (a k16 step stays inside a
 * 128-byte row): k16 step s of column block cb starts at cb * n_rows * 128 + 32 s. */
__device__ inline uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
         ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

/* desc moved on by `bytes` (a multiple of 16): the address field of a shared-memory
 * descriptor never carries out of its 14 bits, so one 32-bit add of the low word does
 * it where a 64-bit add took two. */
__device__ inline uint64_t wg_desc_add(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = (uint32_t)desc + (bytes >> 4), hi = (uint32_t)(desc >> 32);
  return ((uint64_t)hi << 32) | lo;
}

__device__ inline void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ inline void wg_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/* Ordinary stores (and cp.async) write through the generic proxy; wgmma reads through the
 * async proxy: each writing thread fences before the barrier that publishes the data. */
__device__ inline void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* Keeps the compiler from moving accumulator reads or writes across the async wgmma. */
template <int N>
__device__ inline void wg_pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* d (+)= A B^T, A and B K-major in shared memory; scale_d 0 overwrites d. */
__device__ inline void wgmma_m64n32(float d[16], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
      "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(scale_d));
}

__device__ inline void wgmma_m64n64(float d[32], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
        "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d));
}

#endif
