/* metadata_actor.c - the metadata actor of every rank (DESIGN.md §3 step 4): it rebuilds
 * each step's plan from the partitioner's message, acknowledges the plan's fingerprint to
 * the scheduler, joins the plan with the step's inputs (from the scheduler), derives
 * the rank's local inputs (positions, KV slot mappings, DCP lengths, top-K maps: the pure
 * plan/metadata.c) and hands the finished step to the executor of its node by
 * address. It runs on a shared loop, so while the executor is busy with one step the next
 * step's halves are already being joined and prepared. Two steps may be joined at once:
 * with overlap the scheduler ships a step planned ahead right after the one before
 * (docs/pipeline.md, "Overlapped steps"), so their halves interleave. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/fault.h"
#include "actors/pipeline.h"
#include "actors/rank_ctx.h"
#include "actors/step_abort.h"
#include "actors/step_local.h"
#include "base/log.h"
#include "plan/plan_wire.h"

#define LOG "metadata"

/* A step being joined: its bundle and which halves are in. */
typedef struct joining {
  sc_step_local *sl;          /* NULL: free */
  bool have_plan, have_inputs;
} joining;

typedef struct metadata {
  sc_rank_ctx *ctx;
  sc_actor_id scheduler, executor;
  joining pending[2];
  uint64_t last_step;         /* the newest step handed over (or dropped) */
} metadata;

static int metadata_init(sc_ctx *c, void *state, const void *arg) {
  metadata *m = state;
  m->ctx = *(sc_rank_ctx *const *)arg;
  char name[32];
  snprintf(name, sizeof name, "executor@%d", m->ctx->rank);
  int rc = sc_node_resolve(sc_ctx_node(c), name, &m->executor);
  if (rc == 0) rc = sc_node_resolve(sc_ctx_node(c), "scheduler@0", &m->scheduler);
  return rc;
}

static void metadata_terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  metadata *m = state;
  for (int k = 0; k < 2; k++) sc_step_local_free(m->pending[k].sl);
}

/* The join of `step` into *out, dropping the halves of steps older than the one before
 * it that never completed (a plan that could not be built, an aborted step: the step
 * before may still be joining, planned with this one). *out stays NULL for a stale
 * message (returns 0) or when out of memory (SC_ENOMEM). */
static int slot_for(metadata *m, uint64_t step, joining **out) {
  *out = NULL;
  if (step <= m->last_step) return 0;
  joining *free_one = NULL;
  for (int k = 0; k < 2; k++) {
    joining *j = &m->pending[k];
    if (j->sl && j->sl->step + 1 < step) {
      sc_step_local_free(j->sl);
      j->sl = NULL;
    }
    if (j->sl && j->sl->step == step) {
      *out = j;
      return 0;
    }
    if (j->sl == NULL && free_one == NULL) free_one = j;
  }
  if (free_one == NULL) { /* (two newer ones: this is older than both) */
    joining *old = m->pending[0].sl->step < m->pending[1].sl->step ? &m->pending[0] : &m->pending[1];
    if (old->sl->step > step) return 0;
    sc_step_local_free(old->sl);
    old->sl = NULL;
    free_one = old;
  }
  if ((free_one->sl = sc_step_local_new(step)) == NULL) return SC_ENOMEM;
  free_one->have_plan = free_one->have_inputs = false;
  *out = free_one;
  return 0;
}

static int maybe_hand_over(sc_ctx *c, metadata *m, joining *j) {
  if (!j->have_plan || !j->have_inputs) return 0;
  sc_step_local *sl = j->sl;
  j->sl = NULL;
  m->last_step = sl->step;
  /* an older one still joining never will: its successor is handed over */
  for (int k = 0; k < 2; k++)
    if (m->pending[k].sl && m->pending[k].sl->step < sl->step) {
      sc_step_local_free(m->pending[k].sl);
      m->pending[k].sl = NULL;
    }
  sc_diag d = {0};
  int rc = sc_step_local_finish(sl, m->ctx->rank, m->ctx->cfg.engine.num_blocks, &d);
  if (rc) {
    SC_ERROR(LOG, "rank %d: %s", m->ctx->rank, d.msg);
    sc_step_abort_send(c, m->scheduler, sl->step, m->ctx->rank, rc, d.msg, NULL);
    sc_step_local_free(sl);
    return 0;
  }
  sc_msg_step_local *msg = sc_msg_body_new(SC_MSG_STEP_LOCAL);
  if (msg == NULL) {
    sc_step_local_free(sl);
    return SC_ENOMEM;
  }
  msg->handle = (uint64_t)(uintptr_t)sl;
  if ((rc = sc_send_step(c, m->executor, SC_MSG_STEP_LOCAL, sl->step, msg))) {
    sc_msg_body_destroy(SC_MSG_STEP_LOCAL, msg);
    sc_step_local_free(sl);
    SC_ERROR(LOG, "rank %d: step %llu cannot reach the executor: %s", m->ctx->rank,
             (unsigned long long)sl->step, sc_strerror(rc));
  }
  return 0;
}

static int on_step_plan(sc_ctx *c, const sc_envelope *env, const void *body) {
  metadata *m = sc_state(c);
  joining *j;
  const int src = slot_for(m, env->step, &j);
  if (j == NULL) return src;
  sc_step_local *sl = j->sl;
  const sc_msg_step_plan *p = body;
  sc_diag d = {0};
  /* The plan's gate re-checks its consistency (request ids included) and recomputes the
   * fingerprint over the entries this rank's executor will enforce: the acknowledged
   * plan is the checked one, converted once. */
  sc_plan_wire wire;
  sc_msg_step_plan_wire(p, &wire);
  int rc = sc_plan_from_wire(&wire, &sl->plan, &d);
  /* The plan's fingerprint covers its collectives, not the layout this rank's forward
   * pass takes from its own configuration: a node that read another cluster file or
   * model (another interleave, say) would compute on other tokens with no collective
   * the wiser. So the layout must be the head's. */
  char diff[128];
  if (rc == 0 && !sc_plan_config_same(&m->ctx->plan_cfg, &sl->plan.cfg, diff, sizeof diff))
    rc = sc_fail(&d, SC_EDESYNC,
                 "this rank's configuration differs from the head's plan (%s, here/there): "
                 "every node must read the same cluster file and model", diff);
  if (rc) {
    SC_ERROR(LOG, "rank %d: step %llu plan rejected: %s", m->ctx->rank,
             (unsigned long long)env->step, d.msg);
    sc_step_abort_send(c, m->scheduler, env->step, m->ctx->rank, rc, d.msg, NULL);
    return 0; /* this half is dropped; the step's inputs go with it */
  }
  sc_msg_plan_ack *ack = sc_msg_body_new(SC_MSG_PLAN_ACK);
  if (ack == NULL) return SC_ENOMEM;
  ack->rank = m->ctx->rank;
  ack->fingerprint = sl->plan.fingerprint;
  const sc_faults *faults = &m->ctx->cfg.inject;
  if (sc_fault_fires(faults, SC_FAULT_BADACK, m->ctx->rank, env->step))
    ack->fingerprint ^= 1; /* as a rank that converted the plan wrongly */
  const bool lost = sc_fault_fires(faults, SC_FAULT_NOACK, m->ctx->rank, env->step);
  if (lost || sc_send_step(c, m->scheduler, SC_MSG_PLAN_ACK, env->step, ack))
    sc_msg_body_destroy(SC_MSG_PLAN_ACK, ack); /* (`--inject noack`: as a lost one) */
  sl->req_ids = malloc(sizeof *sl->req_ids * (p->req_ids.n + 1));
  if (sl->req_ids == NULL) return SC_ENOMEM;
  memcpy(sl->req_ids, p->req_ids.v, sizeof *sl->req_ids * p->req_ids.n);
  j->have_plan = true;
  return maybe_hand_over(c, m, j);
}

static int on_step_inputs(sc_ctx *c, const sc_envelope *env, const void *body) {
  metadata *m = sc_state(c);
  joining *j;
  const int rc = slot_for(m, env->step, &j);
  if (j == NULL) return rc;
  sc_step_local *sl = j->sl;
  /* Keep the body instead of copying it: its arrays move into the bundle. */
  sc_msg_step_inputs *in = sc_take_body(c);
  if (in == NULL) return SC_EINVAL; /* cannot happen inside a handler */
  sc_msg_body_clear(SC_MSG_STEP_INPUTS, &sl->in);
  sl->in = *in;
  free(in); /* the struct only; the arrays now belong to the bundle */
  j->have_inputs = true;
  return maybe_hand_over(c, m, j);
}

const sc_actor_spec sc_metadata_spec = {
    .name = "metadata",
    .state_size = sizeof(metadata),
    .init = metadata_init,
    .terminate = metadata_terminate,
    .handlers = {[SC_MSG_STEP_PLAN] = on_step_plan, [SC_MSG_STEP_INPUTS] = on_step_inputs},
};
