/* cuda_readback.cu - small reads into pinned host memory by a kernel rather than by a
 * copy (cuda_ctx.c: a step's deferred reads of a few hundred bytes, its tokens and their
 * margins, and the notify's read and reset of the error flag). Between two decode steps
 * the compute stream ran a copy for each (and a memset for the flag's reset) between the
 * step's last kernel and the next one's first: each a hand-over from the compute engine
 * to a copy engine and back. A kernel of a block does the same reads in stream order
 * among kernels. Pinned memory from cudaMallocHost is addressable from the device at its
 * host address (unified addressing); its stores are made visible to the host before the
 * kernel completes (__threadfence_system), and the host reads them only after an event
 * recorded behind the kernel (the notify's callback). */
#include "kernels/cuda/cuda_common.cuh"

#define RB_THREADS 256
#define RB_BLOCKS_MAX 32

__global__ void k_readback(const unsigned char *src, unsigned char *host, uint64_t n) {
  sc_dev_pdl_enter();
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  if ((((uintptr_t)src | (uintptr_t)host | n) & 15) == 0) {
    for (uint64_t i = tid; i < n / 16; i += step) ((uint4 *)host)[i] = ((const uint4 *)src)[i];
  } else {
    for (uint64_t i = tid; i < n; i += step) host[i] = src[i];
  }
  __threadfence_system();
}

/* The error flag to the host, and cleared: one thread, after the kernels before it (the
 * notify's read and reset, in stream order as the copy and the memset were). */
__global__ void k_flag_take(int *flag, int *host) {
  sc_dev_pdl_enter();
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  *(volatile int *)host = *(volatile int *)flag;
  *(volatile int *)flag = 0;
  __threadfence_system();
}

/* With lazy loading (CUDA 12's default) a kernel's first launch loads it, and a load waits
 * for the work the device is running: the first notify queued behind a long step blocked
 * the host for that step (test_gpu_kernels' case_notify: 0.30 s behind a 0.3 s kernel,
 * H100, 2026-12-07). Loading both at the context's creation keeps every notify a queue. */
extern "C" int sc_kcuda_readback_load(void) {
  cudaFuncAttributes a;
  return sc_kcuda_err(cudaFuncGetAttributes(&a, k_readback), "readback load") ||
                 sc_kcuda_err(cudaFuncGetAttributes(&a, k_flag_take), "readback load")
             ? SC_ESYS
             : 0;
}

extern "C" int sc_kcuda_read_small(sc_kcuda *c, void *host, const void *src, size_t bytes) {
  if (bytes == 0) return 0;
  uint64_t blocks = ((uint64_t)bytes / 16 + RB_THREADS - 1) / RB_THREADS;
  blocks = blocks < 1 ? 1 : blocks > RB_BLOCKS_MAX ? RB_BLOCKS_MAX : blocks;
  sc_kcuda_launch(c, k_readback, dim3((unsigned)blocks), dim3(RB_THREADS), 0,
                  (const unsigned char *)src, (unsigned char *)host, (uint64_t)bytes);
  return SC_CUDA_CHECK_LAUNCH("readback");
}

extern "C" int sc_kcuda_flag_take(sc_kcuda *c, int *host) {
  sc_kcuda_launch(c, k_flag_take, dim3(1), dim3(32), 0, c->err_flag, host);
  return SC_CUDA_CHECK_LAUNCH("flag take");
}
