/* zmq_front.c - the gateway's ZeroMQ front: the cluster's client socket (DESIGN.md §5,
 * docs/pipeline.md). A ROUTER on the listen endpoint receives client messages, which are
 * untrusted: ZMQ_MAXMSGSIZE and the size limit first, then the messages module's
 * pre-walk, bounded decoding and field validation (token ids below the vocabulary,
 * prompt and generation limits). Every rejection is answered with client_error and the
 * gateway keeps serving.
 *
 * Who is served (issue 21): with listen_key_file the endpoint is a CURVE server, and a
 * ZAP handler (base/zap.h) in the gateway's own ZeroMQ context admits the clients of
 * client_keys_file by public key, or, without that list, any client that holds the
 * server's public key (said at start, as is a tcp endpoint without CURVE: anyone who
 * can reach it is served, and its traffic is readable). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "actors/gateway/gateway.h"
#include "actors/pipeline.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "base/log.h"

#define LOG "gateway"
#define DRAIN_CAP 256

/* Sends an encoded client message to one client. Never waits: a client that does not
 * read its replies fills its queue (ZMQ_SNDHWM), and a blocking send would then stall this
 * loop, which the scheduler shares, for every client. Returns 0, SC_EDOWN (the client is
 * gone), SC_EFULL (its queue is full: the message is dropped) or another error code. */
int sc_gw_zmq_send(sc_gateway *g, const void *ident, size_t ident_len, int type, const void *body) {
  sc_envelope env = {.type = (uint16_t)type};
  const int rc = sc_msg_encode(&env, body, &g->out);
  if (rc) return rc;
  if (zmq_send(g->sock, ident, ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
    return errno == EHOSTUNREACH ? SC_EDOWN : errno == EAGAIN ? SC_EFULL : SC_EIO;
  /* (the identity frame took the client's pipe: the rest of the message goes with it) */
  return zmq_send(g->sock, g->out.data, g->out.len, ZMQ_DONTWAIT) < 0 ? SC_EIO : 0;
}

static const char k_client_types_only[] =
    "clients may send only client_submit and client_cancel";

static bool client_type(int type) {
  return type == SC_MSG_CLIENT_SUBMIT || type == SC_MSG_CLIENT_CANCEL;
}

static void handle_client(sc_gateway *g, const uint8_t *ident, size_t ident_len,
                          const uint8_t *data, size_t len) {
  const sc_gw_peer peer = {.front = SC_GW_ZMQ, .ident = ident, .ident_len = ident_len};
  sc_envelope env = {0};
  void *body = NULL;
  sc_diag d = {0};
  /* Refused by its envelope before its body is decoded: clients send two small types,
   * and the others (a step plan, a global batch) are the large ones to decode. */
  if (sc_msg_peek_envelope(data, len, &env) == 0 && !client_type(env.type)) {
    sc_gw_reject(g, &peer, 0, SC_EPROTO, k_client_types_only);
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
    if (env.type == SC_MSG_CLIENT_SUBMIT) g->counters.requests[SC_GW_REJECTED]++;
    sc_gw_reject(g, &peer, id, rc, d.msg[0] ? d.msg : sc_strerror(rc));
    return;
  }
  bool taken = false;
  if (env.type == SC_MSG_CLIENT_SUBMIT)
    taken = sc_gw_submit(g, &peer, body, sc_gw_client_key(g, SC_GW_ZMQ, ident, ident_len));
  else if (env.type == SC_MSG_CLIENT_CANCEL)
    taken = sc_gw_cancel(g, &peer, body);
  else /* (an envelope the peek could not read but the decoder could) */
    sc_gw_reject(g, &peer, 0, SC_EPROTO, k_client_types_only);
  if (!taken) sc_msg_body_destroy(env.type, body);
}

static bool service(void *ud) {
  sc_gateway *g = ud;
  for (int k = 0; k < DRAIN_CAP; k++) {
    uint8_t ident[SC_GW_IDENT_MAX];
    const int n = zmq_recv(g->sock, ident, sizeof ident, ZMQ_DONTWAIT);
    if (n < 0) return false; /* EAGAIN: drained */
    zmq_msg_t data;
    zmq_msg_init(&data);
    int more = 0;
    size_t sz = sizeof more;
    zmq_getsockopt(g->sock, ZMQ_RCVMORE, &more, &sz);
    if (more && zmq_msg_recv(&data, g->sock, 0) >= 0 && n <= SC_GW_IDENT_MAX)
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
static int start_auth(sc_gateway *g) {
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
static int use_curve(sc_gateway *g) {
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
static int open_socket(sc_gateway *g) {
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

int sc_gw_zmq_open(sc_gateway *g, uv_loop_t *loop) {
  const sc_pipeline_config *cfg = &g->ctx->cfg;
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
  int rc = open_socket(g);
  if (rc == 0) rc = sc_zmq_watch_start(loop, g->sock, service, g, &g->watch);
  if (rc == 0) announce(cfg);
  return rc;
}

void sc_gw_zmq_close(sc_gateway *g) {
  sc_zmq_watch_close(g->watch);
  if (g->sock) zmq_close(g->sock);
  sc_zap_stop(g->zap); /* (its socket is one of the context's: before the term) */
  if (g->zctx) zmq_ctx_term(g->zctx);
}
