/* sc_transport_impl.h - the transport's internals, shared by its three files (not a
 * public header; sc__ names as in sc_node_impl.h):
 *   sc_transport.c  the sockets, the io thread and what other nodes send;
 *   sc_outbound.c   what goes to other nodes: every DEALER and its backlog (zout), the
 *                   loops' packs, the io thread's queue of frames;
 *   sc_tap.c        taps: subscriptions, topics, the loops' record batches, the XPUB.
 * Their structs meet in sc_transport and in a loop's share of it (lnet: its DEALERs and
 * its tap batch), so they are declared here once; the rest of the runtime sees the
 * transport only through the sc__transport_* and sc__tap_* functions of sc_node_impl.h.
 * The helpers below are used by two or three of its files and stay inlinable (a letter's
 * send and its tap record inline sc__lnet_of, whose fast path is an atomic load).
 */
#ifndef SC_TRANSPORT_IMPL_H
#define SC_TRANSPORT_IMPL_H

#include <zmq.h>

#include "actors/runtime/sc_node_impl.h"
#include "base/curve_key.h"
#include "base/log.h"
#include "base/zap.h"
#include "messages/buf.h"

/* A buffer given to ZeroMQ with zmq_msg_init_data is freed by its free function on
 * ZeroMQ's own thread, after ZeroMQ's lock-free pipes carried it there. libzmq is not
 * built with ThreadSanitizer, so that edge is invisible to it: a tap batch, reused by its
 * loop once freed (batch_recycle), would look like a race between the io thread that
 * sent it and the loop that refills it, and a frame's buffer, freed there, like a race
 * with whoever reuses that memory next. The edge is stated by hand (make test-tsan). */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define SC_ZMQ_HANDOFF(p) __tsan_release(p)
#define SC_ZMQ_TAKEN_BACK(p) __tsan_acquire(p)
#else
#define SC_ZMQ_HANDOFF(p) ((void)(p))
#define SC_ZMQ_TAKEN_BACK(p) ((void)(p))
#endif

/* the most one drain of a socket, a queue or a backlog takes in one pass */
#define SC_DRAIN_CAP 1024

/* A loop's pack for a peer is sent once it holds SC_PACK_LETTERS letters (fewer when
 * send_hwm is smaller: see sc__transport_create) or SC_PACK_BYTES, else after the actor's
 * batch (see the top of sc_outbound.c). Both only bound how much one zmq_send carries: 64
 * letters spread ZeroMQ's cost per message (a few hundred ns each side) to a few ns, and
 * 16 KiB keeps a pack of large letters near the 8 KiB ZeroMQ reads and writes at a
 * time. */
#define SC_PACK_LETTERS 64
#define SC_PACK_BYTES 16384
#define SC_TOPIC_MAX 96

/* The largest message a node takes from a peer (a pack of letters, or one letter: a
 * step's plan, a prompt). It bounds what a connection can make ZeroMQ allocate before
 * its handshake is done, as well as after. */
#define SC_NODE_MAX_MESSAGE ((int64_t)64 << 20)
/* A connection that has not finished its handshake by then is closed (ZeroMQ's default
 * is 30 s of a stranger's connection held open). */
#define SC_HANDSHAKE_MS 5000

/* ZeroMQ I/O threads by bit (ZMQ_AFFINITY): the node's sockets on the first, the tap's
 * XPUB on the second when there is one (sc__transport_create). */
#define SC_AFFINITY_NODES 1u
#define SC_AFFINITY_TAP 2u

/* A pack (sc_pack.h) on its way to a DEALER. */
typedef struct frame {
  sc_mpsc_node link;
  struct frame *next; /* backlog */
  int32_t rank;
  uint32_t letters;   /* in the pack */
  bool wrapped;       /* msg owns data (zmq frees it once sent) */
  uint8_t *data;
  size_t len;
  zmq_msg_t msg;
} frame;

/* Records of one topic on their way to the XPUB; buf is the message's second frame. */
typedef struct tap_batch {
  sc_mpsc_node link;          /* in the tap queue, then among its writer's spares */
  struct tap_writer *owner;   /* the loop's writer that filled it */
  char topic[SC_TOPIC_MAX];
  uint32_t records;
  sc_buf buf;
} tap_batch;

/* An immutable set of subscribed prefixes. Readers on any thread hold a snapshot
 * without telling anyone, so none is freed before the transport is: a changed set is a
 * new snapshot, the size of its prefixes, and a set seen before gets its old snapshot
 * back (same_subs), so a tap that attaches and detaches over and over, or several that
 * take turns, cost one snapshot per distinct set and not one per change. */
typedef struct sub_prefix {
  size_t len;
  char s[SC_TOPIC_MAX];
} sub_prefix;

typedef struct subs {
  struct subs *retired; /* every older snapshot, freed at destroy */
  int n;
  sub_prefix p[];
} subs;

/* The topic of the last message a thread looked at, with what decided it (subscription
 * snapshot, destination, type): a stream of messages to one actor builds and matches its
 * topic once. gen changes whenever the topic is built again. */
typedef struct topic_cache {
  const subs *subs;
  sc_actor_id dst;
  uint16_t type;
  bool match;
  uint32_t gen;
  char topic[SC_TOPIC_MAX];
} topic_cache;

/* A loop's open batch of records (of the letters its actors took), and the topic of the
 * last one. */
typedef struct tap_writer {
  tap_batch *open;
  uint32_t open_gen;          /* topic.gen when open was started: its topic is topic.topic */
  size_t first_cap;           /* the next batch starts this large: what the last one used */
  topic_cache topic;          /* of the last letter this loop tapped */
  /* batches whose records are gone, back for reuse (batch_recycle): any thread pushes,
   * the loop pops */
  sc_mpsc spare;
  _Atomic uint32_t spares;
} tap_writer;

/* One DEALER to one peer and what it refused (see the top of sc_outbound.c). Only its owner
 * thread touches it, except `sent`, which sc__transport_stats reads. */
typedef struct zout {
  sc_transport *t;
  void *sock;                 /* NULL until opened */
  int32_t rank;
  bool watching;              /* poll started: only while the backlog is not empty */
  uv_poll_t poll;             /* initialised with sock */
  frame *backlog, *backlog_tail;
  uint32_t backlog_len;       /* letters in the backlog's packs */
  _Atomic uint64_t sent;      /* letters ZeroMQ took */
  /* io thread's zouts: the count of frames handed to the io thread and not yet sent or
   * dropped (sc_transport.outbox_count), released as they leave the backlog; NULL for a
   * loop's zout, whose backlog_len and open pack are its bound */
  _Atomic uint32_t *pending;
  /* a loop's zout: the pack its sends go into (sc_pack.h), sent when full or after the
   * sending actor's batch (sc__transport_loop_flush) */
  sc_buf pack;
  uint32_t pack_letters;
} zout;

typedef struct peer {
  zout out;
  void *mon;
  uv_poll_t poll_m;
  bool connected;
} peer;

/* A loop thread's share of the transport, made on its first remote send or tap record. */
typedef struct lnet {
  zout *peers;                /* by rank */
  bool packs_open;            /* some peer's pack holds letters */
  tap_writer tap;             /* records of the letters its actors took */
} lnet;

/* Laid out by who writes what: every local send reads subs_now, so it sits with the
 * fields that never change once the node runs; each field that the loops and the io
 * thread both write gets a cache line of its own. (With subs_now next to the tap queue's
 * count and the tap counters, every chain handed over or batch published took that line
 * from every sender: a cache miss per send at 80-250 ns between cores on the GPU host.) */
struct sc_transport {
  /* read by every thread, written at start (or, subs_now, on a subscription change) */
  sc_node *node;
  void *zctx;
  void *router, *xpub;
  peer *peers;
  _Atomic(subs *) subs_now;
  _Atomic(lnet *) lnets[SC_MAX_LOOPS]; /* by loop index, set once; freed at destroy */
  uint32_t pack_letters;               /* a loop's pack is sent at this many letters */
  int32_t pack_hwm;                    /* ZMQ_SNDHWM of a loop's DEALER, in packs */
  sc_zap *zap;                         /* who may connect (node.cluster.curve, a CURVE tap) */
  bool tap_curve;                      /* the tap's XPUB is a CURVE server */
  /* refusals of traffic from the network, logged at a bounded rate: [rank] by the node
   * whose key sent it, [num_nodes] when the sender is not known */
  sc_log_limit *refusal_log;
  /* written by the loops and the io thread */
  _Alignas(64) _Atomic int wake_pending;
  _Alignas(64) _Atomic uint32_t outbox_count; /* frames queued in outbox */
  _Alignas(64) _Atomic size_t tapq_bytes;     /* allocated by the batches in tapq */
  sc_mpsc outbox, tapq;                       /* (each line-aligned inside) */
  _Alignas(64) _Atomic uint64_t tap_published, tap_dropped, remote_recv;
  _Atomic uint64_t remote_dropped; /* backlogs dropped because their peer went DOWN */
  _Atomic uint64_t forged;         /* letters naming another sender than their key's node */
  /* the io thread's own */
  _Alignas(64) _Atomic int stop;
  uv_loop_t uv;
  uv_async_t wake;
  uv_prepare_t prepare;
  uv_idle_t idle;
  uv_poll_t poll_r, poll_x;
  uv_timer_t unreached;  /* names the peers not reached yet, while there are some */
  uv_thread_t thread;
  bool thread_started, uv_inited;
  bool hot; /* did work since the io loop last blocked */
  int32_t peers_reached; /* peers whose DEALER has connected at least once */
  bool hello_sent;       /* this node's hello went out (sc__node_say_hello) */
  uint64_t spin_off_until; /* no spinning before this (oversubscribed CPU) */
  subs *subs_all;  /* chain of every snapshot (io thread writes) */
  subs *subs_work; /* the io thread's working set, room for SC_MAX_SUBS (not published) */
};

/* A message received from another node and not decoded yet: the io thread reads its
 * envelope, the receiving loop decodes it (sc__raw_decode) and, when it is tapped,
 * copies its bytes into the record (sc_tap.c). */
struct sc_raw_msg {
  sc_envelope env; /* as read by the io thread: for an error reply when the body fails */
  size_t len;
  bool zmq;        /* the bytes are msg's, from off on; else they follow in bytes[] */
  size_t off;
  zmq_msg_t msg;
  uint8_t bytes[];
};

/* ---- helpers of two or three of the transport's files ---- */

static inline void sc__tr_wake(sc_transport *t) {
  if (sc_wake_claim(&t->wake_pending))
    uv_async_send(&t->wake);
}

static inline bool sc__has_events(void *sock, short want) {
  int ev = 0;
  size_t sz = sizeof ev;
  if (zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &sz) != 0) return false;
  return (ev & want) != 0;
}

static inline int sc__set_int(void *s, int opt, int v) {
  return zmq_setsockopt(s, opt, &v, sizeof v);
}

static inline int sc__set_int64(void *s, int opt, int64_t v) {
  return zmq_setsockopt(s, opt, &v, sizeof v);
}

static inline void sc__set_affinity(void *s, uint64_t mask) {
  zmq_setsockopt(s, ZMQ_AFFINITY, &mask, sizeof mask);
}

static inline void sc__close_sock(void **s) {
  if (*s) {
    const int zero = 0;
    zmq_setsockopt(*s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(*s);
    *s = NULL;
  }
}

/* A DEALER to node `rank` as a CURVE client with this node's key pair, when the cluster
 * has keys (ZeroMQ copies the keys). */
static inline int sc__curve_client(void *s, const sc_node *n, int32_t rank) {
  if (!n->cluster.curve) return 0;
  return sc_curve_make_client(s, n->key.public_key, n->key.secret_key,
                              n->cluster.nodes[rank].public_key);
}

/* Makes s a CURVE server of this node's key in ZAP domain `domain`. */
static inline int sc__curve_server(void *s, const sc_node *n, const char *domain) {
  return sc_curve_make_server(s, n->key.secret_key, domain);
}

/* Whether to log a refusal of traffic from `sender` (-1: not known) now; *held: refusals
 * not logged since the last line. */
static inline bool sc__refusal_log_pass(sc_transport *t, int32_t sender,
                                        unsigned long long *held) {
  const int32_t k = sender >= 0 ? sender : t->node->cluster.num_nodes;
  return sc_log_limit_pass(&t->refusal_log[k], sc_now_ns(), held) != 0;
}

static inline bool sc__peer_is_down(const sc_transport *t, int32_t rank) {
  return atomic_load_explicit(&t->node->peer_down[rank], memory_order_acquire) != 0;
}

static inline const uint8_t *sc__raw_data(const sc_raw_msg *raw) {
  /* (zmq_msg_data does not change the message; its prototype is not const) */
  return raw->zmq ? (const uint8_t *)zmq_msg_data((zmq_msg_t *)&raw->msg) + raw->off
                  : raw->bytes;
}

/* ---- a loop thread's share (send_from_loop, sc__tap_letter) ---- */

/* Makes loop l's share on its first remote send or tap record (sc_outbound.c); NULL when
 * out of memory. */
lnet *sc__lnet_new(sc_transport *t, sc_loop *l);

/* l's share, made if it is not there yet. Split in two so that a send or a tap record
 * inlines the one load it takes once the share exists, and calls out for the rest, as the
 * compiler split lnet_of when it was static in one file. */
static inline lnet *sc__lnet_of(sc_transport *t, sc_loop *l) {
  lnet *ln = atomic_load_explicit(&t->lnets[l->index], memory_order_relaxed);
  if (ln) return ln;
  return sc__lnet_new(t, l);
}

/* ---- sc_outbound.c, for the io thread (sc_transport.c) ---- */
/* Creates the DEALER for rank with the options every DEALER shares and prepares its poll
 * on uv (the owner's loop). The caller adds its own options, then sc__zout_connect. */
int sc__zout_open(zout *z, sc_transport *t, int32_t rank, const char *rid, int hwm,
                  uv_loop_t *uv);
int sc__zout_connect(zout *z);
/* Owner thread: drops the backlog and closes the socket. */
void sc__zout_close(zout *z);
/* Whether the backlog can move now (reading ZMQ_EVENTS re-arms the socket's fd). */
bool sc__zout_ready(zout *z);
/* Before the owner's loop blocks; true when a capped flush left work that can go now. */
bool sc__zout_prepare(zout *z);
/* The backlog of a peer that went DOWN: accepted messages lost, so counted. */
void sc__zout_drop_down(zout *z);
/* Letters ZeroMQ took from the n zouts at zs (any thread: sc__transport_stats). */
uint64_t sc__zouts_sent(zout *zs, int32_t n);
void sc__frame_free(frame *f);
/* io thread: sends the frames other threads queued (zout_offer each); returns how many. */
int sc__drain_outbox(sc_transport *t);

/* ---- sc_tap.c, for the io thread and the loops ---- */
/* sc__transport_start: binds the tap's XPUB at this node's tap endpoint. */
int sc__tap_bind(sc_transport *t, sc_diag *d);
/* io thread: reads subscription changes from the XPUB and publishes the new set. */
int sc__drain_xpub(sc_transport *t);
/* io thread: sends the loops' queued batches, at most SC_TAP_DRAIN_BATCHES. Returns the
 * batches sent; *more: it stopped at that cap. */
int sc__drain_tapq(sc_transport *t, bool *more);
/* Loop thread: closes w's open batch and queues it for the io thread. */
void sc__tap_hand_over(sc_transport *t, tap_writer *w);
/* A batch that will not be published: its records are counted as dropped. */
void sc__batch_drop(sc_transport *t, tap_batch *b);
void sc__batch_free(tap_batch *b);

#endif
