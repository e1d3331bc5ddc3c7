/* executor_actor.c - the executor of every rank (DESIGN.md §3 steps 5-6): it takes each
 * step prepared by its node's metadata actor (plan, inputs, the rank's metadata) and
 * runs the forward pass on the rank's engine, every collective checked against the plan.
 * Rank 0 samples the next tokens and returns them to the scheduler. A failed step is
 * reported with the failing collective's shapes.
 *
 * A step is queued, not waited for: the executor queues the whole forward pass on the
 * engine (on a GPU: kernels on the compute stream, NCCL collectives on the comm stream
 * ordered by events), then the logits read and a notify. The kernels' completion
 * callback (a stream callback) sends this actor a step_done message, which reaches its
 * loop through the mailbox's uv_async_send; only then are the collectives' outcome and
 * the logits looked at. Steps that arrive meanwhile wait here in order. On the CPU the
 * same path runs with a notify that fires at once.
 *
 * Overlapped steps (docs/pipeline.md). A step planned ahead (step_inputs.prev_step: the
 * scheduler made it while the step before was still running) is queued as soon as it
 * arrives, behind the running one: its input tokens that the running step samples are
 * taken on the device from that step's greedy choices (sc_forward_in.follow_*), so the
 * device goes from one step to the next without waiting for the host, and this actor
 * handles the first one's completion while the second runs. At most two steps are
 * queued; a step follows only the step queued just before it on this rank, and it fails
 * when that one failed. Every rank computes the greedy tokens (each holds every token's
 * hidden state after the hidden_restore all-gather), rank 0 also the logits. The
 * forward's collective session is one: two steps with collectives overlap only where
 * their outcome is known once the forward pass is queued (host collectives: they ran
 * on this thread), not with NCCL's, which is read at the step's completion.
 *
 * It runs on a loop thread of its own (SC_LOOP_OWN): queueing a step may still block
 * (host collectives, staging copies, waiting for the communicators at start-up) and
 * must not hold up other actors. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/fault.h"
#include "actors/pipeline.h"
#include "actors/rank_ctx.h"
#include "actors/step_abort.h"
#include "actors/step_local.h"
#include "base/clock.h"
#include "base/grow.h"
#include "base/log.h"
#include "model/sampling.h"

#define LOG "executor"
#define KEEP 4096 /* samples kept of each time taken every step (kept): the last ones */

/* A step queued on the engine whose step_done has not come yet, with the host memory
 * its outputs land in (a slot's own, so that the next step's may land while this one's
 * are read). */
typedef struct run_slot {
  sc_step_local *p;
  int queue_rc;      /* what queueing it returned, and why */
  sc_diag queue_diag;
  uint64_t t0;
  uint64_t queue_ns; /* how long queueing it took on the host */
  uint64_t queued_at; /* when its queueing was done (0: it failed) */
  uint64_t gap_ns;   /* from the previous completion handled to its start */
  bool overlapped;   /* it was queued while the step before ran */
  int64_t dev_gap_ns; /* once complete: the device's gap before it (sc_engine_gap), or -1 */
  bool prev_failed;  /* the step it follows failed after this one was queued */
  bool reported;     /* its queueing failed and that was reported before its completion
                        (a step that follows it failed for it: start_step) */
  /* no completion callback comes for it (notify failed): the device's status from a
   * sync, for complete() once the step before it, whose callback does come, is done */
  bool synced;
  int synced_status;
  float *logits;
  size_t logits_cap;
  int32_t *greedy;   /* [rows] sc_forward_out.greedy, when has_greedy */
  float *margins;    /* [rows] sc_forward_out.margins, when has_greedy */
  bool has_greedy;
  size_t greedy_cap, margins_cap;
  uint8_t *logits_of; /* [n_entries] sc_forward_out.logits_of, when has_greedy: the
                         entries whose token the host takes from their logits (those
                         without a logits row on the device) */
  size_t logits_of_cap;
  int32_t *rows;     /* [n_entries] each entry's logits row, -1: none
                        (sc_forward_logits_rows); kept after the step completed */
  int32_t n_entries, rows_cap;
} run_slot;

/* The last KEEP samples of a time taken every step, in ns, for the percentiles
 * logged at the end of a run. */
typedef struct kept {
  int64_t ns[KEEP];
  uint64_t n; /* samples taken; the ring holds the last KEEP */
} kept;

static void kept_add(kept *k, int64_t ns) { k->ns[k->n++ % KEEP] = ns; }

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Sorts the samples kept (in place: at the end of a run); how many there are. */
static uint64_t kept_sort(kept *k) {
  const uint64_t n = k->n < KEEP ? k->n : KEEP;
  qsort(k->ns, (size_t)n, sizeof *k->ns, cmp_i64);
  return n;
}

/* The host's time queueing steps of one kind, summed (sc_forward_host's parts). */
typedef struct host_sums {
  uint64_t steps, prepare_ns, upload_ns, keys_ns, compute_ns, download_ns;
} host_sums;

static void host_sums_add(host_sums *s, const sc_forward_host *h) {
  s->steps++;
  s->prepare_ns += h->prepare_ns;
  s->upload_ns += h->upload_ns;
  s->keys_ns += h->keys_ns;
  s->compute_ns += h->compute_ns;
  s->download_ns += h->download_ns;
}

typedef struct executor {
  sc_rank_ctx *ctx;
  sc_actor_id scheduler;
  /* steps are planned ahead (sc_pipeline_overlaps): the device computes each step's
   * greedy tokens for the step after, on every rank */
  bool overlap;
  run_slot run[2];   /* queued on the engine, oldest first from run[head] */
  int head, n_run;
  uint64_t done_ns;  /* when the previous step's completion was handled (0: none yet) */
  /* The step queued last on the engine, whether it failed, and its slot (whose rows stay
   * until the next step queued there, which comes after the one that follows it): what a
   * step planned ahead needs. */
  uint64_t last_queued;
  bool last_failed;
  int last_slot;
  int32_t *follow;   /* [2 * cap] a step's follow_tok, then follow_row */
  int32_t follow_cap;
  bool prof_warned;  /* a step's profile could not be taken (logged once) */
  /* the host's time around the steps queued without a failure, summed (logged at the
   * end: the profile line gives it per step, but only when profiled, and a profiled CUDA
   * run's tracing slows the host's CUDA calls: the prepare's split here is without it),
   * apart for replayed steps: one mean over both (model-long decoding at a 64-token
   * context: 0.528 ms a step over 189 replays and 4 other steps, two of them recordings
   * and one the prompt's, bench/gpu-step.md session 53) said little of either */
  struct {
    host_sums launched, replayed;
    uint64_t overlapped, gaps, gap_ns;
  } host;
  sc_step_local *first, *last; /* steps that arrived while they could not start, in order */
  /* For each replayed step (a decode step from a CUDA graph) queued right after the
   * previous step's completion reached this actor: from that moment to this step's
   * queueing done. This is the host's time between two decode steps (the result to the
   * scheduler, its next plan, the metadata, the uploads and the launch); its median is
   * logged at the end, since the means above also count the waits for requests to
   * arrive. An overlapped step is queued
   * before the step before it completes: it has no such time. */
  uint64_t seen_ns; /* when the last completion reached this actor (0: none) */
  kept between;
  /* For each overlapped step: how long before the device was found done with the step
   * before (its completion callback's clock) its queueing was done (negative: after).
   * Positive, the device had it before it finished the step before (within the
   * callback's latency): it did not wait for the host between the two. */
  uint64_t device_done_ns; /* the callback's clock of the completion being handled */
  kept lead;
  /* For each overlapped step: the device's own time from the step before's last compute
   * op to this one's first (sc_engine_gap, by stream events; the lead above is the
   * host's clock against a callback's, which comes late by the callback's latency):
   * issue 20's "host time between two decode steps" as the device saw it. */
  kept dev_gap;
} executor;

static run_slot *oldest(executor *e) { return e->n_run ? &e->run[e->head] : NULL; }

/* The info line of the kept leads of overlapped steps. */
static void log_leads(executor *e) {
  const uint64_t n = kept_sort(&e->lead);
  if (n == 0) return;
  const int64_t *v = e->lead.ns;
  uint64_t late = 0;
  while (late < n && v[late] < 0) late++;
  SC_INFO(LOG, "rank %d: overlapped steps, the last %llu of %llu: queued a median %.3f ms before "
          "the device finished the step before (10th percentile %.3f ms; negative: after); "
          "%llu of them after it",
          e->ctx->rank, (unsigned long long)n, (unsigned long long)e->lead.n,
          (double)v[n / 2] * 1e-6, (double)v[n / 10] * 1e-6, (unsigned long long)late);
}

/* The info line of the kept device gaps of overlapped steps. */
static void log_dev_gaps(executor *e) {
  const uint64_t n = kept_sort(&e->dev_gap);
  if (n == 0) return;
  const int64_t *v = e->dev_gap.ns;
  SC_INFO(LOG, "rank %d: overlapped steps, the last %llu of %llu: the device went a median "
          "%.1f us from a step's last compute to the next one's first (90th percentile %.1f "
          "us, max %.1f us)", e->ctx->rank, (unsigned long long)n,
          (unsigned long long)e->dev_gap.n, (double)v[n / 2] * 1e-3,
          (double)v[n * 9 / 10] * 1e-3, (double)v[n - 1] * 1e-3);
}

/* The info line of the kept between-step times: median and 90th percentile. */
static void log_between(executor *e) {
  const uint64_t n = kept_sort(&e->between);
  if (n == 0) return;
  const int64_t *v = e->between.ns;
  SC_INFO(LOG, "rank %d: between replayed steps (a completion in to the next step queued), "
          "the last %llu of %llu: median %.3f ms, 90th percentile %.3f ms", e->ctx->rank,
          (unsigned long long)n, (unsigned long long)e->between.n, (double)v[n / 2] * 1e-6,
          (double)v[n * 9 / 10] * 1e-6);
}

/* What the completion callback needs, allocated before the notify so that the callback
 * (CUDA's thread) neither allocates nor touches the actor's state. */
typedef struct done_note {
  sc_node *node;
  sc_actor_id self;
  sc_msg_step_done *msg;
} done_note;

static void on_device_done(void *arg, int status) {
  done_note *n = arg;
  n->msg->status = status;
  n->msg->done_ns = sc_now_ns();
  sc_envelope env = {.type = SC_MSG_STEP_DONE, .step = n->msg->step, .src = n->self,
                     .dst = n->self};
  if (sc_node_send(n->node, &env, n->msg) != 0) {
    /* only while the node stops: executor_terminate has waited for the device */
    SC_WARN(LOG, "step %llu: the completion could not be delivered",
            (unsigned long long)n->msg->step);
    sc_msg_body_destroy(SC_MSG_STEP_DONE, n->msg);
  }
  free(n);
}

static int executor_init(sc_ctx *c, void *state, const void *arg) {
  executor *e = state;
  e->ctx = *(sc_rank_ctx *const *)arg;
  e->overlap = sc_pipeline_overlaps(&e->ctx->cfg);
  return sc_node_resolve(sc_ctx_node(c), "scheduler@0", &e->scheduler);
}

/* At shutdown: the mean host time to queue a step of one kind (`what`), and its split. */
static void log_host_sums(const executor *e, const host_sums *s, const char *what) {
  if (s->steps == 0) return;
  const double n = (double)s->steps;
  SC_INFO(LOG, "rank %d: %llu steps %s, each %.3f ms of the host's on average to queue "
          "(prepare %.3f (index uploads %.3f, key list %.3f), compute %.3f, download %.3f)",
          e->ctx->rank, (unsigned long long)s->steps, what,
          (double)(s->prepare_ns + s->compute_ns + s->download_ns) * 1e-6 / n,
          (double)s->prepare_ns * 1e-6 / n, (double)s->upload_ns * 1e-6 / n,
          (double)s->keys_ns * 1e-6 / n, (double)s->compute_ns * 1e-6 / n,
          (double)s->download_ns * 1e-6 / n);
}

static void executor_terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  executor *e = state;
  if (e->n_run) {
    /* The device may still write into the bundles and call back: let it finish. A step
     * still running at shutdown may wait in a collective for a peer that is gone, and
     * the comm actor's watch may already be stopped: abort the collectives first (the
     * node is stopping, nothing will use them again). */
    sc_step_gate_abort_all(&e->ctx->gate);
    sc_kernels *k = sc_engine_kernels(e->ctx->engine);
    (void)k->ops->sync(k);
    for (int i = 0; i < e->n_run; i++) sc_step_local_free(e->run[(e->head + i) & 1].p);
  }
  for (int i = 0; i < 2; i++) {
    free(e->run[i].logits);
    free(e->run[i].greedy);
    free(e->run[i].margins);
    free(e->run[i].logits_of);
    free(e->run[i].rows);
  }
  free(e->follow);
  while (e->first) {
    sc_step_local *p = e->first;
    e->first = p->next;
    sc_step_local_free(p);
  }
  log_host_sums(e, &e->host.replayed, "replayed from a CUDA graph");
  log_host_sums(e, &e->host.launched, "launched or recorded");
  const uint64_t steps = e->host.replayed.steps + e->host.launched.steps;
  if (steps > 0)
    SC_INFO(LOG, "rank %d: of %llu steps, %llu queued while the step before ran, the others "
            "%.3f ms after the step before on average", e->ctx->rank,
            (unsigned long long)steps, (unsigned long long)e->host.overlapped,
            e->host.gaps ? (double)e->host.gap_ns * 1e-6 / (double)e->host.gaps : 0.0);
  log_between(e);
  log_leads(e);
  log_dev_gaps(e);
  uint64_t recorded = 0, replayed = 0;
  sc_engine_recording_stats(e->ctx->engine, &recorded, &replayed);
  if (recorded + replayed > 0)
    SC_INFO(LOG, "rank %d: %llu steps recorded, %llu replayed (CUDA graphs)", e->ctx->rank,
            (unsigned long long)recorded, (unsigned long long)replayed);
  /* the collectives this rank ran, per purpose (SPARSECP_LOG=info shows them) */
  for (int k = 0; k < SC_PURPOSE_COUNT; k++) {
    const sc_coll_stat *st = &e->ctx->comm.stats[k];
    if (st->calls == 0) continue;
    SC_INFO(LOG, "rank %d collectives %s: %llu calls, %.1f MB on the bus, %.6f s, %.1f GB/s",
            e->ctx->rank, sc_coll_purpose_name(k), (unsigned long long)st->calls,
            st->bus_bytes / 1e6, st->seconds, st->seconds > 0 ? st->bus_bytes / st->seconds / 1e9 : 0.0);
  }
}

/* failure: the failed collective's record, copied while the step was still inside the
 * gate (once it left, the comm actor may be replacing the comm), or NULL. */
static void report_abort(sc_ctx *c, executor *e, uint64_t step, int code, const char *msg,
                         const sc_coll_failure *failure) {
  sc_step_abort_send(c, e->scheduler, step, e->ctx->rank, code, msg, failure);
}

/* Tells the scheduler that this rank (not 0) finished step without an error. */
static int report_complete(sc_ctx *c, executor *e, uint64_t step) {
  if (sc_fault_fires(&e->ctx->cfg.inject, SC_FAULT_NOCOMPLETE, e->ctx->rank, step))
    return 0; /* (as a message lost on the way: the sender saw no error) */
  sc_msg_step_complete *m = sc_msg_body_new(SC_MSG_STEP_COMPLETE);
  if (m == NULL) return SC_ENOMEM;
  m->rank = e->ctx->rank;
  const int rc = sc_send_step(c, e->scheduler, SC_MSG_STEP_COMPLETE, step, m);
  if (rc) sc_msg_body_destroy(SC_MSG_STEP_COMPLETE, m);
  return rc;
}

/* A finished step's profile: its stage times, and what the device ran (CUDA with CUPTI). */
typedef struct step_profile {
  bool staged, measured;
  uint64_t stage_ns[SC_STAGE_COUNT];
  uint64_t device[SC_DEVICE_COUNT];
} step_profile;

/* With the pipeline's "profile": where the finished step's time went on this rank, one
 * info line (step_prof.h); rank 0's also travels in its step_result. A profile that
 * could not be taken (a mark or the read failed) is reported once per rank and travels
 * as no stage times, not as zeros that the scheduler would add up as if measured; the
 * same for the device's busy time, which only CUDA with CUPTI knows. */
static void report_profile(executor *e, const run_slot *rs, uint64_t wall_ns,
                           step_profile *pr) {
  const sc_step_local *p = rs->p;
  uint64_t span = 0;
  const int rc = sc_engine_profile(e->ctx->engine, pr->stage_ns, &span);
  /* read also when the stages failed: what ran belongs to this step, not the next */
  sc_kernels *k = sc_engine_kernels(e->ctx->engine);
  sc_kbusy kb;
  pr->measured = k->ops->busy_read(k, &kb) == 0 && rc == 0;
  pr->device[SC_DEVICE_BUSY_NS] = kb.busy_ns;
  pr->device[SC_DEVICE_SPAN_NS] = kb.span_ns;
  pr->device[SC_DEVICE_OPS] = (uint64_t)kb.ops;
  pr->device[SC_DEVICE_IDLE_BEFORE_NS] = kb.idle_before_ns;
  if (rc != 0) {
    if (!e->prof_warned)
      SC_WARN(LOG, "rank %d: step %llu: no stage profile (%s); steps whose marks fail carry "
              "none", e->ctx->rank, (unsigned long long)p->step, sc_strerror(rc));
    e->prof_warned = true;
    return;
  }
  pr->staged = true;
  char line[768];
  const sc_forward_host h = sc_engine_host_profile(e->ctx->engine);
  int len = snprintf(line, sizeof line, "rank %d: step %llu: %.3f ms (device %.3f ms, queued in "
                     "%.3f ms: prepare %.3f (index uploads %.3f, key list %.3f), compute %.3f%s, "
                     "download %.3f; %.3f ms after the previous step):", e->ctx->rank,
                     (unsigned long long)p->step, (double)wall_ns * 1e-6, (double)span * 1e-6,
                     (double)rs->queue_ns * 1e-6, (double)h.prepare_ns * 1e-6,
                     (double)h.upload_ns * 1e-6, (double)h.keys_ns * 1e-6,
                     (double)h.compute_ns * 1e-6,
                     h.replayed ? " (replayed)" : "", (double)h.download_ns * 1e-6,
                     (double)rs->gap_ns * 1e-6);
  for (int i = 0; i < SC_STAGE_COUNT && len > 0 && (size_t)len < sizeof line; i++)
    len += snprintf(line + len, sizeof line - (size_t)len, " %s %.3f", sc_stage_name(i),
                    (double)pr->stage_ns[i] * 1e-6);
  if (pr->measured && len > 0 && (size_t)len < sizeof line) {
    const uint64_t b = pr->device[SC_DEVICE_BUSY_NS], sp = pr->device[SC_DEVICE_SPAN_NS];
    snprintf(line + len, sizeof line - (size_t)len,
             "; busy %.3f ms of a %.3f ms kernel span (%.1f%%), %d kernels, copies and sets, "
             "idle %.3f ms before", (double)b * 1e-6, (double)sp * 1e-6,
             sp ? 100.0 * (double)b / (double)sp : 0.0, kb.ops, (double)kb.idle_before_ns * 1e-6);
  }
  SC_INFO(LOG, "%s", line);
}

/* A copy of n u64 into a message array; false without memory. */
static bool set_u64s(sc_msg_arr_u64 *a, const uint64_t *src, uint32_t n) {
  if ((a->v = malloc(sizeof *a->v * n)) == NULL) return false;
  memcpy(a->v, src, sizeof *a->v * n);
  a->n = n;
  return true;
}

/* Rank 0: the tokens of the step that completed in slot rs, and its result to the
 * scheduler. With steps overlapped, an entry's token is the device's: its greedy choice
 * (argmax_rows) or its draw at the entry's temperature (draw_rows, the host's
 * sc_sample_temperature to the bit), which a step planned ahead may already have taken;
 * with the top-2 margin beside it, no entry needs logits on the host (a vocabulary of
 * 129280 is 517 KB of logits a request, copied and scanned on this thread every step).
 * Otherwise the host draws from the logits. */
static int sample_and_report(sc_ctx *c, executor *e, const run_slot *rs, uint64_t compute_ns,
                             const step_profile *pr) {
  const sc_model_config *m = sc_engine_model(e->ctx->engine);
  const sc_step_local *p = rs->p;
  const uint64_t step = p->step;
  const uint32_t n = p->in.sample.n;
  sc_msg_step_result *r = sc_msg_body_new(SC_MSG_STEP_RESULT);
  if (r == NULL) return SC_ENOMEM;
  r->sampled.v = malloc(sizeof *r->sampled.v * (n + 1));
  r->margin.v = malloc(sizeof *r->margin.v * (n + 1));
  if (r->sampled.v == NULL || r->margin.v == NULL) {
    sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
    return SC_ENOMEM;
  }
  r->sampled.n = r->margin.n = n;
  for (uint32_t i = 0; i < n; i++) {
    r->sampled.v[i] = -1;
    r->margin.v[i] = 0;
    if (!p->in.sample.v[i]) continue;
    if (rs->has_greedy && !rs->logits_of[i]) { /* (its logits row exists: rows[i] >= 0) */
      r->sampled.v[i] = rs->greedy[rs->rows[i]];
      r->margin.v[i] = rs->margins[rs->rows[i]];
      continue;
    }
    const float *lg = rs->logits + (size_t)i * (size_t)m->vocab;
    const float t = p->in.temperature.v[i];
    sc_logits_top2(lg, m->vocab, &r->sampled.v[i], &r->margin.v[i]); /* (greedy's token) */
    if (t > 0) /* (sampled holds the greedy token here, sc_logits_top2's) */
      r->sampled.v[i] = sc_sample_temperature_at(lg, m->vocab, t, p->in.seed.v[i],
                                                 p->in.out_index.v[i], r->sampled.v[i]);
  }
  r->compute_ns = compute_ns;
  r->gap_ns = rs->dev_gap_ns;
  if ((pr->staged && !set_u64s(&r->stage_ns, pr->stage_ns, SC_STAGE_COUNT)) ||
      (pr->measured && !set_u64s(&r->device_ns, pr->device, SC_DEVICE_COUNT))) {
    sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
    return SC_ENOMEM;
  }
  const int rc = sc_send_step(c, e->scheduler, SC_MSG_STEP_RESULT, step, r);
  if (rc) sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
  return rc;
}

/* A step that succeeded: its profile when taken, then rank 0's result or another rank's
 * completion. */
static int report_done(sc_ctx *c, executor *e, const run_slot *rs) {
  const uint64_t wall = sc_now_ns() - rs->t0;
  step_profile pr = {0};
  if (e->ctx->cfg.profile) report_profile(e, rs, wall, &pr);
  return e->ctx->rank == 0 ? sample_and_report(c, e, rs, wall, &pr)
                           : report_complete(c, e, rs->p->step);
}

/* Step `step`, just taken off the queue, failed: a step planned ahead of it takes its
 * tokens from a failure (the one queued after it, or one that arrives later). */
static void mark_failed(executor *e, uint64_t step) {
  if (step == e->last_queued) e->last_failed = true;
  if (e->n_run) oldest(e)->prev_failed = true; /* (it follows this one) */
}

/* The oldest queued step's work has completed on the device (status: the kernels' error,
 * or 0): the collectives' outcome, then the result or the abort report. */
static void complete(sc_ctx *c, executor *e, int status) {
  sc_rank_ctx *x = e->ctx;
  run_slot *rs = oldest(e);
  sc_step_local *p = rs->p;
  e->head ^= 1;
  e->n_run--;
  const run_slot *next = e->n_run ? oldest(e) : NULL;
  if (next && next->queued_at && e->device_done_ns) /* an overlapped step: how early */
    kept_add(&e->lead, (int64_t)e->device_done_ns - (int64_t)next->queued_at);
  sc_diag d = rs->queue_diag;
  int rc = rs->queue_rc;
  /* (the forward keeps each queued step's collective session until its finish, also
   * with the next step queued already) */
  if (rc == 0) rc = sc_engine_finish(x->engine, status, &d);
  rs->dev_gap_ns = -1;
  int64_t gap_ns;
  if (rc == 0 && rs->overlapped && sc_engine_gap(x->engine, &gap_ns) == 0) {
    rs->dev_gap_ns = gap_ns;
    kept_add(&e->dev_gap, gap_ns);
  }
  if (rc == 0 && rs->prev_failed)
    rc = sc_fail(&d, SC_EABORTED, "rank %d: step %llu took its tokens from step %llu, which "
                 "failed", x->rank, (unsigned long long)p->step,
                 (unsigned long long)p->in.prev_step);
  const sc_coll_failure failure = x->comm.last_failure;
  if (e->n_run == 0) sc_step_gate_leave(&x->gate);
  if (rc) {
    mark_failed(e, p->step);
    if (rc != SC_EABORTED)
      SC_ERROR(LOG, "rank %d: step %llu failed: %s", x->rank, (unsigned long long)p->step,
               d.msg);
    /* A failed device (status, not rc: a collective's failure may be what rc names) is
     * reported as such, whatever else failed: every later step of this process would fail
     * the same way, so the scheduler stops the cluster ... */
    if (!rs->reported || status == SC_EDEVICE)
      report_abort(c, e, p->step, status == SC_EDEVICE ? SC_EDEVICE : rc, d.msg, &failure);
    /* ... and with recovery (the head awaits a lost node's new process) a node other
     * than the head then stops itself: its supervisor starts a new process, with a new
     * device context, which rejoins (docs/pipeline.md, "Recovery") */
    if (status == SC_EDEVICE && x->rank > 0 && x->cfg.rejoin_wait_ms > 0) {
      SC_ERROR(LOG, "rank %d: the device cannot be used again: stopping this node so that "
               "a new process takes its place", x->rank);
      sc_node_request_stop(sc_ctx_node(c), SC_EDEVICE);
    }
  } else if ((rc = report_done(c, e, rs)) != 0) {
    /* the step fails instead of waiting for a word that will not come (the scheduler
     * times out a held result, but none may ever arrive) */
    SC_ERROR(LOG, "rank %d: step %llu: cannot report its %s: %s", x->rank,
             (unsigned long long)p->step, x->rank == 0 ? "result" : "completion",
             sc_strerror(rc));
    mark_failed(e, p->step);
    report_abort(c, e, p->step, rc,
                 x->rank == 0 ? "cannot report the step's result" : "cannot report its completion",
                 NULL);
  }
  sc_step_local_free(p);
  rs->p = NULL;
  e->done_ns = sc_now_ns();
}

/* The tokens a step planned ahead takes from the step queued before it (in.follow_*):
 * 0, or a failure in d (the step it follows did not run here, or failed, or the inputs
 * name an entry it does not have). */
static int follow_tokens(executor *e, const sc_step_local *p, sc_forward_in *in, sc_diag *d) {
  const uint32_t n = (uint32_t)p->plan.num_reqs;
  const uint64_t prev = p->in.prev_step;
  if (prev == 0) return 0;
  if (prev != e->last_queued || e->last_failed)
    return sc_fail(d, SC_EABORTED, "rank %d: step %llu takes its tokens from step %llu, which %s "
                   "on this rank", e->ctx->rank, (unsigned long long)p->step,
                   (unsigned long long)prev, prev == e->last_queued ? "failed" : "did not run");
  const run_slot *before = &e->run[e->last_slot];
  const uint32_t before_n = (uint32_t)before->n_entries;
  /* (prev_entry has an entry per request: sc_step_local_finish checked) */
  size_t cap = (size_t)e->follow_cap;
  if (sc_grow_n((void **)&e->follow, &cap, 2 * (size_t)n, sizeof *e->follow))
    return sc_fail(d, SC_ENOMEM, "out of memory");
  e->follow_cap = (int32_t)cap;
  int32_t nf = 0, *tok = e->follow, *row = e->follow + n;
  for (uint32_t i = 0; i < n; i++) {
    const int32_t pe = p->in.prev_entry.v[i];
    if (pe < 0) continue;
    const sc_plan_req *r = &p->plan.reqs[i];
    const int32_t from = (uint32_t)pe < before_n ? before->rows[pe] : -1;
    if (r->q < 1 || from < 0)
      return sc_fail(d, SC_EPROTO, "step %llu entry %u: no token of entry %d of step %llu to "
                     "take", (unsigned long long)p->step, i, pe, (unsigned long long)prev);
    tok[nf] = r->start + r->q - 1;
    row[nf++] = from;
  }
  in->follows = prev;
  in->n_follow = nf;
  in->follow_tok = tok;
  in->follow_row = row;
  return 0;
}

/* Queues step p on the engine and asks for its completion; the outcome is handled in
 * complete(). Returns nonzero only when no completion will come (p was handled here). */
static int start_step(sc_ctx *c, executor *e, sc_step_local *p) {
  sc_rank_ctx *x = e->ctx;
  const uint64_t step = p->step;
  /* the completion this step follows, taken whatever happens to the step (a step that
   * fails before it is queued must not leave an old one to the next); an overlapped
   * step follows none */
  const bool overlapped = e->n_run > 0;
  const uint64_t seen_ns = overlapped ? 0 : e->seen_ns;
  e->seen_ns = 0;
  if (sc_fault_fires(&x->cfg.inject, SC_FAULT_KILL, x->rank, step)) raise(SIGKILL);
  const uint32_t n = (uint32_t)p->plan.num_reqs;
  const sc_model_config *m = sc_engine_model(x->engine);
  /* With overlapped steps every rank computes the tokens on its device, for the step after
   * (in.device_tokens); only rank 0, which reports them, reads them (want_greedy). */
  const bool want_logits = x->rank == 0, want_greedy = e->overlap && x->rank == 0;
  const int slot = (e->head + e->n_run) & 1;
  run_slot *rs = &e->run[slot];
  size_t rows_cap = (size_t)rs->rows_cap;
  if (sc_grow_n((void **)&rs->rows, &rows_cap, n, sizeof *rs->rows) ||
      (want_logits && sc_grow_n((void **)&rs->logits, &rs->logits_cap,
                                (size_t)n * (size_t)m->vocab, sizeof *rs->logits)) ||
      (want_greedy && sc_grow_n((void **)&rs->greedy, &rs->greedy_cap, n, sizeof *rs->greedy)) ||
      (want_greedy && sc_grow_n((void **)&rs->margins, &rs->margins_cap, n, sizeof *rs->margins)) ||
      (want_greedy && sc_grow_n((void **)&rs->logits_of, &rs->logits_of_cap, n,
                                sizeof *rs->logits_of))) {
    report_abort(c, e, step, SC_ENOMEM, "out of memory for the logits", NULL);
    return SC_ENOMEM;
  }
  rs->rows_cap = (int32_t)rows_cap;
  sc_forward_in in = {.step = step, .plan = &p->plan, .meta = &p->meta,
                      .tokens = p->in.tokens.v, .block_table = p->block_table,
                      .max_blocks = p->max_blocks, .sample = p->in.sample.v,
                      .temperature = p->in.temperature.v, .seed = p->in.seed.v,
                      .out_index = p->in.out_index.v,
                      .profile = x->cfg.profile, .device_tokens = e->overlap};
  sc_diag fd = {0};
  const int frc = follow_tokens(e, p, &in, &fd);
  run_slot *before = &e->run[e->last_slot]; /* the step queued last, before this one */
  /* (from here on this step is the one queued last, failed or not) */
  e->last_queued = step;
  e->last_failed = frc != 0;
  e->last_slot = slot;
  (void)sc_forward_logits_rows(&p->meta, p->in.sample.v, (int32_t)n, rs->rows);
  rs->n_entries = (int32_t)n;
  for (uint32_t i = 0; want_greedy && i < n; i++) /* (an entry without a row: logits) */
    rs->logits_of[i] = rs->rows[i] < 0;
  if (frc) {
    if (frc != SC_EABORTED) SC_ERROR(LOG, "%s", fd.msg);
    /* It follows a step whose queueing failed here and whose completion is still to
     * come: that failure first, so that the scheduler, which names the first it hears
     * of, names it (a desync's shapes, DESIGN.md §4) rather than this consequence. */
    if (e->n_run && before->p && before->p->step == p->in.prev_step && before->queue_rc &&
        !before->reported) {
      report_abort(c, e, before->p->step, before->queue_rc, before->queue_diag.msg,
                   &x->comm.last_failure);
      before->reported = true;
    }
    report_abort(c, e, step, frc, fd.msg, NULL);
    return frc;
  }
  /* NCCL communicators come up after the id exchange; the first step may have to wait */
  const int crc = overlapped ? 0 : sc_step_gate_wait_ready(&x->gate, x->cfg.deadline_ms);
  if (crc) {
    e->last_failed = true;
    char why[160];
    snprintf(why, sizeof why, "rank %d: the collectives are not ready: %s", x->rank,
             sc_strerror(crc));
    report_abort(c, e, step, crc, why, NULL);
    return crc;
  }
  rs->queue_diag = (sc_diag){0};
  rs->queue_rc = sc_step_gate_enter(&x->gate, step); /* SC_EABORTED: an abort came first */
  rs->t0 = sc_now_ns();
  rs->gap_ns = e->done_ns && !overlapped ? rs->t0 - e->done_ns : 0;
  rs->overlapped = overlapped;
  rs->prev_failed = false;
  rs->reported = false;
  rs->synced = false;
  rs->queued_at = 0;
  rs->p = p;
  e->n_run++;
  if (rs->queue_rc == 0) {
    rs->has_greedy = want_greedy;
    sc_forward_out out = {.logits = want_logits ? rs->logits : NULL,
                          .logits_of = rs->has_greedy ? rs->logits_of : NULL,
                          .greedy = rs->has_greedy ? rs->greedy : NULL,
                          .margins = rs->has_greedy ? rs->margins : NULL};
    rs->queue_rc = sc_engine_queue(x->engine, &in, &out, &rs->queue_diag);
    rs->queue_ns = sc_now_ns() - rs->t0;
    if (rs->queue_rc == 0) {
      rs->queued_at = sc_now_ns();
      const sc_forward_host h = sc_engine_host_profile(x->engine);
      host_sums_add(h.replayed ? &e->host.replayed : &e->host.launched, &h);
      e->host.overlapped += overlapped;
      if (e->done_ns && !overlapped) e->host.gaps++, e->host.gap_ns += rs->gap_ns;
      if (h.replayed && seen_ns) kept_add(&e->between, (int64_t)(sc_now_ns() - seen_ns));
    }
  } else {
    sc_fail(&rs->queue_diag, rs->queue_rc, "rank %d: step %llu was aborted before it started",
            x->rank, (unsigned long long)step);
  }
  if (rs->queue_rc) e->last_failed = true;
  /* even a step that failed half-way is waited for: its queued work may still run */
  sc_kernels *k = sc_engine_kernels(x->engine);
  if (sc_fault_fires(&x->cfg.inject, SC_FAULT_DEVFAULT, x->rank, step))
    (void)k->ops->inject_fault(k);
  done_note *note = malloc(sizeof *note);
  sc_msg_step_done *msg = note ? sc_msg_body_new(SC_MSG_STEP_DONE) : NULL;
  int rc = msg ? 0 : SC_ENOMEM;
  if (msg) {
    msg->step = step;
    *note = (done_note){.node = sc_ctx_node(c), .self = sc_self(c), .msg = msg};
    rc = k->ops->notify(k, on_device_done, note);
  }
  if (rc) {
    /* no callback will come: wait here instead (for the steps queued before it too) */
    SC_WARN(LOG, "rank %d: step %llu: no completion callback (%s), waiting for the device",
            x->rank, (unsigned long long)step, sc_strerror(rc));
    if (msg) sc_msg_body_destroy(SC_MSG_STEP_DONE, msg);
    free(note);
    /* a step before it still has its callback coming, with its own status: this one is
     * completed after it (on_step_done) */
    const int status = k->ops->sync(k);
    if (e->n_run == 1) {
      complete(c, e, status);
    } else {
      rs->synced = true;
      rs->synced_status = status;
    }
  }
  return 0;
}

/* Whether step p may be queued now: nothing runs, or it was planned ahead to follow the
 * one step running, and either has no collectives or the backend lets steps overlap: it
 * completes each collective as it runs (host collectives), or its steps may overlap on
 * the device (sc_coll_ops.overlaps: the IPC backend; not NCCL's, which counts a step's
 * collectives from its reset). (While a step runs it holds the gate, so the comm is not
 * being replaced under this read.) */
static bool may_start(const executor *e, const sc_step_local *p) {
  if (e->n_run == 0) return true;
  const sc_step_local *r = e->run[e->head].p;
  const sc_coll_ops *ops = e->ctx->comm.ops;
  const bool colls_overlap = ops != NULL && (ops->finish == NULL || ops->overlaps);
  const bool ok = (p->plan.num_colls == 0 && r->plan.num_colls == 0) || colls_overlap;
  return e->n_run == 1 && p->in.prev_step != 0 && p->in.prev_step == r->step && ok;
}

/* Starts waiting steps, in order, while they may start. */
static void pump(sc_ctx *c, executor *e) {
  while (e->first != NULL && may_start(e, e->first)) {
    sc_step_local *p = e->first;
    e->first = p->next;
    if (e->first == NULL) e->last = NULL;
    if (start_step(c, e, p) != 0) sc_step_local_free(p);
  }
}

/* A step prepared by this node's metadata actor: the executor takes the bundle over. */
static int on_step_local(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  executor *e = sc_state(c);
  sc_step_local *p = (sc_step_local *)(uintptr_t)((const sc_msg_step_local *)body)->handle;
  p->next = NULL;
  if (e->last) e->last->next = p;
  else e->first = p;
  e->last = p;
  pump(c, e);
  return 0;
}

/* The oldest queued step's work has completed (sent by on_device_done). */
static int on_step_done(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  executor *e = sc_state(c);
  const sc_msg_step_done *m = body;
  const run_slot *rs = oldest(e);
  if (rs == NULL || rs->p->step != m->step) {
    SC_WARN(LOG, "rank %d: completion of step %llu, which is not running", e->ctx->rank,
            (unsigned long long)m->step);
    return 0;
  }
  e->seen_ns = sc_now_ns();
  e->device_done_ns = m->done_ns;
  complete(c, e, m->status);
  e->device_done_ns = 0;
  while (e->n_run && oldest(e)->synced) complete(c, e, oldest(e)->synced_status);
  pump(c, e);
  return 0;
}

const sc_actor_spec sc_executor_spec = {
    .name = "executor",
    .state_size = sizeof(executor),
    .init = executor_init,
    .terminate = executor_terminate,
    .handlers = {[SC_MSG_STEP_LOCAL] = on_step_local, [SC_MSG_STEP_DONE] = on_step_done},
    .loop = SC_LOOP_OWN,
};
