/* backend_nccl.h - the NCCL implementation of sc_coll_ops (GPU ranks, one process per
 * GPU).
 *
 * One communicator per group instance of SPEC.md §1 (TP, PCP, DCP), created
 * non-blocking (ncclConfig_t.blocking = 0) inside one ncclGroupStart/End, so ranks may
 * initialise their groups in any order without deadlock. When P > 1 the DCP group is the
 * PCP group and shares its communicator. The unique ids are exchanged by the caller over
 * the control plane: the group's member 0 calls sc_nccl_get_unique_id and sends the id
 * to the other members (sc_nccl_id_owner says who creates which id).
 *
 * Semantics are coll.h's; buffers are device pointers. A collective is queued on the
 * backend's stream and the call returns once it has completed on the device (the comm
 * actor later moves to event-based completion; the deadline logic stays the same). While
 * waiting, the backend polls cudaStreamQuery and ncclCommGetAsyncError; when the
 * deadline passes it aborts the communicators with ncclCommAbort and returns
 * SC_ETIMEDOUT, and every later call returns SC_EABORTED. Initialisation has the same
 * deadline. Work queued on the stream before the collective counts against its deadline.
 *
 * reset (between steps) clears an abort request no collective acted on; communicators
 * that were aborted stay dead (NCCL cannot revive them): destroy and re-initialise with
 * fresh ids.
 *
 * Threads: the comm belongs to one thread (its rank's comm actor), except
 * sc_nccl_abort, which any thread may call: it raises a flag that the polling thread
 * acts on (ncclCommAbort is called by the owning thread, or by destroy).
 * Ownership: sc_nccl_comm_init fills comm with backend state that sc_nccl_comm_destroy
 * frees; a stream passed in stays the caller's, NULL makes the backend create its own.
 */
#ifndef SC_BACKEND_NCCL_H
#define SC_BACKEND_NCCL_H

#include <stdbool.h>
#include <stdint.h>

#include "collectives/coll.h"

/* An ncclUniqueId as plain bytes, so the control plane can carry it without NCCL. */
#define SC_NCCL_ID_BYTES 128
typedef struct sc_nccl_id {
  unsigned char bytes[SC_NCCL_ID_BYTES];
} sc_nccl_id;

/* A fresh unique id (ncclGetUniqueId). Any thread. */
int sc_nccl_get_unique_id(sc_nccl_id *out);

/* Whether global rank g must create the id of its instance of `group` (it is member 0 of
 * that group) and whether the group needs an id at all (false for DCP when P > 1: it
 * shares PCP's communicator). */
bool sc_nccl_id_needed(const sc_plan_config *cfg, sc_group group);
bool sc_nccl_id_owner(const sc_plan_config *cfg, int32_t global_rank, sc_group group);

/* Creates the communicators of global rank g on CUDA device `device`: ids[group] is the
 * unique id of g's instance of each group (ids[SC_GROUP_DCP] is ignored when P > 1).
 * stream is a cudaStream_t or NULL. deadline_ms bounds the initialisation and every
 * collective (<= 0: none). Fills comm (groups, ranks, vtable). Errors: SC_EINVAL,
 * SC_ENOTSUP (no device), SC_ETIMEDOUT (a peer never joined), SC_ESYS (NCCL or CUDA). */
int sc_nccl_comm_init(const sc_plan_config *cfg, int32_t global_rank, int device,
                      const sc_nccl_id ids[SC_GROUP_COUNT], void *stream, int64_t deadline_ms,
                      sc_comm *comm);

/* Aborts (if needed) and frees the communicators; the comm must not be used afterwards. */
void sc_nccl_comm_destroy(sc_comm *comm);

/* The backend's stream (cudaStream_t): collectives run on it, in call order. */
void *sc_nccl_comm_stream(const sc_comm *comm);

/* Makes the collective in progress (if any) and every later one fail with SC_EABORTED;
 * the communicators are aborted by the owning thread. Any thread. */
void sc_nccl_abort(sc_comm *comm);

#endif
