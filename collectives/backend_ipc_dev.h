/* backend_ipc_dev.h - the device side of backend_ipc (backend_ipc.h): one group
 * instance's view of the shared region, and the launch of one round of a collective
 * (put, then combine) on a stream. Not a public header. */
#ifndef SC_BACKEND_IPC_DEV_H
#define SC_BACKEND_IPC_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hostdev.h"
#include "collectives/backend_ipc.h" /* SC_IPC_MEMBERS_MAX */
#include "plan/coll_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Header words of a region (bytes from its base), then the slots. */
#define SC_IPC_WRITTEN_AT 0                                    /* u64 [MEMBERS_MAX] */
#define SC_IPC_READ_AT 128                                     /* u64 [MEMBERS_MAX] */
#define SC_IPC_ARRIVE_AT 256                                   /* u32 [2][MEMBERS_MAX] */
#define SC_IPC_NOTE_AT 384 /* SC_IPC_NOTE_BYTES of member 0's note (backend_ipc.h) */
#define SC_IPC_DATA_AT 512

/* Where a rank's comm records its first failure: host-mapped, so that `finish` reads it
 * without a copy; written once, by the wait that won the device status word. */
typedef struct sc_ipc_failure {
  int32_t code;     /* 0, SC_ETIMEDOUT or SC_EABORTED */
  int32_t call;     /* the plan position of the collective that failed */
  uint64_t step_no; /* the device's count of steps with collectives then (its step) */
} sc_ipc_failure;

typedef struct sc_ipc_dev {
  unsigned char *region;   /* the group's region, mapped in this process */
  int32_t members, me;
  uint64_t block_bytes;    /* a member's block in a slot (a multiple of 256) */
  uint64_t *seq;           /* this rank's count of the group's rounds (device) */
  uint64_t *steps;         /* this rank's count of steps with collectives (device): a
                            * failure records it, so the host knows whose step failed
                            * when two are queued (sc_ipc_step_begin) */
  int *status;             /* this rank's comm status (device): 0, or the code it died
                            * with; every round reads it first (a dead comm moves nothing) */
  volatile sc_ipc_failure *failure; /* host-mapped (device address): the first failure */
  const volatile int *abort_word;   /* host-mapped: nonzero aborts */
  uint64_t timeout_ns;     /* a wait's bound (0: none) */
  int32_t call;            /* the collective's plan position, for the failure record */
} sc_ipc_dev;

/* One round of a collective, queued on `stream` (a cudaStream_t): put copies this
 * member's `pieces` pieces of piece_bytes each (piece p at send + p * send_stride) into
 * its block, back to back; combine then writes, for op
 *   ALL_GATHER:     member m's piece 0 to recv + m * recv_member_stride;
 *   ALL_REDUCE:     the sum over the members of their piece 0 (elements of dt) to recv;
 *   REDUCE_SCATTER: the sum over the members of their piece `me` to recv.
 * Sums run over members 0..G-1 in order, in f32 (bf16 widened, rounded once at the end). */
int sc_ipc_round(const sc_ipc_dev *d, sc_coll_op op, sc_dtype dt, const void *send,
                 uint64_t send_stride, int32_t pieces, uint64_t piece_bytes, void *recv,
                 uint64_t recv_member_stride, void *stream);

/* The decode attention's LSE merge in one round where the plan has two (the LSE's
 * all_gather and the partial outputs' all_reduce or reduce_scatter; backend_ipc.h): put
 * copies this member's lse (n_rows f32) and part (n_rows x width f32) into its block,
 * the part from byte sc_ipc_lse_part_at(n_rows); combine writes to recv, for op
 *   ALL_REDUCE:     per row i, Σ_m w_m(i) * part_m[i] over members 0..G-1 in order;
 *   REDUCE_SCATTER: the same for member me's n_rows / G rows only (rows me * n_rows / G..),
 * w_m(i) the weight of lse_math.h over the members' lse of row i, each product rounded
 * before its add: bit for bit the gather, kernels' lse_scale and the reduce of the
 * scaled parts. SC_EINVAL (nothing queued) where the two do not fit one block, width is
 * not a multiple of 4, or part or recv is not 16-byte aligned. */
int sc_ipc_lse_round(const sc_ipc_dev *d, sc_coll_op op, const float *lse, const float *part,
                     uint64_t n_rows, uint64_t width, float *recv, void *stream);

/* Where an LSE round's partial outputs start in a member's block (its lse first). */
SC_HOSTDEV uint64_t sc_ipc_lse_part_at(uint64_t n_rows) {
  return (n_rows * sizeof(float) + 255) / 256 * 256;
}

/* Whether one LSE round takes op over n_rows rows of width f32 for `members` members
 * with blocks of block_bytes: the rule backend_ipc.c offers it by (lse_fits) and
 * sc_ipc_lse_round holds a launch to. */
SC_HOSTDEV bool sc_ipc_lse_shape_fits(int32_t members, uint64_t block_bytes, sc_coll_op op,
                                      uint64_t n_rows, uint64_t width) {
  return members >= 2 && members <= SC_IPC_MEMBERS_MAX && width % 4 == 0 &&
         (op == SC_OP_ALL_REDUCE ||
          (op == SC_OP_REDUCE_SCATTER && n_rows % (uint64_t)members == 0)) &&
         sc_ipc_lse_part_at(n_rows) + n_rows * width * sizeof(float) <= block_bytes;
}

/* Queued before the first collective of a step (plan position 0): counts the step on
 * the device (*d->steps += 1), in stream order, so that a replayed graph counts too. */
int sc_ipc_step_begin(const sc_ipc_dev *d, void *stream);

#ifdef __cplusplus
}
#endif

#endif
