/* test_runtime_procs.c - the runtime's acceptance tests with real processes: this test
 * process is node 0 of a cluster whose other ranks are `sparsecp node` children (or the
 * nodes of `sparsecp launch`). Every test kills and reaps every process it starts. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/runtime/sc_node.h"
#include "actors/runtime/sc_pack.h"
#include "actors/runtime/sc_tap_record.h"
#include "base/clock.h"
#include "model/step_prof.h"
#include "tests/common/sc_test_proc.h"

/* launch starts pipeline nodes; the small model keeps their start-up quick */
#define SMALL_MODEL SC_SOURCE_DIR "/examples/model-small.json"

/* ---- child processes with a readable stdout ---- */

typedef struct proc {
  pid_t pid;
  int out;          /* read end of its stdout */
  char buf[65536];
  size_t len;
} proc;

static void proc_start(proc *p, char *const argv[]) {
  p->pid = sc_test_spawn(SPARSECP_BIN, argv, NULL, &p->out);
  p->len = 0;
}

/* Reads until a line containing all of the needles arrives; returns that line (in a
 * static buffer) or NULL on timeout/EOF. */
static const char *proc_expect(proc *p, const char *n1, const char *n2, int timeout_ms) {
  static char line[4096];
  const uint64_t until = sc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  for (;;) {
    while (sc_test_take_line(p->buf, &p->len, line, sizeof line))
      if (strstr(line, n1) && (n2 == NULL || strstr(line, n2))) return line;
    const int64_t left = (int64_t)(until - sc_now_ns()) / 1000000;
    if (sc_now_ns() >= until) return NULL;
    struct pollfd pf = {.fd = p->out, .events = POLLIN};
    if (poll(&pf, 1, (int)(left > 0 ? left : 1)) <= 0) continue;
    const ssize_t got = read(p->out, p->buf + p->len, sizeof p->buf - p->len - 1);
    if (got <= 0) return NULL;
    p->len += (size_t)got;
  }
}

/* Waits for exit up to timeout_ms; then SIGKILL. Returns the wait status. */
static int proc_reap(proc *p, int timeout_ms) {
  int status = 0;
  const uint64_t until = sc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (waitpid(p->pid, &status, WNOHANG) == 0) {
    if (sc_now_ns() > until) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, &status, 0);
      status = -1;
      break;
    }
    usleep(2000);
  }
  if (p->out >= 0) close(p->out);
  p->out = -1;
  p->pid = 0;
  return status;
}

/* Reaps p and checks that it exited with code within limit_ms of t0 (what: for the
 * message). */
static void expect_exit(proc *p, int code, uint64_t t0, double limit_ms, const char *what) {
  const int status = proc_reap(p, (int)limit_ms + 1000);
  const double ms = (double)(sc_now_ns() - t0) / 1e6;
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == code, "%s: status %d, expected exit %d",
            what, status, code);
  cr_assert_lt(ms, limit_ms, "%s after %.0f ms", what, ms);
}

/* ---- a cluster: this process = rank 0, children = ranks 1..n-1 ---- */

typedef struct cluster {
  char dir[64], path[128];
  sc_cluster c;
  sc_node *node;
  proc kids[4];
  int n;
} cluster;

/* A cluster on tcp as the cluster file requires it: a CURVE key pair per node, each
 * secret in its own file; no taps (a tcp tap needs a subscriber list: tested in
 * tests/security). */
static void cluster_keys(cluster *cl) {
  for (int r = 0; r < cl->n; r++) {
    sc_cluster_node *nd = &cl->c.nodes[r];
    char pub[41], sec[41];
    cr_assert_eq(zmq_curve_keypair(pub, sec), 0);
    cr_assert_not_null(zmq_z85_decode(nd->public_key, pub));
    nd->has_key = true;
    nd->tap[0] = '\0';
    snprintf(nd->key_file, sizeof nd->key_file, "%s/node-%d.key", cl->dir, r);
    FILE *f = fopen(nd->key_file, "w");
    cr_assert_not_null(f);
    cr_assert_eq(chmod(nd->key_file, 0600), 0); /* a secret key file must be private */
    fprintf(f, "%s\n", sec);
    fclose(f);
  }
  cl->c.curve = true;
}

/* Writes an n-node local cluster file into a new folder (cl->dir, cl->path). */
static void cluster_file(cluster *cl, int n, bool tcp, int hb_ms, int hb_timeout_ms) {
  memset(cl, 0, sizeof *cl);
  cl->n = n;
  snprintf(cl->dir, sizeof cl->dir, "/tmp/sc-it-XXXXXX");
  cr_assert_not_null(mkdtemp(cl->dir));
  sc_diag d = {0};
  cr_assert_eq(sc_cluster_local(n, tcp ? NULL : cl->dir, &cl->c, &d), 0);
  if (tcp) cluster_keys(cl);
  cl->c.heartbeat_ms = hb_ms;
  cl->c.heartbeat_timeout_ms = hb_timeout_ms;
  snprintf(cl->path, sizeof cl->path, "%s/cluster.json", cl->dir);
  char *json = NULL;
  cr_assert_eq(sc_cluster_to_json(&cl->c, &json), 0);
  FILE *f = fopen(cl->path, "w");
  cr_assert_not_null(f);
  fputs(json, f);
  fclose(f);
  free(json);
}

/* `sparsecp node --events` for rank r of cl, as a child. */
static void node_start(cluster *cl, int r) {
  char rank[16];
  snprintf(rank, sizeof rank, "%d", r);
  char *argv[] = {"sparsecp", "node", "--cluster", cl->path, "--rank", rank, "--events", NULL};
  proc_start(&cl->kids[r], argv);
}

static void cluster_up(cluster *cl, int n, bool tcp, int hb_ms, int hb_timeout_ms) {
  cluster_file(cl, n, tcp, hb_ms, hb_timeout_ms);
  for (int r = 1; r < n; r++) node_start(cl, r);
  sc_diag d = {0};
  sc_node_opts o;
  sc_node_opts_default(&o);
  o.cluster = &cl->c;
  o.rank = 0;
  o.loops = 2;
  cr_assert_eq(sc_node_create(&o, &cl->node, &d), 0, "%s", sc_diag_message(&d));
  cr_assert_eq(sc_node_start(cl->node, &d), 0, "%s", sc_diag_message(&d));
  cr_assert_eq(sc_node_wait_ready(cl->node, 15000), 0, "the cluster did not become ready");
  for (int r = 1; r < n; r++)
    cr_assert_not_null(proc_expect(&cl->kids[r], "\"ready\"", NULL, 5000), "rank %d not ready", r);
}

static void cluster_down(cluster *cl) {
  if (cl->node) sc_node_broadcast_shutdown(cl->node, "test done");
  for (int r = 1; r < cl->n; r++)
    if (cl->kids[r].pid > 0) proc_reap(&cl->kids[r], 5000);
  sc_node_destroy(cl->node);
  sc_cluster_free(&cl->c);
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cl->dir);
  cr_assert_eq(system(cmd), 0);
}

/* ---- a driver actor: streams pings to a target with a window, checks the pongs ---- */

typedef struct job {
  sc_actor_id target;
  uint64_t total, window;
  _Atomic int done;
  _Atomic int errors;
  _Atomic int rc;
  _Atomic uint64_t received;
  _Atomic int down_node;
  _Atomic int64_t down_at_ms;
} job;

typedef struct driver {
  job *j;
  uint64_t sent, next_pong;
} driver;

static int drv_init(sc_ctx *ctx, void *st, const void *arg) {
  ((driver *)st)->j = *(job *const *)arg;
  return 0;
}

static int drv_pump(sc_ctx *ctx, driver *d) {
  job *j = d->j;
  while (d->sent < j->total && d->sent - d->next_pong < j->window) {
    sc_msg_ping *p = sc_msg_body_new(SC_MSG_PING);
    p->seq = d->sent;
    const int rc = sc_send(ctx, j->target, SC_MSG_PING, p);
    if (rc != 0) {
      sc_msg_body_destroy(SC_MSG_PING, p);
      if (rc == SC_EFULL && d->sent > d->next_pong) return 0; /* pongs will resume us */
      atomic_store(&j->rc, rc);
      atomic_store(&j->done, 1);
      return 0;
    }
    d->sent++;
  }
  return 0;
}

static int drv_on_ping(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  return drv_pump(ctx, sc_state(ctx));
}

static int drv_on_pong(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  driver *d = sc_state(ctx);
  const sc_msg_pong *q = body;
  if (q->seq != d->next_pong) atomic_fetch_add(&d->j->errors, 1);
  d->next_pong = q->seq + 1;
  atomic_fetch_add(&d->j->received, 1);
  if (d->next_pong == d->j->total) {
    atomic_store(&d->j->done, 1);
    return 0;
  }
  return drv_pump(ctx, d);
}

static int drv_on_down(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  driver *d = sc_state(ctx);
  const sc_msg_down *m = body;
  atomic_store(&d->j->down_at_ms, (int64_t)(sc_now_ns() / 1000000));
  atomic_store(&d->j->down_node, m->node);
  return 0;
}

static const sc_actor_spec k_driver = {
    .name = "driver", .state_size = sizeof(driver), .init = drv_init,
    .handlers = {[SC_MSG_PING] = drv_on_ping, [SC_MSG_PONG] = drv_on_pong,
                 [SC_MSG_DOWN] = drv_on_down},
    .mailbox_cap = 1u << 20, .loop = 1};

static bool wait_flag(_Atomic int *f, int ms) {
  const uint64_t until = sc_now_ns() + (uint64_t)ms * 1000000ull;
  while (!atomic_load(f)) {
    if (sc_now_ns() > until) return false;
    usleep(1000);
  }
  return true;
}

static sc_actor_id start_driver(cluster *cl, job *j) {
  job *pj = j;
  sc_actor_id id;
  cr_assert_eq(sc_spawn(cl->node, &k_driver, &pj, sizeof pj, &id), 0);
  sc_envelope env = {.type = SC_MSG_PING, .dst = id};
  sc_msg_ping *p = sc_msg_body_new(SC_MSG_PING);
  cr_assert_eq(sc_node_send(cl->node, &env, p), 0);
  return id;
}

/* ---- tests ---- */

Test(procs, cross_process_ping_pong_fifo_one_million_messages, .timeout = 120) {
  cluster cl;
  cluster_up(&cl, 2, false, 200, 5000); /* generous: a loaded 2-core CI box under ASan */
  job j = {.total = 1000000, .window = 20000};
  cr_assert_eq(sc_node_resolve(cl.node, "node@1", &j.target), 0);
  const uint64_t t0 = sc_now_ns();
  start_driver(&cl, &j);
  if (!wait_flag(&j.done, 90000)) {
    sc_node_stats st;
    sc_node_get_stats(cl.node, &st);
    cr_assert_fail("only %llu of 1000000 pongs arrived (sent %llu, received %llu, dropped %llu, "
                   "undeliverable %llu, node 1 down %d)",
                   (unsigned long long)atomic_load(&j.received),
                   (unsigned long long)st.remote_sent, (unsigned long long)st.remote_recv,
                   (unsigned long long)st.mailbox_dropped, (unsigned long long)st.undeliverable,
                   (int)sc_node_peer_down(cl.node, 1));
  }
  const double secs = (double)(sc_now_ns() - t0) * 1e-9;
  cr_assert_eq(atomic_load(&j.rc), 0, "send failed: %s", sc_strerror(atomic_load(&j.rc)));
  cr_assert_eq(atomic_load(&j.errors), 0, "pongs out of order, lost or duplicated");
  usleep(50000);
  cr_assert_eq(atomic_load(&j.received), 1000000u, "duplicates arrived");
  sc_node_stats st;
  sc_node_get_stats(cl.node, &st);
  cr_assert_eq(st.mailbox_dropped, 0u);
  cr_assert_eq(st.undeliverable, 0u);
  cr_log_info("1M pings + 1M pongs across processes in %.2f s", secs);
  cluster_down(&cl);
}

Test(procs, cross_process_ping_pong_over_tcp, .timeout = 60) {
  cluster cl;
  cluster_up(&cl, 2, true, 200, 2000);
  job j = {.total = 5000, .window = 1};
  cr_assert_eq(sc_node_resolve(cl.node, "node@1", &j.target), 0);
  start_driver(&cl, &j);
  cr_assert(wait_flag(&j.done, 30000));
  cr_assert_eq(atomic_load(&j.errors), 0);
  cr_assert_eq(atomic_load(&j.received), 5000u);
  cluster_down(&cl);
}

/* request / reply across processes, and a timeout when the peer never answers */
typedef struct req_state {
  _Atomic int done, rc;
  job *j;
} req_state;
static req_state g_req;
static void on_reply(sc_ctx *ctx, void *ud, int rc, const sc_envelope *env, const void *body) {
  atomic_store(&g_req.rc, rc == 0 && env->type == SC_MSG_PONG ? 0 : (rc ? rc : SC_EPROTO));
  atomic_store(&g_req.done, 1);
}
static int requester_on_ping(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  const sc_msg_ping *p = body;
  sc_actor_id node1;
  sc_node_resolve(sc_ctx_node(ctx), "node@1", &node1);
  /* seq 1: a ping (answered); seq 2: client_cancel, which the node actor ignores */
  const int type = p->seq == 1 ? SC_MSG_PING : SC_MSG_CLIENT_CANCEL;
  void *b = sc_msg_body_new(type);
  const int rc = sc_request(ctx, node1, type, b, 300, on_reply, NULL);
  if (rc != 0) {
    sc_msg_body_destroy(type, b);
    atomic_store(&g_req.rc, rc);
    atomic_store(&g_req.done, 1);
  }
  return 0;
}
static const sc_actor_spec k_requester = {.name = "requester",
                                          .handlers = {[SC_MSG_PING] = requester_on_ping}};

Test(procs, request_reply_and_timeout_across_processes, .timeout = 60) {
  cluster cl;
  cluster_up(&cl, 2, false, 200, 2000);
  sc_actor_id r;
  cr_assert_eq(sc_spawn(cl.node, &k_requester, NULL, 0, &r), 0);
  for (uint64_t seq = 1; seq <= 2; seq++) {
    atomic_store(&g_req.done, 0);
    atomic_store(&g_req.rc, 1);
    sc_envelope env = {.type = SC_MSG_PING, .dst = r};
    sc_msg_ping *p = sc_msg_body_new(SC_MSG_PING);
    p->seq = seq;
    const uint64_t t0 = sc_now_ns();
    cr_assert_eq(sc_node_send(cl.node, &env, p), 0);
    cr_assert(wait_flag(&g_req.done, 5000));
    const double ms = (double)(sc_now_ns() - t0) / 1e6;
    if (seq == 1) {
      cr_assert_eq(atomic_load(&g_req.rc), 0, "rc %d", atomic_load(&g_req.rc));
    } else {
      cr_assert_eq(atomic_load(&g_req.rc), SC_ETIMEDOUT);
      cr_assert(ms >= 290 && ms < 3000, "timed out after %.0f ms (deadline 300)", ms);
    }
  }
  cluster_down(&cl);
}

static int monitor_init(sc_ctx *ctx, void *st, const void *arg) {
  *(job **)st = *(job *const *)arg;
  return sc_monitor_node(ctx, 2);
}
static int monitor_on_down(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  job *j = *(job **)sc_state(ctx);
  atomic_store(&j->down_at_ms, (int64_t)(sc_now_ns() / 1000000));
  atomic_store(&j->down_node, ((const sc_msg_down *)body)->node);
  atomic_store(&j->done, 1);
  return 0;
}
static const sc_actor_spec k_monitor = {.name = "monitor", .state_size = sizeof(job *),
                                        .init = monitor_init,
                                        .handlers = {[SC_MSG_DOWN] = monitor_on_down}};

static void down_case(int sig, int hb_timeout_ms, int max_ms) {
  cluster cl;
  cluster_up(&cl, 3, false, 100, hb_timeout_ms);
  job j = {.down_node = -1};
  job *pj = &j;
  sc_actor_id m;
  cr_assert_eq(sc_spawn(cl.node, &k_monitor, &pj, sizeof pj, &m), 0);
  /* no pause: ready means every node has reached every other (a node says hello once
   * its DEALER to each peer connected), so ranks 1 and 2 already watch each other. When
   * ready meant less, a kill 50 ms after it went unseen by rank 1 in 1 run of 6 (ASan
   * build, other tests beside it): rank 1 had not connected to rank 2 yet. */
  const uint64_t t0 = sc_now_ns();
  kill(cl.kids[2].pid, sig);
  cr_assert(wait_flag(&j.done, max_ms + 2000), "no DOWN for node 2 after %d ms", max_ms + 2000);
  const double ms = (double)(atomic_load(&j.down_at_ms) - (int64_t)(t0 / 1000000));
  cr_assert_eq(atomic_load(&j.down_node), 2);
  cr_assert(ms <= max_ms, "DOWN after %.0f ms (limit %d)", ms, max_ms);
  cr_log_info("signal %d: DOWN after %.0f ms", sig, ms);
  /* the other child saw it too */
  cr_assert_not_null(proc_expect(&cl.kids[1], "\"down\"", "\"rank\":2", max_ms + 2000),
                     "rank 1 did not report node 2 down");
  kill(cl.kids[2].pid, SIGKILL);
  proc_reap(&cl.kids[2], 2000);
  cluster_down(&cl);
}

Test(procs, sigkill_gives_down_on_the_others, .timeout = 60) { down_case(SIGKILL, 1000, 1000); }

/* A stopped process keeps its sockets open: only the heartbeats can find it. */
Test(procs, a_hung_node_is_down_after_the_heartbeat_timeout, .timeout = 60) {
  down_case(SIGSTOP, 600, 600 + 900);
}

static bool pid_gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

/* Gone, or a zombie: dead, but waiting for a parent that is not us (after launch itself
 * dies its nodes are re-parented, and when the new parent reaps them is up to it; some
 * container inits never do). */
static bool pid_dead(pid_t pid) {
  if (pid_gone(pid)) return true;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return pid_gone(pid);
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *close_paren = strrchr(buf, ')'); /* the name may hold spaces and parens */
  return close_paren != NULL && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

static int parse_pids(const char *line, pid_t *pids, int max) {
  const char *p = strstr(line, "\"pids\":[");
  if (p == NULL) return 0;
  p += 8;
  int n = 0;
  while (n < max && *p && *p != ']') {
    pids[n++] = (pid_t)strtol(p, (char **)&p, 10);
    if (*p == ',') p++;
  }
  return n;
}

/* A node says hello only once it has reached every other node, so one whose peers never
 * start waits for the cluster: SIGTERM must still stop it at once, cleanly. */
Test(procs, a_node_waiting_for_its_cluster_stops_on_sigterm, .timeout = 60) {
  cluster cl;
  cluster_file(&cl, 2, false, 100, 1000);
  node_start(&cl, 1); /* rank 0 never starts */
  usleep(300000);
  const uint64_t t0 = sc_now_ns();
  kill(cl.kids[1].pid, SIGTERM);
  cr_assert_not_null(proc_expect(&cl.kids[1], "\"stopped\"", NULL, 3000),
                     "no stopped event after SIGTERM");
  expect_exit(&cl.kids[1], 0, t0, 2000.0, "stopped on SIGTERM");
  cluster_down(&cl);
}

/* A node that dies before the cluster is ready: the nodes that had reached it give up at
 * once (it will never say hello) instead of waiting out --ready-timeout. */
Test(procs, a_node_gone_before_ready_ends_the_wait_of_the_others, .timeout = 60) {
  cluster cl;
  cluster_file(&cl, 3, false, 100, 1000);
  node_start(&cl, 0);
  node_start(&cl, 2); /* rank 1 never starts, so the cluster cannot become ready */
  usleep(1000000);    /* ranks 0 and 2 reach each other (ZeroMQ retries every 50 ms) */
  const uint64_t t0 = sc_now_ns();
  kill(cl.kids[2].pid, SIGKILL);
  proc_reap(&cl.kids[2], 2000);
  expect_exit(&cl.kids[0], 1, t0, 4000.0, "rank 0 gave up after rank 2 died");
  cluster_down(&cl);
}

Test(procs, launch_reports_a_dead_node_and_leaves_nothing, .timeout = 60) {
  proc l;
  char *argv[] = {"sparsecp", "launch", "--pcp", "3", "--dcp", "1", "--events", "--model", SMALL_MODEL,
                  "--heartbeat-ms", "100", "--heartbeat-timeout-ms", "500", "--grace-ms", "800",
                  "--restarts", "0", NULL}; /* (with restarts: recovery_cli.sh) */
  proc_start(&l, argv);
  const char *line = proc_expect(&l, "\"launched\"", NULL, 10000);
  cr_assert_not_null(line);
  pid_t pids[3];
  cr_assert_eq(parse_pids(line, pids, 3), 3);
  for (int r = 0; r < 3; r++) cr_assert_not_null(proc_expect(&l, "\"ready\"", NULL, 10000));
  kill(pids[2], SIGKILL);
  /* A node's DOWN line for rank 2 and launch's own {"event":"exited","rank":2,...} report
   * come in either order; read lines until both have been seen. */
  char exited_pid[32];
  snprintf(exited_pid, sizeof exited_pid, "\"pid\":%d,", (int)pids[2]);
  bool saw_down = false, saw_exited = false;
  const uint64_t until = sc_now_ns() + 3000ull * 1000000ull;
  while (!(saw_down && saw_exited) && sc_now_ns() < until) {
    const int64_t left = (int64_t)(until - sc_now_ns()) / 1000000;
    const char *got = proc_expect(&l, "\"rank\":2", NULL, (int)(left > 0 ? left : 1));
    if (got == NULL) break;
    if (strstr(got, "\"event\":\"down\"")) saw_down = true;
    if (strstr(got, "\"event\":\"exited\"")) {
      cr_assert(strstr(got, exited_pid) && strstr(got, "\"signal\":9"),
                "launch's exit report for rank 2 is wrong: %s", got);
      saw_exited = true;
    }
  }
  cr_assert(saw_down, "no node reported DOWN for rank 2");
  cr_assert(saw_exited, "launch did not report rank 2 exited");
  const int status = proc_reap(&l, 10000);
  cr_assert(status != -1, "launch did not exit by itself");
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "launch status %d", status);
  for (int r = 0; r < 3; r++) cr_assert(pid_gone(pids[r]), "node %d (pid %d) left behind", r, pids[r]);
}

/* Starts a 4-node launch (P x T; DCP reuses the PCP ranks) and waits until every node is
 * ready. Fills the node pids and, when dir is not NULL, the cluster's folder. */
static void start_launch_4(proc *l, pid_t pids[4], char *dir, size_t dir_len) {
  char *argv[] = {"sparsecp", "launch", "--pcp", "2", "--dcp", "2", "--tp", "2", "--events",
                  "--model", SMALL_MODEL, NULL};
  proc_start(l, argv);
  const char *line = proc_expect(l, "\"launched\"", NULL, 10000);
  cr_assert_not_null(line);
  cr_assert_eq(parse_pids(line, pids, 4), 4);
  if (dir != NULL) {
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%%%zu[^\"]", dir_len - 1);
    dir[0] = '\0';
    const char *cf = strstr(line, "\"cluster\":\"");
    if (cf != NULL) sscanf(cf + 11, fmt, dir);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) *slash = '\0';
  }
  for (int r = 0; r < 4; r++) cr_assert_not_null(proc_expect(l, "\"ready\"", NULL, 10000));
}

Test(procs, launch_stops_everything_on_sigterm, .timeout = 60) {
  proc l;
  pid_t pids[4];
  start_launch_4(&l, pids, NULL, 0);
  kill(l.pid, SIGTERM);
  const int status = proc_reap(&l, 10000);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "launch status %d", status);
  for (int r = 0; r < 4; r++) cr_assert(pid_gone(pids[r]), "node %d (pid %d) left behind", r, pids[r]);
}

/* Children carry PR_SET_PDEATHSIG (SIGKILL), so a launch killed outright, which can stop
 * nothing itself, still leaves no node behind. */
Test(procs, a_killed_launch_leaves_no_node, .timeout = 60) {
  proc l;
  pid_t pids[4];
  /* launch cannot remove its cluster directory when killed; the test does, afterwards */
  char dir[256];
  start_launch_4(&l, pids, dir, sizeof dir);
  kill(l.pid, SIGKILL);
  const int status = proc_reap(&l, 5000);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "launch status %d", status);
  /* the nodes are not our children (launch's death re-parents them): poll for each to be
   * dead, whether or not its new parent has reaped it yet */
  const uint64_t until = sc_now_ns() + 5000ull * 1000000ull;
  bool all_dead = false;
  while (!all_dead && sc_now_ns() < until) {
    all_dead = true;
    for (int r = 0; r < 4; r++) all_dead = all_dead && pid_dead(pids[r]);
    if (!all_dead) usleep(10000);
  }
  for (int r = 0; r < 4; r++) cr_assert(pid_dead(pids[r]), "node %d (pid %d) left running", r, pids[r]);
  if (strstr(dir, "/sparsecp-run-") != NULL) {
    DIR *d = opendir(dir);
    if (d != NULL) {
      const struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
      }
      closedir(d);
    }
    cr_expect_eq(rmdir(dir), 0, "cannot remove %s", dir);
  }
}

Test(procs, tap_sees_filtered_messages_in_order, .timeout = 60) {
  cluster cl;
  cluster_up(&cl, 2, false, 200, 2000);
  char filter[] = "1/node/ping";
  char *argv[] = {"sparsecp", "tap", "--connect", cl.c.nodes[1].tap, "--filter", filter,
                  "--json", "--count", "200", NULL};
  proc t;
  proc_start(&t, argv);
  /* stream pings (one in flight at a time) until the tap has what it asked for */
  job j = {.total = 1u << 30, .window = 1};
  cr_assert_eq(sc_node_resolve(cl.node, "node@1", &j.target), 0);
  sc_actor_id drv = start_driver(&cl, &j);
  int64_t prev = -1;
  int lines = 0;
  for (; lines < 200; lines++) {
    const char *line = proc_expect(&t, "\"topic\":\"1/node/ping\"", NULL, 10000);
    cr_assert_not_null(line, "the tap printed %d of 200 lines", lines);
    cr_assert(strstr(line, "\"type\":\"ping\""), "%s", line);
    /* body.seq is the driver's counter; the envelope seq is 0 */
    const char *b = strstr(line, "\"body\":{\"seq\":");
    cr_assert_not_null(b, "%s", line);
    const int64_t seq = strtoll(b + 14, NULL, 10);
    if (prev >= 0) cr_assert_eq(seq, prev + 1, "tap out of order: %lld after %lld", (long long)seq, (long long)prev);
    prev = seq;
  }
  const int status = proc_reap(&t, 5000);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  sc_node_stop_actor(cl.node, drv, 0);
  cluster_down(&cl);
}

/* ---- tap outputs: --record and --perfetto files are usable ---- */

#include <jansson.h>

static void stream_pings_until_exit(cluster *cl, proc *t, job *j) {
  cr_assert_eq(sc_node_resolve(cl->node, "node@1", &j->target), 0);
  sc_actor_id drv = start_driver(cl, j);
  const int status = proc_reap(t, 15000);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tap status %d", status);
  sc_node_stop_actor(cl->node, drv, 0);
}

Test(procs, tap_record_and_perfetto_files, .timeout = 60) {
  cluster cl;
  cluster_up(&cl, 2, false, 200, 2000);
  /* the drivers read their job until the node stops: keep both alive until then */
  job j1 = {.total = 1u << 30, .window = 1}, j2 = {.total = 1u << 30, .window = 1};
  char rec[160], trace[160];
  snprintf(rec, sizeof rec, "%s/rec.bin", cl.dir);
  snprintf(trace, sizeof trace, "%s/trace.json", cl.dir);
  {
    char *argv[] = {"sparsecp", "tap", "--connect", cl.c.nodes[1].tap, "--record", rec,
                    "--count", "300", NULL};
    proc t;
    proc_start(&t, argv);
    stream_pings_until_exit(&cl, &t, &j1);
  }
  /* the record file: [u32 len][tap_record]..., each holding an encoded ping or pong */
  FILE *f = fopen(rec, "rb");
  cr_assert_not_null(f);
  int n = 0;
  uint32_t len;
  while (fread(&len, 4, 1, f) == 1) {
    uint8_t *buf = malloc(len);
    cr_assert_eq(fread(buf, 1, len, f), len);
    sc_envelope env, inner;
    void *body = NULL, *ib = NULL;
    cr_assert_eq(sc_msg_decode(buf, len, &env, &body, NULL), 0);
    cr_assert_eq(env.type, SC_MSG_TAP_RECORD);
    const sc_msg_tap_record *tr = body;
    cr_assert_eq(tr->node, 1);
    cr_assert(strncmp(tr->topic, "1/", 2) == 0, "%s", tr->topic);
    cr_assert_eq(sc_msg_decode(tr->raw.data, tr->raw.len, &inner, &ib, NULL), 0);
    cr_assert(inner.type == SC_MSG_PING || inner.type == SC_MSG_NODE_READY, "type %d", inner.type);
    sc_msg_body_destroy(inner.type, ib);
    sc_msg_body_destroy(env.type, body);
    free(buf);
    n++;
  }
  fclose(f);
  cr_assert_eq(n, 300);
  {
    char *argv[] = {"sparsecp", "tap", "--connect", cl.c.nodes[1].tap, "--perfetto", trace,
                    "--count", "100", NULL};
    proc t;
    proc_start(&t, argv);
    stream_pings_until_exit(&cl, &t, &j2);
  }
  json_error_t err;
  json_t *root = json_load_file(trace, 0, &err);
  cr_assert_not_null(root, "trace is not JSON: %s", err.text);
  json_t *ev = json_object_get(root, "traceEvents");
  cr_assert(json_is_array(ev));
  int instants = 0, names = 0;
  for (size_t i = 0; i < json_array_size(ev); i++) {
    json_t *e = json_array_get(ev, i);
    const char *ph = json_string_value(json_object_get(e, "ph"));
    const char *name = json_string_value(json_object_get(e, "name"));
    if (ph && strcmp(ph, "i") == 0 && name && strcmp(name, "ping") == 0) instants++;
    if (ph && strcmp(ph, "M") == 0 && name && strcmp(name, "thread_name") == 0) names++;
  }
  cr_assert_eq(instants, 100);
  cr_assert_geq(names, 1); /* one track per actor: node@1 */
  json_decref(root);
  cluster_down(&cl);
}

/* ---- tap outputs, from a publisher in this process: what a tap must cope with ---- */

/* Waits until the XPUB has a new subscriber (a subscription message; the previous
 * tap's unsubscription may come first). */
static void await_subscriber(void *xpub) {
  const int timeo = 10000;
  zmq_setsockopt(xpub, ZMQ_RCVTIMEO, &timeo, sizeof timeo);
  uint8_t sub[64] = {0};
  while (sub[0] != 1)
    cr_assert_gt(zmq_recv(xpub, sub, sizeof sub, 0), 0, "the tap never subscribed");
}

/* Publishes one tap message: topic, then one record of a message (type, body, step) from
 * node at time ns. */
static void publish_msg(void *xpub, const char *topic, int32_t node, uint64_t ns, uint16_t type,
                        uint64_t step, const void *body) {
  sc_buf b;
  sc_buf_init(&b);
  cr_assert_eq(sc_buf_reserve(&b, SC_TAP_RECORD_HEADER), 0);
  b.len = SC_TAP_RECORD_HEADER;
  sc_envelope env = {.type = type, .src = {(uint16_t)node, 0, 1},
                     .dst = {(uint16_t)node, 0, 1}, .step = step};
  cr_assert_eq(sc_msg_encode_append(&env, body, &b), 0);
  sc_tap_record_put_header(b.data, ns, node, (uint32_t)(b.len - SC_TAP_RECORD_HEADER));
  cr_assert_eq(zmq_send(xpub, topic, strlen(topic), ZMQ_SNDMORE), (int)strlen(topic));
  cr_assert_eq(zmq_send(xpub, b.data, b.len, 0), (int)b.len);
  sc_buf_free(&b);
}

static void publish_ping(void *xpub, const char *topic, int32_t node, uint64_t ns) {
  const sc_msg_ping p = {.seq = ns};
  publish_msg(xpub, topic, node, ns, SC_MSG_PING, 0, &p);
}

Test(procs, tap_outputs_handle_late_records_and_failed_writes, .timeout = 60) {
  char dir[] = "/tmp/sc-tf-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char ep[96], trace[96], nowhere[96];
  snprintf(ep, sizeof ep, "ipc://%s/pub", dir);
  snprintf(trace, sizeof trace, "%s/trace.json", dir);
  snprintf(nowhere, sizeof nowhere, "%s/no/such/trace.json", dir);
  void *ctx = zmq_ctx_new(), *xpub = zmq_socket(ctx, ZMQ_XPUB);
  const int zero = 0;
  zmq_setsockopt(xpub, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_bind(xpub, ep), 0);
  proc t;
  /* a --perfetto file that cannot be written is said at once, not after the capture */
  {
    char *argv[] = {"sparsecp", "tap", "--connect", ep, "--perfetto", nowhere,
                    "--duration", "30", NULL};
    proc_start(&t, argv);
    const int status = proc_reap(&t, 5000);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "tap status %d", status);
  }
  /* records of two nodes reach a tap out of their time order (launch forwards every
   * node's tap): the trace's times start at the earliest record, and none is negative */
  {
    char *argv[] = {"sparsecp", "tap", "--connect", ep, "--perfetto", trace,
                    "--count", "2", NULL};
    proc_start(&t, argv);
    await_subscriber(xpub);
    publish_ping(xpub, "1/node/ping", 1, 5000000);
    publish_ping(xpub, "0/node/ping", 0, 2000000);
    const int status = proc_reap(&t, 10000);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tap status %d", status);
  }
  json_error_t err;
  json_t *root = json_load_file(trace, 0, &err);
  cr_assert_not_null(root, "trace is not JSON: %s", err.text);
  json_t *ev = json_object_get(root, "traceEvents");
  double ts[2] = {-1, -1};
  for (size_t i = 0; i < json_array_size(ev); i++) {
    json_t *e = json_array_get(ev, i);
    const char *ph = json_string_value(json_object_get(e, "ph"));
    if (ph == NULL || strcmp(ph, "i") != 0) continue;
    const json_int_t pid = json_integer_value(json_object_get(e, "pid"));
    cr_assert(pid == 0 || pid == 1);
    ts[pid] = json_number_value(json_object_get(e, "ts"));
  }
  json_decref(root);
  cr_assert_float_eq(ts[0], 0.0, 1e-9, "node 0's record, the earliest: ts %f", ts[0]);
  cr_assert_float_eq(ts[1], 3000.0, 1e-6, "node 1's record, 3 ms later: ts %f us", ts[1]);
  /* a --record file that fills up: the tap fails instead of exiting 0 with nothing */
  {
    char *argv[] = {"sparsecp", "tap", "--connect", ep, "--record", "/dev/full",
                    "--count", "1", NULL};
    proc_start(&t, argv);
    await_subscriber(xpub);
    publish_ping(xpub, "0/node/ping", 0, 1000);
    const int status = proc_reap(&t, 10000);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "tap status %d", status);
  }
  /* a profiled step's stage times (step_result.stage_ns) become a counter sample: the
   * step's milliseconds per stage, one series a stage; what its device ran
   * (step_result.device_ns) a second one, busy, span and idle before; its gap before
   * (step_result.gap_ns, here as if it had been overlapped) a third */
  {
    char *argv[] = {"sparsecp", "tap", "--connect", ep, "--perfetto", trace,
                    "--count", "1", NULL};
    proc_start(&t, argv);
    await_subscriber(xpub);
    int32_t sampled[1] = {5};
    float margin[1] = {1.0f};
    uint64_t stage_ns[6] = {50000, 2500000, 1250000, 750000, 0, 40000};
    uint64_t device_ns[SC_DEVICE_COUNT] = {3000000, 4500000, 98, 120000};
    sc_msg_step_result r = {.sampled = {sampled, 1}, .margin = {margin, 1}, .compute_ns = 4590000,
                            .stage_ns = {stage_ns, 6}, .device_ns = {device_ns, SC_DEVICE_COUNT},
                            .gap_ns = 23500};
    publish_msg(xpub, "0/executor/step_result", 0, 9000000, SC_MSG_STEP_RESULT, 7, &r);
    const int status = proc_reap(&t, 10000);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tap status %d", status);
  }
  root = json_load_file(trace, 0, &err);
  cr_assert_not_null(root, "trace is not JSON: %s", err.text);
  ev = json_object_get(root, "traceEvents");
  int stages = 0, devices = 0, gaps = 0;
  for (size_t i = 0; i < json_array_size(ev); i++) {
    json_t *e = json_array_get(ev, i);
    const char *ph = json_string_value(json_object_get(e, "ph"));
    if (ph == NULL || strcmp(ph, "C") != 0) continue;
    const char *name = json_string_value(json_object_get(e, "name"));
    json_t *args = json_object_get(e, "args");
    cr_assert_not_null(name);
    if (strcmp(name, "device gap us") == 0) {
      gaps++;
      cr_assert_float_eq(json_number_value(json_object_get(args, "gap")), 23.5, 1e-9);
      continue;
    }
    if (strcmp(name, "device ms") == 0) {
      devices++;
      cr_assert_float_eq(json_number_value(json_object_get(args, "busy")), 3.0, 1e-9);
      cr_assert_float_eq(json_number_value(json_object_get(args, "span")), 4.5, 1e-9);
      cr_assert_float_eq(json_number_value(json_object_get(args, "idle before")), 0.12, 1e-9);
      continue;
    }
    stages++;
    cr_assert_str_eq(name, "stage ms");
    cr_assert_float_eq(json_number_value(json_object_get(args, "dense")), 2.5, 1e-9);
    cr_assert_float_eq(json_number_value(json_object_get(args, "indexer")), 1.25, 1e-9);
    cr_assert_float_eq(json_number_value(json_object_get(args, "head")), 0.04, 1e-9);
  }
  json_decref(root);
  cr_assert_eq(stages, 1, "one counter sample of stages for the profiled step");
  cr_assert_eq(devices, 1, "one counter sample of its device activity");
  cr_assert_eq(gaps, 1, "one counter sample of its gap");
  zmq_close(xpub);
  zmq_ctx_term(ctx);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* ---- launch --tap forwards the taps of all nodes ---- */

Test(procs, launch_tap_forwards_every_node, .timeout = 60) {
  char dir[] = "/tmp/sc-lt-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char tap[96];
  snprintf(tap, sizeof tap, "ipc://%s/tap", dir);
  proc l;
  char *argv[] = {"sparsecp", "launch", "--pcp", "2", "--dcp", "1", "--events", "--tap", tap,
                  "--model", SMALL_MODEL, NULL};
  proc_start(&l, argv);
  const char *line = proc_expect(&l, "\"launched\"", NULL, 10000);
  cr_assert_not_null(line);
  char path[256];
  const char *c = strstr(line, "\"cluster\":\"");
  cr_assert_not_null(c);
  c += 11;
  snprintf(path, sizeof path, "%.*s", (int)(strchr(c, '"') - c), c);
  for (int r = 0; r < 2; r++) cr_assert_not_null(proc_expect(&l, "\"ready\"", NULL, 10000));
  sc_cluster cfg;
  cr_assert_eq(sc_cluster_load(path, &cfg, NULL), 0);
  /* subscribe through launch's forwarder to both nodes' pings */
  void *ctx = zmq_ctx_new(), *sub = zmq_socket(ctx, ZMQ_SUB);
  const int zero = 0, timeo = 200;
  zmq_setsockopt(sub, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(sub, ZMQ_RCVTIMEO, &timeo, sizeof timeo);
  zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "0/node/ping", 11);
  zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "1/node/ping", 11);
  cr_assert_eq(zmq_connect(sub, tap), 0);
  /* inject pings from outside the cluster: a DEALER into each node's ROUTER, named as a
   * loop of node 0 that no real DEALER uses ("n0.63": on ipc the routing id is the
   * sender, and the letters say node 0); the node actor answers toward node@0 (src),
   * which drops the pong */
  void *dl[2];
  for (int r = 0; r < 2; r++) {
    dl[r] = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(dl[r], ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(dl[r], ZMQ_ROUTING_ID, "n0.63", 5);
    cr_assert_eq(zmq_connect(dl[r], cfg.nodes[r].endpoint), 0);
  }
  bool seen[2] = {false, false};
  sc_buf b;
  sc_buf_init(&b);
  for (int round = 0; round < 100 && !(seen[0] && seen[1]); round++) {
    for (int r = 0; r < 2; r++) {
      sc_msg_ping p = {.seq = (uint64_t)round};
      sc_envelope env = {.type = SC_MSG_PING, .src = {0, 0, 1}, .dst = {(uint16_t)r, 0, 1}};
      b.len = 0;
      cr_assert_eq(sc_pack_append(&b, &env, &p), 0);
      zmq_send(dl[r], b.data, b.len, 0);
    }
    char topic[64];
    zmq_msg_t m;
    for (;;) {
      const int tl = zmq_recv(sub, topic, sizeof topic - 1, 0);
      if (tl < 0) break;
      topic[tl] = '\0';
      zmq_msg_init(&m);
      zmq_msg_recv(&m, sub, 0);
      zmq_msg_close(&m);
      if (strcmp(topic, "0/node/ping") == 0) seen[0] = true;
      if (strcmp(topic, "1/node/ping") == 0) seen[1] = true;
    }
  }
  sc_buf_free(&b);
  for (int r = 0; r < 2; r++) zmq_close(dl[r]);
  zmq_close(sub);
  zmq_ctx_term(ctx);
  sc_cluster_free(&cfg);
  kill(l.pid, SIGTERM);
  const int status = proc_reap(&l, 10000);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "launch status %d", status);
  cr_assert(seen[0] && seen[1], "forwarded taps: node 0 %d, node 1 %d", seen[0], seen[1]);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* ---- keygen, and a client endpoint that only CURVE clients with its key can use ---- */

/* The value of "key":"..." in a JSON line, into out. */
static void json_field(const char *line, const char *key, char *out, size_t len) {
  char needle[64];
  snprintf(needle, sizeof needle, "\"%s\":\"", key);
  const char *at = strstr(line, needle);
  cr_assert_not_null(at, "no %s in %s", key, line);
  at += strlen(needle);
  const char *end = strchr(at, '"');
  cr_assert_not_null(end);
  snprintf(out, len, "%.*s", (int)(end - at), at);
}

/* Runs `sparsecp submit` against endpoint (server_key NULL: without one); returns its
 * exit status and its JSON line in out. */
static int submit(const char *endpoint, const char *server_key, const char *timeout_s,
                  char *out, size_t len) {
  proc s;
  char *argv[] = {"sparsecp", "submit", "--connect", (char *)endpoint, "--prompt-len", "6",
                  "--max-tokens", "3", "--vocab", "64", "--json", "--timeout",
                  (char *)timeout_s, server_key ? "--server-key" : NULL, (char *)server_key,
                  NULL};
  proc_start(&s, argv);
  const char *line = proc_expect(&s, "\"tokens\"", NULL, 60000);
  snprintf(out, len, "%s", line ? line : "(no output)");
  const int status = proc_reap(&s, 10000);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(procs, a_curve_client_endpoint_serves_only_clients_with_its_key, .timeout = 120) {
  char dir[] = "/tmp/sc-key-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  proc k;
  char *kargv[] = {"sparsecp", "keygen", "--json", NULL};
  proc_start(&k, kargv);
  const char *kl = proc_expect(&k, "\"public\"", "\"secret\"", 10000);
  cr_assert_not_null(kl, "keygen printed no key pair");
  char pub[64], sec[64];
  json_field(kl, "public", pub, sizeof pub);
  json_field(kl, "secret", sec, sizeof sec);
  const int kst = proc_reap(&k, 5000);
  cr_assert(WIFEXITED(kst) && WEXITSTATUS(kst) == 0);
  cr_assert_eq(strlen(pub), 40u);
  cr_assert_eq(strlen(sec), 40u);
  cr_assert_str_neq(pub, sec);
  char key_file[96];
  snprintf(key_file, sizeof key_file, "%s/server.key", dir);
  FILE *f = fopen(key_file, "w");
  cr_assert_not_null(f);
  cr_assert_eq(chmod(key_file, 0600), 0); /* a secret key file must be private */
  fprintf(f, "%s\n", sec);
  fclose(f);

  proc l;
  char *argv[] = {"sparsecp", "launch", "--pcp", "1", "--dcp", "1", "--listen-key-file",
                  key_file, "--model", SMALL_MODEL, NULL};
  proc_start(&l, argv);
  const char *line = proc_expect(&l, "\"launched\"", NULL, 10000);
  cr_assert_not_null(line);
  char listen[256], server_key[64];
  json_field(line, "listen", listen, sizeof listen);
  json_field(line, "server_key", server_key, sizeof server_key);
  cr_assert_str_eq(server_key, pub, "launch derived another public key");

  char out[1024];
  cr_assert_eq(submit(listen, pub, "60", out, sizeof out), 0, "%s", out);
  cr_assert_null(strstr(out, "\"error\""), "%s", out);
  /* no key, or the secret in its place: the handshake fails and nothing comes back */
  cr_assert_eq(submit(listen, NULL, "2", out, sizeof out), 1, "%s", out);
  cr_assert_not_null(strstr(out, "no answer"), "%s", out);
  cr_assert_eq(submit(listen, sec, "2", out, sizeof out), 1, "%s", out);
  cr_assert_not_null(strstr(out, "no answer"), "%s", out);

  kill(l.pid, SIGTERM);
  const int status = proc_reap(&l, 10000);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "launch status %d", status);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* ---- a request waiting on a node that dies ends with SC_EDOWN, not the timeout ---- */

static void on_reply_down(sc_ctx *ctx, void *ud, int rc, const sc_envelope *env,
                          const void *body) {
  atomic_store(&g_req.rc, rc);
  atomic_store(&g_req.done, 1);
}
static int waiter_on_ping(sc_ctx *ctx, const sc_envelope *env, const void *body) {
  sc_actor_id node2;
  sc_node_resolve(sc_ctx_node(ctx), "node@2", &node2);
  void *b = sc_msg_body_new(SC_MSG_CLIENT_CANCEL); /* the node actor never answers it */
  const int rc = sc_request(ctx, node2, SC_MSG_CLIENT_CANCEL, b, 20000, on_reply_down, NULL);
  if (rc != 0) {
    sc_msg_body_destroy(SC_MSG_CLIENT_CANCEL, b);
    atomic_store(&g_req.rc, rc);
    atomic_store(&g_req.done, 1);
  }
  return 0;
}
static const sc_actor_spec k_waiter = {.name = "waiter",
                                       .handlers = {[SC_MSG_PING] = waiter_on_ping}};

Test(procs, pending_request_fails_when_its_node_dies, .timeout = 60) {
  cluster cl;
  cluster_up(&cl, 3, false, 100, 1000);
  atomic_store(&g_req.done, 0);
  atomic_store(&g_req.rc, 1);
  sc_actor_id w;
  cr_assert_eq(sc_spawn(cl.node, &k_waiter, NULL, 0, &w), 0);
  sc_envelope env = {.type = SC_MSG_PING, .dst = w};
  cr_assert_eq(sc_node_send(cl.node, &env, sc_msg_body_new(SC_MSG_PING)), 0);
  usleep(100000);
  cr_assert_eq(atomic_load(&g_req.done), 0, "the request ended early: %d", atomic_load(&g_req.rc));
  const uint64_t t0 = sc_now_ns();
  kill(cl.kids[2].pid, SIGKILL);
  cr_assert(wait_flag(&g_req.done, 5000), "no answer 5 s after the node died");
  const double ms = (double)(sc_now_ns() - t0) / 1e6;
  cr_assert_eq(atomic_load(&g_req.rc), SC_EDOWN);
  cr_assert(ms < 2000, "SC_EDOWN after %.0f ms", ms);
  proc_reap(&cl.kids[2], 2000);
  cluster_down(&cl);
}
