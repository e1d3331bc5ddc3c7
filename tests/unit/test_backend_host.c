/* The ZeroMQ host collective backend: ranks as threads with real sockets on ipc
 * endpoints in a private temporary folder. Checks every op on every group against
 * values computed from the rank numbers, a whole planned step through the plan-checked
 * session, deadlines, abort, and recovery by a new epoch. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "collectives/backend_host.h"
#include "kernels/bf16.h"
#include "model/model_defaults.h"

#define WORLD_MAX 8

typedef struct world {
  sc_plan_config cfg;
  char dir[64];
  char eps[WORLD_MAX][128];
  const char *ep_ptrs[WORLD_MAX];
  int64_t deadline_ms;
} world;

static void world_init(world *w, int p, int n, int t, int64_t deadline_ms) {
  sc_model_plan_config_default(&w->cfg);
  w->cfg.pcp = p, w->cfg.dcp = n, w->cfg.tp = t;
  cr_assert_eq(sc_plan_config_validate(&w->cfg, NULL), 0);
  snprintf(w->dir, sizeof w->dir, "/tmp/sc-coll-XXXXXX");
  cr_assert_not_null(mkdtemp(w->dir));
  for (int r = 0; r < p * t; r++) {
    snprintf(w->eps[r], sizeof w->eps[r], "ipc://%s/r%d", w->dir, r);
    w->ep_ptrs[r] = w->eps[r];
  }
  w->deadline_ms = deadline_ms;
}

static void world_done(world *w) {
  for (int r = 0; r < sc_plan_world_size(&w->cfg); r++) unlink(w->eps[r] + 6);
  rmdir(w->dir);
}

typedef struct rank_arg {
  world *w;
  int32_t rank;
  int (*body)(struct rank_arg *a, sc_comm *comm);
  int result;
  char msg[512];
} rank_arg;

static void *rank_main(void *p) {
  rank_arg *a = p;
  sc_comm comm;
  sc_diag d = {0};
  const sc_host_comm_config hc = {.rank = a->rank, .endpoints = a->w->ep_ptrs,
                                   .deadline_ms = a->w->deadline_ms};
  a->result = sc_host_comm_create(&comm, &a->w->cfg, &hc, &d);
  if (a->result != 0) {
    snprintf(a->msg, sizeof a->msg, "create: %s", d.msg);
    return NULL;
  }
  a->result = a->body(a, &comm);
  sc_host_comm_destroy(&comm);
  return NULL;
}

static void run_world(world *w, int (*body)(rank_arg *, sc_comm *), rank_arg *args) {
  const int W = sc_plan_world_size(&w->cfg);
  pthread_t th[WORLD_MAX];
  for (int r = 0; r < W; r++) {
    args[r] = (rank_arg){.w = w, .rank = r, .body = body};
    pthread_create(&th[r], NULL, rank_main, &args[r]);
  }
  for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
}

#define CHECK(a, cond, ...)                                   \
  do {                                                        \
    if (!(cond)) {                                            \
      snprintf((a)->msg, sizeof (a)->msg, __VA_ARGS__);       \
      return -1;                                              \
    }                                                         \
  } while (0)

/* value of element i contributed by global rank r */
static float val(int32_t r, size_t i) { return (float)(r * 1000) + (float)i * 0.5f; }

static int every_op(rank_arg *a, sc_comm *comm) {
  const size_t count = 37;
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    int32_t members[WORLD_MAX];
    const int32_t G = sc_comm_group_members(&a->w->cfg, a->rank, (sc_group)g, members);
    CHECK(a, G == comm->group_size[g], "group size");
    float send[37 * WORLD_MAX], recv[37 * WORLD_MAX];
    for (size_t i = 0; i < count * (size_t)G; i++) send[i] = val(a->rank, i);
    /* all_gather: member k's block is k's send */
    int rc =
        comm->ops->run(comm->self, SC_OP_ALL_GATHER, (sc_group)g, SC_DT_F32, send, recv, count, NULL);
    CHECK(a, rc == 0, "all_gather %s: %d", sc_group_name(g), rc);
    for (int32_t k = 0; k < G; k++)
      for (size_t i = 0; i < count; i++)
        CHECK(a, recv[k * count + i] == val(members[k], i), "all_gather %s value", sc_group_name(g));
    /* all_reduce, f32 */
    rc = comm->ops->run(comm->self, SC_OP_ALL_REDUCE, (sc_group)g, SC_DT_F32, send, recv, count, NULL);
    CHECK(a, rc == 0, "all_reduce: %d", rc);
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int32_t k = 0; k < G; k++) want += val(members[k], i);
      CHECK(a, recv[i] == want, "all_reduce %s [%zu] %g != %g", sc_group_name(g), i, recv[i], want);
    }
    /* reduce_scatter: G blocks of `count`; I get the sum of block me */
    rc = comm->ops->run(comm->self, SC_OP_REDUCE_SCATTER, (sc_group)g, SC_DT_F32, send, recv,
                        count * (size_t)G, NULL);
    CHECK(a, rc == 0, "reduce_scatter: %d", rc);
    const int32_t me = comm->group_rank[g];
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int32_t k = 0; k < G; k++) want += val(members[k], me * count + i);
      CHECK(a, recv[i] == want, "reduce_scatter %s value", sc_group_name(g));
    }
    /* bf16 all_reduce of small integers is exact */
    uint16_t bs[37], br[37];
    for (size_t i = 0; i < count; i++) bs[i] = sc_f32_to_bf16((float)(a->rank + (int)i % 5));
    rc = comm->ops->run(comm->self, SC_OP_ALL_REDUCE, (sc_group)g, SC_DT_BF16, bs, br, count, NULL);
    CHECK(a, rc == 0, "bf16 all_reduce: %d", rc);
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int32_t k = 0; k < G; k++) want += (float)(members[k] + (int)i % 5);
      CHECK(a, sc_bf16_to_f32(br[i]) == want, "bf16 all_reduce value");
    }
  }
  return 0;
}

Test(backend_host, every_op_on_every_group) {
  const int layouts[][3] = {{2, 2, 2}, {4, 4, 1}, {1, 2, 2}, {2, 1, 2}};
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
    world w;
    world_init(&w, layouts[l][0], layouts[l][1], layouts[l][2], 10000);
    rank_arg args[WORLD_MAX];
    run_world(&w, every_op, args);
    for (int r = 0; r < sc_plan_world_size(&w.cfg); r++)
      cr_assert_eq(args[r].result, 0, "P%d N%d T%d rank %d: %s", layouts[l][0], layouts[l][1],
                   layouts[l][2], r, args[r].msg);
    world_done(&w);
  }
}

/* A whole step's collective plan through the plan-checked session. */
static int planned_step(rank_arg *a, sc_comm *comm) {
  const sc_batch_req reqs[] = {{.computed = 40, .scheduled = 1, .prefill = false},
                               {.computed = 0, .scheduled = 11, .prefill = true},
                               {.computed = 6, .scheduled = 8, .prefill = true}};
  sc_plan plan;
  sc_plan_init(&plan);
  sc_plan_config c = a->w->cfg;
  c.layers = 2;
  c.kv_lora_rank = 8, c.rope_dim = 4, c.index_dim = 4, c.hidden = 16, c.topk = 4;
  CHECK(a, sc_plan_build(&plan, &c, reqs, 3, NULL) == 0, "plan");
  sc_coll_session s;
  for (uint64_t step = 1; step <= 3; step++) {
    sc_host_comm_reset(comm, step);
    sc_coll_session_begin(&s, comm, plan.colls, plan.num_colls, step);
    for (int32_t k = 0; k < plan.num_colls; k++) {
      const sc_coll *e = &plan.colls[k];
      const size_t n = (size_t)(e->rows * e->width);
      float *send = calloc(n, sizeof(float)), *recv = calloc(n * 8, sizeof(float));
      for (size_t i = 0; i < n; i++) send[i] = (float)a->rank;
      sc_coll req = *e;
      const int rc = sc_coll_session_run(&s, &req, send, recv);
      bool ok = rc == 0;
      if (ok && e->op == SC_OP_ALL_GATHER)
        for (int32_t m = 0; m < comm->group_size[e->group]; m++) {
          int32_t members[WORLD_MAX];
          sc_comm_group_members(&c, a->rank, (sc_group)e->group, members);
          ok = ok && recv[(size_t)m * n] == (float)members[m];
        }
      free(send);
      free(recv);
      CHECK(a, ok, "step %llu seq %d: %s", (unsigned long long)step, k, s.diag.msg);
    }
    CHECK(a, sc_coll_session_end(&s) == 0, "end: %s", s.diag.msg);
  }
  sc_plan_free(&plan);
  return 0;
}

Test(backend_host, planned_steps_through_the_session) {
  world w;
  world_init(&w, 2, 2, 2, 10000);
  rank_arg args[WORLD_MAX];
  run_world(&w, planned_step, args);
  for (int r = 0; r < 4; r++) cr_assert_eq(args[r].result, 0, "rank %d: %s", r, args[r].msg);
  world_done(&w);
}

/* Rank 3 skips the first collective: its PCP and DCP peers time out (they never hang);
 * then every rank moves to epoch 2 and the group works again. */
static int skip_one(rank_arg *a, sc_comm *comm) {
  float send[4] = {1, 2, 3, 4}, recv[16];
  const uint64_t start = sc_now_ns();
  sc_host_comm_reset(comm, 1);
  if (a->rank != 3) {
    const uint64_t t0 = sc_now_ns();
    const int rc =
        comm->ops->run(comm->self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, 4, NULL);
    const double ms = (double)(sc_now_ns() - t0) / 1e6;
    if (a->rank == 1) CHECK(a, rc == SC_ETIMEDOUT && ms >= 290 && ms < 2000, "rank 1: rc %d after %.0f ms", rc, ms);
    if (a->rank == 0 || a->rank == 2) CHECK(a, rc == 0, "rank %d: %d", a->rank, rc);
  }
  /* everyone is past the failure (threads start within a few ms of each other) */
  const uint64_t resume = start + 900ull * 1000000ull;
  while (sc_now_ns() < resume) usleep(10 * 1000);
  sc_host_comm_reset(comm, 2);
  const int rc =
      comm->ops->run(comm->self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, 4, NULL);
  CHECK(a, rc == 0, "after reset: %d", rc);
  return 0;
}

Test(backend_host, deadline_then_recovery_by_epoch) {
  world w;
  world_init(&w, 2, 2, 2, 300);
  rank_arg args[WORLD_MAX];
  run_world(&w, skip_one, args);
  for (int r = 0; r < 4; r++) cr_assert_eq(args[r].result, 0, "rank %d: %s", r, args[r].msg);
  world_done(&w);
}

/* Rank 1 sends a block of 3 elements where the plan has 2: rank 0's collective fails and
 * names rank 1 as the one out of step (it used to say only that rank 0 refused, with
 * the same shape expected and requested); rank 1, which got rank 0's 2, names rank 0. */
static _Atomic int g_ranks_done;
static int wrong_block(rank_arg *a, sc_comm *comm) {
  float send[3] = {1, 2, 3}, recv[6];
  sc_diag d = {0};
  sc_host_comm_reset(comm, 1);
  const int rc = comm->ops->run(comm->self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send,
                                recv, a->rank == 1 ? 3 : 2, &d);
  /* each comm closes its sockets without lingering: neither goes before the other has
   * its block */
  atomic_fetch_add(&g_ranks_done, 1);
  for (int i = 0; i < 1000 && atomic_load(&g_ranks_done) < 2; i++) usleep(10 * 1000);
  if (a->rank == 0) {
    CHECK(a, rc == SC_EDESYNC, "rank 0: %d", rc);
    CHECK(a, strstr(d.msg, "rank 1 sent a 12-byte block where this rank's plan has 8") != NULL &&
                 strstr(d.msg, "rank 1 is out of step") != NULL,
          "rank 0: %s", d.msg);
  } else {
    CHECK(a, rc == SC_EDESYNC && strstr(d.msg, "rank 0 sent a 8-byte block") != NULL,
          "rank 1: %d %s", rc, d.msg);
  }
  return 0;
}

Test(backend_host, a_block_of_the_wrong_size_names_its_sender) {
  world w;
  world_init(&w, 2, 1, 1, 5000); /* (each side fails at once on the other's block) */
  rank_arg args[WORLD_MAX];
  run_world(&w, wrong_block, args);
  for (int r = 0; r < 2; r++) cr_assert_eq(args[r].result, 0, "rank %d: %s", r, args[r].msg);
  world_done(&w);
}

typedef struct {
  sc_comm *comm;
  int rc;
  double ms;
} blocked_arg;

static void *blocked(void *p) {
  blocked_arg *b = p;
  float send[2] = {0}, recv[4];
  const uint64_t t0 = sc_now_ns();
  b->rc =
      b->comm->ops->run(b->comm->self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, 2, NULL);
  b->ms = (double)(sc_now_ns() - t0) / 1e6;
  return NULL;
}

Test(backend_host, abort_wakes_a_blocked_collective) {
  world w;
  world_init(&w, 2, 1, 1, 0); /* no deadline: only abort can end the wait */
  sc_comm comm;
  const sc_host_comm_config hc = {.rank = 0, .endpoints = w.ep_ptrs};
  cr_assert_eq(sc_host_comm_create(&comm, &w.cfg, &hc, NULL), 0);
  blocked_arg b = {.comm = &comm};
  pthread_t th;
  pthread_create(&th, NULL, blocked, &b);
  usleep(100 * 1000);
  comm.ops->abort(comm.self, 0);
  pthread_join(th, NULL);
  cr_assert_eq(b.rc, SC_EABORTED);
  cr_assert_lt(b.ms, 1000);
  float x[2] = {0}, y[4];
  cr_assert_eq(comm.ops->run(comm.self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, x, y, 2, NULL),
               SC_EABORTED);
  sc_host_comm_destroy(&comm);
  world_done(&w);
}

/* An abort names its step: one for a step that already ended must not fail the next
 * (the comm actor checks that the step runs, then aborts; the step can end and the next
 * begin in between). Rank 1 never runs, so a collective that is not aborted waits out
 * its deadline. */
Test(backend_host, an_abort_of_an_earlier_step_does_not_reach_the_current_one) {
  world w;
  world_init(&w, 2, 1, 1, 200);
  sc_comm comm;
  const sc_host_comm_config hc = {.rank = 0, .endpoints = w.ep_ptrs, .deadline_ms = 200};
  cr_assert_eq(sc_host_comm_create(&comm, &w.cfg, &hc, NULL), 0);
  float x[2] = {0}, y[4];
  comm.ops->reset(comm.self, 5);
  comm.ops->abort(comm.self, 4); /* late: step 4 is over */
  cr_assert_eq(comm.ops->run(comm.self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, x, y, 2, NULL),
               SC_ETIMEDOUT);
  comm.ops->abort(comm.self, 5);
  cr_assert_eq(comm.ops->run(comm.self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, x, y, 2, NULL),
               SC_EABORTED);
  comm.ops->reset(comm.self, 6);
  cr_assert_eq(comm.ops->run(comm.self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, x, y, 2, NULL),
               SC_ETIMEDOUT);
  sc_host_comm_destroy(&comm);
  world_done(&w);
}
