/* gateway_actor.c - the gateway (head): the cluster's client socket (DESIGN.md §3 step 1,
 * §5). A ZeroMQ ROUTER on the listen endpoint receives client messages, which are
 * untrusted: ZMQ_MAXMSGSIZE and the size limit first, then the messages module's
 * pre-walk, bounded decoding and field validation (token ids below the vocabulary,
 * prompt and generation limits). Every rejection is answered with client_error and the
 * gateway keeps serving. Accepted requests get an internal id (clients choose their own
 * ids, which may collide between clients; 0 is no id: errors about a message whose
 * request is unknown carry it) and go to the scheduler; replies come back by internal id
 * and are routed to the client that asked.
 *
 * Who is served (issue 21): with listen_key_file the endpoint is a CURVE server, and a
 * ZAP handler (base/zap.h) in the gateway's own ZeroMQ context admits the clients of
 * client_keys_file by public key, or, without that list, any client that holds the
 * server's public key (said at start, as is a tcp endpoint without CURVE: anyone who
 * can reach it is served, and its traffic is readable).
 *
 * A client that has gone away (ROUTER_MANDATORY reports the peer unroutable) gets its
 * requests canceled so they stop using the cluster. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "actors/gateway/zmq_watch.h"
#include "actors/pipeline.h"
#include "actors/rank_ctx.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "base/hash.h"
#include "base/index.h"
#include "base/log.h"
#include "base/zap.h"

#define LOG "gateway"
#define DRAIN_CAP 256
#define IDENT_MAX 256

typedef struct route {
  uint64_t internal;   /* 0: free */
  uint64_t client_id;
  uint8_t ident[IDENT_MAX];
  size_t ident_len;
  int32_t next_free;   /* free routes: the next free position, -1 at the end */
} route;

typedef struct gateway {
  sc_rank_ctx *ctx;
  sc_node *node;
  sc_actor_id self;
  void *zctx, *sock;
  sc_zap *zap;          /* admits the clients of the CURVE endpoint (NULL: plain) */
  sc_zmq_watch *watch;
  sc_actor_id scheduler;
  uint64_t next_internal;
  route *routes;
  int32_t num_routes, cap_routes;
  int32_t free_head;    /* a free position below num_routes, or -1 */
  sc_index by_internal; /* the live routes by internal id: every token reply looks one up */
  sc_index by_client;   /* ... and by (client identity, client's request id): every
                           submit checks that the id is not in use, every cancel finds it */
  sc_buf out;
} gateway;

static uint64_t route_hash(const void *g, int32_t pos) {
  return ((const gateway *)g)->routes[pos].internal;
}
static bool route_is(const void *g, int32_t pos, const void *id) {
  return ((const gateway *)g)->routes[pos].internal == *(const uint64_t *)id;
}

static route *find_internal(gateway *g, uint64_t id) {
  const int32_t pos = sc_index_find(&g->by_internal, id, route_is, g, &id);
  return pos >= 0 ? &g->routes[pos] : NULL;
}

/* A client's request as the gateway's clients name it. */
typedef struct client_key {
  const uint8_t *ident;
  size_t len;
  uint64_t client_id;
} client_key;

static uint64_t client_hash(const uint8_t *ident, size_t len, uint64_t client_id) {
  return sc_mix64(sc_fnv1a(SC_FNV_OFFSET, ident, len) ^ client_id);
}
static uint64_t route_client_hash(const void *g, int32_t pos) {
  const route *r = &((const gateway *)g)->routes[pos];
  return client_hash(r->ident, r->ident_len, r->client_id);
}
static bool route_is_client(const void *g, int32_t pos, const void *key) {
  const route *r = &((const gateway *)g)->routes[pos];
  const client_key *k = key;
  return r->client_id == k->client_id && r->ident_len == k->len &&
         memcmp(r->ident, k->ident, k->len) == 0;
}

static route *find_client(gateway *g, const void *ident, size_t len, uint64_t client_id) {
  const client_key k = {ident, len, client_id};
  const int32_t pos = sc_index_find(&g->by_client, client_hash(ident, len, client_id),
                                    route_is_client, g, &k);
  return pos >= 0 ? &g->routes[pos] : NULL;
}

/* A free position: from the free list, or past the used ones (growing the array). -1 when
 * out of memory. */
static int32_t route_alloc(gateway *g) {
  if (g->free_head >= 0) {
    const int32_t pos = g->free_head;
    g->free_head = g->routes[pos].next_free;
    return pos;
  }
  if (g->num_routes == g->cap_routes) {
    const int32_t cap = g->cap_routes ? 2 * g->cap_routes : 64;
    route *r = realloc(g->routes, sizeof *r * (size_t)cap);
    if (r == NULL) return -1;
    g->routes = r;
    g->cap_routes = cap;
  }
  return g->num_routes++;
}

static void route_release(gateway *g, int32_t pos) {
  g->routes[pos].internal = 0;
  g->routes[pos].next_free = g->free_head;
  g->free_head = pos;
}

/* A new live route under a new internal id, indexed both ways, or NULL (out of memory). */
static route *route_open(gateway *g, uint64_t client_id, const void *ident, size_t ident_len) {
  const int32_t pos = route_alloc(g);
  if (pos < 0) return NULL;
  route *r = &g->routes[pos];
  /* Internal ids are sequential, not secret like the clients' own: no client sees one
   * (replies carry the client's id), and they travel only to the cluster's own actors,
   * over node endpoints that admit only the cluster's nodes (their CURVE keys), so
   * nobody who could guess one can send a message that names it. */
  *r = (route){.internal = ++g->next_internal, .client_id = client_id, .ident_len = ident_len};
  memcpy(r->ident, ident, ident_len);
  if (sc_index_put(&g->by_internal, r->internal, pos, route_hash, g) != 0) {
    route_release(g, pos);
    return NULL;
  }
  if (sc_index_put(&g->by_client, route_client_hash(g, pos), pos, route_client_hash, g) != 0) {
    sc_index_del(&g->by_internal, r->internal, pos, route_hash, g);
    route_release(g, pos);
    return NULL;
  }
  return r;
}

static void route_close(gateway *g, route *r) {
  const int32_t pos = (int32_t)(r - g->routes);
  sc_index_del(&g->by_internal, r->internal, pos, route_hash, g);
  sc_index_del(&g->by_client, route_client_hash(g, pos), pos, route_client_hash, g);
  route_release(g, pos);
}

/* Sends an encoded client message to one client. Never waits: a client that does not
 * read its replies fills its queue (ZMQ_SNDHWM), and a blocking send would then stall this
 * loop, which the scheduler shares, for every client. Returns 0, SC_EDOWN (the client is
 * gone), SC_EFULL (its queue is full: the message is dropped) or another error code. */
static int send_to(gateway *g, const void *ident, size_t ident_len, int type, const void *body) {
  sc_envelope env = {.type = (uint16_t)type};
  const int rc = sc_msg_encode(&env, body, &g->out);
  if (rc) return rc;
  if (zmq_send(g->sock, ident, ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
    return errno == EHOSTUNREACH ? SC_EDOWN : errno == EAGAIN ? SC_EFULL : SC_EIO;
  /* (the identity frame took the client's pipe: the rest of the message goes with it) */
  return zmq_send(g->sock, g->out.data, g->out.len, ZMQ_DONTWAIT) < 0 ? SC_EIO : 0;
}

/* Sends to the scheduler from the socket callback (outside any handler, so through the
 * node with an explicit envelope). Consumes body on success. */
static int to_scheduler(gateway *g, int type, void *body) {
  sc_envelope env = {.type = (uint16_t)type, .src = g->self, .dst = g->scheduler};
  return sc_node_send(g->node, &env, body);
}

static void reject(gateway *g, const void *ident, size_t len, uint64_t client_id, int code,
                   const char *msg) {
  sc_msg_client_error e = {.request_id = client_id, .code = code, .message = (char *)msg};
  (void)send_to(g, ident, len, SC_MSG_CLIENT_ERROR, &e); /* gone or not reading: dropped */
}

static const char k_client_types_only[] =
    "clients may send only client_submit and client_cancel";

static bool client_type(int type) {
  return type == SC_MSG_CLIENT_SUBMIT || type == SC_MSG_CLIENT_CANCEL;
}

static const char k_no_id_zero[] =
    "request id 0 is not valid (it stands for \"no request\" in errors)";

/* A client's submit: opened as a route and passed to the scheduler under its internal id,
 * or answered with why not. Returns true when the scheduler took m. */
static bool client_submit(gateway *g, const uint8_t *ident, size_t ident_len,
                          sc_msg_client_submit *m) {
  if (m->request_id == 0) {
    reject(g, ident, ident_len, 0, SC_EINVAL, k_no_id_zero);
    return false;
  }
  if (find_client(g, ident, ident_len, m->request_id)) {
    reject(g, ident, ident_len, m->request_id, SC_EINVAL,
           "request id already in use by this client");
    return false;
  }
  route *r = route_open(g, m->request_id, ident, ident_len);
  if (r == NULL) {
    reject(g, ident, ident_len, m->request_id, SC_ENOMEM, "the gateway is out of memory");
    return false;
  }
  m->request_id = r->internal;
  const int rc = to_scheduler(g, SC_MSG_CLIENT_SUBMIT, m);
  if (rc == 0) return true;
  reject(g, ident, ident_len, r->client_id, rc, "the scheduler is not accepting requests");
  route_close(g, r);
  return false;
}

/* A client's cancel of one of its own requests; returns true when the scheduler took m. */
static bool client_cancel(gateway *g, const uint8_t *ident, size_t ident_len,
                          sc_msg_client_cancel *m) {
  if (m->request_id == 0) {
    reject(g, ident, ident_len, 0, SC_EINVAL, k_no_id_zero);
    return false;
  }
  route *r = find_client(g, ident, ident_len, m->request_id);
  if (r == NULL) {
    reject(g, ident, ident_len, m->request_id, SC_ENOENT, "no such request");
    return false;
  }
  m->request_id = r->internal;
  return to_scheduler(g, SC_MSG_CLIENT_CANCEL, m) == 0;
}

static void handle_client(gateway *g, const uint8_t *ident, size_t ident_len,
                          const uint8_t *data, size_t len) {
  sc_envelope env;
  void *body = NULL;
  sc_diag d = {0};
  /* Refused by its envelope before its body is decoded: clients send two small types,
   * and the others (a step plan, a global batch) are the large ones to decode. */
  if (sc_msg_peek_envelope(data, len, &env) == 0 && !client_type(env.type)) {
    reject(g, ident, ident_len, 0, SC_EPROTO, k_client_types_only);
    return;
  }
  const int rc = sc_msg_decode_untrusted(data, len, &g->ctx->cfg.limits, &env, &body, &d);
  if (rc) {
    /* a client chooses how often: one line per interval (the client gets its error) */
    static sc_log_limit rejected_log;
    unsigned long long held = 0;
    if (sc_log_limit_pass(&rejected_log, sc_now_ns(), &held))
      SC_INFO(LOG, "rejected a client message: %s; %llu more since the last such line", d.msg,
              held);
    /* the error names the request when the bytes still say which */
    const uint64_t id = sc_msg_peek_client_request_id(data, len, &g->ctx->cfg.limits);
    reject(g, ident, ident_len, id, rc, d.msg[0] ? d.msg : sc_strerror(rc));
    return;
  }
  bool taken = false;
  if (env.type == SC_MSG_CLIENT_SUBMIT)
    taken = client_submit(g, ident, ident_len, body);
  else if (env.type == SC_MSG_CLIENT_CANCEL)
    taken = client_cancel(g, ident, ident_len, body);
  else /* (an envelope the peek could not read but the decoder could) */
    reject(g, ident, ident_len, 0, SC_EPROTO, k_client_types_only);
  if (!taken) sc_msg_body_destroy(env.type, body);
}

static bool service(void *ud) {
  gateway *g = ud;
  for (int k = 0; k < DRAIN_CAP; k++) {
    uint8_t ident[IDENT_MAX];
    const int n = zmq_recv(g->sock, ident, sizeof ident, ZMQ_DONTWAIT);
    if (n < 0) return false; /* EAGAIN: drained */
    zmq_msg_t data;
    zmq_msg_init(&data);
    int more = 0;
    size_t sz = sizeof more;
    zmq_getsockopt(g->sock, ZMQ_RCVMORE, &more, &sz);
    if (more && zmq_msg_recv(&data, g->sock, 0) >= 0 && n <= IDENT_MAX)
      handle_client(g, ident, (size_t)n, zmq_msg_data(&data), zmq_msg_size(&data));
    zmq_msg_close(&data);
    /* a client that sent more frames than one message: drop the rest */
    for (zmq_getsockopt(g->sock, ZMQ_RCVMORE, &more, &sz); more;
         zmq_getsockopt(g->sock, ZMQ_RCVMORE, &more, &sz)) {
      zmq_msg_t junk;
      zmq_msg_init(&junk);
      zmq_msg_recv(&junk, g->sock, 0);
      zmq_msg_close(&junk);
    }
  }
  return true;
}

/* Starts the ZAP handler of the gateway's context: the clients of client_keys_file, or
 * without it any CURVE key. */
static int start_auth(gateway *g) {
  const sc_pipeline_config *cfg = &g->ctx->cfg;
  /* each listed key is named "client-N" by its place in the list (the User-Id of that
   * client's messages) */
  sc_zap_domain dom = {.domain = SC_ZAP_DOMAIN_CLIENT, .name_prefix = "client-",
                       .any_key = cfg->client_keys_file[0] == '\0'};
  uint8_t(*keys)[32] = NULL;
  sc_diag d = {0};
  int rc = dom.any_key
               ? 0
               : sc_curve_load_public_list(cfg->client_keys_file, &keys, &dom.num_keys, &d);
  dom.keys = (const uint8_t(*)[32])keys;
  if (rc == 0) rc = sc_zap_start(g->zctx, &dom, 1, &g->zap, &d);
  free(keys);
  if (rc) {
    SC_ERROR(LOG, "cannot vet the clients of %s: %s", cfg->listen, sc_diag_message(&d));
    return rc;
  }
  if (!dom.any_key && dom.num_keys == 0)
    SC_WARN(LOG, "%s lists no client key: no client will be served", cfg->client_keys_file);
  return 0;
}

/* Makes the socket a CURVE server whose clients the ZAP handler vets. Before the bind:
 * libzmq admits every CURVE client of a context that has no handler. */
static int use_curve(gateway *g) {
  sc_pipeline_config *cfg = &g->ctx->cfg;
  const bool ok =
      sc_curve_make_server(g->sock, cfg->listen_secret, SC_ZAP_DOMAIN_CLIENT) == 0;
  /* ZeroMQ keeps its own copy; this one is no longer needed */
  sc_wipe(cfg->listen_secret, sizeof cfg->listen_secret);
  if (!ok) {
    SC_ERROR(LOG, "cannot use CURVE on %s: %s", cfg->listen, zmq_strerror(zmq_errno()));
    return SC_EIO;
  }
  return start_auth(g);
}

/* The client socket with its limits, CURVE when configured, bound. */
static int open_socket(gateway *g) {
  const sc_pipeline_config *cfg = &g->ctx->cfg;
  g->zctx = zmq_ctx_new();
  g->sock = g->zctx ? zmq_socket(g->zctx, ZMQ_ROUTER) : NULL;
  if (g->sock == NULL) return SC_EIO;
  const int one = 1, linger = 500;
  /* ZeroMQ drops a client's connection past ZMQ_MAXMSGSIZE without a word; twice the
   * decoder's limit lets a moderately oversized message through to get an ETOOBIG reply,
   * while a huge one never reaches memory. */
  const int64_t maxsize = 2 * (int64_t)cfg->limits.max_bytes + 4096;
  zmq_setsockopt(g->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
  zmq_setsockopt(g->sock, ZMQ_MAXMSGSIZE, &maxsize, sizeof maxsize);
  /* a short linger: replies already queued (errors before a shutdown) still leave */
  zmq_setsockopt(g->sock, ZMQ_LINGER, &linger, sizeof linger);
  int rc = cfg->listen_curve ? use_curve(g) : 0;
  if (rc) return rc;
  sc_diag d = {0}; /* an ipc endpoint is as private as its folder */
  if ((rc = sc_ipc_check_private(cfg->listen, &d)) != 0) {
    SC_ERROR(LOG, "cannot listen on %s", sc_diag_message(&d));
    return rc;
  }
  if (zmq_bind(g->sock, cfg->listen) != 0) {
    SC_ERROR(LOG, "cannot listen on %s: %s", cfg->listen, zmq_strerror(zmq_errno()));
    return SC_EIO;
  }
  return 0;
}

/* Says at start when anyone who can reach the endpoint, or anyone who holds the server
 * key, is served: an operator should read it in the log before an outsider finds it. */
static void announce(const sc_pipeline_config *cfg) {
  if (!cfg->listen_curve) {
    SC_INFO(LOG, "accepting clients on %s", cfg->listen);
    if (!sc_endpoint_is_local(cfg->listen))
      SC_WARN(LOG, "clients on %s are not authenticated and their traffic is readable "
                   "(no listen_key_file)", cfg->listen);
    return;
  }
  SC_INFO(LOG, "accepting clients on %s with CURVE, server key %s", cfg->listen,
          cfg->listen_public);
  if (cfg->client_keys_file[0] == '\0')
    SC_WARN(LOG, "clients on %s: anyone who holds the server key %s is served (no "
                 "client_keys_file)", cfg->listen, cfg->listen_public);
}

static int gateway_init(sc_ctx *c, void *state, const void *arg) {
  gateway *g = state;
  g->ctx = *(sc_rank_ctx *const *)arg;
  g->node = sc_ctx_node(c);
  g->self = sc_self(c);
  sc_buf_init(&g->out);
  g->free_head = -1;
  const sc_pipeline_config *cfg = &g->ctx->cfg;
  int rc = sc_index_init(&g->by_internal, 64);
  if (rc == 0) rc = sc_index_init(&g->by_client, 64);
  if (rc) return rc;
  rc = sc_node_resolve(sc_ctx_node(c), "scheduler@0", &g->scheduler);
  if (rc) return rc;
  if (cfg->listen[0] == '\0') {
    SC_ERROR(LOG, "the cluster file has no \"listen\" endpoint for clients");
    return SC_EINVAL;
  }
  if (cfg->client_keys_file[0] && !cfg->listen_curve) {
    /* (a plain endpoint would serve everyone while the list seemed to say who) */
    SC_ERROR(LOG, "client_keys_file %s needs listen_key_file: clients are told apart by "
                  "their CURVE keys", cfg->client_keys_file);
    return SC_EINVAL;
  }
  if ((rc = open_socket(g)) != 0) return rc;
  rc = sc_zmq_watch_start(sc_ctx_uv_loop(c), g->sock, service, g, &g->watch);
  if (rc) return rc;
  announce(cfg);
  return 0;
}

static void gateway_terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  gateway *g = state;
  sc_zmq_watch_close(g->watch);
  if (g->sock) zmq_close(g->sock);
  sc_zap_stop(g->zap); /* (its socket is one of the context's: before the term) */
  if (g->zctx) zmq_ctx_term(g->zctx);
  free(g->routes);
  sc_index_free(&g->by_internal);
  sc_index_free(&g->by_client);
  sc_buf_free(&g->out);
}

/* Replies from the scheduler: route by internal id. The client's own id is written into
 * the borrowed body for the encoding and put back right after, on this thread, so the
 * body is unchanged when the handler returns (no copy of a token list per reply). */
static int on_reply(sc_ctx *c, const sc_envelope *env, const void *body) {
  gateway *g = sc_state(c);
  uint64_t *id_field = NULL;
  switch (env->type) {
  case SC_MSG_CLIENT_TOKEN: id_field = &((sc_msg_client_token *)body)->request_id; break;
  case SC_MSG_CLIENT_DONE: id_field = &((sc_msg_client_done *)body)->request_id; break;
  default: id_field = &((sc_msg_client_error *)body)->request_id; break;
  }
  route *r = find_internal(g, *id_field);
  if (r == NULL) return 0; /* canceled or already finished */
  const uint64_t internal = r->internal;
  *id_field = r->client_id;
  const int rc = send_to(g, r->ident, r->ident_len, env->type, body);
  *id_field = internal;
  const bool last = env->type != SC_MSG_CLIENT_TOKEN;
  if ((rc == SC_EDOWN || rc == SC_EFULL) && !last) {
    /* a client that is gone, or does not read: its request is canceled rather than
     * computed for nobody (the client then never hears of it: it is not listening) */
    SC_INFO(LOG, "client of request %llu %s: canceling it", (unsigned long long)internal,
            rc == SC_EDOWN ? "is gone" : "does not read its replies");
    sc_msg_client_cancel *m = sc_msg_body_new(SC_MSG_CLIENT_CANCEL);
    if (m) {
      m->request_id = internal;
      if (sc_send(c, g->scheduler, SC_MSG_CLIENT_CANCEL, m)) sc_msg_body_destroy(SC_MSG_CLIENT_CANCEL, m);
    }
    route_close(g, r);
  } else if (last) {
    route_close(g, r);
  }
  return 0;
}

const sc_actor_spec sc_gateway_spec = {
    .name = "gateway",
    .state_size = sizeof(gateway),
    .init = gateway_init,
    .terminate = gateway_terminate,
    .handlers = {[SC_MSG_CLIENT_TOKEN] = on_reply,
                 [SC_MSG_CLIENT_DONE] = on_reply,
                 [SC_MSG_CLIENT_ERROR] = on_reply},
};
