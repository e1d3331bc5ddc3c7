/* test_attack.c - issue #21, "an authenticated cluster": a cluster of
 * `sparsecp launch --pcp 2 --dcp 2 --transport tcp --tap tcp://...` attacked the way
 * someone on the network would, with nothing but ZeroMQ sockets, the source code and, for
 * the insider probes, one member's leaked key.
 *
 * Every probe was an attack that worked before the cluster authenticated its peers (the
 * comment of each Test says what it did then); each Test asserts that it fails now: the
 * cluster keeps running and serves a request with the same tokens as before the attack
 * (same prompt, greedy), and where something is observable from outside (a socket
 * monitor on the attacker's side, the nodes' log lines on launch's stderr, the tap) the
 * Test asserts on that too. A control Test sends the same forged letters to a cluster on
 * ipc, whose endpoints only its folder's permissions guard (this test's user may open
 * it): there they do take effect, which shows the forgeries are well-formed and reach the
 * right actors, so the tcp probes fail because of the authentication alone.
 *
 * One launch per Test (start/stop inside it; .fini stops what an assertion left), each
 * with free ports: launch picks its own on tcp, the --tap port comes from the kernel.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/runtime/sc_cluster.h"
#include "actors/runtime/sc_pack.h"
#include "actors/runtime/sc_tap_record.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "client/client.h"
#include "collectives/backend_host.h"
#include "messages/messages.h"
#include "plan/coll_types.h"
#include "tests/common/sc_test_proc.h"

/* launch starts pipeline nodes; the small model keeps their start-up quick */
#define SMALL_MODEL SC_SOURCE_DIR "/examples/model-small.json"

/* What a reader of actors/pipeline.c learns: the node actor is slot 0, the startup
 * actors follow in the order of its list, each of generation 1; the head-only ones
 * (gateway, scheduler, partitioner) are on node 0 only. */
#define NODE_ACTOR(n) ((sc_actor_id){.node = (n), .slot = 0, .gen = 1})
#define GATEWAY ((sc_actor_id){.node = 0, .slot = 1, .gen = 1})
#define SCHEDULER ((sc_actor_id){.node = 0, .slot = 2, .gen = 1})
#define COMM(n) ((sc_actor_id){.node = (n), .slot = 4, .gen = 1})

static int64_t ms_since(uint64_t t0) { return (int64_t)((sc_now_ns() - t0) / 1000000ull); }

/* ---- the cluster under attack: one `sparsecp launch` child ---- */

typedef struct launch {
  pid_t pid;               /* 0: not running */
  int out;                 /* read end of its stdout (the "launched" and event lines) */
  char buf[65536];
  size_t len;
  char dir[64];            /* this test's own folder: launch's stderr (the nodes' logs) */
  char err_path[96];
  char run_dir[512];       /* launch's folder (cluster file, keys) */
  char cluster_path[512];
  char listen[256];
  char tap[64];            /* launch's --tap endpoint ("" without) */
  char tap_server_key[64], tap_key_file[512];
  pid_t pids[2];
  char coll[2][256];       /* the ranks' collective endpoints ("coll" in the cluster file) */
  sc_cluster c;
  bool loaded;
} launch;

static launch g_l; /* the Test's cluster; .fini stops it whatever an assertion left */

/* A tcp port that was free a moment ago (for --tap, which launch does not pick itself). */
static int free_port(void) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert(s >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
  close(s);
  return ntohs(a.sin_port);
}

/* Reads launch's stdout until a line holding needle arrives; that line (static buffer),
 * or NULL on timeout or EOF. */
static const char *launch_expect(launch *l, const char *needle, int timeout_ms) {
  static char line[4096];
  const uint64_t t0 = sc_now_ns();
  for (;;) {
    while (sc_test_take_line(l->buf, &l->len, line, sizeof line))
      if (strstr(line, needle)) return line;
    /* (timeout 0: what has arrived, without waiting) */
    const int64_t left = timeout_ms - ms_since(t0);
    struct pollfd pf = {.fd = l->out, .events = POLLIN};
    if (poll(&pf, 1, left > 0 ? (int)left : 0) <= 0) {
      if (left <= 0) return NULL;
      continue;
    }
    if (l->len == sizeof l->buf - 1) l->len = 0; /* (never: a few lines in all) */
    const ssize_t got = read(l->out, l->buf + l->len, sizeof l->buf - 1 - l->len);
    if (got <= 0) return NULL;
    l->len += (size_t)got;
  }
}

static void json_str(json_t *o, const char *key, char *out, size_t cap) {
  const char *v = json_string_value(json_object_get(o, key));
  snprintf(out, cap, "%s", v ? v : "");
}

/* The collective endpoints: the "coll" key of each node, which sc_cluster does not
 * read (the pipeline's). */
static void load_coll(launch *l) {
  json_error_t err;
  json_t *root = json_load_file(l->cluster_path, 0, &err);
  cr_assert_not_null(root, "%s: %s", l->cluster_path, err.text);
  json_t *nodes = json_object_get(root, "nodes");
  for (size_t i = 0; i < json_array_size(nodes); i++) {
    json_t *nd = json_array_get(nodes, i);
    const json_int_t r = json_integer_value(json_object_get(nd, "rank"));
    cr_assert(r >= 0 && r < 2);
    json_str(nd, "coll", l->coll[r], sizeof l->coll[r]);
    cr_assert(strncmp(l->coll[r], "tcp://", 6) == 0 || strncmp(l->coll[r], "ipc://", 6) == 0,
              "rank %d's coll endpoint: \"%s\"", (int)r, l->coll[r]);
  }
  json_decref(root);
}

/* Lines of launch's stderr (every node's log) holding all of the needles (n2, n3 may be
 * NULL). */
static int log_lines(const launch *l, const char *n1, const char *n2, const char *n3) {
  FILE *f = fopen(l->err_path, "r");
  if (f == NULL) return 0;
  char line[4096];
  int k = 0;
  while (fgets(line, sizeof line, f))
    k += strstr(line, n1) && (n2 == NULL || strstr(line, n2)) && (n3 == NULL || strstr(line, n3));
  fclose(f);
  return k;
}

static int log_total(const launch *l) { return log_lines(l, "", NULL, NULL); }

/* Forks `sparsecp launch --pcp 2 --dcp 2 --transport T [--tap l->tap]` (stderr to
 * l->err_path) and returns its "launched" line (static buffer), or NULL when it printed
 * none; l->pid is then reaped. */
static const char *launch_spawn(launch *l, bool tcp) {
  char *argv[] = {"sparsecp", "launch", "--pcp", "2", "--dcp", "2", "--transport",
                  tcp ? "tcp" : "ipc", "--events", "--model", SMALL_MODEL,
                  tcp ? "--tap" : NULL, l->tap, NULL};
  /* (launch dies with this process, and its nodes carry the same death signal) */
  l->pid = sc_test_spawn(SPARSECP_BIN, argv, l->err_path, &l->out);
  l->len = 0;
  const char *line = launch_expect(l, "\"launched\"", 15000);
  if (line) return line;
  kill(l->pid, SIGKILL);
  waitpid(l->pid, NULL, 0);
  l->pid = 0;
  close(l->out);
  l->out = -1;
  return NULL;
}

static int launch_stop(launch *l);

/* One start: the "launched" line read into the fields, both nodes ready. false when it
 * did not come up because a port it was given (the --tap one here, or one launch picked
 * for the nodes and collectives: all were free a moment before they were bound) was
 * taken meanwhile by another process: launch's log says "Address already in use" (the
 * nodes' bind failures) or that it cannot bind the tap endpoint. Any other failure fails
 * the test. */
static bool launch_try(launch *l, bool tcp) {
  memset(l, 0, sizeof *l);
  l->out = -1;
  snprintf(l->dir, sizeof l->dir, "/tmp/sc-attack-XXXXXX");
  cr_assert_not_null(mkdtemp(l->dir));
  snprintf(l->err_path, sizeof l->err_path, "%s/launch.err", l->dir);
  if (tcp) snprintf(l->tap, sizeof l->tap, "tcp://127.0.0.1:%d", free_port());
  const char *line = launch_spawn(l, tcp);
  const bool port_taken = log_lines(l, "cannot bind the tap endpoint", NULL, NULL) > 0 ||
                          log_lines(l, "Address already in use", NULL, NULL) > 0;
  if (line == NULL && port_taken) return launch_stop(l), false;
  cr_assert_not_null(line, "launch printed no \"launched\" line");
  json_t *j = json_loads(line, 0, NULL);
  cr_assert_not_null(j, "not JSON: %s", line);
  json_str(j, "cluster", l->cluster_path, sizeof l->cluster_path);
  json_str(j, "listen", l->listen, sizeof l->listen);
  json_str(j, "tap_server_key", l->tap_server_key, sizeof l->tap_server_key);
  json_str(j, "tap_key_file", l->tap_key_file, sizeof l->tap_key_file);
  json_t *pids = json_object_get(j, "pids");
  cr_assert_eq(json_array_size(pids), 2u, "%s", line);
  for (int r = 0; r < 2; r++)
    l->pids[r] = (pid_t)json_integer_value(json_array_get(pids, (size_t)r));
  json_decref(j);
  snprintf(l->run_dir, sizeof l->run_dir, "%s", l->cluster_path);
  char *slash = strrchr(l->run_dir, '/');
  if (slash) *slash = '\0';
  if (tcp) cr_assert(l->tap_server_key[0] && l->tap_key_file[0], "no tap key in: %s", line);
  for (int r = 0; r < 2; r++)
    if (launch_expect(l, "\"ready\"", 15000) == NULL) {
      if (log_lines(l, "Address already in use", NULL, NULL) > 0) return launch_stop(l), false;
      cr_assert_fail("node not ready");
    }
  return true;
}

/* Starts the cluster, reads its "launched" line and waits until both nodes are ready;
 * a start whose ports were taken meanwhile (launch_try) is made again, up to 3 times. */
static void launch_start(launch *l, bool tcp) {
  bool up = false;
  for (int attempt = 0; !up && attempt < 3; attempt++) up = launch_try(l, tcp);
  cr_assert(up, "three starts in a row found a port taken");
  sc_diag d = {0};
  cr_assert_eq(sc_cluster_load(l->cluster_path, &l->c, &d), 0, "%s", sc_diag_message(&d));
  l->loaded = true;
  cr_assert_eq(l->c.num_nodes, 2);
  cr_assert_eq(l->c.curve, tcp, "a tcp cluster without node keys (or an ipc one with)");
  load_coll(l);
}

static void rm_files(const char *dir, const char *must_contain) {
  if (dir[0] == '\0' || strstr(dir, must_contain) == NULL) return;
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  (void)!system(cmd);
}

/* Stops launch (SIGTERM: it stops its nodes in order), reaps it, removes the folders;
 * returns launch's wait status (-1: it had to be killed). Safe to call twice. */
static int launch_stop(launch *l) {
  int status = 0;
  if (l->pid > 0) {
    kill(l->pid, SIGTERM);
    const uint64_t t0 = sc_now_ns();
    while (waitpid(l->pid, &status, WNOHANG) == 0) {
      if (ms_since(t0) > 10000) {
        kill(l->pid, SIGKILL); /* its nodes follow it (PR_SET_PDEATHSIG) */
        waitpid(l->pid, &status, 0);
        status = -1;
        break;
      }
      usleep(5000);
    }
    l->pid = 0;
  }
  if (l->out >= 0) close(l->out);
  l->out = -1;
  if (l->loaded) sc_cluster_free(&l->c);
  l->loaded = false;
  rm_files(l->run_dir, "/sparsecp-run-"); /* (launch removes it; not when it was killed) */
  rm_files(l->dir, "/sc-attack-");
  l->run_dir[0] = l->dir[0] = '\0';
  return status;
}

static void teardown(void) { launch_stop(&g_l); }

/* Stops the cluster and checks that launch exited with code. */
static void stop_expecting_exit(launch *l, int code) {
  const int status = launch_stop(l);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == code, "launch status %d", status);
}

static bool pid_running(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* launch and both nodes still run (a node that stopped or died makes launch exit). */
static void assert_cluster_alive(launch *l, const char *after) {
  int status;
  cr_assert_eq(waitpid(l->pid, &status, WNOHANG), 0, "launch ended after %s (status %d)",
               after, status);
  for (int r = 0; r < 2; r++)
    cr_assert(pid_running(l->pids[r]), "node %d (pid %d) is gone after %s", r,
              (int)l->pids[r], after);
  cr_assert_null(launch_expect(l, "\"exited\"", 0), "launch reported a node exit after %s",
                 after);
}

static long rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "no %s", path);
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  cr_assert(kib > 0);
  return kib;
}

/* ---- a client of the real client library ---- */

static const int32_t k_prompt[] = {17, 404, 1023, 7, 2999, 64, 512, 3};
#define PROMPT_LEN ((int32_t)(sizeof k_prompt / sizeof k_prompt[0]))
#define MAX_TOKENS 8

typedef struct request {
  sc_client *c;
  uint64_t id;
  int32_t tokens[256];
  int32_t n;          /* tokens received */
  int32_t index_errors; /* token events whose index was not the next one */
  bool done, failed;
  int32_t code, num_tokens;
  char message[256];
} request;

static void request_start(launch *l, request *r, int32_t max_tokens) {
  memset(r, 0, sizeof *r);
  sc_diag d = {0};
  cr_assert_eq(sc_client_connect(&r->c, l->listen, &d), 0, "%s", sc_diag_message(&d));
  const sc_client_request req = {.prompt = k_prompt, .prompt_len = PROMPT_LEN,
                                 .max_tokens = max_tokens, .temperature = 0.0f, .seed = 42};
  cr_assert_eq(sc_client_submit(r->c, &req, &r->id), 0);
}

/* Reads the request's events for up to timeout_ms; true once it ended (done or error). */
static bool request_poll(request *r, int timeout_ms) {
  const uint64_t t0 = sc_now_ns();
  while (!r->done && !r->failed) {
    const int64_t left = timeout_ms - ms_since(t0);
    sc_client_event ev;
    const int rc = sc_client_next(r->c, (int)(left > 0 ? left : 0), &ev);
    if (rc == SC_ETIMEDOUT) return false;
    cr_assert_eq(rc, 0, "client: %s", sc_strerror(rc));
    cr_assert_eq(ev.request_id, r->id, "an event for request %llu, not ours",
                 (unsigned long long)ev.request_id);
    if (ev.kind == SC_CLIENT_TOKENS) {
      if (ev.index != r->n) r->index_errors++;
      for (int32_t k = 0; k < ev.n && r->n < 256; k++) r->tokens[r->n++] = ev.tokens[k];
    } else if (ev.kind == SC_CLIENT_DONE) {
      r->done = true;
      r->num_tokens = ev.num_tokens;
    } else {
      r->failed = true;
      r->code = ev.code;
      snprintf(r->message, sizeof r->message, "%s", ev.message ? ev.message : "");
    }
    if (left <= 0) break;
  }
  return r->done || r->failed;
}

static void request_end(request *r) {
  sc_client_close(r->c);
  r->c = NULL;
}

/* Serves one request to completion; its tokens into out (max_tokens of them). */
static void served_tokens(launch *l, int32_t max_tokens, int32_t *out, const char *when) {
  request r;
  request_start(l, &r, max_tokens);
  cr_assert(request_poll(&r, 30000), "%s: no answer within 30 s", when);
  request_end(&r);
  cr_assert(!r.failed, "%s: the request failed: %s (%s)", when, sc_strerror(r.code), r.message);
  cr_assert_eq(r.n, max_tokens, "%s: %d tokens, expected %d", when, r.n, max_tokens);
  cr_assert_eq(r.num_tokens, max_tokens, "%s: done says %d tokens", when, r.num_tokens);
  cr_assert_eq(r.index_errors, 0, "%s: tokens out of order", when);
  memcpy(out, r.tokens, sizeof(int32_t) * (size_t)max_tokens);
}

/* The cluster serves the request with the tokens it gave before the attack. */
static void assert_serves_same(launch *l, const int32_t *before, int32_t max_tokens,
                               const char *after) {
  int32_t now[256];
  served_tokens(l, max_tokens, now, after);
  for (int32_t i = 0; i < max_tokens; i++)
    cr_assert_eq(now[i], before[i], "after %s token %d is %d, was %d", after, i, now[i],
                 before[i]);
}

/* ---- the attacker's sockets ---- */

typedef struct attacker {
  void *sock, *mon;
  /* monitor events seen: TCP connections, handshakes that succeeded or failed, and
   * connections that ended (a failed handshake may be seen as that alone: the server
   * can close before the client reads why) */
  int connected, succeeded, failed, closed;
} attacker;

/* CURVE keys of a client: server_key NULL = a plain socket. */
typedef struct curve_keys {
  const uint8_t *server, *pub, *sec;
} curve_keys;

static void *g_ctx; /* the attacker's ZeroMQ context (one per Test) */

/* The Test's open sockets: .fini closes what a failed assertion left open, since the
 * context cannot be terminated before every socket of it is closed. */
#define MAX_SOCKETS 64
static void *g_socks[MAX_SOCKETS];

static void *socket_new(int type) {
  void *s = zmq_socket(g_ctx, type);
  cr_assert_not_null(s);
  const int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  for (int i = 0; i < MAX_SOCKETS; i++)
    if (g_socks[i] == NULL) {
      g_socks[i] = s;
      return s;
    }
  cr_assert_fail("more than %d sockets", MAX_SOCKETS);
  return NULL;
}

static void socket_close(void *s) {
  if (s == NULL) return;
  for (int i = 0; i < MAX_SOCKETS; i++)
    if (g_socks[i] == s) g_socks[i] = NULL;
  zmq_close(s);
}

static void attacker_open(attacker *a, int type, const char *routing_id, const curve_keys *k,
                          const char *endpoint) {
  static int seq;
  memset(a, 0, sizeof *a);
  a->sock = socket_new(type);
  const int hwm = 0; /* (no limit: the attacker queues all it wants) */
  zmq_setsockopt(a->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
  if (routing_id) zmq_setsockopt(a->sock, ZMQ_ROUTING_ID, routing_id, strlen(routing_id));
  if (k && k->server) {
    cr_assert_eq(zmq_setsockopt(a->sock, ZMQ_CURVE_SERVERKEY, k->server, 32), 0);
    cr_assert_eq(zmq_setsockopt(a->sock, ZMQ_CURVE_PUBLICKEY, k->pub, 32), 0);
    cr_assert_eq(zmq_setsockopt(a->sock, ZMQ_CURVE_SECRETKEY, k->sec, 32), 0);
  }
  char mon[64];
  snprintf(mon, sizeof mon, "inproc://attack-mon-%d-%d", (int)getpid(), seq++);
  cr_assert_eq(zmq_socket_monitor(a->sock, mon,
                                  ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
                                      ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                      ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                      ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                      ZMQ_EVENT_HANDSHAKE_FAILED_AUTH),
               0);
  a->mon = socket_new(ZMQ_PAIR);
  cr_assert_eq(zmq_connect(a->mon, mon), 0);
  cr_assert_eq(zmq_connect(a->sock, endpoint), 0);
}

/* Reads the monitor's events for up to ms, at least those already there (stops early
 * once `until` handshakes or connections have ended, when until > 0). */
static void attacker_watch(attacker *a, int ms, int until) {
  const uint64_t t0 = sc_now_ns();
  for (;;) {
    if (until > 0 && a->succeeded + a->failed + a->closed >= until) return;
    const int64_t left = ms - ms_since(t0);
    zmq_pollitem_t it = {.socket = a->mon, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, left > 0 ? (long)left : 0) <= 0) {
      if (left <= 0) return;
      continue;
    }
    uint8_t ev[6];
    char addr[256];
    if (zmq_recv(a->mon, ev, sizeof ev, 0) < 0) continue;
    zmq_recv(a->mon, addr, sizeof addr, 0);
    uint16_t e;
    memcpy(&e, ev, 2);
    if (e == ZMQ_EVENT_CONNECTED) a->connected++;
    else if (e == ZMQ_EVENT_DISCONNECTED) a->closed++;
    else if (e == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) a->succeeded++;
    else a->failed++;
  }
}

static void attacker_close(attacker *a) {
  if (a->sock) zmq_socket_monitor(a->sock, NULL, 0);
  socket_close(a->sock);
  socket_close(a->mon);
  a->sock = a->mon = NULL;
}

/* Appends a forged letter to the pack in b: its envelope claims src and goes to dst;
 * body stays the caller's. */
static void forge_pack(sc_buf *b, int type, const void *body, sc_actor_id src, sc_actor_id dst) {
  const sc_envelope env = {.type = (uint16_t)type, .src = src, .dst = dst};
  cr_assert_eq(sc_pack_append(b, &env, body), 0);
}

/* Whether ZeroMQ took the pack. A socket whose handshake failed has no peer left (a
 * refused handshake is not retried), so an outsider's later sends are refused at once:
 * the outsiders' probes send with try_, the insiders' (admitted) must get through. */
static bool try_send_pack(attacker *a, const sc_buf *b) {
  return zmq_send(a->sock, b->data, b->len, ZMQ_DONTWAIT) == (int)b->len;
}

static void send_pack(attacker *a, const sc_buf *b) {
  cr_assert(try_send_pack(a, b), "ZeroMQ refused the pack: %s", zmq_strerror(zmq_errno()));
}

/* The forged letter of probes 1, 2 and 7: node 1 asks node 0 to shut down (what a node
 * sends to stop the cluster). */
static void forge_shutdown(sc_buf *b, uint16_t claimed_src_node) {
  sc_msg_node_shutdown m = {.reason = "attack"};
  forge_pack(b, SC_MSG_NODE_SHUTDOWN, &m, NODE_ACTOR(claimed_src_node), NODE_ACTOR(0));
}

/* Forged replies of the scheduler for the gateway's requests 1..10 (the gateway numbers
 * them 1, 2, ...): a token of a distinctive index, then the end of the request. */
#define FORGED_INDEX 1000
#define FORGED_TOKEN 4095
static void forge_client_replies(sc_buf *b) {
  for (uint64_t id = 1; id <= 10; id++) {
    int32_t tok = FORGED_TOKEN;
    float margin = 0.5f;
    sc_msg_client_token t = {.request_id = id, .index = FORGED_INDEX,
                             .tokens = {.v = &tok, .n = 1}, .margins = {.v = &margin, .n = 1}};
    forge_pack(b, SC_MSG_CLIENT_TOKEN, &t, SCHEDULER, GATEWAY);
    sc_msg_client_done dn = {.request_id = id, .num_tokens = 1, .prompt_tokens = PROMPT_LEN,
                             .finish_reason = "length"};
    forge_pack(b, SC_MSG_CLIENT_DONE, &dn, SCHEDULER, GATEWAY);
  }
}

/* A forged step_abort from rank 0's comm actor: a failed device, which the scheduler
 * takes for any step (it stops the cluster), so it needs no step number. */
static void forge_abort(sc_buf *b) {
  sc_msg_step_abort a = {.reason = SC_EDEVICE, .rank = 0, .step = 1, .seq = -1,
                         .message = "attack"};
  forge_pack(b, SC_MSG_STEP_ABORT, &a, COMM(0), SCHEDULER);
}

/* ---- tap subscribers ---- */

typedef struct tap_sub {
  void *sock;
  int messages, records;
  int forged_tokens; /* client_token records of FORGED_INDEX */
  int heartbeats;    /* node_heartbeat records */
} tap_sub;

static void tap_open(tap_sub *t, const char *endpoint, const char *prefix, const curve_keys *k) {
  memset(t, 0, sizeof *t);
  t->sock = socket_new(ZMQ_SUB);
  if (k && k->server) {
    cr_assert_eq(zmq_setsockopt(t->sock, ZMQ_CURVE_SERVERKEY, k->server, 32), 0);
    cr_assert_eq(zmq_setsockopt(t->sock, ZMQ_CURVE_PUBLICKEY, k->pub, 32), 0);
    cr_assert_eq(zmq_setsockopt(t->sock, ZMQ_CURVE_SECRETKEY, k->sec, 32), 0);
  }
  zmq_setsockopt(t->sock, ZMQ_SUBSCRIBE, prefix, strlen(prefix));
  cr_assert_eq(zmq_connect(t->sock, endpoint), 0);
}

/* Reads what arrived (for up to ms), decoding each record's envelope. */
static void tap_read(tap_sub *t, int ms) {
  const uint64_t t0 = sc_now_ns();
  for (;;) {
    const int64_t left = ms - ms_since(t0);
    zmq_pollitem_t it = {.socket = t->sock, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, left > 0 ? (long)left : 0) <= 0) return;
    zmq_msg_t topic, batch;
    zmq_msg_init(&topic);
    zmq_msg_init(&batch);
    if (zmq_msg_recv(&topic, t->sock, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&topic) &&
        zmq_msg_recv(&batch, t->sock, ZMQ_DONTWAIT) >= 0) {
      t->messages++;
      const uint8_t *p = zmq_msg_data(&batch);
      size_t n = zmq_msg_size(&batch);
      sc_tap_record rec;
      while (sc_tap_record_next(&p, &n, &rec) == 1) {
        t->records++;
        sc_envelope env;
        void *body = NULL;
        if (sc_msg_decode(rec.msg, rec.len, &env, &body, NULL) != 0) continue;
        if (env.type == SC_MSG_CLIENT_TOKEN &&
            ((sc_msg_client_token *)body)->index == FORGED_INDEX)
          t->forged_tokens++;
        if (env.type == SC_MSG_NODE_HEARTBEAT) t->heartbeats++;
        sc_msg_body_destroy(env.type, body);
      }
    }
    zmq_msg_close(&topic);
    zmq_msg_close(&batch);
  }
}

static void tap_close(tap_sub *t) {
  socket_close(t->sock);
  t->sock = NULL;
}

/* ---- per Test ---- */

static void setup(void) { g_ctx = zmq_ctx_new(); }

static void fini(void) {
  teardown();
  for (int i = 0; i < MAX_SOCKETS; i++) socket_close(g_socks[i]);
  if (g_ctx) zmq_ctx_term(g_ctx); /* (every socket has linger 0 and is closed) */
  g_ctx = NULL;
}

static void fresh_keys(uint8_t pub[32], uint8_t sec[32]) {
  char p[41], s[41];
  cr_assert_eq(zmq_curve_keypair(p, s), 0);
  cr_assert_not_null(zmq_z85_decode(pub, p));
  cr_assert_not_null(zmq_z85_decode(sec, s));
}

static void decode_key(const char *z85, uint8_t key[32]) {
  cr_assert_eq(strlen(z85), 40u, "not a key: \"%s\"", z85);
  cr_assert_not_null(zmq_z85_decode(key, z85));
}

/* ======================================================================================
 * Control: the forgeries themselves work where only folder permissions guard the
 * endpoints (ipc, this test's own user). Without this, a probe could "fail" because its
 * letter was malformed or addressed to no actor.
 * ==================================================================================== */
Test(attack, control_forgeries_take_effect_on_an_unauthenticated_endpoint, .init = setup,
     .fini = fini, .timeout = 60) {
  launch *l = &g_l;
  launch_start(l, false);
  /* a routing id that names node 0 (loop 63, which no real DEALER of node 0 uses): on
   * ipc without keys the routing id is the sender, vouched for only by the folder's
   * permissions, which let this test's own user in */
  attacker a;
  attacker_open(&a, ZMQ_DEALER, "n0.63", NULL, l->c.nodes[0].endpoint);
  request r;
  request_start(l, &r, 64);
  /* forged tokens for the request in flight reach its client */
  bool forged_seen = false;
  for (int round = 0; round < 200 && !forged_seen && !r.done && !r.failed; round++) {
    sc_buf b;
    sc_buf_init(&b);
    forge_client_replies(&b);
    send_pack(&a, &b);
    sc_buf_free(&b);
    request_poll(&r, 20);
    for (int32_t i = 0; i < r.n; i++) forged_seen |= r.tokens[i] == FORGED_TOKEN;
    forged_seen |= r.index_errors > 0 || (r.done && r.num_tokens == 1);
  }
  request_end(&r);
  cr_assert(forged_seen, "the forged client_token/client_done never reached the client");
  /* and a forged node_shutdown stops node 0, so launch reports it and exits 1 */
  sc_buf b;
  sc_buf_init(&b);
  forge_shutdown(&b, 0);
  send_pack(&a, &b);
  sc_buf_free(&b);
  cr_assert_not_null(launch_expect(l, "\"exited\"", 10000),
                     "the forged node_shutdown did not stop node 0");
  attacker_close(&a);
  stop_expecting_exit(l, 1);
}

/* ======================================================================================
 * 1. A plain DEALER with node 1's routing id sends node 0 a forged node_shutdown.
 * Before: node 0's ROUTER was plain and believed the envelope: node 0 stopped, and with
 * it the whole cluster (the control Test shows the same letter doing so on ipc).
 * ==================================================================================== */
Test(attack, plain_dealer_cannot_shut_the_cluster_down, .init = setup, .fini = fini,
     .timeout = 60) {
  launch *l = &g_l;
  launch_start(l, true);
  int32_t before[MAX_TOKENS];
  served_tokens(l, MAX_TOKENS, before, "before the attack");
  /* "n1" is node 1's own io DEALER's id, so a ROUTER would ignore a second peer of that
   * name whatever the authentication; "n1.5" names no connected peer */
  attacker a[2];
  attacker_open(&a[0], ZMQ_DEALER, "n1", NULL, l->c.nodes[0].endpoint);
  attacker_open(&a[1], ZMQ_DEALER, "n1.5", NULL, l->c.nodes[0].endpoint);
  sc_buf b;
  sc_buf_init(&b);
  forge_shutdown(&b, 1);
  for (int k = 0; k < 10; k++)
    for (int i = 0; i < 2; i++) (void)try_send_pack(&a[i], &b);
  sc_buf_free(&b);
  for (int i = 0; i < 2; i++) {
    attacker_watch(&a[i], 1000, 1);
    cr_assert_geq(a[i].connected, 1, "the probe never reached node 0's endpoint");
    cr_assert_eq(a[i].succeeded, 0, "a plain socket completed a handshake with node 0");
    cr_assert_geq(a[i].failed + a[i].closed, 1, "the connection neither failed nor ended");
    attacker_close(&a[i]);
  }
  assert_cluster_alive(l, "a forged node_shutdown from a plain socket");
  assert_serves_same(l, before, MAX_TOKENS, "a forged node_shutdown from a plain socket");
  stop_expecting_exit(l, 0);
}

/* ======================================================================================
 * 2. A CURVE client with a key pair of its own (it knows node 0's public key from the
 * cluster file) sends the same, and then floods connection attempts.
 * Before: there was no CURVE at all; and every garbage frame was a WARN line, so a flood
 * filled the log.
 * ==================================================================================== */
Test(attack, unlisted_curve_key_is_refused_and_its_flood_logged_boundedly, .init = setup,
     .fini = fini, .timeout = 60) {
  launch *l = &g_l;
  launch_start(l, true);
  int32_t before[MAX_TOKENS];
  served_tokens(l, MAX_TOKENS, before, "before the attack");
  const int lines_before = log_total(l);
  uint8_t pub[32], sec[32];
  fresh_keys(pub, sec);
  const curve_keys k = {.server = l->c.nodes[0].public_key, .pub = pub, .sec = sec};
  attacker a;
  attacker_open(&a, ZMQ_DEALER, "n1.5", &k, l->c.nodes[0].endpoint);
  sc_buf b;
  sc_buf_init(&b);
  forge_shutdown(&b, 1);
  (void)try_send_pack(&a, &b);
  attacker_watch(&a, 1000, 1);
  cr_assert_geq(a.connected, 1, "the probe never reached node 0's endpoint");
  cr_assert_eq(a.succeeded, 0, "node 0 admitted a key that is not the cluster's");
  cr_assert_geq(a.failed + a.closed, 1, "the connection neither failed nor ended");
  attacker_close(&a);
  assert_cluster_alive(l, "a forged node_shutdown from an unlisted key");

  /* The flood: 5000 connection attempts, each a full CURVE handshake that ZAP refuses,
   * each with a forged letter queued to go once admitted. ZeroMQ does not retry a
   * handshake that was refused, so the attacker connects again itself. */
  enum { FLOOD_SOCKETS = 16, FLOOD_ATTEMPTS = 5000 };
  attacker f[FLOOD_SOCKETS];
  zmq_pollitem_t items[FLOOD_SOCKETS];
  for (int i = 0; i < FLOOD_SOCKETS; i++) {
    attacker_open(&f[i], ZMQ_DEALER, NULL, &k, l->c.nodes[0].endpoint);
    (void)try_send_pack(&f[i], &b);
    items[i] = (zmq_pollitem_t){.socket = f[i].mon, .events = ZMQ_POLLIN};
  }
  int attempts = 0;
  const uint64_t t0 = sc_now_ns();
  while (attempts < FLOOD_ATTEMPTS && ms_since(t0) < 20000) {
    if (zmq_poll(items, FLOOD_SOCKETS, 100) <= 0) continue;
    for (int i = 0; i < FLOOD_SOCKETS; i++) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      const int failed = f[i].failed;
      attacker_watch(&f[i], 0, 0);
      cr_assert_eq(f[i].succeeded, 0, "node 0 admitted an unlisted key");
      attempts += f[i].failed - failed;
      if (f[i].failed == failed) continue;
      (void)zmq_disconnect(f[i].sock, l->c.nodes[0].endpoint); /* (gone already) */
      cr_assert_eq(zmq_connect(f[i].sock, l->c.nodes[0].endpoint), 0);
      (void)try_send_pack(&f[i], &b);
    }
  }
  for (int i = 0; i < FLOOD_SOCKETS; i++) attacker_close(&f[i]);
  sc_buf_free(&b);
  cr_log_info("flood: %d refused handshakes in %lld ms", attempts, (long long)ms_since(t0));
  cr_assert_geq(attempts, FLOOD_ATTEMPTS, "only %d connection attempts in 20 s", attempts);
  usleep(200000);
  assert_cluster_alive(l, "a flood of unlisted keys");
  /* ZAP logs one line per domain per 10 s, with the count held back */
  const int refused = log_lines(l, "refused", NULL, NULL);
  cr_assert_geq(refused, 1, "no line says that the key was refused");
  cr_assert_leq(refused, 5, "%d \"refused\" lines for one flood", refused);
  cr_assert_leq(log_total(l) - lines_before, 8, "the flood wrote %d log lines",
                log_total(l) - lines_before);
  assert_serves_same(l, before, MAX_TOKENS, "a flood of unlisted keys");
  stop_expecting_exit(l, 0);
}

/* ======================================================================================
 * 3. An insider: node 1's real key (leaked, or a buggy member) sends letters whose
 * envelope claims node 0: the scheduler's replies to the gateway (tokens into a client's
 * stream, an early end), a step_abort from rank 0's comm, a node_shutdown from node 0.
 * Before: the envelope's src was believed: the client's stream got the forged tokens and
 * an early done, the abort failed the request (a device failure stops the cluster).
 * ==================================================================================== */
Test(attack, insider_cannot_speak_for_another_node, .init = setup, .fini = fini,
     .timeout = 60) {
  enum { N = 24 };
  launch *l = &g_l;
  launch_start(l, true);
  int32_t before[N];
  served_tokens(l, N, before, "before the attack");
  sc_node_key key1;
  sc_diag d = {0};
  cr_assert_eq(sc_cluster_load_node_key(&l->c, 1, &key1, &d), 0, "%s", sc_diag_message(&d));
  const curve_keys k = {.server = l->c.nodes[0].public_key, .pub = key1.public_key,
                        .sec = key1.secret_key};
  /* node 0's tap shows what its actors are handed (the tap key is launch's) */
  uint8_t tap_pub[32], tap_sec[32];
  char tap_pub_z85[41];
  cr_assert_eq(sc_curve_load_secret(l->tap_key_file, tap_sec, tap_pub_z85, &d), 0, "%s",
               sc_diag_message(&d));
  decode_key(tap_pub_z85, tap_pub);
  const curve_keys tk = {.server = l->c.nodes[0].public_key, .pub = tap_pub, .sec = tap_sec};
  tap_sub tap;
  tap_open(&tap, l->c.nodes[0].tap, "0/", &tk);
  /* (not "n1": that is node 1's own DEALER, and a ROUTER ignores a second peer of one id) */
  attacker a;
  attacker_open(&a, ZMQ_DEALER, "n1.7", &k, l->c.nodes[0].endpoint);
  attacker_watch(&a, 5000, 1);
  cr_assert_eq(a.succeeded, 1, "node 1's key was not admitted: the probe proves nothing");
  /* control: what node 1 may say as itself (a heartbeat to node 0) is delivered */
  sc_buf b;
  sc_buf_init(&b);
  sc_msg_node_heartbeat hb = {.rank = 1};
  forge_pack(&b, SC_MSG_NODE_HEARTBEAT, &hb, NODE_ACTOR(1), NODE_ACTOR(0));
  const uint64_t t0 = sc_now_ns();
  while (tap.heartbeats == 0 && ms_since(t0) < 10000) {
    send_pack(&a, &b);
    tap_read(&tap, 100);
  }
  cr_assert_gt(tap.heartbeats, 0, "node 1's own heartbeat never reached node 0's node actor");
  sc_buf_free(&b);

  /* the forgeries, while a request streams */
  const int lines_before = log_total(l);
  request r;
  request_start(l, &r, N);
  int forged = 0;
  sc_buf_init(&b);
  forge_client_replies(&b);
  forge_abort(&b);
  forge_shutdown(&b, 0);
  const int letters = 10 * 2 + 2; /* (forge_client_replies, the abort, the shutdown) */
  while (!request_poll(&r, 2)) {
    send_pack(&a, &b);
    forged += letters;
    tap_read(&tap, 0);
  }
  cr_assert_gt(forged, 0, "the request ended before a forged letter was sent");
  /* and a flood of them after it: 5000 more letters; the log stays bounded */
  for (int flood = 0; flood < 5000; flood += letters, forged += letters) send_pack(&a, &b);
  sc_buf_free(&b);
  /* a heartbeat after them: once node 0 has it, it has read every forged letter (one
   * connection is FIFO) */
  sc_buf_init(&b);
  forge_pack(&b, SC_MSG_NODE_HEARTBEAT, &hb, NODE_ACTOR(1), NODE_ACTOR(0));
  const int heartbeats = tap.heartbeats;
  send_pack(&a, &b);
  sc_buf_free(&b);
  const uint64_t t1 = sc_now_ns();
  while (tap.heartbeats == heartbeats && ms_since(t1) < 10000) tap_read(&tap, 100);
  cr_assert_gt(tap.heartbeats, heartbeats, "node 0 never read the forged letters' flood");
  request_end(&r);
  cr_assert(!r.failed, "the request failed: %s (%s)", sc_strerror(r.code), r.message);
  cr_assert_eq(r.n, N, "the client got %d tokens, expected %d", r.n, N);
  cr_assert_eq(r.num_tokens, N, "done says %d tokens", r.num_tokens);
  cr_assert_eq(r.index_errors, 0, "the stream holds tokens out of order (forged ones)");
  for (int32_t i = 0; i < N; i++)
    cr_assert_eq(r.tokens[i], before[i], "token %d is %d, was %d", i, r.tokens[i], before[i]);
  cr_assert_eq(tap.forged_tokens, 0, "%d forged client_token reached the gateway",
               tap.forged_tokens);
  attacker_close(&a);
  tap_close(&tap);
  assert_cluster_alive(l, "letters of node 1 claiming node 0");
  /* node 0 says why it dropped them, in one line per sender per 10 s */
  const int dropped = log_lines(l, "node 0: dropped a message from node 1", "another node", NULL);
  cr_log_info("insider: %d forged letters sent, %d log lines", forged, dropped);
  cr_assert_geq(dropped, 1, "node 0 never said it dropped a forged letter");
  cr_assert_leq(dropped, 5, "%d lines for %d forged letters", dropped, forged);
  cr_assert_leq(log_total(l) - lines_before, 8, "%d log lines for %d forged letters",
                log_total(l) - lines_before, forged);
  assert_serves_same(l, before, N, "letters of node 1 claiming node 0");
  memset(&key1, 0, sizeof key1);
  memset(tap_sec, 0, sizeof tap_sec);
  stop_expecting_exit(l, 0);
}

/* ---- host collective blocks: [identity][header][payload] ---- */

/* The header frame, as collectives/backend_host.h describes it. */
typedef struct block_header {
  uint64_t epoch;
  uint32_t group, seq;
} block_header;

/* Whether ZeroMQ took the block (see try_send_pack). */
static bool try_send_block(attacker *a, uint64_t epoch, uint32_t group, uint32_t seq,
                           const void *payload, size_t bytes) {
  const block_header h = {.epoch = epoch, .group = group, .seq = seq};
  return zmq_send(a->sock, &h, sizeof h, ZMQ_SNDMORE | ZMQ_DONTWAIT) == (int)sizeof h &&
         zmq_send(a->sock, payload, bytes, ZMQ_DONTWAIT) == (int)bytes;
}

static void send_block(attacker *a, uint64_t epoch, uint32_t group, uint32_t seq,
                       const void *payload, size_t bytes) {
  cr_assert(try_send_block(a, epoch, group, seq, payload, bytes), "ZeroMQ refused the block: %s",
            zmq_strerror(zmq_errno()));
}

/* ======================================================================================
 * 4. The collective port: plain DEALERs named "r1" and "r01" send rank 0 64 MiB of
 * blocks for far-future steps, and 8-byte blocks for steps 1..50.
 * Before: rank 0 parked every block it was sent for any later step (192 MiB of them sat
 * in its memory), and the 8-byte blocks, taken for rank 1's, failed the real requests
 * of those steps.
 * ==================================================================================== */
Test(attack, plain_peer_cannot_use_the_collective_port, .init = setup, .fini = fini,
     .timeout = 60) {
  launch *l = &g_l;
  launch_start(l, true);
  int32_t before[MAX_TOKENS];
  served_tokens(l, MAX_TOKENS, before, "before the attack");
  const long rss0 = rss_kib(l->pids[0]);
  /* ("r1" is also rank 1's own DEALER's id, which a ROUTER does not take twice; the old
   * backend read "r01" as rank 1 as well) */
  attacker a[2];
  attacker_open(&a[0], ZMQ_DEALER, "r1", NULL, l->coll[0]);
  attacker_open(&a[1], ZMQ_DEALER, "r01", NULL, l->coll[0]);
  const size_t block = 1u << 20;
  uint8_t *junk = malloc(block);
  cr_assert_not_null(junk);
  memset(junk, 0xA5, block);
  int taken = 0; /* (ZeroMQ queues them until a handshake that never succeeds) */
  for (int i = 0; i < 64; i++)
    taken += try_send_block(&a[i % 2], 1000000 + (uint64_t)i, (uint32_t)(i % SC_GROUP_COUNT),
                            0, junk, block);
  for (uint64_t e = 1; e <= 50; e++)
    for (uint32_t g = 0; g < SC_GROUP_COUNT; g++)
      for (uint32_t s = 0; s < 4; s++) (void)try_send_block(&a[0], e, g, s, junk, 8);
  free(junk);
  for (int i = 0; i < 2; i++) {
    attacker_watch(&a[i], 1500, 1);
    cr_assert_geq(a[i].connected, 1, "the probe never reached rank 0's collective port");
    cr_assert_eq(a[i].succeeded, 0, "a plain socket completed a handshake on the coll port");
  }
  usleep(500000);
  const long rss1 = rss_kib(l->pids[0]);
  cr_log_info("coll, plain: %d MiB sent; rank 0 VmRSS %ld -> %ld KiB", taken, rss0, rss1);
  cr_assert_leq(rss1 - rss0, 16 * 1024, "rank 0 grew by %ld KiB", rss1 - rss0);
  assert_cluster_alive(l, "blocks from a plain socket");
  /* more requests than the steps of one: they run into the epochs the blocks named */
  for (int k = 0; k < 3; k++)
    assert_serves_same(l, before, MAX_TOKENS, "blocks from a plain socket");
  for (int i = 0; i < 2; i++) attacker_close(&a[i]);
  const long rss2 = rss_kib(l->pids[0]);
  cr_assert_leq(rss2 - rss0, 16 * 1024, "rank 0 grew by %ld KiB", rss2 - rss0);
  stop_expecting_exit(l, 0);
}

/* ======================================================================================
 * 5. An insider on the collective port (node 1's key): its DEALER names itself rank 0
 * ("r0" toward rank 0; "r00" toward rank 1, whose ROUTER already has the real rank 0 as
 * "r0" and would ignore a second peer of that id) and sends blocks rank 1 would never
 * send (a far-future step, sizes no plan has).
 * Before: the identity was the source: rank 1 took "r00"'s blocks for rank 0's, and
 * every block for a later step was parked.
 * Now the source is the key's rank (User-Id): toward rank 1 that is rank 1 itself, and
 * toward rank 0 rank 1, whose blocks must fit the plan; all are refused when read.
 * ==================================================================================== */
Test(attack, insider_on_the_collective_port_is_refused, .init = setup, .fini = fini,
     .timeout = 60) {
  launch *l = &g_l;
  launch_start(l, true);
  int32_t before[MAX_TOKENS];
  served_tokens(l, MAX_TOKENS, before, "before the attack");
  const long rss0 = rss_kib(l->pids[0]);
  sc_node_key key1;
  sc_diag d = {0};
  cr_assert_eq(sc_cluster_load_node_key(&l->c, 1, &key1, &d), 0, "%s", sc_diag_message(&d));
  attacker a[2];
  for (int r = 0; r < 2; r++) {
    const curve_keys k = {.server = l->c.nodes[r].public_key, .pub = key1.public_key,
                          .sec = key1.secret_key};
    attacker_open(&a[r], ZMQ_DEALER, r == 0 ? "r0" : "r00", &k, l->coll[r]);
    attacker_watch(&a[r], 5000, 1);
    cr_assert_eq(a[r].succeeded, 1, "rank %d did not admit node 1's key: the probe proves "
                 "nothing", r);
  }
  const size_t block = 1u << 20;
  uint8_t *junk = malloc(block);
  cr_assert_not_null(junk);
  memset(junk, 0x5A, block);
  for (int r = 0; r < 2; r++) {
    /* far-future steps, 64 MiB each way, sent while the ranks are idle (they read their
     * port only inside a collective): before ZeroMQ's queue had no bound, and 64 MiB
     * took rank 0 from 196 to 262 MiB; now a block larger than any plan's ends the
     * connection, and at most SC_HOST_RCVHWM wait per connection */
    for (int i = 0; i < 64; i++)
      send_block(&a[r], 1000000 + (uint64_t)i, (uint32_t)(i % SC_GROUP_COUNT), 0, junk, block);
    /* 3 bytes: no plan has a block of that size (elements are 2 or 4 bytes) */
    for (uint64_t e = 1; e <= 50; e++)
      for (uint32_t g = 0; g < SC_GROUP_COUNT; g++) send_block(&a[r], e, g, 0, junk, 3);
  }
  free(junk);
  usleep(300000);
  assert_cluster_alive(l, "blocks from node 1's key");
  /* the ranks read their collective port inside a collective: the requests read these */
  for (int k = 0; k < 3; k++)
    assert_serves_same(l, before, MAX_TOKENS, "blocks from node 1's key");
  for (int r = 0; r < 2; r++) attacker_close(&a[r]);
  /* read as rank 1's: toward rank 1 itself (refused), toward rank 0 a peer of no plan */
  const int self =
      log_lines(l, "rank 1: refused a block from rank 1 (this rank itself)", NULL, NULL);
  const int from1 = log_lines(l, "rank 0: refused a block from rank 1", NULL, NULL);
  cr_assert_geq(self, 1, "rank 1 never said it refused the blocks that named rank 0");
  cr_assert_geq(from1, 1, "rank 0 never said it refused rank 1's forged blocks");
  cr_assert_leq(self + from1, 6, "%d lines for the refused blocks", self + from1);
  cr_assert_eq(log_lines(l, "refused a block from rank 0", NULL, NULL), 0,
               "a block was taken for rank 0's");
  /* the stated bound for a member's key (backend_host.h): SC_HOST_RCVHWM unread blocks
   * per connection, here 1 MiB each, and some slack for the kernel's socket buffers and
   * the allocator; 64 MiB were held before */
  const long rss1 = rss_kib(l->pids[0]), bound = (SC_HOST_RCVHWM + 8) * 1024;
  cr_log_info("coll, insider: rank 0 VmRSS %ld -> %ld KiB", rss0, rss1);
  cr_assert_leq(rss1 - rss0, bound, "rank 0 grew by %ld KiB", rss1 - rss0);
  memset(&key1, 0, sizeof key1);
  stop_expecting_exit(l, 0);
}

/* ======================================================================================
 * 6. Taps: subscribers without the tap key, at a node's tap and at launch's, while
 * requests run; subscribers with it see records.
 * Before: every node bound a plain XPUB: anyone could subscribe and read every prompt
 * and token.
 * ==================================================================================== */
Test(attack, tap_shows_nothing_without_the_tap_key, .init = setup, .fini = fini,
     .timeout = 60) {
  launch *l = &g_l;
  launch_start(l, true);
  sc_diag d = {0};
  uint8_t tap_pub[32], tap_sec[32], launch_key[32], other_pub[32], other_sec[32];
  char tap_pub_z85[41];
  cr_assert_eq(sc_curve_load_secret(l->tap_key_file, tap_sec, tap_pub_z85, &d), 0, "%s",
               sc_diag_message(&d));
  decode_key(tap_pub_z85, tap_pub);
  decode_key(l->tap_server_key, launch_key);
  fresh_keys(other_pub, other_sec);
  /* with the key: launch's endpoint (its own server key) and node 0's (its node key) */
  const curve_keys at_launch = {.server = launch_key, .pub = tap_pub, .sec = tap_sec};
  const curve_keys at_node = {.server = l->c.nodes[0].public_key, .pub = tap_pub, .sec = tap_sec};
  const curve_keys unlisted = {.server = l->c.nodes[0].public_key, .pub = other_pub,
                               .sec = other_sec};
  enum { OK_LAUNCH, OK_NODE, PLAIN_LAUNCH, PLAIN_NODE0, PLAIN_NODE1, UNLISTED, NUM_SUBS };
  tap_sub s[NUM_SUBS];
  tap_open(&s[OK_LAUNCH], l->tap, "", &at_launch);
  tap_open(&s[OK_NODE], l->c.nodes[0].tap, "", &at_node);
  tap_open(&s[PLAIN_LAUNCH], l->tap, "", NULL);
  tap_open(&s[PLAIN_NODE0], l->c.nodes[0].tap, "", NULL);
  tap_open(&s[PLAIN_NODE1], l->c.nodes[1].tap, "", NULL);
  tap_open(&s[UNLISTED], l->c.nodes[0].tap, "", &unlisted);
  /* requests until both keyed subscribers have seen records (a subscription takes a
   * moment to reach the nodes, through launch's forwarder for the first) */
  int requests = 0;
  const uint64_t t0 = sc_now_ns();
  while ((s[OK_LAUNCH].records == 0 || s[OK_NODE].records == 0) && ms_since(t0) < 20000) {
    int32_t toks[MAX_TOKENS];
    served_tokens(l, MAX_TOKENS, toks, "with taps attached");
    requests++;
    for (int i = 0; i < NUM_SUBS; i++) tap_read(&s[i], 50);
  }
  for (int i = 0; i < NUM_SUBS; i++) tap_read(&s[i], 200);
  cr_log_info("taps: %d requests; records: launch %d, node 0 %d", requests,
              s[OK_LAUNCH].records, s[OK_NODE].records);
  cr_assert_gt(s[OK_LAUNCH].records, 0, "launch's tap showed the tap key nothing");
  cr_assert_gt(s[OK_NODE].records, 0, "node 0's tap showed the tap key nothing");
  const char *names[NUM_SUBS] = {"", "", "launch's tap, plain", "node 0's tap, plain",
                                 "node 1's tap, plain", "node 0's tap, unlisted key"};
  for (int i = PLAIN_LAUNCH; i < NUM_SUBS; i++)
    cr_assert_eq(s[i].messages, 0, "%s: %d messages", names[i], s[i].messages);
  for (int i = 0; i < NUM_SUBS; i++) tap_close(&s[i]);
  memset(tap_sec, 0, sizeof tap_sec);
  stop_expecting_exit(l, 0);
}

/* ======================================================================================
 * 7. A client that presents node 1's public key (from the cluster file) without its
 * secret: CURVE makes a client prove its key (the vouch box of INITIATE), so the
 * handshake fails.
 * Before: there was no key to prove; anything was accepted.
 * ==================================================================================== */
Test(attack, a_public_key_alone_proves_nothing, .init = setup, .fini = fini, .timeout = 60) {
  launch *l = &g_l;
  launch_start(l, true);
  int32_t before[MAX_TOKENS];
  served_tokens(l, MAX_TOKENS, before, "before the attack");
  uint8_t ignored[32], sec[32];
  fresh_keys(ignored, sec);
  const curve_keys k = {.server = l->c.nodes[0].public_key, .pub = l->c.nodes[1].public_key,
                        .sec = sec};
  attacker a;
  attacker_open(&a, ZMQ_DEALER, "n1.5", &k, l->c.nodes[0].endpoint);
  sc_buf b;
  sc_buf_init(&b);
  forge_shutdown(&b, 1);
  for (int i = 0; i < 10; i++) (void)try_send_pack(&a, &b);
  sc_buf_free(&b);
  attacker_watch(&a, 1500, 1);
  cr_assert_geq(a.connected, 1, "the probe never reached node 0's endpoint");
  cr_assert_eq(a.succeeded, 0, "node 0 admitted node 1's public key without its secret");
  cr_assert_geq(a.failed + a.closed, 1, "the connection neither failed nor ended");
  attacker_close(&a);
  usleep(500000);
  assert_cluster_alive(l, "node 1's public key with another secret");
  assert_serves_same(l, before, MAX_TOKENS, "node 1's public key with another secret");
  stop_expecting_exit(l, 0);
}
