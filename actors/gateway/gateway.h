/* gateway.h - the gateway's parts (head node; DESIGN.md §3 step 1, docs/http.md), shared
 * by its files and by nothing else:
 *
 *   gateway_actor.c  the actor: the requests in flight (routes), one validation and one
 *                    queue (the scheduler) for every front, replies routed back, counters
 *   zmq_front.c      the ZeroMQ client socket (sc_client_*, `sparsecp submit`)
 *   http_front.c     the HTTP server (OpenAI completions, health, metrics)
 *
 * A front hands the gateway a client's submit or cancel together with the peer that sent
 * it; the gateway answers through that peer's front. A route remembers its peer, so a
 * reply goes back the way the request came.
 *
 * Threads: the gateway's loop only (the scheduler's, on the head).
 */
#ifndef SC_GATEWAY_H
#define SC_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/gateway/http_front.h"
#include "actors/gateway/metrics.h"
#include "actors/gateway/zmq_watch.h"
#include "actors/rank_ctx.h"
#include "actors/runtime/sc_actor.h"
#include "base/index.h"
#include "base/zap.h"
#include "messages/buf.h"

#define SC_GW_IDENT_MAX 256

typedef enum sc_gw_front { SC_GW_ZMQ = 0, SC_GW_HTTP = 1 } sc_gw_front;

/* Who sent a client message: a front and, on ZeroMQ, the client's routing id (every
 * HTTP request is its own client id under one HTTP peer). */
typedef struct sc_gw_peer {
  uint8_t front;          /* sc_gw_front */
  const uint8_t *ident;
  size_t ident_len;
} sc_gw_peer;

typedef struct sc_gw_route {
  uint64_t internal;      /* 0: free */
  uint64_t client_id;
  uint8_t front;
  bool stopped;           /* ended by its front at a stop string: counted as "stop" */
  bool cancel_sent;       /* a client_cancel went to the scheduler: not sent twice */
  uint8_t ident[SC_GW_IDENT_MAX];
  size_t ident_len;
  int32_t next_free;      /* free routes: the next free position, -1 at the end */
  int32_t tokens;         /* delivered so far */
  uint64_t submit_ns, last_ns;
} sc_gw_route;

typedef struct sc_gateway {
  sc_rank_ctx *ctx;
  sc_node *node;
  sc_actor_id self;
  sc_actor_id scheduler;
  /* the ZeroMQ front */
  void *zctx, *sock;
  sc_zap *zap;            /* admits the clients of the CURVE endpoint (NULL: plain) */
  sc_zmq_watch *watch;
  sc_buf out;
  /* the HTTP front (NULL: none) */
  sc_http_front *http;
  sc_tokenizer *tokenizer;
  uint64_t stats_seq;
  /* routes */
  uint64_t next_internal;
  sc_gw_route *routes;
  int32_t num_routes, cap_routes;
  int32_t free_head;      /* a free position below num_routes, or -1 */
  sc_index by_internal;   /* the live routes by internal id: every token reply looks one up */
  sc_index by_client;     /* ... and by (front, client identity, client's request id):
                             every submit checks that the id is not in use, every cancel
                             finds it */
  sc_gw_counters counters;
  uint64_t client_salt;   /* keys sc_gw_client_key */
} sc_gateway;

/* A client's submit: opened as a route and passed to the scheduler under its internal id
 * as the client's (client_admit), or answered through the peer's front with why not.
 * Returns true when the scheduler took it (m is then consumed; otherwise the caller still
 * owns m). */
bool sc_gw_submit(sc_gateway *g, const sc_gw_peer *p, sc_msg_client_submit *m,
                  uint64_t client);
/* The scheduler's name for a client (its fair shares): who (a ZeroMQ routing id, an HTTP
 * client's address) of the given front, hashed with this gateway's secret salt. */
uint64_t sc_gw_client_key(const sc_gateway *g, int front, const void *who, size_t len);
/* A client's cancel of one of its own requests; true when the scheduler took m. */
bool sc_gw_cancel(sc_gateway *g, const sc_gw_peer *p, sc_msg_client_cancel *m);
/* Answers a peer with client_error {client_id, code, msg}. */
void sc_gw_reject(sc_gateway *g, const sc_gw_peer *p, uint64_t client_id, int code,
                  const char *msg);

/* zmq_front.c: the client socket bound and watched from loop, announced in the log;
 * closed; a message sent to one client (0, SC_EDOWN gone, SC_EFULL not reading). */
int sc_gw_zmq_open(sc_gateway *g, struct uv_loop_s *loop);
void sc_gw_zmq_close(sc_gateway *g);
int sc_gw_zmq_send(sc_gateway *g, const void *ident, size_t ident_len, int type,
                   const void *body);

#endif
