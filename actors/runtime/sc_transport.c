/* sc_transport.c - the node's io thread: every ZeroMQ socket of the node lives here.
 *
 * Sockets: one ROUTER bound at the node's endpoint receives from every peer (frames
 * [peer identity][message]); one DEALER per peer (routing id "n<rank>") sends to it, so
 * messages queue inside ZeroMQ until the peer is up and per-pair FIFO order holds. Each
 * DEALER runs ZeroMQ heartbeats and a socket monitor; a DISCONNECTED event after the
 * connection was up (peer died, or missed heartbeats past the timeout) marks the peer
 * DOWN. One XPUB socket is the tap.
 *
 * libuv integration: ZMQ_FD is edge-triggered and only says "look at ZMQ_EVENTS". So:
 * a uv_poll per socket fd, and on every wake-up (poll, async outbox, prepare) each socket
 * is drained while ZMQ_EVENTS says so, with a per-socket cap; a uv_prepare re-checks
 * ZMQ_EVENTS before the loop blocks (a zmq_send can consume the fd's edge), and a
 * uv_idle keeps the loop from blocking while a capped drain left work behind.
 *
 * Outbound messages are encoded on the sender's thread and handed over through a
 * lock-free queue; a full DEALER (EAGAIN at its HWM) keeps a per-peer backlog that is
 * retried when ZMQ_EVENTS reports POLLOUT.
 *
 * Taps: subscriptions are read from the XPUB (non-verbose: one notification per distinct
 * prefix) into an immutable prefix set published through an atomic pointer; senders
 * check it without locks and encode nothing when it is empty or does not match. Tap
 * records are bounded (SC_TAP_QUEUE_MAX) and the XPUB runs with XPUB_NODROP so that a
 * slow subscriber shows up as counted drops, never as a blocked actor. Consecutive
 * records with the same topic leave as one XPUB message [topic][records] (see
 * batch_flush), which keeps a busy tap from costing one zmq message per actor message.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "actors/runtime/sc_log.h"
#include "actors/runtime/sc_node_impl.h"
#include "actors/runtime/sc_tap_record.h"
#include "actors/runtime/sc_time.h"

#define LOG "transport"
#define SC_DRAIN_CAP 1024
#define SC_OUTBOX_MAX (1u << 20)
#define SC_TAP_QUEUE_MAX (1u << 16)
#define SC_TOPIC_MAX 96
#define SC_MAX_SUBS 256

typedef struct frame {
  sc_mpsc_node link;
  struct frame *next; /* backlog */
  int32_t rank;
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

typedef struct tap_item {
  sc_mpsc_node link;
  uint64_t time_ns;
  char topic[SC_TOPIC_MAX];
  uint8_t *data;
  size_t len;
} tap_item;

typedef struct subs {
  int n;
  char prefix[SC_MAX_SUBS][SC_TOPIC_MAX];
  size_t len[SC_MAX_SUBS];
  struct subs *retired; /* older snapshots, freed at destroy */
} subs;

typedef struct peer {
  void *dealer, *mon;
  uv_poll_t poll_d, poll_m;
  bool connected, down;
  frame *backlog, *backlog_tail;
} peer;

struct sc_transport {
  sc_node *node;
  void *zctx;
  void *router, *xpub;
  peer *peers;
  uv_loop_t uv;
  uv_async_t wake;
  uv_prepare_t prepare;
  uv_idle_t idle;
  uv_poll_t poll_r, poll_x;
  uv_thread_t thread;
  bool thread_started, uv_inited;
  bool hot; /* did work since the io loop last blocked */
  uint64_t spin_off_until; /* no spinning before this (oversubscribed CPU) */
  _Atomic int wake_pending, stop;
  sc_mpsc outbox, tapq;
  _Atomic uint32_t outbox_count, tapq_count;
  _Atomic(subs *) subs_now;
  subs *subs_all; /* chain of every snapshot (io thread writes) */
  _Atomic uint64_t tap_published, tap_dropped, remote_sent, remote_recv;
  /* io thread: tap records waiting to go out as one XPUB message (same topic) */
  char batch_topic[SC_TOPIC_MAX];
  sc_buf batch;
  int batch_records;
};

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void tr_wake(sc_transport *t) {
  if (atomic_exchange_explicit(&t->wake_pending, 1, memory_order_acq_rel) == 0)
    uv_async_send(&t->wake);
}

/* ---- taps ---- */

static bool subs_match(sc_transport *t, const char *topic) {
  const subs *s = atomic_load_explicit(&t->subs_now, memory_order_acquire);
  if (s == NULL) return false;
  for (int i = 0; i < s->n; i++)
    if (strncmp(topic, s->prefix[i], s->len[i]) == 0) return true;
  return false;
}

static bool tap_active(sc_transport *t) {
  const subs *s = atomic_load_explicit(&t->subs_now, memory_order_acquire);
  return s != NULL && s->n > 0;
}

static size_t put_str(char *dst, size_t at, const char *src) {
  while (*src && at < SC_TOPIC_MAX - 1) dst[at++] = *src++;
  return at;
}

/* "<node>/<actor>/<type>" without printf: this runs per tapped message. */
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

/* Sends the pending batch: frames [topic][records] (sc_tap_record.h). All-or-nothing: with
 * XPUB_NODROP the first frame fails with EAGAIN when a subscriber is at its HWM. */
static void batch_flush(sc_transport *t) {
  if (t->batch_records == 0) return;
  const int k = t->batch_records;
  t->batch_records = 0;
  if (zmq_send(t->xpub, t->batch_topic, strlen(t->batch_topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
    atomic_fetch_add_explicit(&t->tap_dropped, (uint64_t)k, memory_order_relaxed);
  } else {
    zmq_send(t->xpub, t->batch.data, t->batch.len, ZMQ_DONTWAIT);
    atomic_fetch_add_explicit(&t->tap_published, (uint64_t)k, memory_order_relaxed);
  }
  sc_buf_reset(&t->batch);
}

static void xpub_publish(sc_transport *t, const char *topic, uint64_t time_ns,
                         const uint8_t *data, size_t len) {
  if (t->batch_records > 0 &&
      (strcmp(topic, t->batch_topic) != 0 || t->batch.len + len > 65536 ||
       t->batch_records >= 256))
    batch_flush(t);
  if (t->batch_records == 0) snprintf(t->batch_topic, sizeof t->batch_topic, "%s", topic);
  uint8_t hdr[SC_TAP_RECORD_HEADER];
  sc_tap_record_put_header(hdr, time_ns, t->node->rank, (uint32_t)len);
  if (sc_buf_append(&t->batch, hdr, sizeof hdr) != 0 || sc_buf_append(&t->batch, data, len) != 0) {
    atomic_fetch_add_explicit(&t->tap_dropped, 1, memory_order_relaxed);
    return;
  }
  t->batch_records++;
}

void sc_tap_local(sc_transport *t, const sc_envelope *env, const void *body) {
  if (t == NULL || t->xpub == NULL || !tap_active(t)) return;
  char topic[SC_TOPIC_MAX];
  make_topic(t->node, env, topic);
  if (!subs_match(t, topic)) return;
  if (atomic_fetch_add_explicit(&t->tapq_count, 1, memory_order_acq_rel) >=
      SC_TAP_QUEUE_MAX) {
    atomic_fetch_sub_explicit(&t->tapq_count, 1, memory_order_acq_rel);
    atomic_fetch_add_explicit(&t->tap_dropped, 1, memory_order_relaxed);
    return;
  }
  tap_item *it = malloc(sizeof *it);
  sc_buf b;
  sc_buf_init(&b);
  if (it == NULL || sc_msg_encode(env, body, &b) != 0) {
    free(it);
    sc_buf_free(&b);
    atomic_fetch_sub_explicit(&t->tapq_count, 1, memory_order_acq_rel);
    atomic_fetch_add_explicit(&t->tap_dropped, 1, memory_order_relaxed);
    return;
  }
  it->time_ns = wall_ns();
  memcpy(it->topic, topic, sizeof topic);
  it->data = b.data;
  it->len = b.len;
  sc_mpsc_push(&t->tapq, &it->link);
  tr_wake(t);
}

/* Reads subscription changes from the XPUB and publishes a new prefix snapshot. */
static int drain_xpub(sc_transport *t) {
  int handled = 0;
  const subs *cur = atomic_load_explicit(&t->subs_now, memory_order_acquire);
  subs *next = NULL;
  for (; handled < SC_DRAIN_CAP; handled++) {
    uint8_t buf[SC_TOPIC_MAX + 1];
    const int rc = zmq_recv(t->xpub, buf, sizeof buf, ZMQ_DONTWAIT);
    if (rc < 0) break;
    if (rc < 1 || rc > (int)sizeof buf) continue; /* truncated: longer than any topic */
    if (next == NULL) {
      next = calloc(1, sizeof *next);
      if (next == NULL) break;
      if (cur) {
        next->n = cur->n;
        memcpy(next->prefix, cur->prefix, sizeof next->prefix);
        memcpy(next->len, cur->len, sizeof next->len);
      }
    }
    const size_t len = (size_t)rc - 1;
    int found = -1;
    for (int i = 0; i < next->n; i++)
      if (next->len[i] == len && memcmp(next->prefix[i], buf + 1, len) == 0) found = i;
    if (buf[0] == 1 && found < 0 && next->n < SC_MAX_SUBS) {
      memcpy(next->prefix[next->n], buf + 1, len);
      next->prefix[next->n][len] = '\0';
      next->len[next->n++] = len;
    } else if (buf[0] == 0 && found >= 0) {
      next->n--;
      memcpy(next->prefix[found], next->prefix[next->n], SC_TOPIC_MAX);
      next->len[found] = next->len[next->n];
    }
  }
  if (next) {
    next->retired = t->subs_all;
    t->subs_all = next;
    atomic_store_explicit(&t->subs_now, next, memory_order_release);
    SC_DEBUG(LOG, "node %d: %d tap subscription(s)", t->node->rank, next->n);
  }
  return handled;
}

static int drain_tapq(sc_transport *t) {
  int k = 0;
  for (; k < SC_DRAIN_CAP; k++) {
    sc_mpsc_node *nd = sc_mpsc_pop(&t->tapq);
    if (nd == NULL) break;
    atomic_fetch_sub_explicit(&t->tapq_count, 1, memory_order_acq_rel);
    tap_item *it = SC_CONTAINER_OF(nd, tap_item, link);
    xpub_publish(t, it->topic, it->time_ns, it->data, it->len);
    free(it->data);
    free(it);
  }
  return k;
}

/* ---- inbound ---- */

static void deliver_remote(sc_transport *t, const uint8_t *p, size_t len) {
  sc_node *n = t->node;
  sc_envelope env;
  void *body = NULL;
  sc_diag d = {0};
  int rc = sc_msg_decode(p, len, &env, &body, &d);
  if (rc != 0) {
    SC_WARN(LOG, "node %d: dropped an undecodable message: %s", n->rank,
            sc_diag_message(&d));
    atomic_fetch_add_explicit(&n->undeliverable, 1, memory_order_relaxed);
    return;
  }
  /* the topic names the receiving actor; compute it before the body is handed over */
  char topic[SC_TOPIC_MAX];
  const bool tapped = tap_active(t) && (make_topic(n, &env, topic), subs_match(t, topic));
  rc = sc_deliver_local(n, &env, body);
  if (rc == 0) {
    if (tapped) xpub_publish(t, topic, wall_ns(), p, len); /* the bytes as received */
    return;
  }
  if (rc == SC_EFULL)
    atomic_fetch_add_explicit(&n->mailbox_dropped, 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&n->undeliverable, 1, memory_order_relaxed);
  (void)sc_reply_error_to(n, &env, rc, rc == SC_EFULL ? "mailbox full" : "no such actor");
  sc_msg_body_destroy(env.type, body);
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
    atomic_fetch_add_explicit(&t->remote_recv, 1, memory_order_relaxed);
    deliver_remote(t, zmq_msg_data(&msg), zmq_msg_size(&msg));
    zmq_msg_close(&msg);
  }
  return k;
}

/* ---- outbound ---- */

static void free_data(void *data, void *hint) {
  (void)hint;
  free(data);
}

/* Tries to send f; true when ZeroMQ took it (or it was dropped for a down peer): then
 * the caller frees only the frame struct. On EAGAIN the wrapped message stays in f. */
static bool send_frame(sc_transport *t, frame *f) {
  peer *p = &t->peers[f->rank];
  if (p->down) {
    if (f->wrapped) zmq_msg_close(&f->msg);
    else free(f->data);
    return true;
  }
  if (!f->wrapped) {
    if (zmq_msg_init_data(&f->msg, f->data, f->len, free_data, NULL) != 0) return false;
    f->wrapped = true;
  }
  if (zmq_msg_send(&f->msg, p->dealer, ZMQ_DONTWAIT) < 0) return false;
  atomic_fetch_add_explicit(&t->remote_sent, 1, memory_order_relaxed);
  return true;
}

static int flush_backlog(sc_transport *t, peer *p) {
  int k = 0;
  while (p->backlog && k < SC_DRAIN_CAP) {
    frame *f = p->backlog;
    if (!send_frame(t, f)) break;
    p->backlog = f->next;
    if (p->backlog == NULL) p->backlog_tail = NULL;
    free(f);
    k++;
  }
  return k;
}

static int drain_outbox(sc_transport *t) {
  int k = 0;
  for (; k < SC_DRAIN_CAP * 4; k++) {
    sc_mpsc_node *nd = sc_mpsc_pop(&t->outbox);
    if (nd == NULL) break;
    atomic_fetch_sub_explicit(&t->outbox_count, 1, memory_order_acq_rel);
    frame *f = SC_CONTAINER_OF(nd, frame, link);
    peer *p = &t->peers[f->rank];
    if (p->backlog == NULL && send_frame(t, f)) {
      free(f);
      continue;
    }
    f->next = NULL;
    if (p->backlog_tail)
      p->backlog_tail->next = f;
    else
      p->backlog = f;
    p->backlog_tail = f;
  }
  return k;
}

int sc_transport_send(sc_transport *t, const sc_envelope *env, void *body) {
  const int32_t rank = env->dst.node;
  if (rank < 0 || rank >= t->node->cluster.num_nodes || rank == t->node->rank)
    return SC_EINVAL;
  if (atomic_load_explicit(&t->stop, memory_order_acquire)) return SC_ECLOSED;
  if (atomic_fetch_add_explicit(&t->outbox_count, 1, memory_order_acq_rel) >= SC_OUTBOX_MAX) {
    atomic_fetch_sub_explicit(&t->outbox_count, 1, memory_order_acq_rel);
    return SC_EFULL;
  }
  frame *f = malloc(sizeof *f);
  sc_buf b;
  sc_buf_init(&b);
  int rc = f ? sc_msg_encode(env, body, &b) : SC_ENOMEM;
  if (rc != 0) {
    free(f);
    sc_buf_free(&b);
    atomic_fetch_sub_explicit(&t->outbox_count, 1, memory_order_acq_rel);
    return rc;
  }
  f->rank = rank;
  f->wrapped = false;
  f->data = b.data;
  f->len = b.len;
  sc_mpsc_push(&t->outbox, &f->link);
  tr_wake(t);
  sc_msg_body_destroy(env->type, body);
  return 0;
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
      p->connected = true;
      SC_DEBUG(LOG, "node %d: connected to node %d", t->node->rank, rank);
    } else if (event == ZMQ_EVENT_DISCONNECTED && p->connected && !p->down) {
      p->down = true;
      /* drop what waits for a dead peer */
      while (p->backlog) {
        frame *f = p->backlog;
        p->backlog = f->next;
        frame_free(f);
      }
      p->backlog_tail = NULL;
      sc_node_peer_is_down(t->node, rank, SC_EDOWN,
                           "connection lost or heartbeat timed out");
    }
  }
}

/* ---- the loop ---- */

static bool has_events(void *sock, short want) {
  int ev = 0;
  size_t sz = sizeof ev;
  if (zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &sz) != 0) return false;
  return (ev & want) != 0;
}

/* One pass over everything; returns true if some drain hit its cap (more work now). */
static bool service_all(sc_transport *t) {
  bool more = false;
  const int out = drain_outbox(t), in = drain_router(t);
  if (out + in > 0) t->hot = true;
  if (out >= SC_DRAIN_CAP * 4) more = true;
  if (in >= SC_DRAIN_CAP) more = true;
  for (int32_t r = 0; r < t->node->cluster.num_nodes; r++) {
    peer *p = &t->peers[r];
    if (p->dealer == NULL) continue;
    if (p->backlog && has_events(p->dealer, ZMQ_POLLOUT) &&
        flush_backlog(t, p) >= SC_DRAIN_CAP)
      more = true;
    drain_monitor(t, r);
  }
  if (t->xpub) {
    if (drain_xpub(t) >= SC_DRAIN_CAP) more = true;
    if (drain_tapq(t) >= SC_DRAIN_CAP) more = true;
    batch_flush(t);
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
  atomic_store_explicit(&t->wake_pending, 0, memory_order_release);
  kick(t);
}
static void on_poll(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  kick(h->data);
}
static void on_prepare(uv_prepare_t *h) {
  sc_transport *t = h->data;
  if (atomic_load_explicit(&t->stop, memory_order_acquire)) return;
  /* Before blocking: anything ZMQ_EVENTS still reports (its fd edge may be spent)? */
  bool pending = service_all(t);
  if (!pending) {
    pending = has_events(t->router, ZMQ_POLLIN) || (t->xpub && has_events(t->xpub, ZMQ_POLLIN));
    for (int32_t r = 0; !pending && r < t->node->cluster.num_nodes; r++) {
      peer *p = &t->peers[r];
      if (p->dealer && p->backlog && has_events(p->dealer, ZMQ_POLLOUT)) pending = true;
      if (p->mon && has_events(p->mon, ZMQ_POLLIN)) pending = true;
    }
  }
  const uint64_t start = sc_now_ns();
  if (!pending && t->hot && t->node->spin_ns > 0 && start >= t->spin_off_until) {
    /* Spin briefly before blocking while traffic flows (cluster spin_us): producers skip
     * uv_async_send while wake_pending is 1. Backs off on an oversubscribed CPU (see
     * SC_SPIN_CONTENDED_NS). */
    t->hot = false;
    atomic_store_explicit(&t->wake_pending, 1, memory_order_release);
    uint64_t now = start;
    while (!pending && now < start + t->node->spin_ns) {
      pending = sc_mpsc_maybe_nonempty(&t->outbox) || sc_mpsc_maybe_nonempty(&t->tapq) ||
                has_events(t->router, ZMQ_POLLIN);
      if (pending) break;
      sched_yield();
      const uint64_t before = now;
      now = sc_now_ns();
      if (now - before > SC_SPIN_CONTENDED_NS) {
        t->spin_off_until = now + SC_SPIN_BACKOFF_NS;
        break;
      }
    }
    atomic_store_explicit(&t->wake_pending, 0, memory_order_seq_cst);
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

static void close_sock(void **s) {
  if (*s) {
    const int zero = 0;
    zmq_setsockopt(*s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(*s);
    *s = NULL;
  }
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void stop_io(sc_transport *t) { uv_walk(&t->uv, close_walk, NULL); }

static void io_main(void *arg) {
  sc_transport *t = arg;
  uv_run(&t->uv, UV_RUN_DEFAULT);
}

static int set_int(void *s, int opt, int v) { return zmq_setsockopt(s, opt, &v, sizeof v); }

int sc_transport_create(sc_node *n, sc_transport **out, sc_diag *d) {
  sc_transport *t = calloc(1, sizeof *t);
  if (t == NULL) return SC_ENOMEM;
  t->node = n;
  t->peers = calloc((size_t)n->cluster.num_nodes, sizeof *t->peers);
  t->zctx = zmq_ctx_new();
  if (t->peers == NULL || t->zctx == NULL) {
    free(t->peers);
    if (t->zctx) zmq_ctx_term(t->zctx);
    free(t);
    return SC_ENOMEM;
  }
  sc_mpsc_init(&t->outbox);
  sc_mpsc_init(&t->tapq);
  sc_buf_init(&t->batch);
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
  *out = t;
  (void)d;
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
    t->xpub = zmq_socket(t->zctx, ZMQ_XPUB);
    if (t->xpub == NULL) return sc_fail(d, SC_ESYS, "zmq_socket: %s", zmq_strerror(errno));
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
    p->dealer = zmq_socket(t->zctx, ZMQ_DEALER);
    if (p->dealer == NULL) return sc_fail(d, SC_ESYS, "zmq_socket: %s", zmq_strerror(errno));
    zmq_setsockopt(p->dealer, ZMQ_ROUTING_ID, rid, strlen(rid));
    set_int(p->dealer, ZMQ_LINGER, 0);
    set_int(p->dealer, ZMQ_SNDHWM, 100000);
    set_int(p->dealer, ZMQ_IMMEDIATE, 0);
    set_int(p->dealer, ZMQ_RECONNECT_IVL, 50);
    set_int(p->dealer, ZMQ_HEARTBEAT_IVL, c->heartbeat_ms);
    set_int(p->dealer, ZMQ_HEARTBEAT_TIMEOUT, c->heartbeat_timeout_ms);
    set_int(p->dealer, ZMQ_HEARTBEAT_TTL, c->heartbeat_timeout_ms);
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://sc-mon-%d", (int)r);
    if (zmq_socket_monitor(p->dealer, mon, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) != 0)
      return sc_fail(d, SC_ESYS, "zmq_socket_monitor: %s", zmq_strerror(errno));
    p->mon = zmq_socket(t->zctx, ZMQ_PAIR);
    set_int(p->mon, ZMQ_LINGER, 0);
    if (p->mon == NULL || zmq_connect(p->mon, mon) != 0)
      return sc_fail(d, SC_ESYS, "monitor connect: %s", zmq_strerror(errno));
    if (zmq_connect(p->dealer, c->nodes[r].endpoint) != 0)
      return sc_fail(d, SC_EIO, "node %d: cannot connect to node %d at %s: %s",
                     (int)n->rank, (int)r, c->nodes[r].endpoint, zmq_strerror(errno));
  }
  if ((rc = poll_socket(t, t->router, &t->poll_r)) != 0) goto fail;
  if (t->xpub && (rc = poll_socket(t, t->xpub, &t->poll_x)) != 0) goto fail;
  for (int32_t r = 0; r < c->num_nodes; r++) {
    peer *p = &t->peers[r];
    if (p->dealer == NULL) continue;
    if ((rc = poll_socket(t, p->dealer, &p->poll_d)) != 0) goto fail;
    if ((rc = poll_socket(t, p->mon, &p->poll_m)) != 0) goto fail;
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
    while (p->backlog) {
      frame *f = p->backlog;
      p->backlog = f->next;
      frame_free(f);
    }
    if (p->dealer) zmq_socket_monitor(p->dealer, NULL, 0);
    close_sock(&p->dealer);
    close_sock(&p->mon);
  }
  close_sock(&t->router);
  close_sock(&t->xpub);
  for (sc_mpsc_node *nd; (nd = sc_mpsc_pop(&t->outbox)) != NULL;) {
    frame_free(SC_CONTAINER_OF(nd, frame, link));
  }
  for (sc_mpsc_node *nd; (nd = sc_mpsc_pop(&t->tapq)) != NULL;) {
    tap_item *it = SC_CONTAINER_OF(nd, tap_item, link);
    free(it->data);
    free(it);
  }
  while (t->subs_all) {
    subs *s = t->subs_all;
    t->subs_all = s->retired;
    free(s);
  }
  zmq_ctx_term(t->zctx);
  sc_buf_free(&t->batch);
  free(t->peers);
  free(t);
}

void sc_transport_stats(sc_transport *t, sc_node_stats *s) {
  if (t == NULL) return;
  s->tap_published = atomic_load(&t->tap_published);
  s->tap_dropped = atomic_load(&t->tap_dropped);
  s->remote_sent = atomic_load(&t->remote_sent);
  s->remote_recv = atomic_load(&t->remote_recv);
  const subs *cur = atomic_load(&t->subs_now);
  s->tap_subscriptions = cur ? cur->n : 0;
}
