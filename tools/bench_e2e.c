/* bench_e2e.c - `sparsecp bench e2e`: end-to-end throughput of the whole pipeline on the
 * CPU backend, (P, N) = (1,1), (2,1), (2,2), (4,4) with T = 1, on one workload.
 *
 * Each round starts a fresh local cluster per layout (real `sparsecp node` processes,
 * the default model), proves it up with a one-token request, runs a small unmeasured
 * warm-up of the workload's shapes (first-touch page faults of the KV pool and the
 * scratch buffers would otherwise land in the first measured phase), then two phases:
 *
 *   prefill  several long prompts with max_tokens 1, submitted at once: prompt tokens
 *            divided by the time from the first submission to the last completion.
 *            With max_tokens 1 every step of the phase is a (chunked) prefill step.
 *   decode   many medium prompts with many output tokens: generated tokens divided by
 *            the time after the last request received its first token (from then on
 *            every step is a pure decode step of the whole batch) until the last one
 *            finished. The prompts' own prefill is not counted.
 *
 * Rounds interleave the layouts (round 1: all four, round 2: all four, ...) so that the
 * load other users put on a shared machine spreads over all layouts alike; medians of
 * the rounds are reported, with ratio_to_1x1 = median / median of (1,1), and
 * ratio_best_to_1x1 = best round / best round of (1,1) (the least disturbed rounds).
 *
 * Runtime overhead comes from node 0's tap (DESIGN.md §6), subscribed to two topics
 * only, so nothing else is encoded: "0/partitioner/global_batch" (the scheduler hands a
 * step's batch to the partitioner: the step starts) and "0/scheduler/step_result" (rank
 * 0's executor returns the sampled tokens: the step ends; the message carries
 * compute_ns, rank 0's forward time). Overhead = (step wall - compute) / step wall,
 * summed over the phase's steps: planning, plan/input messaging, the executors waiting
 * for their inputs, sampling and the result message. Collective waits inside the forward
 * count as compute (they are inside compute_ns), so this is the runtime's own share, not
 * the cost of parallelism. The tap itself adds two encoded messages per step on node 0.
 *
 * Transports (SC_BENCH_E2E_TRANSPORT, default ipc): the nodes talk over ipc, over tcp
 * loopback with CURVE between them ("tcp+curve": what a cluster on a network runs), or
 * over plain tcp ("tcp": only to measure what CURVE costs). Several in one run, separated
 * by commas or "all", run back to back within each round and layout, in an order that
 * alternates from round to round; tcp+curve's results then give their ratio to plain
 * tcp's (vs_plain_tcp). The client's connection to the gateway is plain in every case:
 * it is the same loopback link whatever the nodes use.
 *
 * SC_BENCH_E2E_LAYOUTS ("4x4", ...) runs only the layouts listed besides (1,1), the
 * control; SC_BENCH_E2E_ROUNDS (1-16) replaces the workload's number of rounds. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "actors/runtime/sc_tap_record.h"
#include "base/clock.h"
#include "base/curve_key.h"
#include "client/client.h"
#include "messages/messages.h"
#include "model/hf_memory.h"
#include "model/model_config.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/local_cluster.h"
#include "tools/requests_file.h"

#define NUM_LAYOUTS 4
#define MAX_ROUNDS 16
#define PHASE_TIMEOUT_S 300
static const int32_t k_layouts[NUM_LAYOUTS][2] = {{1, 1}, {2, 1}, {2, 2}, {4, 4}};

typedef struct e2e_transport {
  const char *name;
  bool tcp;       /* loopback tcp (else ipc in the cluster's private folder) */
  bool plaintext; /* with tcp: no keys (the cluster file's "plaintext_tcp") */
} e2e_transport;

static const e2e_transport k_transports[] = {
    {"ipc", false, false}, {"tcp", true, true}, {"tcp+curve", true, false}};
#define NUM_TRANSPORTS 3
#define T_TCP 1   /* plain tcp: what tcp+curve is compared with */
#define T_CURVE 2

typedef struct workload {
  int32_t prefill_reqs, prefill_len;           /* max_tokens 1 */
  int32_t decode_reqs, decode_len, decode_out; /* decode_out tokens each */
  int32_t rounds, token_budget, num_blocks;
} workload;

/* Full run: 4 x 1024 prefill tokens (one prompt per step at the token budget of 1024),
 * then 8 requests of 256-token contexts decoding 32 tokens each (31 pure decode steps of
 * batch 8). Sized so that one round of the four layouts takes well under a minute on a
 * quiet 2-core machine, leaving room for several rounds. The KV pool (512 blocks of 16
 * per rank) holds either phase at N = 1 without queueing. Quick: the same shapes,
 * smaller, one round: a smoke test. */
static const workload k_full = {4, 1024, 8, 256, 32, 9, 1024, 512};
static const workload k_quick = {2, 256, 2, 64, 8, 1, 1024, 512};

typedef struct step_rec {
  uint64_t step, t_start, t_end, compute_ns; /* tap wall-clock ns */
} step_rec;

/* The tap subscriber on node 0 and the steps it saw. */
typedef struct tapwatch {
  void *zctx, *sub;
  step_rec *v;
  int n, cap;
} tapwatch;

typedef struct e2e_req {
  int32_t *prompt;
  int32_t len, max_tokens, got;
  uint64_t id;
  bool done;
} e2e_req;

/* What one phase measured. */
typedef struct phase_out {
  double tok_per_s;
  double step_s, compute_s; /* summed over the steps that ended in the window */
  double window_s;
  int32_t steps;
} phase_out;

static step_rec *step_of(tapwatch *t, uint64_t step) {
  for (int i = t->n - 1; i >= 0 && i >= t->n - 64; i--)
    if (t->v[i].step == step) return &t->v[i];
  if (t->n == t->cap) {
    const int cap = t->cap ? 2 * t->cap : 256;
    step_rec *v = realloc(t->v, (size_t)cap * sizeof *v);
    if (v == NULL) return NULL;
    t->v = v;
    t->cap = cap;
  }
  t->v[t->n] = (step_rec){.step = step};
  return &t->v[t->n++];
}

/* A tap on tcp with CURVE (tcp+curve) admits the one subscriber key whose secret the local
 * cluster keeps in a file; its server key is node 0's public key, from the cluster file.
 * Nothing to do on other taps. */
static int tap_curve(void *sub, const sc_local_cluster *lc, sc_diag *d) {
  const char *key_file = sc_local_cluster_tap_key_file(lc);
  if (key_file[0] == '\0') return 0;
  uint8_t secret[32], public_key[32];
  char public_z85[SC_CURVE_Z85_LEN + 1];
  sc_cluster c = {0};
  int rc = sc_curve_load_secret(key_file, secret, public_z85, d);
  if (rc == 0) rc = sc_curve_decode(public_z85, public_key, d);
  if (rc == 0 && (rc = sc_cluster_load(sc_local_cluster_file(lc), &c, d)) == 0 &&
      sc_curve_make_client(sub, public_key, secret, c.nodes[0].public_key) != 0)
    rc = sc_fail(d, SC_EIO, "cannot use CURVE on the tap: %s", zmq_strerror(errno));
  sc_cluster_free(&c);
  sc_wipe(secret, sizeof secret);
  return rc;
}

static int tap_open(tapwatch *t, const sc_local_cluster *lc, sc_diag *d) {
  memset(t, 0, sizeof *t);
  t->zctx = zmq_ctx_new();
  if (t->zctx == NULL) return SC_EIO;
  t->sub = zmq_socket(t->zctx, ZMQ_SUB);
  if (t->sub == NULL) return SC_EIO;
  static const char *const topics[] = {"0/partitioner/global_batch", "0/scheduler/step_result"};
  const int zero = 0, hwm = 100000; /* drained between client events: never drop */
  zmq_setsockopt(t->sub, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(t->sub, ZMQ_RCVHWM, &hwm, sizeof hwm);
  for (int i = 0; i < 2; i++) zmq_setsockopt(t->sub, ZMQ_SUBSCRIBE, topics[i], strlen(topics[i]));
  const int rc = tap_curve(t->sub, lc, d);
  if (rc != 0) return rc;
  const char *endpoint = sc_local_cluster_tap(lc, 0);
  return zmq_connect(t->sub, endpoint) == 0 ? 0 : sc_fail(d, SC_EIO, "cannot connect to %s", endpoint);
}

static void tap_close(tapwatch *t) {
  if (t->sub) zmq_close(t->sub);
  if (t->zctx) zmq_ctx_term(t->zctx);
  free(t->v);
  memset(t, 0, sizeof *t);
}

/* Reads every tap message that is waiting, without blocking. */
static int tap_drain(tapwatch *t) {
  for (;;) {
    zmq_msg_t topic, data;
    zmq_msg_init(&topic);
    if (zmq_msg_recv(&topic, t->sub, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&topic);
      return errno == EAGAIN ? 0 : SC_EIO;
    }
    const bool more = zmq_msg_more(&topic);
    zmq_msg_close(&topic);
    if (!more) continue;
    zmq_msg_init(&data);
    if (zmq_msg_recv(&data, t->sub, 0) < 0) { /* parts of one message arrive together */
      zmq_msg_close(&data);
      return SC_EIO;
    }
    const uint8_t *p = zmq_msg_data(&data);
    size_t left = zmq_msg_size(&data);
    sc_tap_record rec;
    while (sc_tap_record_next(&p, &left, &rec) > 0) {
      const uint64_t ns = rec.ns;
      const uint8_t *raw = rec.msg;
      const uint32_t len = rec.len;
      sc_envelope env;
      void *body = NULL;
      sc_diag d = {0};
      if (sc_msg_peek_envelope(raw, len, &env) != 0) continue;
      step_rec *s = step_of(t, env.step);
      if (s == NULL) {
        zmq_msg_close(&data);
        return SC_ENOMEM;
      }
      if (env.type == SC_MSG_GLOBAL_BATCH) {
        if (s->t_start == 0) s->t_start = ns;
      } else if (env.type == SC_MSG_STEP_RESULT &&
                 sc_msg_decode(raw, len, &env, &body, &d) == 0) {
        s->t_end = ns;
        s->compute_ns = ((const sc_msg_step_result *)body)->compute_ns;
        sc_msg_body_destroy(env.type, body);
      }
    }
    zmq_msg_close(&data);
  }
}

/* Sums the steps that ended inside (from, to]. Drains the tap first until every step
 * that started has ended (the tap publishes from node 0's transport thread, so the last
 * records can trail the client's last event by a little), or 1 s passed. */
static int tap_window(tapwatch *t, uint64_t from, uint64_t to, phase_out *o) {
  const double until = sc_now_s() + 1.0;
  for (;;) {
    int rc = tap_drain(t);
    if (rc) return rc;
    bool open = false;
    for (int i = 0; i < t->n; i++) open |= t->v[i].t_start > from && t->v[i].t_end == 0;
    if (!open || sc_now_s() > until) break;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  o->steps = 0;
  o->step_s = o->compute_s = 0;
  for (int i = 0; i < t->n; i++) {
    const step_rec *s = &t->v[i];
    if (s->t_start == 0 || s->t_end <= from || s->t_end > to || s->t_end < s->t_start) continue;
    o->steps++;
    o->step_s += (double)(s->t_end - s->t_start) * 1e-9;
    o->compute_s += (double)s->compute_ns * 1e-9;
  }
  return 0;
}

/* Submits reqs[0..n) at once and waits for all. decode = false: prompt tokens per second
 * over the whole phase; true: tokens generated after every request had its first token,
 * per second of that window. */
static int run_phase(sc_client *cl, sc_local_cluster *lc, tapwatch *tw, e2e_req *reqs,
                     int32_t n, bool decode, phase_out *o, char *why, size_t why_len) {
  memset(o, 0, sizeof *o);
  const uint64_t w0 = sc_wall_ns();
  const double t0 = sc_now_s();
  int64_t prompt_tokens = 0;
  for (int32_t i = 0; i < n; i++) {
    const sc_client_request cr = {.prompt = reqs[i].prompt, .prompt_len = reqs[i].len,
                                  .max_tokens = reqs[i].max_tokens};
    reqs[i].got = 0;
    reqs[i].done = false;
    if (sc_client_submit(cl, &cr, &reqs[i].id) != 0) {
      snprintf(why, why_len, "cannot submit request %d", i);
      return SC_EIO;
    }
    prompt_tokens += reqs[i].len;
  }
  int32_t done = 0, with_first = 0;
  int64_t total = 0, at_first = 0;
  double t_first = 0;
  uint64_t w_first = 0;
  while (done < n) {
    if (sc_now_s() - t0 > PHASE_TIMEOUT_S) {
      snprintf(why, why_len, "%d of %d requests unfinished after %d s", n - done, n, PHASE_TIMEOUT_S);
      return SC_ETIMEDOUT;
    }
    if (sc_local_cluster_poll(lc, why, why_len) > 0) return SC_EIO;
    int rc = tap_drain(tw);
    if (rc) {
      snprintf(why, why_len, "tap: %s", sc_strerror(rc));
      return rc;
    }
    sc_client_event ev;
    rc = sc_client_next(cl, 2, &ev);
    if (rc == SC_ETIMEDOUT || rc == SC_EPROTO) continue;
    if (rc) {
      snprintf(why, why_len, "client: %s", sc_strerror(rc));
      return rc;
    }
    e2e_req *r = NULL;
    for (int32_t i = 0; i < n && r == NULL; i++)
      if (reqs[i].id == ev.request_id) r = &reqs[i];
    if (r == NULL) continue; /* the warm-up's leftovers */
    if (ev.kind == SC_CLIENT_ERROR) {
      snprintf(why, why_len, "request failed: %s (%s)", ev.message, sc_errname(ev.code));
      return SC_EIO;
    }
    if (ev.kind == SC_CLIENT_TOKENS) {
      if (r->got == 0 && ev.n > 0 && ++with_first == n) {
        t_first = sc_now_s();
        w_first = sc_wall_ns();
        at_first = total + ev.n;
      }
      r->got += ev.n;
      total += ev.n;
    } else if (ev.kind == SC_CLIENT_DONE && !r->done) {
      r->done = true;
      done++;
    }
  }
  const double t1 = sc_now_s();
  const uint64_t w1 = sc_wall_ns();
  if (decode) {
    if (total - at_first <= 0 || t1 <= t_first) {
      snprintf(why, why_len, "the decode phase generated no tokens after the first ones");
      return SC_EPROTO;
    }
    o->window_s = t1 - t_first;
    o->tok_per_s = (double)(total - at_first) / o->window_s;
  } else {
    o->window_s = t1 - t0;
    o->tok_per_s = (double)prompt_tokens / o->window_s;
  }
  const int rc = tap_window(tw, decode ? w_first : w0, w1, o);
  if (rc) {
    snprintf(why, why_len, "tap: %s", sc_strerror(rc));
    return rc;
  }
  return 0;
}

static int make_reqs(e2e_req *v, int32_t n, int32_t len, int32_t max_tokens, int32_t vocab,
                     uint64_t seed) {
  for (int32_t i = 0; i < n; i++) {
    v[i] = (e2e_req){.len = len, .max_tokens = max_tokens};
    v[i].prompt = malloc(sizeof(int32_t) * (size_t)len);
    if (v[i].prompt == NULL) return SC_ENOMEM;
    /* deterministic: the same prompts for every layout */
    sc_requests_fill_prompt(v[i].prompt, len, vocab, seed * 1000 + (uint64_t)i);
  }
  return 0;
}

static void free_reqs(e2e_req *v, int32_t n) {
  for (int32_t i = 0; v && i < n; i++) free(v[i].prompt);
}

/* One round on one layout and transport: start, ready, warm-up, prefill phase, decode
 * phase, stop. */
static int run_round(const workload *w, int32_t pcp, int32_t dcp, const e2e_transport *tr,
                     e2e_req *pre, e2e_req *dec, e2e_req *warm, phase_out *po, phase_out *dout,
                     char *why, size_t why_len) {
  const sc_local_cluster_opts co = {.pcp = pcp, .dcp = dcp, .tp = 1, .taps = true,
                                    .tcp = tr->tcp, .plaintext_tcp = tr->plaintext,
                                    .token_budget = w->token_budget, .num_blocks = w->num_blocks,
                                    .log_level = "warn", .quiet = true};
  sc_local_cluster *lc = NULL;
  sc_client *cl = NULL;
  tapwatch tw = {0};
  sc_diag d = {0};
  int rc = sc_local_cluster_start(&co, &lc, &d);
  if (rc) {
    snprintf(why, why_len, "cannot start a P%d N%d cluster over %s: %s", pcp, dcp, tr->name,
             sc_diag_message(&d));
    return rc;
  }
  if ((rc = tap_open(&tw, lc, &d)) != 0) {
    snprintf(why, why_len, "cannot subscribe to node 0's tap %s: %s", sc_local_cluster_tap(lc, 0),
             sc_diag_message(&d));
    goto out;
  }
  if ((rc = sc_client_connect(&cl, sc_local_cluster_listen(lc), &d)) != 0) {
    snprintf(why, why_len, "%s", sc_diag_message(&d));
    goto out;
  }
  /* Ready: a one-token request goes through the whole pipeline before any clock runs
   * (the nodes load the model and connect their collectives first). It is repeated until
   * the tap shows a whole step: the subscription reaches node 0 asynchronously, and a
   * phase measured before it did would see no steps. */
  for (int tries = 0;; tries++) {
    int32_t one = 1;
    e2e_req r = {.prompt = &one, .len = 1, .max_tokens = 1};
    phase_out ignored;
    if ((rc = run_phase(cl, lc, &tw, &r, 1, false, &ignored, why, why_len)) != 0) goto out;
    bool seen = false;
    for (int i = 0; i < tw.n; i++) seen |= tw.v[i].t_start && tw.v[i].t_end;
    if (seen) break;
    if (tries == 100) {
      snprintf(why, why_len, "node 0's tap showed no step after %d requests", tries + 1);
      rc = SC_ETIMEDOUT;
      goto out;
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  /* Warm-up, unmeasured: one decode-phase request (a prefill, then a few decode steps)
   * touches the code paths and scratch buffers of both phases. */
  phase_out ignored;
  if ((rc = run_phase(cl, lc, &tw, warm, 1, true, &ignored, why, why_len)) != 0 ||
      (rc = run_phase(cl, lc, &tw, pre, w->prefill_reqs, false, po, why, why_len)) != 0 ||
      (rc = run_phase(cl, lc, &tw, dec, w->decode_reqs, true, dout, why, why_len)) != 0)
    goto out;
  if (po->steps == 0 || dout->steps == 0) {
    snprintf(why, why_len, "node 0's tap showed no step of the %s phase",
             po->steps == 0 ? "prefill" : "decode");
    rc = SC_EPROTO;
  }
out:
  sc_client_close(cl);
  tap_close(&tw);
  sc_local_cluster_stop(lc);
  return rc;
}

static double frac(const phase_out *a, const phase_out *b) {
  const double step = a->step_s + (b ? b->step_s : 0), comp = a->compute_s + (b ? b->compute_s : 0);
  return step > 0 ? (step - comp) / step : NAN;
}

static double best(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++)
    if (v[i] > m) m = v[i];
  return m;
}

/* What the rounds of one layout on one transport measured, one entry per round. */
typedef struct case_samples {
  double pre[MAX_ROUNDS], dec[MAX_ROUNDS];          /* tok/s */
  double ovh[MAX_ROUNDS], ovh_pre[MAX_ROUNDS], ovh_dec[MAX_ROUNDS]; /* fractions */
  double step_pre[MAX_ROUNDS], step_dec[MAX_ROUNDS]; /* ms per step */
  double ovms_pre[MAX_ROUNDS], ovms_dec[MAX_ROUNDS]; /* overhead ms per step */
  double busy_dec[MAX_ROUNDS], load[MAX_ROUNDS];
} case_samples;

static void record_round(case_samples *cs, int r, const phase_out *po, const phase_out *dout) {
  cs->pre[r] = po->tok_per_s;
  cs->dec[r] = dout->tok_per_s;
  cs->ovh[r] = frac(po, dout);
  cs->ovh_pre[r] = frac(po, NULL);
  cs->ovh_dec[r] = frac(dout, NULL);
  cs->step_pre[r] = po->steps ? po->step_s * 1e3 / po->steps : NAN;
  cs->step_dec[r] = dout->steps ? dout->step_s * 1e3 / dout->steps : NAN;
  cs->busy_dec[r] = dout->window_s > 0 ? dout->step_s / dout->window_s : NAN;
  cs->ovms_pre[r] = (po->step_s - po->compute_s) * 1e3 / po->steps;
  cs->ovms_dec[r] = (dout->step_s - dout->compute_s) * 1e3 / dout->steps;
}

/* SC_BENCH_E2E_TRANSPORT: "all", or transport names separated by commas; on[t] for those
 * it names. Unset or empty: ipc alone. SC_EINVAL, said on stderr, for a name that is no
 * transport. */
static const char *transport_name(int t) { return k_transports[t].name; }

static int parse_transports(const char *v, bool on[NUM_TRANSPORTS]) {
  const bool all = v != NULL && strcmp(v, "all") == 0;
  for (int t = 0; t < NUM_TRANSPORTS; t++) on[t] = all || ((v == NULL || v[0] == 0) && t == 0);
  if (all || v == NULL || v[0] == 0) return 0;
  if (sc_bench_pick(v, NUM_TRANSPORTS, transport_name, on) > 0) return 0;
  fprintf(stderr, "bench e2e: SC_BENCH_E2E_TRANSPORT=%s: the transports are ipc, tcp, "
                  "tcp+curve (several separated by commas) or all\n", v);
  return SC_EINVAL;
}

/* SC_BENCH_E2E_LAYOUTS: layouts as "PxN" separated by commas ("4x4"); (1,1) runs always
 * (the control, and the base of ratio_to_1x1). Unset or empty: all four. */
static const char *layout_name(int l) {
  static const char *names[NUM_LAYOUTS] = {"1x1", "2x1", "2x2", "4x4"};
  return names[l];
}

static int parse_layouts(const char *v, bool on[NUM_LAYOUTS]) {
  const bool all = v == NULL || v[0] == 0;
  for (int l = 0; l < NUM_LAYOUTS; l++) on[l] = all || l == 0;
  if (all || sc_bench_pick(v, NUM_LAYOUTS, layout_name, on) > 0) return 0;
  fprintf(stderr, "bench e2e: SC_BENCH_E2E_LAYOUTS=%s: the layouts are 1x1, 2x1, 2x2, 4x4 "
                  "(P x N, several separated by commas)\n", v);
  return SC_EINVAL;
}

/* ",\"vs_plain_tcp\":R,\"vs_plain_tcp_paired\":P" for tcp+curve: the ratio of the medians
 * to plain tcp's, and the median of the rounds' own ratios (both ran back to back in each
 * round, so a round's ratio is free of the drift between rounds). Empty without plain. */
static void vs_plain(char *out, size_t len, const double *curve, const double *plain, int n) {
  out[0] = '\0';
  if (plain == NULL) return;
  double paired[MAX_ROUNDS];
  for (int r = 0; r < n; r++) paired[r] = curve[r] / plain[r];
  snprintf(out, len, ",\"vs_plain_tcp\":%.4f,\"vs_plain_tcp_paired\":%.4f",
           sc_bench_median(curve, n) / sc_bench_median(plain, n), sc_bench_median(paired, n));
}

/* The three results of one layout on one transport. one: (1,1) on the same transport, for
 * the ratios to it; plain: plain tcp's samples of the same layout (tcp+curve only). */
static void emit_case(sc_bench *b, const workload *w, int t, int l, const case_samples *cs,
                      const case_samples *one, const case_samples *plain) {
  const int n = w->rounds, nodes = k_layouts[l][0];
  char params[192], extra[640], vs[96];
  snprintf(params, sizeof params,
           "\"pcp\":%d,\"dcp\":%d,\"tp\":1,\"device\":\"cpu\",\"transport\":\"%s\"",
           k_layouts[l][0], k_layouts[l][1], k_transports[t].name);
  /* Best runs too: on a shared machine the fastest round is the one least disturbed by
   * other jobs, and multi-node layouts suffer more from them (every collective waits for
   * the slowest rank), so best / best is the steadier estimate of the scaling. */
  vs_plain(vs, sizeof vs, cs->pre, plain ? plain->pre : NULL, n);
  snprintf(extra, sizeof extra,
           "\"ratio_to_1x1\":%.4f,\"ratio_best_to_1x1\":%.4f,\"nodes\":%d,"
           "\"prompt_tokens\":%d,\"step_ms\":%.3f%s",
           sc_bench_median(cs->pre, n) / sc_bench_median(one->pre, n),
           best(cs->pre, n) / best(one->pre, n), nodes, w->prefill_reqs * w->prefill_len,
           sc_bench_median(cs->step_pre, n), vs);
  sc_bench_add(b, "e2e.prefill", params, "tok/s", cs->pre, n, extra);
  vs_plain(vs, sizeof vs, cs->dec, plain ? plain->dec : NULL, n);
  snprintf(extra, sizeof extra,
           "\"ratio_to_1x1\":%.4f,\"ratio_best_to_1x1\":%.4f,\"nodes\":%d,\"batch\":%d,"
           "\"context\":%d,\"step_ms\":%.3f%s",
           sc_bench_median(cs->dec, n) / sc_bench_median(one->dec, n),
           best(cs->dec, n) / best(one->dec, n), nodes, w->decode_reqs, w->decode_len,
           sc_bench_median(cs->step_dec, n), vs);
  sc_bench_add(b, "e2e.decode", params, "tok/s", cs->dec, n, extra);
  /* the phases apart, and the share of the decode window spent inside steps (the rest is
   * the scheduler between steps: streaming tokens, choosing the next batch) */
  snprintf(extra, sizeof extra,
           "\"prefill\":%.4f,\"decode\":%.4f,\"prefill_ms_per_step\":%.3f,"
           "\"decode_ms_per_step\":%.3f,\"decode_in_step\":%.4f,\"load_1m\":%.2f",
           sc_bench_median(cs->ovh_pre, n), sc_bench_median(cs->ovh_dec, n),
           sc_bench_median(cs->ovms_pre, n), sc_bench_median(cs->ovms_dec, n),
           sc_bench_median(cs->busy_dec, n), sc_bench_median(cs->load, n));
  sc_bench_add(b, "e2e.overhead", params, "fraction", cs->ovh, n, extra);
}

/* What the real model needs per GPU (issue 23): the published DeepSeek-V3.2 config
 * (examples/deepseek-v3.2/config.json) at layouts that fit it on 80-141 GB GPUs and
 * a single GPU for scale, one request at its full context, computed by sc_hf_memory (the
 * figures of `sparsecp checkpoint --memory`), not measured: results "e2e.memory_v32",
 * GiB per GPU of the fp8 weights as released, the bf16 KV cache and the step buffers (a
 * lower bound of the engine's: bench/e2e.md says what it adds). Skipped with a note when
 * the example is not found. */
static void emit_memory(sc_bench *b) {
  static const int32_t layouts[][3] = {{1, 1, 1}, {1, 1, 8}, {1, 8, 8}, {2, 2, 8},
                                       {4, 4, 8}, {1, 1, 16}};
  char path[4096];
  sc_cli_example_path("deepseek-v3.2/config.json", path, sizeof path);
  sc_hf_config cfg;
  sc_diag d = {0};
  if (sc_hf_config_load(path, &cfg, &d) != 0) {
    fprintf(stderr, "bench e2e: no memory figures of the published model: %s\n",
            sc_diag_message(&d));
    return;
  }
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    const sc_hf_mem_in in = {.pcp = layouts[i][0], .dcp = layouts[i][1], .tp = layouts[i][2],
                             .block_size = 16, .context = cfg.max_position_embeddings,
                             .budget = 256};
    sc_hf_mem m;
    if (sc_hf_memory(&cfg, &in, &m, &d) != 0) {
      fprintf(stderr, "bench e2e: no memory figure at P %d N %d T %d: %s\n", in.pcp, in.dcp,
              in.tp, sc_diag_message(&d));
      continue;
    }
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const double total = (double)sc_hf_mem_total(&m) / gib;
    char params[160], extra[256];
    snprintf(params, sizeof params,
             "\"model\":\"deepseek-v3.2\",\"pcp\":%d,\"dcp\":%d,\"tp\":%d,\"context\":%lld",
             in.pcp, in.dcp, in.tp, (long long)in.context);
    snprintf(extra, sizeof extra,
             "\"computed\":true,\"weights_fp8_gib\":%.2f,\"weights_f32_gib\":%.2f,"
             "\"kv_bf16_gib\":%.2f,\"step_and_workspace_gib\":%.2f",
             (double)m.weights_stored / gib, (double)m.weights_f32 / gib,
             (double)m.kv_bf16 / gib, (double)(m.step_buffers + m.workspace) / gib);
    sc_bench_add(b, "e2e.memory_v32", params, "GiB", &total, 1, extra);
  }
}

/* Round r's prompts: the same for every layout and transport of the round. */
static int round_reqs(const workload *w, int32_t vocab, int r, e2e_req *prq, e2e_req *drq) {
  free_reqs(prq, w->prefill_reqs);
  free_reqs(drq, w->decode_reqs);
  memset(prq, 0, sizeof *prq * (size_t)w->prefill_reqs);
  memset(drq, 0, sizeof *drq * (size_t)w->decode_reqs);
  const int rc = make_reqs(prq, w->prefill_reqs, w->prefill_len, 1, vocab, 2 * (uint64_t)r + 1);
  return rc ? rc : make_reqs(drq, w->decode_reqs, w->decode_len, w->decode_out, vocab,
                             2 * (uint64_t)r + 2);
}

int sc_bench_e2e(sc_bench *b) {
  workload wl = b->quick ? k_quick : k_full;
  const workload *w = &wl;
  if (b->device && strcmp(b->device, "cuda") == 0) {
#ifdef SC_HAVE_CUDA
    return sc_bench_e2e_long(b);
#else
    fprintf(stderr, "bench e2e: --device cuda: this sparsecp was built without CUDA\n");
    return SC_EINVAL; /* (bad usage: exit 2) */
#endif
  }
  if (b->device && strcmp(b->device, "cpu") != 0) {
    fprintf(stderr, "bench e2e: --device %s: the device is cpu or cuda\n", b->device);
    return SC_EINVAL; /* (bad usage: exit 2) */
  }
  bool on[NUM_TRANSPORTS], lay[NUM_LAYOUTS];
  if (parse_transports(getenv("SC_BENCH_E2E_TRANSPORT"), on) != 0 ||
      parse_layouts(getenv("SC_BENCH_E2E_LAYOUTS"), lay) != 0)
    return SC_EINVAL;
  /* SC_BENCH_E2E_ROUNDS: more (or fewer) rounds than the workload's, for a finer ratio */
  const char *rounds = getenv("SC_BENCH_E2E_ROUNDS");
  if (rounds && rounds[0]) {
    char *end;
    const long n = strtol(rounds, &end, 10);
    if (*end != 0 || n < 1 || n > MAX_ROUNDS) {
      fprintf(stderr, "bench e2e: SC_BENCH_E2E_ROUNDS=%s: 1 to %d\n", rounds, MAX_ROUNDS);
      return SC_EINVAL;
    }
    wl.rounds = (int32_t)n;
  }
  int order[NUM_TRANSPORTS], num_on = 0;
  for (int t = 0; t < NUM_TRANSPORTS; t++)
    if (on[t]) order[num_on++] = t;
  sc_model_config model;
  sc_model_config_default(&model);
  static case_samples cs[NUM_TRANSPORTS][NUM_LAYOUTS];
  memset(cs, 0, sizeof cs);
  e2e_req *prq = calloc((size_t)w->prefill_reqs, sizeof *prq);
  e2e_req *drq = calloc((size_t)w->decode_reqs, sizeof *drq);
  e2e_req warm[1] = {{0}};
  char why[1024] = "";
  int rc = prq && drq ? 0 : SC_ENOMEM;
  /* a child that dies must not kill the bench through a closed socket */
  signal(SIGPIPE, SIG_IGN);
  if (rc == 0) rc = make_reqs(warm, 1, w->decode_len, w->decode_out / 4 + 2, model.vocab, 999);
  /* progress goes to stderr in both modes: a full run takes minutes */
  fprintf(stderr,
          "bench e2e: %d rounds; prefill %d x %d tokens, decode %d x (%d + %d tokens); "
          "default model, token budget %d; %d transport(s)\n",
          w->rounds, w->prefill_reqs, w->prefill_len, w->decode_reqs, w->decode_len,
          w->decode_out, w->token_budget, num_on);
  for (int r = 0; rc == 0 && r < w->rounds; r++) {
    if ((rc = round_reqs(w, model.vocab, r, prq, drq)) != 0) break;
    for (int l = 0; rc == 0 && l < NUM_LAYOUTS; l++)
      for (int k = 0; rc == 0 && lay[l] && k < num_on; k++) {
        /* the transports' order alternates by round: neither always runs first */
        const int t = order[r % 2 ? num_on - 1 - k : k];
        case_samples *c = &cs[t][l];
        phase_out po, dout;
        const double t0 = sc_now_s();
        /* the 1-minute load average before each case: how busy the shared machine was */
        if (getloadavg(&c->load[r], 1) != 1) c->load[r] = NAN;
        rc = run_round(w, k_layouts[l][0], k_layouts[l][1], &k_transports[t], prq, drq, warm,
                       &po, &dout, why, sizeof why);
        if (rc) break;
        record_round(c, r, &po, &dout);
        fprintf(stderr,
                "  round %d P%d N%d %s: prefill %.0f tok/s (%d steps), decode %.1f tok/s (%d "
                "steps), overhead %.3f, %.1f s, load %.1f\n",
                r + 1, k_layouts[l][0], k_layouts[l][1], k_transports[t].name, po.tok_per_s,
                po.steps, dout.tok_per_s, dout.steps, c->ovh[r], sc_now_s() - t0, c->load[r]);
      }
  }
  for (int k = 0; rc == 0 && k < num_on; k++)
    for (int l = 0; l < NUM_LAYOUTS; l++) {
      const int t = order[k];
      if (!lay[l]) continue;
      emit_case(b, w, t, l, &cs[t][l], &cs[t][0],
                t == T_CURVE && on[T_TCP] ? &cs[T_TCP][l] : NULL);
    }
  if (rc == 0) emit_memory(b);
  if (rc != 0) fprintf(stderr, "bench e2e: %s\n", why[0] ? why : sc_strerror(rc));
  free_reqs(prq, w->prefill_reqs);
  free_reqs(drq, w->decode_reqs);
  free_reqs(warm, 1);
  free(prq);
  free(drq);
  return rc;
}
