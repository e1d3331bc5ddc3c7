/* http_front.c - see http_front.h.
 *
 * One exchange per HTTP request. Its life:
 *   headers   (first access-handler call) the route is chosen and the key checked;
 *   body      (calls with upload data) kept up to max_body, past it 413;
 *   dispatch  (the call with no more data) answered at once, or submitted to the cluster /
 *             queued for the scheduler's stats, and the connection suspended;
 *   reply     sc_http_front_deliver / _stats fill the exchange and resume it; the
 *             access handler, called again, queues either a whole response or, for a
 *             stream, a chunked response whose reader drains the exchange's events and
 *             suspends the connection while there is nothing to send;
 *   end       libmicrohttpd's completion callback: a request still in the cluster is
 *             canceled (its client went away), and the exchange is freed.
 * libmicrohttpd does not watch a suspended connection, so a waiting exchange watches its
 * socket for a hang-up itself (uv_poll, UV_DISCONNECT) and then cancels and resumes.
 *
 * Ids: an exchange's id (its request_id at the gateway) is its slot in `live` plus a
 * generation, so a reply finds it in O(1) and a reply for an exchange that has ended
 * (same slot, older generation) finds nothing. */
#include "actors/gateway/http_front.h"

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <uv.h>

#include "actors/gateway/openai.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "base/hash.h"
#include "base/inet_addr.h"
#include "base/jsonw.h"
#include "base/log.h"

#define LOG "http"
#define SLOT_BITS 24
#define SLOT_MASK ((1ull << SLOT_BITS) - 1)
#define STATS_TIMEOUT_MS 2000
/* A stream whose client reads slower than tokens come holds at most this much unsent;
 * past it the request is canceled (as a ZeroMQ client that does not read its replies). */
#define SSE_MAX_UNSENT ((size_t)1 << 20)
/* Request bodies being read, all connections together: past it new bytes get 503. */
#define BODIES_MAX ((size_t)256 << 20)
/* One address may hold at most this many of the connections. */
#define PER_IP_CONNECTIONS 512

typedef enum route_kind { R_COMPLETIONS, R_HEALTH, R_METRICS } route_kind;

typedef struct exchange exchange;

struct sc_http_front {
  uv_loop_t *loop;
  struct MHD_Daemon *daemon;
  uv_poll_t *poll;         /* the daemon's epoll descriptor */
  uv_timer_t *timer;       /* the daemon's timeouts, and "run it now" after a resume */
  uv_timer_t *stats_timer; /* answers the stats waiters when the scheduler is silent */
  int open_handles;        /* the front is freed when the last one has closed */
  sc_http_hooks hooks;
  char *model, *api_key;
  const sc_tokenizer *tok;
  size_t max_body, max_text;
  uint16_t port;
  uint64_t gen;
  exchange **live;         /* [cap_live] by slot */
  int32_t cap_live;
  exchange *stats_waiters; /* health and metrics exchanges waiting for a report */
  bool query_out;
  bool stopping;
  size_t body_bytes;       /* held in exchanges' request bodies (BODIES_MAX) */
};

struct exchange {
  sc_http_front *f;
  struct MHD_Connection *conn;
  uint64_t id;
  int32_t slot;
  route_kind kind;
  bool dispatched;         /* the whole request was read and acted on */
  bool queued;             /* a whole response is queued (libmicrohttpd calls no more) */
  bool suspended;          /* libmicrohttpd does not look at it until resume() */
  bool in_cluster;         /* its request is live at the gateway (cancel when gone) */
  /* finished: the exchange has everything it will say (a whole response in resp, or the
   * stream's last event in sse); nothing that comes later changes it */
  bool finished;
  bool gone;               /* its client went away: nothing can be said */
  bool stream_queued;      /* a stream (req.stream) whose response has started: errors
                              become events */
  int read_error;          /* a status to answer once the body has been read (413, 503):
                              libmicrohttpd takes no response during an upload */
  sc_buf body;
  /* a whole response ready to queue (status 0: none yet) */
  int status;
  const char *content_type;
  sc_buf resp;
  /* a completion */
  sc_openai_request req;
  char cmpl_id[40];
  int64_t created;
  int32_t prompt_tokens, completion_tokens;
  const char *finish_reason;
  int32_t *ids;            /* generated tokens (streaming: those not yet in a chunk) */
  size_t num_ids, cap_ids;
  sc_tok_text text;        /* generated text (streaming: text[sent..] not yet sent) */
  size_t sent, searched;   /* text bytes released to the client / searched for stops */
  sc_detok detok;
  sc_buf sse;              /* stream bytes not yet handed to libmicrohttpd */
  size_t sse_pos;
  uv_poll_t *hangup;       /* its socket, watched while suspended with a request in the
                              cluster (NULL: not made yet, or could not be) */
  exchange *next_waiter;
};

/* ---- the daemon on the loop ---- */

static void run_daemon(sc_http_front *f);

static void on_timer(uv_timer_t *t) { run_daemon(t->data); }
static void on_poll(uv_poll_t *p, int status, int events) {
  (void)status, (void)events;
  run_daemon(p->data);
}

/* Runs what is ready and sets the timer to the daemon's next timeout. */
static void run_daemon(sc_http_front *f) {
  if (f->daemon == NULL) return;
  MHD_run(f->daemon);
  MHD_UNSIGNED_LONG_LONG ms = 0;
  if (MHD_get_timeout(f->daemon, &ms) == MHD_YES)
    uv_timer_start(f->timer, on_timer, ms, 0);
  else
    uv_timer_stop(f->timer);
}

/* A resumed connection is looked at on the next loop iteration (not from inside the
 * caller, which may be a handler or the daemon itself). */
static void kick(sc_http_front *f) { uv_timer_start(f->timer, on_timer, 0, 0); }

/* ---- exchanges ---- */

static exchange *find(sc_http_front *f, uint64_t id) {
  const uint64_t slot = (id & SLOT_MASK) - 1;
  if ((id & SLOT_MASK) == 0 || slot >= (uint64_t)f->cap_live) return NULL;
  exchange *x = f->live[slot];
  return x && x->id == id ? x : NULL;
}

static exchange *exchange_new(sc_http_front *f, struct MHD_Connection *conn) {
  int32_t slot = 0;
  while (slot < f->cap_live && f->live[slot]) slot++;
  if (slot == f->cap_live) {
    const int32_t cap = f->cap_live ? 2 * f->cap_live : 64;
    if ((uint64_t)cap >= SLOT_MASK) return NULL;
    exchange **l = realloc(f->live, sizeof *l * (size_t)cap);
    if (l == NULL) return NULL;
    memset(l + f->cap_live, 0, sizeof *l * (size_t)(cap - f->cap_live));
    f->live = l;
    f->cap_live = cap;
  }
  exchange *x = calloc(1, sizeof *x);
  if (x == NULL) return NULL;
  x->f = f;
  x->conn = conn;
  x->slot = slot;
  x->id = (++f->gen << SLOT_BITS) | (uint64_t)(slot + 1);
  sc_buf_init(&x->body);
  sc_buf_init(&x->resp);
  sc_buf_init(&x->sse);
  f->live[slot] = x;
  return x;
}

static void free_handle(uv_handle_t *h) { free(h); }

/* The watch is made once per exchange, started at each suspend and stopped at each
 * resume (a stream suspends between tokens), and closed with the exchange: libmicrohttpd
 * closes the socket only after its completion callback, which frees the exchange. */
static void hangup_close(exchange *x) {
  if (x->hangup) {
    uv_close((uv_handle_t *)x->hangup, free_handle);
    x->hangup = NULL;
  }
}

static void unwait(exchange *x) {
  for (exchange **p = &x->f->stats_waiters; *p; p = &(*p)->next_waiter)
    if (*p == x) {
      *p = x->next_waiter;
      return;
    }
}

static void exchange_free(exchange *x) {
  hangup_close(x);
  unwait(x);
  x->f->live[x->slot] = NULL;
  x->f->body_bytes -= x->body.cap;
  sc_buf_free(&x->body);
  sc_buf_free(&x->resp);
  free(x->text.data);
  sc_buf_free(&x->sse);
  free(x->ids);
  sc_detok_free(&x->detok);
  sc_openai_request_free(&x->req);
  free(x);
}

static void on_hangup(uv_poll_t *p, int status, int events);

/* Suspends the connection; while a request runs in the cluster for it, its socket is
 * watched for the client going away. */
/* A client that shuts down its sending side (a half-close) looks the same as one that is
 * gone, and is taken for gone: HTTP clients keep their side open for the answer. */
static void hangup_start(exchange *x) {
  if (x->hangup == NULL) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    uv_poll_t *p = ci ? malloc(sizeof *p) : NULL;
    if (p == NULL) return; /* (then a hang-up is seen at the next write) */
    if (uv_poll_init(x->f->loop, p, ci->connect_fd) != 0) {
      free(p);
      return;
    }
    p->data = x;
    x->hangup = p;
  }
  if (uv_poll_start(x->hangup, UV_DISCONNECT, on_hangup) != 0) hangup_close(x);
}

static void suspend(exchange *x) {
  if (x->suspended) return;
  MHD_suspend_connection(x->conn);
  x->suspended = true;
  if (x->in_cluster) hangup_start(x);
}

static void resume(exchange *x) {
  if (!x->suspended) return;
  if (x->hangup) uv_poll_stop(x->hangup); /* (libmicrohttpd has the socket again) */
  x->suspended = false;
  MHD_resume_connection(x->conn);
  kick(x->f);
}

static void cancel_in_cluster(exchange *x) {
  if (!x->in_cluster) return;
  x->in_cluster = false;
  if (!x->f->stopping) x->f->hooks.cancel(x->f->hooks.ud, x->id);
}

/* A stop string ended the request: said to the gateway (its outcome) before any cancel. */
static void stopped_by_text(exchange *x) {
  if (!x->f->stopping) x->f->hooks.stopped(x->f->hooks.ud, x->id);
}

static void on_hangup(uv_poll_t *p, int status, int events) {
  exchange *x = p->data;
  if (status == 0 && !(events & UV_DISCONNECT)) return;
  SC_DEBUG(LOG, "the client of %s went away: canceling it", x->cmpl_id);
  cancel_in_cluster(x);
  x->finished = x->gone = true;
  resume(x); /* libmicrohttpd then sees the closed socket and ends the exchange */
}

/* ---- responses ---- */

static enum MHD_Result queue_buffer(struct MHD_Connection *conn, int status, const char *type,
                                    const void *data, size_t len) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
  if (r == NULL) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  const enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result queue_error(struct MHD_Connection *conn, int status, const char *param,
                                   const char *message) {
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_openai_error_json(&w, status, param, message);
  const char *s = sc_jsonw_str(&w);
  const enum MHD_Result ok =
      sc_jsonw_status(&w) ? MHD_NO
                          : queue_buffer(conn, status, "application/json", s, strlen(s));
  sc_jsonw_free(&w);
  return ok;
}

static enum MHD_Result answer(exchange *x, int status, const char *type, const void *data,
                             size_t len) {
  x->queued = true;
  return queue_buffer(x->conn, status, type, data, len);
}

static enum MHD_Result answer_error(exchange *x, int status, const char *param,
                                   const char *message) {
  x->queued = true;
  return queue_error(x->conn, status, param, message);
}

static int sse_event(exchange *x, sc_jsonw *w);

/* Keeps an error for the exchange's response (a stream that already started gets it as
 * its last event instead). */
static void set_error(exchange *x, int status, const char *message) {
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_openai_error_json(&w, status, "", message);
  sc_buf_reset(&x->resp);
  if (x->stream_queued) { /* (out of memory: the stream just ends) */
    if (sse_event(x, &w) == 0) (void)sc_buf_append(&x->sse, "data: [DONE]\n\n", 14);
  } else {
    x->status = status;
    x->content_type = "application/json";
    (void)sc_buf_append(&x->resp, sc_jsonw_str(&w), strlen(sc_jsonw_str(&w)));
  }
  sc_jsonw_free(&w);
  x->finished = true;
}

static void set_response(exchange *x, int status, const char *type, const char *body,
                         size_t len) {
  sc_buf_reset(&x->resp);
  x->status = sc_buf_append(&x->resp, body, len) == 0 ? status : 503;
  x->content_type = type;
}

/* ---- completions: tokens to text and events ---- */

static int push_id(exchange *x, int32_t id) {
  if (x->num_ids == x->cap_ids) {
    const size_t cap = x->cap_ids ? 2 * x->cap_ids : 64;
    int32_t *v = realloc(x->ids, sizeof *v * cap);
    if (v == NULL) return SC_ENOMEM;
    x->ids = v;
    x->cap_ids = cap;
  }
  x->ids[x->num_ids++] = id;
  return 0;
}

/* The longest stop string, less one: text that could still become a stop is held back. */
static size_t stop_holdback(const exchange *x) {
  size_t m = 0;
  for (int i = 0; i < x->req.num_stop; i++) {
    const size_t n = strlen(x->req.stop[i]);
    if (n > m) m = n;
  }
  return m ? m - 1 : 0;
}

/* Looks for the earliest stop string in the text not yet searched (and the holdback
 * before it); cuts the text there. Returns true when one was found. */
static bool find_stop(exchange *x) {
  if (x->req.num_stop == 0) return false;
  const size_t hold = stop_holdback(x);
  const size_t from = x->searched > hold ? x->searched - hold : 0;
  const char *t = (const char *)x->text.data;
  size_t best = SIZE_MAX;
  for (int i = 0; i < x->req.num_stop; i++) {
    const size_t n = strlen(x->req.stop[i]);
    for (size_t at = from; at + n <= x->text.len && at < best; at++)
      if (memcmp(t + at, x->req.stop[i], n) == 0) {
        best = at;
        break;
      }
  }
  x->searched = x->text.len;
  if (best == SIZE_MAX) return false;
  x->text.len = best;
  return true;
}

/* How much of the text may go to the client now: all of it at the end; otherwise what no
 * stop string can still claim, cut at a character boundary. */
static size_t releasable(const exchange *x) {
  if (x->finished || x->finish_reason) return x->text.len;
  const size_t hold = stop_holdback(x);
  size_t end = x->text.len > hold ? x->text.len - hold : 0;
  while (end > x->sent && end < x->text.len && ((unsigned char)x->text.data[end] & 0xC0) == 0x80)
    end--;
  return end < x->sent ? x->sent : end;
}

static const sc_openai_head *head_of(const exchange *x, sc_openai_head *h) {
  *h = (sc_openai_head){.id = x->cmpl_id, .created = x->created, .model = x->f->model};
  return h;
}

/* One event, whole or not at all: a client must never read half a JSON object. */
static int sse_event(exchange *x, sc_jsonw *w) {
  const size_t at = x->sse.len;
  const char *json = sc_jsonw_str(w);
  if (sc_jsonw_status(w) == 0 && sc_buf_append(&x->sse, "data: ", 6) == 0 &&
      sc_buf_append(&x->sse, json, strlen(json)) == 0 && sc_buf_append(&x->sse, "\n\n", 2) == 0)
    return 0;
  x->sse.len = at;
  return SC_ENOMEM;
}

/* One chunk with the text released since the last one and the pending token ids. */
static void stream_chunk(exchange *x, const char *finish) {
  const size_t end = releasable(x);
  sc_openai_head h;
  const sc_openai_choice c = {.text = (const char *)x->text.data + x->sent,
                              .text_len = end - x->sent, .ids = x->ids,
                              .num_ids = x->num_ids, .finish_reason = finish};
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_openai_chunk_json(&w, head_of(x, &h), &c, 0, 0);
  int rc = sse_event(x, &w);
  x->sent = end;
  x->num_ids = 0;
  if (rc == 0 && finish && x->req.include_usage) {
    sc_jsonw_reset(&w);
    sc_openai_chunk_json(&w, &h, NULL, x->prompt_tokens, x->completion_tokens);
    rc = sse_event(x, &w);
  }
  if (rc == 0 && finish) rc = sc_buf_append(&x->sse, "data: [DONE]\n\n", 14);
  sc_jsonw_free(&w);
  if (rc) { /* out of memory: the stream ends here, without its [DONE] */
    cancel_in_cluster(x);
    x->finished = true;
  }
}

static void whole_response(exchange *x) {
  sc_openai_head h;
  const sc_openai_choice c = {.text = (const char *)x->text.data, .text_len = x->text.len,
                              .ids = x->ids, .num_ids = x->num_ids,
                              .finish_reason = x->finish_reason};
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_openai_completion_json(&w, head_of(x, &h), &c, x->prompt_tokens, x->completion_tokens);
  if (sc_jsonw_status(&w) == 0)
    set_response(x, 200, "application/json", sc_jsonw_str(&w), strlen(sc_jsonw_str(&w)));
  else
    set_error(x, 503, "out of memory");
  sc_jsonw_free(&w);
}

/* The end of a completion: the rest of the text, the last chunk or the whole response.
 * by_text: a stop string ended it here (else the cluster did: its last token, the
 * model's end-of-sequence token, which is "stop" too, or a cancel). */
static void finish(exchange *x, const char *reason, bool by_text) {
  sc_diag d = {0}; /* (a failed decode leaves the text short; the ids are all there) */
  /* what the decoder holds back comes after a stop string: it is not flushed then */
  if (x->f->tok && !by_text) (void)sc_detok_finish(&x->detok, &x->text, &d);
  if (!by_text && find_stop(x)) { /* (in the flushed tail) */
    reason = "stop";
    stopped_by_text(x);
  }
  x->finish_reason = reason;
  if (x->req.stream) stream_chunk(x, reason);
  else whole_response(x);
  x->finished = true;
}

static void on_token(exchange *x, const sc_msg_client_token *t) {
  for (uint32_t i = 0; i < t->tokens.n && !x->finished; i++) {
    const int32_t id = t->tokens.v[i];
    x->completion_tokens++;
    if (push_id(x, id) != 0) {
      cancel_in_cluster(x);
      set_error(x, 503, "out of memory");
      return;
    }
    /* ids the tokenizer does not know (a model vocabulary larger than the tokenizer's)
     * decode to nothing, as the Hugging Face decoder skips them */
    size_t len = 0;
    sc_diag d = {0};
    if (x->f->tok && sc_tokenizer_token(x->f->tok, id, &len) != NULL)
      (void)sc_detok_push(&x->detok, id, &x->text, &d);
    if (find_stop(x)) {
      stopped_by_text(x);
      cancel_in_cluster(x);
      finish(x, "stop", true);
      return;
    }
    if (x->req.stream) stream_chunk(x, NULL);
  }
}

/* ---- requests ---- */

static bool authorized(const sc_http_front *f, struct MHD_Connection *conn) {
  if (f->api_key == NULL) return true;
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (h == NULL || strncmp(h, "Bearer ", 7) != 0) return false;
  h += 7;
  const size_t n = strlen(h), k = strlen(f->api_key);
  /* the same time whatever the prefix that matches */
  unsigned diff = (unsigned)(n != k);
  for (size_t i = 0; i < k; i++) diff |= (unsigned char)f->api_key[i] ^ (unsigned char)(i < n ? h[i] : 0);
  return diff == 0;
}

static uint64_t random_seed(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = (uint64_t)time(NULL);
  return s;
}

/* Who asked, for the scheduler's fair shares: the client's address (without its port:
 * every request of an HTTP client may come on a connection of its own). */
static uint64_t client_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *sa = ci ? ci->client_addr : NULL;
  uint64_t h = SC_FNV_OFFSET;
  if (sa && sa->sa_family == AF_INET)
    h = sc_fnv1a(h, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  else if (sa && sa->sa_family == AF_INET6) /* (one client per /64: what one host gets) */
    h = sc_fnv1a(h, &((const struct sockaddr_in6 *)sa)->sin6_addr, 8);
  return h;
}

/* The request as the cluster takes it: a prompt of token ids (the text tokenized, with
 * the tokenizer's special tokens, as Hugging Face's encode adds them). */
static int make_submit(exchange *x, sc_msg_client_submit **out, char *why, size_t why_len) {
  const sc_openai_request *r = &x->req;
  int32_t *ids = NULL;
  size_t n = 0;
  if (r->text) {
    /* Tokenizing runs on the gateway's loop (the scheduler's), so text that could not fit
     * the prompt limit anyway is refused unread: no token of a byte-level BPE covers more
     * than a few dozen bytes (sc_http_config.max_text says how many per token) */
    if (r->text_len > x->f->max_text) {
      snprintf(why, why_len, "prompt: %zu bytes of text cannot fit the prompt limit (at most "
                             "%zu bytes)", r->text_len, x->f->max_text);
      return 413;
    }
    sc_diag d = {0};
    const int rc = sc_tokenizer_encode(x->f->tok, r->text, r->text_len, true, &ids, &n, &d);
    if (rc != 0) {
      snprintf(why, why_len, "prompt: %s", sc_diag_message(&d));
      return sc_openai_status_of(rc);
    }
  } else {
    if ((ids = malloc(sizeof *ids * r->num_ids)) == NULL) return 503;
    memcpy(ids, r->ids, sizeof *ids * r->num_ids);
    n = r->num_ids;
  }
  sc_msg_client_submit *m = sc_msg_body_new(SC_MSG_CLIENT_SUBMIT);
  if (m == NULL || n > UINT32_MAX) {
    free(ids);
    sc_msg_body_destroy(SC_MSG_CLIENT_SUBMIT, m);
    return 503;
  }
  m->request_id = x->id;
  m->prompt.v = ids;
  m->prompt.n = (uint32_t)n;
  m->max_tokens = r->max_tokens;
  m->temperature = r->temperature;
  m->ignore_eos = r->ignore_eos;
  m->seed = r->has_seed ? r->seed : random_seed();
  *out = m;
  return 0;
}

/* POST /v1/completions with its whole body: submitted (the connection then waits), or
 * answered now. */
/* A completion request the front refuses itself: answered, and counted with the
 * gateway's refusals (the request never reaches it). */
static enum MHD_Result refuse(exchange *x, int status, const char *param, const char *msg) {
  if (!x->f->stopping) x->f->hooks.refused(x->f->hooks.ud);
  return answer_error(x, status, param, msg);
}

static enum MHD_Result start_completion(exchange *x) {
  sc_http_front *f = x->f;
  if (x->read_error)
    return refuse(x, x->read_error, "", x->read_error == 413 ? "the body is too large"
                                                             : "out of memory");
  sc_openai_error err;
  if (sc_openai_parse_completion((const char *)x->body.data, x->body.len, &x->req, &err) != 0)
    return refuse(x, err.status, err.param, err.message);
  char why[400] = "";
  if (x->req.model && strcmp(x->req.model, f->model) != 0) {
    snprintf(why, sizeof why, "the model `%.200s` does not exist (this server has `%.80s`)",
             x->req.model, f->model);
    return refuse(x, 404, "model", why);
  }
  if (f->tok == NULL && (x->req.text || x->req.num_stop))
    return refuse(x, 400, x->req.text ? "prompt" : "stop",
                  "this cluster has no tokenizer: send the prompt as an array of token ids "
                  "(the response carries token_ids), without stop strings");
  sc_msg_client_submit *m = NULL;
  const int status = make_submit(x, &m, why, sizeof why);
  if (status) return refuse(x, status, "prompt", why[0] ? why : "out of memory");
  x->prompt_tokens = (int32_t)m->prompt.n;
  x->created = (int64_t)time(NULL);
  snprintf(x->cmpl_id, sizeof x->cmpl_id, "cmpl-%016llx", (unsigned long long)random_seed());
  x->in_cluster = true;
  /* special tokens are left out of the text, as OpenAI-compatible servers do */
  if (f->tok) sc_detok_init(&x->detok, f->tok, true);
  f->hooks.submit(f->hooks.ud, m, client_of(x->conn)); /* (may answer at once: deliver
                                                           runs inside) */
  x->dispatched = true;
  return MHD_YES;
}

static void on_stats_timeout(uv_timer_t *t);

static enum MHD_Result wait_for_stats(exchange *x) {
  sc_http_front *f = x->f;
  x->next_waiter = f->stats_waiters;
  f->stats_waiters = x;
  x->dispatched = true;
  if (!f->query_out) {
    f->query_out = true;
    uv_timer_start(f->stats_timer, on_stats_timeout, STATS_TIMEOUT_MS, 0);
    f->hooks.query(f->hooks.ud);
  }
  return MHD_YES;
}

/* The first call, with the headers: the route, or an answer. */
static enum MHD_Result route(exchange *x, const char *url, const char *method) {
  sc_http_front *f = x->f;
  const bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  const bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
  if (strcmp(url, "/health") == 0) {
    if (!get) return answer_error(x, 405, "", "use GET");
    x->kind = R_HEALTH;
    return MHD_YES;
  }
  if (!authorized(f, x->conn))
    return answer_error(x, 401, "", "missing or wrong API key (Authorization: Bearer)");
  if (strcmp(url, "/metrics") == 0) {
    if (!get) return answer_error(x, 405, "", "use GET");
    x->kind = R_METRICS;
    return MHD_YES;
  }
  if (strcmp(url, "/v1/models") == 0) {
    if (!get) return answer_error(x, 405, "", "use GET");
    sc_jsonw w;
    sc_jsonw_init(&w);
    sc_openai_models_json(&w, f->model, 0);
    const enum MHD_Result ok =
        answer(x, 200, "application/json", sc_jsonw_str(&w), strlen(sc_jsonw_str(&w)));
    sc_jsonw_free(&w);
    return ok;
  }
  if (strcmp(url, "/v1/completions") == 0) {
    if (!post) return answer_error(x, 405, "", "use POST");
    const char *cl = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > f->max_body) {
      char why[96];
      snprintf(why, sizeof why, "the body is larger than %zu bytes", f->max_body);
      return refuse(x, 413, "", why); /* (now, before the body: headers are all read) */
    }
    x->kind = R_COMPLETIONS;
    return MHD_YES;
  }
  return answer_error(x, 404, "", "no such route (POST /v1/completions, GET /v1/models, "
                                       "/health, /metrics)");
}

/* Called again once a waiting exchange was resumed: what it has to say now. */
static enum MHD_Result respond(exchange *x);

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  exchange *x = cls;
  const size_t left = x->sse.len - x->sse_pos;
  if (left > 0) {
    const size_t n = left < max ? left : max;
    memcpy(buf, x->sse.data + x->sse_pos, n);
    x->sse_pos += n;
    if (x->sse_pos == x->sse.len) sc_buf_reset(&x->sse), x->sse_pos = 0;
    return (ssize_t)n;
  }
  if (x->finished) return MHD_CONTENT_READER_END_OF_STREAM;
  suspend(x); /* until deliver has more */
  return 0;
}

static enum MHD_Result respond(exchange *x) {
  if (x->status) return answer(x, x->status, x->content_type, x->resp.data, x->resp.len);
  if (x->req.stream && (x->sse.len > 0 || x->finished)) {
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, x, NULL);
    if (r == NULL) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    const enum MHD_Result ok = MHD_queue_response(x->conn, 200, r);
    MHD_destroy_response(r);
    x->stream_queued = true;
    return ok;
  }
  if (x->gone) return MHD_NO; /* (nothing to say: libmicrohttpd closes the connection) */
  suspend(x);
  return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **state) {
  (void)version;
  sc_http_front *f = cls;
  exchange *x = *state;
  if (x == NULL) {
    if (f->stopping) return queue_error(conn, 503, "", "the cluster is stopping");
    if ((x = exchange_new(f, conn)) == NULL) return queue_error(conn, 503, "", "out of memory");
    *state = x;
    return route(x, url, method);
  }
  if (*upload_size > 0) {
    /* libmicrohttpd takes no response while a body is read: a body past the limit is
     * read on and dropped, and answered (413) at its end */
    const size_t n = *upload_size;
    *upload_size = 0;
    if (x->read_error) return MHD_YES;
    const size_t cap = x->body.cap;
    if (x->body.len + n > f->max_body) x->read_error = 413;
    else if (f->body_bytes + n > BODIES_MAX || sc_buf_append(&x->body, upload, n) != 0)
      x->read_error = 503;
    f->body_bytes += x->body.cap - cap;
    return MHD_YES;
  }
  if (x->dispatched) return respond(x);
  if (f->stopping) return answer_error(x, 503, "", "the cluster is stopping");
  switch (x->kind) {
  case R_COMPLETIONS: {
    const enum MHD_Result ok = start_completion(x);
    return ok == MHD_YES && !x->queued ? respond(x) : ok;
  }
  case R_HEALTH:
  case R_METRICS: return wait_for_stats(x) == MHD_YES ? respond(x) : MHD_NO;
  }
  return MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls, (void)conn;
  exchange *x = *state;
  if (x == NULL) return;
  if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && x->in_cluster)
    SC_DEBUG(LOG, "%s ended before its reply (%d): canceling it", x->cmpl_id, (int)toe);
  cancel_in_cluster(x);
  exchange_free(x);
  *state = NULL;
}

/* ---- cluster replies ---- */

int sc_http_front_deliver(sc_http_front *f, int type, const void *body) {
  uint64_t id = 0;
  switch (type) {
  case SC_MSG_CLIENT_TOKEN: id = ((const sc_msg_client_token *)body)->request_id; break;
  case SC_MSG_CLIENT_DONE: id = ((const sc_msg_client_done *)body)->request_id; break;
  default: id = ((const sc_msg_client_error *)body)->request_id; break;
  }
  exchange *x = find(f, id);
  /* gone, or ended by a stop string or an error: no client takes more of this request (the
   * gateway then cancels it, if that was not done yet, and closes its route) */
  if (x == NULL || x->finished) return SC_EDOWN;
  if (type == SC_MSG_CLIENT_TOKEN) {
    if (x->stream_queued && x->sse.len - x->sse_pos > SSE_MAX_UNSENT) {
      SC_INFO(LOG, "the client of %s does not read its stream: canceling it", x->cmpl_id);
      x->in_cluster = false; /* (the gateway cancels it on SC_EFULL) */
      x->finished = true;
      resume(x);
      return SC_EFULL;
    }
    on_token(x, body);
  } else if (type == SC_MSG_CLIENT_DONE) {
    x->in_cluster = false;
    finish(x, ((const sc_msg_client_done *)body)->finish_reason, false);
  } else {
    const sc_msg_client_error *e = body;
    x->in_cluster = false;
    set_error(x, sc_openai_status_of(e->code), e->message ? e->message : sc_strerror(e->code));
  }
  resume(x);
  return 0;
}

static void answer_stats(exchange *x, const sc_msg_stats_report *r) {
  static const char k_text[] = "text/plain; version=0.0.4; charset=utf-8";
  if (x->kind == R_HEALTH) {
    sc_jsonw w;
    sc_jsonw_init(&w);
    const int status = sc_openai_health_json(&w, r);
    if (sc_jsonw_status(&w) == 0)
      set_response(x, status, "application/json", sc_jsonw_str(&w), strlen(sc_jsonw_str(&w)));
    else
      set_error(x, 503, "out of memory");
    sc_jsonw_free(&w);
  } else if (r == NULL) {
    set_error(x, 503, "the scheduler does not answer");
  } else {
    sc_buf b;
    sc_buf_init(&b);
    if (x->f->hooks.metrics(x->f->hooks.ud, r, &b) == 0)
      set_response(x, 200, k_text, (const char *)b.data, b.len);
    else
      set_error(x, 503, "out of memory");
    sc_buf_free(&b);
  }
  x->finished = true;
  resume(x);
}

static void answer_waiters(sc_http_front *f, const sc_msg_stats_report *r) {
  f->query_out = false;
  uv_timer_stop(f->stats_timer);
  exchange *x = f->stats_waiters;
  f->stats_waiters = NULL;
  while (x) {
    exchange *next = x->next_waiter;
    x->next_waiter = NULL;
    answer_stats(x, r);
    x = next;
  }
}

static void on_stats_timeout(uv_timer_t *t) { answer_waiters(t->data, NULL); }

void sc_http_front_stats(sc_http_front *f, const sc_msg_stats_report *r) {
  answer_waiters(f, r);
}

/* ---- start and stop ---- */

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  line[strcspn(line, "\n")] = '\0';
  static sc_log_limit limit; /* (clients choose how often) */
  unsigned long long held = 0;
  if (sc_log_limit_pass(&limit, sc_now_ns(), &held))
    SC_INFO(LOG, "%s; %llu more such lines since the last", line, held);
}

static void front_free(sc_http_front *f) {
  free(f->live);
  free(f->model);
  if (f->api_key) sc_wipe(f->api_key, strlen(f->api_key));
  free(f->api_key);
  free(f);
}

static void on_handle_closed(uv_handle_t *h) {
  sc_http_front *f = h->data;
  free(h);
  if (--f->open_handles == 0) front_free(f);
}

static int init_handles(sc_http_front *f, int epoll_fd) {
  f->poll = malloc(sizeof *f->poll);
  f->timer = malloc(sizeof *f->timer);
  f->stats_timer = malloc(sizeof *f->stats_timer);
  if (!f->poll || !f->timer || !f->stats_timer) return SC_ENOMEM;
  if (uv_timer_init(f->loop, f->timer) != 0) return SC_ESYS;
  f->timer->data = f;
  f->open_handles++;
  if (uv_timer_init(f->loop, f->stats_timer) != 0) return SC_ESYS;
  f->stats_timer->data = f;
  f->open_handles++;
  if (uv_poll_init(f->loop, f->poll, epoll_fd) != 0) return SC_ESYS;
  f->poll->data = f;
  f->open_handles++;
  return uv_poll_start(f->poll, UV_READABLE, on_poll) == 0 ? 0 : SC_ESYS;
}

int sc_http_front_start(uv_loop_t *loop, const sc_http_config *cfg, const sc_http_hooks *hooks,
                        sc_http_front **out, sc_diag *d) {
  *out = NULL;
  struct sockaddr_storage ss;
  socklen_t ss_len;
  sc_diag why = {0};
  int rc = sc_inet_addr_parse(cfg->addr, &ss, &ss_len, &why);
  if (rc) return sc_fail(d, rc, "http address %s", sc_diag_message(&why));
  const bool v6 = ss.ss_family == AF_INET6;
  sc_http_front *f = calloc(1, sizeof *f);
  if (f == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  f->loop = loop;
  f->hooks = *hooks;
  f->tok = cfg->tokenizer;
  f->max_body = cfg->max_body;
  f->max_text = cfg->max_text;
  f->model = strdup(cfg->model);
  f->api_key = cfg->api_key && cfg->api_key[0] ? strdup(cfg->api_key) : NULL;
  if (f->model == NULL || (cfg->api_key && cfg->api_key[0] && f->api_key == NULL)) {
    front_free(f); /* (a key that could not be copied must not mean "no key") */
    return sc_fail(d, SC_ENOMEM, "out of memory");
  }
  const unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                         (v6 ? MHD_USE_IPv6 : 0);
  f->daemon = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, f,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_CONNECTION_TIMEOUT, cfg->timeout_s,
      MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_IP_CONNECTIONS,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, f,
      MHD_OPTION_EXTERNAL_LOGGER, mhd_log, f,
      MHD_OPTION_END);
  if (f->daemon == NULL) {
    const int err = errno;
    front_free(f);
    return sc_fail(d, SC_EIO, "cannot serve HTTP on %s: %s", cfg->addr,
                   err ? strerror(err) : "libmicrohttpd refused to start");
  }
  const union MHD_DaemonInfo *port = MHD_get_daemon_info(f->daemon, MHD_DAEMON_INFO_BIND_PORT);
  const union MHD_DaemonInfo *ep = MHD_get_daemon_info(f->daemon, MHD_DAEMON_INFO_EPOLL_FD);
  f->port = port ? port->port : 0;
  if (ep == NULL || (rc = init_handles(f, ep->epoll_fd)) != 0) {
    sc_http_front_stop(f);
    return sc_fail(d, rc ? rc : SC_EIO, "cannot watch the HTTP server from the loop");
  }
  run_daemon(f);
  *out = f;
  return 0;
}

uint16_t sc_http_front_port(const sc_http_front *f) { return f->port; }

static void close_handle(sc_http_front *f, uv_handle_t *h, bool inited) {
  if (h == NULL) return;
  if (!inited) {
    free(h);
    return;
  }
  h->data = f;
  uv_close(h, on_handle_closed);
}

void sc_http_front_stop(sc_http_front *f) {
  if (f == NULL) return;
  f->stopping = true; /* (the hooks are not called from here on) */
  /* libmicrohttpd must not be stopped with suspended connections: each gets its answer
   * (503) and is resumed, one run sends what fits, the stop closes the rest */
  for (int32_t i = 0; i < f->cap_live; i++) {
    exchange *x = f->live[i];
    if (x == NULL) continue;
    if (!x->finished) set_error(x, 503, "the cluster is stopping");
    x->in_cluster = false;
    resume(x);
  }
  if (f->daemon) {
    MHD_run(f->daemon);
    if (f->open_handles >= 3) uv_poll_stop(f->poll); /* (before its descriptor closes) */
    MHD_stop_daemon(f->daemon); /* (completion callbacks free the exchanges) */
    f->daemon = NULL;
  }
  const int inited = f->open_handles;
  if (inited == 0) {
    free(f->poll);
    free(f->timer);
    free(f->stats_timer);
    front_free(f);
    return;
  }
  /* handles were initialized in this order: timer, stats_timer, poll */
  uv_timer_stop(f->timer);
  uv_timer_stop(f->stats_timer);
  close_handle(f, (uv_handle_t *)f->timer, inited >= 1);
  close_handle(f, (uv_handle_t *)f->stats_timer, inited >= 2);
  close_handle(f, (uv_handle_t *)f->poll, inited >= 3);
}
