/* coll_session.c - the plan check in front of every collective (DESIGN.md §4). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"

#include "collectives/coll.h"

void sc_comm_init_groups(sc_comm *comm, const sc_plan_config *cfg, int32_t g) {
  static atomic_uint_fast64_t instances;
  comm->instance = atomic_fetch_add(&instances, 1) + 1;
  const sc_rank_coords rc = sc_plan_rank_coords(cfg, g);
  comm->coords = rc;
  comm->group_size[SC_GROUP_TP] = cfg->tp;
  comm->group_rank[SC_GROUP_TP] = rc.tp_rank;
  comm->group_size[SC_GROUP_PCP] = cfg->pcp;
  comm->group_rank[SC_GROUP_PCP] = rc.pcp_rank;
  comm->group_size[SC_GROUP_DCP] = cfg->dcp;
  comm->group_rank[SC_GROUP_DCP] = rc.dcp_rank;
}

int32_t sc_comm_group_members(const sc_plan_config *cfg, int32_t g, sc_group group,
                              int32_t *out) {
  const sc_rank_coords c = sc_plan_rank_coords(cfg, g);
  const int32_t T = cfg->tp;
  switch (group) {
  case SC_GROUP_TP:
    for (int32_t t = 0; t < T; t++) out[t] = c.pcp_rank * T + t;
    return T;
  case SC_GROUP_PCP:
    for (int32_t p = 0; p < cfg->pcp; p++) out[p] = p * T + c.tp_rank;
    return cfg->pcp;
  default:
    if (cfg->dcp == 1) {
      out[0] = g;
      return 1;
    }
    if (cfg->pcp > 1) /* N = P: the DCP group is the PCP group */
      return sc_comm_group_members(cfg, g, SC_GROUP_PCP, out);
    /* P = 1: runs of N consecutive TP ranks */
    const int32_t base = c.tp_rank / cfg->dcp * cfg->dcp;
    for (int32_t k = 0; k < cfg->dcp; k++) out[k] = base + k;
    return cfg->dcp;
  }
}

void sc_coll_describe(const sc_coll *c, char *buf, size_t len) {
  snprintf(buf, len, "%s %s %s rows=%lld width=%lld (%s, layer %d)", sc_coll_op_name(c->op),
           sc_group_name(c->group), sc_dtype_name(c->dtype), (long long)c->rows,
           (long long)c->width, sc_coll_purpose_name(c->purpose), c->layer);
}

void sc_coll_session_begin(sc_coll_session *s, sc_comm *comm, const sc_coll *plan,
                           int32_t num, uint64_t step) {
  *s = (sc_coll_session){.comm = comm, .plan = plan, .num = num, .step = step,
                         .inject_desync = step != 0 && comm->inject_desync_step == step};
  if (comm->ops && comm->ops->expect) comm->ops->expect(comm->self, step, plan, num);
}

/* Keeps the failure at plan position s->next for the step_abort report; planned and
 * asked may be NULL (zeros: the plan had ended, or nothing was requested). */
static void record_failure(sc_coll_session *s, int code, const sc_coll *planned,
                           const sc_coll *asked) {
  sc_coll_failure *f = &s->comm->last_failure;
  *f = (sc_coll_failure){.step = s->step, .code = code, .seq = s->next};
  if (planned) f->expected = *planned;
  if (asked) {
    f->actual = *asked;
    f->actual.seq = s->next;
  }
}

static int refuse(sc_coll_session *s, const sc_coll *planned, const sc_coll *req) {
  char expected[160] = "no further collective", actual[160];
  if (planned) sc_coll_describe(planned, expected, sizeof expected);
  sc_coll_describe(req, actual, sizeof actual);
  s->failed = sc_fail(&s->diag, SC_EDESYNC,
                      "desync on rank %d, step %llu, seq %d: expected %s, requested %s",
                      s->comm->coords.global, (unsigned long long)s->step, s->next, expected,
                      actual);
  record_failure(s, SC_EDESYNC, planned, req);
  return s->failed;
}

/* A collective that failed: the message names rank, step, plan position and shape, and
 * the backend's reason (why: "" when it gave none). */
static int fail_entry(sc_coll_session *s, int rc, const sc_coll *p, const sc_coll *asked,
                      const char *how, const char *why) {
  char want[160], cause[sizeof s->diag.msg];
  sc_coll_describe(p, want, sizeof want);
  if (why[0]) snprintf(cause, sizeof cause, "%s (%s)", why, sc_errname(rc));
  else snprintf(cause, sizeof cause, "%s", sc_strerror(rc));
  s->failed = sc_fail(&s->diag, rc, "rank %d, step %llu, seq %d: %s failed%s: %s",
                      s->comm->coords.global, (unsigned long long)s->step, s->next, want, how,
                      cause);
  record_failure(s, rc, p, asked);
  return rc;
}

/* The planned entry that request req matches, or NULL with the refusal recorded (the
 * desync injection applies to the session's first request). */
static const sc_coll *admit(sc_coll_session *s, const sc_coll *req, sc_coll *asked) {
  *asked = *req;
  if (s->inject_desync) {
    s->inject_desync = false;
    asked->rows += 1;
  }
  if (s->next >= s->num) {
    refuse(s, NULL, asked);
    return NULL;
  }
  const sc_coll *p = &s->plan[s->next];
  if (!sc_coll_matches(p, asked)) {
    refuse(s, p, asked);
    return NULL;
  }
  return p;
}

/* Planned entry p has been launched: its bus bytes into the per-purpose totals. */
static sc_coll_stat *count_entry(sc_coll_session *s, const sc_coll *p) {
  const double bytes = (double)p->rows * (double)p->width * (double)sc_dtype_size(p->dtype);
  const double G = (double)s->comm->group_size[p->group];
  const double bus = p->op == SC_OP_ALL_GATHER   ? (G - 1) * bytes
                     : p->op == SC_OP_ALL_REDUCE ? 2 * (G - 1) / G * bytes
                                                 : (G - 1) / G * bytes;
  sc_coll_stat *st = &s->comm->stats[p->purpose];
  st->calls++;
  st->bus_bytes += bus;
  s->next++;
  return st;
}

int sc_coll_session_run(sc_coll_session *s, const sc_coll *req, const void *send,
                        void *recv) {
  if (s->failed) return s->failed;
  sc_coll asked;
  const sc_coll *p = admit(s, req, &asked);
  if (p == NULL) return s->failed;
  const size_t count = (size_t)p->rows * (size_t)p->width;
  const sc_coll_ops *ops = s->comm->ops;
  const uint64_t t0 = sc_now_ns();
  sc_diag why = {0};
  const int rc =
      ops->run(s->comm->self, s->next, p->op, p->group, p->dtype, send, recv, count, &why);
  if (rc != 0) return fail_entry(s, rc, p, &asked, "", why.msg);
  sc_coll_stat *st = count_entry(s, p);
  if (ops->finish == NULL) st->seconds += (double)(sc_now_ns() - t0) * 1e-9;
  return 0;
}

/* The shape lse_reduce sees: rows of the merge (a token and a head each) and their
 * width (dc), from the planned pair. */
static bool lse_shape(const sc_coll *gather, const sc_coll *reduce, size_t *n_rows,
                      size_t *width) {
  const int64_t rows = gather->rows * gather->width;
  if (gather->op != SC_OP_ALL_GATHER || gather->dtype != SC_DT_F32 ||
      reduce->dtype != SC_DT_F32 || gather->group != reduce->group || rows <= 0 ||
      reduce->rows != gather->rows || (reduce->rows * reduce->width) % rows != 0 ||
      (reduce->op != SC_OP_ALL_REDUCE && reduce->op != SC_OP_REDUCE_SCATTER))
    return false;
  *n_rows = (size_t)rows;
  *width = (size_t)(reduce->rows * reduce->width / rows);
  return true;
}

bool sc_coll_session_lse_fused(const sc_coll_session *s) {
  const sc_coll_ops *ops = s->comm->ops;
  size_t n_rows, width;
  if (s->failed || s->next + 1 >= s->num || !ops || !ops->lse_fits || !ops->lse_reduce)
    return false;
  const sc_coll *g = &s->plan[s->next], *r = &s->plan[s->next + 1];
  return g->purpose == SC_PURPOSE_DECODE_LSE && r->purpose == SC_PURPOSE_DECODE_OUT &&
         lse_shape(g, r, &n_rows, &width) &&
         ops->lse_fits(s->comm->self, (sc_group)g->group, (sc_coll_op)r->op, n_rows, width);
}

int sc_coll_session_run_lse(sc_coll_session *s, const sc_coll *gather, const sc_coll *reduce,
                            const float *lse, const float *part, float *recv) {
  if (s->failed) return s->failed;
  if (!sc_coll_session_lse_fused(s)) return SC_EINVAL;
  sc_coll asked_g;
  const sc_coll *pg = admit(s, gather, &asked_g);
  if (pg == NULL) return s->failed;
  if (s->next + 1 >= s->num) {
    s->next++; /* (the refusal names the reduction's position) */
    refuse(s, NULL, reduce);
    return s->failed;
  }
  const sc_coll *pr = &s->plan[s->next + 1];
  if (!sc_coll_matches(pr, reduce)) {
    s->next++;
    refuse(s, pr, reduce);
    return s->failed;
  }
  size_t n_rows = 0, width = 0;
  (void)lse_shape(pg, pr, &n_rows, &width); /* (true: sc_coll_session_lse_fused) */
  const sc_coll_ops *ops = s->comm->ops;
  const uint64_t t0 = sc_now_ns();
  sc_diag why = {0};
  const int rc = ops->lse_reduce(s->comm->self, s->next, (sc_coll_op)pr->op, (sc_group)pr->group,
                                 lse, part, recv, n_rows, width, &why);
  if (rc != 0) return fail_entry(s, rc, pg, &asked_g, "", why.msg);
  sc_coll_stat *st = count_entry(s, pg);
  count_entry(s, pr);
  if (ops->finish == NULL) st->seconds += (double)(sc_now_ns() - t0) * 1e-9;
  return 0;
}

int sc_coll_session_replay(sc_coll_session *s, const sc_coll *reqs, int32_t n) {
  if (s->failed) return s->failed;
  if (n > 0 && !s->comm->ops->recordable)
    return s->failed = sc_fail(&s->diag, SC_EINVAL,
                               "rank %d, step %llu: a recorded step with collectives, on a "
                               "backend that cannot replay them",
                               s->comm->coords.global, (unsigned long long)s->step);
  for (int32_t i = 0; i < n; i++) {
    sc_coll asked;
    const sc_coll *p = admit(s, &reqs[i], &asked);
    if (p == NULL) return s->failed;
    count_entry(s, p);
  }
  return 0;
}

int sc_coll_session_finish(sc_coll_session *s) {
  const sc_coll_ops *ops = s->comm->ops;
  if (s->failed || ops == NULL || ops->finish == NULL || s->next == 0) return s->failed;
  /* without memory for the times the outcome still counts: the stats go without them */
  double *sec = calloc((size_t)s->next, sizeof *sec);
  int32_t bad = 0;
  const int rc = ops->finish(s->comm->self, s->step, sec, sec ? s->next : 0, &bad);
  if (rc == 0) {
    for (int32_t i = 0; sec && i < s->next; i++)
      s->comm->stats[s->plan[i].purpose].seconds += sec[i];
  } else {
    if (bad < 0 || bad >= s->next) bad = s->next - 1;
    s->next = bad; /* the message and the report name the collective that failed */
    fail_entry(s, rc, &s->plan[bad], &s->plan[bad], " on the device", "");
  }
  free(sec);
  return rc;
}

int sc_coll_session_end(sc_coll_session *s) {
  if (s->failed) return s->failed;
  if (s->next != s->num) {
    char want[160];
    sc_coll_describe(&s->plan[s->next], want, sizeof want);
    s->failed = sc_fail(&s->diag, SC_EDESYNC,
                        "desync on rank %d, step %llu: step ended before seq %d (%s)",
                        s->comm->coords.global, (unsigned long long)s->step, s->next, want);
    record_failure(s, SC_EDESYNC, &s->plan[s->next], NULL);
    return s->failed;
  }
  return 0;
}
