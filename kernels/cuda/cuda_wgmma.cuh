/* cuda_wgmma.cuh - Hopper's warpgroup matrix products (wgmma, sm_90a) as the kernels use
 * them: the 128-byte-swizzled shared-memory layout, its descriptors, the fences, the
 * instruction shapes, the mbarriers and named barriers of blocks whose warpgroups take
 * roles, and the shared-memory operations of clusters of blocks. Shared by the sparse
 * attention (cuda_attn.cu, cuda_attn_ws.cuh and its two kernels) and the indexer's
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

/* v as every lane of the warp holds it, broadcast from lane 0 so that ptxas can prove it
 * warp-uniform (as CUTLASS's canonical_warp_group_idx does). A descriptor built from
 * threadIdx.x (a warpgroup's index) or from a loaded value stays in ordinary registers and
 * is moved to uniform ones (R2UR) before every wgmma: 32 of the 187 instructions of the
 * 64-head scoring kernel's pass over a token's 64 keys. With the scorers' bases broadcast,
 * k_idx_dense's R2UR went from 16 to 4 and the bf16 k_idx_tc's from 35 to 27, and 1024
 * causal tokens of 64 heads from 1,017 to 995 us (H100, 2026-12-06). The caller passes a
 * value that is uniform already: lane 0's is every lane's. */
__device__ inline uint32_t wg_uniform(uint32_t v) { return __shfl_sync(0xffffffffu, v, 0); }

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
/* Waits until at most the newest committed group is pending. */
__device__ inline void wg_wait1() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
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
/* The same for the A fragments of register-sourced wgmma (P V): pinned after the wait,
 * they stay live, in their registers, until the hardware has read them (a register the
 * compiler thought free could be reused under an in-flight wgmma). */
__device__ inline void wg_pin_a(uint32_t (&a)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) asm volatile("" : "+r"(a[i][j])::"memory");
}

/* The f32 accumulator operands d[i] .. d[i + 7] of a wgmma asm statement. */
#define WG_D8(i)                                                                          \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),              \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

/* The asm operands %0 .. %31: the 32 accumulators of an m64n64 wgmma (WG_D8 x 4). */
#define WG_ACC32                                                                          \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"

/* d (+)= A B^T, A and B K-major in shared memory; scale_d 0 overwrites d. */
__device__ inline void wgmma_m64n32(float d[16], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
      "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : WG_D8(0), WG_D8(8)
      : "l"(da), "l"(db), "r"(scale_d));
}

__device__ inline void wgmma_m64n64(float d[32], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" WG_ACC32
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
      : "l"(da), "l"(db), "r"(scale_d));
}

/* d (+)= A B^T over e4m3 values, A and B K-major in shared memory (k32: the same 32 bytes
 * of a 128-byte row as a bf16 k16 step); scale_d 0 overwrites d. */
__device__ inline void wgmma_m64n64_e4m3(float d[32], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {" WG_ACC32
      "}, %32, %33, p, 1, 1;\n}\n"
      : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
      : "l"(da), "l"(db), "r"(scale_d));
}

/* d += A B, A from registers (4 per thread: the m16n8k16 A fragment of the thread's
 * warp rows), B N-major in shared memory. */
__device__ inline void wgmma_m64n128_rs(float d[64], const uint32_t a[4], uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
      "}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
      : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48),
        WG_D8(56)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* The 128 accumulators of an m64n256 wgmma: asm operands %0 .. %127. */
#define WG_D128                                                                          \
  WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56),    \
      WG_D8(64), WG_D8(72), WG_D8(80), WG_D8(88), WG_D8(96), WG_D8(104), WG_D8(112),        \
      WG_D8(120)
#define WG_ACC128                                                                        \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                               \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"                     \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"                     \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"                     \
  "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"                     \
  "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"                     \
  "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"         \
  "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"

/* d += A B over 256 columns, A from registers (as wgmma_m64n128_rs), B N-major in shared
 * memory. */
__device__ inline void wgmma_m64n256_rs(float d[128], const uint32_t a[4], uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" WG_ACC128
               "}, {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
               : WG_D128
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* d += A B over 256 columns, A K-major and B N-major, both in shared memory. */
__device__ inline void wgmma_m64n256_ss(float d[128], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" WG_ACC128
               "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
               : WG_D128
               : "l"(da), "l"(db), "r"(1));
}
#undef WG_ACC128
#undef WG_D128
#undef WG_D8

/* ---- mbarriers and named barriers, for blocks whose warpgroups take roles ----
 *
 * An mbarrier in shared memory completes a phase when `count` arrivals have come; a
 * waiter names the phase by its parity (the n-th completion has parity n % 2). Arrivals
 * release and waits acquire (CTA scope), so what a thread wrote before arriving is
 * visible to a thread past the wait. */
__device__ inline void mbar_init(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
}
__device__ inline void mbar_arrive(uint64_t *bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(
                   smem_u32(bar))
               : "memory");
}
/* One arrival once every cp.async this thread issued before has landed (counted in the
 * barrier's `count`: noinc). */
__device__ inline void mbar_arrive_cp_async(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar))
               : "memory");
}
/* Waits until phase `parity` of the barrier completed. CLUSTER: acquiring at cluster
 * scope, for a barrier that another block's threads arrive at (what they did before
 * arriving is visible after). */
#define SC_MBAR_WAIT_ASM(sem)                                                                  \
  "{\n.reg .pred done;\nWAIT:\nmbarrier.try_wait.parity" sem                                   \
  ".shared::cta.b64 done, [%0], %1;\n@!done bra WAIT;\n}\n"
template <bool CLUSTER = false>
__device__ inline void mbar_wait(uint64_t *bar, unsigned parity) {
  if (CLUSTER)
    asm volatile(SC_MBAR_WAIT_ASM(".acquire.cluster")::"r"(smem_u32(bar)), "r"(parity)
                 : "memory");
  else
    asm volatile(SC_MBAR_WAIT_ASM("")::"r"(smem_u32(bar)), "r"(parity) : "memory");
}
/* One arrival that also expects `bytes` more of asynchronous writes (st.async, TMA) in the
 * current phase: the phase completes when its arrivals have come and those bytes landed
 * (the bytes may land before the expectation is posted: the count goes negative). */
__device__ inline void mbar_arrive_expect_tx(uint64_t *bar, unsigned bytes) {
  asm volatile("{\n.reg .b64 st;\n"
               "mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}

/* ---- clusters of blocks (distributed shared memory) ----
 *
 * A block's shared-memory address (smem_u32) names its own; mapa turns it into the same
 * place in block `rank` of the cluster, which st.async writes and mbarrier arrivals of
 * cluster scope take. */
__device__ inline unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ inline uint32_t cluster_addr(const void *p, unsigned rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_u32(p)), "r"(rank));
  return r;
}
/* 16 bytes into another block's shared memory at cluster address dst, counted (16 bytes
 * of transaction) on the mbarrier at cluster address bar in that block. */
__device__ inline void st_async16(uint32_t dst, uint4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 "
               "[%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(dst),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
               : "memory");
}
/* An arrival on the mbarrier at cluster address bar (another block's), with the default
 * semantics (release at CTA scope), as CUTLASS's ClusterBarrier::arrive(cta_id): for an
 * arrival that hands back a buffer this block has finished reading by operations already
 * complete (wgmma after its wait_group), which is all the sparse attention's clusters
 * do. A release at cluster scope (.release.cluster) waited like a memory barrier in
 * every consumer thread every tile: 12% of the fp8 decode's stall samples (ncu, H100,
 * 2026-12-06, bench/kernels-cuda.md). */
__device__ inline void mbar_arrive_remote(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* cluster_sync: every thread of every block of the cluster waits for all; what each did
 * before (mbarrier inits after fence_mbar_init included) is visible to all after. A
 * cluster kernel passes it after setting up its barriers, before any block touches
 * another's, and once more before exiting, so that no block exits while another may
 * still write into its shared memory or arrive at its barriers. */
__device__ inline void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}

/* Named barrier `id` (1-15; 0 is __syncthreads') of n threads: arrive and go on, or
 * arrive and wait for all n. */
__device__ inline void named_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ inline void named_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
/* The same wait where the threads that block reach it from different code (each role
 * from its own branch): bar.sync is barrier.sync.aligned, whose contract is that all the
 * threads blocking in one generation execute the same instruction, and compute-sanitizer's
 * synccheck holds kernels to it ("Divergent thread(s) in block"). The unaligned form costs
 * more a call, so it is for waits outside the tile loops. */
__device__ inline void named_sync_unaligned(int id, int n) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

#endif
