/* sc_transport.c - ZeroMQ between nodes, and taps.
 *
 * Sockets. The node's io thread owns one ROUTER bound at the node's endpoint, which
 * receives from every peer (frames [peer identity][pack], sc_pack.h: one or more
 * letters; the io thread splits the pack and reads each letter's envelope only, and the
 * receiving loop decodes, see deliver_pack), one DEALER per peer (routing
 * id "n<rank>") with ZeroMQ heartbeats and a socket monitor, and the tap XPUB. A
 * DISCONNECTED event after the connection was up (peer died, or missed heartbeats past the
 * timeout) marks the peer DOWN in sc_node.peer_down, an atomic every thread reads.
 *
 * Sending. A message sent on an actor loop thread is encoded there into the open pack
 * of the loop's own DEALER for the peer (created on the loop's first send there; routing
 * id "n<rank>.<loop>", so the peer's ROUTER sees one identity per DEALER; no heartbeats
 * or monitor: the io thread watches the peer). The pack goes out (zmq_send copies it)
 * once it holds SC_PACK_LETTERS letters or SC_PACK_BYTES, and otherwise after the
 * sending actor's batch of letters (sc_transport_loop_flush from drain_runq; timers' sends
 * at the loop's uv_prepare), or at once on an SC_LOOP_OWN loop, whose handlers may block
 * after sending: a burst of sends to one peer pays ZeroMQ's per-message cost once, and a
 * reply waits for nothing but the rest of its actor's batch. An actor runs on its loop
 * thread only, so FIFO order per sender/receiver pair is FIFO order per (loop, peer)
 * DEALER, and no hand-off to the io thread sits in the path. Other threads
 * (sc_node_send from outside the loops, the io thread's own error replies) and the node
 * actor (see sc_transport_send) encode a pack of one letter into a malloc'd frame and
 * queue it (lock-free, bounded) for the io thread, which sends it on its DEALER without
 * a copy.
 *
 * Every DEALER, the io thread's and the loops', is a zout with one implementation: its
 * owner thread sends with ZMQ_DONTWAIT; what ZeroMQ refuses (EAGAIN at the high-water
 * mark) waits in the zout's backlog (FIFO: later sends queue behind it), and only then is
 * the socket's ZMQ_FD watched with a uv_poll. ZMQ_FD is edge-triggered and only means
 * "look at ZMQ_EVENTS", so the poll callback drains the backlog while ZMQ_EVENTS reports
 * POLLOUT (capped per pass), and the owner's uv_prepare re-checks ZMQ_EVENTS of every
 * backlogged zout before its loop blocks (a zmq_send can consume the fd's edge). A backlog
 * for a DOWN peer is dropped.
 *
 * The io loop: a uv_poll per ROUTER, XPUB and monitor fd; every wake-up (poll, async
 * outbox, prepare) drains each while ZMQ_EVENTS says so, with a per-socket cap; the
 * uv_prepare re-checks ZMQ_EVENTS before the loop blocks, and a uv_idle keeps the loop from
 * blocking while a capped drain left work behind.
 *
 * Taps. Subscriptions are read from the XPUB (non-verbose: one notification per distinct
 * prefix) into an immutable prefix set published through an atomic pointer. A local send
 * made while any subscriber is attached marks its letter (one atomic load, nothing
 * encoded). The receiving loop notes when it took the letter out of the mailbox (one clock
 * read per batch of up to SC_ACTOR_BATCH letters) and, just before the handler runs, if
 * its topic matches a prefix (each loop keeps the last topic it built, so a stream to one
 * actor builds and matches it once), encodes it as a record (sc_tap_record.h) into the
 * loop's open batch of that topic (a batch the XPUB sent comes back to its loop for
 * reuse, batch_recycle); the letter is then run and freed as any other. A batch
 * goes to the io thread (one lock-free push) when the topic changes, at 256 records or
 * 64 KiB, or when the loop's turn ends (uv_prepare, before it may block), and the io
 * thread sends it as the XPUB message [topic][records] without a copy
 * (zmq_msg_init_data). The encoding is the loop's (a ping: 21 ns on the 2-core VM, its
 * letter and body still in its cache): handing whole letters to the io thread to encode and free
 * instead halved the in-process rate on the GPU host, where every letter then crossed a
 * third core (bench/messages.md, fourth pass). What the io thread receives from other
 * nodes is marked the same way and recorded by the receiving loop once it is decoded, so
 * every record of an actor comes from its loop, in the order it handled them, and the io
 * thread (which every received message crosses) does nothing more for a tap than publish
 * batches. Batches waiting for the io thread are bounded
 * (SC_TAP_QUEUE_BYTES) and the XPUB runs with XPUB_NODROP and non-blocking sends, so a
 * slow subscriber shows up as counted drops, never as a blocked actor.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "base/log.h"
#include "actors/runtime/sc_node_impl.h"
#include "actors/runtime/sc_pack.h"
#include "actors/runtime/sc_tap_record.h"
#include "base/clock.h"
#include "actors/runtime/sc_wake.h"

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

#define LOG "transport"
#define SC_DRAIN_CAP 1024
/* memory held by tap batches the loops handed to the io thread and it has not sent yet
 * (their allocations, not only what they hold): a subscriber that lags costs records
 * past this, not memory */
#define SC_TAP_QUEUE_BYTES (8u << 20)
/* the io thread sends at most this many of the loops' batches per pass, then reads the
 * ROUTER again (a send is one zmq_msg_send, no copy) */
#define SC_TAP_DRAIN_BATCHES 64
#define SC_TAP_BATCH_RECORDS 256     /* a tap batch closes at this many records ... */
/* ... or when one more record would likely take it past this size: records are encoded
 * in place, so a batch may pass it by one record, and a larger record is a batch alone */
#define SC_TAP_BATCH_BYTES 65536
/* smallest first allocation of a batch: small, since a loop whose letters alternate
 * topics closes a batch per record; a busy stream's batches start as large as its last
 * one was filled */
#define SC_TAP_BATCH_FIRST 512
/* batches a loop keeps for reuse (batch_recycle), only those no larger than
 * SC_TAP_SPARE_CAP (a full batch's buffer may pass SC_TAP_BATCH_BYTES by one record, so
 * its allocation doubles once): at most 8 MiB per loop */
#define SC_TAP_SPARES 64
#define SC_TAP_SPARE_CAP (2 * SC_TAP_BATCH_BYTES)
/* A loop's pack for a peer is sent once it holds SC_PACK_LETTERS letters (fewer when
 * send_hwm is smaller: see sc_transport_create) or SC_PACK_BYTES, else after the actor's
 * batch (see the header comment). Both only bound how much one zmq_send carries: 64
 * letters spread ZeroMQ's cost per message (a few hundred ns each side) to a few ns, and
 * 16 KiB keeps a pack of large letters near the 8 KiB ZeroMQ reads and writes at a
 * time. */
#define SC_PACK_LETTERS 64
#define SC_PACK_BYTES 16384
#define SC_TOPIC_MAX 96
/* a node that has not reached every peer says which, after this and then every so often */
#define SC_UNREACHED_FIRST_MS 2000
#define SC_UNREACHED_EVERY_MS 10000
#define SC_MAX_SUBS 256

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

static void frame_free(frame *f) {
  if (f->wrapped)
    zmq_msg_close(&f->msg);
  else
    free(f->data);
  free(f);
}

/* A frame that owns data (malloc'd), or NULL. */
static frame *frame_new(int32_t rank, uint8_t *data, size_t len, uint32_t letters) {
  frame *f = malloc(sizeof *f);
  if (f == NULL) return NULL;
  f->rank = rank;
  f->letters = letters;
  f->wrapped = false;
  f->data = data;
  f->len = len;
  return f;
}

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

/* One DEALER to one peer and what it refused (see the header comment). Only its owner
 * thread touches it, except `sent`, which sc_transport_stats reads. */
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
   * sending actor's batch (sc_transport_loop_flush) */
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
  /* written by the loops and the io thread */
  _Alignas(64) _Atomic int wake_pending;
  _Alignas(64) _Atomic uint32_t outbox_count; /* frames queued in outbox */
  _Alignas(64) _Atomic size_t tapq_bytes;     /* allocated by the batches in tapq */
  sc_mpsc outbox, tapq;                       /* (each line-aligned inside) */
  _Alignas(64) _Atomic uint64_t tap_published, tap_dropped, remote_recv;
  _Atomic uint64_t remote_dropped; /* backlogs dropped because their peer went DOWN */
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
  bool hello_sent;       /* this node's hello went out (sc_node_say_hello) */
  uint64_t spin_off_until; /* no spinning before this (oversubscribed CPU) */
  subs *subs_all;  /* chain of every snapshot (io thread writes) */
  subs *subs_work; /* the io thread's working set, room for SC_MAX_SUBS (not published) */
};

static void tr_wake(sc_transport *t) {
  if (sc_wake_claim(&t->wake_pending))
    uv_async_send(&t->wake);
}

static bool has_events(void *sock, short want) {
  int ev = 0;
  size_t sz = sizeof ev;
  if (zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &sz) != 0) return false;
  return (ev & want) != 0;
}

static int set_int(void *s, int opt, int v) { return zmq_setsockopt(s, opt, &v, sizeof v); }

/* ZeroMQ I/O threads by bit (ZMQ_AFFINITY): the node's sockets on the first, the tap's
 * XPUB on the second when there is one (sc_transport_create). */
#define SC_AFFINITY_NODES 1u
#define SC_AFFINITY_TAP 2u

static void set_affinity(void *s, uint64_t mask) {
  zmq_setsockopt(s, ZMQ_AFFINITY, &mask, sizeof mask);
}

static void close_sock(void **s) {
  if (*s) {
    const int zero = 0;
    zmq_setsockopt(*s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(*s);
    *s = NULL;
  }
}

static void count_drops(sc_transport *t, uint64_t k) {
  atomic_fetch_add_explicit(&t->tap_dropped, k, memory_order_relaxed);
}

/* ---- what other nodes sent, until its loop decodes it ---- */

/* ZeroMQ reads a socket into 8 KiB buffers and lets the messages that fit point into
 * them; a buffer lives until all of its messages are closed. A letter that may wait in
 * a mailbox is therefore copied out of its pack when it is that small (one malloc,
 * cheaper than the decode), or it would pin a whole buffer each (measured: 2.8-3.4 KB per
 * queued 130-byte ping instead of about 300 bytes). A larger one shares its pack (which
 * has a buffer of its own, since it is larger too). */
#define SC_RAW_COPY_MAX 8192

struct sc_raw_msg {
  sc_envelope env; /* as read by the io thread: for an error reply when the body fails */
  size_t len;
  bool zmq;        /* the bytes are msg's, from off on; else they follow in bytes[] */
  size_t off;
  zmq_msg_t msg;
  uint8_t bytes[];
};

static const uint8_t *raw_data(const sc_raw_msg *raw) {
  /* (zmq_msg_data does not change the message; its prototype is not const) */
  return raw->zmq ? (const uint8_t *)zmq_msg_data((zmq_msg_t *)&raw->msg) + raw->off
                  : raw->bytes;
}

/* ---- taps ---- */

static bool subs_match(const subs *s, const char *topic) {
  for (int i = 0; i < s->n; i++)
    if (strncmp(topic, s->p[i].s, s->p[i].len) == 0) return true;
  return false;
}

bool sc_tap_wanted(sc_transport *t) {
  const subs *s = atomic_load_explicit(&t->subs_now, memory_order_acquire);
  return s != NULL && s->n > 0;
}

static size_t put_str(char *dst, size_t at, const char *src) {
  while (*src && at < SC_TOPIC_MAX - 1) dst[at++] = *src++;
  return at;
}

/* "<node>/<actor>/<type>" */
static void make_topic(sc_node *n, const sc_envelope *env, char *topic) {
  const char *actor = sc_slot_name(n, env->dst.slot);
  const char *type = sc_msg_type_name(env->type);
  char num[16];
  size_t at = 0;
  snprintf(num, sizeof num, "%d", (int)n->rank);
  at = put_str(topic, at, num);
  topic[at++] = '/';
  if (actor == NULL) {
    snprintf(num, sizeof num, "a%u", env->dst.slot);
    actor = num;
  }
  at = put_str(topic, at, actor);
  if (at < SC_TOPIC_MAX - 1) topic[at++] = '/';
  at = put_str(topic, at, type ? type : "unknown");
  topic[at] = '\0';
}

/* The topic of env when a subscriber wants it, else NULL (any thread; c is its own). */
static const char *tap_topic(sc_transport *t, topic_cache *c, const sc_envelope *env) {
  const subs *s = atomic_load_explicit(&t->subs_now, memory_order_acquire);
  if (s == NULL || s->n == 0) return NULL;
  if (s != c->subs || env->type != c->type || !sc_actor_id_eq(env->dst, c->dst)) {
    make_topic(t->node, env, c->topic);
    c->match = subs_match(s, c->topic);
    c->subs = s;
    c->dst = env->dst;
    c->type = env->type;
    c->gen++;
  }
  return c->match ? c->topic : NULL;
}

static void batch_free(tap_batch *b) {
  sc_buf_free(&b->buf);
  free(b);
}

/* Any thread, once b's records are gone (sent or dropped): b goes back to the loop that
 * filled it, up to SC_TAP_SPARES per loop, else is freed. A busy tap so writes into a
 * few buffers that stay mapped instead of fresh memory for every batch (up to 2.5 GB/s
 * of records at 1 KiB): in process at 1 KiB the tapped rate on the GPU host rose from
 * 1.82-2.02 M to 2.20-2.56 M msg/s (bench/messages.md, fifth pass); at 16 B it did not
 * change measurably. */
static void batch_recycle(tap_batch *b) {
  tap_writer *w = b->owner;
  if (b->buf.cap > SC_TAP_SPARE_CAP) { /* grown by one large record: not kept */
    batch_free(b);
    return;
  }
  if (atomic_fetch_add_explicit(&w->spares, 1, memory_order_relaxed) < SC_TAP_SPARES) {
    sc_mpsc_push(&w->spare, &b->link);
    return;
  }
  atomic_fetch_sub_explicit(&w->spares, 1, memory_order_relaxed);
  batch_free(b);
}

/* A batch that will not be published: its records are counted as dropped. */
static void batch_drop(sc_transport *t, tap_batch *b) {
  count_drops(t, b->records);
  batch_recycle(b);
}

/* ZeroMQ's thread, once the XPUB sent (or discarded) the records. */
static void zmq_free_batch(void *data, void *hint) {
  (void)data;
  SC_ZMQ_TAKEN_BACK(hint);
  batch_recycle(hint);
}

/* io thread: sends b as [topic][records] and gives b to ZeroMQ. All-or-nothing: with
 * XPUB_NODROP the first frame fails with EAGAIN when a subscriber is at its HWM. */
static void tap_send(sc_transport *t, tap_batch *b) {
  const uint32_t k = b->records;
  zmq_msg_t m;
  if (zmq_msg_init_data(&m, b->buf.data, b->buf.len, zmq_free_batch, b) != 0) {
    batch_drop(t, b);
    return;
  }
  bool sent = zmq_send(t->xpub, b->topic, strlen(b->topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0;
  if (sent) {
    SC_ZMQ_HANDOFF(b); /* b is not touched here after this */
    sent = zmq_msg_send(&m, t->xpub, ZMQ_DONTWAIT) >= 0;
  }
  if (!sent) {
    zmq_msg_close(&m); /* (frees b through zmq_free_batch) */
    count_drops(t, k);
    return;
  }
  atomic_fetch_add_explicit(&t->tap_published, k, memory_order_relaxed);
}

/* Loop thread: queues a closed batch for the io thread, or drops it when too much waits
 * there already (a slow tap costs records, never an actor's time). */
static void batch_ship(sc_transport *t, tap_batch *b) {
  const size_t held = b->buf.cap;
  if (atomic_fetch_add_explicit(&t->tapq_bytes, held, memory_order_acq_rel) + held >
      SC_TAP_QUEUE_BYTES) {
    atomic_fetch_sub_explicit(&t->tapq_bytes, held, memory_order_acq_rel);
    batch_drop(t, b);
    return;
  }
  sc_mpsc_push(&t->tapq, &b->link);
  tr_wake(t);
}

/* Loop thread: closes the open batch and queues it for the io thread. */
static void tap_hand_over(sc_transport *t, tap_writer *w) {
  tap_batch *b = w->open;
  if (b == NULL) return;
  w->open = NULL;
  if (b->records == 0) { /* its only record failed */
    batch_recycle(b);
    return;
  }
  /* a busy stream then fills its batches without growing them, a quiet one stays small */
  w->first_cap = SC_TAP_BATCH_FIRST;
  while (w->first_cap < b->buf.len && w->first_cap < SC_TAP_BATCH_BYTES) w->first_cap *= 2;
  batch_ship(t, b);
}

/* Loop thread: w's open batch, ready for a record of about need bytes whose topic
 * is the one tap_topic last returned for w (w->topic: a new gen there means another
 * topic, with no string compare per record). An open batch of another topic, or a full
 * one, is handed over first, so records leave in the order they came. NULL when out of
 * memory. */
static tap_batch *tap_open(sc_transport *t, tap_writer *w, size_t need) {
  tap_batch *b = w->open;
  if (b && (b->records >= SC_TAP_BATCH_RECORDS || b->buf.len + need > SC_TAP_BATCH_BYTES ||
            w->open_gen != w->topic.gen)) {
    tap_hand_over(t, w);
    b = NULL;
  }
  if (b == NULL) {
    sc_mpsc_node *nd = sc_mpsc_pop(&w->spare);
    if (nd != NULL) {
      atomic_fetch_sub_explicit(&w->spares, 1, memory_order_relaxed);
      b = SC_CONTAINER_OF(nd, tap_batch, link);
      b->buf.len = 0;
    } else if ((b = malloc(sizeof *b)) != NULL) {
      b->owner = w;
      sc_buf_init(&b->buf);
    } else {
      return NULL;
    }
    memcpy(b->topic, w->topic.topic, SC_TOPIC_MAX);
    b->records = 0;
    w->open = b;
    w->open_gen = w->topic.gen;
    if (sc_buf_reserve(&b->buf, w->first_cap > need ? w->first_cap : need) != 0) return NULL;
  }
  return b;
}

/* Loop thread: records the letter straight into w's open batch: raw's bytes when it came
 * from another node (a copy of what was sent, cheaper than encoding the decoded body
 * again), else the letter encoded in place. */
static void tap_append_letter(sc_transport *t, tap_writer *w, uint64_t ns,
                              const sc_letter *lt, const sc_raw_msg *raw) {
  /* an encoding's size is not known before encoding: ask for room for a small message */
  tap_batch *b = tap_open(t, w, SC_TAP_RECORD_HEADER + (raw ? raw->len : 64));
  const size_t at = b ? b->buf.len : 0;
  if (b == NULL || sc_buf_reserve(&b->buf, SC_TAP_RECORD_HEADER) != 0) {
    count_drops(t, 1);
    return;
  }
  b->buf.len += SC_TAP_RECORD_HEADER;
  if (raw ? sc_buf_append(&b->buf, raw_data(raw), raw->len) != 0
          : sc_msg_encode_append(&lt->env, lt->body, &b->buf) != 0) {
    b->buf.len = at;
    count_drops(t, 1);
    return;
  }
  const size_t len = b->buf.len - at - SC_TAP_RECORD_HEADER;
  sc_tap_record_put_header(b->buf.data + at, ns, t->node->rank, (uint32_t)len);
  b->records++;
}

static size_t subs_bytes(int n) { return sizeof(subs) + (size_t)n * sizeof(sub_prefix); }

/* Whether a and b hold the same prefixes (neither holds one twice). */
static bool same_subs(const subs *a, const subs *b) {
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++) {
    bool found = false;
    for (int j = 0; j < b->n && !found; j++)
      found = a->p[i].len == b->p[j].len && memcmp(a->p[i].s, b->p[j].s, a->p[i].len) == 0;
    if (!found) return false;
  }
  return true;
}

/* Publishes the set in w (the io thread's working copy): the snapshot already made of
 * it if there is one, else a new one of its size. Out of memory: the set stays as it
 * was, and the next change tries again with w. */
static void subs_publish(sc_transport *t, const subs *w) {
  const subs *cur = atomic_load_explicit(&t->subs_now, memory_order_relaxed);
  subs *snap = NULL;
  for (subs *o = t->subs_all; o && snap == NULL; o = o->retired)
    if (same_subs(o, w)) snap = o;
  if (snap == NULL) {
    if ((snap = malloc(subs_bytes(w->n))) == NULL) return;
    memcpy(snap, w, subs_bytes(w->n));
    snap->retired = t->subs_all;
    t->subs_all = snap;
  }
  if (snap == cur) return;
  atomic_store_explicit(&t->subs_now, snap, memory_order_release);
  SC_DEBUG(LOG, "node %d: %d tap subscription(s)", t->node->rank, snap->n);
}

static int drain_xpub(sc_transport *t) {
  int handled = 0;
  subs *w = t->subs_work;
  bool changed = false;
  for (; handled < SC_DRAIN_CAP; handled++) {
    uint8_t buf[SC_TOPIC_MAX + 1];
    const int rc = zmq_recv(t->xpub, buf, sizeof buf, ZMQ_DONTWAIT);
    if (rc < 0) break;
    /* a prefix must fit a row with its NUL (SC_TOPIC_MAX - 1 bytes, as every topic does);
     * a longer one could match no topic anyway */
    if (rc < 1 || rc > SC_TOPIC_MAX) continue;
    const size_t len = (size_t)rc - 1;
    int found = -1;
    for (int i = 0; i < w->n; i++)
      if (w->p[i].len == len && memcmp(w->p[i].s, buf + 1, len) == 0) found = i;
    if (buf[0] == 1 && found < 0 && w->n < SC_MAX_SUBS) {
      memcpy(w->p[w->n].s, buf + 1, len);
      w->p[w->n].s[len] = '\0';
      w->p[w->n++].len = len;
      changed = true;
    } else if (buf[0] == 0 && found >= 0) {
      w->p[found] = w->p[--w->n];
      changed = true;
    }
  }
  if (changed) subs_publish(t, w);
  return handled;
}

/* Sends the loops' queued batches, at most SC_TAP_DRAIN_BATCHES (the ROUTER waits
 * meanwhile). Returns the batches sent; *more: it stopped at that cap. */
static int drain_tapq(sc_transport *t, bool *more) {
  for (int k = 0; k < SC_TAP_DRAIN_BATCHES; k++) {
    sc_mpsc_node *nd = sc_mpsc_pop(&t->tapq);
    if (nd == NULL) return k;
    tap_batch *b = SC_CONTAINER_OF(nd, tap_batch, link);
    atomic_fetch_sub_explicit(&t->tapq_bytes, b->buf.cap, memory_order_acq_rel);
    tap_send(t, b);
  }
  *more = true;
  return SC_TAP_DRAIN_BATCHES;
}

/* ---- zout: a DEALER and its backlog (io thread and loops alike) ---- */

static bool peer_is_down(const sc_transport *t, int32_t rank) {
  return atomic_load_explicit(&t->node->peer_down[rank], memory_order_acquire) != 0;
}

static void zout_count(zout *z, uint32_t letters) { /* one writer: no read-modify-write */
  atomic_store_explicit(&z->sent,
                        atomic_load_explicit(&z->sent, memory_order_relaxed) + letters,
                        memory_order_relaxed);
}

/* k letters of an io-thread zout (one per frame there) left it, sent or dropped:
 * senders may queue k more. */
static void zout_release(zout *z, uint32_t k) {
  if (z->pending && k) atomic_fetch_sub_explicit(z->pending, k, memory_order_acq_rel);
}

static void free_data(void *data, void *hint) {
  (void)hint;
  SC_ZMQ_TAKEN_BACK(data);
  free(data);
}

/* Tries to send f without blocking; true when ZeroMQ took it (then only the frame struct
 * is the caller's to free). On EAGAIN the wrapped message stays in f. */
static bool zout_try(zout *z, frame *f) {
  if (!f->wrapped) {
    if (zmq_msg_init_data(&f->msg, f->data, f->len, free_data, NULL) != 0) return false;
    f->wrapped = true;
    SC_ZMQ_HANDOFF(f->data);
  }
  if (zmq_msg_send(&f->msg, z->sock, ZMQ_DONTWAIT) < 0) return false;
  zout_count(z, f->letters);
  return true;
}

static void on_zout_poll(uv_poll_t *h, int status, int events);

static void zout_append(zout *z, frame *f) {
  f->next = NULL;
  if (z->backlog_tail)
    z->backlog_tail->next = f;
  else
    z->backlog = f;
  z->backlog_tail = f;
  z->backlog_len += f->letters;
  if (!z->watching && uv_poll_start(&z->poll, UV_READABLE, on_zout_poll) == 0)
    z->watching = true;
}

static void zout_unwatch(zout *z) {
  /* at destroy the io loop has closed every handle already (and the loop itself) */
  if (z->watching && !uv_is_closing((uv_handle_t *)&z->poll)) uv_poll_stop(&z->poll);
  z->watching = false;
}

/* Frees the backlog (at close, or because the peer is DOWN: see zout_drop_down). */
static void zout_drop(zout *z) {
  while (z->backlog) {
    frame *f = z->backlog;
    z->backlog = f->next;
    frame_free(f);
  }
  zout_release(z, z->backlog_len);
  z->backlog_tail = NULL;
  z->backlog_len = 0;
  zout_unwatch(z);
}

/* The backlog of a peer that went DOWN: accepted messages lost, so counted. */
static void zout_drop_down(zout *z) {
  atomic_fetch_add_explicit(&z->t->remote_dropped, z->backlog_len, memory_order_relaxed);
  zout_drop(z);
}

/* Sends from the backlog while ZeroMQ takes it, at most SC_DRAIN_CAP; a backlog for a
 * DOWN peer is dropped. */
static void zout_flush(zout *z) {
  if (peer_is_down(z->t, z->rank)) {
    zout_drop_down(z);
    return;
  }
  uint32_t letters = 0;
  for (int k = 0; z->backlog && k < SC_DRAIN_CAP && zout_try(z, z->backlog); k++) {
    frame *f = z->backlog;
    z->backlog = f->next;
    z->backlog_len -= f->letters;
    letters += f->letters;
    free(f);
  }
  zout_release(z, letters);
  if (z->backlog == NULL) {
    z->backlog_tail = NULL;
    zout_unwatch(z);
  }
}

/* Whether the backlog can move now. Reading ZMQ_EVENTS also processes the socket's
 * pending commands, which re-arms its fd. */
static bool zout_ready(zout *z) {
  return z->backlog && (peer_is_down(z->t, z->rank) || has_events(z->sock, ZMQ_POLLOUT));
}

static void on_zout_poll(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  zout *z = h->data;
  if (zout_ready(z)) zout_flush(z);
}

/* Before the owner's loop blocks; true when a capped flush left work that can go now. */
static bool zout_prepare(zout *z) {
  if (!zout_ready(z)) return false;
  zout_flush(z);
  return zout_ready(z);
}

/* Takes f: dropped for a DOWN peer, else sent at once unless a backlog is ahead of it. */
static void zout_offer(zout *z, frame *f) {
  if (peer_is_down(z->t, z->rank)) { /* accepted by send_via_io, now lost */
    atomic_fetch_add_explicit(&z->t->remote_dropped, 1, memory_order_relaxed);
    frame_free(f);
    zout_release(z, 1);
  } else if (z->backlog == NULL && zout_try(z, f)) {
    free(f);
    zout_release(z, 1);
  } else {
    zout_append(z, f); /* still counted until it leaves the backlog */
  }
}

/* A loop's zout: sends its open pack (a copy: the pack's buffer is kept for the next
 * one, warm in this core's cache), or hands the buffer to the backlog, or drops the pack
 * for a DOWN peer (counted: those sends were accepted). Returns 0 or SC_ENOMEM (the pack
 * stays open). */
static int zout_send_pack(zout *z) {
  const uint32_t letters = z->pack_letters;
  if (letters == 0) return 0;
  if (peer_is_down(z->t, z->rank)) {
    atomic_fetch_add_explicit(&z->t->remote_dropped, letters, memory_order_relaxed);
  } else if (z->backlog == NULL &&
             zmq_send(z->sock, z->pack.data, z->pack.len, ZMQ_DONTWAIT) >= 0) {
    zout_count(z, letters);
  } else {
    frame *f = frame_new(z->rank, z->pack.data, z->pack.len, letters);
    if (f == NULL) return SC_ENOMEM;
    zout_append(z, f);
    sc_buf_init(&z->pack); /* the frame owns the bytes now */
  }
  z->pack.len = 0;
  z->pack_letters = 0;
  if (z->pack.cap > 4 * SC_PACK_BYTES) sc_buf_free(&z->pack); /* after a huge letter */
  return 0;
}

/* Creates the DEALER for rank with the options every DEALER shares and prepares its poll
 * on uv (the owner's loop). The caller adds its own options, then zout_connect. */
static int zout_open(zout *z, sc_transport *t, int32_t rank, const char *rid, int hwm,
                     uv_loop_t *uv) {
  z->t = t;
  z->rank = rank;
  void *s = zmq_socket(t->zctx, ZMQ_DEALER);
  if (s == NULL) return SC_ESYS;
  zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, strlen(rid));
  set_int(s, ZMQ_LINGER, 0);
  set_int(s, ZMQ_SNDHWM, hwm);
  set_int(s, ZMQ_IMMEDIATE, 0); /* queue until the peer is up */
  set_int(s, ZMQ_RECONNECT_IVL, 50);
  set_affinity(s, SC_AFFINITY_NODES);
  int fd = -1;
  size_t sz = sizeof fd;
  if (zmq_getsockopt(s, ZMQ_FD, &fd, &sz) != 0 || uv_poll_init(uv, &z->poll, fd) != 0) {
    close_sock(&s);
    return SC_ESYS;
  }
  z->poll.data = z;
  z->sock = s;
  return 0;
}

static int zout_connect(zout *z) {
  const char *endpoint = z->t->node->cluster.nodes[z->rank].endpoint;
  return zmq_connect(z->sock, endpoint) == 0 ? 0 : SC_EIO;
}

/* Owner thread: drops the backlog and closes the socket; the poll handle is closed first
 * (libuv must stop watching an fd before it goes away). */
static void zout_close(zout *z) {
  sc_buf_free(&z->pack);
  z->pack_letters = 0;
  if (z->sock == NULL) return;
  zout_drop(z);
  if (!uv_is_closing((uv_handle_t *)&z->poll)) uv_close((uv_handle_t *)&z->poll, NULL);
  close_sock(&z->sock);
}

static uint64_t zouts_sent(zout *zs, int32_t n) {
  uint64_t sum = 0;
  for (int32_t r = 0; r < n; r++)
    sum += atomic_load_explicit(&zs[r].sent, memory_order_relaxed);
  return sum;
}

/* ---- loop threads ---- */

static lnet *lnet_of(sc_transport *t, sc_loop *l) {
  lnet *ln = atomic_load_explicit(&t->lnets[l->index], memory_order_relaxed);
  if (ln) return ln;
  ln = sc_calloc_lines(1, sizeof *ln); /* (its spare queue is line-aligned) */
  zout *peers = calloc((size_t)t->node->cluster.num_nodes, sizeof *peers);
  if (ln == NULL || peers == NULL) {
    free(ln);
    free(peers);
    return NULL;
  }
  ln->peers = peers;
  sc_mpsc_init(&ln->tap.spare);
  atomic_store_explicit(&t->lnets[l->index], ln, memory_order_release);
  return ln;
}

static int loop_zout(sc_transport *t, sc_loop *l, lnet *ln, int32_t rank, zout **out) {
  zout *z = &ln->peers[rank];
  if (z->sock == NULL) {
    char rid[32];
    snprintf(rid, sizeof rid, "n%d.%d", (int)t->node->rank, l->index);
    int rc = zout_open(z, t, rank, rid, t->pack_hwm, &l->uv);
    if (rc == 0 && (rc = zout_connect(z)) != 0) zout_close(z);
    if (rc != 0) return rc;
  }
  *out = z;
  return 0;
}

/* Encodes the letter into the peer's open pack; the pack goes out once full, else after
 * the actor's batch of letters, or at once on an SC_LOOP_OWN loop (whose handlers may
 * block right after a send: the comm actor sends its NCCL id, then waits in NCCL for the
 * peers that need it). A full pack that cannot be queued (no memory) stays open and is
 * retried at the next flush: the letter was accepted. */
static int send_from_loop(sc_transport *t, sc_loop *l, const sc_envelope *env, void *body) {
  lnet *ln = lnet_of(t, l);
  if (ln == NULL) return SC_ENOMEM; /* never the io path: it would break FIFO order */
  zout *z = NULL;
  int rc = loop_zout(t, l, ln, env->dst.node, &z);
  if (rc != 0) return rc;
  if (z->backlog_len + z->pack_letters >= t->node->send_queue_max) return SC_EFULL;
  if ((rc = sc_pack_append(&z->pack, env, body)) != 0) return rc;
  sc_msg_body_destroy(env->type, body);
  ln->packs_open = true;
  if (++z->pack_letters >= t->pack_letters || z->pack.len >= SC_PACK_BYTES || l->own)
    (void)zout_send_pack(z);
  return 0;
}

/* Sends every open pack of the loop; false when one could not be (no memory). */
static bool flush_packs(sc_transport *t, lnet *ln) {
  if (!ln->packs_open) return true;
  bool all = true;
  for (int32_t r = 0; r < t->node->cluster.num_nodes; r++)
    if (zout_send_pack(&ln->peers[r]) != 0) all = false;
  ln->packs_open = !all;
  return all;
}

void sc_transport_loop_flush(sc_transport *t, sc_loop *l) {
  lnet *ln = atomic_load_explicit(&t->lnets[l->index], memory_order_relaxed);
  if (ln != NULL) (void)flush_packs(t, ln);
}

void sc_tap_letter(sc_transport *t, sc_loop *l, const sc_letter *lt, const sc_raw_msg *raw,
                   uint64_t ns) {
  lnet *ln = lnet_of(t, l);
  const char *topic = ln ? tap_topic(t, &ln->tap.topic, &lt->env) : NULL;
  if (topic != NULL)
    tap_append_letter(t, &ln->tap, ns, lt, raw);
  else if (ln == NULL) /* wanted or not: no memory to tell */
    count_drops(t, 1);
}

bool sc_transport_loop_prepare(sc_transport *t, sc_loop *l) {
  lnet *ln = atomic_load_explicit(&t->lnets[l->index], memory_order_relaxed);
  if (ln == NULL) return false;
  bool more = !flush_packs(t, ln); /* (a timer's sends) */
  tap_hand_over(t, &ln->tap);
  for (int32_t r = 0; r < t->node->cluster.num_nodes; r++)
    if (zout_prepare(&ln->peers[r])) more = true;
  return more;
}

void sc_transport_loop_close(sc_transport *t, sc_loop *l) {
  lnet *ln = atomic_load_explicit(&t->lnets[l->index], memory_order_relaxed);
  if (ln == NULL) return;
  (void)flush_packs(t, ln); /* (what terminate sent; linger 0 below discards what is unsent) */
  tap_hand_over(t, &ln->tap);
  for (int32_t r = 0; r < t->node->cluster.num_nodes; r++) zout_close(&ln->peers[r]);
}

/* ---- inbound ---- */

void sc_raw_free(sc_raw_msg *raw) {
  if (raw->zmq) zmq_msg_close(&raw->msg);
  free(raw);
}

/* The letter at p (len bytes inside pack) as an sc_raw_msg (copied out, or sharing the
 * pack), or NULL. */
static sc_raw_msg *raw_new(const sc_envelope *env, zmq_msg_t *pack, const uint8_t *p,
                           size_t len) {
  const bool keep = len > SC_RAW_COPY_MAX;
  sc_raw_msg *raw = malloc(sizeof *raw + (keep ? 0 : len));
  if (raw == NULL) return NULL;
  raw->env = *env;
  raw->len = len;
  raw->zmq = keep;
  raw->off = (size_t)(p - (const uint8_t *)zmq_msg_data(pack));
  if (!keep) {
    memcpy(raw->bytes, p, len);
  } else if (zmq_msg_init(&raw->msg) != 0 || zmq_msg_copy(&raw->msg, pack) != 0) {
    free(raw); /* zmq_msg_copy shares the content (reference counted) */
    return NULL;
  }
  return raw;
}

int sc_raw_decode(sc_raw_msg *raw, sc_envelope *env, void **body, sc_diag *d) {
  const int rc = sc_msg_decode(raw_data(raw), raw->len, env, body, d);
  if (rc != 0) *env = raw->env;
  return rc;
}

/* Routes a letter from another node (p, len: inside pack) by its envelope alone: the
 * receiving loop decodes it (sc_deliver_raw), so this thread, which every message from
 * every peer crosses, only reads the envelope. */
static void deliver_remote(sc_transport *t, zmq_msg_t *pack, const uint8_t *p, size_t len) {
  sc_node *n = t->node;
  sc_envelope env;
  const char *why = NULL;
  int rc = sc_msg_peek_envelope(p, len, &env);
  const bool readable = rc == 0;
  if (!readable)
    why = "its envelope does not decode";
  else if (sc_msg_type_name(env.type) == NULL) /* (a runtime letter is never sent) */
    rc = SC_ENOTSUP, why = "unknown message type";
  else if (sc_msg_in_process_only(env.type)) /* its body would be an address to follow */
    rc = SC_EPROTO, why = "a message type that never crosses a process";
  if (rc != 0) {
    SC_WARN(LOG, "node %d: dropped a message from the network: %s (%s)", n->rank, why,
            sc_strerror(rc));
    atomic_fetch_add_explicit(&n->undeliverable, 1, memory_order_relaxed);
    /* a request still gets its answer when its envelope says whom to answer */
    if (readable) (void)sc_reply_error_to(n, &env, rc, why);
    return;
  }
  sc_raw_msg *raw = raw_new(&env, pack, p, len);
  rc = raw ? sc_deliver_raw(n, &env, raw) : SC_ENOMEM;
  if (rc == 0) return;
  if (rc == SC_EFULL)
    atomic_fetch_add_explicit(&n->mailbox_dropped, 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&n->undeliverable, 1, memory_order_relaxed);
  (void)sc_reply_error_to(n, &env, rc, rc == SC_EFULL ? "mailbox full" : "no such actor");
  if (raw) sc_raw_free(raw);
}

/* Delivers the letters of a pack in order; what follows a letter that is cut short is
 * not a letter, so the rest of the pack is counted once as undeliverable. pack stays the
 * caller's. */
static void deliver_pack(sc_transport *t, zmq_msg_t *pack) {
  const uint8_t *p = zmq_msg_data(pack), *msg;
  size_t left = zmq_msg_size(pack), len;
  uint64_t k = 0;
  int rc;
  while ((rc = sc_pack_next(&p, &left, &msg, &len)) > 0) {
    deliver_remote(t, pack, msg, len);
    k++;
  }
  atomic_fetch_add_explicit(&t->remote_recv, k, memory_order_relaxed);
  if (rc < 0 || zmq_msg_size(pack) == 0) {
    SC_WARN(LOG,
            "node %d: dropped %s (empty, or a letter's length runs past its end: a sender "
            "of another sparsecp version, or damage)",
            t->node->rank, k ? "the rest of a pack" : "a message that is not a pack of letters");
    atomic_fetch_add_explicit(&t->node->undeliverable, 1, memory_order_relaxed);
  }
}

/* A message of more frames than [identity][pack] (the identity is read): all of it is
 * dropped and counted once as undeliverable. ZeroMQ hands over a message's frames all
 * together, so the rest is there to read; reading it keeps the next message's identity
 * where drain_router expects one. */
static void drop_extra_frames(sc_transport *t, zmq_msg_t *msg) {
  int frames = 2;
  while (zmq_msg_more(msg) && zmq_msg_recv(msg, t->router, ZMQ_DONTWAIT) >= 0) frames++;
  SC_WARN(LOG, "node %d: dropped a message of %d frames (a node sends its identity and one "
               "pack): a sender that is not a sparsecp node",
          t->node->rank, frames);
  atomic_fetch_add_explicit(&t->node->undeliverable, 1, memory_order_relaxed);
}

static int drain_router(sc_transport *t) {
  int k = 0;
  zmq_msg_t id, msg;
  for (; k < SC_DRAIN_CAP; k++) {
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, t->router, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&id);
      break;
    }
    zmq_msg_close(&id);
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, t->router, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&msg);
      break;
    }
    if (zmq_msg_more(&msg))
      drop_extra_frames(t, &msg); /* not [identity][pack]: not from a sparsecp node */
    else
      deliver_pack(t, &msg);
    zmq_msg_close(&msg);
  }
  return k;
}

/* ---- outbound through the io thread ---- */

static int drain_outbox(sc_transport *t) {
  int k = 0;
  for (; k < SC_DRAIN_CAP * 4; k++) {
    sc_mpsc_node *nd = sc_mpsc_pop(&t->outbox);
    if (nd == NULL) break;
    frame *f = SC_CONTAINER_OF(nd, frame, link);
    zout_offer(&t->peers[f->rank].out, f); /* releases its count once sent or dropped */
  }
  return k;
}

static int send_via_io(sc_transport *t, const sc_envelope *env, void *body) {
  /* bounds the queue and the io thread's backlogs together: a peer that is not up (or
   * slow) makes senders outside the loops see SC_EFULL instead of growing memory */
  if (atomic_fetch_add_explicit(&t->outbox_count, 1, memory_order_acq_rel) >=
      t->node->send_queue_max) {
    atomic_fetch_sub_explicit(&t->outbox_count, 1, memory_order_acq_rel);
    return SC_EFULL;
  }
  sc_buf b;
  sc_buf_init(&b);
  int rc = sc_pack_append(&b, env, body);
  frame *f = rc == 0 ? frame_new(env->dst.node, b.data, b.len, 1) : NULL;
  if (f == NULL) {
    sc_buf_free(&b);
    atomic_fetch_sub_explicit(&t->outbox_count, 1, memory_order_acq_rel);
    return rc != 0 ? rc : SC_ENOMEM;
  }
  sc_mpsc_push(&t->outbox, &f->link);
  tr_wake(t);
  sc_msg_body_destroy(env->type, body);
  return 0;
}

int sc_transport_send(sc_transport *t, const sc_envelope *env, void *body) {
  const int32_t rank = env->dst.node;
  if (rank < 0 || rank >= t->node->cluster.num_nodes || rank == t->node->rank)
    return SC_EINVAL;
  if (atomic_load_explicit(&t->stop, memory_order_acquire)) return SC_ECLOSED;
  /* The node actor (slot 0) sends through the io thread like a thread outside the loops:
   * the hello/ready handshake then travels on the io thread's DEALERs, whose monitors
   * detect a peer's death, so a ready node is one whose peers are watched. */
  const bool node_actor = env->src.slot == 0 && env->src.gen != 0; /* not a null id */
  sc_loop *l = node_actor ? NULL : sc_loop_self(t->node);
  return l ? send_from_loop(t, l, env, body) : send_via_io(t, env, body);
}
/* ---- monitors ---- */

static void drain_monitor(sc_transport *t, int32_t rank) {
  peer *p = &t->peers[rank];
  for (;;) {
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, p->mon, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&ev);
      return;
    }
    uint16_t event = 0;
    if (zmq_msg_size(&ev) >= 2) memcpy(&event, zmq_msg_data(&ev), 2);
    zmq_msg_close(&ev);
    zmq_msg_init(&ep);
    zmq_msg_recv(&ep, p->mon, ZMQ_DONTWAIT); /* endpoint frame */
    zmq_msg_close(&ep);
    if (event == ZMQ_EVENT_CONNECTED) {
      SC_DEBUG(LOG, "node %d: connected to node %d", t->node->rank, rank);
      /* Every peer reached once: this node can now see any of them die, so it may say
       * hello (the head's ready then means every pair of nodes watches each other). */
      if (!p->connected && ++t->peers_reached == t->node->cluster.num_nodes - 1)
        t->hello_sent = sc_node_say_hello(t->node) == 0; /* else on_unreached retries */
      p->connected = true;
    } else if (event == ZMQ_EVENT_DISCONNECTED && p->connected && !peer_is_down(t, rank)) {
      /* from here on every thread sees the peer DOWN: sends fail with SC_EDOWN and each
       * backlog for it is dropped by its owner (the loops' on their next prepare) */
      sc_node_peer_is_down(t->node, rank, SC_EDOWN,
                           "connection lost or heartbeat timed out");
      zout_drop_down(&p->out);
    }
  }
}

/* io thread, until this node's hello is out: names the peers not reached yet (no hello
 * before every peer is reached, so the cluster cannot become ready), or retries a hello
 * that could not be sent. */
static void on_unreached(uv_timer_t *h) {
  sc_transport *t = h->data;
  const sc_cluster *c = &t->node->cluster;
  if (t->peers_reached == c->num_nodes - 1) {
    if (!t->hello_sent) t->hello_sent = sc_node_say_hello(t->node) == 0;
    if (t->hello_sent) uv_timer_stop(h);
    return;
  }
  char list[256];
  size_t at = 0;
  list[0] = '\0';
  for (int32_t r = 0; r < c->num_nodes && at < sizeof list; r++) {
    if (r == t->node->rank || t->peers[r].connected) continue;
    const int w = snprintf(list + at, sizeof list - at, "%s%d (%s)", at ? ", " : "", (int)r,
                           c->nodes[r].endpoint);
    if (w > 0) at += (size_t)w;
  }
  SC_WARN(LOG, "node %d: not connected yet to node(s) %s; it says hello to the head once "
               "every node is reached",
          t->node->rank, list);
}

/* ---- the io loop ---- */

/* One pass over everything; returns true if some drain hit its cap (more work now). */
static bool service_all(sc_transport *t) {
  bool more = false;
  const int out = drain_outbox(t), in = drain_router(t);
  if (out + in > 0) t->hot = true;
  if (out >= SC_DRAIN_CAP * 4) more = true;
  if (in >= SC_DRAIN_CAP) more = true;
  for (int32_t r = 0; r < t->node->cluster.num_nodes; r++) {
    peer *p = &t->peers[r];
    if (p->out.sock == NULL) continue;
    if (zout_prepare(&p->out)) more = true;
    drain_monitor(t, r);
  }
  if (t->xpub) {
    if (drain_xpub(t) >= SC_DRAIN_CAP) more = true;
    if (drain_tapq(t, &more) > 0) t->hot = true; /* loops hand batches over while busy */
  }
  return more;
}

static void stop_io(sc_transport *t);
static void on_idle(uv_idle_t *h) { (void)h; }

static void kick(sc_transport *t) {
  if (atomic_load_explicit(&t->stop, memory_order_acquire)) {
    stop_io(t);
    return;
  }
  if (service_all(t)) uv_idle_start(&t->idle, on_idle);
}

static void on_async(uv_async_t *h) {
  sc_transport *t = h->data;
  sc_wake_clear(&t->wake_pending);
  kick(t);
}
static void on_poll(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  kick(h->data);
}
/* Work the io thread's spin waits for: queued frames or tap batches, or a message in. */
static bool io_ready(void *arg) {
  sc_transport *t = arg;
  return sc_mpsc_maybe_nonempty(&t->outbox) || sc_mpsc_maybe_nonempty(&t->tapq) ||
         has_events(t->router, ZMQ_POLLIN);
}

static void on_prepare(uv_prepare_t *h) {
  sc_transport *t = h->data;
  if (atomic_load_explicit(&t->stop, memory_order_acquire)) return;
  /* Before blocking: anything ZMQ_EVENTS still reports (its fd edge may be spent)? */
  bool pending = service_all(t);
  if (!pending) {
    pending = has_events(t->router, ZMQ_POLLIN) || (t->xpub && has_events(t->xpub, ZMQ_POLLIN)) ||
              sc_mpsc_maybe_nonempty(&t->tapq);
    for (int32_t r = 0; !pending && r < t->node->cluster.num_nodes; r++) {
      peer *p = &t->peers[r];
      if (zout_ready(&p->out)) pending = true;
      if (p->mon && has_events(p->mon, ZMQ_POLLIN)) pending = true;
    }
  }
  if (!pending && t->hot) {
    /* Spin briefly before blocking while traffic flows (cluster spin_us): producers skip
     * uv_async_send while wake_pending is 1. */
    t->hot = false;
    atomic_store_explicit(&t->wake_pending, 1, memory_order_release);
    pending = sc_spin_until(t->node->spin_ns, sc_now_ns() + SC_SPIN_MAX_NS, &t->spin_off_until,
                            io_ready, t);
    sc_wake_clear(&t->wake_pending);
    if (!pending)
      pending = sc_mpsc_maybe_nonempty(&t->outbox) || sc_mpsc_maybe_nonempty(&t->tapq);
  }
  if (pending)
    uv_idle_start(&t->idle, on_idle); /* poll with a zero timeout, come back here */
  else
    uv_idle_stop(&t->idle);
}

static int poll_socket(sc_transport *t, void *sock, uv_poll_t *h) {
  int fd = -1;
  size_t sz = sizeof fd;
  if (zmq_getsockopt(sock, ZMQ_FD, &fd, &sz) != 0) return SC_ESYS;
  if (uv_poll_init(&t->uv, h, fd) != 0) return SC_ESYS;
  h->data = t;
  return uv_poll_start(h, UV_READABLE, on_poll) == 0 ? 0 : SC_ESYS;
}

static void stop_io(sc_transport *t) { uv_walk(&t->uv, sc_uv_close_any, NULL); }

static void io_main(void *arg) {
  sc_transport *t = arg;
  sc_thread_name("io", t->node->rank, -1);
  uv_run(&t->uv, UV_RUN_DEFAULT);
}

int sc_transport_create(sc_node *n, sc_transport **out) {
  sc_transport *t = sc_calloc_lines(1, sizeof *t);
  if (t == NULL) return SC_ENOMEM;
  t->node = n;
  t->peers = calloc((size_t)n->cluster.num_nodes, sizeof *t->peers);
  t->zctx = zmq_ctx_new();
  /* A node with a tap gets a second ZeroMQ I/O thread for the XPUB alone (SC_AFFINITY_TAP):
   * a busy subscriber's stream (GB/s at 1 KiB messages) then does not share the one
   * thread that moves every message between the nodes. */
  if (t->zctx != NULL && n->cluster.nodes[n->rank].tap[0])
    zmq_ctx_set(t->zctx, ZMQ_IO_THREADS, 2);
  if (t->peers == NULL || t->zctx == NULL) {
    free(t->peers);
    if (t->zctx) zmq_ctx_term(t->zctx);
    free(t);
    return SC_ENOMEM;
  }
  /* A loop's DEALER holds packs of at most pack_letters letters, and at most pack_hwm
   * of them, so ZeroMQ holds no more of a loop's letters for a peer than send_hwm, as
   * it does on the io thread's DEALERs (one letter per pack there). */
  t->pack_letters = (uint32_t)(n->send_hwm < SC_PACK_LETTERS ? n->send_hwm : SC_PACK_LETTERS);
  t->pack_hwm = n->send_hwm / (int32_t)t->pack_letters;
  sc_mpsc_init(&t->outbox);
  sc_mpsc_init(&t->tapq);
  /* The loop and its wake-up exist from here on, so actors may queue remote sends
   * before the sockets are up (the io thread drains them once it runs). */
  if (uv_loop_init(&t->uv) != 0) {
    zmq_ctx_term(t->zctx);
    free(t->peers);
    free(t);
    return SC_ESYS;
  }
  t->uv_inited = true;
  uv_async_init(&t->uv, &t->wake, on_async);
  t->wake.data = t;
  uv_prepare_init(&t->uv, &t->prepare);
  t->prepare.data = t;
  uv_prepare_start(&t->prepare, on_prepare);
  uv_idle_init(&t->uv, &t->idle);
  t->idle.data = t;
  uv_timer_init(&t->uv, &t->unreached);
  t->unreached.data = t;
  *out = t;
  return 0;
}

int sc_transport_start(sc_transport *t, sc_diag *d) {
  sc_node *n = t->node;
  const sc_cluster *c = &n->cluster;
  const sc_cluster_node *me = &c->nodes[n->rank];
  int rc = 0;
  char rid[16];
  snprintf(rid, sizeof rid, "n%d", (int)n->rank);

  t->router = zmq_socket(t->zctx, ZMQ_ROUTER);
  if (t->router == NULL) return sc_fail(d, SC_ESYS, "zmq_socket: %s", zmq_strerror(errno));
  set_affinity(t->router, SC_AFFINITY_NODES);
  set_int(t->router, ZMQ_ROUTER_MANDATORY, 1);
  set_int(t->router, ZMQ_LINGER, 0);
  set_int(t->router, ZMQ_RCVHWM, 0);
  set_int(t->router, ZMQ_HEARTBEAT_IVL, c->heartbeat_ms);
  set_int(t->router, ZMQ_HEARTBEAT_TIMEOUT, c->heartbeat_timeout_ms);
  zmq_setsockopt(t->router, ZMQ_ROUTING_ID, rid, strlen(rid));
  if (zmq_bind(t->router, me->endpoint) != 0)
    return sc_fail(d, SC_EIO, "node %d: cannot bind %s: %s", (int)n->rank, me->endpoint,
                   zmq_strerror(errno));
  if (me->tap[0]) {
    if ((t->subs_work = calloc(1, subs_bytes(SC_MAX_SUBS))) == NULL)
      return sc_fail(d, SC_ENOMEM, "node %d: out of memory", (int)n->rank);
    t->xpub = zmq_socket(t->zctx, ZMQ_XPUB);
    if (t->xpub == NULL) return sc_fail(d, SC_ESYS, "zmq_socket: %s", zmq_strerror(errno));
    set_affinity(t->xpub, SC_AFFINITY_TAP);
    set_int(t->xpub, ZMQ_LINGER, 0);
    set_int(t->xpub, ZMQ_XPUB_NODROP, 1);
    /* in tap batches (up to 256 records each): a subscriber may lag this far behind
     * before records are dropped and counted */
    set_int(t->xpub, ZMQ_SNDHWM, 1000);
    if (zmq_bind(t->xpub, me->tap) != 0)
      return sc_fail(d, SC_EIO, "node %d: cannot bind tap %s: %s", (int)n->rank, me->tap,
                     zmq_strerror(errno));
  }
  for (int32_t r = 0; r < c->num_nodes; r++) {
    if (r == n->rank) continue;
    peer *p = &t->peers[r];
    if (zout_open(&p->out, t, r, rid, n->send_hwm, &t->uv) != 0)
      return sc_fail(d, SC_ESYS, "zmq_socket: %s", zmq_strerror(errno));
    p->out.pending = &t->outbox_count;
    void *dealer = p->out.sock;
    set_int(dealer, ZMQ_HEARTBEAT_IVL, c->heartbeat_ms);
    set_int(dealer, ZMQ_HEARTBEAT_TIMEOUT, c->heartbeat_timeout_ms);
    set_int(dealer, ZMQ_HEARTBEAT_TTL, c->heartbeat_timeout_ms);
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://sc-mon-%d", (int)r);
    if (zmq_socket_monitor(dealer, mon, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) != 0)
      return sc_fail(d, SC_ESYS, "zmq_socket_monitor: %s", zmq_strerror(errno));
    p->mon = zmq_socket(t->zctx, ZMQ_PAIR);
    if (p->mon == NULL || set_int(p->mon, ZMQ_LINGER, 0) != 0 ||
        zmq_connect(p->mon, mon) != 0)
      return sc_fail(d, SC_ESYS, "monitor connect: %s", zmq_strerror(errno));
    if (zout_connect(&p->out) != 0)
      return sc_fail(d, SC_EIO, "node %d: cannot connect to node %d at %s: %s",
                     (int)n->rank, (int)r, c->nodes[r].endpoint, zmq_strerror(errno));
  }
  if ((rc = poll_socket(t, t->router, &t->poll_r)) != 0) goto fail;
  if (t->xpub && (rc = poll_socket(t, t->xpub, &t->poll_x)) != 0) goto fail;
  for (int32_t r = 0; r < c->num_nodes; r++) {
    peer *p = &t->peers[r];
    if (p->out.sock == NULL) continue;
    if ((rc = poll_socket(t, p->mon, &p->poll_m)) != 0) goto fail;
  }
  if (c->num_nodes > 1) { /* first after 2 s, then every 10 s */
    uv_update_time(&t->uv); /* (the loop's clock is from uv_loop_init until it runs) */
    uv_timer_start(&t->unreached, on_unreached, SC_UNREACHED_FIRST_MS, SC_UNREACHED_EVERY_MS);
  }
  if (uv_thread_create(&t->thread, io_main, t) != 0) {
    rc = SC_ESYS;
    goto fail;
  }
  t->thread_started = true;
  return 0;
fail:
  return sc_fail(d, rc, "node %d: cannot watch ZeroMQ sockets", (int)n->rank);
}

void sc_transport_stop(sc_transport *t) {
  if (t == NULL) return;
  atomic_store(&t->stop, 1);
  if (t->thread_started) {
    uv_async_send(&t->wake);
    uv_thread_join(&t->thread);
    t->thread_started = false;
  }
}

void sc_transport_destroy(sc_transport *t) {
  if (t == NULL) return;
  sc_transport_stop(t);
  if (t->uv_inited) {
    stop_io(t);
    uv_run(&t->uv, UV_RUN_DEFAULT);
    uv_loop_close(&t->uv);
  }
  for (int32_t r = 0; t->peers && r < t->node->cluster.num_nodes; r++) {
    peer *p = &t->peers[r];
    if (p->out.sock) zmq_socket_monitor(p->out.sock, NULL, 0);
    zout_close(&p->out);
    close_sock(&p->mon);
  }
  close_sock(&t->router);
  close_sock(&t->xpub);
  for (sc_mpsc_node *nd; (nd = sc_mpsc_pop(&t->outbox)) != NULL;) {
    frame_free(SC_CONTAINER_OF(nd, frame, link));
  }
  for (sc_mpsc_node *nd; (nd = sc_mpsc_pop(&t->tapq)) != NULL;)
    batch_drop(t, SC_CONTAINER_OF(nd, tap_batch, link));
  for (int i = 0; i < SC_MAX_LOOPS; i++) {
    lnet *ln = atomic_load(&t->lnets[i]);
    if (ln && ln->tap.open) batch_drop(t, ln->tap.open); /* a loop that never ran its close */
  }
  free(t->subs_work);
  while (t->subs_all) {
    subs *s = t->subs_all;
    t->subs_all = s->retired;
    free(s);
  }
  /* ZeroMQ returns the batches it still held (zmq_free_batch) until its context ends, so
   * the loops' spare queues go after it */
  zmq_ctx_term(t->zctx);
  for (int i = 0; i < SC_MAX_LOOPS; i++) {
    lnet *ln = atomic_load(&t->lnets[i]);
    if (ln == NULL) continue;
    for (sc_mpsc_node *nd; (nd = sc_mpsc_pop(&ln->tap.spare)) != NULL;)
      batch_free(SC_CONTAINER_OF(nd, tap_batch, link));
    free(ln->peers);
    free(ln);
  }
  free(t->peers);
  free(t);
}

void sc_transport_stats(sc_transport *t, sc_node_stats *s) {
  if (t == NULL) return;
  s->tap_published = atomic_load(&t->tap_published);
  s->tap_dropped = atomic_load(&t->tap_dropped);
  const int32_t nodes = t->node->cluster.num_nodes;
  s->remote_sent = 0;
  for (int32_t r = 0; t->peers && r < nodes; r++)
    s->remote_sent += atomic_load_explicit(&t->peers[r].out.sent, memory_order_relaxed);
  for (int i = 0; i < SC_MAX_LOOPS; i++) {
    const lnet *ln = atomic_load_explicit(&t->lnets[i], memory_order_acquire);
    if (ln) s->remote_sent += zouts_sent(ln->peers, nodes);
  }
  s->remote_recv = atomic_load(&t->remote_recv);
  s->remote_dropped = atomic_load(&t->remote_dropped);
  const subs *cur = atomic_load(&t->subs_now);
  s->tap_subscriptions = cur ? cur->n : 0;
}
