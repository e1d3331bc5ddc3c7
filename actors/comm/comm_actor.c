/* comm_actor.c - the comm actor of every rank: it owns the rank's collective
 * communicator (created with the rank context), verifies each step plan and acknowledges
 * its fingerprint to the scheduler without holding anything up, and aborts the
 * communicator when the scheduler aborts a step, so that no rank stays blocked in a
 * collective whose peers have given up (DESIGN.md §4).
 *
 * The collectives themselves are entered by the executor's thread through the
 * plan-checked session (collectives/coll.h), which refuses any request that is not the
 * next planned entry before launching it. The comm actor runs on a shared loop and so
 * stays responsive while the executor is blocked inside a collective. */
#include <string.h>

#include "actors/pipeline.h"
#include "actors/runtime/sc_log.h"

#define LOG "comm"

typedef struct comm_state {
  sc_rank_ctx *ctx;
  sc_plan plan;
  sc_actor_id scheduler;
} comm_state;

static int init(sc_ctx *c, void *state, const void *arg) {
  comm_state *s = state;
  s->ctx = *(sc_rank_ctx *const *)arg;
  sc_plan_init(&s->plan);
  return sc_node_resolve(sc_ctx_node(c), "scheduler@0", &s->scheduler);
}

static void terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  sc_plan_free(&((comm_state *)state)->plan);
}

static int on_step_plan(sc_ctx *c, const sc_envelope *env, const void *body) {
  comm_state *s = sc_state(c);
  sc_diag d = {0};
  /* to_plan re-checks the plan's consistency and recomputes the fingerprint over the
   * entries this rank will enforce: what is acknowledged is what will be checked. */
  const int rc = sc_msg_step_plan_to_plan(body, &s->plan, &d);
  if (rc) {
    SC_ERROR(LOG, "rank %d: step %llu plan rejected: %s", s->ctx->rank,
             (unsigned long long)env->step, d.msg);
    sc_msg_step_abort *a = sc_msg_body_new(SC_MSG_STEP_ABORT);
    if (a == NULL) return SC_ENOMEM;
    a->reason = rc;
    a->rank = s->ctx->rank;
    a->step = env->step;
    a->seq = -1;
    a->message = strdup(d.msg);
    if (sc_send_step(c, s->scheduler, SC_MSG_STEP_ABORT, env->step, a))
      sc_msg_body_destroy(SC_MSG_STEP_ABORT, a);
    return 0;
  }
  sc_msg_plan_ack *ack = sc_msg_body_new(SC_MSG_PLAN_ACK);
  if (ack == NULL) return SC_ENOMEM;
  ack->rank = s->ctx->rank;
  ack->fingerprint = s->plan.fingerprint;
  if (sc_send_step(c, s->scheduler, SC_MSG_PLAN_ACK, env->step, ack))
    sc_msg_body_destroy(SC_MSG_PLAN_ACK, ack);
  return 0;
}

static int on_step_abort(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  comm_state *s = sc_state(c);
  const sc_msg_step_abort *a = body;
  /* Record first, then look at the executor: if it enters the step after this point it
   * sees `aborted` itself (sc_rank_ctx's protocol; both are sequentially consistent). */
  uint64_t prev = atomic_load(&s->ctx->aborted);
  while (prev < a->step && !atomic_compare_exchange_weak(&s->ctx->aborted, &prev, a->step)) {
  }
  if (atomic_load(&s->ctx->executing) == a->step && s->ctx->comm.ops->abort) {
    SC_INFO(LOG, "rank %d: aborting the collectives of step %llu", s->ctx->rank,
            (unsigned long long)a->step);
    s->ctx->comm.ops->abort(s->ctx->comm.self);
  }
  return 0;
}

const sc_actor_spec sc_comm_spec = {
    .name = "comm",
    .state_size = sizeof(comm_state),
    .init = init,
    .terminate = terminate,
    .handlers = {[SC_MSG_STEP_PLAN] = on_step_plan, [SC_MSG_STEP_ABORT] = on_step_abort},
};
