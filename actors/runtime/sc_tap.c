/* sc_tap.c - taps (DESIGN.md §6; docs/runtime.md, "Taps"): subscriptions, topics, the
 * loops' batches of records, and the XPUB that publishes them.
 *
 * Subscriptions are read from the XPUB (non-verbose: one notification per distinct
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
 *
 * Why a file of its own: a tap touches the send path in one place (sc__tap_wanted, one
 * atomic load, called from sc_route.c) and the dispatch path in one (sc__tap_letter, from
 * sc_loop.c's run_letter); everything a record takes from there on (topic, batch,
 * encode) is static here, inlined into sc__tap_letter. The io thread (sc_transport.c)
 * calls in once per pass (sc__drain_xpub, sc__drain_tapq), the loops' prepare once per
 * turn (sc__tap_hand_over), and the transport's start and destroy bind the XPUB
 * (sc__tap_bind) and drop what is left (sc__batch_drop, sc__batch_free).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "actors/runtime/sc_transport_impl.h"
#include "actors/runtime/sc_tap_record.h"

#define LOG "transport"

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

#define SC_MAX_SUBS 256

static void count_drops(sc_transport *t, uint64_t k) {
  atomic_fetch_add_explicit(&t->tap_dropped, k, memory_order_relaxed);
}

static bool subs_match(const subs *s, const char *topic) {
  for (int i = 0; i < s->n; i++)
    if (strncmp(topic, s->p[i].s, s->p[i].len) == 0) return true;
  return false;
}

bool sc__tap_wanted(sc_transport *t) {
  const subs *s = atomic_load_explicit(&t->subs_now, memory_order_acquire);
  return s != NULL && s->n > 0;
}

static size_t put_str(char *dst, size_t at, const char *src) {
  while (*src && at < SC_TOPIC_MAX - 1) dst[at++] = *src++;
  return at;
}

/* "<node>/<actor>/<type>" */
static void make_topic(sc_node *n, const sc_envelope *env, char *topic) {
  const char *actor = sc__slot_name(n, env->dst.slot);
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

void sc__batch_free(tap_batch *b) {
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
    sc__batch_free(b);
    return;
  }
  if (atomic_fetch_add_explicit(&w->spares, 1, memory_order_relaxed) < SC_TAP_SPARES) {
    sc_mpsc_push(&w->spare, &b->link);
    return;
  }
  atomic_fetch_sub_explicit(&w->spares, 1, memory_order_relaxed);
  sc__batch_free(b);
}

/* A batch that will not be published: its records are counted as dropped. */
void sc__batch_drop(sc_transport *t, tap_batch *b) {
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
    sc__batch_drop(t, b);
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
    sc__batch_drop(t, b);
    return;
  }
  sc_mpsc_push(&t->tapq, &b->link);
  sc__tr_wake(t);
}

/* Loop thread: closes the open batch and queues it for the io thread. */
void sc__tap_hand_over(sc_transport *t, tap_writer *w) {
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
    sc__tap_hand_over(t, w);
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
  if (raw ? sc_buf_append(&b->buf, sc__raw_data(raw), raw->len) != 0
          : sc_msg_encode_append(&lt->env, lt->body, &b->buf) != 0) {
    b->buf.len = at;
    count_drops(t, 1);
    return;
  }
  const size_t len = b->buf.len - at - SC_TAP_RECORD_HEADER;
  sc_tap_record_put_header(b->buf.data + at, ns, t->node->rank, (uint32_t)len);
  b->records++;
}

void sc__tap_letter(sc_transport *t, sc_loop *l, const sc_letter *lt, const sc_raw_msg *raw,
                    uint64_t ns) {
  lnet *ln = sc__lnet_of(t, l);
  const char *topic = ln ? tap_topic(t, &ln->tap.topic, &lt->env) : NULL;
  if (topic != NULL)
    tap_append_letter(t, &ln->tap, ns, lt, raw);
  else if (ln == NULL) /* wanted or not: no memory to tell */
    count_drops(t, 1);
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

int sc__drain_xpub(sc_transport *t) {
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
int sc__drain_tapq(sc_transport *t, bool *more) {
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

/* The tap's XPUB, bound at this node's tap endpoint, and the io thread's working set of
 * subscriptions (sc__transport_start, before the io thread runs). Its options are the
 * tap's policy: never block the io thread, count what a slow subscriber misses. */
int sc__tap_bind(sc_transport *t, sc_diag *d) {
  sc_node *n = t->node;
  const sc_cluster_node *me = &n->cluster.nodes[n->rank];
  if ((t->subs_work = calloc(1, subs_bytes(SC_MAX_SUBS))) == NULL)
    return sc_fail(d, SC_ENOMEM, "node %d: out of memory", (int)n->rank);
  t->xpub = zmq_socket(t->zctx, ZMQ_XPUB);
  if (t->xpub == NULL) return sc_fail(d, SC_ESYS, "zmq_socket: %s", zmq_strerror(errno));
  sc__set_affinity(t->xpub, SC_AFFINITY_TAP);
  sc__set_int(t->xpub, ZMQ_LINGER, 0);
  sc__set_int(t->xpub, ZMQ_XPUB_NODROP, 1);
  /* in tap batches (up to 256 records each): a subscriber may lag this far behind
   * before records are dropped and counted */
  sc__set_int(t->xpub, ZMQ_SNDHWM, 1000);
  /* a subscriber sends only subscriptions (a topic prefix each) */
  sc__set_int64(t->xpub, ZMQ_MAXMSGSIZE, 4096);
  sc__set_int(t->xpub, ZMQ_HANDSHAKE_IVL, SC_HANDSHAKE_MS);
  /* a tap shows every prompt and token: on tcp only the keys of tap_keys_file see it */
  if (t->tap_curve && sc__curve_server(t->xpub, n, SC_ZAP_DOMAIN_TAP) != 0)
    return sc_fail(d, SC_ENOTSUP, "node %d: cannot use CURVE on the tap: %s", (int)n->rank,
                   zmq_strerror(errno));
  if (zmq_bind(t->xpub, me->tap) != 0)
    return sc_fail(d, SC_EIO, "node %d: cannot bind tap %s: %s", (int)n->rank, me->tap,
                   zmq_strerror(errno));
  return 0;
}
