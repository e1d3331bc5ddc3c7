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
 * Semantics are coll.h's; buffers are device pointers. Streams: the backend owns a comm
 * stream; the caller's compute stream is where the collectives sit in program order.
 * `run` only queues: the comm stream waits for an event recorded on the compute stream
 * (the inputs are written), runs the collective between two timing events, and the
 * compute stream waits for the end event, so the host never waits for a collective and
 * compute queued before or after it may overlap other ranks' progress. A host function
 * after each collective counts completions; the owner learns of them through a watch.
 *
 * Deadlines and aborts. Nobody blocks in a collective any more, so the owner (the comm
 * actor) runs the watch: sc_nccl_set_watch registers a function called (from any
 * thread) when collectives become outstanding and when the last one completes, and the
 * owner then calls sc_nccl_watch on its own thread, which checks NCCL's asynchronous
 * errors and the deadline of the oldest outstanding collective (its clock starts when
 * the comm stream reaches it, seen by the watch: the compute queued ahead of it does not
 * count, its wait for the peers does) and aborts the
 * communicators with ncclCommAbort when one fails or passes. Once the step's work has
 * drained, `finish` reports the failure (SC_ETIMEDOUT, SC_EABORTED, SC_ESYS) and which
 * collective it concerned, or each collective's device time. Aborted communicators stay
 * dead: every later call fails with SC_EABORTED; reset (between steps) clears an abort
 * request no collective acted on. Initialisation has the same deadline.
 *
 * Threads: run, reset and finish on the executor's thread; abort from any thread;
 * sc_nccl_watch on the owner's. One mutex serialises the NCCL calls among them; an
 * abort raises a flag first, so an enqueue waiting for NCCL gives way to it. All
 * distinct communicators are aborted at once, each on a thread of its own: they share the
 * comm stream, and ncclCommAbort waits for the work queued ahead of its own kernels.
 * Ownership: sc_nccl_comm_create fills comm with backend state that sc_nccl_comm_destroy
 * frees; the compute stream stays the caller's (NULL: the legacy default stream).
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
 * compute_stream is the caller's cudaStream_t (NULL: the legacy default stream).
 * deadline_ms bounds the initialisation and every collective (<= 0: none). Fills comm
 * (groups, ranks, vtable). Errors: SC_EINVAL, SC_ENOTSUP (no device), SC_ETIMEDOUT (a
 * peer never joined), SC_ESYS (NCCL or CUDA). */
int sc_nccl_comm_create(sc_comm *comm, const sc_plan_config *cfg, int32_t global_rank,
                        int device, const sc_nccl_id ids[SC_GROUP_COUNT],
                        void *compute_stream, int64_t deadline_ms);

/* Aborts (if needed) and frees the communicators; the comm must not be used afterwards. */
void sc_nccl_comm_destroy(sc_comm *comm);

/* The backend's comm stream (cudaStream_t): collectives run on it, in call order. */
void *sc_nccl_comm_stream(const sc_comm *comm);

/* Aborts the communicators: the collectives in flight return and every later one fails
 * with SC_EABORTED. Any thread; returns once they are aborted (ncclCommAbort waits for
 * the work queued ahead of the aborted collectives: bounded, measured at about 2 s behind
 * 1.5 s of queued work on the H200). */
void sc_nccl_abort(sc_comm *comm);

/* How often sc_nccl_watch wants to run while collectives are outstanding, to see NCCL's
 * asynchronous errors (a peer's network failure) between deadlines. */
#define SC_NCCL_WATCH_POLL_MS 20

/* Registers fn(arg), called from any thread (the executor's, or CUDA's callback thread)
 * whenever the owner should run sc_nccl_watch: collectives became outstanding, or the
 * last outstanding one completed. fn must be quick and must not call into the backend
 * (uv_async_send is the intended use). NULL unregisters; after the call returns fn is
 * never called again. No-op for a comm that is not NCCL's. */
void sc_nccl_set_watch(sc_comm *comm, void (*fn)(void *arg), void *arg);

/* The watch, on the owner's thread: aborts the communicators when NCCL reports an
 * asynchronous error or the oldest outstanding collective is past its deadline. Returns
 * the milliseconds after which to call again, or -1 when nothing is outstanding (wait for
 * the next fn call). */
int64_t sc_nccl_watch(sc_comm *comm);

#endif
