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
#include "base/log.h"
#include "model/sampling.h"

#define LOG "executor"
#define BETWEEN_KEEP 4096 /* replayed steps whose time between steps is kept, the last ones */

typedef struct executor {
  sc_rank_ctx *ctx;
  sc_actor_id scheduler;
  float *logits;
  size_t logits_cap;
  sc_step_local *running; /* queued on the engine; its step_done has not come yet */
  int queue_rc;           /* what queueing it returned, and why */
  sc_diag queue_diag;
  uint64_t t0;
  uint64_t queue_ns; /* how long queueing the running step took on the host */
  uint64_t done_ns;  /* when the previous step's completion was handled (0: none yet) */
  uint64_t gap_ns;   /* from then to the running step's start: the host's time between
                        steps (result to the scheduler, next plan, metadata) */
  bool prof_warned;  /* a step's profile could not be taken (logged once) */
  /* the host's time around the steps queued without a failure, summed (logged at the
   * end: the profile line gives it per step, but only when profiled) */
  struct {
    uint64_t steps, replayed, gaps, gap_ns, prepare_ns, compute_ns, download_ns;
  } host;
  sc_step_local *first, *last; /* steps that arrived while one was running, in order */
  /* For each replayed step (a decode step from a CUDA graph) queued right after the
   * previous step's completion reached this actor: from that moment to this step's
   * queueing done, in microseconds (the last BETWEEN_KEEP). This is the host's time
   * between two decode steps (the result to the scheduler, its next plan, the metadata,
   * the uploads and the launch); its median is logged at the end, since the means
   * above also count the waits for requests to arrive. */
  uint64_t seen_ns; /* when the last completion reached this actor (0: none) */
  uint32_t between_us[BETWEEN_KEEP];
  uint64_t n_between; /* all such steps; the ring keeps the last BETWEEN_KEEP */
} executor;

static int cmp_u32(const void *a, const void *b) {
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The info line of the kept between-step times: median and 90th percentile (at the
 * end: the times are sorted in place). */
static void log_between(executor *e) {
  const uint64_t n = e->n_between < BETWEEN_KEEP ? e->n_between : BETWEEN_KEEP;
  if (n == 0) return;
  uint32_t *v = e->between_us;
  qsort(v, (size_t)n, sizeof *v, cmp_u32);
  SC_INFO(LOG, "rank %d: between replayed steps (a completion in to the next step queued), "
          "the last %llu of %llu: median %.3f ms, 90th percentile %.3f ms", e->ctx->rank,
          (unsigned long long)n, (unsigned long long)e->n_between, (double)v[n / 2] * 1e-3,
          (double)v[n * 9 / 10] * 1e-3);
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
  return sc_node_resolve(sc_ctx_node(c), "scheduler@0", &e->scheduler);
}

static void executor_terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  executor *e = state;
  if (e->running) {
    /* The device may still write into the bundle and call back: let it finish. A step
     * still running at shutdown may wait in a collective for a peer that is gone, and
     * the comm actor's watch may already be stopped: abort the collectives first (the
     * node is stopping, nothing will use them again). */
    sc_step_gate_abort_all(&e->ctx->gate);
    sc_kernels *k = sc_engine_kernels(e->ctx->engine);
    (void)k->ops->sync(k);
    sc_step_local_free(e->running);
  }
  while (e->first) {
    sc_step_local *p = e->first;
    e->first = p->next;
    sc_step_local_free(p);
  }
  if (e->host.steps > 0) {
    const double n = (double)e->host.steps;
    SC_INFO(LOG, "rank %d: %llu steps, each %.3f ms of the host's on average to queue (prepare "
            "%.3f, compute %.3f, download %.3f; %llu of them replayed), %.3f ms after the step "
            "before",
            e->ctx->rank, (unsigned long long)e->host.steps,
            (double)(e->host.prepare_ns + e->host.compute_ns + e->host.download_ns) * 1e-6 / n,
            (double)e->host.prepare_ns * 1e-6 / n, (double)e->host.compute_ns * 1e-6 / n,
            (double)e->host.download_ns * 1e-6 / n, (unsigned long long)e->host.replayed,
            e->host.gaps ? (double)e->host.gap_ns * 1e-6 / (double)e->host.gaps : 0.0);
  }
  log_between(e);
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
  free(e->logits);
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
static void report_profile(executor *e, const sc_step_local *p, uint64_t wall_ns,
                           step_profile *pr) {
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
                     "%.3f ms: prepare %.3f, compute %.3f%s, download %.3f; %.3f ms after the "
                     "previous step):", e->ctx->rank, (unsigned long long)p->step,
                     (double)wall_ns * 1e-6, (double)span * 1e-6, (double)e->queue_ns * 1e-6,
                     (double)h.prepare_ns * 1e-6, (double)h.compute_ns * 1e-6,
                     h.replayed ? " (replayed)" : "", (double)h.download_ns * 1e-6,
                     (double)e->gap_ns * 1e-6);
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

static int sample_and_report(sc_ctx *c, executor *e, const sc_step_local *p,
                             uint64_t compute_ns, const step_profile *pr) {
  const sc_model_config *m = sc_engine_model(e->ctx->engine);
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
    const float *lg = e->logits + (size_t)i * (size_t)m->vocab;
    const float t = p->in.temperature.v[i];
    sc_logits_top2(lg, m->vocab, &r->sampled.v[i], &r->margin.v[i]); /* (greedy's token) */
    if (t > 0)
      r->sampled.v[i] = sc_sample_temperature(lg, m->vocab, t, p->in.seed.v[i],
                                              p->in.out_index.v[i]);
  }
  r->compute_ns = compute_ns;
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
static int report_done(sc_ctx *c, executor *e, const sc_step_local *p) {
  const uint64_t wall = sc_now_ns() - e->t0;
  step_profile pr = {0};
  if (e->ctx->cfg.profile) report_profile(e, p, wall, &pr);
  return e->ctx->rank == 0 ? sample_and_report(c, e, p, wall, &pr)
                           : report_complete(c, e, p->step);
}

/* The running step's work has completed on the device (status: the kernels' error, or
 * 0): the collectives' outcome, then the result or the abort report. */
static void complete(sc_ctx *c, executor *e, int status) {
  sc_rank_ctx *x = e->ctx;
  sc_step_local *p = e->running;
  e->running = NULL;
  sc_diag d = e->queue_diag;
  int rc = e->queue_rc;
  if (rc == 0) rc = sc_engine_finish(x->engine, status, &d);
  const sc_coll_failure failure = x->comm.last_failure;
  sc_step_gate_leave(&x->gate);
  if (rc) {
    if (rc != SC_EABORTED)
      SC_ERROR(LOG, "rank %d: step %llu failed: %s", x->rank, (unsigned long long)p->step,
               d.msg);
    /* A failed device (status, not rc: a collective's failure may be what rc names) is
     * reported as such, whatever else failed: every later step of this process would fail
     * the same way, so the scheduler stops the cluster ... */
    report_abort(c, e, p->step, status == SC_EDEVICE ? SC_EDEVICE : rc, d.msg, &failure);
    /* ... and with recovery (the head awaits a lost node's new process) a node other
     * than the head then stops itself: its supervisor starts a new process, with a new
     * device context, which rejoins (docs/pipeline.md, "Recovery") */
    if (status == SC_EDEVICE && x->rank > 0 && x->cfg.rejoin_wait_ms > 0) {
      SC_ERROR(LOG, "rank %d: the device cannot be used again: stopping this node so that "
               "a new process takes its place", x->rank);
      sc_node_request_stop(sc_ctx_node(c), SC_EDEVICE);
    }
  } else if ((rc = report_done(c, e, p)) != 0) {
    /* the step fails instead of waiting for a word that will not come (the scheduler
     * times out a held result, but none may ever arrive) */
    SC_ERROR(LOG, "rank %d: step %llu: cannot report its %s: %s", x->rank,
             (unsigned long long)p->step, x->rank == 0 ? "result" : "completion",
             sc_strerror(rc));
    report_abort(c, e, p->step, rc,
                 x->rank == 0 ? "cannot report the step's result" : "cannot report its completion",
                 NULL);
  }
  sc_step_local_free(p);
  e->done_ns = sc_now_ns();
}

/* Queues step p on the engine and asks for its completion; the outcome is handled in
 * complete(). Returns nonzero only when no completion will come (p was handled here). */
static int start_step(sc_ctx *c, executor *e, sc_step_local *p) {
  sc_rank_ctx *x = e->ctx;
  const uint64_t step = p->step;
  /* the completion this step follows, taken whatever happens to the step (a step that
   * fails before it is queued must not leave an old one to the next) */
  const uint64_t seen_ns = e->seen_ns;
  e->seen_ns = 0;
  if (sc_fault_fires(&x->cfg.inject, SC_FAULT_KILL, x->rank, step)) raise(SIGKILL);
  const uint32_t n = (uint32_t)p->plan.num_reqs;
  const sc_model_config *m = sc_engine_model(x->engine);
  const bool want_logits = x->rank == 0;
  if (want_logits) {
    const size_t need = (size_t)n * (size_t)m->vocab;
    if (need > e->logits_cap) {
      float *l = realloc(e->logits, need * sizeof *l);
      if (l == NULL) {
        report_abort(c, e, step, SC_ENOMEM, "out of memory for the logits", NULL);
        return SC_ENOMEM;
      }
      e->logits = l;
      e->logits_cap = need;
    }
  }
  /* NCCL communicators come up after the id exchange; the first step may have to wait */
  const int crc = sc_step_gate_wait_ready(&x->gate, x->cfg.deadline_ms);
  if (crc) {
    char why[160];
    snprintf(why, sizeof why, "rank %d: the collectives are not ready: %s", x->rank,
             sc_strerror(crc));
    report_abort(c, e, step, crc, why, NULL);
    return crc;
  }
  e->queue_diag = (sc_diag){0};
  e->queue_rc = sc_step_gate_enter(&x->gate, step); /* SC_EABORTED: an abort came first */
  e->t0 = sc_now_ns();
  e->gap_ns = e->done_ns ? e->t0 - e->done_ns : 0;
  e->running = p;
  if (e->queue_rc == 0) {
    const sc_forward_in in = {.step = step, .plan = &p->plan, .meta = &p->meta,
                              .tokens = p->in.tokens.v, .block_table = p->block_table,
                              .max_blocks = p->max_blocks, .sample = p->in.sample.v,
                              .profile = x->cfg.profile};
    sc_forward_out out = {.logits = want_logits ? e->logits : NULL};
    e->queue_rc = sc_engine_queue(x->engine, &in, &out, &e->queue_diag);
    e->queue_ns = sc_now_ns() - e->t0;
    if (e->queue_rc == 0) {
      const sc_forward_host h = sc_engine_host_profile(x->engine);
      e->host.steps++;
      e->host.replayed += h.replayed;
      e->host.prepare_ns += h.prepare_ns;
      e->host.compute_ns += h.compute_ns;
      e->host.download_ns += h.download_ns;
      if (e->done_ns) e->host.gaps++, e->host.gap_ns += e->gap_ns;
      if (h.replayed && seen_ns) {
        const uint64_t us = (sc_now_ns() - seen_ns) / 1000;
        e->between_us[e->n_between++ % BETWEEN_KEEP] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
      }
    }
  } else {
    sc_fail(&e->queue_diag, e->queue_rc, "rank %d: step %llu was aborted before it started",
            x->rank, (unsigned long long)step);
  }
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
    /* no callback will come: wait here instead */
    SC_WARN(LOG, "rank %d: step %llu: no completion callback (%s), waiting for the device",
            x->rank, (unsigned long long)step, sc_strerror(rc));
    if (msg) sc_msg_body_destroy(SC_MSG_STEP_DONE, msg);
    free(note);
    complete(c, e, k->ops->sync(k));
  }
  return 0;
}

/* Starts waiting steps, in order, while none is running. */
static void pump(sc_ctx *c, executor *e) {
  while (e->running == NULL && e->first != NULL) {
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

/* The running step's queued work has completed (sent by on_device_done). */
static int on_step_done(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  executor *e = sc_state(c);
  const sc_msg_step_done *m = body;
  if (e->running == NULL || e->running->step != m->step) {
    SC_WARN(LOG, "rank %d: completion of step %llu, which is not running", e->ctx->rank,
            (unsigned long long)m->step);
    return 0;
  }
  e->seen_ns = sc_now_ns();
  complete(c, e, m->status);
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
