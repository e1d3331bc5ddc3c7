/* sc_outbound.c - what a node sends to other nodes, from sc__transport_send (sc_route.c
 * hands it every letter addressed to another node) to ZeroMQ.
 *
 * A message sent on an actor loop thread is encoded there into the open pack
 * of the loop's own DEALER for the peer (created on the loop's first send there; routing
 * id "n<rank>.<loop>", so the peer's ROUTER sees one identity per DEALER; no heartbeats
 * or monitor: the io thread watches the peer). The pack goes out (zmq_send copies it)
 * once it holds SC_PACK_LETTERS letters or SC_PACK_BYTES, and otherwise after the
 * sending actor's batch of letters (sc__transport_loop_flush from drain_runq; timers' sends
 * at the loop's uv_prepare), or at once on an SC_LOOP_OWN loop, whose handlers may block
 * after sending: a burst of sends to one peer pays ZeroMQ's per-message cost once, and a
 * reply waits for nothing but the rest of its actor's batch. An actor runs on its loop
 * thread only, so FIFO order per sender/receiver pair is FIFO order per (loop, peer)
 * DEALER, and no hand-off to the io thread sits in the path. Other threads
 * (sc_node_send from outside the loops, the io thread's own error replies) and the node
 * actor (see sc__transport_send) encode a pack of one letter into a malloc'd frame and
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
 * Why a file of its own: this is the sending half of the transport, and each of its
 * per-letter paths stays inside it, static and inlined: a loop's (sc__transport_send,
 * send_from_loop, the peer's pack) and the io thread's per frame (sc__drain_outbox,
 * zout_offer, zout_try). The io thread (sc_transport.c) calls in once per pass
 * (sc__drain_outbox) and once per peer per pass (sc__zout_prepare, next to that peer's
 * monitor read); the sockets' setup, the monitors and what comes in stay in
 * sc_transport.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/runtime/sc_transport_impl.h"
#include "actors/runtime/sc_pack.h"

void sc__frame_free(frame *f) {
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

/* ---- zout: a DEALER and its backlog (io thread and loops alike) ---- */

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

/* Frees the backlog (at close, or because the peer is DOWN: see sc__zout_drop_down). */
static void zout_drop(zout *z) {
  while (z->backlog) {
    frame *f = z->backlog;
    z->backlog = f->next;
    sc__frame_free(f);
  }
  zout_release(z, z->backlog_len);
  z->backlog_tail = NULL;
  z->backlog_len = 0;
  zout_unwatch(z);
}

/* The backlog of a peer that went DOWN: accepted messages lost, so counted. */
void sc__zout_drop_down(zout *z) {
  atomic_fetch_add_explicit(&z->t->remote_dropped, z->backlog_len, memory_order_relaxed);
  zout_drop(z);
}

/* Sends from the backlog while ZeroMQ takes it, at most SC_DRAIN_CAP; a backlog for a
 * DOWN peer is dropped. */
static void zout_flush(zout *z) {
  if (sc__peer_is_down(z->t, z->rank)) {
    sc__zout_drop_down(z);
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
bool sc__zout_ready(zout *z) {
  return z->backlog &&
         (sc__peer_is_down(z->t, z->rank) || sc__has_events(z->sock, ZMQ_POLLOUT));
}

static void on_zout_poll(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  zout *z = h->data;
  if (sc__zout_ready(z)) zout_flush(z);
}

/* Before the owner's loop blocks; true when a capped flush left work that can go now. */
bool sc__zout_prepare(zout *z) {
  if (!sc__zout_ready(z)) return false;
  zout_flush(z);
  return sc__zout_ready(z);
}

/* Takes f: dropped for a DOWN peer, else sent at once unless a backlog is ahead of it. */
static void zout_offer(zout *z, frame *f) {
  if (sc__peer_is_down(z->t, z->rank)) { /* accepted by send_via_io, now lost */
    atomic_fetch_add_explicit(&z->t->remote_dropped, 1, memory_order_relaxed);
    sc__frame_free(f);
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
  if (sc__peer_is_down(z->t, z->rank)) {
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
 * on uv (the owner's loop). The caller adds its own options, then sc__zout_connect. */
int sc__zout_open(zout *z, sc_transport *t, int32_t rank, const char *rid, int hwm,
                  uv_loop_t *uv) {
  z->t = t;
  z->rank = rank;
  void *s = zmq_socket(t->zctx, ZMQ_DEALER);
  if (s == NULL) return SC_ESYS;
  zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, strlen(rid));
  sc__set_int(s, ZMQ_LINGER, 0);
  sc__set_int(s, ZMQ_SNDHWM, hwm);
  sc__set_int(s, ZMQ_IMMEDIATE, 0); /* queue until the peer is up */
  sc__set_int(s, ZMQ_RECONNECT_IVL, 50);
  sc__set_affinity(s, SC_AFFINITY_NODES);
  if (sc__curve_client(s, t->node, rank) != 0) {
    sc__close_sock(&s);
    return SC_ESYS;
  }
  int fd = -1;
  size_t sz = sizeof fd;
  if (zmq_getsockopt(s, ZMQ_FD, &fd, &sz) != 0 || uv_poll_init(uv, &z->poll, fd) != 0) {
    sc__close_sock(&s);
    return SC_ESYS;
  }
  z->poll.data = z;
  z->sock = s;
  return 0;
}

int sc__zout_connect(zout *z) {
  const char *endpoint = z->t->node->cluster.nodes[z->rank].endpoint;
  return zmq_connect(z->sock, endpoint) == 0 ? 0 : SC_EIO;
}

/* Owner thread: drops the backlog and closes the socket; the poll handle is closed first
 * (libuv must stop watching an fd before it goes away). */
void sc__zout_close(zout *z) {
  sc_buf_free(&z->pack);
  z->pack_letters = 0;
  if (z->sock == NULL) return;
  zout_drop(z);
  if (!uv_is_closing((uv_handle_t *)&z->poll)) uv_close((uv_handle_t *)&z->poll, NULL);
  sc__close_sock(&z->sock);
}

uint64_t sc__zouts_sent(zout *zs, int32_t n) {
  uint64_t sum = 0;
  for (int32_t r = 0; r < n; r++)
    sum += atomic_load_explicit(&zs[r].sent, memory_order_relaxed);
  return sum;
}

/* ---- loop threads ---- */

lnet *sc__lnet_new(sc_transport *t, sc_loop *l) {
  lnet *ln = sc__calloc_lines(1, sizeof *ln); /* (its spare queue is line-aligned) */
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
    int rc = sc__zout_open(z, t, rank, rid, t->pack_hwm, &l->uv);
    if (rc == 0 && (rc = sc__zout_connect(z)) != 0) sc__zout_close(z);
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
  lnet *ln = sc__lnet_of(t, l);
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

void sc__transport_loop_flush(sc_transport *t, sc_loop *l) {
  lnet *ln = atomic_load_explicit(&t->lnets[l->index], memory_order_relaxed);
  if (ln != NULL) (void)flush_packs(t, ln);
}

bool sc__transport_loop_prepare(sc_transport *t, sc_loop *l) {
  lnet *ln = atomic_load_explicit(&t->lnets[l->index], memory_order_relaxed);
  if (ln == NULL) return false;
  bool more = !flush_packs(t, ln); /* (a timer's sends) */
  sc__tap_hand_over(t, &ln->tap);
  for (int32_t r = 0; r < t->node->cluster.num_nodes; r++)
    if (sc__zout_prepare(&ln->peers[r])) more = true;
  return more;
}

void sc__transport_loop_close(sc_transport *t, sc_loop *l) {
  lnet *ln = atomic_load_explicit(&t->lnets[l->index], memory_order_relaxed);
  if (ln == NULL) return;
  (void)flush_packs(t, ln); /* (what terminate sent; linger 0 below discards what is unsent) */
  sc__tap_hand_over(t, &ln->tap);
  for (int32_t r = 0; r < t->node->cluster.num_nodes; r++) sc__zout_close(&ln->peers[r]);
}

/* ---- outbound through the io thread ---- */

int sc__drain_outbox(sc_transport *t) {
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
  sc__tr_wake(t);
  sc_msg_body_destroy(env->type, body);
  return 0;
}

int sc__transport_send(sc_transport *t, const sc_envelope *env, void *body) {
  const int32_t rank = env->dst.node;
  if (rank < 0 || rank >= t->node->cluster.num_nodes || rank == t->node->rank)
    return SC_EINVAL;
  if (atomic_load_explicit(&t->stop, memory_order_acquire)) return SC_ECLOSED;
  /* The node actor (slot 0) sends through the io thread like a thread outside the loops:
   * the hello/ready handshake then travels on the io thread's DEALERs, whose monitors
   * detect a peer's death, so a ready node is one whose peers are watched. */
  const bool node_actor = env->src.slot == 0 && env->src.gen != 0; /* not a null id */
  sc_loop *l = node_actor ? NULL : sc__loop_self(t->node);
  return l ? send_from_loop(t, l, env, body) : send_via_io(t, env, body);
}
