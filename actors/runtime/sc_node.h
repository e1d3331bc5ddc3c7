/* sc_node.h - a node: one process hosting actors on libuv loop threads, connected to the
 * other nodes of its cluster over ZeroMQ, publishing a tap (DESIGN.md §3, §6).
 *
 * Lifecycle: sc_node_create (options, startup actors) -> sc_node_start (binds, starts
 * threads, spawns the startup actors; the node says hello to the head once it has
 * reached every other node) -> sc_node_wait_ready (the head has heard from every rank)
 * -> ... -> sc_node_stop -> sc_node_destroy.
 *
 * Security (docs/runtime.md, threat model): with keys in the cluster (cluster.curve)
 * every node endpoint is a CURVE server that admits only the cluster's nodes (a ZAP
 * handler in the node's ZeroMQ context), and each letter must name, as its sender, the
 * node whose key sent it; a tcp tap admits only the keys of tap_keys_file.
 *
 * Every node runs a system actor "node" in slot 0 that answers ping with pong, runs the
 * hello/ready handshake and turns node_shutdown into an orderly stop.
 *
 * Rejoining (docs/runtime.md): each process has a random incarnation, sent in its hello.
 * A hello from a node the head knows, with another incarnation, while the cluster runs is
 * a restarted node: the head marks the old process DOWN if it has not seen that yet,
 * then sends node_ready {rank, incarnation} to every node. The new process takes it as
 * its ready; the others clear the node's DOWN, so letters to it flow again (ZeroMQ
 * reconnects to its endpoint by itself). Actors learn of both through
 * sc_monitor_nodes. Watches of the old process's actors (sc_monitor) fired with its
 * DOWN and stay fired. Letters queued for the old process before its loss was seen may
 * reach the new one: whoever sent them decides what they mean then (the scheduler aborts
 * the step it lost on the new process too).
 *
 * Well-known names: startup actors are listed once, identically in every process of the
 * cluster; entry k gets slot k+1 (generation 1) on every rank where it runs, so
 * "scheduler@0" or "comm@3" resolves to an id without any message. Actors spawned later
 * can be named on their own node with sc_node_register.
 *
 * Ownership: the node owns its threads, sockets and actors; sc_node_destroy frees them.
 * Threads: every function may be called from any thread except sc_node_destroy (not
 * from one of the node's own threads).
 */
#ifndef SC_NODE_H
#define SC_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "actors/runtime/sc_actor.h"
#include "actors/runtime/sc_cluster.h"

#define SC_NODE_MAX_STARTUP 64
#define SC_NODE_NAME_MAX 32

typedef enum sc_where {
  SC_ON_ALL = 0,   /* one instance on every rank */
  SC_ON_HEAD = 1,  /* only on rank 0 */
} sc_where;

typedef struct sc_startup_actor {
  const char *name;            /* well-known name, resolved as "name@rank" */
  const sc_actor_spec *spec;   /* borrowed; must outlive the node */
  sc_where where;
  const void *arg;             /* copied at spawn; may depend on nothing rank-specific:
                                  init reads the rank from sc_node_rank */
  size_t arg_size;
} sc_startup_actor;

typedef struct sc_node_opts {
  const sc_cluster *cluster;   /* borrowed during sc_node_create (copied) */
  int32_t rank;
  const sc_startup_actor *startup; /* copied; NULL when none */
  int32_t num_startup;
  int32_t loops;               /* 0: cluster->loops */
  bool wait_all_hello;         /* head: ready only when every rank said hello (default
                                  true via sc_node_opts_default); false: at the first
                                  hello, which comes from a node that has reached every
                                  other, so never before all are up */
  int32_t send_hwm;            /* messages each DEALER holds for a peer before further
                                  sends wait in a backlog (0: 100000; tests use tiny ones) */
  int32_t send_queue_max;      /* messages to other nodes that may wait beyond that: per
                                  loop and peer, and for all senders outside the loops
                                  together; sends fail with SC_EFULL past it (0: 1 Mi) */
  const sc_node_key *key;      /* a cluster with keys (cluster.curve): this node's key
                                  pair (copied); NULL: read from its key_file */
} sc_node_opts;

typedef struct sc_node_stats {
  uint64_t remote_sent, remote_recv; /* messages over the transport (local sends are not
                                        counted: that would put an atomic on the hot path) */
  uint64_t remote_dropped;     /* accepted for a peer, then dropped when it went DOWN (not
                                  what is still queued when this node stops) */
  uint64_t mailbox_dropped;    /* DROP policy, or remote arrivals at a full mailbox */
  uint64_t undeliverable;      /* remote arrivals for unknown actors, of unknown types, or
                                  whose body does not decode */
  uint64_t tap_published, tap_dropped;
  uint64_t late_replies;
  int32_t tap_subscriptions;
  uint64_t forged;             /* letters whose envelope names another sender than the
                                  node whose key sent them: dropped */
  uint64_t auth_refused;       /* CURVE handshakes ZAP refused (a key not listed; a
                                  client without CURVE fails before ZAP and is not
                                  counted) */
} sc_node_stats;

typedef void (*sc_node_event_fn)(void *ud, const char *event, int32_t rank, int code,
                                 const char *detail);

void sc_node_opts_default(sc_node_opts *o);
int sc_node_create(const sc_node_opts *o, sc_node **out, sc_diag *d);
/* Optional: called (from a node thread) on "ready", "down", "rejoined" (a new process of
 * node `rank` joined the running cluster) and "shutdown" events. Set before
 * sc_node_start. */
void sc_node_set_event_cb(sc_node *n, sc_node_event_fn fn, void *ud);
int sc_node_start(sc_node *n, sc_diag *d);
/* Blocks until the head has heard from every rank, each of which has reached every other
 * (SC_ETIMEDOUT past timeout_ms; SC_EDOWN when a node this one had reached went down
 * first: the cluster cannot become ready; SC_ECLOSED when a stop was requested first,
 * e.g. by a signal: sc_node_wait_shutdown then returns its reason at once). */
int sc_node_wait_ready(sc_node *n, int64_t timeout_ms);
/* Blocks until a shutdown is requested (node_shutdown received, sc_node_request_stop,
 * or, for a non-head node, the head going down). Returns the reason code
 * (0 for an orderly shutdown). timeout_ms < 0 waits forever; SC_ETIMEDOUT otherwise. */
int sc_node_wait_shutdown(sc_node *n, int64_t timeout_ms);
/* Wakes sc_node_wait_shutdown (async-signal-safe: one atomic store and a write). */
void sc_node_request_stop(sc_node *n, int reason);
/* Sends node_shutdown to every other node (head use). */
int sc_node_broadcast_shutdown(sc_node *n, const char *reason);
/* Stops actors (terminate with SC_ECLOSED), joins threads, closes sockets (linger 0). */
void sc_node_stop(sc_node *n);
void sc_node_destroy(sc_node *n);

int32_t sc_node_rank(const sc_node *n);
int32_t sc_node_size(const sc_node *n);
const sc_cluster *sc_node_cluster(const sc_node *n);
bool sc_node_peer_down(const sc_node *n, int32_t rank);
/* Whether a stop of this node was requested or has begun (peers leaving is then part of
 * an orderly shutdown, not a failure). Any thread. */
bool sc_node_shutting_down(const sc_node *n);
void sc_node_get_stats(sc_node *n, sc_node_stats *s);

/* "name@rank" (or "name" for this node) -> id. Startup names resolve for any rank;
 * registered names only on their own node. SC_ENOENT when unknown. */
int sc_node_resolve(sc_node *n, const char *name_at_rank, sc_actor_id *out);
/* Names a local actor (copied, at most SC_NODE_NAME_MAX-1 bytes, no '@'). SC_EINVAL if
 * a live actor holds the name; the name of a stopped actor is taken over. */
int sc_node_register(sc_node *n, const char *name, sc_actor_id id);

#endif
