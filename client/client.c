/* client.c - the client side of the gateway protocol over a ZeroMQ DEALER. */
#include "client/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <zmq.h>

#include "base/clock.h"
#include "base/curve_key.h"
#include "messages/messages.h"

/* How fast a client learns that the server went away: a process that dies closes its
 * connections at once (ipc, or tcp to a live host: the monitor sees it disconnect); a
 * host that dies or a network that splits is found by ZMTP heartbeats, one every
 * SC_CLIENT_HEARTBEAT_MS, the connection dropped after SC_CLIENT_HEARTBEAT_TIMEOUT_MS
 * without an answer: within 2 s either way. */
#define SC_CLIENT_HEARTBEAT_MS 500
#define SC_CLIENT_HEARTBEAT_TIMEOUT_MS 1500
/* How long a send may wait for a connection to take it. ZeroMQ holds messages for a
 * connection still being made, but a DEALER with no connection at that moment (one that
 * has not come up yet, or whose handshake the server refused: a key it does not list)
 * blocks the sender; without a bound a client the server refuses waited there for good. */
#define SC_CLIENT_SEND_TIMEOUT_MS 10000
#define SC_CLIENT_LOST "the server went away (its connection was lost): the request's end is unknown"

struct sc_client {
  void *ctx, *sock;
  void *mon;     /* PAIR: the socket monitor's connect and disconnect events */
  bool up;       /* a connection completed its handshake (CURVE's too) */
  bool lost;     /* that connection went down and none has come back */
  sc_buf out;
  /* the last decoded reply: the event points into it */
  int last_type;
  void *last_body;
  /* requests sent and not ended (done or error): they fail with SC_EDOWN when the
   * connection is lost, since no answer will come on it */
  uint64_t *live;
  int32_t num_live, cap_live;
};

int sc_client_connect(sc_client **out, const char *endpoint, sc_diag *d) {
  return sc_client_connect_opts(out, endpoint, NULL, d);
}

int sc_client_connect_key(sc_client **out, const char *endpoint, const char *server_key,
                          sc_diag *d) {
  const sc_client_opts o = {.server_key = server_key};
  return sc_client_connect_opts(out, endpoint, &o, d);
}

/* This client's CURVE key pair: the given secret with its public half, or a pair made for
 * this connection. */
static int client_keys(const uint8_t *secret, uint8_t pub[32], uint8_t sec[32], sc_diag *d) {
  char pub_z85[SC_CURVE_Z85_LEN + 1], sec_z85[SC_CURVE_Z85_LEN + 1];
  bool ok;
  if (secret)
    ok = zmq_z85_encode(sec_z85, secret, 32) != NULL && zmq_curve_public(pub_z85, sec_z85) == 0;
  else
    ok = zmq_curve_keypair(pub_z85, sec_z85) == 0;
  if (ok) {
    zmq_z85_decode(pub, pub_z85);
    zmq_z85_decode(sec, sec_z85);
  }
  sc_wipe(sec_z85, sizeof sec_z85);
  return ok ? 0 : sc_fail(d, SC_EIO, "client: %s", zmq_strerror(zmq_errno()));
}

/* Makes the socket a CURVE client of the server whose public key is o->server_key. The
 * gateway authenticates itself to the client and encrypts; whether it also checks who
 * the client is depends on its client_keys_file, which lists o->client_secret's public
 * half or not. */
static int use_curve(void *sock, const sc_client_opts *o, sc_diag *d) {
  uint8_t server[32], pub[32], sec[32];
  sc_diag why = {0};
  if (sc_curve_decode(o->server_key, server, &why) != 0)
    return sc_fail(d, SC_EINVAL, "client: the server key: %s", sc_diag_message(&why));
  if (!zmq_has("curve"))
    return sc_fail(d, SC_ENOTSUP, "client: this libzmq has no CURVE security");
  int rc = client_keys(o->client_secret, pub, sec, d);
  if (rc == 0 && sc_curve_make_client(sock, pub, sec, server) != 0)
    rc = sc_fail(d, SC_EIO, "client: %s", zmq_strerror(zmq_errno()));
  sc_wipe(sec, sizeof sec);
  return rc;
}

int sc_client_connect_opts(sc_client **out, const char *endpoint, const sc_client_opts *o,
                           sc_diag *d) {
  *out = NULL;
  const sc_client_opts plain = {0};
  if (o == NULL) o = &plain;
  if (o->client_secret != NULL && o->server_key == NULL)
    return sc_fail(d, SC_EINVAL, "client: a client key needs the server's key (CURVE)");
  int rc = SC_EIO;
  sc_client *c = calloc(1, sizeof *c);
  if (c == NULL) return sc_fail(d, SC_ENOMEM, "client: out of memory");
  c->ctx = zmq_ctx_new();
  c->sock = c->ctx ? zmq_socket(c->ctx, ZMQ_DEALER) : NULL;
  if (c->sock == NULL) {
    rc = sc_fail(d, SC_EIO, "client: %s", zmq_strerror(zmq_errno()));
    goto fail;
  }
  const int zero = 0, ivl = SC_CLIENT_HEARTBEAT_MS, hb_to = SC_CLIENT_HEARTBEAT_TIMEOUT_MS;
  zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(c->sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
  zmq_setsockopt(c->sock, ZMQ_HEARTBEAT_TIMEOUT, &hb_to, sizeof hb_to);
  const int send_to = SC_CLIENT_SEND_TIMEOUT_MS;
  zmq_setsockopt(c->sock, ZMQ_SNDTIMEO, &send_to, sizeof send_to);
  if (o->server_key != NULL && (rc = use_curve(c->sock, o, d)) != 0) goto fail;
  char mon_ep[64];
  snprintf(mon_ep, sizeof mon_ep, "inproc://sc-client-monitor-%p", (void *)c);
  if (zmq_socket_monitor(c->sock, mon_ep,
                         ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) != 0 ||
      (c->mon = zmq_socket(c->ctx, ZMQ_PAIR)) == NULL || zmq_connect(c->mon, mon_ep) != 0) {
    rc = sc_fail(d, SC_EIO, "client: cannot monitor the connection: %s",
                 zmq_strerror(zmq_errno()));
    goto fail;
  }
  zmq_setsockopt(c->mon, ZMQ_LINGER, &zero, sizeof zero);
  if (zmq_connect(c->sock, endpoint) != 0) {
    /* (rc is set here: after use_curve succeeded it held 0, and a bad endpoint with a
     * server key returned 0 and no client) */
    rc = sc_fail(d, SC_EIO, "client: cannot connect to %s: %s", endpoint,
                 zmq_strerror(zmq_errno()));
    goto fail;
  }
  sc_buf_init(&c->out);
  *out = c;
  return 0;
fail:
  if (c->mon) zmq_close(c->mon);
  if (c->sock) zmq_close(c->sock);
  if (c->ctx) zmq_ctx_term(c->ctx);
  free(c);
  return rc; /* SC_EINVAL for a bad key, as client.h says */
}

void sc_client_close(sc_client *c) {
  if (c == NULL) return;
  sc_msg_body_destroy(c->last_type, c->last_body);
  zmq_socket_monitor(c->sock, NULL, 0);
  zmq_close(c->mon);
  zmq_close(c->sock);
  zmq_ctx_term(c->ctx);
  sc_buf_free(&c->out);
  free(c->live);
  free(c);
}

static int live_add(sc_client *c, uint64_t id) {
  if (c->num_live == c->cap_live) {
    const int32_t cap = c->cap_live ? 2 * c->cap_live : 16;
    uint64_t *v = realloc(c->live, sizeof *v * (size_t)cap);
    if (v == NULL) return SC_ENOMEM;
    c->live = v;
    c->cap_live = cap;
  }
  c->live[c->num_live++] = id;
  return 0;
}

static bool is_live(const sc_client *c, uint64_t id) {
  for (int32_t i = 0; i < c->num_live; i++)
    if (c->live[i] == id) return true;
  return false;
}

/* A new request id: random (client.h says why), not 0 and not one in flight. */
static int new_id(sc_client *c, uint64_t *id) {
  do {
    size_t got = 0;
    while (got < sizeof *id) {
      const ssize_t n = getrandom((uint8_t *)id + got, sizeof *id - got, 0);
      if (n < 0 && errno != EINTR) return SC_ESYS;
      if (n > 0) got += (size_t)n;
    }
  } while (*id == 0 || is_live(c, *id));
  return 0;
}

static void live_end(sc_client *c, uint64_t id) {
  for (int32_t i = c->num_live - 1; i >= 0; i--)
    if (c->live[i] == id) {
      c->live[i] = c->live[--c->num_live];
      return;
    }
}

/* Reads the monitor's waiting events: the connection went down, or (back) up. */
static void read_monitor(sc_client *c) {
  for (;;) {
    zmq_msg_t ev, addr;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, c->mon, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&ev);
      return;
    }
    uint16_t what = 0;
    if (zmq_msg_size(&ev) >= sizeof what) memcpy(&what, zmq_msg_data(&ev), sizeof what);
    zmq_msg_close(&ev);
    zmq_msg_init(&addr); /* (the second frame: the endpoint) */
    zmq_msg_recv(&addr, c->mon, 0);
    zmq_msg_close(&addr);
    /* a connection that never completed its handshake (a wrong server key) is not a
     * lost server: nothing was ever said on it */
    if (what == ZMQ_EVENT_DISCONNECTED && c->up) {
      c->up = false;
      c->lost = true;
    } else if (what == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      c->up = true;
      c->lost = false;
    }
  }
}

/* zmq_send of len bytes: 0, SC_ETIMEDOUT when no connection took it within
 * SC_CLIENT_SEND_TIMEOUT_MS, SC_EIO. */
static int send_bytes(sc_client *c, const void *data, size_t len) {
  if (zmq_send(c->sock, data, len, 0) >= 0) return 0;
  return zmq_errno() == EAGAIN ? SC_ETIMEDOUT : SC_EIO;
}

static int send_msg(sc_client *c, int type, const void *body) {
  sc_envelope env = {.type = (uint16_t)type};
  int rc = sc_msg_encode(&env, body, &c->out);
  if (rc) return rc;
  return send_bytes(c, c->out.data, c->out.len);
}

int sc_client_submit(sc_client *c, const sc_client_request *req, uint64_t *request_id) {
  if (req->prompt_len < 1 || req->prompt == NULL || req->max_tokens < 1) return SC_EINVAL;
  uint64_t id;
  int rc = new_id(c, &id);
  if (rc) return rc;
  sc_msg_client_submit m = {
      .request_id = id,
      .prompt = {.v = (int32_t *)req->prompt, .n = (uint32_t)req->prompt_len},
      .max_tokens = req->max_tokens,
      .temperature = req->temperature,
      .top_k = req->top_k,
      .seed = req->seed,
      .ignore_eos = req->ignore_eos,
  };
  sc_envelope env = {.type = SC_MSG_CLIENT_SUBMIT};
  if ((rc = sc_msg_encode(&env, &m, &c->out)) != 0) return rc;
  /* The gateway refuses a larger message (SC_ETOOBIG), or past its socket's limit drops
   * it without a word and the caller would wait for an answer that never comes: refuse
   * it here. (The gateway runs the default limits: the cluster file does not change
   * max_bytes.) */
  sc_msg_limits lim;
  sc_msg_limits_default(&lim);
  if (c->out.len > lim.max_bytes) return SC_ETOOBIG;
  read_monitor(c);
  if (c->lost) return SC_EDOWN; /* (ZeroMQ would hold it until a server came back) */
  if ((rc = live_add(c, id)) != 0) return rc;
  if ((rc = send_bytes(c, c->out.data, c->out.len)) != 0) {
    live_end(c, id);
    return rc;
  }
  *request_id = id;
  return 0;
}

int sc_client_cancel(sc_client *c, uint64_t request_id) {
  sc_msg_client_cancel m = {.request_id = request_id};
  return send_msg(c, SC_MSG_CLIENT_CANCEL, &m);
}

int sc_client_send_raw(sc_client *c, const void *data, size_t len) {
  return send_bytes(c, data, len);
}

/* The next request in flight fails: the connection it was sent on is gone. */
static int lost_event(sc_client *c, sc_client_event *ev) {
  memset(ev, 0, sizeof *ev);
  ev->kind = SC_CLIENT_ERROR;
  ev->request_id = c->live[--c->num_live];
  ev->code = SC_EDOWN;
  ev->message = SC_CLIENT_LOST;
  return 0;
}

int sc_client_next(sc_client *c, int timeout_ms, sc_client_event *ev) {
  sc_msg_body_destroy(c->last_type, c->last_body);
  c->last_body = NULL;
  const int64_t until = timeout_ms < 0 ? -1 : (int64_t)(sc_now_ns() / 1000000) + timeout_ms;
  for (;;) {
    read_monitor(c);
    /* (replies that came before the connection went are read first: they are answers) */
    zmq_pollitem_t it[2] = {{.socket = c->sock, .events = ZMQ_POLLIN},
                            {.socket = c->mon, .events = ZMQ_POLLIN}};
    if (c->lost && c->num_live > 0) {
      if (zmq_poll(it, 1, 0) > 0) break;
      return lost_event(c, ev);
    }
    int64_t left = until < 0 ? -1 : until - (int64_t)(sc_now_ns() / 1000000);
    if (until >= 0 && left < 0) left = 0; /* (a timeout of 0 still looks once) */
    const int n = zmq_poll(it, 2, (long)left);
    if (n < 0) return SC_EIO;
    if (n == 0) return SC_ETIMEDOUT;
    if (it[0].revents & ZMQ_POLLIN) break;
  }
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  if (zmq_msg_recv(&msg, c->sock, 0) < 0) {
    zmq_msg_close(&msg);
    return SC_EIO;
  }
  sc_envelope env;
  void *body = NULL;
  const int rc = sc_msg_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &env, &body, NULL);
  zmq_msg_close(&msg);
  if (rc) return SC_EPROTO;
  c->last_type = env.type;
  c->last_body = body;
  memset(ev, 0, sizeof *ev);
  switch (env.type) {
  case SC_MSG_CLIENT_TOKEN: {
    const sc_msg_client_token *t = body;
    ev->kind = SC_CLIENT_TOKENS;
    ev->request_id = t->request_id;
    ev->index = t->index;
    ev->tokens = t->tokens.v;
    ev->n = (int32_t)t->tokens.n;
    ev->margins = t->margins.n == t->tokens.n ? t->margins.v : NULL;
    return 0;
  }
  case SC_MSG_CLIENT_DONE: {
    const sc_msg_client_done *t = body;
    live_end(c, t->request_id);
    ev->kind = SC_CLIENT_DONE;
    ev->request_id = t->request_id;
    ev->num_tokens = t->num_tokens;
    ev->prompt_tokens = t->prompt_tokens;
    ev->finish_reason = t->finish_reason ? t->finish_reason : "";
    return 0;
  }
  case SC_MSG_CLIENT_ERROR: {
    const sc_msg_client_error *t = body;
    live_end(c, t->request_id);
    ev->kind = SC_CLIENT_ERROR;
    ev->request_id = t->request_id;
    ev->code = t->code;
    ev->message = t->message ? t->message : "";
    return 0;
  }
  default:
    return SC_EPROTO;
  }
}
