/* The plan check in front of every collective: matching requests are launched in order,
 * a mismatch is refused before the backend sees it, the failure is remembered for the
 * step_abort report, and the desync fault injection trips the check. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "collectives/coll.h"
#include "model/model_defaults.h"

static int launched;
static int32_t last_seq;
static int count_op(void *self, int32_t seq, sc_coll_op op, sc_group g, sc_dtype dt,
                    const void *send, void *recv, size_t count, sc_diag *d) {
  (void)self, (void)op, (void)g, (void)dt, (void)send, (void)recv, (void)count, (void)d;
  launched++;
  last_seq = seq;
  return 0;
}
static const sc_coll_ops k_counting = {.run = count_op};
static const sc_coll_ops k_counting_recordable = {.run = count_op, .recordable = true};

/* A backend whose peer sent a block of the wrong size, as the host backend says it. */
static int wrong_block_op(void *self, int32_t seq, sc_coll_op op, sc_group g, sc_dtype dt,
                          const void *send, void *recv, size_t count, sc_diag *d) {
  (void)self, (void)seq, (void)op, (void)g, (void)dt, (void)send, (void)recv, (void)count;
  return sc_fail(d, SC_EDESYNC, "rank 0 sent a 8-byte block where this rank's plan has 64");
}
static const sc_coll_ops k_wrong_block = {.run = wrong_block_op};

static void make(sc_plan *plan, sc_comm *comm) {
  sc_plan_config c;
  sc_model_plan_config_default(&c);
  c.pcp = c.dcp = 2;
  c.layers = 2;
  const sc_batch_req reqs[] = {{.computed = 9, .scheduled = 1, .prefill = false},
                               {.computed = 0, .scheduled = 12, .prefill = true}};
  sc_plan_init(plan);
  cr_assert_eq(sc_plan_build(plan, &c, reqs, 2, NULL), 0);
  memset(comm, 0, sizeof *comm);
  sc_comm_init_groups(comm, &c, 1);
  comm->ops = &k_counting;
}

Test(coll_session, runs_the_plan_in_order_and_refuses_a_mismatch) {
  sc_plan plan;
  sc_comm comm;
  make(&plan, &comm);
  cr_assert_gt(plan.num_colls, 4);
  sc_coll_session s;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 7);
  launched = 0;
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(sc_coll_session_run(&s, &plan.colls[k], NULL, NULL), 0);
    cr_assert_eq(last_seq, k, "the backend is told the entry's plan position");
  }
  cr_assert_eq(launched, 3);
  sc_coll bad = plan.colls[3];
  bad.width += 8;
  cr_assert_eq(sc_coll_session_run(&s, &bad, NULL, NULL), SC_EDESYNC);
  cr_assert_eq(launched, 3, "a mismatching collective was launched");
  cr_assert_not_null(strstr(s.diag.msg, "desync on rank 1, step 7, seq 3"), "%s", s.diag.msg);
  cr_assert_eq(comm.last_failure.code, SC_EDESYNC);
  cr_assert_eq(comm.last_failure.seq, 3);
  cr_assert_eq(comm.last_failure.step, 7);
  cr_assert_eq(comm.last_failure.expected.width, plan.colls[3].width);
  cr_assert_eq(comm.last_failure.actual.width, plan.colls[3].width + 8);
  /* the step is dead: even the right request is refused now */
  cr_assert_eq(sc_coll_session_run(&s, &plan.colls[3], NULL, NULL), SC_EDESYNC);
  cr_assert_eq(launched, 3);
  sc_plan_free(&plan);
}

/* A collective that fails in the backend is not this rank's refusal: the message gives the
 * backend's reason (the peer to blame), and the failure record has the planned shape on
 * both sides, which is how the scheduler tells the two apart. */
Test(coll_session, a_failed_collective_names_the_backends_reason) {
  sc_plan plan;
  sc_comm comm;
  make(&plan, &comm);
  comm.ops = &k_wrong_block;
  sc_coll_session s;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 4);
  cr_assert_eq(sc_coll_session_run(&s, &plan.colls[0], NULL, NULL), SC_EDESYNC);
  cr_assert_not_null(strstr(s.diag.msg, "rank 1, step 4, seq 0"), "%s", s.diag.msg);
  cr_assert_not_null(strstr(s.diag.msg, "rank 0 sent a 8-byte block"), "%s", s.diag.msg);
  cr_assert_eq(comm.last_failure.code, SC_EDESYNC);
  cr_assert(sc_coll_matches(&comm.last_failure.expected, &comm.last_failure.actual));
  sc_plan_free(&plan);
}

Test(coll_session, extra_and_missing_collectives_are_desyncs) {
  sc_plan plan;
  sc_comm comm;
  make(&plan, &comm);
  sc_coll_session s;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 1);
  for (int k = 0; k < plan.num_colls; k++) cr_assert_eq(sc_coll_session_run(&s, &plan.colls[k], NULL, NULL), 0);
  cr_assert_eq(sc_coll_session_end(&s), 0);
  cr_assert_eq(sc_coll_session_run(&s, &plan.colls[0], NULL, NULL), SC_EDESYNC); /* one too many */
  cr_assert_not_null(strstr(s.diag.msg, "no further collective"));

  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 2);
  cr_assert_eq(sc_coll_session_run(&s, &plan.colls[0], NULL, NULL), 0);
  cr_assert_eq(sc_coll_session_end(&s), SC_EDESYNC); /* the rest never ran */
  cr_assert_not_null(strstr(s.diag.msg, "step ended before seq 1"), "%s", s.diag.msg);
  /* the step_abort report names the entry that never ran */
  cr_assert_eq(comm.last_failure.code, SC_EDESYNC);
  cr_assert_eq(comm.last_failure.seq, 1);
  cr_assert(sc_coll_matches(&comm.last_failure.expected, &plan.colls[1]));
  sc_plan_free(&plan);
}

Test(coll_session, injected_desync_is_refused_only_at_its_step) {
  sc_plan plan;
  sc_comm comm;
  make(&plan, &comm);
  comm.inject_desync_step = 3;
  sc_coll_session s;
  launched = 0;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 2);
  cr_assert_eq(sc_coll_session_run(&s, &plan.colls[0], NULL, NULL), 0);
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 3);
  cr_assert_eq(sc_coll_session_run(&s, &plan.colls[0], NULL, NULL), SC_EDESYNC);
  cr_assert_eq(launched, 1);
  cr_assert_eq(comm.last_failure.actual.rows, plan.colls[0].rows + 1);
  sc_plan_free(&plan);
}

/* A replayed step (model/forward.c's recordings): its recorded collectives are checked
 * against the step's plan and counted as run, and nothing reaches the backend (the replay
 * queues them); a recording that no longer fits the plan is refused before the replay,
 * with the message a run would give; and a backend that cannot replay collectives
 * refuses a recording that holds some. */
Test(coll_session, a_replay_is_checked_against_the_plan_and_launches_nothing) {
  sc_plan plan;
  sc_comm comm;
  make(&plan, &comm);
  comm.ops = &k_counting_recordable;
  sc_coll_session s;
  launched = 0;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 5);
  cr_assert_eq(sc_coll_session_replay(&s, plan.colls, plan.num_colls), 0);
  cr_assert_eq(launched, 0);
  cr_assert_eq(sc_coll_session_end(&s), 0);
  uint64_t calls = 0;
  for (int p = 0; p < SC_PURPOSE_COUNT; p++) calls += comm.stats[p].calls;
  cr_assert_eq(calls, (uint64_t)plan.num_colls, "replayed collectives count in the stats");

  sc_coll stale[64];
  cr_assert_leq(plan.num_colls, 64);
  memcpy(stale, plan.colls, sizeof(sc_coll) * (size_t)plan.num_colls);
  stale[2].rows += 1;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 6);
  cr_assert_eq(sc_coll_session_replay(&s, stale, plan.num_colls), SC_EDESYNC);
  cr_assert_not_null(strstr(s.diag.msg, "desync on rank 1, step 6, seq 2"), "%s", s.diag.msg);
  cr_assert_eq(comm.last_failure.seq, 2);
  cr_assert_eq(sc_coll_session_replay(&s, plan.colls, plan.num_colls), SC_EDESYNC, "dead step");
  /* fewer recorded than planned: the end says which entry never ran */
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 7);
  cr_assert_eq(sc_coll_session_replay(&s, plan.colls, plan.num_colls - 1), 0);
  cr_assert_eq(sc_coll_session_end(&s), SC_EDESYNC);
  /* the injected desync trips a replay's check as it trips a run's */
  comm.inject_desync_step = 8;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 8);
  cr_assert_eq(sc_coll_session_replay(&s, plan.colls, plan.num_colls), SC_EDESYNC);
  cr_assert_eq(comm.last_failure.actual.rows, plan.colls[0].rows + 1);
  comm.inject_desync_step = 0;

  comm.ops = &k_counting;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 9);
  cr_assert_eq(sc_coll_session_replay(&s, plan.colls, plan.num_colls), SC_EINVAL);
  cr_assert_eq(sc_coll_session_replay(&s, plan.colls, 0), SC_EINVAL, "the step stays failed");
  sc_coll_session_begin(&s, &comm, plan.colls, 0, 10);
  cr_assert_eq(sc_coll_session_replay(&s, plan.colls, 0), 0, "no collectives: any backend");
  cr_assert_eq(launched, 0);
  sc_plan_free(&plan);
}

/* The decode attention's LSE merge in one exchange (sc_coll_session_run_lse): offered only
 * at the plan's LSE gather and where the backend's lse_fits says so; the planned gather and reduction are both checked
 * before anything is launched (a mismatch of either is the desync a run would give,
 * naming its position), one launch runs them with the gather's plan position, and both
 * count as run. */
static bool lse_offered;
static int lse_launched;
static bool fits_op(void *self, sc_group g, sc_coll_op op, size_t n_rows, size_t width) {
  (void)self, (void)g, (void)op;
  return lse_offered && n_rows > 0 && width > 0;
}
static int lse_op(void *self, int32_t seq, sc_coll_op op, sc_group g, const float *lse,
                  const float *part, float *recv, size_t n_rows, size_t width, sc_diag *d) {
  (void)self, (void)op, (void)g, (void)lse, (void)part, (void)recv, (void)n_rows, (void)width, (void)d;
  lse_launched++;
  last_seq = seq;
  return 0;
}
static const sc_coll_ops k_lse = {.run = count_op, .lse_fits = fits_op, .lse_reduce = lse_op};

Test(coll_session, the_lse_pair_in_one_exchange_is_checked_as_two) {
  sc_plan plan;
  sc_comm comm;
  make(&plan, &comm);
  comm.ops = &k_lse;
  int32_t at = -1; /* the first decode_lse gather, followed by its decode_out reduction */
  for (int32_t k = 0; k + 1 < plan.num_colls && at < 0; k++)
    if (plan.colls[k].purpose == SC_PURPOSE_DECODE_LSE) at = k;
  cr_assert_geq(at, 0);
  const sc_coll *g = &plan.colls[at], *r = &plan.colls[at + 1];
  cr_assert_eq(r->purpose, SC_PURPOSE_DECODE_OUT);
  sc_coll_session s;
  for (int offered = 0; offered < 2; offered++) {
    lse_offered = offered;
    sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 3);
    for (int32_t k = 0; k < at; k++) {
      cr_assert_not(sc_coll_session_lse_fused(&s), "offered at entry %d, not the LSE gather", k);
      cr_assert_eq(sc_coll_session_run(&s, &plan.colls[k], NULL, NULL), 0);
    }
    cr_assert_eq(sc_coll_session_lse_fused(&s), offered);
    if (!offered) {
      cr_assert_eq(sc_coll_session_run_lse(&s, g, r, NULL, NULL, NULL), SC_EINVAL);
      cr_assert_eq(s.next, at, "a refused pair consumed the plan");
      cr_assert_eq(s.failed, 0);
      continue;
    }
    lse_launched = launched = 0;
    memset(comm.stats, 0, sizeof comm.stats);
    cr_assert_eq(sc_coll_session_run_lse(&s, g, r, NULL, NULL, NULL), 0);
    cr_assert_eq(lse_launched, 1);
    cr_assert_eq(launched, 0);
    cr_assert_eq(last_seq, at, "the exchange carries the gather's plan position");
    cr_assert_eq(s.next, at + 2);
    cr_assert_eq(comm.stats[SC_PURPOSE_DECODE_LSE].calls, 1);
    cr_assert_eq(comm.stats[SC_PURPOSE_DECODE_OUT].calls, 1);
    for (int32_t k = at + 2; k < plan.num_colls; k++)
      cr_assert_eq(sc_coll_session_run(&s, &plan.colls[k], NULL, NULL), 0);
    cr_assert_eq(sc_coll_session_end(&s), 0);
  }
  /* a reduction of another shape: refused, nothing launched, its position named */
  lse_offered = true;
  sc_coll bad = *r;
  bad.width += 4;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 4);
  for (int32_t k = 0; k < at; k++) cr_assert_eq(sc_coll_session_run(&s, &plan.colls[k], NULL, NULL), 0);
  lse_launched = 0;
  cr_assert_eq(sc_coll_session_run_lse(&s, g, &bad, NULL, NULL, NULL), SC_EDESYNC);
  cr_assert_eq(lse_launched, 0);
  char want[48];
  snprintf(want, sizeof want, "step 4, seq %d", at + 1);
  cr_assert_not_null(strstr(s.diag.msg, want), "%s", s.diag.msg);
  cr_assert_eq(comm.last_failure.seq, at + 1);
  /* a gather of another shape: refused at its own position */
  sc_coll bad_g = *g;
  bad_g.rows += 1;
  sc_coll_session_begin(&s, &comm, plan.colls, plan.num_colls, 5);
  for (int32_t k = 0; k < at; k++) cr_assert_eq(sc_coll_session_run(&s, &plan.colls[k], NULL, NULL), 0);
  const sc_coll bad_r = {.layer = r->layer, .group = r->group, .op = r->op, .dtype = r->dtype,
                         .purpose = r->purpose, .chunk = -1, .rows = bad_g.rows,
                         .width = r->width};
  cr_assert_eq(sc_coll_session_run_lse(&s, &bad_g, &bad_r, NULL, NULL, NULL), SC_EDESYNC);
  cr_assert_eq(lse_launched, 0);
  cr_assert_eq(comm.last_failure.seq, at);
  sc_plan_free(&plan);
}
