/* backend_ipc_dev.cu - the kernels of backend_ipc (backend_ipc.h tells the protocol):
 * a round is a put and a combine, each waiting (one thread a block) for the peers' words
 * of the shared header, then moving its share of the bytes; the last block of each
 * publishes this member's word. Run on one H200 (2026-12-05) and one H100 (2026-12-06):
 * bench/gpu-step.md. */
#include "collectives/backend_ipc_dev.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "base/error.h"
#include "kernels/lse_math.h"

#define IPC_THREADS 256
#define IPC_BLOCKS_MAX 64 /* a round's bytes are a few MB at most: 64 SMs move them */
#define LSE_TILE 8        /* rows a block of the LSE round weighs at once (a step's few
                           * decode rows still spread over several blocks) */

/* The header words are written and read by kernels of other processes (MPS clients of
 * the same GPU), so they need a scope that holds those threads. GPU scope does: PTX's
 * .gpu scope is every thread on the same device, whatever process launched it, and an
 * ipc group is one device by construction (every rank on one GPU; backend_ipc.h); the
 * device's L2 is where the members' stores meet. System scope, used before, also orders
 * against the host and peer devices, which no reader here is: on one H100 (2026-12-06,
 * bench/gpu-step.md) GPU scope took a P4 N4 decode step from 0.576-0.592 ms to
 * 0.519-0.539 (the step's seven rounds each wait on the slowest member's words). The
 * failure record alone is read by the host: its fence stays at system scope. */
__device__ __forceinline__ uint64_t ld_acquire(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(uint64_t *p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t now_ns(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t *words(const sc_ipc_dev &d, int at) {
  return (uint64_t *)(d.region + at);
}
__device__ __forceinline__ unsigned char *block_of(const sc_ipc_dev &d, uint64_t s, int m) {
  return d.region + SC_IPC_DATA_AT + ((s & 1) * (uint64_t)d.members + (uint64_t)m) * d.block_bytes;
}

/* Thread 0 of a block: waits until every member's word at `at` reaches want. False on
 * the deadline or an abort (the comm's status raised and the failure recorded, once) or
 * when another wait of this rank failed meanwhile (the comm is dead: give up at once). */
__device__ bool ipc_wait(const sc_ipc_dev &d, int at, uint64_t want) {
  const uint64_t *w = words(d, at);
  const uint64_t t0 = now_ns();
  unsigned polls = 0;
  for (int m = 0; m < d.members; m++) {
    while (ld_acquire(w + m) < want) {
      int code = 0;
      if ((++polls & 63) == 0) {
        if (*(volatile int *)d.status != 0) return false;
        if (*d.abort_word != 0) code = SC_EABORTED;
        else if (d.timeout_ns != 0 && now_ns() - t0 > d.timeout_ns) code = SC_ETIMEDOUT;
      }
      if (code != 0) {
        if (atomicCAS(d.status, 0, code) == 0) {
          d.failure->call = d.call;
          d.failure->step_no = *(volatile uint64_t *)d.steps;
          __threadfence_system();
          d.failure->code = code;
        }
        return false;
      }
      __nanosleep(128);
    }
  }
  return true;
}

/* The last block of the grid to arrive at phase p publishes v at this member's word `at`
 * (every block's stores before it, by the fence each block makes first). */
__device__ void ipc_publish(const sc_ipc_dev &d, int p, int at, uint64_t v, bool advance) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  unsigned *arrive = (unsigned *)(d.region + SC_IPC_ARRIVE_AT) + p * 16 + d.me;
  if (atomicAdd(arrive, 1u) != gridDim.x - 1) return;
  *arrive = 0;
  __threadfence();
  st_release(words(d, at) + d.me, v);
  if (advance) *d.seq = v;
}

/* Copies n bytes (16-byte pieces when both ends allow), grid-stride; peers' bytes read
 * past L1 (__ldcg), which may hold a slot's lines from its use two rounds ago. */
__device__ void ipc_copy(unsigned char *dst, const unsigned char *src, uint64_t n, bool from_peer) {
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  if ((((uintptr_t)dst | (uintptr_t)src | n) & 15) == 0) {
    const uint4 *s = (const uint4 *)src;
    uint4 *o = (uint4 *)dst;
    for (uint64_t i = tid; i < n / 16; i += step) o[i] = from_peer ? __ldcg(s + i) : s[i];
  } else {
    for (uint64_t i = tid; i < n; i += step) dst[i] = from_peer ? __ldcg(src + i) : src[i];
  }
}

__device__ __forceinline__ float ipc_load(sc_dtype dt, const unsigned char *p, uint64_t i) {
  if (dt == SC_DT_BF16)
    return __bfloat162float(__ushort_as_bfloat16(__ldcg((const unsigned short *)p + i)));
  return __ldcg((const float *)p + i);
}

/* The start of a put or a combine: thread 0 waits until every member's word at `at` has
 * reached the round's number less `back`; the block learns the round (*s) and whether to
 * go on (false: the comm is dead, or the wait failed and recorded why). */
__device__ bool round_begin(const sc_ipc_dev &d, int at, uint64_t back, uint64_t *s) {
  __shared__ int go;
  __shared__ uint64_t s_sh;
  if (threadIdx.x == 0) {
    const uint64_t r = *d.seq + 1;
    s_sh = r;
    go = *d.status == 0 && ipc_wait(d, at, r >= back ? r - back : 0);
  }
  __syncthreads();
  *s = s_sh;
  return go != 0;
}

/* What a put copies into this member's block: `pieces` pieces of piece_bytes (piece p at
 * src + p * stride), back to back from byte `at` of the block. */
struct ipc_src {
  const unsigned char *src;
  uint64_t stride;
  int pieces;
  uint64_t piece_bytes, at;
};

__global__ void __launch_bounds__(IPC_THREADS) k_ipc_put(sc_ipc_dev d, ipc_src a, ipc_src b) {
  uint64_t s;
  /* slot s & 1 was last used by round s - 2: free once every member has read it */
  if (!round_begin(d, SC_IPC_READ_AT, 2, &s)) return;
  unsigned char *mine = block_of(d, s, d.me);
  for (const ipc_src *x : {&a, &b})
    for (int p = 0; p < x->pieces; p++)
      ipc_copy(mine + x->at + (uint64_t)p * x->piece_bytes, x->src + (uint64_t)p * x->stride,
               x->piece_bytes, false);
  ipc_publish(d, 0, SC_IPC_WRITTEN_AT, s, false);
}

__global__ void __launch_bounds__(IPC_THREADS)
    k_ipc_combine(sc_ipc_dev d, sc_coll_op op, sc_dtype dt, uint64_t piece_bytes,
                  unsigned char *recv, uint64_t recv_member_stride) {
  uint64_t s;
  if (!round_begin(d, SC_IPC_WRITTEN_AT, 0, &s)) return;
  if (op == SC_OP_ALL_GATHER) {
    for (int m = 0; m < d.members; m++)
      ipc_copy(recv + (uint64_t)m * recv_member_stride, block_of(d, s, m), piece_bytes, true);
  } else {
    const uint64_t es = dt == SC_DT_BF16 ? 2 : 4, n = piece_bytes / es;
    const uint64_t off = op == SC_OP_REDUCE_SCATTER ? (uint64_t)d.me * piece_bytes : 0;
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
      float acc = 0.0f; /* coll_reduce.h: 0 + the first, then the others in member order */
      for (int m = 0; m < d.members; m++) acc = acc + ipc_load(dt, block_of(d, s, m) + off, i);
      if (dt == SC_DT_BF16) ((__nv_bfloat16 *)recv)[i] = __float2bfloat16_rn(acc);
      else ((float *)recv)[i] = acc;
    }
  }
  ipc_publish(d, 1, SC_IPC_READ_AT, s, true);
}

/* The decode attention's merge in one round (sc_ipc_lse_round): each member's block holds
 * its LSE of n_rows rows, then from sc_ipc_lse_part_at its partial outputs (n_rows x width
 * f32). Per row i, the weights of lse_math.h over the members' LSE, then the sum over
 * members 0..G-1 of w_m * part_m, the product rounded before the add (__fmul_rn: no FMA)
 * and 0 for a weight of 0: bit for bit what lse_scale (kernels) and then a plain reduce
 * of the scaled parts (k_ipc_combine) give, as the plan's two collectives do elsewhere.
 * A block holds the weights of LSE_TILE rows at a time. */
__global__ void __launch_bounds__(IPC_THREADS)
    k_ipc_lse_combine(sc_ipc_dev d, sc_coll_op op, uint64_t n_rows, uint64_t width, float *recv) {
  __shared__ float lse_t[SC_IPC_MEMBERS_MAX * LSE_TILE], w[SC_IPC_MEMBERS_MAX * LSE_TILE];
  uint64_t s;
  if (!round_begin(d, SC_IPC_WRITTEN_AT, 0, &s)) return;
  const uint64_t G = (uint64_t)d.members, at = sc_ipc_lse_part_at(n_rows);
  const uint64_t rows_out = op == SC_OP_REDUCE_SCATTER ? n_rows / G : n_rows;
  const uint64_t row0 = op == SC_OP_REDUCE_SCATTER ? (uint64_t)d.me * rows_out : 0;
  const uint64_t w4 = width / 4;
  for (uint64_t t0 = (uint64_t)blockIdx.x * LSE_TILE; t0 < rows_out;
       t0 += (uint64_t)gridDim.x * LSE_TILE) {
    const uint64_t nt = rows_out - t0 < LSE_TILE ? rows_out - t0 : LSE_TILE;
    for (uint64_t j = threadIdx.x; j < G * LSE_TILE; j += blockDim.x) {
      const uint64_t m = j / LSE_TILE, r = j % LSE_TILE;
      lse_t[j] = r < nt ? __ldcg((const float *)block_of(d, s, (int)m) + row0 + t0 + r) : 0.0f;
    }
    __syncthreads();
    if (threadIdx.x < nt) {
      const double big_l = sc_lse_merged(lse_t, (int32_t)G, LSE_TILE, threadIdx.x);
      for (uint64_t m = 0; m < G; m++)
        w[m * LSE_TILE + threadIdx.x] = sc_lse_weight(lse_t[m * LSE_TILE + threadIdx.x], big_l);
    }
    __syncthreads();
    for (uint64_t x = threadIdx.x; x < nt * w4; x += blockDim.x) {
      const uint64_t r = x / w4;
      const uint64_t src = (row0 + t0) * w4 + x; /* float4s from the part's start */
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (uint64_t m = 0; m < G; m++) {
        const float f = w[m * LSE_TILE + r];
        const float4 o = __ldcg((const float4 *)(block_of(d, s, (int)m) + at) + src);
        acc.x = acc.x + (f == 0.0f ? 0.0f : __fmul_rn(f, o.x));
        acc.y = acc.y + (f == 0.0f ? 0.0f : __fmul_rn(f, o.y));
        acc.z = acc.z + (f == 0.0f ? 0.0f : __fmul_rn(f, o.z));
        acc.w = acc.w + (f == 0.0f ? 0.0f : __fmul_rn(f, o.w));
      }
      ((float4 *)recv)[t0 * w4 + x] = acc;
    }
    __syncthreads();
  }
  ipc_publish(d, 1, SC_IPC_READ_AT, s, true);
}

/* A round's blocks: 64 KB of its bytes a block, up to IPC_BLOCKS_MAX. */
static unsigned grid_of(uint64_t bytes) {
  const uint64_t per_block = (uint64_t)IPC_THREADS * 16 * 4;
  const uint64_t blocks = (bytes + per_block - 1) / per_block;
  return (unsigned)(blocks < 1 ? 1 : blocks > IPC_BLOCKS_MAX ? IPC_BLOCKS_MAX : blocks);
}

extern "C" int sc_ipc_round(const sc_ipc_dev *d, sc_coll_op op, sc_dtype dt, const void *send,
                            uint64_t send_stride, int32_t pieces, uint64_t piece_bytes,
                            void *recv, uint64_t recv_member_stride, void *stream) {
  if ((uint64_t)pieces * piece_bytes > d->block_bytes || d->members > SC_IPC_MEMBERS_MAX)
    return SC_EINVAL;
  const unsigned blocks =
      grid_of((uint64_t)pieces * piece_bytes * (op == SC_OP_ALL_GATHER ? d->members : 1));
  cudaStream_t st = (cudaStream_t)stream;
  const ipc_src a = {(const unsigned char *)send, send_stride, pieces, piece_bytes, 0}, none = {};
  k_ipc_put<<<blocks, IPC_THREADS, 0, st>>>(*d, a, none);
  k_ipc_combine<<<blocks, IPC_THREADS, 0, st>>>(*d, op, dt, piece_bytes, (unsigned char *)recv,
                                                recv_member_stride);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? 0 : SC_ESYS;
}

extern "C" int sc_ipc_lse_round(const sc_ipc_dev *d, sc_coll_op op, const float *lse,
                                const float *part, uint64_t n_rows, uint64_t width, float *recv,
                                void *stream) {
  const uint64_t at = sc_ipc_lse_part_at(n_rows), part_bytes = n_rows * width * sizeof(float);
  if (!sc_ipc_lse_shape_fits(d->members, d->block_bytes, op, n_rows, width) ||
      ((uintptr_t)part | (uintptr_t)recv) % 16 != 0)
    return SC_EINVAL;
  const uint64_t rows_out = op == SC_OP_REDUCE_SCATTER ? n_rows / (uint64_t)d->members : n_rows;
  const uint64_t tiles = (rows_out + LSE_TILE - 1) / LSE_TILE;
  const unsigned put_blocks = grid_of(at + part_bytes);
  const unsigned blocks =
      (unsigned)(tiles < 1 ? 1 : tiles > IPC_BLOCKS_MAX ? IPC_BLOCKS_MAX : tiles);
  cudaStream_t st = (cudaStream_t)stream;
  const ipc_src a = {(const unsigned char *)lse, 0, 1, n_rows * sizeof(float), 0};
  const ipc_src b = {(const unsigned char *)part, 0, 1, part_bytes, at};
  /* (put and combine may differ in blocks: each publishes once its own grid is done) */
  k_ipc_put<<<put_blocks, IPC_THREADS, 0, st>>>(*d, a, b);
  k_ipc_lse_combine<<<blocks, IPC_THREADS, 0, st>>>(*d, op, n_rows, width, recv);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? 0 : SC_ESYS;
}

__global__ void k_ipc_step_begin(uint64_t *steps) { *steps += 1; }

extern "C" int sc_ipc_step_begin(const sc_ipc_dev *d, void *stream) {
  k_ipc_step_begin<<<1, 1, 0, (cudaStream_t)stream>>>(d->steps);
  return cudaGetLastError() == cudaSuccess ? 0 : SC_ESYS;
}
