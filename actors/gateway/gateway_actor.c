/* gateway_actor.c - the gateway (head): every client request enters the cluster here
 * (DESIGN.md §3 step 1, §5). Its fronts (gateway.h) receive requests from ZeroMQ clients
 * and from HTTP; this file keeps the requests in flight (routes) and treats them all
 * alike: one validation, one queue (the scheduler), replies routed back to the front and
 * client that asked, and the counters that GET /metrics reports.
 *
 * Clients choose their own request ids, which may collide between clients (0 is no id:
 * errors about a message whose request is unknown carry it). Accepted requests get an
 * internal id and go to the scheduler; replies come back by internal id. A client that
 * has gone away (ZeroMQ reports the peer unroutable, HTTP the connection closed) gets its
 * requests canceled so they stop using the cluster. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "actors/gateway/gateway.h"
#include "actors/pipeline.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "base/hash.h"
#include "base/log.h"

#define LOG "gateway"

static uint64_t route_hash(const void *g, int32_t pos) {
  return ((const sc_gateway *)g)->routes[pos].internal;
}
static bool route_is(const void *g, int32_t pos, const void *id) {
  return ((const sc_gateway *)g)->routes[pos].internal == *(const uint64_t *)id;
}

static sc_gw_route *find_internal(sc_gateway *g, uint64_t id) {
  const int32_t pos = sc_index_find(&g->by_internal, id, route_is, g, &id);
  return pos >= 0 ? &g->routes[pos] : NULL;
}

/* A client's request as the gateway's clients name it. */
typedef struct client_key {
  const sc_gw_peer *peer;
  uint64_t client_id;
} client_key;

static uint64_t client_hash(uint8_t front, const uint8_t *ident, size_t len, uint64_t client_id) {
  return sc_mix64(sc_fnv1a(SC_FNV_OFFSET + front, ident, len) ^ client_id);
}
static uint64_t route_client_hash(const void *g, int32_t pos) {
  const sc_gw_route *r = &((const sc_gateway *)g)->routes[pos];
  return client_hash(r->front, r->ident, r->ident_len, r->client_id);
}
static bool route_is_client(const void *g, int32_t pos, const void *key) {
  const sc_gw_route *r = &((const sc_gateway *)g)->routes[pos];
  const client_key *k = key;
  return r->client_id == k->client_id && r->front == k->peer->front &&
         r->ident_len == k->peer->ident_len &&
         memcmp(r->ident, k->peer->ident, k->peer->ident_len) == 0;
}

static sc_gw_route *find_client(sc_gateway *g, const sc_gw_peer *p, uint64_t client_id) {
  const client_key k = {p, client_id};
  const int32_t pos =
      sc_index_find(&g->by_client, client_hash(p->front, p->ident, p->ident_len, client_id),
                    route_is_client, g, &k);
  return pos >= 0 ? &g->routes[pos] : NULL;
}

/* A free position: from the free list, or past the used ones (growing the array). -1 when
 * out of memory. */
static int32_t route_alloc(sc_gateway *g) {
  if (g->free_head >= 0) {
    const int32_t pos = g->free_head;
    g->free_head = g->routes[pos].next_free;
    return pos;
  }
  if (g->num_routes == g->cap_routes) {
    const int32_t cap = g->cap_routes ? 2 * g->cap_routes : 64;
    sc_gw_route *r = realloc(g->routes, sizeof *r * (size_t)cap);
    if (r == NULL) return -1;
    g->routes = r;
    g->cap_routes = cap;
  }
  return g->num_routes++;
}

static void route_release(sc_gateway *g, int32_t pos) {
  g->routes[pos].internal = 0;
  g->routes[pos].next_free = g->free_head;
  g->free_head = pos;
}

/* A new live route under a new internal id, indexed both ways, or NULL (out of memory). */
static sc_gw_route *route_open(sc_gateway *g, const sc_gw_peer *p, uint64_t client_id) {
  const int32_t pos = route_alloc(g);
  if (pos < 0) return NULL;
  sc_gw_route *r = &g->routes[pos];
  /* Internal ids are sequential, not secret like the clients' own: no client sees one
   * (replies carry the client's id), and they travel only to the cluster's own actors,
   * over node endpoints that admit only the cluster's nodes (their CURVE keys), so
   * nobody who could guess one can send a message that names it. */
  *r = (sc_gw_route){.internal = ++g->next_internal, .client_id = client_id,
                     .front = p->front, .ident_len = p->ident_len, .submit_ns = sc_now_ns()};
  memcpy(r->ident, p->ident, p->ident_len);
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

/* Closes a route, counting how its request ended. */
static void route_close(sc_gateway *g, sc_gw_route *r, sc_gw_outcome outcome) {
  g->counters.requests[outcome]++;
  const int32_t pos = (int32_t)(r - g->routes);
  sc_index_del(&g->by_internal, r->internal, pos, route_hash, g);
  sc_index_del(&g->by_client, route_client_hash(g, pos), pos, route_client_hash, g);
  route_release(g, pos);
}

/* Sends a client message through the peer's front: 0, SC_EDOWN (the client is gone),
 * SC_EFULL (it does not read) or another code. */
static int to_peer(sc_gateway *g, uint8_t front, const void *ident, size_t ident_len, int type,
                   const void *body) {
  if (front == SC_GW_HTTP) return g->http ? sc_http_front_deliver(g->http, type, body) : SC_EDOWN;
  return sc_gw_zmq_send(g, ident, ident_len, type, body);
}

void sc_gw_reject(sc_gateway *g, const sc_gw_peer *p, uint64_t client_id, int code,
                  const char *msg) {
  sc_msg_client_error e = {.request_id = client_id, .code = code, .message = (char *)msg};
  (void)to_peer(g, p->front, p->ident, p->ident_len, SC_MSG_CLIENT_ERROR, &e);
  /* (gone or not reading: dropped) */
}

uint64_t sc_gw_client_key(const sc_gateway *g, int front, const void *who, size_t len) {
  /* keyed by a secret of this process (clients choose their routing ids: they must not
   * pick colliding keys), and the front in the low bit (a ZeroMQ client is never taken
   * for an HTTP one) */
  return sc_mix64(sc_fnv1a(g->client_salt, who, len)) << 1 | (uint64_t)(front == SC_GW_HTTP);
}

/* Sends to the scheduler from a front's callback (outside any handler, so through the
 * node with an explicit envelope). Consumes body on success. */
static int to_scheduler(sc_gateway *g, int type, void *body) {
  sc_envelope env = {.type = (uint16_t)type, .src = g->self, .dst = g->scheduler};
  return sc_node_send(g->node, &env, body);
}

/* A submit refused before it became a request of the cluster: counted, and answered. */
static void refuse(sc_gateway *g, const sc_gw_peer *p, uint64_t client_id, int code,
                   const char *msg) {
  g->counters.requests[SC_GW_REJECTED]++;
  sc_gw_reject(g, p, client_id, code, msg);
}

static const char k_no_id_zero[] =
    "request id 0 is not valid (it stands for \"no request\" in errors)";

/* A checked submit as the scheduler takes it (client_admit), the prompt moved over. */
static sc_msg_client_admit *admit_of(sc_msg_client_submit *m, uint64_t client) {
  sc_msg_client_admit *a = sc_msg_body_new(SC_MSG_CLIENT_ADMIT);
  if (a == NULL) return NULL;
  a->request_id = m->request_id;
  a->prompt = m->prompt;
  m->prompt = (sc_msg_arr_i32){0};
  a->max_tokens = m->max_tokens;
  a->temperature = m->temperature;
  a->seed = m->seed;
  a->client = client;
  a->ignore_eos = m->ignore_eos;
  return a;
}

bool sc_gw_submit(sc_gateway *g, const sc_gw_peer *p, sc_msg_client_submit *m,
                  uint64_t client) {
  if (m->request_id == 0) {
    refuse(g, p, 0, SC_EINVAL, k_no_id_zero);
    return false;
  }
  if (find_client(g, p, m->request_id)) {
    refuse(g, p, m->request_id, SC_EINVAL, "request id already in use by this client");
    return false;
  }
  sc_gw_route *r = route_open(g, p, m->request_id);
  if (r == NULL) {
    refuse(g, p, m->request_id, SC_ENOMEM, "the gateway is out of memory");
    return false;
  }
  const uint64_t prompt = m->prompt.n;
  m->request_id = r->internal;
  sc_msg_client_admit *a = admit_of(m, client);
  const int rc = a ? to_scheduler(g, SC_MSG_CLIENT_ADMIT, a) : SC_ENOMEM;
  if (rc == 0) {
    g->counters.prompt_tokens += prompt;
    sc_msg_body_destroy(SC_MSG_CLIENT_SUBMIT, m); /* (its prompt went with a) */
    return true;
  }
  if (a) { /* the prompt back to m, which the caller still owns */
    m->prompt = a->prompt;
    a->prompt = (sc_msg_arr_i32){0};
    sc_msg_body_destroy(SC_MSG_CLIENT_ADMIT, a);
  }
  m->request_id = r->client_id;
  const uint64_t client_id = r->client_id;
  route_close(g, r, SC_GW_REJECTED);
  sc_gw_reject(g, p, client_id, rc, "the scheduler is not accepting requests");
  return false;
}

bool sc_gw_cancel(sc_gateway *g, const sc_gw_peer *p, sc_msg_client_cancel *m) {
  if (m->request_id == 0) {
    sc_gw_reject(g, p, 0, SC_EINVAL, k_no_id_zero);
    return false;
  }
  sc_gw_route *r = find_client(g, p, m->request_id);
  if (r == NULL) {
    sc_gw_reject(g, p, m->request_id, SC_ENOENT, "no such request");
    return false;
  }
  m->request_id = r->internal;
  if (to_scheduler(g, SC_MSG_CLIENT_CANCEL, m) != 0) return false;
  r->cancel_sent = true;
  return true;
}

/* ---- the HTTP front's hooks ---- */

/* Every HTTP request is a client id of its own under this one peer. (ident points at an
 * empty array, not NULL: the route code copies and compares ident_len bytes of it.) */
static const uint8_t k_no_ident[1];
static const sc_gw_peer k_http_peer = {.front = SC_GW_HTTP, .ident = k_no_ident};

/* An HTTP request goes through the ZeroMQ clients' own validation: encoded and decoded as
 * untrusted input with the same limits (token ids below the vocabulary, prompt and
 * generation limits, field ranges), so that no front can pass what another refuses. The
 * round trip costs microseconds next to the step it asks for. */
static void http_submit(void *ud, sc_msg_client_submit *m, uint64_t client) {
  sc_gateway *g = ud;
  const uint64_t id = m->request_id;
  sc_envelope env = {.type = SC_MSG_CLIENT_SUBMIT};
  int rc = sc_msg_encode(&env, m, &g->out);
  sc_msg_body_destroy(SC_MSG_CLIENT_SUBMIT, m);
  void *body = NULL;
  sc_diag d = {0};
  if (rc == 0)
    rc = sc_msg_decode_untrusted(g->out.data, g->out.len, &g->ctx->cfg.limits, &env, &body, &d);
  if (rc) {
    refuse(g, &k_http_peer, id, rc, d.msg[0] ? d.msg : sc_strerror(rc));
    return;
  }
  if (!sc_gw_submit(g, &k_http_peer, body, sc_gw_client_key(g, SC_GW_HTTP, &client,
                                                             sizeof client)))
    sc_msg_body_destroy(SC_MSG_CLIENT_SUBMIT, body);
}

/* (The route is looked up first, so sc_gw_cancel never takes its "no such request" path,
 * which would answer through the front from inside the front's own callback.) */
static void http_cancel(void *ud, uint64_t id) {
  sc_gateway *g = ud;
  sc_gw_route *r = find_client(g, &k_http_peer, id);
  if (r == NULL || r->cancel_sent) return;
  sc_msg_client_cancel *m = sc_msg_body_new(SC_MSG_CLIENT_CANCEL);
  if (m == NULL) return;
  m->request_id = id;
  if (!sc_gw_cancel(g, &k_http_peer, m)) sc_msg_body_destroy(SC_MSG_CLIENT_CANCEL, m);
}

static void http_stopped(void *ud, uint64_t id) {
  sc_gw_route *r = find_client(ud, &k_http_peer, id);
  if (r) r->stopped = true;
}

static void http_refused(void *ud) { ((sc_gateway *)ud)->counters.requests[SC_GW_REJECTED]++; }

static void http_query(void *ud) {
  sc_gateway *g = ud;
  sc_msg_stats_query *q = sc_msg_body_new(SC_MSG_STATS_QUERY);
  if (q == NULL) return; /* (the front answers 503 when no report comes) */
  q->seq = ++g->stats_seq;
  if (to_scheduler(g, SC_MSG_STATS_QUERY, q) != 0) sc_msg_body_destroy(SC_MSG_STATS_QUERY, q);
}

static int http_metrics(void *ud, const sc_msg_stats_report *r, sc_buf *out) {
  return sc_gw_metrics_render(out, &((sc_gateway *)ud)->counters, r);
}

/* The model id HTTP clients name: the cluster file's served_model_name, else the model
 * file's name without its folder and extension (a model directory's name), else
 * "sparsecp". */
static void model_name(const sc_pipeline_config *cfg, char *out, size_t cap) {
  const char *p = cfg->served_model_name[0] ? cfg->served_model_name
                  : cfg->model_file[0]      ? cfg->model_file
                                            : cfg->model_dir;
  if (p[0] == '\0') p = "sparsecp";
  if (!cfg->served_model_name[0]) {
    const char *slash = strrchr(p, '/');
    if (slash) p = slash + 1;
  }
  snprintf(out, cap, "%.*s", (int)(cap - 1), p);
  char *dot = cfg->served_model_name[0] ? NULL : strrchr(out, '.');
  if (dot && dot != out) *dot = '\0';
}

static int open_http(sc_gateway *g, uv_loop_t *loop) {
  const sc_pipeline_config *cfg = &g->ctx->cfg;
  sc_diag d = {0};
  int rc = 0;
  if (cfg->tokenizer_path[0] &&
      (rc = sc_tokenizer_load(cfg->tokenizer_path, &g->tokenizer, &d)) != 0) {
    SC_ERROR(LOG, "tokenizer %s: %s", cfg->tokenizer_path, sc_diag_message(&d));
    return rc;
  }
  if (g->tokenizer && sc_tokenizer_vocab_size(g->tokenizer) > cfg->limits.vocab_size)
    SC_WARN(LOG, "the tokenizer knows %d tokens, the model %d: prompts with the others are "
                 "refused", (int)sc_tokenizer_vocab_size(g->tokenizer), (int)cfg->limits.vocab_size);
  char model[256], api_key[258] = "";
  size_t key_len = 0;
  if (cfg->http_api_key_file[0] &&
      (rc = sc_secret_read(cfg->http_api_key_file, api_key, sizeof api_key, &key_len, &d)) != 0) {
    SC_ERROR(LOG, "HTTP API key: %s", sc_diag_message(&d));
    return rc;
  }
  model_name(cfg, model, sizeof model);
  const sc_http_config hc = {
      .addr = cfg->http, .model = model, .tokenizer = g->tokenizer, .api_key = api_key,
      /* a prompt at the limit as a JSON array of ids (up to 11 bytes each), plus room */
      .max_body = (size_t)cfg->limits.max_prompt_len * 12 + 65536,
      /* no token of a byte-level BPE vocabulary spans more than a few dozen bytes (long
       * runs of one character take several): 64 per token leaves room and bounds the
       * tokenizing a request can make this loop do */
      .max_text = (size_t)cfg->limits.max_prompt_len * 64 + 4096,
      .timeout_s = (unsigned)cfg->http_timeout_s, .max_connections = 1024};
  const sc_http_hooks hooks = {.ud = g, .submit = http_submit, .cancel = http_cancel,
                               .stopped = http_stopped, .refused = http_refused,
                               .query = http_query, .metrics = http_metrics};
  rc = sc_http_front_start(loop, &hc, &hooks, &g->http, &d);
  sc_wipe(api_key, sizeof api_key); /* (the front keeps its own copy) */
  if (rc) {
    SC_ERROR(LOG, "%s", sc_diag_message(&d));
    return rc;
  }
  SC_INFO(LOG, "serving HTTP on %s (port %u), model \"%s\", %s", cfg->http,
          (unsigned)sc_http_front_port(g->http), model,
          g->tokenizer ? "text prompts" : "token-id prompts (no tokenizer)");
  if (!cfg->http_api_key_file[0])
    SC_WARN(LOG, "HTTP on %s: anyone who can reach it is served, and its traffic is readable "
                 "(no http_api_key_file; no TLS)", cfg->http);
  return 0;
}

/* ---- the actor ---- */

static int gateway_init(sc_ctx *c, void *state, const void *arg) {
  sc_gateway *g = state;
  g->ctx = *(sc_rank_ctx *const *)arg;
  g->node = sc_ctx_node(c);
  g->self = sc_self(c);
  sc_buf_init(&g->out);
  g->free_head = -1;
  if (getrandom(&g->client_salt, sizeof g->client_salt, 0) != (ssize_t)sizeof g->client_salt)
    g->client_salt = sc_mix64((uint64_t)sc_now_ns()); /* (not secret then; still works) */
  int rc = sc_index_init(&g->by_internal, 64);
  if (rc == 0) rc = sc_index_init(&g->by_client, 64);
  if (rc == 0) rc = sc_node_resolve(sc_ctx_node(c), "scheduler@0", &g->scheduler);
  if (rc == 0) rc = sc_gw_zmq_open(g, sc_ctx_uv_loop(c));
  if (rc == 0 && g->ctx->cfg.http[0]) rc = open_http(g, sc_ctx_uv_loop(c));
  return rc;
}

static void gateway_terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  sc_gateway *g = state;
  sc_http_front_stop(g->http);
  sc_tokenizer_free(g->tokenizer);
  sc_gw_zmq_close(g);
  free(g->routes);
  sc_index_free(&g->by_internal);
  sc_index_free(&g->by_client);
  sc_buf_free(&g->out);
}

/* How a request that got client_error ended: refused before its first token when the
 * cluster would not take it, else failed. */
static sc_gw_outcome error_outcome(const sc_gw_route *r, int code) {
  const bool refusal = code == SC_EINVAL || code == SC_ETOOBIG || code == SC_EFULL ||
                       code == SC_ECLOSED || code == SC_ERANGE;
  return r->tokens == 0 && refusal ? SC_GW_REJECTED : SC_GW_FAILED;
}

/* The gateway's view of a reply: tokens and latencies. */
static void count_reply(sc_gateway *g, sc_gw_route *r, int type, const void *body) {
  if (type != SC_MSG_CLIENT_TOKEN) return;
  const uint32_t n = ((const sc_msg_client_token *)body)->tokens.n;
  if (n == 0) return;
  const uint64_t now = sc_now_ns();
  if (r->tokens == 0) sc_histo_add(&g->counters.ttft, (double)(now - r->submit_ns) * 1e-9);
  else sc_histo_add(&g->counters.tpot, (double)(now - r->last_ns) * 1e-9 / n);
  r->tokens += (int32_t)n;
  r->last_ns = now;
  g->counters.generation_tokens += n;
}

static sc_gw_outcome done_outcome(const sc_gw_route *r, const sc_msg_client_done *d) {
  if (r->stopped) return SC_GW_STOP;
  if (d->finish_reason && strcmp(d->finish_reason, "canceled") == 0) return SC_GW_CANCELED;
  if (d->finish_reason && strcmp(d->finish_reason, "stop") == 0) return SC_GW_STOP;
  return SC_GW_LENGTH;
}

/* Replies from the scheduler: route by internal id. The client's own id is written into
 * the borrowed body for the encoding and put back right after, on this thread, so the
 * body is unchanged when the handler returns (no copy of a token list per reply). */
static int on_reply(sc_ctx *c, const sc_envelope *env, const void *body) {
  sc_gateway *g = sc_state(c);
  uint64_t *id_field = NULL;
  switch (env->type) {
  case SC_MSG_CLIENT_TOKEN: id_field = &((sc_msg_client_token *)body)->request_id; break;
  case SC_MSG_CLIENT_DONE: id_field = &((sc_msg_client_done *)body)->request_id; break;
  default: id_field = &((sc_msg_client_error *)body)->request_id; break;
  }
  sc_gw_route *r = find_internal(g, *id_field);
  if (r == NULL) return 0; /* canceled or already finished */
  const uint64_t internal = r->internal;
  *id_field = r->client_id;
  const int rc = to_peer(g, r->front, r->ident, r->ident_len, env->type, body);
  *id_field = internal;
  if (rc == 0) count_reply(g, r, env->type, body);
  const bool last = env->type != SC_MSG_CLIENT_TOKEN;
  if ((rc == SC_EDOWN || rc == SC_EFULL) && !last) {
    /* a client that is gone, or does not read (or a stop string ended its request): the
     * request is canceled rather than computed for nobody (the client then never hears
     * of it: it is not listening) */
    if (!r->cancel_sent) {
      SC_INFO(LOG, "client of request %llu %s: canceling it", (unsigned long long)internal,
              rc == SC_EDOWN ? "is gone" : "does not read its replies");
      sc_msg_client_cancel *m = sc_msg_body_new(SC_MSG_CLIENT_CANCEL);
      if (m) {
        m->request_id = internal;
        if (sc_send(c, g->scheduler, SC_MSG_CLIENT_CANCEL, m))
          sc_msg_body_destroy(SC_MSG_CLIENT_CANCEL, m);
      }
    }
    route_close(g, r, r->stopped ? SC_GW_STOP : SC_GW_CANCELED);
  } else if (env->type == SC_MSG_CLIENT_DONE) {
    route_close(g, r, done_outcome(r, body));
  } else if (last) {
    route_close(g, r, error_outcome(r, ((const sc_msg_client_error *)body)->code));
  }
  return 0;
}

static int on_stats_report(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  sc_gateway *g = sc_state(c);
  const sc_msg_stats_report *r = body;
  if (g->http && r->seq == g->stats_seq) sc_http_front_stats(g->http, r);
  return 0;
}

const sc_actor_spec sc_gateway_spec = {
    .name = "gateway",
    .state_size = sizeof(sc_gateway),
    .init = gateway_init,
    .terminate = gateway_terminate,
    .handlers = {[SC_MSG_CLIENT_TOKEN] = on_reply,
                 [SC_MSG_CLIENT_DONE] = on_reply,
                 [SC_MSG_CLIENT_ERROR] = on_reply,
                 [SC_MSG_STATS_REPORT] = on_stats_report},
};
