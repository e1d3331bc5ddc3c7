/* kernels_cuda.h - the CUDA backend of the kernel API (kernels/kernels.h) for sm_90.
 *
 * A context binds one device and one stream: every op is queued on that stream in call
 * order and returns without waiting, except copy to host (returns once the host memory
 * holds the data) and sync. Buffers come from cudaMallocAsync on the stream; host copies
 * go through pinned staging buffers, so a host source may be reused as soon as copy
 * returns. Index errors found by kernels (SC_ERANGE) are recorded in a device flag and
 * reported by the next sync or copy to host, as kernels.h allows.
 *
 * Precision: gemm is f32 through cuBLAS with TF32 off unless sc_kernels_cuda_set_tf32
 * turns it on; elementwise ops, LSE merge and f32-KV attention compute in f32 on CUDA
 * cores; the indexer scores on the tensor cores with bf16 operands (q and f32 keys
 * rounded to bf16, f32 accumulation and head sum: cuda_indexer.cu), so its picks may
 * differ from the f32 CPU reference among keys whose scores lie within that rounding,
 * while every rank and layout of a GPU run scores each pair bit-identically; attention
 * over bf16 and fp8_ds_mla KV with dc = 512, dr = 64 and 16-byte aligned rows runs on
 * the tensor cores with bf16 operands (q rounded to bf16, softmax in f32, f32
 * accumulation), other shapes on the f32 warp path.
 *
 * Threads: as kernels.h; the context's stream and cuBLAS handle are used only by the
 * thread driving the context. create makes `device` current on the calling thread and
 * the ops rely on it staying current there (sparsecp drives one GPU per process). Ownership: a stream passed in stays the caller's; a NULL
 * stream makes the context create (and destroy) its own non-blocking stream.
 */
#ifndef SC_KERNELS_CUDA_H
#define SC_KERNELS_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a context on CUDA device `device` (ordinal) queueing on `stream` (a
 * cudaStream_t, or NULL for a stream of its own). k->device is "cuda". Returns SC_ENOTSUP
 * when there is no usable device (the caller's cue to skip), SC_ENOMEM, SC_ESYS. */
int sc_kernels_cuda_create(sc_kernels **out, int device, void *stream);

/* The context's stream (a cudaStream_t), for callers that order their own work (events,
 * NCCL) against the ops. */
void *sc_kernels_cuda_stream(sc_kernels *k);

/* Lets gemm use TF32 tensor cores (about 1e-3 relative error instead of f32 rounding).
 * Off by default: the reference-check path must stay f32. Returns 0 or an SC_E* code. */
int sc_kernels_cuda_set_tf32(sc_kernels *k, bool on);

/* Tells the context that `ranks` processes' kernels (this one's included) may run at once
 * on its GPU: ranks sharing it as clients of one MPS server. A cooperative launch's blocks
 * wait for one another, so each process's grids then take at most a 1/ranks share of the
 * SMs (the radix select's, the fused indexer's): two grids that each held part of the
 * SMs while waiting for the rest would never finish, and neither would the collectives
 * of the other ranks waiting for them. Default 1 (the whole GPU); set it before the first
 * step. Returns 0 or SC_EINVAL (ranks < 1). */
int sc_kernels_cuda_set_gpu_ranks(sc_kernels *k, int ranks);

/* Device memory that the other processes on this context's GPU may map (CUDA IPC):
 * share_alloc allocates `bytes` on the current device outside the stream-ordered pool
 * (whose buffers cannot be exported) and fills handle (SC_KCUDA_SHARE_HANDLE_BYTES)
 * for share_open in another process; share_free frees it (after every importer closed
 * it: freeing an exported allocation first is undefined). share_open maps a handle,
 * share_close unmaps. A process cannot open its own handle. Used for the weights that
 * the ranks of one GPU share (actors/rank_ctx.c). */
#define SC_KCUDA_SHARE_HANDLE_BYTES 64
int sc_kernels_cuda_share_alloc(size_t bytes, void **mem,
                                unsigned char handle[SC_KCUDA_SHARE_HANDLE_BYTES]);
void sc_kernels_cuda_share_free(void *mem);
int sc_kernels_cuda_share_open(const unsigned char handle[SC_KCUDA_SHARE_HANDLE_BYTES],
                               void **mem);
void sc_kernels_cuda_share_close(void *mem);

/* Tells the context that buffers its ops read were replaced by others (the weights moved
 * into shared memory): steps recorded before are stale and are recorded again. */
void sc_kernels_cuda_forget_recordings(sc_kernels *k);

/* Number of CUDA devices usable by this process (0 when there is no driver or device). */
int sc_cuda_device_count(void);

/* The SC_E* code of a CUDA runtime error (a cudaError_t as int; 0 for success):
 * SC_EDEVICE for the errors that leave the context unusable (every later call returns
 * them: an illegal address, a failed launch, ...), SC_ENOMEM, else SC_ESYS. For other
 * layers' CUDA calls (the NCCL backend) to report a failed device as the kernels do. */
int sc_cuda_status(int cuda_error);

#ifdef __cplusplus
}
#endif

#endif
