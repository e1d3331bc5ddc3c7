/* bench_http.c - `sparsecp bench http`: what the head's HTTP front (docs/http.md) costs a
 * streaming client beside the ZeroMQ client, on one local cluster as `sparsecp launch
 * --http` runs it on the CPU default (P1 N1 T1, the default model, the pipeline's default
 * limits), started once for the whole run.
 *
 * A case is C clients (1, 16, 64), each running requests back to back (the next as soon
 * as its previous one ended), max(8, 4C) requests in all; each a 32-token pseudo-random
 * prompt, max_tokens 32, greedy. Both fronts run the same prompts:
 *
 *   zmq   one sc_client with C requests in flight (what `sparsecp submit` uses);
 *   http  C keep-alive HTTP/1.1 connections, POST /v1/completions with "stream": true,
 *         read by the minimal client below (chunked transfer, server-sent events), all
 *         sockets under one poll().
 *
 * Per request: TTFT = submission (before the request is encoded) to the arrival of the
 * first token; TPOT = (last token - first token) / 31. Per case: median TTFT, median TPOT,
 * and requests / wall time (first submission to last completion). Both clients decode
 * their replies on this one thread, so what HTTP adds is the server side (libmicrohttpd
 * in the gateway's loop, a JSON chunk per token) and the protocol. That share is also
 * measured apart, as TTFT's front_ms: the client's mean TTFT less the gateway's own over
 * the same requests (/metrics' sparsecp_time_to_first_token_seconds, read before and after
 * each front's run: arrival at the gateway to the first token there), i.e. the front's path
 * both ways without the steps, whose times vary with the machine's load far more than the
 * fronts differ.
 *
 * Greedy tokens do not depend on the batch (SPEC.md §7-8), so both fronts must return the
 * same 32 tokens for a prompt: a difference fails the bench.
 *
 * Rounds run every C with both fronts back to back, in an order that alternates from
 * round to round, so that neither always runs first; results are the medians over rounds,
 * http's with vs_zmq (its median / zmq's median, same C and metric) and vs_zmq_paired (the
 * median of the rounds' own ratios, free of the drift between rounds). */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "client/client.h"
#include "model/model_config.h"
#include "tools/bench.h"
#include "tools/local_cluster.h"
#include "tools/requests_file.h"

#define PROMPT_LEN 32
#define MAX_TOKENS 32
#define NUM_CASES 3
#define MAX_CLIENTS 64
#define MAX_ROUNDS 3
#define CASE_TIMEOUT_S 600
#define READY_TIMEOUT_S 60
#define IN_CAP 16384 /* received, not yet parsed: a few stream events */
#define EV_CAP 16384 /* decoded body, not yet a whole event */

static const int k_clients[NUM_CASES] = {1, 16, 64};
enum { F_ZMQ, F_HTTP, NUM_FRONTS };
static const char *const k_front[NUM_FRONTS] = {"zmq", "http"};
/* the results' metrics, then extras: the front's share of TTFT (the client's mean TTFT less
 * the gateway's) and the 1-minute load average before the case (how busy the machine was) */
enum { M_TTFT, M_TPOT, M_RPS, NUM_METRICS, M_FRONT = NUM_METRICS, M_LOAD, NUM_VALUES };
static const char *const k_metric[NUM_METRICS] = {"ttft", "tpot", "throughput"};
static const char *const k_unit[NUM_METRICS] = {"ms", "ms", "req/s"};

/* One request as a front ran it. */
typedef struct req_rec {
  int32_t tokens[MAX_TOKENS];
  int32_t got;
  uint64_t t_submit, t_first, t_last; /* monotonic ns */
} req_rec;

/* A case of a round: its prompts and what each front returned for them. */
typedef struct bcase {
  int clients, n;
  int32_t (*prompts)[PROMPT_LEN];
  req_rec *rec[NUM_FRONTS];
  double wall_s[NUM_FRONTS];
  double gw_ttft_ms[NUM_FRONTS]; /* the gateway's mean TTFT over the requests */
} bcase;

typedef struct bench_ctx {
  sc_local_cluster *lc;
  sc_client *cl;
  const char *http; /* "127.0.0.1:PORT" */
  struct sockaddr_in addr;
  sc_diag d;        /* why the bench failed */
} bench_ctx;

/* One HTTP connection and where its parser stands in the current response. */
enum { H_HEAD, H_SIZE, H_DATA, H_DATA_END, H_TRAILER };
typedef struct hconn {
  int fd, req; /* req: the request it runs, -1 when idle */
  int state, status;
  bool chunked, done_seen; /* Transfer-Encoding: chunked; data: [DONE] */
  size_t chunk_left;
  char in[IN_CAP], ev[EV_CAP];
  size_t in_len, ev_len;
} hconn;

static int rec_token(bench_ctx *x, req_rec *r, int32_t id, uint64_t now) {
  if (r->got == MAX_TOKENS) return sc_fail(&x->d, SC_EPROTO, "more than %d tokens", MAX_TOKENS);
  if (r->got == 0) r->t_first = now;
  r->t_last = now;
  r->tokens[r->got++] = id;
  return 0;
}

/* Both fronts fail the bench on the same terms: a request ends with all its tokens. */
static int rec_end(bench_ctx *x, const req_rec *r, int front) {
  if (r->got == MAX_TOKENS) return 0;
  return sc_fail(&x->d, SC_EPROTO, "a %s request ended with %d tokens, not %d", k_front[front],
                 r->got, MAX_TOKENS);
}

/* A dead node or a case past its time ends the bench, with the reason. */
static int check_alive(bench_ctx *x, double t0) {
  char msg[256];
  if (sc_local_cluster_poll(x->lc, msg, sizeof msg) > 0) return sc_fail(&x->d, SC_EIO, "%s", msg);
  if (sc_now_s() - t0 > CASE_TIMEOUT_S)
    return sc_fail(&x->d, SC_ETIMEDOUT, "a case ran past %d s", CASE_TIMEOUT_S);
  return 0;
}

/* ---- zmq ---- */

static int zmq_submit(bench_ctx *x, const int32_t *prompt, req_rec *r, uint64_t *id) {
  const sc_client_request cr = {.prompt = prompt, .prompt_len = PROMPT_LEN,
                                .max_tokens = MAX_TOKENS};
  memset(r, 0, sizeof *r);
  r->t_submit = sc_now_ns();
  const int rc = sc_client_submit(x->cl, &cr, id);
  return rc ? sc_fail(&x->d, rc, "cannot submit over ZeroMQ: %s", sc_strerror(rc)) : 0;
}

/* One sc_client, c->clients requests in flight: slot s runs request req[s]. */
static int zmq_case(bench_ctx *x, bcase *c) {
  req_rec *rec = c->rec[F_ZMQ];
  uint64_t ids[MAX_CLIENTS];
  int req[MAX_CLIENTS], next = 0, done = 0, rc = 0;
  const double t0 = sc_now_s();
  for (int s = 0; s < c->clients && rc == 0; s++, next++) {
    req[s] = next;
    rc = zmq_submit(x, c->prompts[next], &rec[next], &ids[s]);
  }
  while (rc == 0 && done < c->n) {
    if ((rc = check_alive(x, t0)) != 0) break;
    sc_client_event ev;
    rc = sc_client_next(x->cl, 100, &ev);
    const uint64_t now = sc_now_ns();
    if (rc == SC_ETIMEDOUT || rc == SC_EPROTO) { rc = 0; continue; }
    if (rc) return sc_fail(&x->d, rc, "ZeroMQ client: %s", sc_strerror(rc));
    int s = 0;
    while (s < c->clients && (req[s] < 0 || ids[s] != ev.request_id)) s++;
    if (s == c->clients) continue; /* (not ours: nothing else runs on this client) */
    req_rec *r = &rec[req[s]];
    if (ev.kind == SC_CLIENT_ERROR)
      return sc_fail(&x->d, SC_EIO, "a ZeroMQ request failed: %s (%s)", ev.message,
                     sc_errname(ev.code));
    for (int32_t i = 0; ev.kind == SC_CLIENT_TOKENS && i < ev.n && rc == 0; i++)
      rc = rec_token(x, r, ev.tokens[i], now);
    if (rc || ev.kind != SC_CLIENT_DONE) continue;
    done++;
    if ((rc = rec_end(x, r, F_ZMQ)) != 0) break;
    req[s] = next < c->n ? next++ : -1;
    if (req[s] >= 0) rc = zmq_submit(x, c->prompts[req[s]], &rec[req[s]], &ids[s]);
  }
  c->wall_s[F_ZMQ] = sc_now_s() - t0;
  return rc;
}

/* ---- http ---- */

static int send_all(bench_ctx *x, int fd, const char *p, size_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return sc_fail(&x->d, SC_EIO, "cannot send to %s: %s", x->http, strerror(errno));
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static int http_connect(bench_ctx *x, int *fd) {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return sc_fail(&x->d, SC_EIO, "socket: %s", strerror(errno));
  /* (each request is one send, but a client should not leave Nagle in the way) */
  const int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(s, (const struct sockaddr *)&x->addr, sizeof x->addr) != 0) {
    const int e = errno;
    close(s);
    return sc_fail(&x->d, SC_EIO, "cannot connect to %s: %s", x->http, strerror(e));
  }
  *fd = s;
  return 0;
}

/* GET path on a fresh connection, read to its end (or for 2 s) into buf: its status, 0
 * when none came. */
static int http_get(bench_ctx *x, const char *path, char *buf, size_t cap) {
  int fd, status = 0;
  if (http_connect(x, &fd) != 0) return 0;
  const struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char req[160];
  const int n = snprintf(req, sizeof req,
                         "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, x->http);
  size_t got = 0;
  ssize_t k = send_all(x, fd, req, (size_t)n) == 0 ? 1 : 0;
  while (k > 0 && got < cap - 1)
    if ((k = recv(fd, buf + got, cap - 1 - got, 0)) > 0) got += (size_t)k;
  close(fd);
  buf[got] = '\0';
  return sscanf(buf, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

/* The gateway's own TTFT so far, both fronts together (sparsecp_time_to_first_token_seconds:
 * a request's arrival at the gateway to its first token there, docs/http.md): the sum in
 * seconds and the count. What a client measures beyond it is its front's path both ways. */
static int gateway_ttft(bench_ctx *x, double *sum, double *count) {
  static char buf[65536];
  static const char *const keys[2] = {"\nsparsecp_time_to_first_token_seconds_sum ",
                                      "\nsparsecp_time_to_first_token_seconds_count "};
  double *out[2] = {sum, count};
  const char *s = http_get(x, "/metrics", buf, sizeof buf) == 200 ? buf : "";
  for (int i = 0; i < 2; i++) {
    const char *p = strstr(s, keys[i]);
    if (p == NULL) return sc_fail(&x->d, SC_EPROTO, "GET /metrics: no TTFT histogram");
    *out[i] = atof(p + strlen(keys[i]));
  }
  return 0;
}

/* Until /health says 200: every node joined and the scheduler answers. */
static int wait_ready(bench_ctx *x) {
  const double t0 = sc_now_s();
  char buf[256];
  while (http_get(x, "/health", buf, sizeof buf) != 200) {
    char msg[256];
    if (sc_local_cluster_poll(x->lc, msg, sizeof msg) > 0) return sc_fail(&x->d, SC_EIO, "%s", msg);
    if (sc_now_s() - t0 > READY_TIMEOUT_S)
      return sc_fail(&x->d, SC_ETIMEDOUT, "GET /health on %s: no 200 within %d s", x->http,
                     READY_TIMEOUT_S);
    const struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
  memset(&x->d, 0, sizeof x->d); /* (the tries' failures are not the bench's) */
  return 0;
}

static int http_submit(bench_ctx *x, hconn *h, const int32_t *prompt, req_rec *r) {
  memset(r, 0, sizeof *r);
  r->t_submit = sc_now_ns();
  char body[PROMPT_LEN * 12 + 128], msg[sizeof body + 256];
  int n = snprintf(body, sizeof body, "{\"prompt\":[");
  for (int i = 0; i < PROMPT_LEN; i++)
    n += snprintf(body + n, sizeof body - (size_t)n, "%s%d", i ? "," : "", prompt[i]);
  n += snprintf(body + n, sizeof body - (size_t)n,
                "],\"max_tokens\":%d,\"temperature\":0,\"stream\":true}", MAX_TOKENS);
  const int m = snprintf(msg, sizeof msg,
                         "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                         "application/json\r\nContent-Length: %d\r\n\r\n%s", x->http, n, body);
  h->state = H_HEAD;
  h->status = 0;
  h->chunked = h->done_seen = false;
  h->ev_len = 0;
  return send_all(x, h->fd, msg, (size_t)m);
}

/* The ids of an event's "token_ids" array (one per token event; none in the last one,
 * which carries finish_reason). */
static int take_ids(bench_ctx *x, const char *json, req_rec *r, uint64_t now) {
  const char *p = strstr(json, "\"token_ids\":[");
  if (p == NULL) return sc_fail(&x->d, SC_EPROTO, "a stream event without token_ids: %.200s", json);
  for (p += 13;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ']') return 0;
    char *end;
    const long v = strtol(p, &end, 10);
    if (end == p) return sc_fail(&x->d, SC_EPROTO, "a bad token_ids array: %.200s", json);
    const int rc = rec_token(x, r, (int32_t)v, now);
    if (rc) return rc;
    p = end;
  }
}

/* Takes the whole events out of the decoded body; an event split across chunks waits
 * there for its rest. */
static int take_events(bench_ctx *x, hconn *h, req_rec *r, uint64_t now) {
  size_t pos = 0;
  char *end;
  int rc = 0;
  while (rc == 0 && (end = memmem(h->ev + pos, h->ev_len - pos, "\n\n", 2)) != NULL) {
    char *e = h->ev + pos;
    *end = '\0';
    pos = (size_t)(end + 2 - h->ev);
    if (strncmp(e, "data: ", 6) != 0) continue; /* (comments, other fields) */
    e += 6;
    if (strcmp(e, "[DONE]") == 0) h->done_seen = true;
    else if (strncmp(e, "{\"error\"", 8) == 0)
      rc = sc_fail(&x->d, SC_EIO, "the stream failed: %.250s", e);
    else rc = take_ids(x, e, r, now);
  }
  memmove(h->ev, h->ev + pos, h->ev_len - pos);
  h->ev_len -= pos;
  return rc;
}

/* One CRLF-ended line of the response outside chunk data. Returns 1 when the response
 * ended (the last chunk's trailer), 2 when its head ended with another status than 200,
 * 0 to go on, < 0 on a bad response. */
static int take_line(bench_ctx *x, hconn *h, char *line) {
  switch (h->state) {
  case H_HEAD:
    if (h->status == 0 && sscanf(line, "HTTP/1.1 %d", &h->status) != 1)
      return sc_fail(&x->d, SC_EPROTO, "a bad status line: %.100s", line);
    if (strncasecmp(line, "transfer-encoding:", 18) == 0 && strstr(line, "chunked"))
      h->chunked = true;
    if (line[0] != '\0') return 0;
    if (h->status != 200) return 2;
    if (!h->chunked) return sc_fail(&x->d, SC_EPROTO, "a stream without chunked transfer");
    h->state = H_SIZE;
    return 0;
  case H_SIZE: {
    char *end;
    h->chunk_left = strtoul(line, &end, 16); /* (extensions after ';' ignored) */
    if (end == line) return sc_fail(&x->d, SC_EPROTO, "a bad chunk size: %.40s", line);
    h->state = h->chunk_left ? H_DATA : H_TRAILER;
    return 0;
  }
  case H_DATA_END:
    if (line[0] != '\0') return sc_fail(&x->d, SC_EPROTO, "a chunk longer than its size");
    h->state = H_SIZE;
    return 0;
  default: /* H_TRAILER: trailer fields until the empty line */
    if (line[0] != '\0') return 0;
    if (!h->done_seen) return sc_fail(&x->d, SC_EPROTO, "a stream ended without data: [DONE]");
    return 1;
  }
}

/* Parses what the connection received: returns 1 when its response ended, 0 when it
 * needs more bytes, < 0 on a bad response. */
static int take_input(bench_ctx *x, hconn *h, req_rec *r, uint64_t now) {
  size_t pos = 0;
  int rc = 0;
  while (rc == 0 && pos < h->in_len) {
    char *p = h->in + pos;
    const size_t left = h->in_len - pos;
    if (h->state == H_DATA) {
      size_t k = left < h->chunk_left ? left : h->chunk_left;
      if (k > EV_CAP - h->ev_len) k = EV_CAP - h->ev_len;
      if (k == 0) return sc_fail(&x->d, SC_EPROTO, "a stream event over %d bytes", EV_CAP);
      memcpy(h->ev + h->ev_len, p, k);
      h->ev_len += k;
      pos += k;
      if ((h->chunk_left -= k) == 0) h->state = H_DATA_END;
      rc = take_events(x, h, r, now);
      continue;
    }
    char *eol = memmem(p, left, "\r\n", 2);
    if (eol == NULL) break;
    *eol = '\0';
    pos += (size_t)(eol + 2 - p);
    if ((rc = take_line(x, h, p)) == 2) /* (what came of the error's body says why) */
      return sc_fail(&x->d, SC_EIO, "POST /v1/completions: HTTP %d %.*s", h->status,
                     (int)(h->in_len - pos < 200 ? h->in_len - pos : 200), h->in + pos);
  }
  if (rc == 0 && pos == 0 && h->in_len == IN_CAP)
    return sc_fail(&x->d, SC_EPROTO, "a response line over %d bytes", IN_CAP);
  memmove(h->in, h->in + pos, h->in_len - pos);
  h->in_len -= pos;
  return rc;
}

static int http_read(bench_ctx *x, hconn *h, req_rec *r) {
  const ssize_t k = recv(h->fd, h->in + h->in_len, IN_CAP - h->in_len, 0);
  const uint64_t now = sc_now_ns();
  if (k < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (k < 0) return sc_fail(&x->d, SC_EIO, "recv: %s", strerror(errno));
  if (k == 0) return sc_fail(&x->d, SC_EIO, "%s closed a connection during a request", x->http);
  h->in_len += (size_t)k;
  return take_input(x, h, r, now);
}

/* c->clients keep-alive connections, one request at a time on each; they are opened
 * before the clock starts (the case measures requests, not connection setup). */
static int http_case(bench_ctx *x, bcase *c) {
  req_rec *rec = c->rec[F_HTTP];
  hconn *h = calloc((size_t)c->clients, sizeof *h);
  struct pollfd pf[MAX_CLIENTS];
  int rc = h ? 0 : sc_fail(&x->d, SC_ENOMEM, "out of memory"), next = 0, done = 0;
  for (int s = 0; s < c->clients && h; s++) h[s].fd = -1;
  for (int s = 0; s < c->clients && rc == 0; s++) rc = http_connect(x, &h[s].fd);
  const double t0 = sc_now_s();
  for (int s = 0; s < c->clients && rc == 0; s++, next++) {
    h[s].req = next;
    rc = http_submit(x, &h[s], c->prompts[next], &rec[next]);
  }
  while (rc == 0 && done < c->n && (rc = check_alive(x, t0)) == 0) {
    for (int s = 0; s < c->clients; s++) /* (an idle connection's -1 is not polled) */
      pf[s] = (struct pollfd){h[s].req >= 0 ? h[s].fd : -1, POLLIN, 0};
    if (poll(pf, (nfds_t)c->clients, 100) < 0 && errno != EINTR) {
      rc = sc_fail(&x->d, SC_EIO, "poll: %s", strerror(errno));
      break;
    }
    for (int s = 0; s < c->clients && rc == 0; s++) {
      if (pf[s].revents == 0 || (rc = http_read(x, &h[s], &rec[h[s].req])) <= 0) continue;
      done++;
      if ((rc = rec_end(x, &rec[h[s].req], F_HTTP)) != 0) break;
      h[s].req = next < c->n ? next++ : -1;
      if (h[s].req >= 0) rc = http_submit(x, &h[s], c->prompts[h[s].req], &rec[h[s].req]);
    }
  }
  c->wall_s[F_HTTP] = sc_now_s() - t0;
  for (int s = 0; h && s < c->clients; s++)
    if (h[s].fd >= 0) close(h[s].fd);
  free(h);
  return rc;
}

/* ---- cases, rounds, results ---- */

/* Requests of a case with c clients: each client runs several back to back. */
static int case_requests(int c, bool quick) {
  return quick ? (c > 4 ? c : 4) : (4 * c > 8 ? 4 * c : 8);
}

/* Runs front f on the case, and the gateway's mean TTFT over its requests. */
static int run_front(bench_ctx *x, bcase *c, int f) {
  double s0, n0, s1, n1;
  int rc = gateway_ttft(x, &s0, &n0);
  if (rc == 0) rc = f == F_ZMQ ? zmq_case(x, c) : http_case(x, c);
  if (rc == 0) rc = gateway_ttft(x, &s1, &n1);
  c->gw_ttft_ms[f] = n1 - n0 == c->n ? (s1 - s0) * 1e3 / c->n : NAN;
  return rc;
}

/* With one client the fronts take turns request by request (which one first alternating),
 * so that both meet the same machine: its step time shifts between two levels for
 * seconds at a time (bench/http.md), by more than the difference being measured. The
 * case's wall time is then the sum of its requests' own. */
static int run_interleaved(bench_ctx *x, bcase *c, int first) {
  double wall[NUM_FRONTS] = {0}, gw[NUM_FRONTS] = {0};
  for (int i = 0; i < c->n; i++)
    for (int k = 0; k < NUM_FRONTS; k++) {
      const int f = (first + i + k) % NUM_FRONTS;
      bcase one = {.clients = 1, .n = 1, .prompts = &c->prompts[i]};
      one.rec[f] = &c->rec[f][i];
      const int rc = run_front(x, &one, f);
      if (rc) return rc;
      wall[f] += one.wall_s[f];
      gw[f] += one.gw_ttft_ms[f] / c->n;
    }
  for (int f = 0; f < NUM_FRONTS; f++) {
    c->wall_s[f] = wall[f];
    c->gw_ttft_ms[f] = gw[f];
  }
  return 0;
}

/* Both fronts on the same prompts, first one first (with one client: in turns); then
 * their tokens must agree. */
static int run_pair(bench_ctx *x, bcase *c, int first) {
  int rc = c->clients == 1 ? run_interleaved(x, c, first) : run_front(x, c, first);
  if (rc == 0 && c->clients > 1) rc = run_front(x, c, 1 - first);
  for (int i = 0; rc == 0 && i < c->n; i++) {
    const req_rec *z = &c->rec[F_ZMQ][i], *h = &c->rec[F_HTTP][i];
    for (int k = 0; k < MAX_TOKENS; k++)
      if (z->tokens[k] != h->tokens[k])
        return sc_fail(&x->d, SC_EPROTO,
                       "%d clients, request %d: token %d is %d over HTTP, %d over ZeroMQ "
                       "(greedy tokens must not depend on the front)", c->clients, i, k,
                       h->tokens[k], z->tokens[k]);
  }
  return rc;
}

static int case_alloc(bcase *c, int clients, int n, int32_t vocab, uint64_t seed) {
  *c = (bcase){.clients = clients, .n = n};
  c->prompts = calloc((size_t)n, sizeof *c->prompts);
  for (int f = 0; f < NUM_FRONTS; f++) c->rec[f] = calloc((size_t)n, sizeof(req_rec));
  if (!c->prompts || !c->rec[F_ZMQ] || !c->rec[F_HTTP]) return SC_ENOMEM;
  for (int i = 0; i < n; i++)
    sc_requests_fill_prompt(c->prompts[i], PROMPT_LEN, vocab, seed + (uint64_t)i);
  return 0;
}

static void case_free(bcase *c) {
  free(c->prompts);
  for (int f = 0; f < NUM_FRONTS; f++) free(c->rec[f]);
}

/* The case's values for front f. */
static void case_values(const bcase *c, int f, double out[NUM_VALUES]) {
  double ttft[4 * MAX_CLIENTS], tpot[4 * MAX_CLIENTS], mean = 0;
  for (int i = 0; i < c->n; i++) {
    const req_rec *r = &c->rec[f][i];
    ttft[i] = (double)(r->t_first - r->t_submit) * 1e-6;
    tpot[i] = (double)(r->t_last - r->t_first) * 1e-6 / (MAX_TOKENS - 1);
    mean += ttft[i] / c->n;
  }
  out[M_TTFT] = sc_bench_percentile(ttft, c->n, 50);
  out[M_TPOT] = sc_bench_percentile(tpot, c->n, 50);
  out[M_FRONT] = mean - c->gw_ttft_ms[f];
  out[M_RPS] = c->n / c->wall_s[f];
}

/* samples[front][case][value][round] */
typedef double samples_t[NUM_FRONTS][NUM_CASES][NUM_VALUES][MAX_ROUNDS];

/* ,"key":v, or null when v is not a number (JSON has no NaN). */
static int put_num(char *out, size_t cap, const char *key, double v) {
  return isfinite(v) ? snprintf(out, cap, ",\"%s\":%.3f", key, v)
                     : snprintf(out, cap, ",\"%s\":null", key);
}

/* The extras of front f's result for metric m of case k: the workload; for TTFT front_ms,
 * the median over rounds of what the front added to the mean TTFT beyond the gateway's own
 * (its path both ways, free of the step times, which vary with the machine's load far more
 * than the fronts differ); for http the ratios to zmq. */
static void extras(char *out, size_t cap, samples_t s, int k, int m, int f, int rounds, int n) {
  int len = snprintf(out, cap, "\"requests\":%d,\"prompt_tokens\":%d,\"max_tokens\":%d", n,
                     PROMPT_LEN, MAX_TOKENS);
  len += put_num(out + len, cap - (size_t)len, "load_1m", sc_bench_median(s[f][k][M_LOAD], rounds));
  if (m == M_TTFT)
    len += put_num(out + len, cap - (size_t)len, "front_ms",
                   sc_bench_median(s[f][k][M_FRONT], rounds));
  if (f != F_HTTP) return;
  double paired[MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) paired[r] = s[F_HTTP][k][m][r] / s[F_ZMQ][k][m][r];
  const double ratio =
      sc_bench_median(s[F_HTTP][k][m], rounds) / sc_bench_median(s[F_ZMQ][k][m], rounds);
  snprintf(out + len, cap - (size_t)len, ",\"vs_zmq\":%.4f,\"vs_zmq_paired\":%.4f", ratio,
           sc_bench_median(paired, rounds));
}

static void emit(sc_bench *b, samples_t s, int rounds, bool quick) {
  for (int k = 0; k < NUM_CASES; k++)
    for (int m = 0; m < NUM_METRICS; m++)
      for (int f = 0; f < NUM_FRONTS; f++) {
        char name[64], params[96], extra[256];
        snprintf(name, sizeof name, "http.%s.%s", k_metric[m], k_front[f]);
        snprintf(params, sizeof params, "\"front\":\"%s\",\"clients\":%d", k_front[f],
                 k_clients[k]);
        extras(extra, sizeof extra, s, k, m, f, rounds, case_requests(k_clients[k], quick));
        sc_bench_add(b, name, params, k_unit[m], s[f][k][m], rounds, extra);
      }
}

/* Start, ready, connect, and an unmeasured warm-up of both fronts (first requests touch
 * the KV pool, the scratch buffers and the front's own paths). */
static int setup(bench_ctx *x, int32_t vocab) {
  const sc_local_cluster_opts co = {.pcp = 1, .dcp = 1, .tp = 1, .http = "127.0.0.1:0",
                                    .log_level = "warn", .quiet = true};
  int rc = sc_local_cluster_start(&co, &x->lc, &x->d);
  if (rc) return rc;
  x->http = sc_local_cluster_http(x->lc);
  const char *colon = strrchr(x->http, ':'); /* ("127.0.0.1:PORT", as asked for) */
  x->addr = (struct sockaddr_in){.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)atoi(colon ? colon + 1 : "0")),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if ((rc = wait_ready(x)) != 0 ||
      (rc = sc_client_connect(&x->cl, sc_local_cluster_listen(x->lc), &x->d)) != 0)
    return rc;
  bcase warm;
  rc = case_alloc(&warm, 2, 4, vocab, 999999);
  if (rc == 0) rc = run_pair(x, &warm, F_ZMQ);
  case_free(&warm);
  return rc;
}

/* One case of round r: both fronts, in the round's order; its metrics into s. */
static int run_case(bench_ctx *x, samples_t s, int k, int r, bool quick, int32_t vocab) {
  const int c = k_clients[k], n = case_requests(c, quick);
  const int first = r % 2 ? F_HTTP : F_ZMQ;
  bcase bc;
  double load;
  if (getloadavg(&load, 1) != 1) load = NAN;
  /* prompts differ by round and case, the same for both fronts */
  int rc = case_alloc(&bc, c, n, vocab, (uint64_t)(r * NUM_CASES + k) * 100000);
  if (rc == 0) rc = run_pair(x, &bc, first);
  for (int i = 0; rc == 0 && i < NUM_FRONTS; i++) {
    const int f = i ? 1 - first : first; /* (in the order they ran) */
    double v[NUM_VALUES] = {[M_LOAD] = load};
    case_values(&bc, f, v);
    for (int m = 0; m < NUM_VALUES; m++) s[f][k][m][r] = v[m];
    fprintf(stderr, "  round %d, %2d clients, %-4s: %3d requests in %5.2f s, TTFT %7.2f ms "
            "(front %.2f), TPOT %6.2f ms, %5.2f req/s, load %.1f\n", r + 1, c, k_front[f], n,
            bc.wall_s[f], v[M_TTFT], v[M_FRONT], v[M_TPOT], v[M_RPS], load);
  }
  case_free(&bc);
  return rc;
}

int sc_bench_http(sc_bench *b) {
  const int rounds = b->quick ? 1 : MAX_ROUNDS;
  sc_model_config model;
  sc_model_config_default(&model);
  static samples_t s;
  bench_ctx x = {0};
  /* a child that dies, or a connection the server closes, must not kill the bench */
  signal(SIGPIPE, SIG_IGN);
  fprintf(stderr, "bench http: %d round(s); 1, 16, 64 streaming clients, %d-token prompts, "
          "max_tokens %d; P1 N1 CPU, default model; zmq and http fronts\n", rounds, PROMPT_LEN,
          MAX_TOKENS);
  int rc = setup(&x, model.vocab);
  for (int r = 0; rc == 0 && r < rounds; r++)
    for (int k = 0; rc == 0 && k < NUM_CASES; k++)
      rc = run_case(&x, s, k, r, b->quick, model.vocab);
  if (rc == 0) emit(b, s, rounds, b->quick);
  else fprintf(stderr, "bench http: %s\n", x.d.code ? sc_diag_message(&x.d) : sc_strerror(rc));
  sc_client_close(x.cl);
  sc_local_cluster_stop(x.lc);
  return rc;
}
