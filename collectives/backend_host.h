/* backend_host.h - collectives between node processes over ZeroMQ (the CPU backend, and
 * several ranks sharing one GPU with buffers staged through host memory).
 *
 * Every rank binds one ROUTER socket on its data endpoint and connects one DEALER to the
 * endpoint of each rank it shares a group with; the DEALER's identity is the sender's
 * rank, so a received message names its source. A message is
 *     [header: epoch u64, group u32, seq u32] [payload]
 * where seq counts the collectives of that group within the epoch. Because every member
 * runs the same planned sequence of collectives on a group (the plan check in front of
 * this backend guarantees it), (epoch, group, seq, source) identifies one block; a block
 * that arrives early (a peer already in the next collective) is kept until it is needed,
 * one from an earlier epoch is dropped.
 *
 * Algorithms: direct exchange. all_gather sends the local block to every other member;
 * all_reduce sends the whole buffer to every member and each sums all G buffers in
 * group-rank order (bit-identical on every member); reduce_scatter sends block k to
 * member k. That is G-1 messages per member and suits the small groups (<= 8) and the
 * loopback/ipc transports of a CPU cluster; it is not bandwidth-optimal on a network.
 *
 * Deadlines and failure: each collective waits at most sc_host_comm_config.deadline_ms
 * (SC_ETIMEDOUT); sc_coll_ops.abort (any thread) wakes a blocked collective with
 * SC_EABORTED and fails later ones until sc_host_comm_reset. A failed step is left
 * behind by calling sc_host_comm_reset with a new epoch on every rank (the step number):
 * counters restart and stale blocks are discarded.
 *
 * Ownership and threads: the backend owns its sockets; one thread (the rank's executor)
 * runs collectives; abort may come from another thread.
 */
#ifndef SC_BACKEND_HOST_H
#define SC_BACKEND_HOST_H

#include <stdint.h>

#include "collectives/coll.h"

typedef struct sc_host_comm_config {
  int32_t rank;                     /* my global rank */
  const char *const *endpoints;     /* [world size] data endpoint of every rank */
  int64_t deadline_ms;              /* per collective; <= 0: none */
  void *zmq_context;                /* shared context, or NULL for a private one */
} sc_host_comm_config;

/* Binds my endpoint, connects to my group peers and fills comm (ops, groups, deadline).
 * cfg must be valid. Errors: SC_EIO with the endpoint and ZeroMQ's reason in d. */
int sc_host_comm_create(sc_comm *comm, const sc_plan_config *cfg,
                        const sc_host_comm_config *hc, sc_diag *d);

/* Starts a new epoch (normally the step number; must increase): clears the abort state,
 * restarts the per-group counters and drops blocks of earlier epochs. */
void sc_host_comm_reset(sc_comm *comm, uint64_t epoch);

/* Closes the sockets (linger 0) and frees the backend. */
void sc_host_comm_destroy(sc_comm *comm);

#endif
