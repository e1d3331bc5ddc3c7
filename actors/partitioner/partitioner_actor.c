/* partitioner_actor.c - the partitioner (head): turns each global batch into the step
 * plan and sends the same plan to every rank's metadata actor (DESIGN.md §3 step 3).
 * The planning itself is the pure planner (plan/plan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/pipeline.h"
#include "actors/rank_ctx.h"
#include "actors/step_abort.h"
#include "base/log.h"
#include "plan/plan_wire.h"

#define LOG "partitioner"

typedef struct partitioner {
  sc_rank_ctx *ctx;
  sc_plan plan;
  sc_actor_id scheduler;
  sc_actor_id *targets; /* metadata@r for every rank */
  int32_t num_targets;
} partitioner;

static int partitioner_init(sc_ctx *c, void *state, const void *arg) {
  partitioner *p = state;
  p->ctx = *(sc_rank_ctx *const *)arg;
  sc_plan_init(&p->plan);
  sc_node *n = sc_ctx_node(c);
  const int32_t W = sc_node_size(n);
  p->targets = calloc((size_t)W, sizeof *p->targets);
  if (p->targets == NULL) return SC_ENOMEM;
  char name[48];
  for (int32_t r = 0; r < W; r++) {
    snprintf(name, sizeof name, "metadata@%d", r);
    if (sc_node_resolve(n, name, &p->targets[p->num_targets++])) return SC_ENOENT;
  }
  return sc_node_resolve(n, "scheduler@0", &p->scheduler);
}

static void partitioner_terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  partitioner *p = state;
  sc_plan_free(&p->plan);
  free(p->targets);
}

static void report_failure(sc_ctx *c, partitioner *p, uint64_t step, int code, const char *why) {
  sc_step_abort_send(c, p->scheduler, step, 0, code, why, NULL);
}

/* The scheduler's reference for the ranks' acknowledgements, and the plan's per-purpose
 * totals for its metrics (computed here, where the plan is: the scheduler never sees
 * it). */
static int send_planned(sc_ctx *c, partitioner *p, uint64_t step) {
  sc_msg_step_planned *sp = sc_msg_body_new(SC_MSG_STEP_PLANNED);
  if (sp == NULL) return SC_ENOMEM;
  sp->fingerprint = p->plan.fingerprint;
  sp->num_colls = p->plan.num_colls;
  sp->purpose_colls.v = malloc(sizeof(uint64_t) * SC_PURPOSE_COUNT);
  sp->purpose_bytes.v = malloc(sizeof(uint64_t) * SC_PURPOSE_COUNT);
  if (sp->purpose_colls.v == NULL || sp->purpose_bytes.v == NULL) {
    sc_msg_body_destroy(SC_MSG_STEP_PLANNED, sp);
    return SC_ENOMEM;
  }
  sp->purpose_colls.n = sp->purpose_bytes.n = SC_PURPOSE_COUNT;
  sc_plan_purpose_totals(&p->plan, sp->purpose_colls.v, sp->purpose_bytes.v);
  if (sc_send_step(c, p->scheduler, SC_MSG_STEP_PLANNED, step, sp))
    sc_msg_body_destroy(SC_MSG_STEP_PLANNED, sp);
  return 0;
}

static int on_global_batch(sc_ctx *c, const sc_envelope *env, const void *body) {
  partitioner *p = sc_state(c);
  const sc_msg_global_batch *b = body;
  sc_diag d = {0};
  int rc = sc_plan_build(&p->plan, &p->ctx->plan_cfg, b->reqs.v, (int32_t)b->reqs.n, &d);
  if (rc) {
    SC_WARN(LOG, "step %llu cannot be planned: %s", (unsigned long long)env->step, d.msg);
    report_failure(c, p, env->step, rc, d.msg);
    return 0;
  }
  int64_t *ids = malloc(sizeof *ids * (b->reqs.n + 1));
  if (ids == NULL) return SC_ENOMEM;
  for (uint32_t i = 0; i < b->reqs.n; i++) ids[i] = b->reqs.v[i].id;
  sc_plan_wire wire;
  sc_plan_wire_of(&p->plan, ids, &wire);
  /* One body per destination: a send consumes its body (a local destination keeps the
   * pointer, a remote one is encoded). The compact plan is O(requests), so copies are
   * cheap next to the step they describe. */
  for (int32_t t = 0; t < p->num_targets && rc == 0; t++) {
    sc_msg_step_plan *m = sc_msg_body_new(SC_MSG_STEP_PLAN);
    if (m == NULL || sc_msg_step_plan_from_wire(&wire, m)) {
      sc_msg_body_destroy(SC_MSG_STEP_PLAN, m);
      rc = SC_ENOMEM;
      break;
    }
    if ((rc = sc_send_step(c, p->targets[t], SC_MSG_STEP_PLAN, env->step, m))) {
      sc_msg_body_destroy(SC_MSG_STEP_PLAN, m);
      SC_ERROR(LOG, "step %llu: cannot send the plan: %s", (unsigned long long)env->step,
               sc_strerror(rc));
    }
  }
  free(ids);
  if (rc) {
    report_failure(c, p, env->step, rc, "the step plan could not be sent to every rank");
    return 0;
  }
  return send_planned(c, p, env->step);
}

const sc_actor_spec sc_partitioner_spec = {
    .name = "partitioner",
    .state_size = sizeof(partitioner),
    .init = partitioner_init,
    .terminate = partitioner_terminate,
    .handlers = {[SC_MSG_GLOBAL_BATCH] = on_global_batch},
};
