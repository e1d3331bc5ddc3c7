/* sc_node_impl.h - internals shared by the runtime's files (not a public header).
 *
 * Naming, as libuv's uv__: sc__ = internal to actors/runtime, may change any time, never
 * called from outside it (the functions declared here and in sc_transport_impl.h, and
 * their static inline helpers). Public functions keep sc_ (sc_actor.h, sc_node.h, ...);
 * helpers of one file are static with plain names.
 *
 * Files, one job each. A send goes sc_actor.c (sc_send) -> sc_route.c (sc__route: into a
 * local mailbox) or on to sc_outbound.c (another node); a letter runs in sc_loop.c.
 *   sc_node.c       node lifecycle, the "node" system actor, names
 *   sc_actor.c      actors: slots, spawn, stop, finalize; the actor-side API (sc_ctx)
 *   sc_route.c      routing next to delivery: sc__route, and letters into mailboxes
 *   sc_loop.c       the loop threads, and the dispatch of letters to actors
 *   sc_transport.c  ZeroMQ: the sockets, the io thread, what other nodes send
 *   sc_outbound.c   what goes to other nodes: DEALERs and their backlogs, the loops' packs
 *   sc_tap.c        taps: subscriptions, topics, record batches, the XPUB
 *   sc_cluster.c    cluster files (sc_cluster.h)
 * The transport's three files also share sc_transport_impl.h.
 *
 * Structure: a node has a table of actor slots, N shared loop threads (plus one per
 * SC_LOOP_OWN actor) and one io thread that owns the ROUTER, the tap XPUB and the DEALERs
 * used by other threads; each loop thread owns the DEALERs it sends on (sc_outbound.c).
 *
 * A slot keeps its mailbox (lock-free MPSC of letters) for the node's lifetime and stays
 * on the loop it was first given, so a sender racing with a stop/respawn can only reach
 * that one loop; the loop discards letters whose generation is not the live one.
 * Scheduling: a sender reserves mailbox capacity (enq), pushes the letter, and if the
 * slot was not scheduled puts it on its loop's run queue and wakes the loop (one
 * uv_async_send per idle->busy transition). The loop runs each scheduled actor for at
 * most SC_ACTOR_BATCH messages, and at most SC_LOOP_TURNS actor turns per wake-up.
 */
#ifndef SC_NODE_IMPL_H
#define SC_NODE_IMPL_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <uv.h>

#include "actors/runtime/sc_mpsc.h"
#include "actors/runtime/sc_node.h"
#include "actors/runtime/sc_wake.h"
#include "base/clock.h"
#include "messages/buf.h"

#define SC_MAX_SLOTS 4096
#define SC_ACTOR_BATCH 64
#define SC_LOOP_TURNS 256
#define SC_MAX_LOOPS 64
/* Before a busy loop thread (or the io thread) blocks, it polls its queue for
 * cluster.spin_us (yielding the CPU between polls): waking a blocked thread costs tens of
 * microseconds on virtual machines, more than a whole round trip should. Producers skip
 * uv_async_send while the consumer spins. A spin never lasts longer than SC_SPIN_MAX_NS
 * in total, whatever spin_us says. */
#define SC_SPIN_MAX_NS 2000000ull
/* A sched_yield that takes longer than this means other threads wanted the CPU: the
 * machine is oversubscribed, where a spinning thread waits a whole time slice for its
 * turn while a blocked one is woken with priority. Spinning then pauses for
 * SC_SPIN_BACKOFF_NS. */
#define SC_SPIN_CONTENDED_NS 1000000ull
#define SC_SPIN_BACKOFF_NS 200000000ull

/* The poll before blocking, shared by the actor loops and the io thread: polls ready(arg)
 * for up to spin_ns, and never past deadline (sc_now_ns), yielding the CPU between polls.
 * True as soon as it is ready; false when the time ran out, or when a yield showed an
 * oversubscribed CPU (then *off_until turns spinning off for SC_SPIN_BACKOFF_NS, and calls
 * before it return false at once). The caller has set its wake-pending flag, so producers
 * do not signal meanwhile. */
static inline bool sc__spin_until(uint64_t spin_ns, uint64_t deadline, uint64_t *off_until,
                                  bool (*ready)(void *), void *arg) {
  uint64_t now = sc_now_ns();
  if (spin_ns == 0 || now < *off_until || now >= deadline) return false;
  const uint64_t end = now + spin_ns < deadline ? now + spin_ns : deadline;
  while (now < end) {
    if (ready(arg)) return true;
    sched_yield();
    const uint64_t before = now;
    now = sc_now_ns();
    if (now - before > SC_SPIN_CONTENDED_NS) {
      *off_until = now + SC_SPIN_BACKOFF_NS;
      return false;
    }
  }
  return ready(arg);
}
/* Zeroed memory for n structs that have cache-line-aligned members (sc_mpsc, the
 * transport's shared counters): malloc promises only 16-byte alignment, which would put
 * those members across lines. Freed with free(). */
static inline void *sc__calloc_lines(size_t n, size_t size) {
  if (size != 0 && n > (SIZE_MAX - 63) / size) return NULL;
  const size_t bytes = (n * size + 63) & ~(size_t)63;
  void *p = aligned_alloc(64, bytes);
  if (p != NULL) memset(p, 0, bytes);
  return p;
}

/* Names the calling thread "sc<rank>-<role>[<index>]" (index < 0: none), so that top -H,
 * perf and debuggers tell a node's threads apart. Linux keeps 15 characters. */
static inline void sc__thread_name(const char *role, int32_t rank, int index) {
  char name[48]; /* PR_SET_NAME truncates */
  if (index >= 0)
    snprintf(name, sizeof name, "sc%d-%s%d", (int)rank, role, index);
  else
    snprintf(name, sizeof name, "sc%d-%s", (int)rank, role);
  prctl(PR_SET_NAME, name, 0, 0, 0);
}
/* Runtime-internal letter types (never encoded, never leave the process). */
enum {
  SC_SYS_BASE = 0xF000,
  SC_SYS_START = SC_SYS_BASE, /* body: spawn argument copy (malloc'd) */
  SC_SYS_MONITOR,             /* body: sc_sys_watch */
  SC_SYS_LINK,                /* body: sc_sys_watch */
  SC_SYS_EXIT,                /* body: sc_sys_watch (linked actor exited / stop request) */
  SC_SYS_NODE_DOWN,           /* body: sc_sys_watch (who.node = the rank that went down):
                                 pending requests to that node fail with SC_EDOWN */
};

typedef struct sc_sys_watch {
  sc_actor_id who;
  int reason;
} sc_sys_watch;

/* A message received from another node and not decoded yet (sc_transport.c; the struct
 * is in sc_transport_impl.h). */
typedef struct sc_raw_msg sc_raw_msg;

/* A message in a mailbox: 64 bytes, since every message's letter moves from the sender's
 * core to the receiver's (one cache line where the allocator aligns 64-byte blocks, as
 * jemalloc's size class does; glibc's malloc gives 16-byte alignment, two lines). While
 * it waits in the mailbox, two low bits of body (free: bodies are malloc'd) say more:
 *   SC_LETTER_TAPPED  sent (or received from another node) while a tap subscriber was
 *                     attached: just before the handler runs, the receiving loop records
 *                     it for the tap (sc__tap_letter);
 *   SC_LETTER_RAW     body is an sc_raw_msg from another node, which the receiving loop
 *                     decodes just before running it: decoding is spread over the loops
 *                     instead of being serialized on the node's io thread.
 * The receiving loop clears them when it takes the letter. */
typedef struct sc_letter {
  sc_mpsc_node link;
  sc_envelope env;
  void *body;
} sc_letter;
#define SC_LETTER_TAPPED ((uintptr_t)1)
#define SC_LETTER_RAW ((uintptr_t)2)
#define SC_LETTER_BITS (SC_LETTER_TAPPED | SC_LETTER_RAW)
_Static_assert(sizeof(sc_letter) == 64, "a letter is one cache line");

typedef struct sc_loop sc_loop;
typedef struct sc_actor sc_actor;

/* Laid out by writer, one cache line each: senders write the mailbox's tail and `enq`; the
 * loop writes the mailbox's head, `deq` and (with the one sender that schedules the slot)
 * `scheduled`; the rest changes only at spawn and stop. A sender reads deq and scheduled
 * on every send, but the loop writes them once per batch, so that line moves to the
 * sender once per batch instead of once per message (with one shared count, which both
 * sides wrote, the sender waited for that line on every message). Less often, others
 * write there too: a sender whose letter finds the mailbox down to its stub writes
 * stub.next (head's line), and whoever queues another slot behind this one on the run
 * queue writes run_link.next. */
typedef struct sc_slot {
  sc_mpsc mbox;
  _Alignas(64) _Atomic uint32_t enq; /* letters counted in (reserved) by senders, wraps */
  _Alignas(64) _Atomic uint32_t deq; /* letters taken out by the loop (its writes only) */
  _Atomic int scheduled;
  sc_mpsc_node run_link;
  _Alignas(64) _Atomic uint32_t gen; /* live generation; 0 before first spawn */
  _Atomic int live;           /* 1 while the actor of `gen` accepts letters */
  sc_loop *loop;              /* fixed at first allocation */
  uint32_t cap;               /* written before live=1 */
  int overflow;
  char name[SC_NODE_NAME_MAX];
  sc_actor *actor;            /* loop thread only */
  uint16_t index;
  struct sc_slot *free_next;  /* per-loop free list (node mutex) */
} sc_slot;

typedef struct sc_watch {
  sc_actor_id who;
  bool link;
  struct sc_watch *next;
} sc_watch;

typedef struct sc_pending {
  uint64_t id;
  sc_actor_id dst;
  sc_reply_fn cb;
  void *ud;
  uv_timer_t *timer;          /* NULL without timeout */
  struct sc_pending *next;
  sc_actor *owner;
} sc_pending;

struct sc_actor {
  const sc_actor_spec *spec;
  sc_slot *slot;
  sc_actor_id id;
  void *state;
  sc_watch *watchers;         /* who to tell when we stop */
  sc_pending *pending;
  uint64_t next_req;
  bool stopping;
  int stop_reason;
};

struct sc_ctx {
  sc_node *node;
  sc_actor *actor;
  sc_loop *loop;
  const sc_envelope *env;
  sc_letter *letter; /* the letter whose body sc_take_body may claim; NULL outside handlers */
};

struct sc_loop {
  uv_loop_t uv;
  uv_async_t wake;
  uv_prepare_t prep;
  uv_idle_t turn_again;       /* one more turn without blocking (on_prepare) */
  bool hot;                   /* took letters since its last spin: the next one spins */
  uint64_t spin_off_until;    /* no spinning before this (oversubscribed CPU) */
  sc_mpsc runq;
  _Atomic int wake_pending;
  _Atomic int stop;
  uv_thread_t thread;
  bool started;
  sc_node *node;
  int index;
  bool own;                   /* an SC_LOOP_OWN actor's: its handlers may block, so its
                                 sends to other nodes leave at once (no pack waits) */
  sc_slot *free_slots;        /* node mutex */
};

typedef struct sc_name {
  char name[SC_NODE_NAME_MAX];
  sc_actor_id id;
} sc_name;

typedef struct sc_remote_watch {
  sc_actor_id watcher, who; /* who.node is the rank watched */
  struct sc_remote_watch *next;
} sc_remote_watch;

typedef struct sc_transport sc_transport;

#define SC_NODE_MAX_SUBSCRIBERS 8

struct sc_node {
  sc_cluster cluster;
  int32_t rank;
  sc_startup_actor startup[SC_NODE_MAX_STARTUP];
  int32_t num_startup;
  sc_slot *slots;             /* SC_MAX_SLOTS */
  _Atomic uint32_t next_slot; /* first never-used slot */
  sc_loop *loops[SC_MAX_LOOPS];
  int num_shared_loops, num_loops;
  _Atomic uint32_t rr;
  pthread_mutex_t mu;         /* slot free lists, names, remote watches, ready state */
  pthread_cond_t cv;
  sc_name names[SC_MAX_SLOTS / 8];
  int num_names;
  sc_remote_watch *remote_watches;
  bool ready;
  bool *hello_seen;           /* head: ranks heard from */
  uint64_t *incarnation_of;   /* head: the incarnation each rank said hello with */
  uint64_t *rejoin_pending;   /* by rank, the node actor's: a new process whose rejoin
                                 waits for the old one to be seen DOWN here (0: none) */
  int hellos;
  uint64_t incarnation;       /* this process's, random: a restarted node is a new one */
  sc_actor_id node_subs[SC_NODE_MAX_SUBSCRIBERS]; /* sc_monitor_nodes */
  int num_node_subs;
  bool wait_all_hello;
  _Atomic int stop_claimed;   /* 1 once a stop was requested: its requester writes the
                                 reason, then publishes shutdown */
  _Atomic int shutdown;       /* 1 once shutdown_reason is written */
  int shutdown_reason;
  int stop_pipe[2];           /* wakes sc_node_wait_shutdown from signal handlers */
  _Atomic int stopping;
  bool started, stopped;
  uint64_t spin_ns;           /* cluster.spin_us in ns */
  int32_t send_hwm;           /* ZMQ_SNDHWM of every DEALER */
  sc_node_key key;            /* with cluster.curve: this node's key pair */
  uint32_t send_queue_max;    /* sc_node_opts.send_queue_max */
  sc_transport *tr;
  _Atomic(uint8_t) *peer_down; /* by rank */
  sc_node_event_fn event_fn;
  void *event_ud;
  /* stats */
  _Atomic uint64_t mailbox_dropped, undeliverable;
  _Atomic uint64_t late_replies;
};

/* ---- sc_route.c ---- */
/* Sends a letter to its destination, a local actor or another node (any thread);
 * consumes body on success only. */
int sc__route(sc_node *n, sc_envelope *env, void *body);
/* Delivers a letter's content to a local actor: consumes body on success; on failure
 * the caller still owns it. Never tapped (the runtime's own letters). */
int sc__deliver_local(sc_node *n, const sc_envelope *env, void *body);
/* As sc__deliver_local for a message from another node whose envelope env was read from
 * raw, which the receiving loop decodes, then records for the tap (if a subscriber is
 * attached now) just before its actor handles it; env->type must be a message type. */
int sc__deliver_raw(sc_node *n, const sc_envelope *env, sc_raw_msg *raw);
/* Pushes a letter into the live slot s itself, whatever env->dst says of the node (spawn:
 * an actor's START letter). force: system letters ignore the capacity. tap: the
 * transport whose subscribers get a copy when a subscriber is attached now, or NULL. */
int sc__slot_push(sc_node *n, sc_slot *s, const sc_envelope *env, void *body, bool force,
                  sc_transport *tap);

/* ---- sc_loop.c ---- */
int sc__loop_create(sc_node *n, int index, sc_loop **out);
/* uv_walk callback: closes every handle not closing yet (a loop's and the io thread's
 * shutdown). */
void sc__uv_close_any(uv_handle_t *h, void *arg);
/* The loop whose thread calls this, when it is one of n's loop threads; else NULL. */
sc_loop *sc__loop_self(const sc_node *n);
int sc__loop_start(sc_loop *l);
void sc__loop_stop_join(sc_loop *l); /* stops actors, joins the thread */
void sc__loop_destroy(sc_loop *l);
/* Frees a letter and its body (any thread; body may carry SC_LETTER_BITS). */
void sc__letter_free(sc_letter *lt);

/* ---- sc_actor.c ---- */
/* Sends watcher a DOWN {who, node = who.node, reason, why} (any thread; best effort: the
 * watcher may be gone). */
void sc__send_down(sc_node *n, sc_actor_id watcher, sc_actor_id who, int reason,
                   const char *why);
/* A runtime letter {who, reason} to a local slot (system types bypass the mailbox
 * bound). Returns sc__deliver_local's code; the letter is freed when it was not taken. */
int sc__send_sys(sc_node *n, int type, sc_actor_id who, sc_actor_id to, int reason);
/* Answers request req with error_reply {code, msg (NULL: sc_strerror(code))}, sent from
 * req->dst to req->src with req's step, id and trace (any thread). Returns SC_EINVAL,
 * sending nothing, when req is not a request or has no sender; else SC_ENOMEM or
 * sc__route's result (the body is freed when it fails). */
int sc__reply_error_to(sc_node *n, const sc_envelope *req, int code, const char *msg);
/* Spawn into a specific slot index (startup actors) or any (slot_index < 0). */
int sc__spawn_at(sc_node *n, const sc_actor_spec *spec, const char *name, const void *arg,
                 size_t arg_size, int slot_index, sc_actor_id *out);
/* Runs on the loop thread: terminate, notify watchers, release the slot. */
void sc__actor_finalize(sc_loop *l, sc_actor *a);
/* The name of a live local slot (for tap topics), or NULL. */
const char *sc__slot_name(sc_node *n, uint16_t slot);
/* Tells every live local actor that node `rank` is down (io thread). */
void sc__broadcast_node_down(sc_node *n, int32_t rank);

/* ---- sc_node.c ---- */
/* io thread: a peer disconnected or missed its heartbeats. */
void sc__node_peer_is_down(sc_node *n, int32_t rank, int code, const char *why);
/* Sends this node's hello to the head (any thread): at start in a cluster of one node,
 * else from the io thread once its DEALER to every peer has connected (and again from
 * there while it fails). Returns 0 or sc__route's error. */
int sc__node_say_hello(sc_node *n);

/* ---- the transport: sc_transport.c, sc_outbound.c, sc_tap.c (sc_transport_impl.h) ---- */
/* sc_transport.c */
int sc__transport_create(sc_node *n, sc_transport **out);
int sc__transport_start(sc_transport *t, sc_diag *d);
void sc__transport_stop(sc_transport *t); /* joins the io thread, closes sockets */
void sc__transport_destroy(sc_transport *t);
void sc__transport_stats(sc_transport *t, sc_node_stats *s);
/* Decodes a received message into env and a new *body (any thread; raw stays the
 * caller's); sc_msg_decode's codes, with env then the envelope the io thread read. */
int sc__raw_decode(sc_raw_msg *raw, sc_envelope *env, void **body, sc_diag *d);
void sc__raw_free(sc_raw_msg *raw);
/* sc_outbound.c */
/* Sends to another node (any thread); consumes body on success. On one of the node's
 * loop threads (the node actor, slot 0, excepted): encoded into the open pack of the
 * loop's own DEALER for the peer, sent when full, after the sending actor's batch, or at
 * once on an SC_LOOP_OWN loop (SC_EFULL when its backlog and open pack hold
 * send_queue_max letters).
 * Otherwise: encoded and queued for the io thread (SC_EFULL when the queue is full). */
int sc__transport_send(sc_transport *t, const sc_envelope *env, void *body);
/* Loop thread, after each actor's batch of letters: sends the packs the actor's sends to
 * other nodes went into. */
void sc__transport_loop_flush(sc_transport *t, sc_loop *l);
/* Loop thread, before its loop blocks: sends the open packs, hands the open tap batch to
 * the io thread and retries the backlogs of the loop's DEALERs. True when a pack or a
 * backlog could move on at once (the loop must not block). */
bool sc__transport_loop_prepare(sc_transport *t, sc_loop *l);
/* Loop thread, at loop shutdown after the actors stopped: hands the open packs to
 * ZeroMQ and the open tap batch to the io thread, drops the backlogs and closes the
 * loop's DEALERs (linger 0: what ZeroMQ has not sent yet is discarded). */
void sc__transport_loop_close(sc_transport *t, sc_loop *l);
/* sc_tap.c */
/* Taps of local sends (see the top of sc_tap.c). sc__tap_wanted (any thread, one
 * atomic load): whether any subscriber is attached, i.e. whether a letter sent now is
 * marked for the tap. sc__tap_letter (the receiving loop, just before the handler runs):
 * records the tapped letter (ns: when it left the mailbox) in the loop's open batch when
 * a subscriber wants its topic: raw, the letter as it came from another node, is copied
 * into the record as it is; without it the letter is encoded. The letter and raw stay
 * the caller's. A record that is wanted but cannot be made (no memory) is counted as a
 * drop. */
bool sc__tap_wanted(sc_transport *t);
void sc__tap_letter(sc_transport *t, sc_loop *l, const sc_letter *lt, const sc_raw_msg *raw,
                    uint64_t ns);

/* ---- helpers of several files, static inline where they run per letter ----
 * On the send, deliver and dispatch paths they stay inlinable instead of becoming calls
 * between files. */

/* Wakes l's thread (a letter scheduled its slot; a loop that must not block). */
static inline void sc__loop_wake(sc_loop *l) {
  /* Coalesce: only the idle->pending transition costs a uv_async_send (a syscall). */
  if (sc_wake_claim(&l->wake_pending)) uv_async_send(&l->wake);
}

/* The context of a handler, and an actor's stop request and pending requests: used by
 * dispatch and replies (sc_loop.c) and by requests, timeouts and finalize (sc_actor.c). */
static inline void sc__ctx_init(sc_ctx *c, sc_loop *l, sc_actor *a, const sc_envelope *env) {
  c->node = l->node;
  c->actor = a;
  c->loop = l;
  c->env = env;
  c->letter = NULL;
}

static inline void sc__actor_stop_req(sc_actor *a, int reason) {
  if (!a->stopping) {
    a->stopping = true;
    a->stop_reason = reason;
  }
}

static inline void sc__pending_remove(sc_actor *a, sc_pending *p) {
  for (sc_pending **pp = &a->pending; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
}

static inline void sc__on_timer_closed(uv_handle_t *h) { free(h); }

static inline void sc__pending_free(sc_pending *p) {
  if (p->timer) {
    uv_timer_stop(p->timer);
    uv_close((uv_handle_t *)p->timer, sc__on_timer_closed);
  }
  free(p);
}

/* Frees what a letter's body field holds: a body of type (runtime-internal types
 * included), or a received message not decoded yet (SC_LETTER_RAW). The loop that ran
 * the letter does (sc__letter_free, sc_loop.c), and a send that a full
 * SC_OVERFLOW_DROP mailbox drops (sc_route.c). */
static inline void sc__body_release(int type, void *bits) {
  const uintptr_t b = (uintptr_t)bits;
  void *body = (void *)(b & ~SC_LETTER_BITS);
  if (b & SC_LETTER_RAW)
    sc__raw_free(body);
  else if (body != NULL && type >= SC_SYS_BASE)
    free(body);
  else if (body != NULL)
    sc_msg_body_destroy(type, body);
}

#endif
