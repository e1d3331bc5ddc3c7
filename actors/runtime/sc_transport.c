/* sc_transport.c - ZeroMQ between nodes: the sockets, the io thread and what other nodes
 * send.
 *
 * Sockets. The node's io thread owns one ROUTER bound at the node's endpoint, which
 * receives from every peer (frames [peer identity][pack], sc_pack.h: one or more
 * letters; the io thread splits the pack and reads each letter's envelope only, and the
 * receiving loop decodes, see deliver_pack), one DEALER per peer (routing
 * id "n<rank>") with ZeroMQ heartbeats and a socket monitor, and the tap XPUB. A
 * DISCONNECTED event after the connection was up (peer died, or missed heartbeats past the
 * timeout) marks the peer DOWN in sc_node.peer_down, an atomic every thread reads.
 *
 * Sending is in sc_outbound.c (every DEALER, the io thread's and the loops', and the
 * loops' packs), taps in sc_tap.c (the XPUB, subscriptions, record batches); their
 * shared structs are in sc_transport_impl.h. What stays here is what the io thread
 * owns: its loop, the ROUTER and what comes in on it, the peers' monitors, and the
 * transport's life (create, start, stop, destroy) and counters. Every message from every
 * peer crosses this thread, and its per-message path (drain_router, deliver_pack,
 * deliver_remote) stays static in this file.
 *
 * The io loop: a uv_poll per ROUTER, XPUB and monitor fd; every wake-up (poll, async
 * outbox, prepare) drains each while ZMQ_EVENTS says so, with a per-socket cap; the
 * uv_prepare re-checks ZMQ_EVENTS before the loop blocks, and a uv_idle keeps the loop from
 * blocking while a capped drain left work behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "actors/runtime/sc_transport_impl.h"
#include "actors/runtime/sc_pack.h"
#include "base/clock.h"
#include "base/curve_key.h"

#define LOG "transport"

/* a node that has not reached every peer says which, after this and then every so often */
#define SC_UNREACHED_FIRST_MS 2000
#define SC_UNREACHED_EVERY_MS 10000

/* ---- what other nodes sent, until its loop decodes it ---- */

/* ZeroMQ reads a socket into 8 KiB buffers and lets the messages that fit point into
 * them; a buffer lives until all of its messages are closed. A letter that may wait in
 * a mailbox is therefore copied out of its pack when it is that small (one malloc,
 * cheaper than the decode), or it would pin a whole buffer each (measured: 2.8-3.4 KB per
 * queued 130-byte ping instead of about 300 bytes). A larger one shares its pack (which
 * has a buffer of its own, since it is larger too). */
#define SC_RAW_COPY_MAX 8192

void sc__raw_free(sc_raw_msg *raw) {
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

int sc__raw_decode(sc_raw_msg *raw, sc_envelope *env, void **body, sc_diag *d) {
  const int rc = sc_msg_decode(sc__raw_data(raw), raw->len, env, body, d);
  if (rc != 0) *env = raw->env;
  return rc;
}

/* Routes a letter from another node (p, len: inside pack) by its envelope alone: the
 * receiving loop decodes it (sc__deliver_raw), so this thread, which every message from
 * every peer crosses, only reads the envelope. sender: the node whose key sent the pack
 * (or whose routing id it carried, on ipc), -1 when not known. */
static void deliver_remote(sc_transport *t, zmq_msg_t *pack, const uint8_t *p, size_t len,
                           int32_t sender) {
  sc_node *n = t->node;
  sc_envelope env;
  const char *why = NULL;
  int rc = sc_msg_peek_envelope(p, len, &env);
  const bool readable = rc == 0;
  if (!readable)
    why = "its envelope does not decode";
  else if (sender < 0)
    rc = SC_EPERM, why = "its connection is not one of a node of this cluster";
  else if (env.src.node != sender)
    rc = SC_EPERM, why = "it names another node as its sender than the one that sent it";
  else if (sc_msg_type_name(env.type) == NULL) /* (a runtime letter is never sent) */
    rc = SC_ENOTSUP, why = "unknown message type";
  else if (sc_msg_in_process_only(env.type)) /* its body would be an address to follow */
    rc = SC_EPROTO, why = "a message type that never crosses a process";
  if (rc != 0) {
    unsigned long long held = 0;
    if (sc__refusal_log_pass(t, sender, &held))
      SC_WARN(LOG, "node %d: dropped a message from node %d: %s (%s); %llu more refusals of "
                   "that sender's traffic since the last such line",
              n->rank, (int)sender, why, sc_strerror(rc), held);
    if (rc == SC_EPERM) {
      atomic_fetch_add_explicit(&t->forged, 1, memory_order_relaxed);
      return; /* a forgery gets no answer: whom it claims to be is not who sent it */
    }
    atomic_fetch_add_explicit(&n->undeliverable, 1, memory_order_relaxed);
    /* a request still gets its answer when its envelope says whom to answer */
    if (readable) (void)sc__reply_error_to(n, &env, rc, why);
    return;
  }
  sc_raw_msg *raw = raw_new(&env, pack, p, len);
  rc = raw ? sc__deliver_raw(n, &env, raw) : SC_ENOMEM;
  if (rc == 0) return;
  if (rc == SC_EFULL)
    atomic_fetch_add_explicit(&n->mailbox_dropped, 1, memory_order_relaxed);
  else
    atomic_fetch_add_explicit(&n->undeliverable, 1, memory_order_relaxed);
  (void)sc__reply_error_to(n, &env, rc, rc == SC_EFULL ? "mailbox full" : "no such actor");
  if (raw) sc__raw_free(raw);
}

/* Delivers the letters of a pack in order; what follows a letter that is cut short is
 * not a letter, so the rest of the pack is counted once as undeliverable. pack stays the
 * caller's. */
static void deliver_pack(sc_transport *t, zmq_msg_t *pack, int32_t sender) {
  const uint8_t *p = zmq_msg_data(pack), *msg;
  size_t left = zmq_msg_size(pack), len;
  uint64_t k = 0;
  int rc;
  while ((rc = sc_pack_next(&p, &left, &msg, &len)) > 0) {
    deliver_remote(t, pack, msg, len, sender);
    k++;
  }
  atomic_fetch_add_explicit(&t->remote_recv, k, memory_order_relaxed);
  if (rc < 0 || zmq_msg_size(pack) == 0) {
    unsigned long long held = 0;
    if (sc__refusal_log_pass(t, sender, &held))
      SC_WARN(LOG,
              "node %d: dropped %s from node %d (empty, or a letter's length runs past its "
              "end: a sender of another sparsecp version, or damage); %llu more refusals of "
              "that sender's traffic since the last such line",
              t->node->rank, k ? "the rest of a pack" : "a message that is not a pack of letters",
              (int)sender, held);
    atomic_fetch_add_explicit(&t->node->undeliverable, 1, memory_order_relaxed);
  }
}

/* A message of more frames than [identity][pack] (the identity is read): all of it is
 * dropped and counted once as undeliverable. ZeroMQ hands over a message's frames all
 * together, so the rest is there to read; reading it keeps the next message's identity
 * where drain_router expects one. */
static void drop_extra_frames(sc_transport *t, zmq_msg_t *msg, int32_t sender) {
  int frames = 2;
  while (zmq_msg_more(msg) && zmq_msg_recv(msg, t->router, ZMQ_DONTWAIT) >= 0) frames++;
  unsigned long long held = 0;
  if (sc__refusal_log_pass(t, sender, &held))
    SC_WARN(LOG, "node %d: dropped a message of %d frames from node %d (a node sends its "
                 "identity and one pack): a sender that is not a sparsecp node; %llu more "
                 "refusals of that sender's traffic since the last such line",
            t->node->rank, frames, (int)sender, held);
  atomic_fetch_add_explicit(&t->node->undeliverable, 1, memory_order_relaxed);
}

/* The node that sent a message: with CURVE, the rank ZAP named for the key that made the
 * connection (its User-Id), which no sender chooses; else the rank in the routing id a
 * node's DEALER carries ("n<rank>"), which only the ipc folder's permissions vouch for.
 * -1 when neither names a node of the cluster. */
static int32_t sender_of(const sc_transport *t, zmq_msg_t *id, zmq_msg_t *msg) {
  const int32_t world = t->node->cluster.num_nodes;
  if (t->node->cluster.curve) return sc_zap_user_rank(zmq_msg_gets(msg, "User-Id"), world);
  /* "n<rank>" (the io thread's DEALER) or "n<rank>.<loop>" (a loop's, sc_outbound.c) */
  return sc_zap_routing_rank(zmq_msg_data(id), zmq_msg_size(id), 'n', world, SC_MAX_LOOPS);
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
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, t->router, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&msg);
      zmq_msg_close(&id);
      break;
    }
    const int32_t sender = sender_of(t, &id, &msg);
    zmq_msg_close(&id);
    if (zmq_msg_more(&msg))
      drop_extra_frames(t, &msg, sender); /* not [identity][pack]: not from a sparsecp node */
    else
      deliver_pack(t, &msg, sender);
    zmq_msg_close(&msg);
  }
  return k;
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
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      unsigned long long held = 0;
      if (sc__refusal_log_pass(t, rank, &held))
        SC_WARN(LOG, "node %d: node %d refused this node's key (do both read the same "
                     "cluster file?); %llu more refusals since the last such line",
                t->node->rank, rank, held);
    } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      /* (the handshake, not the TCP connection: with CURVE, a connection whose key the
       * peer refuses carries nothing) */
      SC_DEBUG(LOG, "node %d: connected to node %d", t->node->rank, rank);
      /* Every peer reached once: this node can now see any of them die, so it may say
       * hello (the head's ready then means every pair of nodes watches each other). */
      if (!p->connected && ++t->peers_reached == t->node->cluster.num_nodes - 1)
        t->hello_sent = sc__node_say_hello(t->node) == 0; /* else on_unreached retries */
      p->connected = true;
    } else if (event == ZMQ_EVENT_DISCONNECTED && p->connected && !sc__peer_is_down(t, rank)) {
      /* from here on every thread sees the peer DOWN: sends fail with SC_EDOWN and each
       * backlog for it is dropped by its owner (the loops' on their next prepare) */
      sc__node_peer_is_down(t->node, rank, SC_EDOWN,
                            "connection lost or heartbeat timed out");
      sc__zout_drop_down(&p->out);
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
    if (!t->hello_sent) t->hello_sent = sc__node_say_hello(t->node) == 0;
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
  const int out = sc__drain_outbox(t), in = drain_router(t);
  if (out + in > 0) t->hot = true;
  if (out >= SC_DRAIN_CAP * 4) more = true;
  if (in >= SC_DRAIN_CAP) more = true;
  for (int32_t r = 0; r < t->node->cluster.num_nodes; r++) {
    peer *p = &t->peers[r];
    if (p->out.sock == NULL) continue;
    if (sc__zout_prepare(&p->out)) more = true;
    drain_monitor(t, r);
  }
  if (t->xpub) {
    if (sc__drain_xpub(t) >= SC_DRAIN_CAP) more = true;
    if (sc__drain_tapq(t, &more) > 0) t->hot = true; /* loops hand batches over while busy */
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
         sc__has_events(t->router, ZMQ_POLLIN);
}

static void on_prepare(uv_prepare_t *h) {
  sc_transport *t = h->data;
  if (atomic_load_explicit(&t->stop, memory_order_acquire)) return;
  /* Before blocking: anything ZMQ_EVENTS still reports (its fd edge may be spent)? */
  bool pending = service_all(t);
  if (!pending) {
    pending = sc__has_events(t->router, ZMQ_POLLIN) ||
              (t->xpub && sc__has_events(t->xpub, ZMQ_POLLIN)) ||
              sc_mpsc_maybe_nonempty(&t->tapq);
    for (int32_t r = 0; !pending && r < t->node->cluster.num_nodes; r++) {
      peer *p = &t->peers[r];
      if (sc__zout_ready(&p->out)) pending = true;
      if (p->mon && sc__has_events(p->mon, ZMQ_POLLIN)) pending = true;
    }
  }
  if (!pending && t->hot) {
    /* Spin briefly before blocking while traffic flows (cluster spin_us): producers skip
     * uv_async_send while wake_pending is 1. */
    t->hot = false;
    atomic_store_explicit(&t->wake_pending, 1, memory_order_release);
    pending = sc__spin_until(t->node->spin_ns, sc_now_ns() + SC_SPIN_MAX_NS,
                             &t->spin_off_until, io_ready, t);
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

static void stop_io(sc_transport *t) { uv_walk(&t->uv, sc__uv_close_any, NULL); }

static void io_main(void *arg) {
  sc_transport *t = arg;
  sc__thread_name("io", t->node->rank, -1);
  uv_run(&t->uv, UV_RUN_DEFAULT);
}

int sc__transport_create(sc_node *n, sc_transport **out) {
  sc_transport *t = sc__calloc_lines(1, sizeof *t);
  if (t == NULL) return SC_ENOMEM;
  t->node = n;
  t->peers = calloc((size_t)n->cluster.num_nodes, sizeof *t->peers);
  t->refusal_log = calloc((size_t)n->cluster.num_nodes + 1, sizeof *t->refusal_log);
  t->zctx = zmq_ctx_new();
  /* A node with a tap gets a second ZeroMQ I/O thread for the XPUB alone (SC_AFFINITY_TAP):
   * a busy subscriber's stream (GB/s at 1 KiB messages) then does not share the one
   * thread that moves every message between the nodes. */
  if (t->zctx != NULL && n->cluster.nodes[n->rank].tap[0])
    zmq_ctx_set(t->zctx, ZMQ_IO_THREADS, 2);
  if (t->peers == NULL || t->refusal_log == NULL || t->zctx == NULL) {
    free(t->peers);
    free(t->refusal_log);
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
    free(t->refusal_log);
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

/* The rules of the cluster file (sc_cluster.c) again, for a cluster built in code: an
 * endpoint on a network needs keys unless plaintext_tcp says otherwise, and an ipc one a
 * private folder. */
static int check_endpoints(const sc_transport *t, sc_diag *d) {
  const sc_node *n = t->node;
  const sc_cluster *c = &n->cluster;
  const sc_cluster_node *me = &c->nodes[n->rank];
  for (int i = 0; i < 2; i++) {
    const char *ep = i == 0 ? me->endpoint : me->tap;
    if (ep[0] && !sc_endpoint_is_local(ep) && !c->curve && !c->plaintext_tcp)
      return sc_fail(d, SC_EINVAL, "node %d: %s is on a network without CURVE keys",
                     (int)n->rank, ep);
    if (i == 1 && ep[0] && !sc_endpoint_is_local(ep) && c->curve && !c->tap_keys_file[0])
      return sc_fail(d, SC_EINVAL, "node %d: the tap %s is on a network: tap_keys_file must "
                                   "list its subscribers", (int)n->rank, ep);
    const int rc = sc_ipc_check_private(ep, d);
    if (rc != 0) return rc;
  }
  if (c->plaintext_tcp && !c->curve)
    SC_WARN(LOG, "node %d: \"plaintext_tcp\": anyone who reaches this node's endpoints can "
                 "read its traffic and forge messages into the cluster", (int)n->rank);
  return 0;
}

/* The ZAP handler of the node's context, before any socket binds: the node domain admits
 * the cluster's nodes, each named by its rank; a CURVE tap's domain the keys of
 * tap_keys_file. None when neither is used. */
static int start_auth(sc_transport *t, sc_diag *d) {
  const sc_cluster *c = &t->node->cluster;
  const char *tap = c->nodes[t->node->rank].tap;
  t->tap_curve = c->curve && c->tap_keys_file[0] && tap[0] && !sc_endpoint_is_local(tap);
  if (!c->curve) return 0;
  uint8_t (*nodes)[32] = malloc(sizeof *nodes * (size_t)c->num_nodes);
  uint8_t (*taps)[32] = NULL;
  int32_t num_taps = 0;
  int rc = nodes ? 0 : sc_fail(d, SC_ENOMEM, "out of memory");
  if (rc == 0 && t->tap_curve)
    rc = sc_curve_load_public_list(c->tap_keys_file, &taps, &num_taps, d);
  if (rc == 0) {
    for (int32_t r = 0; r < c->num_nodes; r++) memcpy(nodes[r], c->nodes[r].public_key, 32);
    const sc_zap_domain domains[2] = {
        {.domain = SC_ZAP_DOMAIN_NODE, .keys = (const uint8_t(*)[32])nodes,
         .num_keys = c->num_nodes},
        {.domain = SC_ZAP_DOMAIN_TAP, .keys = (const uint8_t(*)[32])taps,
         .num_keys = num_taps, .name_prefix = "tap"}};
    rc = sc_zap_start(t->zctx, domains, t->tap_curve ? 2 : 1, &t->zap, d);
  }
  free(nodes);
  free(taps);
  return rc;
}

int sc__transport_start(sc_transport *t, sc_diag *d) {
  sc_node *n = t->node;
  const sc_cluster *c = &n->cluster;
  const sc_cluster_node *me = &c->nodes[n->rank];
  int rc = 0;
  char rid[16];
  snprintf(rid, sizeof rid, "n%d", (int)n->rank);

  if ((rc = check_endpoints(t, d)) != 0 || (rc = start_auth(t, d)) != 0) return rc;
  t->router = zmq_socket(t->zctx, ZMQ_ROUTER);
  if (t->router == NULL) return sc_fail(d, SC_ESYS, "zmq_socket: %s", zmq_strerror(errno));
  if (c->curve && sc__curve_server(t->router, n, SC_ZAP_DOMAIN_NODE) != 0)
    return sc_fail(d, SC_ENOTSUP, "node %d: cannot use CURVE: %s", (int)n->rank,
                   zmq_strerror(errno));
  sc__set_affinity(t->router, SC_AFFINITY_NODES);
  sc__set_int(t->router, ZMQ_ROUTER_MANDATORY, 1);
  /* a restarted peer's DEALERs reuse the routing ids of the process it replaces (unique
   * within a process: "n<rank>" and "n<rank>.<loop>"); until this socket has seen the
   * old connections end, ZeroMQ would refuse the new ones and drop their letters */
  sc__set_int(t->router, ZMQ_ROUTER_HANDOVER, 1);
  sc__set_int(t->router, ZMQ_LINGER, 0);
  sc__set_int(t->router, ZMQ_RCVHWM, 0);
  /* ZeroMQ allocates a frame as large as its header announces, also before a handshake:
   * a stranger's frames are bounded by this, and its handshake by SC_HANDSHAKE_MS */
  sc__set_int64(t->router, ZMQ_MAXMSGSIZE, SC_NODE_MAX_MESSAGE);
  sc__set_int(t->router, ZMQ_HANDSHAKE_IVL, SC_HANDSHAKE_MS);
  sc__set_int(t->router, ZMQ_HEARTBEAT_IVL, c->heartbeat_ms);
  sc__set_int(t->router, ZMQ_HEARTBEAT_TIMEOUT, c->heartbeat_timeout_ms);
  zmq_setsockopt(t->router, ZMQ_ROUTING_ID, rid, strlen(rid));
  if (zmq_bind(t->router, me->endpoint) != 0)
    return sc_fail(d, SC_EIO, "node %d: cannot bind %s: %s", (int)n->rank, me->endpoint,
                   zmq_strerror(errno));
  if (me->tap[0] && (rc = sc__tap_bind(t, d)) != 0) return rc;
  for (int32_t r = 0; r < c->num_nodes; r++) {
    if (r == n->rank) continue;
    peer *p = &t->peers[r];
    if (sc__zout_open(&p->out, t, r, rid, n->send_hwm, &t->uv) != 0)
      return sc_fail(d, SC_ESYS, "zmq_socket: %s", zmq_strerror(errno));
    p->out.pending = &t->outbox_count;
    void *dealer = p->out.sock;
    sc__set_int(dealer, ZMQ_HEARTBEAT_IVL, c->heartbeat_ms);
    sc__set_int(dealer, ZMQ_HEARTBEAT_TIMEOUT, c->heartbeat_timeout_ms);
    sc__set_int(dealer, ZMQ_HEARTBEAT_TTL, c->heartbeat_timeout_ms);
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://sc-mon-%d", (int)r);
    if (zmq_socket_monitor(dealer, mon, ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                            ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                            ZMQ_EVENT_DISCONNECTED) != 0)
      return sc_fail(d, SC_ESYS, "zmq_socket_monitor: %s", zmq_strerror(errno));
    p->mon = zmq_socket(t->zctx, ZMQ_PAIR);
    if (p->mon == NULL || sc__set_int(p->mon, ZMQ_LINGER, 0) != 0 ||
        zmq_connect(p->mon, mon) != 0)
      return sc_fail(d, SC_ESYS, "monitor connect: %s", zmq_strerror(errno));
    if (sc__zout_connect(&p->out) != 0)
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

void sc__transport_stop(sc_transport *t) {
  if (t == NULL) return;
  atomic_store(&t->stop, 1);
  if (t->thread_started) {
    uv_async_send(&t->wake);
    uv_thread_join(&t->thread);
    t->thread_started = false;
  }
}

void sc__transport_destroy(sc_transport *t) {
  if (t == NULL) return;
  sc__transport_stop(t);
  if (t->uv_inited) {
    stop_io(t);
    uv_run(&t->uv, UV_RUN_DEFAULT);
    uv_loop_close(&t->uv);
  }
  for (int32_t r = 0; t->peers && r < t->node->cluster.num_nodes; r++) {
    peer *p = &t->peers[r];
    if (p->out.sock) zmq_socket_monitor(p->out.sock, NULL, 0);
    sc__zout_close(&p->out);
    sc__close_sock(&p->mon);
  }
  sc__close_sock(&t->router);
  sc__close_sock(&t->xpub);
  sc_zap_stop(t->zap); /* (its socket is the context's too) */
  for (sc_mpsc_node *nd; (nd = sc_mpsc_pop(&t->outbox)) != NULL;) {
    sc__frame_free(SC_CONTAINER_OF(nd, frame, link));
  }
  for (sc_mpsc_node *nd; (nd = sc_mpsc_pop(&t->tapq)) != NULL;)
    sc__batch_drop(t, SC_CONTAINER_OF(nd, tap_batch, link));
  for (int i = 0; i < SC_MAX_LOOPS; i++) {
    lnet *ln = atomic_load(&t->lnets[i]);
    if (ln && ln->tap.open) /* a loop that never ran its close */
      sc__batch_drop(t, ln->tap.open);
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
      sc__batch_free(SC_CONTAINER_OF(nd, tap_batch, link));
    free(ln->peers);
    free(ln);
  }
  free(t->peers);
  free(t->refusal_log);
  free(t);
}

void sc__transport_stats(sc_transport *t, sc_node_stats *s) {
  if (t == NULL) return;
  s->tap_published = atomic_load(&t->tap_published);
  s->tap_dropped = atomic_load(&t->tap_dropped);
  const int32_t nodes = t->node->cluster.num_nodes;
  s->remote_sent = 0;
  for (int32_t r = 0; t->peers && r < nodes; r++)
    s->remote_sent += atomic_load_explicit(&t->peers[r].out.sent, memory_order_relaxed);
  for (int i = 0; i < SC_MAX_LOOPS; i++) {
    const lnet *ln = atomic_load_explicit(&t->lnets[i], memory_order_acquire);
    if (ln) s->remote_sent += sc__zouts_sent(ln->peers, nodes);
  }
  s->remote_recv = atomic_load(&t->remote_recv);
  s->remote_dropped = atomic_load(&t->remote_dropped);
  s->forged = atomic_load(&t->forged);
  sc_zap_stats zs;
  sc_zap_get_stats(t->zap, &zs);
  s->auth_refused = zs.refused;
  const subs *cur = atomic_load(&t->subs_now);
  s->tap_subscriptions = cur ? cur->n : 0;
}
