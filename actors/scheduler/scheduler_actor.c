/* scheduler_actor.c - the scheduler (head): admits requests from the gateway, runs one
 * step at a time through the pipeline, streams the sampled tokens back, and handles
 * failed steps and lost nodes (DESIGN.md §3 step 2, §4). The batching and block logic is
 * the pure scheduler core (sched.h).
 *
 * Plan acknowledgements arrive asynchronously from every rank's metadata actor; they are compared
 * with the fingerprint the partitioner planned, and a mismatch fails the step. The ranks
 * do not wait for them (verification is off the data path), but the step's tokens reach
 * no client until all are in and match: a result that comes first is held, for at most
 * the collective deadline (a rank that never acknowledges fails the step).
 *
 * Steps planned ahead (docs/pipeline.md, "Overlapped steps"; sc_pipeline_overlaps): on
 * one rank or with host collectives, the next step is planned and shipped as soon as
 * one is started, so that the device never waits for the host between decode steps.
 * Two steps are then in flight, each with its own checks (a step_track); their results
 * are delivered in order, and a failure of either fails both (the later one took its
 * tokens from the earlier one on the device). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "actors/pipeline.h"
#include "actors/rank_ctx.h"
#include "actors/step_abort.h"
#include "base/clock.h"
#include "base/histo.h"
#include "base/log.h"

#define LOG "scheduler"

/* The checks of one step in flight: the fingerprint the partitioner planned, every
 * rank's acknowledgement and completion, and its result when it came before them. */
typedef struct step_track {
  uint64_t step;           /* 0: none */
  uint64_t start_ns;       /* when it was started (try_start) */
  uint64_t planned_fp;
  bool have_planned;
  uint64_t *ack_fp;        /* [world] */
  bool *acked;             /* [world] */
  bool *completed;         /* [world]: step_complete came (ranks 1..world-1) */
  /* the step's result when it came before every fingerprint and completion was in (or
   * before the step ahead of it was delivered): its tokens reach no client until they
   * all are, and the fingerprints match (check_acks) */
  sc_msg_step_result *held_result;
} step_track;

typedef struct scheduler {
  sc_rank_ctx *ctx;
  sc_sched *sched;
  int32_t world;
  sc_actor_id gateway, partitioner;
  sc_actor_id *comms, *metadata; /* every rank's comm and metadata actors */
  /* the steps in flight, oldest first from track[t_head]: one, or two with one planned
   * ahead (overlap) */
  step_track track[2];
  int t_head, n_track;
  bool overlap;            /* steps are planned ahead (sc_pipeline_overlaps) */
  uv_timer_t *ack_timer;   /* fails the oldest step when its held result waits too long */
  sc_actor_id self;
  bool shutting_down;
  sc_node *node;
  uv_timer_t *stop_timer;  /* pending delayed stop (closed in terminate if still armed) */
  /* No step starts before the cluster is ready (the head's program sends node_ready
   * here, sc_pipeline_cluster_ready): a step sent to a node that has not joined waits in
   * its queue, and when that node died first the step's requests were left without an
   * answer. Requests wait in the queue meanwhile. */
  bool ready;
  /* Nodes down and awaited back (pipeline rejoin_wait_ms > 0; docs/pipeline.md,
   * "Recovery"): no step starts while any is, and rejoin_timer (armed for the earliest
   * deadline) ends the cluster when one is not back in time. last_started: the last step
   * started; it and every earlier one are aborted on a node's new process (rejoined). */
  bool *down;              /* [world] */
  uint64_t *down_at_ns;    /* [world]: when each went down */
  uint64_t last_started;
  uv_timer_t *rejoin_timer;
  /* Rebuilding the collectives (rebuild_collectives): generation comm_gen is being built
   * on every rank, comm_built[r] once rank r said so (comm_ready); no step starts
   * meanwhile, and rebuild_timer ends the cluster when an answer does not come. */
  uint32_t comm_gen;
  bool rebuilding;
  bool *comm_built;        /* [world] */
  uint64_t rebuild_start_ns;
  uv_timer_t *rebuild_timer;
  /* Room for cap events / ids. on_submit keeps cap > running + waiting (requests enter
   * the core only there; sc_sched_next only moves waiting to running), so advance,
   * fail_step (<= running ids) and fail_all (<= running + waiting) fit; the
   * ensure_cap calls before them are then checks that never reallocate. */
  sc_sched_event *events;
  int64_t *ids;
  int32_t cap;
  /* totals for stats_report that the core does not see (its own are in sc_sched_stats) */
  sc_histo step_time;      /* finished steps: started to delivered (finish_step) */
  uint64_t desyncs;        /* steps failed with SC_EDESYNC */
  uint64_t purpose_colls[SC_PURPOSE_COUNT], purpose_bytes[SC_PURPOSE_COUNT];
  uint64_t stage_ns[SC_STAGE_COUNT]; /* rank 0's profiled steps, by stage (step_prof.h) */
  /* rank 0's device activity (step_result.device_ns) summed, then the steps that had it */
  uint64_t device_ns[SC_DEVICE_COUNT + 1];
} scheduler;

static int ensure_cap(scheduler *s, int32_t n) {
  if (n <= s->cap) return 0;
  sc_sched_event *ev = realloc(s->events, sizeof *ev * (size_t)n);
  if (ev) s->events = ev;
  int64_t *ids = ev ? realloc(s->ids, sizeof *ids * (size_t)n) : NULL;
  if (ids == NULL) return SC_ENOMEM;
  s->ids = ids;
  s->cap = n;
  return 0;
}

/* A timer on the actor's loop whose data is the actor's state; freed by free_handle once
 * closed in scheduler_terminate (which closes only those that exist). */
static int new_timer(sc_ctx *c, scheduler *s, uv_timer_t **out) {
  uv_timer_t *t = malloc(sizeof *t);
  if (t == NULL) return SC_ENOMEM;
  if (uv_timer_init(sc_ctx_uv_loop(c), t) != 0) {
    free(t);
    return SC_ESYS;
  }
  t->data = s;
  *out = t;
  return 0;
}

static int scheduler_init(sc_ctx *c, void *state, const void *arg) {
  scheduler *s = state;
  s->ctx = *(sc_rank_ctx *const *)arg;
  sc_node *n = sc_ctx_node(c);
  s->node = n;
  s->world = sc_node_size(n);
  sc_diag d = {0};
  int rc = sc_sched_create(&s->sched, &s->ctx->cfg.sched, &d);
  if (rc) {
    SC_ERROR(LOG, "%s", d.msg);
    return rc;
  }
  s->comms = calloc((size_t)s->world, sizeof *s->comms);
  s->metadata = calloc((size_t)s->world, sizeof *s->metadata);
  for (int k = 0; k < 2; k++) {
    step_track *t = &s->track[k];
    t->ack_fp = calloc((size_t)s->world, sizeof *t->ack_fp);
    t->acked = calloc((size_t)s->world, sizeof *t->acked);
    t->completed = calloc((size_t)s->world, sizeof *t->completed);
    if (!t->ack_fp || !t->acked || !t->completed) return SC_ENOMEM;
  }
  s->overlap = sc_pipeline_overlaps(&s->ctx->cfg);
  s->down = calloc((size_t)s->world, sizeof *s->down);
  s->down_at_ns = calloc((size_t)s->world, sizeof *s->down_at_ns);
  s->comm_built = calloc((size_t)s->world, sizeof *s->comm_built);
  if (!s->comms || !s->metadata || !s->down ||
      !s->down_at_ns || !s->comm_built || ensure_cap(s, 64))
    return SC_ENOMEM;
  char name[48];
  for (int32_t r = 0; r < s->world; r++) {
    snprintf(name, sizeof name, "comm@%d", r);
    if ((rc = sc_node_resolve(n, name, &s->comms[r]))) return rc;
    snprintf(name, sizeof name, "metadata@%d", r);
    if ((rc = sc_node_resolve(n, name, &s->metadata[r]))) return rc;
  }
  /* every node's DOWN, and node_ready when a new process of one rejoins */
  if (s->world > 1 && (rc = sc_monitor_nodes(c))) return rc;
  if ((rc = sc_node_resolve(n, "gateway@0", &s->gateway)) ||
      (rc = sc_node_resolve(n, "partitioner@0", &s->partitioner)))
    return rc;
  s->self = sc_self(c);
  if ((rc = new_timer(c, s, &s->ack_timer)) || (rc = new_timer(c, s, &s->rejoin_timer)) ||
      (rc = new_timer(c, s, &s->rebuild_timer)))
    return rc;
  return 0;
}

static void free_handle(uv_handle_t *h) { free(h); }

static void scheduler_terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  scheduler *s = state;
  if (s->ack_timer) uv_close((uv_handle_t *)s->ack_timer, free_handle);
  if (s->rejoin_timer) uv_close((uv_handle_t *)s->rejoin_timer, free_handle);
  if (s->rebuild_timer) uv_close((uv_handle_t *)s->rebuild_timer, free_handle);
  if (s->stop_timer) { /* the node stopped before the delayed stop fired */
    uv_timer_stop(s->stop_timer);
    uv_close((uv_handle_t *)s->stop_timer, free_handle);
  }
  for (int k = 0; k < 2; k++) {
    step_track *t = &s->track[k];
    if (t->held_result) sc_msg_body_destroy(SC_MSG_STEP_RESULT, t->held_result);
    free(t->ack_fp);
    free(t->acked);
    free(t->completed);
  }
  sc_sched_destroy(s->sched);
  free(s->comms);
  free(s->metadata);
  free(s->down);
  free(s->down_at_ns);
  free(s->comm_built);
  free(s->events);
  free(s->ids);
}

/* ---- replies to clients (through the gateway, by internal request id) ---- */

static void client_error(sc_ctx *c, scheduler *s, int64_t id, int code, const char *msg) {
  sc_msg_client_error *e = sc_msg_body_new(SC_MSG_CLIENT_ERROR);
  if (e == NULL) return;
  e->request_id = (uint64_t)id;
  e->code = code;
  e->message = strdup(msg);
  if (sc_send(c, s->gateway, SC_MSG_CLIENT_ERROR, e)) sc_msg_body_destroy(SC_MSG_CLIENT_ERROR, e);
}

static void client_token(sc_ctx *c, scheduler *s, const sc_sched_event *ev, float margin) {
  sc_msg_client_token *t = sc_msg_body_new(SC_MSG_CLIENT_TOKEN);
  if (t == NULL) return;
  t->request_id = (uint64_t)ev->id;
  t->index = ev->index;
  t->tokens.v = malloc(sizeof(int32_t));
  t->margins.v = malloc(sizeof(float));
  if (t->tokens.v && t->margins.v) {
    t->tokens.v[0] = ev->token;
    t->margins.v[0] = margin;
    t->tokens.n = t->margins.n = 1;
    if (sc_send(c, s->gateway, SC_MSG_CLIENT_TOKEN, t) == 0) t = NULL;
  }
  sc_msg_body_destroy(SC_MSG_CLIENT_TOKEN, t);
  if (!ev->finished) return;
  sc_msg_client_done *d = sc_msg_body_new(SC_MSG_CLIENT_DONE);
  if (d == NULL) return;
  d->request_id = (uint64_t)ev->id;
  d->num_tokens = ev->index + 1;
  d->prompt_tokens = ev->prompt_len;
  d->finish_reason = strdup(ev->eos ? "stop" : "length");
  if (sc_send(c, s->gateway, SC_MSG_CLIENT_DONE, d)) sc_msg_body_destroy(SC_MSG_CLIENT_DONE, d);
}

/* ---- steps ---- */

static void *copy_array(const void *src, size_t bytes) {
  void *p = malloc(bytes + 1);
  if (p) memcpy(p, src, bytes);
  return p;
}

static int send_step(sc_ctx *c, scheduler *s, const sc_sched_step *st) {
  const uint32_t n = (uint32_t)st->num_reqs, nt = (uint32_t)st->num_tokens;
  const uint32_t nb = (uint32_t)st->block_start[n];
  sc_msg_global_batch *gb = sc_msg_body_new(SC_MSG_GLOBAL_BATCH);
  if (gb == NULL) return SC_ENOMEM;
  gb->reqs.v = copy_array(st->reqs, sizeof *st->reqs * n);
  gb->reqs.n = n;
  gb->tokens.v = copy_array(st->tokens, sizeof *st->tokens * nt);
  gb->tokens.n = nt;
  int rc = gb->reqs.v && gb->tokens.v ? sc_send_step(c, s->partitioner, SC_MSG_GLOBAL_BATCH, st->step, gb)
                                      : SC_ENOMEM;
  if (rc) {
    sc_msg_body_destroy(SC_MSG_GLOBAL_BATCH, gb);
    return rc;
  }
  for (int32_t r = 0; r < s->world; r++) {
    sc_msg_step_inputs *in = sc_msg_body_new(SC_MSG_STEP_INPUTS);
    if (in == NULL) return SC_ENOMEM;
    in->tokens.v = copy_array(st->tokens, sizeof *st->tokens * nt);
    in->tokens.n = nt;
    in->block_start.v = copy_array(st->block_start, sizeof *st->block_start * (n + 1));
    in->block_start.n = n + 1;
    in->blocks.v = copy_array(st->blocks, sizeof *st->blocks * nb);
    in->blocks.n = nb;
    in->sample.v = copy_array(st->sample, n);
    in->sample.n = n;
    in->temperature.v = malloc(sizeof(float) * (n + 1));
    in->seed.v = malloc(sizeof(uint64_t) * (n + 1));
    in->out_index.v = malloc(sizeof(int32_t) * (n + 1));
    in->temperature.n = in->seed.n = in->out_index.n = n;
    in->prev_step = st->prev_step;
    if (st->prev_step) {
      in->prev_entry.v = copy_array(st->prev_entry, sizeof *st->prev_entry * n);
      in->prev_entry.n = n;
    }
    if (!in->tokens.v || !in->block_start.v || !in->blocks.v || !in->sample.v ||
        !in->temperature.v || !in->seed.v || !in->out_index.v ||
        (st->prev_step && !in->prev_entry.v)) {
      sc_msg_body_destroy(SC_MSG_STEP_INPUTS, in);
      return SC_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
      in->temperature.v[i] = st->params[i].temperature;
      in->seed.v[i] = st->params[i].seed;
      in->out_index.v[i] = st->out_index[i];
    }
    if ((rc = sc_send_step(c, s->metadata[r], SC_MSG_STEP_INPUTS, st->step, in))) {
      sc_msg_body_destroy(SC_MSG_STEP_INPUTS, in);
      return rc;
    }
  }
  return 0;
}

static void fail_step(sc_ctx *c, scheduler *s, int code, const char *why);
static void step_failed(sc_ctx *c, scheduler *s, int32_t rank, int code, const char *why);
static bool failed_for_a_lost_node(sc_ctx *c, scheduler *s, const char *why);

/* The down node whose rejoin deadline comes first (-1: none is down). */
static int32_t first_deadline(const scheduler *s) {
  int32_t first = -1;
  for (int32_t r = 1; r < s->world; r++)
    if (s->down[r] && (first < 0 || s->down_at_ns[r] < s->down_at_ns[first])) first = r;
  return first;
}

/* The k-th step in flight from the oldest (k <= n_track: n_track is the next one's). */
static step_track *track_at(scheduler *s, int k) { return &s->track[(s->t_head + k) & 1]; }

static step_track *head_track(scheduler *s) { return s->n_track ? track_at(s, 0) : NULL; }

/* The track of a step in flight, or NULL (a step that was failed already). */
static step_track *track_of(scheduler *s, uint64_t step) {
  for (int k = 0; k < s->n_track; k++)
    if (track_at(s, k)->step == step && step != 0) return track_at(s, k);
  return NULL;
}

/* The newest step in flight (0: none). */
static uint64_t newest_step(scheduler *s) {
  return s->n_track ? track_at(s, s->n_track - 1)->step : 0;
}

/* Starts the next step if the cluster is ready (every node up, the collectives built)
 * and there is work: when none is in flight, or with overlap the one planned ahead of
 * the step in flight (sc_sched_next_ahead). */
static void try_start(sc_ctx *c, scheduler *s) {
  if (s->shutting_down || !s->ready || first_deadline(s) >= 0 || s->rebuilding ||
      s->n_track > (s->overlap ? 1 : 0))
    return;
  sc_sched_step *st = NULL;
  if ((s->n_track ? sc_sched_next_ahead(s->sched, &st) : sc_sched_next(s->sched, &st)) != 0 ||
      st == NULL)
    return;
  step_track *t = track_at(s, s->n_track);
  s->n_track++;
  t->step = s->last_started = st->step;
  t->start_ns = sc_now_ns();
  t->have_planned = false;
  memset(t->acked, 0, sizeof *t->acked * (size_t)s->world);
  memset(t->completed, 0, sizeof *t->completed * (size_t)s->world);
  const int rc = send_step(c, s, st);
  if (rc) {
    /* some ranks may have their inputs and the plan already: abort it on every rank, or
     * they would wait in its collectives until the deadline */
    char why[96];
    snprintf(why, sizeof why, "the step could not be started (%s)", sc_strerror(rc));
    step_failed(c, s, 0, rc, why);
    return;
  }
  /* the step after it, planned ahead, ships while this one runs */
  if (s->overlap && s->n_track == 1) try_start(c, s);
}

/* The first rank whose plan acknowledgement, or else whose completion (ranks other
 * than 0: rank 0's is its result), is not in yet; world when all are. */
static int32_t first_missing(const scheduler *s, const step_track *t) {
  for (int32_t r = 0; r < s->world; r++)
    if (!t->acked[r]) return r;
  for (int32_t r = 1; r < s->world; r++)
    if (!t->completed[r]) return r;
  return s->world;
}

/* Whether the step's result may go to its clients (once the fingerprints match): the
 * plan's fingerprint, every rank's acknowledgement and every rank's completion are in.
 * A rank's kernel error is read at the end of its step, possibly after rank 0 sent the
 * result, so a result that every rank has not confirmed could carry tokens computed from
 * a failed rank's data. */
static bool all_confirmed(const scheduler *s, const step_track *t) {
  return t->have_planned && first_missing(s, t) == s->world;
}

/* Every step in flight is aborted on every rank (but those down, with skip_down): each
 * comm aborts its communicator so that blocked collectives return. */
static void abort_tracks(sc_ctx *c, scheduler *s, int code, const char *why, bool skip_down) {
  for (int k = 0; k < s->n_track; k++)
    for (int32_t r = 0; r < s->world; r++)
      if (!skip_down || !s->down[r])
        sc_step_abort_send(c, s->comms[r], track_at(s, k)->step, 0, code, why, NULL);
}

/* Forgets every step in flight and their held results. */
static void drop_tracks(scheduler *s) {
  for (int k = 0; k < 2; k++) {
    step_track *t = &s->track[k];
    if (t->held_result) sc_msg_body_destroy(SC_MSG_STEP_RESULT, t->held_result);
    t->held_result = NULL;
    t->step = 0;
  }
  s->n_track = 0;
  uv_timer_stop(s->ack_timer);
}

/* A held result of the oldest step waited the collective deadline for a rank's
 * acknowledgement or completion: the step fails as if that rank had aborted it (a timer
 * has no sc_ctx to send with, so the abort goes to this actor as a letter; on_abort
 * ignores it if the step is over by then). */
static void on_ack_timeout(uv_timer_t *timer) {
  scheduler *s = timer->data;
  step_track *t = head_track(s);
  if (t == NULL || t->held_result == NULL) return;
  /* the first rank still missing; the partitioner's fingerprint (head) when none is */
  const int32_t missing = first_missing(s, t);
  sc_msg_step_abort *a = sc_msg_body_new(SC_MSG_STEP_ABORT);
  if (a == NULL) return;
  char why[160];
  if (missing < s->world)
    snprintf(why, sizeof why, "no %s within %lld ms",
             t->acked[missing] ? "report that it completed the step" : "plan acknowledgement",
             (long long)s->ctx->cfg.deadline_ms);
  else
    snprintf(why, sizeof why, "no plan fingerprint from the partitioner within %lld ms",
             (long long)s->ctx->cfg.deadline_ms);
  a->reason = SC_ETIMEDOUT;
  a->rank = missing < s->world ? missing : 0;
  a->step = t->step;
  a->seq = -1;
  a->message = strdup(why);
  sc_envelope env = {.type = SC_MSG_STEP_ABORT, .step = t->step, .src = s->self,
                     .dst = s->self};
  if (sc_node_send(s->node, &env, a) != 0) { /* a full mailbox: try again shortly */
    sc_msg_body_destroy(SC_MSG_STEP_ABORT, a);
    uv_timer_start(timer, on_ack_timeout, 100, 0);
  }
}

/* Ends the steps in flight on every rank: every comm aborts its communicator so blocked
 * collectives return. Their requests fail with errors to their clients, or with retry
 * (the pipeline's step_retries > 0; every rank still holds its KV cache) run the same
 * work again in a later step, failing only after step_retries failures in a row. With a
 * step planned ahead both end: it took its tokens from the one that failed. */
static void end_step(sc_ctx *c, scheduler *s, int code, const char *why, bool retry) {
  if (s->n_track == 0) return;
  const uint64_t step = head_track(s)->step, newest = newest_step(s);
  char msg[640]; /* "step 3 failed: why", or "steps 3 and 4 failed: why" */
  if (newest != step)
    snprintf(msg, sizeof msg, "steps %llu and %llu failed: %s", (unsigned long long)step,
             (unsigned long long)newest, why);
  else
    snprintf(msg, sizeof msg, "step %llu failed: %s", (unsigned long long)step, why);
  SC_ERROR(LOG, "%s", msg);
  /* the one place every failed step passes (the core counts it in steps_failed): a
   * refused collective, a plan a rank rejected, a fingerprint that differs */
  if (code == SC_EDESYNC) s->desyncs++;
  sc_sched_stats st;
  sc_sched_get_stats(s->sched, &st);
  if (ensure_cap(s, st.running + 1) == 0) { /* see scheduler.cap */
    const int n = retry ? sc_sched_retry_step(s->sched, s->ctx->cfg.step_retries, s->ids)
                        : sc_sched_fail_step(s->sched, s->ids);
    for (int i = 0; i < n; i++) client_error(c, s, s->ids[i], code, msg);
    if (retry)
      SC_WARN(LOG, "step %llu: its requests run it again (%d ended with the error: that was "
                   "their step's failure %d in a row)",
              (unsigned long long)step, n, s->ctx->cfg.step_retries + 1);
  }
  abort_tracks(c, s, code, why, false);
  drop_tracks(s);
}

static void fail_step(sc_ctx *c, scheduler *s, int code, const char *why) {
  end_step(c, s, code, why, false);
}

/* Removes every request from the core; each client gets error {code, msg}. */
static void fail_all_clients(sc_ctx *c, scheduler *s, int code, const char *msg) {
  sc_sched_stats st;
  sc_sched_get_stats(s->sched, &st);
  if (ensure_cap(s, st.running + st.waiting + 1) != 0) return; /* see scheduler.cap */
  const int n = sc_sched_fail_all(s->sched, s->ids);
  drop_tracks(s); /* (the core failed the steps in flight too) */
  for (int i = 0; i < n; i++) client_error(c, s, s->ids[i], code, msg);
}

static void shut_down(sc_ctx *c, scheduler *s, int code, const char *why);
static void rebuild_collectives(sc_ctx *c, scheduler *s, const char *why);
static void await_rejoin(sc_ctx *c, scheduler *s, int32_t rank, const char *why);
static bool recovers(const scheduler *s);

/* The step in flight failed (why, for its clients; rank: who reported it): it is aborted
 * on every rank and its requests fail or run it again (end_step). NCCL's communicators
 * may have been aborted, and aborted ones stay dead, so the collectives are built anew
 * before the next step (rebuild_collectives). A failed device
 * (SC_EDEVICE: its CUDA context is unusable) fails every later step of its process: a
 * node other than the head then stops itself and is awaited back like a lost one when
 * the cluster recovers lost nodes; otherwise the cluster ends. */
static void step_failed(sc_ctx *c, scheduler *s, int32_t rank, int code, const char *why) {
  if (failed_for_a_lost_node(c, s, why)) return;
  if (code == SC_EDEVICE) {
    char end[700];
    snprintf(end, sizeof end, "%s; the device cannot be used again", why);
    if (recovers(s) && rank > 0 && rank < s->world) {
      if (!s->down[rank]) await_rejoin(c, s, rank, end);
    } else {
      shut_down(c, s, code, end);
    }
    return;
  }
  end_step(c, s, code, why, s->ctx->cfg.step_retries > 0);
  /* (on both backends, so that the path NCCL needs is the one every failure takes and
   * tests; the host backend's ranks only answer) */
  rebuild_collectives(c, s, why);
}


static void finish_step(sc_ctx *c, scheduler *s, const sc_msg_step_result *r);

/* A rank whose fingerprint differs from its step's plan fails the steps in flight; once
 * every fingerprint and completion of the oldest step is in and they match, its result,
 * if it came early, is delivered (and then the next one's, if it is as ready). */
static void check_acks(sc_ctx *c, scheduler *s) {
  for (int k = 0; k < s->n_track; k++) {
    step_track *t = track_at(s, k);
    if (!t->have_planned) continue;
    for (int32_t r = 0; r < s->world; r++)
      if (t->acked[r] && t->ack_fp[r] != t->planned_fp) {
        char why[256];
        snprintf(why, sizeof why,
                 "rank %d acknowledged plan fingerprint %016llx of step %llu, the partitioner "
                 "planned %016llx", r, (unsigned long long)t->ack_fp[r],
                 (unsigned long long)t->step, (unsigned long long)t->planned_fp);
        t->acked[r] = false;
        step_failed(c, s, r, SC_EDESYNC, why);
        return;
      }
  }
  step_track *t;
  while ((t = head_track(s)) != NULL && t->held_result && all_confirmed(s, t)) {
    sc_msg_step_result *r = t->held_result;
    t->held_result = NULL;
    uv_timer_stop(s->ack_timer);
    finish_step(c, s, r);
    sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
  }
  /* the oldest step's result waits for a check: for at most the deadline */
  if ((t = head_track(s)) != NULL && t->held_result && !uv_is_active((uv_handle_t *)s->ack_timer))
    uv_timer_start(s->ack_timer, on_ack_timeout, (uint64_t)s->ctx->cfg.deadline_ms, 0);
}

/* ---- handlers ---- */

static int on_submit(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  scheduler *s = sc_state(c);
  const sc_msg_client_admit *m = body;
  if (s->shutting_down) {
    client_error(c, s, (int64_t)m->request_id, SC_ECLOSED, "the cluster is shutting down");
    return 0;
  }
  const sc_sched_params p = {.max_new_tokens = m->max_tokens, .temperature = m->temperature,
                             .seed = m->seed, .client = m->client,
                             .ignore_eos = m->ignore_eos};
  sc_diag d = {0};
  const int rc = sc_sched_submit(s->sched, (int64_t)m->request_id, m->prompt.v,
                                 (int32_t)m->prompt.n, &p, &d);
  if (rc) client_error(c, s, (int64_t)m->request_id, rc, d.msg);
  sc_sched_stats st;
  sc_sched_get_stats(s->sched, &st);
  if (ensure_cap(s, st.running + st.waiting + 1)) return SC_ENOMEM;
  try_start(c, s);
  return 0;
}

static int on_cancel(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  scheduler *s = sc_state(c);
  const sc_msg_client_cancel *m = body;
  if (sc_sched_cancel(s->sched, (int64_t)m->request_id) != 0) return 0; /* already over */
  sc_msg_client_done *d = sc_msg_body_new(SC_MSG_CLIENT_DONE);
  if (d == NULL) return SC_ENOMEM;
  d->request_id = m->request_id;
  d->finish_reason = strdup("canceled");
  if (sc_send(c, s->gateway, SC_MSG_CLIENT_DONE, d)) sc_msg_body_destroy(SC_MSG_CLIENT_DONE, d);
  return 0;
}

/* The oldest step in flight is over, every rank ran the plan that was made and finished
 * it without an error: its tokens go to their clients and the next step starts. */
static void finish_step(sc_ctx *c, scheduler *s, const sc_msg_step_result *r) {
  const int n = sc_sched_advance(s->sched, r->sampled.v, s->events);
  step_track *t = head_track(s);
  const uint64_t now = sc_now_ns();
  sc_histo_add(&s->step_time, (double)(now - t->start_ns) * 1e-9);
  t->step = 0;
  s->t_head ^= 1;
  s->n_track--;
  /* a step planned ahead counts from here: its time before was the step before's */
  if (s->n_track) head_track(s)->start_ns = now;
  if (r->stage_ns.n == SC_STAGE_COUNT)
    for (int i = 0; i < SC_STAGE_COUNT; i++) s->stage_ns[i] += r->stage_ns.v[i];
  if (r->device_ns.n == SC_DEVICE_COUNT) {
    for (int i = 0; i < SC_DEVICE_COUNT; i++) s->device_ns[i] += r->device_ns.v[i];
    s->device_ns[SC_DEVICE_COUNT]++;
  }
  for (int i = 0; i < n; i++) {
    const sc_sched_event *ev = &s->events[i];
    const float margin = (uint32_t)ev->entry < r->margin.n ? r->margin.v[ev->entry] : 0.0f;
    client_token(c, s, ev, margin);
  }
  try_start(c, s);
}

static int on_result(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  step_track *t = track_of(s, env->step);
  if (t == NULL) return 0; /* a step that was already failed */
  /* held until its checks are all in (other senders, no order among them) and the step
   * before was delivered: check_acks delivers it now when they are */
  if (t->held_result) sc_msg_body_destroy(SC_MSG_STEP_RESULT, t->held_result);
  t->held_result = sc_take_body(c);
  check_acks(c, s);
  return 0;
}

static int on_abort(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  const sc_msg_step_abort *a = body;
  /* An abort of another step is a consequence of one already handled (a step fails once,
   * whoever reports it first). A failed device matters whatever step it is reported
   * for: a collective that failed because of it may have failed that step first, and
   * every later step would fail too. */
  if (track_of(s, a->step) == NULL && a->reason != SC_EDEVICE) return 0;
  /* a rank speaks for itself (its node), or this actor's own timers for it: another
   * node naming a healthy rank as failed would have it awaited back for nothing */
  if (env->src.node != (uint16_t)a->rank && !sc_actor_id_eq(env->src, s->self)) return 0;
  /* (a stale EDEVICE once the cluster is stopping anyway: shut_down ran already, and
   * running it again armed a second stop timer over the first and logged a second cause) */
  if (s->shutting_down) return 0;
  char why[600];
  /* A rank refused a collective when it asked for another than the plan's; the same
   * shape on both sides is a collective that failed (a peer's block of the wrong size,
   * say), whose message names the cause. */
  if (a->reason == SC_EDESYNC && a->seq >= 0 && !sc_coll_matches(&a->expected, &a->actual)) {
    char want[160], got[160];
    sc_coll_describe(&a->expected, want, sizeof want);
    sc_coll_describe(&a->actual, got, sizeof got);
    snprintf(why, sizeof why, "rank %d refused collective seq %d of step %llu: expected %s, "
             "requested %s", a->rank, a->seq, (unsigned long long)a->step, want, got);
  } else {
    snprintf(why, sizeof why, "rank %d: %s", a->rank, a->message ? a->message : sc_strerror(a->reason));
  }
  step_failed(c, s, a->rank, a->reason, why);
  return 0;
}

static void rejoined(sc_ctx *c, scheduler *s, int32_t rank);

/* The cluster is ready (rank 0: from the head's program, sc_pipeline_cluster_ready), and
 * the requests that arrived meanwhile may start; or a node rejoined (rank > 0: from the
 * runtime, sc_monitor_nodes). */
static int on_ready(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  const sc_msg_node_ready *m = body;
  /* only this node's own word counts: its runtime's (the node actor, slot 0) for a
   * rejoin, its program's for readiness; from elsewhere it would restart steps for a
   * node that is not back */
  if (env->src.node != sc_self(c).node) return 0;
  if (m->rank > 0) {
    if (env->src.slot == 0) rejoined(c, s, m->rank);
    return 0;
  }
  s->ready = true;
  try_start(c, s);
  return 0;
}

/* A plan's per-purpose totals into the running sums; entries past the purposes this build
 * knows (a newer partitioner's) are left out. */
static void add_purposes(uint64_t sum[SC_PURPOSE_COUNT], const sc_msg_arr_u64 *a) {
  for (uint32_t k = 0; k < a->n && k < SC_PURPOSE_COUNT; k++) sum[k] += a->v[k];
}

static int on_planned(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  const sc_msg_step_planned *p = body;
  /* counted for a step that failed meanwhile too: its plan went to the ranks */
  add_purposes(s->purpose_colls, &p->purpose_colls);
  add_purposes(s->purpose_bytes, &p->purpose_bytes);
  step_track *t = track_of(s, env->step);
  if (t == NULL) return 0;
  t->planned_fp = p->fingerprint;
  t->have_planned = true;
  check_acks(c, s);
  return 0;
}

static int on_ack(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  const sc_msg_plan_ack *a = body;
  step_track *t = track_of(s, env->step);
  if (t == NULL || a->rank < 0 || a->rank >= s->world) return 0;
  t->acked[a->rank] = true;
  t->ack_fp[a->rank] = a->fingerprint;
  check_acks(c, s);
  return 0;
}

static int on_complete(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  const sc_msg_step_complete *m = body;
  step_track *t = track_of(s, env->step);
  if (t == NULL || m->rank < 1 || m->rank >= s->world) return 0;
  t->completed[m->rank] = true;
  check_acks(c, s);
  return 0;
}

static void stop_node_later(uv_timer_t *t) {
  scheduler *s = t->data;
  s->stop_timer = NULL;
  sc_node_request_stop(s->node, SC_EABORTED);
  uv_close((uv_handle_t *)t, free_handle);
}

/* No step starts any more, and every request held gets error {code, why}. */
static void end_all_requests(sc_ctx *c, scheduler *s, int code, const char *why) {
  fail_step(c, s, code, why);
  s->shutting_down = true;
  s->rebuilding = false; /* (its answers and timeout no longer matter) */
  uv_timer_stop(s->rebuild_timer);
  fail_all_clients(c, s, code, why);
}

/* The cluster cannot go on: every request gets an error and the head shuts the cluster
 * down (a moment later, so the gateway can deliver the errors first). */
static void shut_down(sc_ctx *c, scheduler *s, int code, const char *why) {
  end_all_requests(c, s, code, why);
  if (s->stop_timer) return; /* already on its way down */
  SC_ERROR(LOG, "%s: shutting the cluster down", why);
  uv_timer_t *t = malloc(sizeof *t);
  if (t == NULL || uv_timer_init(sc_ctx_uv_loop(c), t) != 0) {
    free(t);
    sc_node_request_stop(sc_ctx_node(c), code);
    return;
  }
  t->data = s;
  s->stop_timer = t;
  uv_timer_start(t, stop_node_later, SC_PIPELINE_STOP_ANSWER_MS, 0);
}

/* The head is stopping in order (sparsecp node on SIGINT/SIGTERM, sc_pipeline_stop_clients):
 * every request still held is answered now, while the gateway can still send, instead of
 * being dropped with the node (on a one-node cluster nothing else would answer it). */
static int on_shutdown(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  /* the head's own program sends it (sc_pipeline_stop_clients); from another node it
   * would end every client's request on that node's word alone */
  if (s->shutting_down || env->src.node != (uint16_t)sc_self(c).node) return 0;
  const char *why = ((const sc_msg_node_shutdown *)body)->reason;
  char msg[256];
  snprintf(msg, sizeof msg, "the cluster is shutting down (%s)", why && why[0] ? why : "stop");
  end_all_requests(c, s, SC_ECLOSED, msg);
  return 0;
}

static void on_rejoin_timeout(uv_timer_t *t);

/* Arms the rejoin timer for the earliest deadline of the nodes down (stops it when none
 * is): each node gets rejoin_wait_ms from its own loss. */
static void arm_rejoin_timer(scheduler *s) {
  const int32_t r = first_deadline(s);
  if (r < 0) {
    uv_timer_stop(s->rejoin_timer);
    return;
  }
  const uint64_t due = s->down_at_ns[r] + (uint64_t)s->ctx->cfg.rejoin_wait_ms * 1000000ull,
                 now = sc_now_ns();
  uv_timer_start(s->rejoin_timer, on_rejoin_timeout, due > now ? (due - now + 999999) / 1000000 : 0, 0);
}

/* The rejoin wait of a node ran out (a timer has no sc_ctx to send with: the news comes
 * to this actor as a DOWN letter from itself, about a node it has down already). */
static void on_rejoin_timeout(uv_timer_t *t) {
  scheduler *s = t->data;
  const int32_t rank = first_deadline(s);
  if (rank < 0) return;
  sc_msg_down *m = sc_msg_body_new(SC_MSG_DOWN);
  if (m == NULL) return;
  m->who = (sc_actor_id){.node = (uint16_t)rank};
  m->node = rank;
  m->reason = SC_ETIMEDOUT;
  sc_envelope env = {.type = SC_MSG_DOWN, .src = s->self, .dst = s->self};
  if (sc_node_send(s->node, &env, m) != 0) { /* a full mailbox: try again shortly */
    sc_msg_body_destroy(SC_MSG_DOWN, m);
    uv_timer_start(t, on_rejoin_timeout, 100, 0);
  }
}

/* Node `rank` (not the head) is gone with its shards of the KV cache, and a new process
 * of it may rejoin (rejoin_wait_ms): the step in flight is aborted on the others, every
 * running request goes back to the queue to recompute its context once the node is back
 * (sc_sched_requeue_running: the clients see a pause, not an error), and no step starts
 * meanwhile. */
static void await_rejoin(sc_ctx *c, scheduler *s, int32_t rank, const char *why) {
  s->down[rank] = true;
  s->down_at_ns[rank] = sc_now_ns();
  arm_rejoin_timer(s);
  /* a rebuild under way cannot finish without the node (NCCL: its members wait for it
   * in the communicator's creation): another starts once it is back */
  s->rebuilding = false;
  uv_timer_stop(s->rebuild_timer);
  abort_tracks(c, s, SC_EDOWN, why, true);
  drop_tracks(s);
  const int n = sc_sched_requeue_running(s->sched);
  SC_WARN(LOG, "%s: %d running request(s) back in the queue; waiting up to %lld ms for a new "
               "process of node %d to rejoin",
          why, n, (long long)s->ctx->cfg.rejoin_wait_ms, rank);
}

/* Whether a lost node is recovered rather than ending the cluster: a new process of it
 * may come back (rejoin_wait_ms), and the collectives are then built again with it
 * (rebuild_collectives). */
static bool recovers(const scheduler *s) { return s->ctx->cfg.rejoin_wait_ms > 0; }

/* A step that failed because a node is gone, seen before its DOWN letter came (the
 * runtime marks a node down, then tells its subscribers: a step started, planned or run
 * meanwhile fails with SC_EDOWN on a send or a collective): true when the loss is
 * recovered as the DOWN letter would have (that letter is then a repeat). */
static bool failed_for_a_lost_node(sc_ctx *c, scheduler *s, const char *why) {
  if (!recovers(s)) return false;
  bool any = false;
  for (int32_t r = 1; r < s->world; r++)
    if (!s->down[r] && sc_node_peer_down(s->node, r)) {
      char lost[320];
      snprintf(lost, sizeof lost, "node %d is down (%s)", r, why);
      await_rejoin(c, s, r, lost);
      any = true;
    }
  return any;
}

/* A new process of node `rank` joined (node_ready from the runtime, sc_monitor_nodes). */
static void rejoined(sc_ctx *c, scheduler *s, int32_t rank) {
  if (rank <= 0 || rank >= s->world || !s->down[rank]) return;
  s->down[rank] = false;
  arm_rejoin_timer(s);
  /* A step sent to the node before its loss was seen (its plan and inputs, queued for
   * the old process) may still reach the new one. An abort raises the gate's mark to its
   * step, so aborting the last step started refuses all of them there; it reaches the
   * comm actor before the comm_rebuild below (one sender, one connection), so before the
   * gate opens: no old step runs on the new collectives, where NCCL, which pairs
   * collectives by their order, would mix it with a current one. */
  if (s->last_started)
    sc_step_abort_send(c, s->comms[rank], s->last_started, 0, SC_EDOWN,
                       "aborted when this node's previous process went down", NULL);
  if (first_deadline(s) >= 0) return; /* another node is still down */
  sc_sched_stats st;
  sc_sched_get_stats(s->sched, &st);
  SC_WARN(LOG, "node %d rejoined %.0f ms after its loss: rebuilding the collectives, then "
          "resuming; %d request(s) waiting", rank,
          (double)(sc_now_ns() - s->down_at_ns[rank]) * 1e-6, st.waiting);
  char why[64];
  snprintf(why, sizeof why, "node %d rejoined", rank);
  rebuild_collectives(c, s, why);
}

static void on_rebuild_timeout(uv_timer_t *t);

/* Builds the next generation of the collectives on every rank before steps go on: the
 * ranks' communicators may be aborted (NCCL's stay dead: new ones need fresh unique ids,
 * which their owners create and send over the control plane) or may lack a member's new
 * process (a rejoin). Each comm actor first waits for its executor to leave the aborted
 * step, so the generation is also the point after which no rank runs an old step. The
 * host backend's sockets reconnect by themselves: its ranks only answer. Steps resume
 * once every rank answered comm_ready (on_comm_ready). */
static void rebuild_collectives(sc_ctx *c, scheduler *s, const char *why) {
  if (s->shutting_down) return;
  s->comm_gen++;
  s->rebuilding = true;
  s->rebuild_start_ns = sc_now_ns();
  memset(s->comm_built, 0, sizeof *s->comm_built * (size_t)s->world);
  SC_INFO(LOG, "building generation %u of the collectives (%s)", (unsigned)s->comm_gen, why);
  for (int32_t r = 0; r < s->world; r++) {
    sc_msg_comm_rebuild *m = sc_msg_body_new(SC_MSG_COMM_REBUILD);
    if (m) m->generation = s->comm_gen;
    const int rc = m ? sc_send(c, s->comms[r], SC_MSG_COMM_REBUILD, m) : SC_ENOMEM;
    if (rc) {
      sc_msg_body_destroy(SC_MSG_COMM_REBUILD, m);
      char end[256];
      snprintf(end, sizeof end, "cannot ask rank %d to rebuild its collectives (%s)", r,
               sc_strerror(rc));
      if (!failed_for_a_lost_node(c, s, end)) shut_down(c, s, rc, end);
      return;
    }
  }
  /* A rank's answer takes at most: the wait for its executor to leave the aborted step
   * (twice the collective deadline), the id exchange and the communicators' creation
   * (one deadline each), and an NCCL abort (about 2 s measured): past that it is not
   * coming. */
  uv_timer_start(s->rebuild_timer, on_rebuild_timeout,
                 4 * (uint64_t)s->ctx->cfg.deadline_ms + 5000, 0);
}

/* A rank did not answer the rebuild in time (a timer has no sc_ctx: the news comes to
 * this actor as a failed comm_ready from itself). */
static void on_rebuild_timeout(uv_timer_t *t) {
  scheduler *s = t->data;
  int32_t missing = 0;
  while (missing < s->world && s->comm_built[missing]) missing++;
  if (!s->rebuilding || missing == s->world) return;
  sc_msg_comm_ready *m = sc_msg_body_new(SC_MSG_COMM_READY);
  if (m == NULL) { /* try again shortly: a rebuild left pending would stop every step */
    uv_timer_start(t, on_rebuild_timeout, 100, 0);
    return;
  }
  m->rank = missing;
  m->generation = s->comm_gen;
  m->code = SC_ETIMEDOUT;
  m->message = strdup("no answer to the rebuild");
  sc_envelope env = {.type = SC_MSG_COMM_READY, .src = s->self, .dst = s->self};
  if (sc_node_send(s->node, &env, m) != 0) { /* a full mailbox: try again shortly */
    sc_msg_body_destroy(SC_MSG_COMM_READY, m);
    uv_timer_start(t, on_rebuild_timeout, 100, 0);
  }
}

/* A rank's answer to the rebuild (from its own node, or this actor's timeout). */
static int on_comm_ready(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  const sc_msg_comm_ready *m = body;
  if (!s->rebuilding || m->generation != s->comm_gen || m->rank < 0 || m->rank >= s->world ||
      (env->src.node != (uint16_t)m->rank && !sc_actor_id_eq(env->src, s->self)))
    return 0;
  if (m->code != 0) {
    s->rebuilding = false;
    uv_timer_stop(s->rebuild_timer);
    char why[400];
    snprintf(why, sizeof why, "rank %d could not build generation %u of the collectives: %s",
             m->rank, (unsigned)m->generation, m->message ? m->message : sc_strerror(m->code));
    /* A member lost meanwhile (its DOWN letter may come after this answer) or a rank whose
     * device failed (its process stops itself) is awaited back, and the rebuild after its
     * rejoin replaces this one; anything else ends the cluster. */
    if (failed_for_a_lost_node(c, s, why)) return 0;
    if (m->code == SC_EDEVICE && recovers(s) && m->rank > 0) {
      if (!s->down[m->rank]) await_rejoin(c, s, m->rank, why);
      return 0;
    }
    shut_down(c, s, m->code, why);
    return 0;
  }
  s->comm_built[m->rank] = true;
  for (int32_t r = 0; r < s->world; r++)
    if (!s->comm_built[r]) return 0;
  s->rebuilding = false;
  uv_timer_stop(s->rebuild_timer);
  SC_WARN(LOG, "generation %u of the collectives is ready on all %d ranks (%.1f ms): resuming",
          (unsigned)s->comm_gen, s->world, (double)(sc_now_ns() - s->rebuild_start_ns) * 1e-6);
  try_start(c, s);
  return 0;
}

/* A node is gone: its ranks' shards of the KV cache are gone too. */
static int on_down(sc_ctx *c, const sc_envelope *env, const void *body) {
  scheduler *s = sc_state(c);
  const sc_msg_down *dn = body;
  if (s->shutting_down) return 0;
  if (sc_node_shutting_down(s->node)) {
    /* peers leaving an orderly shutdown: whatever is left gets a plain answer */
    s->shutting_down = true;
    fail_all_clients(c, s, SC_ECLOSED, "the cluster is shutting down");
    return 0;
  }
  char why[256];
  const bool awaited = dn->node > 0 && dn->node < s->world && s->down[dn->node];
  if (awaited) {
    if (!sc_actor_id_eq(env->src, s->self)) return 0; /* (told twice) */
    snprintf(why, sizeof why, "node %d went down and no new process of it rejoined within "
             "%lld ms", dn->node, (long long)s->ctx->cfg.rejoin_wait_ms);
    shut_down(c, s, SC_EDOWN, why);
    return 0;
  }
  snprintf(why, sizeof why, "node %d is down (%s)", dn->node, sc_strerror(dn->reason));
  if (recovers(s) && dn->node > 0 && dn->node < s->world)
    await_rejoin(c, s, dn->node, why);
  else
    shut_down(c, s, SC_EDOWN, why);
  return 0;
}

/* n words of src into a, which owns them; 0 or SC_ENOMEM. */
static int set_u64s(sc_msg_arr_u64 *a, const uint64_t *src, uint32_t n) {
  if ((a->v = copy_array(src, sizeof *src * n)) == NULL) return SC_ENOMEM;
  a->n = n;
  return 0;
}

/* The report of stats_report's fields (messages/schema.def), from the core's numbers
 * and this actor's totals. 0 or SC_ENOMEM (r is then the caller's to destroy). */
static int fill_report(const scheduler *s, uint64_t seq, sc_msg_stats_report *r) {
  sc_sched_stats st;
  sc_sched_get_stats(s->sched, &st);
  *r = (sc_msg_stats_report){
      .seq = seq, .ready = s->ready, .stopping = s->shutting_down,
      .waiting = st.waiting, .running = st.running, .blocks_total = st.total_blocks,
      .blocks_free = st.free_blocks, .admitted = st.admitted, .finished = st.finished,
      .canceled = st.canceled, .failed = st.failed, .steps = st.steps,
      .steps_failed = st.steps_failed, .desyncs = s->desyncs,
      .step_seconds_sum = s->step_time.sum};
  return set_u64s(&r->step_buckets, s->step_time.counts, SC_HIST_N + 1) ||
                 set_u64s(&r->purpose_colls, s->purpose_colls, SC_PURPOSE_COUNT) ||
                 set_u64s(&r->purpose_bytes, s->purpose_bytes, SC_PURPOSE_COUNT) ||
                 set_u64s(&r->stage_ns, s->stage_ns, SC_STAGE_COUNT) ||
                 set_u64s(&r->device_ns, s->device_ns, SC_DEVICE_COUNT + 1)
             ? SC_ENOMEM
             : 0;
}

/* The gateway asks for GET /metrics and /health: answered in every state, while the
 * cluster is not ready or is shutting down too (health says 503 then). The query is a
 * plain message (the gateway sends it from a socket callback), so the answer goes to its
 * sender, not through sc_reply. A report that cannot be made is dropped with a warning,
 * not the scheduler stopped: the gateway gives up on it. */
static int on_stats_query(sc_ctx *c, const sc_envelope *env, const void *body) {
  const uint64_t seq = ((const sc_msg_stats_query *)body)->seq;
  sc_msg_stats_report *r = sc_msg_body_new(SC_MSG_STATS_REPORT);
  int rc = r ? fill_report(sc_state(c), seq, r) : SC_ENOMEM;
  if (rc == 0) rc = sc_send(c, env->src, SC_MSG_STATS_REPORT, r);
  if (rc) {
    sc_msg_body_destroy(SC_MSG_STATS_REPORT, r);
    SC_WARN(LOG, "no stats report for query %llu: %s", (unsigned long long)seq,
            sc_strerror(rc));
  }
  return 0;
}

const sc_actor_spec sc_scheduler_spec = {
    .name = "scheduler",
    .state_size = sizeof(scheduler),
    .init = scheduler_init,
    .terminate = scheduler_terminate,
    .handlers = {[SC_MSG_CLIENT_ADMIT] = on_submit,
                 [SC_MSG_CLIENT_CANCEL] = on_cancel,
                 [SC_MSG_STEP_RESULT] = on_result,
                 [SC_MSG_STEP_ABORT] = on_abort,
                 [SC_MSG_STEP_PLANNED] = on_planned,
                 [SC_MSG_PLAN_ACK] = on_ack,
                 [SC_MSG_STEP_COMPLETE] = on_complete,
                 [SC_MSG_DOWN] = on_down,
                 [SC_MSG_NODE_READY] = on_ready,
                 [SC_MSG_NODE_SHUTDOWN] = on_shutdown,
                 [SC_MSG_STATS_QUERY] = on_stats_query,
                 [SC_MSG_COMM_READY] = on_comm_ready},
};
