/* sc_node.c - node lifecycle, names, and the "node" system actor (hello/ready handshake,
 * ping echo, shutdown, DOWN fan-out). Routing is in sc_route.c, next to delivery. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/log.h"
#include "actors/runtime/sc_node_impl.h"
#include "base/clock.h"
#include "base/curve_key.h"

#define LOG "node"

static sc_actor_id node_actor_of(int32_t rank) {
  return (sc_actor_id){.node = (uint16_t)rank, .slot = 0, .gen = 1};
}

static void node_emit(sc_node *n, const char *event, int32_t rank, int code, const char *d) {
  if (n->event_fn) n->event_fn(n->event_ud, event, rank, code, d ? d : "");
}

/* ---- the system actor ---- */

/* Any thread, also a signal handler (atomics and write(2) only). The first request
 * wins; its reason is written before shutdown says so, since sc_node_wait_shutdown
 * returns it as soon as it sees shutdown (found by ThreadSanitizer). */
static void request_stop(sc_node *n, int reason) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&n->stop_claimed, &expected, 1)) {
    n->shutdown_reason = reason;
    atomic_store(&n->shutdown, 1);
    const char c = 1;
    ssize_t w = write(n->stop_pipe[1], &c, 1);
    (void)w;
  }
}

void sc_node_request_stop(sc_node *n, int reason) { request_stop(n, reason); }

bool sc_node_shutting_down(const sc_node *n) {
  return atomic_load(&((sc_node *)n)->shutdown) || atomic_load(&((sc_node *)n)->stopping);
}

static int on_ping(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  const sc_msg_ping *p = body;
  sc_msg_pong *q = sc_msg_body_new(SC_MSG_PONG);
  if (q == NULL) return 0;
  q->seq = p->seq;
  q->sent_ns = p->sent_ns;
  if (p->payload.len) {
    q->payload.data = malloc(p->payload.len);
    if (q->payload.data) {
      memcpy(q->payload.data, p->payload.data, p->payload.len);
      q->payload.len = p->payload.len;
    }
  }
  const int rc = (env->seq & SC_SEQ_REQUEST) ? sc_reply(ctx, SC_MSG_PONG, q)
                                              : sc_send(ctx, env->src, SC_MSG_PONG, q);
  if (rc != 0) sc_msg_body_destroy(SC_MSG_PONG, q);
  return 0;
}

/* node_ready {rank, incarnation} to `to`: its own ready (rank = its node's), a rejoin's
 * news, or the rejoin to an sc_monitor_nodes subscriber. Best effort, as DOWN is. */
static void send_ready(sc_ctx *ctx, sc_actor_id to, int32_t rank, uint64_t incarnation) {
  sc_msg_node_ready *m = sc_msg_body_new(SC_MSG_NODE_READY);
  if (m == NULL) return;
  m->rank = rank;
  m->incarnation = incarnation;
  if (sc_send(ctx, to, SC_MSG_NODE_READY, m) != 0) sc_msg_body_destroy(SC_MSG_NODE_READY, m);
}

static void send_ready_all(sc_ctx *ctx) {
  sc_node *n = sc_ctx_node(ctx);
  for (int32_t r = 0; r < n->cluster.num_nodes; r++) send_ready(ctx, node_actor_of(r), r, 0);
}

/* Node `rank` is up again as a new process: letters to it flow again (they were dropped
 * while it was DOWN) and this node's sc_monitor_nodes subscribers hear of it. */
static void revive(sc_ctx *ctx, int32_t rank, uint64_t incarnation) {
  sc_node *n = sc_ctx_node(ctx);
  atomic_store(&n->peer_down[rank], 0);
  SC_INFO(LOG, "node %d: node %d rejoined (incarnation %016llx)", n->rank, rank,
          (unsigned long long)incarnation);
  node_emit(n, "rejoined", rank, 0, NULL);
  sc_actor_id subs[SC_NODE_MAX_SUBSCRIBERS];
  pthread_mutex_lock(&n->mu);
  const int k = n->num_node_subs;
  memcpy(subs, n->node_subs, sizeof subs[0] * (size_t)k);
  pthread_mutex_unlock(&n->mu);
  for (int i = 0; i < k; i++) send_ready(ctx, subs[i], rank, incarnation);
}

/* Head: a node that had joined says hello again from a new process (restarted by a
 * supervisor; docs/runtime.md, "Rejoining"), and this node has seen the old one go DOWN:
 * every node, the new one included, gets node_ready {rank, incarnation}: the new one
 * takes it as its own ready, the others as the news that it is back. */
static void admit_rejoin(sc_ctx *ctx, int32_t rank, uint64_t incarnation) {
  sc_node *n = sc_ctx_node(ctx);
  revive(ctx, rank, incarnation);
  for (int32_t r = 1; r < n->cluster.num_nodes; r++)
    if (r == rank || !sc_node_peer_down(n, r)) send_ready(ctx, node_actor_of(r), rank, incarnation);
}

/* A rejoin (head: a new process's hello; other nodes: the head's news) takes effect here
 * only once this node has seen the old process DOWN: until then this node's connections
 * to that rank may still be the old process's (a frozen process, a partition: ZeroMQ
 * reconnects to the new one only when the old connection ends), and their end, seen
 * after a revive, would mark the new process DOWN for good. So it waits in
 * rejoin_pending until on_down (the connection's end, or its heartbeats' timeout). */
static void rejoin_when_down(sc_ctx *ctx, int32_t rank, uint64_t incarnation) {
  sc_node *n = sc_ctx_node(ctx);
  if (!sc_node_peer_down(n, rank)) {
    SC_INFO(LOG, "node %d: node %d has a new process; it rejoins once the old one is seen gone",
            n->rank, rank);
    n->rejoin_pending[rank] = incarnation;
  } else if (n->rank == 0) {
    admit_rejoin(ctx, rank, incarnation);
  } else {
    revive(ctx, rank, incarnation);
  }
}

static int on_hello(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  sc_node *n = sc_ctx_node(ctx);
  const sc_msg_node_hello *h = body;
  if (n->rank != 0 || h->rank < 0 || h->rank >= n->cluster.num_nodes) return 0;
  SC_INFO(LOG, "head: hello from node %d (pid %u, %s)", h->rank, h->pid,
          h->endpoint ? h->endpoint : "");
  bool all = false, rejoin = false;
  pthread_mutex_lock(&n->mu);
  if (!n->hello_seen[h->rank]) {
    n->hello_seen[h->rank] = true;
    n->incarnation_of[h->rank] = h->incarnation;
    n->hellos++;
    all = n->hellos == n->cluster.num_nodes;
  } else if (h->incarnation != n->incarnation_of[h->rank]) {
    /* only into a running cluster: before ready, a node that died ends the start
     * (sc_node_wait_ready), and a stopping head takes no one back */
    rejoin = n->ready && h->rank != 0 && !sc_node_shutting_down(n);
    if (rejoin) n->incarnation_of[h->rank] = h->incarnation;
  }
  pthread_mutex_unlock(&n->mu);
  if (rejoin) rejoin_when_down(ctx, h->rank, h->incarnation);
  else if (all || !n->wait_all_hello) send_ready_all(ctx);
  return 0;
}

/* Own ready (rank = this node's), or from the head: node `rank` rejoined. */
static int on_ready(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  sc_node *n = sc_ctx_node(ctx);
  const sc_msg_node_ready *m = body;
  if (m->rank != n->rank) {
    if (env->src.node == 0 && n->rank != 0 && m->rank > 0 && m->rank < n->cluster.num_nodes)
      rejoin_when_down(ctx, m->rank, m->incarnation);
    return 0;
  }
  pthread_mutex_lock(&n->mu);
  const bool first = !n->ready;
  n->ready = true;
  pthread_cond_broadcast(&n->cv);
  pthread_mutex_unlock(&n->mu);
  if (first) node_emit(n, "ready", n->rank, 0, NULL);
  return 0;
}

/* Only the head stops other nodes (sc_node_broadcast_shutdown is the head's), so another
 * node's key cannot take the cluster down with one letter; a node may stop itself. */
static sc_log_limit g_foreign_shutdown_log;

static int on_shutdown(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  sc_node *n = sc_ctx_node(ctx);
  const sc_msg_node_shutdown *s = body;
  if (env->src.node != 0 && env->src.node != (uint16_t)n->rank) {
    unsigned long long held = 0;
    if (sc_log_limit_pass(&g_foreign_shutdown_log, sc_now_ns(), &held))
      SC_WARN(LOG, "node %d: ignored a shutdown from node %d (only the head stops other "
                   "nodes); %llu more since the last such line",
              n->rank, (int)env->src.node, held);
    return 0;
  }
  SC_INFO(LOG, "node %d: shutdown requested: %s", n->rank, s->reason ? s->reason : "");
  node_emit(n, "shutdown", n->rank, 0, s->reason);
  request_stop(n, 0);
  return 0;
}

static int on_down(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  sc_node *n = sc_ctx_node(ctx);
  const sc_msg_down *d = body;
  /* (expected while this node stops: the peers it told to stop go away) */
  SC_LOG(sc_node_shutting_down(n) ? SC_LOG_INFO : SC_LOG_WARN, LOG, "node %d: node %d is DOWN: %s",
         n->rank, d->node, d->message ? d->message : "");
  if (d->node == 0 && n->rank != 0) request_stop(n, SC_EDOWN); /* lost the head */
  if (d->node > 0 && d->node < n->cluster.num_nodes && n->rejoin_pending[d->node] != 0) {
    const uint64_t incarnation = n->rejoin_pending[d->node];
    n->rejoin_pending[d->node] = 0;
    rejoin_when_down(ctx, d->node, incarnation);
  }
  return 0;
}

static int on_heartbeat(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  return 0; /* liveness is ZeroMQ's heartbeat; the message is accepted for tools */
}

static sc_actor_spec k_node_spec = {
    .name = "node",
    .handlers = {[SC_MSG_PING] = on_ping,
                 [SC_MSG_NODE_HELLO] = on_hello,
                 [SC_MSG_NODE_READY] = on_ready,
                 [SC_MSG_NODE_SHUTDOWN] = on_shutdown,
                 [SC_MSG_DOWN] = on_down,
                 [SC_MSG_NODE_HEARTBEAT] = on_heartbeat},
    .loop = 0,
};

/* io thread: a peer disconnected or missed its heartbeats. */
void sc__node_peer_is_down(sc_node *n, int32_t rank, int code, const char *why) {
  if (atomic_exchange(&n->peer_down[rank], 1)) return;
  SC_LOG(sc_node_shutting_down(n) ? SC_LOG_INFO : SC_LOG_WARN, LOG,
         "node %d: peer node %d down: %s", n->rank, rank, why);
  node_emit(n, "down", rank, code, why);
  sc__broadcast_node_down(n, rank);
  /* A node goes down once per process (peer_down stays set until a new one rejoins), so
   * its watches fire once: they leave the list, however many there are, and are
   * answered outside the lock; the sc_monitor_nodes subscribers stay. */
  sc_remote_watch *fired = NULL;
  sc_actor_id subs[SC_NODE_MAX_SUBSCRIBERS];
  pthread_mutex_lock(&n->mu);
  for (sc_remote_watch **pp = &n->remote_watches; *pp;) {
    sc_remote_watch *w = *pp;
    if (w->who.node != rank) {
      pp = &w->next;
      continue;
    }
    *pp = w->next;
    w->next = fired;
    fired = w;
  }
  const int num_subs = n->num_node_subs;
  memcpy(subs, n->node_subs, sizeof subs[0] * (size_t)num_subs);
  pthread_mutex_unlock(&n->mu);
  const sc_actor_id who = {.node = (uint16_t)rank};
  sc__send_down(n, node_actor_of(n->rank), who, code, why);
  for (int i = 0; i < num_subs; i++) sc__send_down(n, subs[i], who, code, why);
  while (fired) {
    sc_remote_watch *w = fired;
    fired = w->next;
    sc__send_down(n, w->watcher, w->who, code, why);
    free(w);
  }
}

/* ---- lifecycle ---- */

/* A restarted node must differ from the process it replaces: random, never 0 (the
 * value a hello of schema 1.3 decodes to). */
static uint64_t new_incarnation(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = sc_now_ns() ^ ((uint64_t)getpid() << 32);
  return v ? v : 1;
}

void sc_node_opts_default(sc_node_opts *o) {
  memset(o, 0, sizeof *o);
  o->wait_all_hello = true;
}

static int copy_cluster(const sc_cluster *src, sc_cluster *dst) {
  *dst = *src;
  dst->nodes = calloc((size_t)src->num_nodes, sizeof *dst->nodes);
  if (dst->nodes == NULL) return SC_ENOMEM;
  memcpy(dst->nodes, src->nodes, (size_t)src->num_nodes * sizeof *dst->nodes);
  return 0;
}

int sc_node_create(const sc_node_opts *o, sc_node **out, sc_diag *d) {
  if (o == NULL || o->cluster == NULL || out == NULL)
    return sc_fail(d, SC_EINVAL, "node options, cluster and output are required");
  if (o->rank < 0 || o->rank >= o->cluster->num_nodes)
    return sc_fail(d, SC_EINVAL, "rank %d is not in the cluster (0..%d)", (int)o->rank,
                   (int)o->cluster->num_nodes - 1);
  if (o->num_startup < 0 || o->num_startup > SC_NODE_MAX_STARTUP)
    return sc_fail(d, SC_EINVAL, "at most %d startup actors", SC_NODE_MAX_STARTUP);
  int rc = 0;
  sc_node *n = calloc(1, sizeof *n);
  if (n == NULL) return SC_ENOMEM;
  n->stop_pipe[0] = n->stop_pipe[1] = -1;
  pthread_mutex_init(&n->mu, NULL);
  pthread_cond_init(&n->cv, NULL);
  if ((rc = copy_cluster(o->cluster, &n->cluster)) != 0) goto fail;
  n->rank = o->rank;
  n->wait_all_hello = o->wait_all_hello;
  n->spin_ns = (uint64_t)(n->cluster.spin_us > 0 ? n->cluster.spin_us : 0) * 1000ull;
  n->send_hwm = o->send_hwm > 0 ? o->send_hwm : 100000;
  n->send_queue_max = o->send_queue_max > 0 ? (uint32_t)o->send_queue_max : (1u << 20);
  if (n->cluster.curve) {
    if (o->key)
      n->key = *o->key;
    else if ((rc = sc_cluster_load_node_key(&n->cluster, n->rank, &n->key, d)) != 0)
      goto fail;
  }
  for (int32_t i = 0; i < o->num_startup; i++) {
    n->startup[i] = o->startup[i];
    if (o->startup[i].name == NULL || o->startup[i].spec == NULL) {
      rc = sc_fail(d, SC_EINVAL, "startup actor %d needs a name and a spec", (int)i);
      goto fail;
    }
  }
  n->num_startup = o->num_startup;
  n->slots = sc__calloc_lines(SC_MAX_SLOTS, sizeof *n->slots);
  n->peer_down = calloc((size_t)n->cluster.num_nodes, sizeof *n->peer_down);
  n->hello_seen = calloc((size_t)n->cluster.num_nodes, sizeof *n->hello_seen);
  n->incarnation_of = calloc((size_t)n->cluster.num_nodes, sizeof *n->incarnation_of);
  n->rejoin_pending = calloc((size_t)n->cluster.num_nodes, sizeof *n->rejoin_pending);
  n->incarnation = new_incarnation();
  if (n->slots == NULL || n->peer_down == NULL || n->hello_seen == NULL ||
      n->incarnation_of == NULL || n->rejoin_pending == NULL) {
    rc = SC_ENOMEM;
    goto fail;
  }
  for (uint32_t i = 0; i < SC_MAX_SLOTS; i++) {
    n->slots[i].index = (uint16_t)i;
    sc_mpsc_init(&n->slots[i].mbox);
  }
  atomic_store(&n->next_slot, 1u + (uint32_t)n->num_startup);
  if (pipe(n->stop_pipe) != 0) {
    rc = sc_fail(d, SC_ESYS, "pipe: %s", strerror(errno));
    goto fail;
  }
  fcntl(n->stop_pipe[1], F_SETFL, O_NONBLOCK);
  int loops = o->loops > 0 ? o->loops : n->cluster.loops;
  if (loops < 1) loops = 1;
  if (loops > SC_MAX_LOOPS / 2) loops = SC_MAX_LOOPS / 2;
  for (int i = 0; i < loops; i++) {
    if ((rc = sc__loop_create(n, i, &n->loops[i])) != 0) goto fail;
    n->num_loops = n->num_shared_loops = i + 1;
  }
  if ((rc = sc__transport_create(n, &n->tr)) != 0) goto fail;
  *out = n;
  return 0;
fail:
  sc_node_destroy(n);
  return rc;
}

void sc_node_set_event_cb(sc_node *n, sc_node_event_fn fn, void *ud) {
  n->event_fn = fn;
  n->event_ud = ud;
}

int sc_node_start(sc_node *n, sc_diag *d) {
  int rc = 0;
  pthread_mutex_lock(&n->mu);
  for (int i = 0; i < n->num_loops; i++)
    if ((rc = sc__loop_start(n->loops[i])) != 0) break;
  n->started = true;
  pthread_mutex_unlock(&n->mu);
  if (rc != 0) return sc_fail(d, rc, "cannot start loop threads");
  sc_actor_id id;
  if ((rc = sc__spawn_at(n, &k_node_spec, "node", NULL, 0, 0, &id)) != 0)
    return sc_fail(d, rc, "cannot spawn the node actor");
  for (int32_t k = 0; k < n->num_startup; k++) {
    const sc_startup_actor *a = &n->startup[k];
    if (a->where == SC_ON_HEAD && n->rank != 0) continue;
    rc = sc__spawn_at(n, a->spec, a->name, a->arg, a->arg_size, k + 1, &id);
    if (rc != 0) return sc_fail(d, rc, "cannot spawn startup actor %s", a->name);
  }
  /* Only now accept messages from peers: the actors they address exist (a hello that
   * arrived before the node actor would otherwise be dropped). The hello itself goes out
   * once the io thread has reached every peer (sc__node_say_hello). */
  if ((rc = sc__transport_start(n->tr, d)) != 0) return rc;
  if (n->cluster.num_nodes == 1 && (rc = sc__node_say_hello(n)) != 0)
    return sc_fail(d, rc, "cannot send hello to the head");
  return 0;
}

int sc__node_say_hello(sc_node *n) {
  sc_msg_node_hello *h = sc_msg_body_new(SC_MSG_NODE_HELLO);
  int rc = SC_ENOMEM;
  if (h != NULL) {
    h->rank = n->rank;
    h->pid = (uint32_t)getpid();
    h->endpoint = strdup(n->cluster.nodes[n->rank].endpoint);
    h->tap_endpoint = strdup(n->cluster.nodes[n->rank].tap);
    h->incarnation = n->incarnation;
    sc_envelope env = {.type = SC_MSG_NODE_HELLO, .src = node_actor_of(n->rank),
                       .dst = node_actor_of(0)};
    if ((rc = sc__route(n, &env, h)) != 0) sc_msg_body_destroy(SC_MSG_NODE_HELLO, h);
  }
  if (rc != 0)
    SC_ERROR(LOG, "node %d: cannot send hello to the head: %s", n->rank, sc_strerror(rc));
  else if (n->cluster.num_nodes > 1)
    SC_INFO(LOG, "node %d: every peer reached, hello sent to the head", n->rank);
  return rc;
}

int sc_node_wait_ready(sc_node *n, int64_t timeout_ms) {
  const uint64_t deadline = sc_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
  int rc = 0;
  pthread_mutex_lock(&n->mu);
  while (!n->ready) {
    if (atomic_load(&n->shutdown)) {
      rc = SC_ECLOSED;
      break;
    }
    /* a node gone before ready never says hello (or its peers never reach it) */
    for (int32_t r = 0; r < n->cluster.num_nodes && rc == 0; r++)
      if (atomic_load(&n->peer_down[r])) rc = SC_EDOWN;
    if (rc != 0) break;
    if (timeout_ms >= 0 && sc_now_ns() >= deadline) {
      rc = SC_ETIMEDOUT;
      break;
    }
    const struct timespec ts = sc_time_after_ms(CLOCK_REALTIME, 20);
    pthread_cond_timedwait(&n->cv, &n->mu, &ts);
  }
  pthread_mutex_unlock(&n->mu);
  return rc;
}

int sc_node_wait_shutdown(sc_node *n, int64_t timeout_ms) {
  const uint64_t start = sc_now_ns();
  while (!atomic_load(&n->shutdown)) {
    int wait = 100;
    if (timeout_ms >= 0) {
      const int64_t left = timeout_ms - (int64_t)((sc_now_ns() - start) / 1000000ull);
      if (left <= 0) return SC_ETIMEDOUT;
      if (left < wait) wait = (int)left;
    }
    struct pollfd p = {.fd = n->stop_pipe[0], .events = POLLIN};
    poll(&p, 1, wait);
  }
  return n->shutdown_reason;
}

int sc_node_broadcast_shutdown(sc_node *n, const char *reason) {
  int first_err = 0;
  for (int32_t r = 0; r < n->cluster.num_nodes; r++) {
    if (r == n->rank || atomic_load(&n->peer_down[r])) continue;
    sc_msg_node_shutdown *m = sc_msg_body_new(SC_MSG_NODE_SHUTDOWN);
    if (m == NULL) return SC_ENOMEM;
    m->reason = strdup(reason ? reason : "shutdown");
    sc_envelope env = {.type = SC_MSG_NODE_SHUTDOWN, .src = node_actor_of(n->rank),
                       .dst = node_actor_of(r)};
    const int rc = sc__route(n, &env, m);
    if (rc != 0) {
      sc_msg_body_destroy(SC_MSG_NODE_SHUTDOWN, m);
      if (first_err == 0) first_err = rc;
    }
  }
  return first_err;
}

void sc_node_stop(sc_node *n) {
  if (n == NULL || n->stopped) return;
  n->stopped = true;
  atomic_store(&n->stopping, 1);
  for (int i = 0; i < n->num_loops; i++) sc__loop_stop_join(n->loops[i]);
  sc__transport_stop(n->tr);
}

void sc_node_destroy(sc_node *n) {
  if (n == NULL) return;
  sc_node_stop(n);
  sc__transport_destroy(n->tr);
  n->tr = NULL;
  for (int i = 0; i < n->num_loops; i++) sc__loop_destroy(n->loops[i]);
  if (n->slots) {
    for (uint32_t i = 0; i < SC_MAX_SLOTS; i++) {
      sc_mpsc_node *nd;
      while ((nd = sc_mpsc_pop(&n->slots[i].mbox)) != NULL) {
        sc_letter *l = SC_CONTAINER_OF(nd, sc_letter, link);
        if (l->env.type == SC_SYS_START) {
          sc_actor *a = *(sc_actor **)l->body;
          free(a->state);
          free(a);
        }
        sc__letter_free(l);
      }
    }
  }
  while (n->remote_watches) {
    sc_remote_watch *w = n->remote_watches;
    n->remote_watches = w->next;
    free(w);
  }
  if (n->stop_pipe[0] >= 0) close(n->stop_pipe[0]);
  if (n->stop_pipe[1] >= 0) close(n->stop_pipe[1]);
  pthread_mutex_destroy(&n->mu);
  pthread_cond_destroy(&n->cv);
  free(n->slots);
  free((void *)n->peer_down);
  free(n->hello_seen);
  free(n->incarnation_of);
  free(n->rejoin_pending);
  free(n->cluster.nodes);
  sc_wipe(&n->key, sizeof n->key);
  free(n);
}

int32_t sc_node_rank(const sc_node *n) { return n->rank; }
int32_t sc_node_size(const sc_node *n) { return n->cluster.num_nodes; }
const sc_cluster *sc_node_cluster(const sc_node *n) { return &n->cluster; }
bool sc_node_peer_down(const sc_node *n, int32_t rank) {
  if (rank < 0 || rank >= n->cluster.num_nodes) return true;
  return atomic_load(&((sc_node *)n)->peer_down[rank]) != 0;
}

void sc_node_get_stats(sc_node *n, sc_node_stats *s) {
  memset(s, 0, sizeof *s);
  sc__transport_stats(n->tr, s);
  s->mailbox_dropped = atomic_load(&n->mailbox_dropped);
  s->undeliverable = atomic_load(&n->undeliverable);
  s->late_replies = atomic_load(&n->late_replies);
}

/* ---- names ---- */

int sc_node_register(sc_node *n, const char *name, sc_actor_id id) {
  if (name == NULL || name[0] == '\0' || strlen(name) >= SC_NODE_NAME_MAX ||
      strchr(name, '@'))
    return SC_EINVAL;
  if (id.node != (uint16_t)n->rank || id.slot >= SC_MAX_SLOTS) return SC_EINVAL;
  int rc = 0;
  pthread_mutex_lock(&n->mu);
  for (int i = 0; i < n->num_names; i++) {
    if (strcmp(n->names[i].name, name) != 0) continue;
    /* a name whose actor has stopped may be taken over (a restarted actor) */
    const sc_slot *old = &n->slots[n->names[i].id.slot];
    if (atomic_load(&old->live) && atomic_load(&old->gen) == n->names[i].id.gen) {
      rc = SC_EINVAL;
    } else {
      n->names[i].id = id;
      rc = 1;
    }
    break;
  }
  if (rc == 1) {
    pthread_mutex_unlock(&n->mu);
    return 0;
  }
  if (rc == 0 && n->num_names >= (int)(sizeof n->names / sizeof n->names[0])) rc = SC_EFULL;
  if (rc == 0) {
    snprintf(n->names[n->num_names].name, SC_NODE_NAME_MAX, "%s", name);
    n->names[n->num_names++].id = id;
  }
  pthread_mutex_unlock(&n->mu);
  return rc;
}

int sc_node_resolve(sc_node *n, const char *name_at_rank, sc_actor_id *out) {
  if (name_at_rank == NULL || out == NULL) return SC_EINVAL;
  char name[SC_NODE_NAME_MAX];
  const char *at = strchr(name_at_rank, '@');
  const size_t len = at ? (size_t)(at - name_at_rank) : strlen(name_at_rank);
  if (len == 0 || len >= sizeof name) return SC_EINVAL;
  memcpy(name, name_at_rank, len);
  name[len] = '\0';
  long rank = n->rank;
  if (at) {
    char *end;
    rank = strtol(at + 1, &end, 10);
    if (*end != '\0' || end == at + 1 || rank < 0 || rank >= n->cluster.num_nodes)
      return SC_EINVAL;
  }
  if (strcmp(name, "node") == 0) {
    *out = node_actor_of((int32_t)rank);
    return 0;
  }
  for (int32_t k = 0; k < n->num_startup; k++) {
    const sc_startup_actor *a = &n->startup[k];
    if (strcmp(a->name, name) != 0) continue;
    if (a->where == SC_ON_HEAD && rank != 0) return SC_ENOENT;
    *out = (sc_actor_id){.node = (uint16_t)rank, .slot = (uint16_t)(k + 1), .gen = 1};
    return 0;
  }
  if (rank != n->rank) return SC_ENOENT;
  int rc = SC_ENOENT;
  pthread_mutex_lock(&n->mu);
  for (int i = 0; i < n->num_names; i++)
    if (strcmp(n->names[i].name, name) == 0) {
      *out = n->names[i].id;
      rc = 0;
    }
  pthread_mutex_unlock(&n->mu);
  return rc;
}
