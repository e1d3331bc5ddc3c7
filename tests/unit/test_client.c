/* The client API against a peer that speaks the gateway side of the protocol on a real
 * ROUTER socket (an ipc endpoint in a private temporary folder). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

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

/* Answers 3 messages: a submit with two token events and done, garbage with an error,
 * a cancel with done("canceled"). */
static void *gateway_peer(void *p) {
  peer_t *pe = p;
  void *s = zmq_socket(pe->ctx, ZMQ_ROUTER);
  zmq_bind(s, pe->endpoint);
  for (int k = 0; k < 3; k++) {
    zmq_msg_t ident, data;
    zmq_msg_init(&ident);
    zmq_msg_init(&data);
    zmq_msg_recv(&ident, s, 0);
    zmq_msg_recv(&data, s, 0);
    sc_envelope env;
    void *body = NULL;
    sc_diag d = {0};
    const int rc = sc_msg_decode_untrusted(zmq_msg_data(&data), zmq_msg_size(&data), NULL,
                                           &env, &body, &d);
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
    zmq_msg_close(&data);
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
