/* bench_messages.c - `sparsecp bench messages`: actor-to-actor message rate and round
 * trip latency, in process and across processes (ipc, tcp loopback), with and without a
 * tap subscriber, next to raw ZeroMQ moving messages of the same size.
 *
 * Rate: a driver actor streams pings to a sink actor with a credit window (the sink
 * acknowledges every SINK_ACK messages and checks order); the time from the first send
 * to the last acknowledgement gives msg/s. Round trip: one ping in flight, echoed as a
 * pong; p50 is the median, p99 a field. In process the two actors run on two loop
 * threads; across processes the sink's node is a forked child of the bench process.
 * The zmq baseline moves the encoded size of the same ping over DEALER -> ROUTER (rate)
 * and DEALER <-> ROUTER echo (rtt), in the same topology: between two threads of one
 * context in process, and to a ROUTER in a forked child with its own context across
 * processes. "tcp+curve" is tcp with the cluster's CURVE keys (made in memory), as
 * nodes on a network run: the same cases, with the raw ZeroMQ baseline on CURVE too, and
 * vs_plain_tcp (its ratio to plain tcp in the same run) on its results.
 *
 * Environment: SC_BENCH_MESSAGES_ONLY=inproc|ipc|tcp|tcp+curve measures one transport, or
 * several separated by commas ("tcp,tcp+curve");
 * SC_BENCH_MESSAGES_TAP=off|on only the runs without / with the tap;
 * SC_BENCH_MESSAGES_SPIN_US=N (0..100000) sets the clusters' spin_us (default: the
 * cluster's, SC_SPIN_US_DEFAULT).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/runtime/sc_node.h"
#include "actors/runtime/sc_tap_record.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "tools/bench.h"

#define SINK_ACK 1024
#define RUNS_MAX 5 /* rate runs per case (full run; --quick: 1) */
#define WINDOW 32768
#define STEP_RATE 1
#define STEP_ECHO 2

/* The transports measured, in this order: plain tcp before tcp+curve, so that the
 * latter's results can give their ratio to the former (vs_plain_tcp). */
typedef struct transport {
  const char *name;
  bool procs2; /* across processes: the sink's node (or the raw server) is a forked child */
  bool tcp;    /* loopback tcp ports (else ipc files in a private folder) */
  bool curve;  /* CURVE on every node endpoint and tap, and on the raw baseline */
} transport;

static const transport k_transports[] = {{"inproc", false, false, false},
                                         {"ipc", true, false, false},
                                         {"tcp", true, true, false},
                                         {"tcp+curve", true, true, true}};
#define NT 4
#define T_TCP 2 /* plain tcp: what tcp+curve is compared with */

/* A fresh CURVE key pair, in memory (ZeroMQ makes it in Z85). SC_ENOTSUP when this
 * libzmq has no CURVE. */
static int new_keypair(sc_node_key *k) {
  char pub[41], sec[41];
  int rc = zmq_curve_keypair(pub, sec) == 0 ? 0 : SC_ENOTSUP;
  if (rc == 0 && (zmq_z85_decode(k->public_key, pub) == NULL ||
                  zmq_z85_decode(k->secret_key, sec) == NULL))
    rc = SC_EIO;
  sc_wipe(sec, sizeof sec);
  return rc;
}

typedef struct run {
  _Atomic int done;
  _Atomic int errors;
  uint64_t t0, t1;
  sc_actor_id target;
  uint64_t total;     /* rate: messages; rtt: round trips */
  uint32_t payload;
  double *rtt_us;     /* rtt samples */
} run;

/* ---- sink (every rank, slot 1): counts in-order pings, acks, echoes ---- */

typedef struct sink {
  uint64_t expected, count;
  bool bad;
} sink;

static int sink_on_ping(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  const sc_msg_ping *p = body;
  sc_msg_pong *q = NULL;
  if (env->step == STEP_ECHO) {
    q = sc_msg_body_new(SC_MSG_PONG);
    if (q == NULL) return SC_ENOMEM;
    q->seq = p->seq;
    q->sent_ns = p->sent_ns;
    /* an echo returns the payload, as the raw ZeroMQ echo (zmq_rtt) returns every byte */
    if (p->payload.len) {
      q->payload.data = malloc(p->payload.len);
      if (q->payload.data == NULL) {
        sc_msg_body_destroy(SC_MSG_PONG, q);
        return SC_ENOMEM;
      }
      memcpy(q->payload.data, p->payload.data, p->payload.len);
      q->payload.len = p->payload.len;
    }
  } else {
    sink *s = sc_state(ctx);
    if (p->seq == 0) *s = (sink){0};
    if (p->seq != s->expected) s->bad = true;
    s->expected = p->seq + 1;
    s->count++;
    if (s->count % SINK_ACK != 0 && s->count != p->sent_ns) return 0;
    q = sc_msg_body_new(SC_MSG_PONG);
    if (q == NULL) return SC_ENOMEM;
    q->seq = s->count;
    q->sent_ns = s->bad;
  }
  const int rc = sc_send(ctx, env->src, SC_MSG_PONG, q);
  if (rc != 0) sc_msg_body_destroy(SC_MSG_PONG, q);
  return 0;
}

static const sc_actor_spec k_sink = {.name = "sink", .state_size = sizeof(sink),
                                     .handlers = {[SC_MSG_PING] = sink_on_ping},
                                     .mailbox_cap = 1u << 20, .loop = 1};
static const sc_startup_actor k_startup[] = {{.name = "sink", .spec = &k_sink}};

/* ---- driver (bench process) ---- */

typedef struct driver {
  run *r;
  uint64_t sent, acked, rtts;
} driver;

static int driver_init(sc_ctx *ctx, void *st, const void *arg) {
  ((driver *)st)->r = *(run *const *)arg;
  return 0;
}

static sc_msg_ping *make_ping(uint64_t seq, uint64_t aux, uint32_t payload) {
  sc_msg_ping *p = sc_msg_body_new(SC_MSG_PING);
  if (p == NULL) return NULL;
  p->seq = seq;
  p->sent_ns = aux;
  if (payload) {
    p->payload.data = malloc(payload);
    if (p->payload.data == NULL) {
      sc_msg_body_destroy(SC_MSG_PING, p);
      return NULL;
    }
    memset(p->payload.data, 0x5a, payload);
    p->payload.len = payload;
  }
  return p;
}

static int pump(sc_ctx *ctx, driver *d) {
  run *r = d->r;
  while (d->sent < r->total && d->sent - d->acked < WINDOW) {
    sc_msg_ping *p = make_ping(d->sent, r->total, r->payload);
    if (p == NULL) return SC_ENOMEM;
    const int rc = sc_send_step(ctx, r->target, SC_MSG_PING, STEP_RATE, p);
    if (rc != 0) {
      sc_msg_body_destroy(SC_MSG_PING, p);
      if (rc != SC_EFULL) return rc;
      if (d->sent == d->acked) { /* nothing in flight will wake us: retry later */
        sc_msg_ping *k = make_ping(0, 0, 0);
        if (k && sc_send_step(ctx, sc_self(ctx), SC_MSG_PING, 0, k) != 0)
          sc_msg_body_destroy(SC_MSG_PING, k);
      }
      return 0;
    }
    d->sent++;
  }
  return 0;
}

static int driver_on_ping(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  driver *d = sc_state(ctx);
  run *r = d->r;
  if (env->step == STEP_RATE) { /* start */
    d->sent = d->acked = 0;
    r->t0 = sc_now_ns();
    return pump(ctx, d);
  }
  if (env->step == STEP_ECHO) { /* start rtt */
    d->rtts = 0;
    sc_msg_ping *p = make_ping(0, sc_now_ns(), r->payload);
    if (p == NULL) return SC_ENOMEM;
    const int rc = sc_send_step(ctx, r->target, SC_MSG_PING, STEP_ECHO, p);
    if (rc != 0) sc_msg_body_destroy(SC_MSG_PING, p);
    return rc;
  }
  return pump(ctx, d); /* retry continuation */
}

static int driver_on_pong(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  driver *d = sc_state(ctx);
  run *r = d->r;
  const sc_msg_pong *q = body;
  if (env->step == STEP_ECHO) {
    r->rtt_us[d->rtts++] = (double)(sc_now_ns() - q->sent_ns) / 1e3;
    if (d->rtts == r->total) {
      atomic_store(&r->done, 1);
      return 0;
    }
    sc_msg_ping *p = make_ping(d->rtts, sc_now_ns(), r->payload);
    if (p == NULL) return SC_ENOMEM;
    const int rc = sc_send_step(ctx, r->target, SC_MSG_PING, STEP_ECHO, p);
    if (rc != 0) sc_msg_body_destroy(SC_MSG_PING, p);
    return rc;
  }
  if (q->sent_ns != 0) atomic_fetch_add(&r->errors, 1);
  if (q->seq > d->acked) d->acked = q->seq;
  if (d->acked >= r->total) {
    r->t1 = sc_now_ns();
    atomic_store(&r->done, 1);
    return 0;
  }
  return pump(ctx, d);
}

static const sc_actor_spec k_driver = {
    .name = "driver", .state_size = sizeof(driver), .init = driver_init,
    .handlers = {[SC_MSG_PING] = driver_on_ping, [SC_MSG_PONG] = driver_on_pong},
    .mailbox_cap = 1u << 20, .loop = 0};

/* ---- tap subscriber thread ----
 * Connected to every node's tap for the cluster's lifetime; `want` says whether it
 * subscribes to everything. The tapped and untapped runs of a case alternate on one
 * cluster: two clusters place their loop threads on different cores, and on machines where
 * a cache line's trip between two cores costs 80-250 ns depending on the pair, that
 * placement moves the rate by more than the tap's cost. */

typedef struct tapsub {
  void *ctx, *sub;
  pthread_t th;
  _Atomic int stop;
  _Atomic int want; /* 1: subscribed to everything */
  _Atomic uint64_t seen;
} tapsub;

static void *tapsub_main(void *arg) {
  tapsub *t = arg;
  prctl(PR_SET_NAME, "bench-tapsub", 0, 0, 0);
  const int timeo = 5;
  int subscribed = 0;
  zmq_setsockopt(t->sub, ZMQ_RCVTIMEO, &timeo, sizeof timeo);
  while (!atomic_load(&t->stop)) {
    const int want = atomic_load(&t->want);
    if (want != subscribed) {
      zmq_setsockopt(t->sub, want ? ZMQ_SUBSCRIBE : ZMQ_UNSUBSCRIBE, "", 0);
      subscribed = want;
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, t->sub, 0) >= 0 && !zmq_msg_more(&m)) {
      /* count the records of the batch */
      const uint8_t *p = zmq_msg_data(&m);
      size_t left = zmq_msg_size(&m);
      sc_tap_record rec;
      while (sc_tap_record_next(&p, &left, &rec) > 0) atomic_fetch_add(&t->seen, 1);
    }
    zmq_msg_close(&m);
  }
  return NULL;
}

/* Waits until the subscriber has seen nothing new for 20 ms (at most 2 s); returns the
 * records it has seen. */
static uint64_t tap_settle(tapsub *t) {
  uint64_t seen = atomic_load(&t->seen);
  for (int i = 0; i < 100; i++) {
    usleep(20000);
    const uint64_t now = atomic_load(&t->seen);
    if (now == seen) break;
    seen = now;
  }
  return seen;
}

/* key: the subscriber's key pair on CURVE taps (the cluster's tap_keys_file lists it),
 * each tap's server key being its node's public key; NULL on plain taps. */
static int tapsub_start(tapsub *t, const sc_cluster *c, const sc_node_key *key) {
  const int zero = 0;
  int rc = SC_ESYS;
  if ((t->ctx = zmq_ctx_new()) == NULL) return rc;
  if ((t->sub = zmq_socket(t->ctx, ZMQ_SUB)) != NULL) {
    zmq_setsockopt(t->sub, ZMQ_LINGER, &zero, sizeof zero);
    rc = 0;
    for (int32_t r = 0; r < c->num_nodes && rc == 0; r++) {
      /* ZeroMQ takes the server key at each connect */
      if (key && sc_curve_make_client(t->sub, key->public_key, key->secret_key,
                                      c->nodes[r].public_key) != 0)
        rc = SC_EIO;
      if (rc == 0 && zmq_connect(t->sub, c->nodes[r].tap) != 0) rc = SC_EIO;
    }
    if (rc == 0 && pthread_create(&t->th, NULL, tapsub_main, t) == 0) return 0;
    zmq_close(t->sub);
  }
  zmq_ctx_term(t->ctx);
  return rc ? rc : SC_ESYS;
}

static void tapsub_stop(tapsub *t) {
  atomic_store(&t->stop, 1);
  pthread_join(t->th, NULL);
  zmq_close(t->sub);
  zmq_ctx_term(t->ctx);
}

/* ---- one cluster: 1 node (inproc) or 2 (ipc/tcp, rank 1 forked) ---- */

typedef struct cluster_run {
  sc_cluster c;
  sc_node *node;
  pid_t child;
  char dir[64];
  bool tapped;
  tapsub tap;
  sc_node_key keys[2]; /* with CURVE: rank r's key pair (the child reads its copy) */
  sc_node_key tap_key; /* with CURVE: the one key the taps admit (the subscriber's) */
  run r; /* the driver's: here, not on a stack, since a driver that timed out may still
          * write to it until cluster_down has stopped the node */
} cluster_run;

/* Forks a child that dies with this process (PR_SET_PDEATHSIG); *pid is the child's id
 * in the parent, 0 in the child. Call with no zmq context alive, so the child starts
 * clean (other threads may run: OpenBLAS's pool and jemalloc are fork-safe). */
static int fork_child(pid_t *pid) {
  const pid_t parent = getpid();
  *pid = fork();
  if (*pid < 0) return SC_ESYS;
  if (*pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1); /* the parent died before the prctl */
  }
  return 0;
}

/* Waits up to wait_ms for the child to exit, then kills it; either way it is reaped.
 * Returns 0 when it exited with status 0, SC_EIO otherwise. */
static int reap_child(pid_t child, int wait_ms) {
  int status = 0;
  pid_t w = 0;
  for (int i = 0; i < wait_ms && (w = waitpid(child, &status, WNOHANG)) == 0; i++) usleep(1000);
  if (w <= 0) { /* still running, or the wait failed: make sure it is gone */
    kill(child, SIGKILL);
    while ((w = waitpid(child, &status, 0)) < 0 && errno == EINTR) {}
  }
  return w == child && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : SC_EIO;
}

static void child_node(const cluster_run *cr) {
  sc_node_opts o;
  sc_node_opts_default(&o);
  o.cluster = &cr->c;
  o.rank = 1;
  o.key = cr->c.curve ? &cr->keys[1] : NULL;
  o.loops = 2;
  o.startup = k_startup;
  o.num_startup = 1;
  sc_node *n = NULL;
  int rc = sc_node_create(&o, &n, NULL);
  if (rc == 0) rc = sc_node_start(n, NULL);
  if (rc == 0) rc = sc_node_wait_shutdown(n, 600000);
  sc_node_destroy(n);
  _exit(rc == 0 ? 0 : 1);
}

static int wait_done(run *r, int64_t timeout_ms) {
  const uint64_t until = sc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (!atomic_load(&r->done)) {
    if (sc_now_ns() > until) return SC_ETIMEDOUT;
    usleep(200);
  }
  return 0;
}

/* CURVE as a cluster file with keys gives it, with key pairs made in memory: a public
 * key per node in the cluster, each node given its pair through sc_node_opts.key (the
 * forked rank 1 finds its own in its copy of cr). A tap on tcp with CURVE admits the
 * keys of a file only, so the subscriber's public key goes to taps.pub in the folder. */
static int cluster_keys(cluster_run *cr) {
  int rc = 0;
  for (int32_t r = 0; r < cr->c.num_nodes && rc == 0; r++) {
    rc = new_keypair(&cr->keys[r]);
    memcpy(cr->c.nodes[r].public_key, cr->keys[r].public_key, 32);
    cr->c.nodes[r].has_key = true;
  }
  if (rc == 0) rc = new_keypair(&cr->tap_key);
  if (rc != 0) return rc;
  cr->c.curve = true;
  snprintf(cr->c.tap_keys_file, sizeof cr->c.tap_keys_file, "%s/taps.pub", cr->dir);
  char z85[41];
  FILE *f = fopen(cr->c.tap_keys_file, "w");
  if (f == NULL) return SC_EIO;
  const bool ok = fprintf(f, "%s\n", zmq_z85_encode(z85, cr->tap_key.public_key, 32)) > 0;
  return fclose(f) == 0 && ok ? 0 : SC_EIO;
}

/* spin_us: the cluster's spin_us, or -1 for the default of sc_cluster_local. The tap
 * subscriber is connected but not subscribed (tap_set turns it on). */
static int cluster_up(cluster_run *cr, const transport *tr, int32_t spin_us) {
  memset(cr, 0, sizeof *cr);
  const int32_t nodes = tr->procs2 ? 2 : 1;
  snprintf(cr->dir, sizeof cr->dir, "/tmp/sc-bench-XXXXXX");
  if (mkdtemp(cr->dir) == NULL) return SC_ESYS;
  int rc = sc_cluster_local(nodes, tr->tcp ? NULL : cr->dir, &cr->c, NULL);
  if (rc != 0) return rc;
  cr->c.heartbeat_ms = 500;
  cr->c.heartbeat_timeout_ms = 5000;
  if (spin_us >= 0) cr->c.spin_us = spin_us;
  if (tr->curve && (rc = cluster_keys(cr)) != 0) return rc;
  if (tr->procs2) { /* the child node runs on this copy of the cluster, spin_us included */
    if ((rc = fork_child(&cr->child)) != 0) return rc;
    if (cr->child == 0) child_node(cr);
  }
  sc_node_opts o;
  sc_node_opts_default(&o);
  o.cluster = &cr->c;
  o.rank = 0;
  o.loops = 2;
  o.startup = k_startup;
  o.num_startup = 1;
  o.key = tr->curve ? &cr->keys[0] : NULL;
  if ((rc = sc_node_create(&o, &cr->node, NULL)) != 0) return rc;
  if ((rc = sc_node_start(cr->node, NULL)) != 0) return rc;
  if ((rc = sc_node_wait_ready(cr->node, 20000)) != 0) return rc;
  if ((rc = tapsub_start(&cr->tap, &cr->c, tr->curve ? &cr->tap_key : NULL)) != 0) return rc;
  cr->tapped = true;
  return 0;
}

/* Subscribes the tap to everything, or unsubscribes it, and waits until this node's XPUB
 * has seen it; the child's, which cannot be asked, gets 100 ms more. */
static int tap_set(cluster_run *cr, bool on) {
  atomic_store(&cr->tap.want, on);
  sc_node_stats st;
  for (int i = 0;; i++) {
    sc_node_get_stats(cr->node, &st);
    if ((st.tap_subscriptions > 0) == on) break;
    if (i == 5000) return SC_ETIMEDOUT;
    usleep(1000);
  }
  if (cr->child > 0) usleep(100000);
  return 0;
}

static void cluster_down(cluster_run *cr) {
  if (cr->tapped) tapsub_stop(&cr->tap);
  if (cr->node) sc_node_broadcast_shutdown(cr->node, "bench done");
  if (cr->child > 0) reap_child(cr->child, cr->node ? 3000 : 0);
  if (cr->node) sc_node_destroy(cr->node);
  sc_cluster_free(&cr->c);
  sc_wipe(cr->keys, sizeof cr->keys);
  sc_wipe(&cr->tap_key, sizeof cr->tap_key);
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cr->dir);
  if (system(cmd) != 0) return;
}

/* ---- zmq baseline: the same topology as the runtime's cases. In process the ROUTER runs
 * on a thread of the client's context (inproc cannot cross contexts); across processes it
 * runs in a forked child with a context of its own, created after the fork. ---- */

#define Z_TIMEOUT_MS 30000 /* a healthy run never waits this long for one step */
enum { Z_READY = 'r', Z_DONE = 'd', Z_FAIL = 'f' }; /* status bytes on the server's pipe */

typedef struct zserver {
  void *ctx;        /* this process's context (the thread server shares the client's) */
  const char *ep;
  size_t size;
  uint64_t n;       /* messages the server takes (echoes, in echo mode) */
  int mode;         /* 0 sink, 1 echo */
  bool curve;       /* the ROUTER is a CURVE server, the client's DEALER its client */
  sc_node_key server_key, client_key; /* with curve: made before the fork, so both ends
                                         know them */
  int rfd, wfd;     /* status pipe: the server writes Z_READY once bound, then Z_DONE */
  pid_t child;      /* > 0: the server is this child process */
  pthread_t th;
  bool started;     /* the server thread runs */
} zserver;

static int put_status(int fd, char c) {
  ssize_t w;
  while ((w = write(fd, &c, 1)) < 0 && errno == EINTR) {}
  return w == 1 ? 0 : SC_EIO;
}

/* Waits up to Z_TIMEOUT_MS for the server's status byte want: SC_ETIMEDOUT, or SC_EIO
 * when the server failed or died. */
static int zserver_await(const zserver *z, char want) {
  struct pollfd pf = {.fd = z->rfd, .events = POLLIN};
  int r;
  while ((r = poll(&pf, 1, Z_TIMEOUT_MS)) < 0 && errno == EINTR) {}
  if (r == 0) return SC_ETIMEDOUT;
  char c = 0;
  ssize_t got = 0;
  while (r > 0 && (got = read(z->rfd, &c, 1)) < 0 && errno == EINTR) {}
  return r > 0 && got == 1 && c == want ? 0 : SC_EIO;
}

/* The server: a ROUTER bound at z->ep takes z->n messages (echoing each in echo mode);
 * reports on z->wfd. Runs on the server's thread or in the child. */
static int zmq_serve(zserver *z) {
  void *s = zmq_socket(z->ctx, ZMQ_ROUTER);
  char *buf = malloc(z->size + 64);
  char id[256];
  int rc = SC_EIO;
  if (s == NULL || buf == NULL) goto done;
  const int zero = 0, hwm = 100000, timeo = Z_TIMEOUT_MS;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeo, sizeof timeo);
  if (z->curve && sc_curve_make_server(s, z->server_key.secret_key, NULL) != 0) goto done;
  if (zmq_bind(s, z->ep) != 0 || put_status(z->wfd, Z_READY) != 0) goto done;
  for (uint64_t i = 0; i < z->n; i++) {
    const int il = zmq_recv(s, id, sizeof id, 0);
    const int l = il < 0 ? -1 : zmq_recv(s, buf, z->size + 64, 0);
    if (l < 0) goto done;
    if (z->mode == 1 &&
        (zmq_send(s, id, (size_t)il, ZMQ_SNDMORE) < 0 || zmq_send(s, buf, (size_t)l, 0) < 0))
      goto done;
  }
  rc = 0;
done:
  put_status(z->wfd, rc == 0 ? Z_DONE : Z_FAIL);
  free(buf);
  if (s) zmq_close(s);
  return rc;
}

static void *zmq_server_thread(void *arg) {
  zmq_serve(arg);
  return NULL;
}

/* Waits for the server and releases it: on failure (rc != 0) the child is killed or the
 * thread's recv ended through the context; the child is always reaped. Close the client's
 * socket first. Returns rc, or when rc is 0 the child's failure. */
static int zserver_stop(zserver *z, int rc) {
  if (z->child > 0) {
    const int st = reap_child(z->child, rc == 0 ? Z_TIMEOUT_MS : 0);
    if (rc == 0) rc = st;
  } else if (z->started) {
    if (rc != 0) zmq_ctx_shutdown(z->ctx);
    pthread_join(z->th, NULL);
  }
  if (z->ctx) zmq_ctx_term(z->ctx);
  close(z->rfd);
  if (z->wfd >= 0) close(z->wfd);
  return rc;
}

/* Starts the server, forked or on a thread, and returns once it is bound; on failure
 * nothing is left running. Call with no zmq context alive in this process. */
static int zserver_start(zserver *z, bool forked) {
  int fds[2];
  if (pipe(fds) != 0) return SC_ESYS;
  z->rfd = fds[0];
  z->wfd = fds[1];
  int rc = 0;
  /* no ZAP handler: the server admits any client key, as the nodes' handler admits the
   * cluster's; either way the check is part of the handshake, not of each message */
  if (z->curve && ((rc = new_keypair(&z->server_key)) != 0 ||
                   (rc = new_keypair(&z->client_key)) != 0))
    goto fail;
  if (forked) {
    if ((rc = fork_child(&z->child)) != 0) goto fail;
    if (z->child == 0) {
      close(z->rfd);
      z->ctx = zmq_ctx_new();
      rc = z->ctx ? zmq_serve(z) : SC_ENOMEM;
      if (z->ctx) zmq_ctx_term(z->ctx);
      _exit(rc == 0 ? 0 : 1);
    }
    close(z->wfd); /* the child's exit closes the last write end: a dead server reads EOF */
    z->wfd = -1;
  }
  if ((z->ctx = zmq_ctx_new()) == NULL) {
    rc = SC_ENOMEM;
    goto fail;
  }
  if (!forked) {
    if (pthread_create(&z->th, NULL, zmq_server_thread, z) != 0) {
      rc = SC_ESYS;
      goto fail;
    }
    z->started = true;
  }
  if ((rc = zserver_await(z, Z_READY)) == 0) return 0;
fail:
  return zserver_stop(z, rc);
}

/* The client's DEALER, connected to the server. */
static void *zmq_client(const zserver *z) {
  void *c = zmq_socket(z->ctx, ZMQ_DEALER);
  if (c == NULL) return NULL;
  const int zero = 0, hwm = 100000, timeo = Z_TIMEOUT_MS;
  zmq_setsockopt(c, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(c, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(c, ZMQ_SNDTIMEO, &timeo, sizeof timeo);
  zmq_setsockopt(c, ZMQ_RCVTIMEO, &timeo, sizeof timeo);
  const bool keyed = !z->curve || sc_curve_make_client(c, z->client_key.public_key,
                                                      z->client_key.secret_key,
                                                      z->server_key.public_key) == 0;
  if (keyed && zmq_connect(c, z->ep) == 0) return c;
  zmq_close(c);
  return NULL;
}

/* SC_ETIMEDOUT when a socket's 30 s timeout expired, else SC_EIO. */
static int zmq_io_error(void) { return errno == EAGAIN ? SC_ETIMEDOUT : SC_EIO; }

/* n messages of size bytes to a sink, then a 1-byte end marker; *rate in msg/s from the
 * first send (asynchronous: the connection's set-up is timed too, well under 1 % of n)
 * until the sink has taken them all. */
static int zmq_rate(const char *ep, const transport *tr, size_t size, uint64_t n, double *rate) {
  zserver z = {.ep = ep, .size = size, .n = n + 1, .mode = 0, .curve = tr->curve, .rfd = -1,
               .wfd = -1};
  int rc = zserver_start(&z, tr->procs2);
  if (rc != 0) return rc;
  void *c = zmq_client(&z);
  char *buf = calloc(1, size);
  uint64_t t0 = 0;
  if (c == NULL || buf == NULL) rc = SC_ENOMEM;
  for (uint64_t i = 0; i <= n && rc == 0; i++) {
    if (zmq_send(c, buf, i == n ? 1 : size, 0) < 0) rc = zmq_io_error();
    if (i == 0) t0 = sc_now_ns();
  }
  if (rc == 0) rc = zserver_await(&z, Z_DONE);
  if (rc == 0) *rate = (double)(n - 1) / ((double)(sc_now_ns() - t0) * 1e-9);
  free(buf);
  if (c) zmq_close(c);
  return zserver_stop(&z, rc);
}

/* n round trips of size bytes to an echo server (after one untimed), in us[0..n). */
static int zmq_rtt(const char *ep, const transport *tr, size_t size, uint64_t n, double *us) {
  zserver z = {.ep = ep, .size = size, .n = n + 1, .mode = 1, .curve = tr->curve, .rfd = -1,
               .wfd = -1};
  int rc = zserver_start(&z, tr->procs2);
  if (rc != 0) return rc;
  void *c = zmq_client(&z);
  char *buf = calloc(1, size + 64);
  if (c == NULL || buf == NULL) rc = SC_ENOMEM;
  for (uint64_t i = 0; i <= n && rc == 0; i++) {
    const uint64_t t0 = sc_now_ns();
    if (zmq_send(c, buf, size, 0) < 0 || zmq_recv(c, buf, size + 64, 0) < 0) rc = zmq_io_error();
    else if (i > 0) us[i - 1] = (double)(sc_now_ns() - t0) / 1e3;
  }
  if (rc == 0) rc = zserver_await(&z, Z_DONE);
  free(buf);
  if (c) zmq_close(c);
  return zserver_stop(&z, rc);
}

/* ---- the benchmark ---- */

static const uint32_t k_payloads[] = {16, 1024};
#define NP 2

static size_t encoded_ping_size(uint32_t payload) {
  sc_msg_ping *p = make_ping(123456, sc_now_ns(), payload);
  sc_envelope env = {.type = SC_MSG_PING, .step = 1, .src = {0, 2, 1}, .dst = {1, 1, 1}};
  sc_buf b;
  sc_buf_init(&b);
  size_t n = 0;
  if (p && sc_msg_encode(&env, p, &b) == 0) n = b.len;
  sc_buf_free(&b);
  sc_msg_body_destroy(SC_MSG_PING, p);
  return n;
}

/* SC_BENCH_MESSAGES_ONLY's list: transport names separated by commas, each of which must
 * name one; skip[t] for those it does not list. Unset or empty: every transport. */
static const char *transport_name(int t) { return k_transports[t].name; }

static int parse_only(const char *only, bool skip[NT]) {
  for (int t = 0; t < NT; t++) skip[t] = false;
  if (only == NULL || only[0] == 0) return 0;
  bool on[NT] = {false};
  if (sc_bench_pick(only, NT, transport_name, on) > 0) {
    for (int t = 0; t < NT; t++) skip[t] = !on[t];
    return 0;
  }
  fprintf(stderr, "bench messages: SC_BENCH_MESSAGES_ONLY=%s names no transport (inproc, ipc, "
                  "tcp, tcp+curve, or several of them separated by commas)\n", only);
  return SC_EINVAL;
}

/* The environment's choices: SC_BENCH_MESSAGES_ONLY=inproc|ipc|tcp|tcp+curve measures one
 * transport, or the ones of a comma-separated list, always in k_transports' order (a full
 * run takes minutes; a device call may not have them),
 * SC_BENCH_MESSAGES_TAP=off|on only the runs without / with the tap (taps[0..1]: the first
 * and last tap setting measured; a profiler then sees one kind of run), and
 * SC_BENCH_MESSAGES_SPIN_US=N the clusters' spin_us (*spin_us -1: unset, the cluster's
 * default). An empty variable counts as unset. SC_EINVAL, said on stderr, for a value that
 * names no transport or is not an integer in [0, SC_SPIN_US_MAX]. */
static int env_choices(bool skip[NT], int32_t *spin_us, int taps[2]) {
  if (parse_only(getenv("SC_BENCH_MESSAGES_ONLY"), skip) != 0) return SC_EINVAL;
  const char *tap = getenv("SC_BENCH_MESSAGES_TAP");
  taps[0] = 0;
  taps[1] = 1;
  if (tap != NULL && tap[0] != 0) {
    if (strcmp(tap, "off") != 0 && strcmp(tap, "on") != 0) {
      fprintf(stderr, "bench messages: SC_BENCH_MESSAGES_TAP=%s is neither off nor on\n", tap);
      return SC_EINVAL;
    }
    taps[0] = taps[1] = strcmp(tap, "on") == 0;
  }
  const char *spin = getenv("SC_BENCH_MESSAGES_SPIN_US");
  *spin_us = -1;
  if (spin == NULL || spin[0] == 0) return 0;
  const size_t digits = strspn(spin, "0123456789");
  if (digits == 0 || digits > 6 || spin[digits] != 0 || atol(spin) > SC_SPIN_US_MAX) {
    fprintf(stderr, "bench messages: SC_BENCH_MESSAGES_SPIN_US=%s is not an integer in [0, "
                    "%d] (the cluster's spin_us, microseconds)\n", spin, SC_SPIN_US_MAX);
    return SC_EINVAL;
  }
  *spin_us = (int32_t)atol(spin);
  return 0;
}

/* A result's params: transport, tap, payload. */
static void case_params(char *out, size_t len, int t, bool tap, uint32_t payload) {
  snprintf(out, len, "\"transport\":\"%s\",\"tap\":%s,\"payload\":%u",
           k_transports[t].name, tap ? "true" : "false", payload);
}

/* One payload on one cluster. */
typedef struct bench_case {
  sc_bench *b;
  cluster_run *cr;
  int transport;
  uint32_t payload;
  int runs, rtts;
  int tap_first, tap_last; /* 0 0: without the tap only, 1 1: with it only, 0 1: both */
  uint64_t n;        /* messages per rate run */
  double zrate, zp50; /* raw ZeroMQ's rate and p50 for the same transport and size */
  double *rate_med, *p50; /* [tap]: this case's median rate and p50, kept for ... */
  const double *plain_rate, *plain_p50; /* ... tcp+curve's vs_plain_tcp: plain tcp's of the
                                           same payload ([tap], 0: not measured); NULL
                                           unless this case is tcp+curve */
} bench_case;

/* Appends ",\"vs_plain_tcp\":R" (CURVE's value over plain tcp's in the same run: a rate
 * ratio, or a p50 ratio) to extra when plain is known; returns the new length. */
static int put_vs_plain(char *extra, size_t cap, int len, double value, const double *plain) {
  if (plain == NULL || *plain <= 0 || len < 0 || (size_t)len >= cap) return len;
  return len + snprintf(extra + len, cap - (size_t)len, ",\"vs_plain_tcp\":%.4f",
                        value / *plain);
}

/* One rate run of n messages (msg/s into *out), or one round-trip series of r->total
 * (samples into r->rtt_us), started by a kick of step STEP_RATE / STEP_ECHO. */
static int drive(cluster_run *cr, sc_actor_id drv, run *r, uint16_t step, uint64_t n) {
  atomic_store(&r->done, 0);
  r->total = n;
  sc_envelope env = {.type = SC_MSG_PING, .step = step, .dst = drv};
  sc_msg_ping *kick = make_ping(0, 0, 0);
  if (kick == NULL) return SC_ENOMEM;
  const int rc = sc_node_send(cr->node, &env, kick);
  if (rc != 0) {
    sc_msg_body_destroy(SC_MSG_PING, kick);
    return rc;
  }
  return wait_done(r, 120000);
}

/* The runs with and without the tap alternate, so both see the same placement of
 * threads on cores and the same drift of the machine. */
static int measure_case(const bench_case *bc, double *samples) {
  cluster_run *cr = bc->cr;
  run *r = &cr->r;
  *r = (run){.payload = bc->payload};
  char who[32], params[256], extra[256];
  snprintf(who, sizeof who, "sink@%d", bc->transport == 0 ? 0 : 1);
  sc_node_resolve(cr->node, who, &r->target);
  run *pr = r;
  sc_actor_id drv;
  int rc = sc_spawn(cr->node, &k_driver, &pr, sizeof pr, &drv);
  if (rc != 0) return rc;

  double rate[2][RUNS_MAX];
  uint64_t seen = 0, published = 0, dropped = 0; /* by the tapped rate runs */
  for (int k = 0; k < bc->runs && rc == 0; k++)
    for (int tap = bc->tap_first; tap <= bc->tap_last && rc == 0; tap++) {
      if ((rc = tap_set(cr, tap)) != 0) break;
      sc_node_stats st0, st1;
      sc_node_get_stats(cr->node, &st0);
      const uint64_t seen0 = atomic_load(&cr->tap.seen);
      if ((rc = drive(cr, drv, r, STEP_RATE, bc->n)) != 0) break;
      rate[tap][k] = (double)bc->n / ((double)(r->t1 - r->t0) * 1e-9);
      if (!tap) continue;
      seen += tap_settle(&cr->tap) - seen0; /* the subscriber catches up before the next run */
      sc_node_get_stats(cr->node, &st1);
      published += st1.tap_published - st0.tap_published;
      dropped += st1.tap_dropped - st0.tap_dropped;
    }
  if (rc == 0 && atomic_load(&r->errors)) {
    fprintf(stderr, "bench messages: the sink saw messages out of order\n");
    rc = SC_EPROTO;
  }
  const double base = rc == 0 && bc->tap_first == 0 ? sc_bench_median(rate[0], bc->runs) : 0;
  for (int tap = bc->tap_first; tap <= bc->tap_last && rc == 0; tap++) {
    const double med = sc_bench_median(rate[tap], bc->runs);
    case_params(params, sizeof params, bc->transport, tap, bc->payload);
    int el = snprintf(extra, sizeof extra, "\"vs_zmq\":%.3f,\"spin_us\":%d", med / bc->zrate,
                      (int)cr->c.spin_us);
    bc->rate_med[tap] = med;
    el = put_vs_plain(extra, sizeof extra, el, med, bc->plain_rate ? &bc->plain_rate[tap] : NULL);
    if (tap) {
      if (base > 0)
        el += snprintf(extra + el, sizeof extra - (size_t)el, ",\"tap_cost\":%.4f",
                       1.0 - med / base);
      snprintf(extra + el, sizeof extra - (size_t)el,
               ",\"tap_published\":%llu,\"tap_dropped\":%llu,\"tap_seen\":%llu",
               (unsigned long long)published, (unsigned long long)dropped,
               (unsigned long long)seen);
    }
    sc_bench_add(bc->b, "messages.rate", params, "msg/s", rate[tap], bc->runs, extra);
  }

  r->rtt_us = samples;
  for (int tap = bc->tap_first; tap <= bc->tap_last && rc == 0; tap++) {
    if ((rc = tap_set(cr, tap)) != 0 ||
        (rc = drive(cr, drv, r, STEP_ECHO, (uint64_t)bc->rtts)) != 0)
      break;
    const double p50 = sc_bench_percentile(samples, bc->rtts, 50);
    bc->p50[tap] = p50;
    case_params(params, sizeof params, bc->transport, tap, bc->payload);
    const int el = snprintf(extra, sizeof extra, "\"p99\":%.3f,\"vs_zmq\":%.3f,\"spin_us\":%d",
                            sc_bench_percentile(samples, bc->rtts, 99), p50 / bc->zp50,
                            (int)cr->c.spin_us);
    put_vs_plain(extra, sizeof extra, el, p50, bc->plain_p50 ? &bc->plain_p50[tap] : NULL);
    sc_bench_add(bc->b, "messages.rtt", params, "us", samples, bc->rtts, extra);
  }
  sc_node_stop_actor(cr->node, drv, 0);
  usleep(10000);
  return rc;
}

/* Raw ZeroMQ's numbers for one transport and payload: the medians the runtime's cases
 * are compared with. */
typedef struct zmq_ref {
  double rate, p50;
} zmq_ref;

/* The raw baseline's endpoint: inproc, an ipc file in a new folder (dir, a mkdtemp
 * template; *made says the caller must remove it), or a free loopback port. */
static int zmq_endpoint(const transport *tr, char *ep, size_t len, char *dir, bool *made) {
  if (!tr->procs2) {
    snprintf(ep, len, "inproc://zb");
    return 0;
  }
  if (!tr->tcp) {
    if (mkdtemp(dir) == NULL) return SC_ESYS;
    *made = true;
    snprintf(ep, len, "ipc://%s/s", dir);
    return 0;
  }
  sc_cluster tmp;
  const int rc = sc_cluster_local(1, NULL, &tmp, NULL);
  if (rc == 0) snprintf(ep, len, "%s", tmp.nodes[0].endpoint);
  sc_cluster_free(&tmp);
  return rc;
}

/* Raw ZeroMQ over transport t at one payload: zmq.rate and zmq.rtt into b, their medians
 * into *out. plain: plain tcp's, for tcp+curve's vs_plain_tcp (NULL otherwise). */
static int measure_zmq(sc_bench *b, int t, int p, int runs, int rtts, double *samples,
                       const zmq_ref *plain, zmq_ref *out) {
  const transport *tr = &k_transports[t];
  const size_t size = encoded_ping_size(k_payloads[p]);
  const int procs = tr->procs2 ? 2 : 1;
  char ep[SC_ENDPOINT_MAX], dir[] = "/tmp/sc-zb-XXXXXX", params[256], extra[256];
  bool made_dir = false;
  int rc = zmq_endpoint(tr, ep, sizeof ep, dir, &made_dir);
  const uint64_t n = b->quick ? 100000 : (t == 0 ? 4000000 : 1000000);
  for (int r = 0; r < runs && rc == 0; r++) rc = zmq_rate(ep, tr, size, n, &samples[r]);
  case_params(params, sizeof params, t, false, k_payloads[p]);
  if (rc == 0) {
    out->rate = sc_bench_median(samples, runs);
    const int el = snprintf(extra, sizeof extra, "\"bytes\":%zu,\"procs\":%d", size, procs);
    put_vs_plain(extra, sizeof extra, el, out->rate, plain ? &plain->rate : NULL);
    sc_bench_add(b, "zmq.rate", params, "msg/s", samples, runs, extra);
    rc = zmq_rtt(ep, tr, size, (uint64_t)rtts, samples);
  }
  if (rc == 0) {
    out->p50 = sc_bench_percentile(samples, rtts, 50);
    const int el = snprintf(extra, sizeof extra, "\"p99\":%.3f,\"bytes\":%zu,\"procs\":%d",
                            sc_bench_percentile(samples, rtts, 99), size, procs);
    put_vs_plain(extra, sizeof extra, el, out->p50, plain ? &plain->p50 : NULL);
    sc_bench_add(b, "zmq.rtt", params, "us", samples, rtts, extra);
  }
  if (rc != 0)
    fprintf(stderr, "bench messages: raw ZeroMQ over %s failed: %s\n", tr->name, sc_strerror(rc));
  if (made_dir) {
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0 && rc == 0) rc = SC_EIO;
  }
  return rc;
}

int sc_bench_messages(sc_bench *b) {
  bool skip[NT];
  int32_t spin_us;
  int taps[2];
  int rc = env_choices(skip, &spin_us, taps);
  if (rc != 0) return rc;
  const int runs = b->quick ? 1 : RUNS_MAX;
  const int rtts = b->quick ? 2000 : 20000;
  zmq_ref zref[NT][NP] = {{{0}}};
  /* the runtime's medians by transport, payload and tap; 0 where not measured */
  double rate_med[NT][NP][2] = {{{0}}}, p50[NT][NP][2] = {{{0}}};
  double *samples = malloc(sizeof(double) * (size_t)(rtts > runs ? rtts : runs));
  if (samples == NULL) return SC_ENOMEM;
  signal(SIGPIPE, SIG_IGN);
  signal(SIGCHLD, SIG_DFL); /* a caller's SIG_IGN would reap our children behind waitpid */

  /* raw ZeroMQ first, same sizes; across processes the server is a forked child */
  for (int t = 0; t < NT && rc == 0; t++)
    for (int p = 0; p < NP && rc == 0 && !skip[t]; p++)
      rc = measure_zmq(b, t, p, runs, rtts, samples,
                       k_transports[t].curve && !skip[T_TCP] ? &zref[T_TCP][p] : NULL,
                       &zref[t][p]);

  for (int t = 0; t < NT && rc == 0; t++) {
    if (skip[t]) continue;
    cluster_run cr;
    if ((rc = cluster_up(&cr, &k_transports[t], spin_us)) != 0)
      fprintf(stderr, "bench messages: cannot start the %s cluster: %s\n",
              k_transports[t].name, sc_strerror(rc));
    const bool vs_plain = k_transports[t].curve && !skip[T_TCP];
    for (int p = 0; p < NP && rc == 0; p++) {
      const bench_case bc = {.b = b, .cr = &cr, .transport = t, .payload = k_payloads[p],
                             .runs = runs, .rtts = rtts,
                             .tap_first = taps[0], .tap_last = taps[1],
                             .n = b->quick ? 100000 : (t == 0 ? 2000000 : 1000000),
                             .zrate = zref[t][p].rate, .zp50 = zref[t][p].p50,
                             .rate_med = rate_med[t][p], .p50 = p50[t][p],
                             .plain_rate = vs_plain ? rate_med[T_TCP][p] : NULL,
                             .plain_p50 = vs_plain ? p50[T_TCP][p] : NULL};
      rc = measure_case(&bc, samples);
    }
    cluster_down(&cr);
  }
  free(samples);
  return rc;
}
