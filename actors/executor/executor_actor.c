/* executor_actor.c - the executor of every rank (DESIGN.md §3 steps 5-6): it takes each
 * step prepared by its node's metadata actor (plan, inputs, the rank's metadata) and
 * runs the forward pass on the rank's engine, every collective checked against the plan.
 * Rank 0 samples the next tokens and returns them to the scheduler. A failed step is
 * reported with the failing collective's shapes.
 *
 * It runs on a loop thread of its own (SC_LOOP_OWN): a step blocks that thread in
 * compute and collectives for its whole duration, and must not hold up other actors. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/metadata/step_local.h"
#include "actors/pipeline.h"
#include "actors/runtime/sc_log.h"
#include "actors/runtime/sc_time.h"
#include "model/sampling.h"

#define LOG "executor"

typedef struct executor {
  sc_rank_ctx *ctx;
  sc_actor_id scheduler;
  float *logits;
  size_t logits_cap;
} executor;

static int init(sc_ctx *c, void *state, const void *arg) {
  executor *e = state;
  e->ctx = *(sc_rank_ctx *const *)arg;
  return sc_node_resolve(sc_ctx_node(c), "scheduler@0", &e->scheduler);
}

static void terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  executor *e = state;
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

static void report_abort(sc_ctx *c, executor *e, uint64_t step, int code, const char *msg) {
  sc_pipeline_send_abort(c, e->scheduler, step, e->ctx->rank, code, msg,
                         &e->ctx->comm.last_failure);
}

static int sample_and_report(sc_ctx *c, executor *e, const sc_step_local *p,
                             uint64_t compute_ns) {
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
    r->sampled.v[i] = t > 0 ? sc_sample_temperature(lg, m->vocab, t, p->in.seed.v[i],
                                                    p->req_ids[i], p->in.out_index.v[i])
                            : sc_sample_greedy(lg, m->vocab);
    r->margin.v[i] = sc_logits_top2_margin(lg, m->vocab);
  }
  r->compute_ns = compute_ns;
  const int rc = sc_send_step(c, e->scheduler, SC_MSG_STEP_RESULT, step, r);
  if (rc) sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
  return rc;
}

static int run_step(sc_ctx *c, executor *e, sc_step_local *p) {
  sc_rank_ctx *x = e->ctx;
  const uint64_t step = p->step;
  if (x->cfg.inject_kill_step == step && x->cfg.inject_kill_rank == x->rank) {
    SC_ERROR(LOG, "rank %d: injected fault: the node dies at step %llu", x->rank,
             (unsigned long long)step);
    raise(SIGKILL);
  }
  const uint32_t n = (uint32_t)p->plan.num_reqs;
  const sc_model_config *m = sc_engine_model(x->engine);
  const bool want_logits = x->rank == 0;
  if (want_logits) {
    const size_t need = (size_t)n * (size_t)m->vocab;
    if (need > e->logits_cap) {
      float *l = realloc(e->logits, need * sizeof *l);
      if (l == NULL) return SC_ENOMEM;
      e->logits = l;
      e->logits_cap = need;
    }
  }
  /* NCCL communicators come up after the id exchange; the first step may have to wait */
  if (atomic_load(&x->comm_state) != 1) {
    const int crc = sc_rank_ctx_comm_wait(x, x->cfg.deadline_ms);
    if (crc) {
      char why[160];
      snprintf(why, sizeof why, "rank %d: the collectives are not ready: %s", x->rank,
               sc_strerror(crc));
      report_abort(c, e, step, crc, why);
      return 0;
    }
  }
  /* Enter the step, then look for an abort that came first (see sc_rank_ctx). */
  atomic_store(&x->executing, step);
  /* a new epoch: leftovers of an aborted earlier step are dropped */
  if (x->comm.ops->reset) x->comm.ops->reset(x->comm.self, step);
  sc_diag d = {0};
  int rc = atomic_load(&x->aborted) >= step ? SC_EABORTED : 0;
  const uint64_t t0 = sc_now_ns();
  if (rc == 0) {
    const sc_forward_in in = {.step = step, .plan = &p->plan, .meta = &p->meta,
                              .tokens = p->in.tokens.v, .block_table = p->block_table,
                              .max_blocks = p->max_blocks, .sample = p->in.sample.v};
    sc_forward_out out = {.logits = want_logits ? e->logits : NULL};
    rc = sc_engine_run(x->engine, &in, &out, &d);
  } else {
    sc_fail(&d, rc, "rank %d: step %llu was aborted before it started", x->rank,
            (unsigned long long)step);
  }
  atomic_store(&x->executing, 0);
  if (rc) {
    if (rc != SC_EABORTED) SC_ERROR(LOG, "rank %d: step %llu failed: %s", x->rank,
                                    (unsigned long long)step, d.msg);
    report_abort(c, e, step, rc, d.msg);
  } else if (want_logits) {
    rc = sample_and_report(c, e, p, sc_now_ns() - t0);
    if (rc) SC_ERROR(LOG, "step %llu: cannot report the result: %s", (unsigned long long)step,
                     sc_strerror(rc));
  }
  return 0;
}

/* A step prepared by this node's metadata actor: the executor takes the bundle over. */
static int on_step_local(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  sc_step_local *p = (sc_step_local *)(uintptr_t)((const sc_msg_step_local *)body)->handle;
  const int rc = run_step(c, sc_state(c), p);
  sc_step_local_free(p);
  return rc;
}

const sc_actor_spec sc_executor_spec = {
    .name = "executor",
    .state_size = sizeof(executor),
    .init = init,
    .terminate = terminate,
    .handlers = {[SC_MSG_STEP_LOCAL] = on_step_local},
    .loop = SC_LOOP_OWN,
};
