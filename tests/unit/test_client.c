/* The client API against a peer that speaks the gateway side of the protocol on a real
 * ROUTER socket (an ipc endpoint in a private temporary folder), and against the real
 * gateway of a one-node `sparsecp launch` where what is tested is the gateway's answer. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
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

#include "base/zap.h"
#include "client/client.h"
#include "messages/messages.h"

typedef struct {
  char endpoint[128];
  void *ctx;
  int submits, cancels, rejected;
} peer_t;

static void reply(void *sock, zmq_msg_t *ident, int type, const void *body) {
  sc_buf b;
  sc_buf_init(&b);
  sc_envelope env = {.type = (uint16_t)type};
  cr_assert_eq(sc_msg_encode(&env, body, &b), 0);
  zmq_send(sock, zmq_msg_data(ident), zmq_msg_size(ident), ZMQ_SNDMORE);
  zmq_send(sock, b.data, b.len, 0);
  sc_buf_free(&b);
}

/* Receives one message on the ROUTER s as the gateway would: its sender's identity into
 * ident (which the caller closes) and its body decoded on the untrusted path (*body is a
 * new body, the caller destroys it). Returns the decoder's code. */
static int recv_untrusted(void *s, zmq_msg_t *ident, sc_envelope *env, void **body,
                          sc_diag *d) {
  zmq_msg_t data;
  zmq_msg_init(ident);
  zmq_msg_init(&data);
  zmq_msg_recv(ident, s, 0);
  zmq_msg_recv(&data, s, 0);
  *body = NULL;
  const int rc =
      sc_msg_decode_untrusted(zmq_msg_data(&data), zmq_msg_size(&data), NULL, env, body, d);
  zmq_msg_close(&data);
  return rc;
}

/* Answers 3 messages: a submit with two token events and done, garbage with an error,
 * a cancel with done("canceled"). */
static void *gateway_peer(void *p) {
  peer_t *pe = p;
  void *s = zmq_socket(pe->ctx, ZMQ_ROUTER);
  zmq_bind(s, pe->endpoint);
  for (int k = 0; k < 3; k++) {
    zmq_msg_t ident;
    sc_envelope env;
    void *body;
    sc_diag d = {0};
    const int rc = recv_untrusted(s, &ident, &env, &body, &d);
    if (rc != 0) {
      pe->rejected++;
      sc_msg_client_error e = {.request_id = 0, .code = rc, .message = d.msg};
      reply(s, &ident, SC_MSG_CLIENT_ERROR, &e);
    } else if (env.type == SC_MSG_CLIENT_SUBMIT) {
      const sc_msg_client_submit *m = body;
      pe->submits++;
      int32_t t1[] = {m->prompt.v[0] + 1}, t2[] = {m->prompt.v[0] + 2, m->prompt.v[0] + 3};
      sc_msg_client_token a = {.request_id = m->request_id, .index = 0, .tokens = {t1, 1}};
      sc_msg_client_token b = {.request_id = m->request_id, .index = 1, .tokens = {t2, 2}};
      sc_msg_client_done dn = {.request_id = m->request_id, .num_tokens = 3,
                               .prompt_tokens = (int32_t)m->prompt.n, .finish_reason = "length"};
      reply(s, &ident, SC_MSG_CLIENT_TOKEN, &a);
      reply(s, &ident, SC_MSG_CLIENT_TOKEN, &b);
      reply(s, &ident, SC_MSG_CLIENT_DONE, &dn);
    } else if (env.type == SC_MSG_CLIENT_CANCEL) {
      const sc_msg_client_cancel *m = body;
      pe->cancels++;
      sc_msg_client_done dn = {.request_id = m->request_id, .finish_reason = "canceled"};
      reply(s, &ident, SC_MSG_CLIENT_DONE, &dn);
    }
    sc_msg_body_destroy(env.type, body);
    zmq_msg_close(&ident);
  }
  const int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  usleep(100 * 1000); /* let the last replies leave before closing */
  zmq_close(s);
  return NULL;
}

Test(client, submit_stream_cancel_and_garbage) {
  char dir[] = "/tmp/sc-client-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  peer_t pe = {.ctx = zmq_ctx_new()};
  snprintf(pe.endpoint, sizeof pe.endpoint, "ipc://%s/gw", dir);
  pthread_t th;
  pthread_create(&th, NULL, gateway_peer, &pe);

  sc_client *c;
  cr_assert_eq(sc_client_connect(&c, pe.endpoint, NULL), 0);
  const int32_t prompt[] = {100, 7, 9};
  const sc_client_request req = {.prompt = prompt, .prompt_len = 3, .max_tokens = 3};
  uint64_t id;
  cr_assert_eq(sc_client_submit(c, &req, &id), 0);
  int32_t got[8], ngot = 0;
  sc_client_event ev;
  for (;;) {
    cr_assert_eq(sc_client_next(c, 5000, &ev), 0);
    cr_assert_eq(ev.request_id, id);
    if (ev.kind == SC_CLIENT_DONE) break;
    cr_assert_eq(ev.kind, SC_CLIENT_TOKENS);
    cr_assert_eq(ev.index, ngot);
    for (int32_t i = 0; i < ev.n; i++) got[ngot++] = ev.tokens[i];
  }
  cr_assert_eq(ngot, 3);
  cr_assert(got[0] == 101 && got[1] == 102 && got[2] == 103);
  cr_assert_eq(ev.num_tokens, 3);
  cr_assert_eq(ev.prompt_tokens, 3);
  cr_assert_str_eq(ev.finish_reason, "length");

  const uint8_t garbage[] = {0xdd, 0x04, 0x00, 0x00, 0x00};
  cr_assert_eq(sc_client_send_raw(c, garbage, sizeof garbage), 0);
  cr_assert_eq(sc_client_next(c, 5000, &ev), 0);
  cr_assert_eq(ev.kind, SC_CLIENT_ERROR);
  cr_assert_lt(ev.code, 0);
  cr_assert_gt(strlen(ev.message), 0);

  cr_assert_eq(sc_client_cancel(c, id), 0);
  cr_assert_eq(sc_client_next(c, 5000, &ev), 0);
  cr_assert_eq(ev.kind, SC_CLIENT_DONE);
  cr_assert_str_eq(ev.finish_reason, "canceled");
  cr_assert_eq(sc_client_next(c, 50, &ev), SC_ETIMEDOUT);

  const sc_client_request empty = {.prompt = prompt, .prompt_len = 0, .max_tokens = 3};
  cr_assert_eq(sc_client_submit(c, &empty, &id), SC_EINVAL);
  pthread_join(th, NULL);
  sc_client_close(c);
  zmq_ctx_term(pe.ctx);
  cr_assert_eq(pe.submits, 1);
  cr_assert_eq(pe.cancels, 1);
  cr_assert_eq(pe.rejected, 1);
  char sockpath[160];
  snprintf(sockpath, sizeof sockpath, "%s/gw", dir);
  unlink(sockpath);
  rmdir(dir);
}

/* Errors of the client itself, without a gateway: a string that is not a key is
 * SC_EINVAL (client.h), and a request larger than the gateway accepts is refused
 * (SC_ETOOBIG) before it is sent (past the gateway's socket limit it would be dropped
 * without an answer). */
Test(client, bad_key_and_oversized_request) {
  sc_client *c = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_client_connect_key(&c, "ipc:///nonexistent/gw", "not-a-key", &d), SC_EINVAL);
  cr_assert_null(c);
  /* a good key and an endpoint ZeroMQ refuses: an error, not 0 with no client */
  char pub[41], sec[41];
  cr_assert_eq(zmq_curve_keypair(pub, sec), 0);
  cr_assert_eq(sc_client_connect_key(&c, "bogus://x", pub, &d), SC_EIO);
  cr_assert_null(c);
  cr_assert_eq(sc_client_connect(&c, "ipc:///nonexistent/gw", &d), 0);
  /* 300000 ids of 5 bytes: over the gateway's 1 MiB limit, under its socket's 2 MiB */
  const int32_t n = 300000;
  int32_t *prompt = malloc(sizeof *prompt * (size_t)n);
  cr_assert_not_null(prompt);
  for (int32_t i = 0; i < n; i++) prompt[i] = 100000 + i;
  const sc_client_request req = {.prompt = prompt, .prompt_len = n, .max_tokens = 1};
  uint64_t id = 0;
  cr_assert_eq(sc_client_submit(c, &req, &id), SC_ETOOBIG);
  const sc_client_request small = {.prompt = prompt, .prompt_len = 16, .max_tokens = 1};
  cr_assert_eq(sc_client_submit(c, &small, &id), 0);
  free(prompt);
  sc_client_close(c);
}

/* A gateway stand-in that runs until told to stop: it records the request id of every
 * submit it receives and, when `answer`, ends the request with done. With server_secret
 * its endpoint is a CURVE server whose clients the ZAP handler of ctx vets (as the
 * gateway's: domain SC_ZAP_DOMAIN_CLIENT). */
#define SERVED_MAX 1000
typedef struct {
  char endpoint[128];
  void *ctx;
  const uint8_t *server_secret;
  bool answer;
  void *sock;
  atomic_bool stop;
  atomic_int num_ids;
  uint64_t ids[SERVED_MAX];
} served_t;

static void served_one(served_t *pe, void *s) {
  zmq_msg_t ident;
  sc_envelope env;
  void *body;
  if (recv_untrusted(s, &ident, &env, &body, NULL) == 0 && env.type == SC_MSG_CLIENT_SUBMIT) {
    const sc_msg_client_submit *m = body;
    const int k = atomic_load(&pe->num_ids);
    if (k < SERVED_MAX) pe->ids[k] = m->request_id;
    atomic_store(&pe->num_ids, k + 1);
    sc_msg_client_done dn = {.request_id = m->request_id, .finish_reason = "length"};
    if (pe->answer) reply(s, &ident, SC_MSG_CLIENT_DONE, &dn);
  }
  sc_msg_body_destroy(env.type, body);
  zmq_msg_close(&ident);
}

static void *served_loop(void *p) {
  served_t *pe = p;
  while (!atomic_load(&pe->stop)) {
    zmq_pollitem_t it = {.socket = pe->sock, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 20) > 0) served_one(pe, pe->sock);
  }
  zmq_close(pe->sock);
  return NULL;
}

/* Binds the stand-in's socket here (a bind error fails the test, which a thread could
 * not do) and serves it on a thread of its own (*th; served_stop ends it). */
static void served_start(served_t *pe, pthread_t *th) {
  pe->sock = zmq_socket(pe->ctx, ZMQ_ROUTER);
  const int one = 1, zero = 0;
  if (pe->server_secret) {
    zmq_setsockopt(pe->sock, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(pe->sock, ZMQ_CURVE_SECRETKEY, pe->server_secret, 32);
    zmq_setsockopt(pe->sock, ZMQ_ZAP_DOMAIN, SC_ZAP_DOMAIN_CLIENT, strlen(SC_ZAP_DOMAIN_CLIENT));
  }
  zmq_setsockopt(pe->sock, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_bind(pe->sock, pe->endpoint), 0, "%s", zmq_strerror(zmq_errno()));
  cr_assert_eq(pthread_create(th, NULL, served_loop, pe), 0);
}

static void served_stop(served_t *pe, pthread_t th) {
  atomic_store(&pe->stop, true);
  pthread_join(th, NULL);
}

/* A private folder for an ipc endpoint "gw" and the files "out" and "err"; rm_tmp
 * removes them. */
static void make_tmp(char dir[32]) {
  snprintf(dir, 32, "/tmp/sc-client-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void rm_tmp(const char *dir) {
  static const char *const names[] = {"gw", "out", "err"};
  char path[64];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  cr_assert_eq(rmdir(dir), 0, "%s: %s", dir, strerror(errno));
}

/* Request ids are what a cancel names, so a client's must not be guessable by another:
 * 1000 submits give ids that are never 0 (the gateway refuses it), all different, with
 * no two consecutive ones in sequence (the old ids counted up by one from a start derived
 * from the client's address), and spread over 64 bits. The ids on the wire are the ones
 * sc_client_submit returned. */
Test(client, request_ids_are_random_nonzero_and_unique) {
  char dir[32];
  make_tmp(dir);
  served_t pe = {.ctx = zmq_ctx_new()};
  snprintf(pe.endpoint, sizeof pe.endpoint, "ipc://%s/gw", dir);
  pthread_t th;
  served_start(&pe, &th);
  sc_client *c;
  cr_assert_eq(sc_client_connect(&c, pe.endpoint, NULL), 0);
  const int32_t prompt[] = {1, 2, 3};
  const sc_client_request req = {.prompt = prompt, .prompt_len = 3, .max_tokens = 1};
  static uint64_t ids[SERVED_MAX];
  for (int i = 0; i < SERVED_MAX; i++) cr_assert_eq(sc_client_submit(c, &req, &ids[i]), 0);
  for (int t = 0; t < 500 && atomic_load(&pe.num_ids) < SERVED_MAX; t++) usleep(10000);
  served_stop(&pe, th);
  sc_client_close(c);
  zmq_ctx_term(pe.ctx);
  rm_tmp(dir);
  cr_assert_eq(atomic_load(&pe.num_ids), SERVED_MAX);
  int in_sequence = 0, high = 0;
  for (int i = 0; i < SERVED_MAX; i++) {
    cr_assert_eq(pe.ids[i], ids[i], "submit %d: %llu sent as %llu", i,
                 (unsigned long long)ids[i], (unsigned long long)pe.ids[i]);
    cr_assert_neq(ids[i], 0, "submit %d got id 0", i);
    for (int j = 0; j < i; j++) cr_assert_neq(ids[i], ids[j], "submits %d and %d: one id", j, i);
    if (i > 0 && ids[i] == ids[i - 1] + 1) in_sequence++;
    high += ids[i] >> 32 != 0;
  }
  cr_assert_eq(in_sequence, 0, "%d ids follow their predecessor", in_sequence);
  cr_assert_gt(high, 0, "no id uses the upper 32 bits");
}

/* A client that presents a fixed key pair (sc_client_opts.client_secret) to a CURVE
 * gateway whose ZAP handler lists only that key: it is served; a client with another
 * fixed key, and one with a key made for its connection (sc_client_connect_key), never
 * get through: their requests time out, the peer never sees them, and the handler counts
 * them refused. */
Test(client, listed_client_key_is_served_others_never_connect) {
  char dir[32];
  make_tmp(dir);
  char srv_pub[41], srv_sec[41], ok_pub[41], ok_sec[41], other_pub[41], other_sec[41];
  cr_assert_eq(zmq_curve_keypair(srv_pub, srv_sec), 0);
  cr_assert_eq(zmq_curve_keypair(ok_pub, ok_sec), 0);
  cr_assert_eq(zmq_curve_keypair(other_pub, other_sec), 0);
  uint8_t srv_secret[32], ok_secret[32], other_secret[32];
  zmq_z85_decode(srv_secret, srv_sec);
  zmq_z85_decode(ok_secret, ok_sec);
  zmq_z85_decode(other_secret, other_sec);
  uint8_t listed[1][32];
  zmq_z85_decode(listed[0], ok_pub);
  served_t pe = {.ctx = zmq_ctx_new(), .server_secret = srv_secret, .answer = true};
  snprintf(pe.endpoint, sizeof pe.endpoint, "ipc://%s/gw", dir);
  const sc_zap_domain dom = {.domain = SC_ZAP_DOMAIN_CLIENT,
                             .keys = (const uint8_t(*)[32])listed, .num_keys = 1,
                             .name_prefix = "client-"};
  sc_zap *z;
  cr_assert_eq(sc_zap_start(pe.ctx, &dom, 1, &z, NULL), 0);
  pthread_t th;
  served_start(&pe, &th);

  sc_diag d = {0};
  sc_client *ok, *other, *anon, *bad;
  const sc_client_opts no_server = {.client_secret = ok_secret};
  cr_assert_eq(sc_client_connect_opts(&bad, pe.endpoint, &no_server, &d), SC_EINVAL);
  const sc_client_opts ok_o = {.server_key = srv_pub, .client_secret = ok_secret};
  const sc_client_opts other_o = {.server_key = srv_pub, .client_secret = other_secret};
  cr_assert_eq(sc_client_connect_opts(&ok, pe.endpoint, &ok_o, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_client_connect_opts(&other, pe.endpoint, &other_o, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_client_connect_key(&anon, pe.endpoint, srv_pub, &d), 0, "%s", d.msg);
  const int32_t prompt[] = {5, 6};
  const sc_client_request req = {.prompt = prompt, .prompt_len = 2, .max_tokens = 1};
  uint64_t id_ok, id_other, id_anon;
  /* a refused client's request waits for a connection that never takes it: ZeroMQ may
   * hold it (0) or, with no pipe at the moment of the send, refuse it after the client's
   * send timeout; either way it is never served */
  int rc = sc_client_submit(other, &req, &id_other);
  cr_assert(rc == 0 || rc == SC_ETIMEDOUT, "%s", sc_strerror(rc));
  rc = sc_client_submit(anon, &req, &id_anon);
  cr_assert(rc == 0 || rc == SC_ETIMEDOUT, "%s", sc_strerror(rc));
  cr_assert_eq(sc_client_submit(ok, &req, &id_ok), 0);
  sc_client_event ev;
  cr_assert_eq(sc_client_next(ok, 5000, &ev), 0);
  cr_assert_eq(ev.kind, SC_CLIENT_DONE);
  cr_assert_eq(ev.request_id, id_ok);
  cr_assert_eq(sc_client_next(other, 1000, &ev), SC_ETIMEDOUT);
  cr_assert_eq(sc_client_next(anon, 100, &ev), SC_ETIMEDOUT);
  sc_zap_stats st;
  sc_zap_get_stats(z, &st);
  for (int t = 0; t < 100 && st.refused < 2; t++) { /* (refused by now, unless slow) */
    usleep(50000);
    sc_zap_get_stats(z, &st);
  }
  sc_client_close(ok);
  sc_client_close(other);
  sc_client_close(anon);
  served_stop(&pe, th);
  sc_zap_stop(z);
  zmq_ctx_term(pe.ctx);
  rm_tmp(dir);
  cr_assert_eq(atomic_load(&pe.num_ids), 1, "the peer saw %d submits", atomic_load(&pe.num_ids));
  cr_assert_eq(pe.ids[0], id_ok);
  cr_assert_geq(st.admitted, 1);
  cr_assert_geq(st.refused, 2, "refused %llu", (unsigned long long)st.refused);
}

/* The sparsecp program of this build: the unit tests' CMake gives this binary no path to
 * it, and the gateway actor lives in the node program, so it is found by the build
 * tree's layout (<build>/tests/unit/test_client, <build>/tools/sparsecp). */
static void sparsecp_path(char *out, size_t cap) {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  cr_assert_gt(n, 0);
  exe[n] = '\0';
  for (int up = 0; up < 3; up++) {
    char *slash = strrchr(exe, '/');
    cr_assert_not_null(slash, "%s is not in a build tree", exe);
    *slash = '\0';
  }
  const int n_out = snprintf(out, cap, "%s/tools/sparsecp", exe);
  cr_assert(n_out > 0 && (size_t)n_out < cap);
  cr_assert_eq(access(out, X_OK), 0, "no sparsecp program at %s", out);
}

/* `sparsecp launch --pcp 1 --listen ipc://DIR/gw`, its output in DIR/out and DIR/err;
 * returns once it printed its "launched" line. It dies with this process. */
static pid_t launch_one_node(const char *dir, const char *listen) {
  char bin[PATH_MAX], out[64], err[64];
  sparsecp_path(bin, sizeof bin);
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr)) _exit(1);
    execl(bin, "sparsecp", "launch", "--pcp", "1", "--listen", listen, (char *)NULL);
    _exit(127);
  }
  for (int t = 0; t < 300; t++) {
    char line[512] = "";
    FILE *f = fopen(out, "r");
    const bool up = f && fgets(line, sizeof line, f) && strstr(line, "\"launched\"");
    if (f) fclose(f);
    if (up) return pid;
    cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "launch ended before its launched line");
    usleep(100000);
  }
  kill(pid, SIGKILL);
  cr_assert_fail("launch printed no launched line within 30 s");
  return -1;
}

/* The next event of client c within 20 s. */
static sc_client_event next_event(sc_client *c) {
  sc_client_event ev;
  cr_assert_eq(sc_client_next(c, 20000, &ev), 0, "no answer from the gateway");
  return ev;
}

/* The real gateway (a one-node cluster) refuses request id 0, for a submit and for a
 * cancel, with SC_EINVAL that says so; it used to take it as any other id (a submit was
 * served, a cancel answered "no such request"). It keeps serving: a real request from the
 * same client is answered. */
Test(client, gateway_refuses_request_id_0) {
  char dir[32], listen[64];
  make_tmp(dir);
  snprintf(listen, sizeof listen, "ipc://%s/gw", dir);
  const pid_t pid = launch_one_node(dir, listen);
  sc_client *c;
  cr_assert_eq(sc_client_connect(&c, listen, NULL), 0);
  const int32_t prompt[] = {11, 12, 13, 14};
  sc_buf b;
  sc_buf_init(&b);
  sc_msg_client_submit sub = {.request_id = 0, .prompt = {(int32_t *)prompt, 4}, .max_tokens = 2};
  sc_envelope env = {.type = SC_MSG_CLIENT_SUBMIT};
  cr_assert_eq(sc_msg_encode(&env, &sub, &b), 0);
  cr_assert_eq(sc_client_send_raw(c, b.data, b.len), 0);
  sc_client_event ev = next_event(c);
  cr_assert_eq(ev.kind, SC_CLIENT_ERROR, "a submit with id 0 got event kind %d", ev.kind);
  cr_assert_eq(ev.code, SC_EINVAL, "%d: %s", ev.code, ev.message);
  cr_assert_eq(ev.request_id, 0);
  cr_assert_not_null(strstr(ev.message, "request id 0"), "%s", ev.message);
  sc_msg_client_cancel can = {.request_id = 0};
  env.type = SC_MSG_CLIENT_CANCEL;
  cr_assert_eq(sc_msg_encode(&env, &can, &b), 0);
  cr_assert_eq(sc_client_send_raw(c, b.data, b.len), 0);
  ev = next_event(c);
  cr_assert_eq(ev.kind, SC_CLIENT_ERROR);
  cr_assert_eq(ev.code, SC_EINVAL, "a cancel of id 0: %d: %s", ev.code, ev.message);
  cr_assert_not_null(strstr(ev.message, "request id 0"), "%s", ev.message);
  sc_buf_free(&b);
  const sc_client_request req = {.prompt = prompt, .prompt_len = 4, .max_tokens = 2};
  uint64_t id;
  cr_assert_eq(sc_client_submit(c, &req, &id), 0);
  do ev = next_event(c);
  while (ev.kind == SC_CLIENT_TOKENS);
  cr_assert_eq(ev.kind, SC_CLIENT_DONE, "%s", ev.kind == SC_CLIENT_ERROR ? ev.message : "");
  cr_assert_eq(ev.request_id, id);
  sc_client_close(c);
  kill(pid, SIGTERM);
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  rm_tmp(dir);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "launch ended with %#x", status);
}
