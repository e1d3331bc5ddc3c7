/* test_backend_mem.c - the in-memory collective backend: gathers, reductions and
 * reduce-scatter over every group of several layouts, in-place use, disagreement,
 * deadlines and abort. Ranks are threads. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "collectives/backend_mem.h"
#include "kernels/kernels.h"
#include "model/model_defaults.h"

typedef struct thr {
  sc_mem_world *w;
  sc_plan_config cfg;
  int32_t g;
  int64_t deadline_ms;
  int (*body)(struct thr *t, sc_comm *c);
  int rc;
  int extra; /* body-specific result */
} thr;

static void *thr_main(void *arg) {
  thr *t = arg;
  sc_comm c;
  t->rc = sc_mem_comm_create(&c, t->w, t->g, t->deadline_ms);
  if (t->rc == 0) t->rc = t->body(t, &c);
  return NULL;
}

static void run_world(int P, int N, int T, int64_t deadline_ms,
                      int (*body)(thr *, sc_comm *), thr *out /* [P*T] */) {
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.pcp = P;
  cfg.dcp = N;
  cfg.tp = T;
  cr_assert_eq(sc_plan_config_validate(&cfg, NULL), 0);
  sc_mem_world *w;
  cr_assert_eq(sc_mem_world_create(&cfg, &w), 0);
  pthread_t th[16];
  for (int g = 0; g < P * T; g++) {
    out[g] = (thr){.w = w, .cfg = cfg, .g = g, .deadline_ms = deadline_ms, .body = body};
    cr_assert_eq(pthread_create(&th[g], NULL, thr_main, &out[g]), 0);
  }
  for (int g = 0; g < P * T; g++) pthread_join(th[g], NULL);
  sc_mem_world_destroy(w);
}

/* Every group: all_gather of (global rank, i), all_reduce in place, reduce_scatter;
 * checks the results against the group membership derived independently. */
static int body_all(thr *t, sc_comm *c) {
  enum { CNT = 6 };
  int bad = 0;
  for (int grp = 0; grp < SC_GROUP_COUNT; grp++) {
    const int G = c->group_size[grp], me = c->group_rank[grp];
    float send[CNT], recv[CNT * 8], red[CNT * 8];
    for (int i = 0; i < CNT; i++) send[i] = (float)(t->g * 100 + i);
    int rc = c->ops->run(c->self, 0, SC_OP_ALL_GATHER, grp, SC_DT_F32, send, recv, CNT, NULL);
    if (rc) return rc;
    /* Members of this group, by global rank, in group-rank order. */
    int members[8], nm = 0;
    for (int h = 0; h < t->cfg.pcp * t->cfg.tp; h++) {
      sc_comm o;
      sc_comm_init_groups(&o, &t->cfg, h);
      bool same = true;
      if (grp == SC_GROUP_TP) same = o.coords.pcp_rank == c->coords.pcp_rank;
      if (grp == SC_GROUP_PCP) same = o.coords.tp_rank == c->coords.tp_rank;
      if (grp == SC_GROUP_DCP)
        same = t->cfg.dcp == 1 ? h == t->g
               : t->cfg.pcp > 1 ? o.coords.tp_rank == c->coords.tp_rank
                                : o.coords.tp_rank / t->cfg.dcp == c->coords.tp_rank / t->cfg.dcp;
      if (same) members[o.group_rank[grp]] = h, nm++;
    }
    if (nm != G || members[me] != t->g) bad++;
    for (int k = 0; k < G; k++)
      for (int i = 0; i < CNT; i++) bad += recv[k * CNT + i] != (float)(members[k] * 100 + i);
    /* all_reduce in place */
    float acc[CNT * 8];
    for (int i = 0; i < CNT * G; i++) acc[i] = (float)(t->g + i);
    if ((rc = c->ops->run(c->self, 0, SC_OP_ALL_REDUCE, grp, SC_DT_F32, acc, acc, (size_t)CNT * G, NULL)))
      return rc;
    for (int i = 0; i < CNT * G; i++) {
      float want = 0;
      for (int k = 0; k < G; k++) want += (float)(members[k] + i);
      bad += acc[i] != want;
    }
    /* reduce_scatter: block `me` of the element-wise sum */
    for (int i = 0; i < CNT * G; i++) red[i] = (float)(t->g * 7 + i);
    if ((rc = c->ops->run(c->self, 0, SC_OP_REDUCE_SCATTER, grp, SC_DT_F32, red, recv,
                          (size_t)CNT * G, NULL)))
      return rc;
    for (int i = 0; i < CNT; i++) {
      float want = 0;
      for (int k = 0; k < G; k++) want += (float)(members[k] * 7 + me * CNT + i);
      bad += recv[i] != want;
    }
  }
  t->extra = bad;
  return 0;
}

Test(backend_mem, every_group_of_every_layout) {
  const int layouts[][3] = {{1, 1, 1}, {1, 1, 2}, {1, 2, 2}, {2, 1, 1}, {2, 2, 1},
                            {2, 2, 2}, {4, 4, 1}, {4, 1, 2}, {4, 4, 2}, {1, 2, 4}};
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
    thr t[16];
    const int P = layouts[l][0], N = layouts[l][1], T = layouts[l][2];
    run_world(P, N, T, 5000, body_all, t);
    for (int g = 0; g < P * T; g++) {
      cr_assert_eq(t[g].rc, 0, "P%d N%d T%d rank %d: %s", P, N, T, g, sc_strerror(t[g].rc));
      cr_assert_eq(t[g].extra, 0, "P%d N%d T%d rank %d: %d wrong values", P, N, T, g,
                   t[g].extra);
    }
  }
}

/* Many back-to-back rounds with different sizes: the barrier must not let a fast rank
 * overwrite the arguments of a round still being read. */
static int body_rounds(thr *t, sc_comm *c) {
  int bad = 0;
  float send[64], recv[256];
  for (int round = 0; round < 300; round++) {
    const size_t n = 1 + (size_t)round % 64;
    for (size_t i = 0; i < n; i++) send[i] = (float)(round * 1000 + t->g * 64 + (int)i);
    int rc = c->ops->run(c->self, 0, SC_OP_ALL_GATHER, SC_GROUP_TP, SC_DT_F32, send, recv, n, NULL);
    if (rc) return rc;
    for (int k = 0; k < c->group_size[SC_GROUP_TP]; k++)
      for (size_t i = 0; i < n; i++)
        bad += recv[(size_t)k * n + i] != (float)(round * 1000 + k * 64 + (int)i);
  }
  t->extra = bad;
  return 0;
}

Test(backend_mem, many_rounds) {
  thr t[4];
  run_world(1, 1, 4, 5000, body_rounds, t);
  for (int g = 0; g < 4; g++) {
    cr_assert_eq(t[g].rc, 0);
    cr_assert_eq(t[g].extra, 0);
  }
}

static int body_bf16(thr *t, sc_comm *c) {
  uint16_t v[4] = {0x3f80, 0x4000, 0xbf80, 0x3f00}; /* 1, 2, -1, 0.5 */
  uint16_t out[4];
  int rc = c->ops->run(c->self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_BF16, v, out, 4, NULL);
  if (rc) return rc;
  /* two ranks: 2, 4, -2, 1 */
  const uint16_t want[4] = {0x4000, 0x4080, 0xc000, 0x3f80};
  t->extra = memcmp(out, want, sizeof want) != 0;
  return 0;
}

Test(backend_mem, bf16_reduce) {
  thr t[2];
  run_world(1, 1, 2, 5000, body_bf16, t);
  for (int g = 0; g < 2; g++) {
    cr_assert_eq(t[g].rc, 0);
    cr_assert_eq(t[g].extra, 0);
  }
}

static int body_mismatch(thr *t, sc_comm *c) {
  float a[8] = {0}, b[32];
  return c->ops->run(c->self, 0, SC_OP_ALL_GATHER, SC_GROUP_TP, SC_DT_F32, a, b, t->g == 0 ? 4 : 8, NULL);
}

Test(backend_mem, disagreement_fails_every_member) {
  thr t[2];
  run_world(1, 1, 2, 5000, body_mismatch, t);
  cr_assert_eq(t[0].rc, SC_EDESYNC);
  cr_assert_eq(t[1].rc, SC_EDESYNC);
}

/* Rank 1 never joins the second collective: rank 0 times out, and rank 1's next call
 * fails because the world is poisoned. */
static int body_timeout(thr *t, sc_comm *c) {
  float a[2] = {1, 2}, b[4];
  int rc = c->ops->run(c->self, 0, SC_OP_ALL_GATHER, SC_GROUP_TP, SC_DT_F32, a, b, 2, NULL);
  if (rc) return rc;
  if (t->g == 1) {
    usleep(300 * 1000);
    return c->ops->run(c->self, 0, SC_OP_ALL_GATHER, SC_GROUP_TP, SC_DT_F32, a, b, 2, NULL);
  }
  return c->ops->run(c->self, 0, SC_OP_ALL_GATHER, SC_GROUP_TP, SC_DT_F32, a, b, 2, NULL) == SC_ETIMEDOUT
             ? (t->extra = 1, SC_ETIMEDOUT)
             : -100;
}

Test(backend_mem, deadline_times_out_and_poisons) {
  thr t[2];
  run_world(1, 1, 2, 100, body_timeout, t);
  cr_assert_eq(t[0].rc, SC_ETIMEDOUT);
  cr_assert_eq(t[1].rc, SC_EABORTED);
}

typedef struct abort_arg {
  sc_mem_world *w;
  int rc;
} abort_arg;

static void *blocked(void *arg) {
  abort_arg *a = arg;
  sc_comm c;
  sc_mem_comm_create(&c, a->w, 0, 0);
  float x = 1, y[2];
  a->rc = c.ops->run(c.self, 0, SC_OP_ALL_GATHER, SC_GROUP_TP, SC_DT_F32, &x, y, 1, NULL);
  return NULL;
}

Test(backend_mem, abort_wakes_blocked_rank_and_reset_recovers) {
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.tp = 2;
  sc_mem_world *w;
  cr_assert_eq(sc_mem_world_create(&cfg, &w), 0);
  abort_arg a = {.w = w, .rc = 1};
  pthread_t th;
  pthread_create(&th, NULL, blocked, &a);
  usleep(50 * 1000);
  sc_mem_world_abort(w);
  pthread_join(th, NULL);
  cr_assert_eq(a.rc, SC_EABORTED);
  sc_comm c;
  sc_mem_comm_create(&c, w, 1, 0);
  float x = 1, y[2];
  cr_assert_eq(c.ops->run(c.self, 0, SC_OP_ALL_GATHER, SC_GROUP_TP, SC_DT_F32, &x, y, 1, NULL), SC_EABORTED);
  sc_mem_world_reset(w);
  thr t[2];
  for (int g = 0; g < 2; g++) t[g] = (thr){.w = w, .cfg = cfg, .g = g, .body = body_bf16};
  pthread_t ths[2];
  for (int g = 0; g < 2; g++) pthread_create(&ths[g], NULL, thr_main, &t[g]);
  for (int g = 0; g < 2; g++) pthread_join(ths[g], NULL);
  cr_assert_eq(t[0].rc, 0);
  cr_assert_eq(t[1].extra, 0);
  sc_mem_world_destroy(w);
}

/* Through the plan-checked session: a planned all_reduce runs, and a wrongly shaped
 * request is refused before the backend sees it. */
static int body_session(thr *t, sc_comm *c) {
  sc_coll plan[1] = {{.seq = 0, .layer = 0, .group = SC_GROUP_TP, .op = SC_OP_ALL_REDUCE,
                      .dtype = SC_DT_F32, .purpose = SC_PURPOSE_ATTN_OUT, .chunk = -1,
                      .rows = 2, .width = 3}};
  sc_coll_session s;
  sc_coll_session_begin(&s, c, plan, 1, 7);
  float x[6] = {1, 2, 3, 4, 5, 6};
  sc_coll req = plan[0];
  int rc = sc_coll_session_run(&s, &req, x, x);
  if (rc) return rc;
  t->extra = x[5] != 12.0f;
  if ((rc = sc_coll_session_end(&s))) return rc;
  sc_coll_session_begin(&s, c, plan, 1, 8);
  req.rows = 3;
  return sc_coll_session_run(&s, &req, x, x);
}

Test(backend_mem, session_runs_planned_and_refuses_mismatch) {
  thr t[2];
  run_world(1, 1, 2, 2000, body_session, t);
  for (int g = 0; g < 2; g++) {
    cr_assert_eq(t[g].rc, SC_EDESYNC);
    cr_assert_eq(t[g].extra, 0);
  }
}

/* The decode attention's LSE merge in one round (coll.h, lse_reduce) against the plan's
 * three steps over the same inputs: the LSE's all_gather, the CPU kernels' lse_scale and
 * the all_reduce (P > 1) or reduce_scatter (P = 1) of the scaled parts; bit for bit,
 * in place as the forward runs it at P > 1. Rows include a member's empty shard (-inf
 * LSE, NaN parts that must not leak), a row NaN on every member and a +inf LSE. */
enum { LSE_ROWS = 12, LSE_W = 5 };
static float lse_of(int m, int i) {
  if (i == 5) return NAN;
  if (i == 3 && m == 1) return -INFINITY;
  if (i == 7 && m == 0) return INFINITY;
  return (float)((m * 7 + i * 3) % 11) * 0.37f - 1.5f;
}

static int body_lse(thr *t, sc_comm *c) {
  const int G = c->group_size[SC_GROUP_DCP], me = c->group_rank[SC_GROUP_DCP];
  const sc_coll_op op = t->cfg.pcp > 1 ? SC_OP_ALL_REDUCE : SC_OP_REDUCE_SCATTER;
  float lse[LSE_ROWS], part[LSE_ROWS * LSE_W], scaled[LSE_ROWS * LSE_W], lseg[LSE_ROWS * 8];
  float one[LSE_ROWS * LSE_W], three[LSE_ROWS * LSE_W];
  for (int i = 0; i < LSE_ROWS; i++) {
    lse[i] = lse_of(me, i);
    for (int x = 0; x < LSE_W; x++)
      part[i * LSE_W + x] = i == 3 && me == 1 ? NAN : (float)(me + 1) * 0.3f + (float)(i * LSE_W + x) * 0.01f;
  }
  memcpy(scaled, part, sizeof part);
  memcpy(one, part, sizeof part);
  if (!c->ops->lse_fits(c->self, SC_GROUP_DCP, op, LSE_ROWS, LSE_W)) return SC_ENOTSUP;
  /* in place: recv is the parts, which the other members read in the same round */
  int rc = c->ops->lse_reduce(c->self, 0, op, SC_GROUP_DCP, lse, one, one, LSE_ROWS, LSE_W, NULL);
  if (rc) return rc;
  sc_kernels *k = NULL;
  if ((rc = sc_kernels_cpu_create(&k, 1))) return rc;
  if ((rc = c->ops->run(c->self, 1, SC_OP_ALL_GATHER, SC_GROUP_DCP, SC_DT_F32, lse, lseg, LSE_ROWS,
                        NULL)) == 0 &&
      (rc = k->ops->lse_scale(k, G, me, LSE_ROWS, LSE_W, lseg, scaled, NULL)) == 0)
    rc = c->ops->run(c->self, 2, op, SC_GROUP_DCP, SC_DT_F32, scaled, three, LSE_ROWS * LSE_W, NULL);
  sc_kernels_destroy(k);
  if (rc) return rc;
  const int n = op == SC_OP_REDUCE_SCATTER ? LSE_ROWS * LSE_W / G : LSE_ROWS * LSE_W;
  t->extra = memcmp(one, three, (size_t)n * sizeof(float)) != 0;
  for (int i = 0; i < n; i++) t->extra += three[i] != three[i]; /* nothing NaN leaked */
  return 0;
}

Test(backend_mem, lse_round_is_the_gather_scale_and_reduction) {
  thr t[8];
  const int layouts[][3] = {{2, 2, 1}, {4, 4, 1}, {1, 4, 4}, {2, 2, 2}};
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
    const int P = layouts[l][0], N = layouts[l][1], T = layouts[l][2];
    run_world(P, N, T, 2000, body_lse, t);
    for (int g = 0; g < P * T; g++) {
      cr_assert_eq(t[g].rc, 0, "P%d N%d T%d rank %d: %d", P, N, T, g, t[g].rc);
      cr_assert_eq(t[g].extra, 0, "P%d N%d T%d rank %d: the round differs", P, N, T, g);
    }
  }
}
