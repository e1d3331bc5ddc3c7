/* http_front.h - the head's HTTP server (docs/http.md): the OpenAI completions API,
 * GET /v1/models, /health and /metrics, on libmicrohttpd.
 *
 * Why libmicrohttpd: a GNU library in Debian, maintained for two decades, that parses
 * HTTP/1.1 (the part where a hand-written server gets hostile input wrong) and lets the
 * application drive it: "external select" mode exposes one epoll descriptor that the
 * gateway's libuv loop watches, so the server runs on the gateway's loop without threads
 * of its own, and suspend/resume lets a response wait for tokens without blocking that
 * loop. It bounds what a connection may cost (header memory, idle timeout, connection
 * count). Others in Debian: h2o (HTTP/2, larger, its own loop) and onion (less used).
 *
 * The front turns each HTTP request into a client submit that goes through the gateway
 * like a ZeroMQ client's (hooks below: one validation, one scheduler queue), and turns
 * the replies (sc_http_front_deliver) into a JSON response or server-sent events. Prompts
 * are text when a tokenizer is configured (model/tokenizer.h), else token ids.
 *
 * A client that goes away cancels its request: a waiting connection's socket is watched
 * for a hang-up (libmicrohttpd does not watch suspended connections).
 *
 * Ownership: the front borrows the loop, the hooks' user data and the tokenizer; it copies
 * its configuration. Threads: the loop's thread only.
 */
#ifndef SC_HTTP_FRONT_H
#define SC_HTTP_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "messages/buf.h"
#include "messages/messages.h"
#include "model/tokenizer.h"

struct uv_loop_s;
typedef struct sc_http_front sc_http_front;

/* What the front asks of the gateway. */
typedef struct sc_http_hooks {
  void *ud;
  /* A request for the cluster under m->request_id (the front's id for it, never 0), from
   * client (who asked: a hash of the client's address, for the fair shares);
   * replies come back through sc_http_front_deliver, a refusal possibly before this
   * returns. Always consumes m. */
  void (*submit)(void *ud, sc_msg_client_submit *m, uint64_t client);
  /* The request is no longer wanted: its client went away, it does not read, or a stop
   * string ended it. */
  void (*cancel)(void *ud, uint64_t id);
  /* A stop string ended the request (its outcome; said before its cancel, if any). */
  void (*stopped)(void *ud, uint64_t id);
  /* A completion request the front refused itself (bad JSON, unknown model, too large):
   * it never reaches the gateway, which counts it with its own refusals. */
  void (*refused)(void *ud);
  /* Ask the scheduler for a stats_report; its answer goes to sc_http_front_stats. */
  void (*query)(void *ud);
  /* Appends the Prometheus exposition for report r to out. */
  int (*metrics)(void *ud, const sc_msg_stats_report *r, sc_buf *out);
} sc_http_hooks;

typedef struct sc_http_config {
  const char *addr;         /* "HOST:PORT" (IPv4, or [IPv6]); port 0: any free one */
  const char *model;        /* the model id that /v1/models lists and requests name */
  const sc_tokenizer *tokenizer; /* NULL: prompts and outputs are token ids */
  const char *api_key;      /* "" or NULL: none; else every route but /health needs
                               "Authorization: Bearer <key>" */
  size_t max_body;          /* bytes; larger bodies get 413 */
  size_t max_text;          /* bytes of a text prompt; longer ones get 413 unread */
  unsigned timeout_s;       /* a connection idle this long is closed */
  unsigned max_connections;
} sc_http_config;

/* Binds and starts serving on loop. Returns 0 or an SC_E* code with d filled. */
int sc_http_front_start(struct uv_loop_s *loop, const sc_http_config *cfg,
                        const sc_http_hooks *hooks, sc_http_front **out, sc_diag *d);
/* Answers what is waiting with 503, closes every connection, and frees the front once the
 * loop has closed its handles (so it is safe from an actor's terminate). NULL is a
 * no-op. The hooks are not called again. */
void sc_http_front_stop(sc_http_front *f);
/* The bound port. */
uint16_t sc_http_front_port(const sc_http_front *f);

/* A reply from the cluster (client_token, client_done or client_error, its request_id
 * the front's id). Returns 0, or SC_EDOWN when that request's client is gone. */
int sc_http_front_deliver(sc_http_front *f, int type, const void *body);
/* The scheduler's answer to the hooks' query. */
void sc_http_front_stats(sc_http_front *f, const sc_msg_stats_report *r);

#endif
