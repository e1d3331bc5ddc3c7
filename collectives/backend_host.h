/* backend_host.h - collectives between node processes over ZeroMQ (the CPU backend, and
 * several ranks sharing one GPU with buffers staged through host memory).
 *
 * Every rank binds one ROUTER socket on its data endpoint and connects one DEALER to the
 * endpoint of each rank it shares a group with; a received message names its source
 * (the DEALER's identity "r<rank>", or with CURVE the key it connected with). A message is
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
 * Who may send what. A rank keeps a block only when the plan says a peer sends it; the
 * rest is refused as it is read from the socket: freed at once, never held, counted
 * (sc_host_comm_get_stats) and logged at WARN at a bounded rate (one line per source per
 * 10 s, with the number held back). In order:
 *   - source: with CURVE keys (sc_host_comm_config) the rank named by the message's
 *     User-Id, which the ZAP handler gives the connection from the rank key it proved it
 *     holds (zap.h); without keys the DEALER identity, exactly "r<rank>" (decimal, no
 *     leading zero or sign, within the world). None, or this rank itself: refused.
 *   - epoch: a block of an earlier step is dropped silently (a peer of an aborted step;
 *     no offence). A later step is usually the next, but may be further when this rank
 *     never entered a step (its abort came first): one block per (source, group) is
 *     held for all later steps together, the one of the latest step (a source that
 *     sends for a step after the one it sent for before has failed that one: the block
 *     held for it would never be taken, and is dropped unsaid).
 *   - group: one of this rank's groups with the source as a member.
 *   - seq: in the current step the collective running or the next one of that group; in
 *     a later step its first. A peer is never further ahead: it finishes a collective
 *     only with this rank's block, which this rank sends on entering it (so at most one
 *     collective ahead), and a peer in a later step, whose plan this rank has not seen
 *     yet, cannot pass the first collective of a group it shares with this rank. A block
 *     of a collective this rank has left (it failed before the block came) is dropped
 *     silently, as one of an earlier step.
 *   - the plan: when the step's plan is known (expect), the seq must be one of its
 *     collectives of that group and the size exactly its block (sc_coll_block_bytes);
 *     otherwise at most max_block_bytes (when set). Blocks held for a later step are
 *     checked again when its plan arrives; those that do not fit are dropped and counted.
 *   - one block per (step, group, seq, source): a second is refused.
 * Without a plan (run called directly, without a session: the tests) every rule but the
 * plan's holds, and the size is checked when the collective takes the block (SC_EDESYNC
 * naming the sender), as it always was.
 *
 * Memory for blocks held and not yet taken (sc_host_comm_stats.held_bytes), with peers =
 * the ranks other than this one in its groups (at most world - 1) and B =
 * max_block_bytes:
 *   later steps:  at most one block per (peer, group), each <= B (or of its planned
 *                 size, once that plan is known): <= peers * SC_GROUP_COUNT * B;
 *   current step: at most two blocks per (peer, group), for the collective running and
 *                 the next: with the plan, blocks of the plan, of their planned sizes
 *                 (never more than the plan's own blocks for this rank); without, <= B.
 * With B = sc_plan_max_block_bytes(cfg, the most tokens a step schedules), which every
 * planned block is within, that is <= 3 * peers * SC_GROUP_COUNT * B in all. B = 0 lifts
 * the size limit where there is no plan (the counts stay). Messages ZeroMQ has queued
 * and the backend has not read yet (it reads only inside a collective) are bounded
 * apart: at most SC_HOST_RCVHWM per peer connection, each at most B + its header
 * (ZMQ_MAXMSGSIZE), plus the kernel's socket buffers.
 *
 * Deadlines and failure: each collective waits at most sc_host_comm_config.deadline_ms
 * (SC_ETIMEDOUT); sc_coll_ops.abort (any thread) wakes a blocked collective with
 * SC_EABORTED and fails later ones until sc_host_comm_reset. A failed step is left
 * behind by calling sc_host_comm_reset with a new epoch on every rank (the step number):
 * counters restart and stale blocks are discarded. A refused block is never blamed on
 * this rank: a collective whose block never came ends with SC_ETIMEDOUT naming the peer.
 *
 * Ownership and threads: the backend owns its sockets (and its ZAP handler, when it owns
 * the context); one thread (the rank's executor) runs collectives and reads the stats;
 * abort may come from another thread.
 */
#ifndef SC_BACKEND_HOST_H
#define SC_BACKEND_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/coll.h"

/* CURVE: with keys the ROUTER is a CURVE server (ZAP domain SC_ZAP_DOMAIN_NODE) and each
 * DEALER a CURVE client of its peer's rank key. The ZAP handler must name every rank
 * key by its rank in decimal ("0", "1", ...): on a private context (zmq_context NULL)
 * the backend starts such a handler itself before it binds and stops it when destroyed;
 * on a shared context the caller runs it (sc_zap_start) before creating the comm, with
 * that domain among its own. (Without a handler ZeroMQ admits any CURVE client but names
 * none: every message is then refused.) Without keys, endpoints are protected by their
 * own means: ipc endpoints in a folder only the cluster's user can reach. */
/* Blocks ZeroMQ queues per peer connection before the backend reads them (an honest peer
 * has at most 3 * SC_GROUP_COUNT outstanding). */
#define SC_HOST_RCVHWM 16

/* ZeroMQ I/O threads of the backend's own context with CURVE (each connection's crypto
 * runs on one of them). */
#define SC_HOST_CURVE_IO_THREADS 4

typedef struct sc_host_comm_config {
  int32_t rank;                     /* my global rank */
  const char *const *endpoints;     /* [world size] data endpoint of every rank */
  int64_t deadline_ms;              /* per collective; <= 0: none */
  void *zmq_context;                /* shared context, or NULL for a private one */
  const uint8_t *public_key, *secret_key; /* my CURVE key pair (32 bytes each) */
  const uint8_t (*rank_keys)[32];   /* [world size] every rank's public key */
                                    /* (all three NULL: no CURVE) */
  size_t max_block_bytes;           /* largest block held before its plan is known
                                       (sc_plan_max_block_bytes); 0: no limit */
} sc_host_comm_config;

/* Binds my endpoint, connects to my group peers and fills comm (ops, groups, deadline).
 * cfg must be valid. Errors: SC_EINVAL (some of the keys but not all), SC_EIO with the
 * endpoint and ZeroMQ's reason in d (also: this libzmq has no CURVE), SC_ENOMEM, and
 * those of sc_zap_start. */
int sc_host_comm_create(sc_comm *comm, const sc_plan_config *cfg,
                        const sc_host_comm_config *hc, sc_diag *d);

/* Starts a new epoch (normally the step number; must increase): clears the abort state,
 * restarts the per-group counters and drops blocks of earlier epochs. */
void sc_host_comm_reset(sc_comm *comm, uint64_t epoch);

/* Why blocks were refused (sc_host_comm_stats.refused_by). */
typedef enum sc_host_refusal {
  SC_HOST_REFUSED_SOURCE = 0, /* no valid source rank, or this rank itself */
  SC_HOST_REFUSED_MALFORMED,  /* not [identity][header][payload] */
  SC_HOST_REFUSED_GROUP,      /* no group of this rank with the source as a member */
  SC_HOST_REFUSED_SEQ,        /* not a collective the source can be at, or not planned */
  SC_HOST_REFUSED_SIZE,       /* not the planned size, or over max_block_bytes */
  SC_HOST_REFUSED_DUPLICATE,  /* a second block for the same collective */
  SC_HOST_REFUSED_PLAN,       /* held for a later step; did not fit its plan */
  SC_HOST_REFUSED_COUNT
} sc_host_refusal;

/* A few words for the reason (logs). Any thread. */
const char *sc_host_refusal_name(int reason);

typedef struct sc_host_comm_stats {
  uint64_t refused;                            /* every reason */
  uint64_t refused_by[SC_HOST_REFUSED_COUNT];
  uint64_t held_blocks, held_bytes; /* admitted and not yet taken by a collective, now */
} sc_host_comm_stats;

/* Counters since create. The thread that runs the collectives. */
void sc_host_comm_get_stats(const sc_comm *comm, sc_host_comm_stats *out);

/* Closes the sockets (linger 0), stops its ZAP handler and frees the backend. */
void sc_host_comm_destroy(sc_comm *comm);

#endif
