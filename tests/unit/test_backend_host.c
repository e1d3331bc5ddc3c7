/* The ZeroMQ host collective backend: ranks as threads with real sockets on ipc
 * endpoints in a private temporary folder. Checks every op on every group against
 * values computed from the rank numbers, a whole planned step through the plan-checked
 * session, deadlines, abort, and recovery by a new epoch; then what a rank lets in
 * (backend_host.h): test peers (raw DEALERs, honest or not) send it blocks by hand, and
 * the collective must end with the honest ones while the rest is refused, counted and
 * never held; with CURVE keys, the source is the key a peer proved it holds. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

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
  bool curve; /* the ranks use the key pairs below (world_keys) */
  uint8_t pub[WORLD_MAX][32], sec[WORLD_MAX][32];
} world;

static void world_init(world *w, int p, int n, int t, int64_t deadline_ms) {
  *w = (world){0};
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

/* A CURVE key pair, binary. */
static void key_pair(uint8_t pub[32], uint8_t sec[32]) {
  char p[41], s[41];
  cr_assert_eq(zmq_curve_keypair(p, s), 0);
  cr_assert_not_null(zmq_z85_decode(pub, p));
  cr_assert_not_null(zmq_z85_decode(sec, s));
}

static void world_keys(world *w) {
  w->curve = true;
  for (int r = 0; r < sc_plan_world_size(&w->cfg); r++) key_pair(w->pub[r], w->sec[r]);
}

static sc_host_comm_config rank_config(const world *w, int32_t rank) {
  return (sc_host_comm_config){.rank = rank, .endpoints = w->ep_ptrs,
                               .deadline_ms = w->deadline_ms,
                               .public_key = w->curve ? w->pub[rank] : NULL,
                               .secret_key = w->curve ? w->sec[rank] : NULL,
                               .rank_keys = w->curve ? (const uint8_t (*)[32])w->pub : NULL};
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
  const sc_host_comm_config hc = rank_config(a->w, a->rank);
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
        comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, (sc_group)g, SC_DT_F32, send, recv, count, NULL);
    CHECK(a, rc == 0, "all_gather %s: %d", sc_group_name(g), rc);
    for (int32_t k = 0; k < G; k++)
      for (size_t i = 0; i < count; i++)
        CHECK(a, recv[k * count + i] == val(members[k], i), "all_gather %s value", sc_group_name(g));
    /* all_reduce, f32 */
    rc = comm->ops->run(comm->self, 0, SC_OP_ALL_REDUCE, (sc_group)g, SC_DT_F32, send, recv, count, NULL);
    CHECK(a, rc == 0, "all_reduce: %d", rc);
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int32_t k = 0; k < G; k++) want += val(members[k], i);
      CHECK(a, recv[i] == want, "all_reduce %s [%zu] %g != %g", sc_group_name(g), i, recv[i], want);
    }
    /* reduce_scatter: G blocks of `count`; I get the sum of block me */
    rc = comm->ops->run(comm->self, 0, SC_OP_REDUCE_SCATTER, (sc_group)g, SC_DT_F32, send, recv,
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
    rc = comm->ops->run(comm->self, 0, SC_OP_ALL_REDUCE, (sc_group)g, SC_DT_BF16, bs, br, count, NULL);
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

/* (P1 N2 T2 plans a reduce_scatter: the session tells the backend each block's size) */
Test(backend_host, planned_steps_through_the_session) {
  const int layouts[][3] = {{2, 2, 2}, {1, 2, 2}};
  for (int l = 0; l < 2; l++) {
    world w;
    world_init(&w, layouts[l][0], layouts[l][1], layouts[l][2], 10000);
    rank_arg args[WORLD_MAX];
    run_world(&w, planned_step, args);
    for (int r = 0; r < sc_plan_world_size(&w.cfg); r++)
      cr_assert_eq(args[r].result, 0, "layout %d rank %d: %s", l, r, args[r].msg);
    world_done(&w);
  }
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
        comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, 4, NULL);
    const double ms = (double)(sc_now_ns() - t0) / 1e6;
    if (a->rank == 1) CHECK(a, rc == SC_ETIMEDOUT && ms >= 290 && ms < 2000, "rank 1: rc %d after %.0f ms", rc, ms);
    if (a->rank == 0 || a->rank == 2) CHECK(a, rc == 0, "rank %d: %d", a->rank, rc);
  }
  /* everyone is past the failure (threads start within a few ms of each other) */
  const uint64_t resume = start + 900ull * 1000000ull;
  while (sc_now_ns() < resume) usleep(10 * 1000);
  sc_host_comm_reset(comm, 2);
  const int rc =
      comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, 4, NULL);
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
  const int rc = comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send,
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
      b->comm->ops->run(b->comm->self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, 2, NULL);
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
  cr_assert_eq(comm.ops->run(comm.self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, x, y, 2, NULL),
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
  cr_assert_eq(comm.ops->run(comm.self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, x, y, 2, NULL),
               SC_ETIMEDOUT);
  comm.ops->abort(comm.self, 5);
  cr_assert_eq(comm.ops->run(comm.self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, x, y, 2, NULL),
               SC_EABORTED);
  comm.ops->reset(comm.self, 6);
  cr_assert_eq(comm.ops->run(comm.self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, x, y, 2, NULL),
               SC_ETIMEDOUT);
  sc_host_comm_destroy(&comm);
  world_done(&w);
}

/* ---- what a rank lets in ---- */

/* A DEALER the test drives, as a rank or an impostor would: identity ident; a CURVE
 * client of rank `to` when pub and sec are given. */
typedef struct peer {
  void *ctx, *s;
} peer;

static void peer_open(peer *p, const world *w, int32_t to, const char *ident,
                      const uint8_t *pub, const uint8_t *sec) {
  p->ctx = zmq_ctx_new();
  p->s = zmq_socket(p->ctx, ZMQ_DEALER);
  cr_assert_not_null(p->s);
  zmq_setsockopt(p->s, ZMQ_ROUTING_ID, ident, strlen(ident));
  if (pub) {
    cr_assert_eq(zmq_setsockopt(p->s, ZMQ_CURVE_SERVERKEY, w->pub[to], 32), 0);
    cr_assert_eq(zmq_setsockopt(p->s, ZMQ_CURVE_PUBLICKEY, pub, 32), 0);
    cr_assert_eq(zmq_setsockopt(p->s, ZMQ_CURVE_SECRETKEY, sec, 32), 0);
  }
  cr_assert_eq(zmq_connect(p->s, w->ep_ptrs[to]), 0);
}

/* Closes the peer: only once the rank has read what it sent (no linger). */
static void peer_close(peer *p) {
  const int zero = 0;
  zmq_setsockopt(p->s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(p->s);
  zmq_ctx_term(p->ctx);
}

/* One block as backend_host.h frames it, sent after delay_ms. */
typedef struct block {
  int delay_ms;
  uint64_t epoch;
  uint32_t group, seq;
  float v[32];
  size_t floats;
} block;

static void peer_send_bytes(peer *p, uint64_t epoch, uint32_t group, uint32_t seq,
                            const void *data, size_t bytes) {
  const struct {
    uint64_t epoch;
    uint32_t group, seq;
  } h = {epoch, group, seq};
  zmq_send(p->s, &h, sizeof h, ZMQ_SNDMORE);
  zmq_send(p->s, data, bytes, 0);
}

static void peer_send(peer *p, const block *b) {
  if (b->delay_ms) usleep((useconds_t)b->delay_ms * 1000);
  peer_send_bytes(p, b->epoch, b->group, b->seq, b->v, b->floats * sizeof(float));
}

/* Sends blocks from a thread of its own, for a rank already waiting in its collective. */
typedef struct sender {
  peer *p;
  const block *blocks;
  int n;
  pthread_t th;
} sender;

static void *sender_main(void *arg) {
  sender *s = arg;
  for (int i = 0; i < s->n; i++) peer_send(s->p, &s->blocks[i]);
  return NULL;
}

static void sender_start(sender *s, peer *p, const block *blocks, int n) {
  *s = (sender){.p = p, .blocks = blocks, .n = n};
  pthread_create(&s->th, NULL, sender_main, s);
}

/* Rank `rank` of w on this thread, at step 1. */
static void open_rank(const world *w, int32_t rank, size_t max_block_bytes, sc_comm *comm) {
  sc_host_comm_config hc = rank_config(w, rank);
  hc.max_block_bytes = max_block_bytes;
  sc_diag d = {0};
  cr_assert_eq(sc_host_comm_create(comm, &w->cfg, &hc, &d), 0, "%s", d.msg);
  sc_host_comm_reset(comm, 1);
}

/* A gather of 2 floats on g: mine (0, 0), then the block of the other member. */
static void gather2(sc_comm *comm, sc_group g, float want0, float want1) {
  float send[2] = {0, 0}, recv[4] = {-1, -1, -1, -1};
  sc_diag d = {0};
  cr_assert_eq(comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, g, SC_DT_F32, send, recv, 2, &d),
               0, "%s", d.msg);
  const int other = 1 - comm->group_rank[g];
  cr_assert(recv[2 * other] == want0 && recv[2 * other + 1] == want1,
            "got %g %g from the other member, want %g %g", recv[2 * other],
            recv[2 * other + 1], want0, want1);
}

/* gather2 while a thread of its own sends blocks from p (the rank is already waiting in
 * the gather when they come). */
static void gather2_as_sent(sc_comm *comm, sc_group g, float want0, float want1, peer *p,
                            const block *blocks, int n) {
  sender s;
  sender_start(&s, p, blocks, n);
  gather2(comm, g, want0, want1);
  pthread_join(s.th, NULL);
}

/* Rank 0 of a world (deadline 5 s) on this thread, and the peers the test opens toward
 * it; bench_close closes them all. */
#define BENCH_PEERS 6
typedef struct bench {
  world w;
  sc_comm comm;
  peer peers[BENCH_PEERS];
  int num_peers;
} bench;

static void bench_open(bench *b, int p, int n, int t, size_t max_block_bytes, bool curve) {
  b->num_peers = 0;
  world_init(&b->w, p, n, t, 5000);
  if (curve) world_keys(&b->w);
  open_rank(&b->w, 0, max_block_bytes, &b->comm);
}

/* A peer of rank 0 (peer_open). */
static peer *bench_peer(bench *b, const char *ident, const uint8_t *pub, const uint8_t *sec) {
  cr_assert_lt(b->num_peers, BENCH_PEERS);
  peer *p = &b->peers[b->num_peers++];
  peer_open(p, &b->w, 0, ident, pub, sec);
  return p;
}

static void bench_close(bench *b) {
  sc_host_comm_destroy(&b->comm);
  for (int i = 0; i < b->num_peers; i++) peer_close(&b->peers[i]);
  world_done(&b->w);
}

static sc_host_comm_stats stats_of(const sc_comm *comm) {
  sc_host_comm_stats st;
  sc_host_comm_get_stats(comm, &st);
  return st;
}

/* Identities that only look like rank 1 (and rank 0's own) send first: all refused as
 * having no source (the old strtol took "r01" and "r1x" for rank 1, whose block the
 * collective then used); rank 1's real block completes the collective. */
Test(backend_host, identities_other_than_r_and_a_canonical_rank_are_refused) {
  bench b;
  bench_open(&b, 2, 1, 1, 0, false);
  const char *fakes[] = {"r01", "r1x", "r-0", "r0"};
  const block bad = {.epoch = 1, .group = SC_GROUP_PCP, .v = {666, 666}, .floats = 2};
  for (int i = 0; i < 4; i++) peer_send(bench_peer(&b, fakes[i], NULL, NULL), &bad);
  peer *real = bench_peer(&b, "r1", NULL, NULL);
  const block good = {.delay_ms = 300, .epoch = 1, .group = SC_GROUP_PCP, .v = {1, 2}, .floats = 2};
  gather2_as_sent(&b.comm, SC_GROUP_PCP, 1, 2, real, &good, 1);
  const sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_SOURCE], 4, "%llu",
               (unsigned long long)st.refused_by[SC_HOST_REFUSED_SOURCE]);
  cr_assert_eq(st.refused, 4);
  cr_assert_eq(st.held_blocks, 0);
  bench_close(&b);
}

/* Blocks of rank 1 for step 3 (the current is 1) and then for step 5: one block per
 * (peer, group) is held for later steps, the latest: rank 1 sending for step 5 has left
 * step 3 (it failed there), so its step-3 block would never be taken. A step-4 block
 * after them is older than the one held: dropped unsaid, not an offence. Step 5 may come
 * next here: this rank never entered steps 2-4 (their aborts came first), and the block
 * held meanwhile completes step 5's collective. (Before, every such block stayed until
 * its step, or forever.) They come on the same connection as the real block, so they
 * are read before it. */
Test(backend_host, one_block_per_peer_and_group_is_held_for_later_steps) {
  bench b;
  bench_open(&b, 2, 1, 1, 0, false);
  peer *real = bench_peer(&b, "r1", NULL, NULL);
  const block step3 = {.epoch = 3, .group = SC_GROUP_PCP, .v = {9, 9}, .floats = 2};
  const block step5 = {.epoch = 5, .group = SC_GROUP_PCP, .v = {5, 5}, .floats = 2};
  const block step4 = {.epoch = 4, .group = SC_GROUP_PCP, .v = {4, 4}, .floats = 2};
  peer_send(real, &step3);
  peer_send(real, &step5);
  peer_send(real, &step4);
  const block good = {.epoch = 1, .group = SC_GROUP_PCP, .v = {1, 2}, .floats = 2};
  peer_send(real, &good);
  gather2(&b.comm, SC_GROUP_PCP, 1, 2);
  const sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused, 0);
  cr_assert_eq(st.held_blocks, 1, "%llu blocks held", (unsigned long long)st.held_blocks);
  cr_assert_eq(st.held_bytes, 2 * sizeof(float));
  b.comm.ops->reset(b.comm.self, 5);
  gather2(&b.comm, SC_GROUP_PCP, 5, 5);
  cr_assert_eq(stats_of(&b.comm).held_blocks, 0);
  bench_close(&b);
}

/* The plan of a step with gathers of 2 floats on each group in order. */
static void expect_gathers(sc_coll_session *s, sc_comm *comm, sc_coll *plan,
                           const sc_group *groups, int n, uint64_t step) {
  for (int i = 0; i < n; i++)
    plan[i] = (sc_coll){.seq = i, .layer = -1, .group = (uint8_t)groups[i],
                        .op = SC_OP_ALL_GATHER, .dtype = SC_DT_F32,
                        .purpose = SC_PURPOSE_HIDDEN_RESTORE, .chunk = -1, .rows = 1,
                        .width = 2};
  sc_coll_session_begin(s, comm, plan, n, step);
}

static void session_gather2(sc_coll_session *s, float want0, float want1) {
  const sc_coll *e = &s->plan[s->next];
  float send[2] = {0, 0}, recv[4] = {-1, -1, -1, -1};
  cr_assert_eq(sc_coll_session_run(s, e, send, recv), 0, "%s", s->diag.msg);
  const int other = 1 - s->comm->group_rank[e->group];
  cr_assert(recv[2 * other] == want0 && recv[2 * other + 1] == want1, "got %g %g",
            recv[2 * other], recv[2 * other + 1]);
}

/* Rank 1 sends a 3-float block where the plan has 2, then (later) the right one: the
 * first is refused as it comes, and the collective ends with the second (it used to
 * take the first and fail the step with SC_EDESYNC). */
Test(backend_host, a_block_of_the_wrong_size_is_refused_before_the_real_one_comes) {
  bench b;
  bench_open(&b, 2, 1, 1, 0, false);
  sc_coll plan[1];
  sc_coll_session s;
  expect_gathers(&s, &b.comm, plan, (const sc_group[]){SC_GROUP_PCP}, 1, 1);
  peer *real = bench_peer(&b, "r1", NULL, NULL);
  const block blocks[] = {
      {.delay_ms = 100, .epoch = 1, .group = SC_GROUP_PCP, .v = {7, 7, 7}, .floats = 3},
      {.delay_ms = 300, .epoch = 1, .group = SC_GROUP_PCP, .v = {1, 2}, .floats = 2}};
  sender snd;
  sender_start(&snd, real, blocks, 2);
  session_gather2(&s, 1, 2);
  pthread_join(snd.th, NULL);
  cr_assert_eq(sc_coll_session_end(&s), 0);
  const sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_SIZE], 1);
  cr_assert_eq(st.refused, 1);
  bench_close(&b);
}

/* Two blocks of rank 1 for the same collective, both waiting when the rank reads: the
 * first is kept, the second refused (the old stash kept both and took the later). */
Test(backend_host, a_second_block_for_the_same_collective_is_refused) {
  bench b;
  bench_open(&b, 2, 1, 1, 0, false);
  peer *real = bench_peer(&b, "r1", NULL, NULL);
  const block first = {.epoch = 1, .group = SC_GROUP_PCP, .v = {1, 2}, .floats = 2};
  const block again = {.epoch = 1, .group = SC_GROUP_PCP, .v = {7, 7}, .floats = 2};
  peer_send(real, &first);
  peer_send(real, &again);
  usleep(300 * 1000);
  gather2(&b.comm, SC_GROUP_PCP, 1, 2);
  const sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_DUPLICATE], 1);
  cr_assert_eq(st.held_blocks, 0);
  bench_close(&b);
}

/* P2 T2: rank 0 shares PCP with rank 2 and TP with rank 1; rank 3 no group. Rank 1's
 * PCP block and rank 3's TP block are refused (they used to be held until the step
 * ended); rank 2's completes the gather. */
Test(backend_host, a_block_from_a_rank_outside_the_group_is_refused) {
  bench b;
  bench_open(&b, 2, 1, 2, 0, false);
  peer *r1 = bench_peer(&b, "r1", NULL, NULL);
  peer *r3 = bench_peer(&b, "r3", NULL, NULL);
  peer *r2 = bench_peer(&b, "r2", NULL, NULL);
  const block pcp = {.epoch = 1, .group = SC_GROUP_PCP, .v = {666, 666}, .floats = 2};
  const block tp = {.epoch = 1, .group = SC_GROUP_TP, .v = {666, 666}, .floats = 2};
  peer_send(r1, &pcp);
  peer_send(r3, &tp);
  const block good = {.delay_ms = 300, .epoch = 1, .group = SC_GROUP_PCP, .v = {1, 2}, .floats = 2};
  gather2_as_sent(&b.comm, SC_GROUP_PCP, 1, 2, r2, &good, 1);
  const sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_GROUP], 2);
  cr_assert_eq(st.held_blocks, 0);
  bench_close(&b);
}

/* P2 N2: PCP and DCP are the same two ranks. With rank 0 in step 1, rank 1 sends for
 * step 2: one block per group is held (within max_block_bytes); a second for PCP, one
 * for a later collective, and one over the limit are refused. Step 2 then runs on the
 * held blocks. */
Test(backend_host, one_block_per_source_and_group_is_held_for_the_next_step) {
  bench b;
  bench_open(&b, 2, 2, 1, 64, false);
  peer *real = bench_peer(&b, "r1", NULL, NULL);
  const block early[] = {
      {.epoch = 2, .group = SC_GROUP_PCP, .v = {3, 4}, .floats = 2},
      {.epoch = 2, .group = SC_GROUP_PCP, .v = {7, 7}, .floats = 2},      /* second */
      {.epoch = 2, .group = SC_GROUP_PCP, .seq = 1, .v = {7}, .floats = 2}, /* ahead */
      {.epoch = 2, .group = SC_GROUP_DCP, .v = {7}, .floats = 32},         /* 128 bytes */
      {.epoch = 2, .group = SC_GROUP_DCP, .v = {5, 6}, .floats = 2},
      {.epoch = 1, .group = SC_GROUP_PCP, .v = {1, 2}, .floats = 2}};
  for (int i = 0; i < 6; i++) peer_send(real, &early[i]);
  gather2(&b.comm, SC_GROUP_PCP, 1, 2);
  sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_DUPLICATE], 1);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_SEQ], 1);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_SIZE], 1);
  cr_assert_eq(st.refused, 3);
  cr_assert_eq(st.held_blocks, 2);
  cr_assert_eq(st.held_bytes, 16);
  sc_host_comm_reset(&b.comm, 2);
  gather2(&b.comm, SC_GROUP_PCP, 3, 4);
  gather2(&b.comm, SC_GROUP_DCP, 5, 6);
  cr_assert_eq(stats_of(&b.comm).held_blocks, 0);
  bench_close(&b);
}

/* A block held for the next step that does not fit its plan (3 floats for a gather of
 * 2) is dropped and counted when the plan comes; the step completes with the right one
 * (the old backend took it and failed the step). */
Test(backend_host, held_blocks_that_do_not_fit_the_plan_are_dropped_when_it_comes) {
  bench b;
  bench_open(&b, 2, 2, 1, 64, false);
  peer *real = bench_peer(&b, "r1", NULL, NULL);
  const block early[] = {
      {.epoch = 2, .group = SC_GROUP_PCP, .v = {7, 7, 7}, .floats = 3},
      {.epoch = 2, .group = SC_GROUP_DCP, .v = {5, 6}, .floats = 2},
      {.epoch = 1, .group = SC_GROUP_PCP, .v = {1, 2}, .floats = 2}};
  for (int i = 0; i < 3; i++) peer_send(real, &early[i]);
  gather2(&b.comm, SC_GROUP_PCP, 1, 2);
  cr_assert_eq(stats_of(&b.comm).held_blocks, 2);
  sc_host_comm_reset(&b.comm, 2);
  sc_coll plan[2];
  sc_coll_session s;
  expect_gathers(&s, &b.comm, plan, (const sc_group[]){SC_GROUP_PCP, SC_GROUP_DCP}, 2, 2);
  const sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_PLAN], 1);
  cr_assert_eq(st.held_blocks, 1);
  const block good = {.delay_ms = 100, .epoch = 2, .group = SC_GROUP_PCP, .v = {3, 4}, .floats = 2};
  sender snd;
  sender_start(&snd, real, &good, 1);
  session_gather2(&s, 3, 4);
  session_gather2(&s, 5, 6);
  pthread_join(snd.th, NULL);
  cr_assert_eq(sc_coll_session_end(&s), 0);
  bench_close(&b);
}

/* The session of step 2 begins before the comm is reset for it (the executor resets
 * first, but the backend does not rely on it): from then on a step-2 block is checked
 * against that plan, so a 3-float one is refused as it comes, and step 2 completes after
 * the reset with the right block (the old backend took the wrong one and failed). */
Test(backend_host, a_plan_told_before_its_reset_applies_to_its_blocks) {
  bench b;
  bench_open(&b, 2, 1, 1, 0, false);
  sc_coll plan[1];
  sc_coll_session s;
  expect_gathers(&s, &b.comm, plan, (const sc_group[]){SC_GROUP_PCP}, 1, 2);
  peer *real = bench_peer(&b, "r1", NULL, NULL);
  const block blocks[] = {{.epoch = 2, .group = SC_GROUP_PCP, .v = {7, 7, 7}, .floats = 3},
                          {.epoch = 1, .group = SC_GROUP_PCP, .v = {1, 2}, .floats = 2}};
  for (int i = 0; i < 2; i++) peer_send(real, &blocks[i]);
  gather2(&b.comm, SC_GROUP_PCP, 1, 2);
  const sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_SIZE], 1);
  cr_assert_eq(st.held_blocks, 0);
  sc_host_comm_reset(&b.comm, 2);
  const block good = {.delay_ms = 100, .epoch = 2, .group = SC_GROUP_PCP, .v = {3, 4}, .floats = 2};
  sender snd;
  sender_start(&snd, real, &good, 1);
  session_gather2(&s, 3, 4);
  pthread_join(snd.th, NULL);
  cr_assert_eq(sc_coll_session_end(&s), 0);
  bench_close(&b);
}

/* With CURVE keys: outsiders (a plain DEALER, and one whose key pair is not listed),
 * both calling themselves "r1", connect to rank 0 and send before rank 1 exists; they
 * cannot complete a handshake, so rank 0 gets nothing from them (nothing even to
 * refuse), and the ranks' own collectives work. (Without CURVE, the first "r1" to
 * connect was rank 1 for rank 0, and ZeroMQ ignored the real one.) */
static int curve_body(rank_arg *a, sc_comm *comm) {
  sc_host_comm_reset(comm, 1);
  float send[2] = {(float)a->rank + 1, (float)a->rank + 2}, recv[4];
  int rc = comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv,
                          2, NULL);
  CHECK(a, rc == 0, "gather: %d", rc);
  const int other = 1 - a->rank;
  CHECK(a, recv[2 * other] == (float)other + 1 && recv[2 * other + 1] == (float)other + 2,
        "rank %d got %g %g", a->rank, recv[2 * other], recv[2 * other + 1]);
  if ((rc = every_op(a, comm))) return rc;
  sc_host_comm_stats st;
  sc_host_comm_get_stats(comm, &st);
  CHECK(a, st.refused == 0 && st.held_blocks == 0, "rank %d: %llu refused, %llu held",
        a->rank, (unsigned long long)st.refused, (unsigned long long)st.held_blocks);
  return 0;
}

Test(backend_host, with_curve_keys_only_the_ranks_keys_deliver) {
  bench b;
  bench_open(&b, 2, 1, 1, 0, true);
  uint8_t pub[32], sec[32];
  key_pair(pub, sec);
  peer *plain = bench_peer(&b, "r1", NULL, NULL);
  peer *unlisted = bench_peer(&b, "r1", pub, sec);
  const block bad = {.epoch = 1, .group = SC_GROUP_PCP, .v = {666, 666}, .floats = 2};
  peer_send(plain, &bad);
  peer_send(unlisted, &bad);
  usleep(300 * 1000); /* their handshakes are over, one way or the other */
  rank_arg args[2] = {{.w = &b.w, .rank = 0}, {.w = &b.w, .rank = 1, .body = curve_body}};
  pthread_t th;
  pthread_create(&th, NULL, rank_main, &args[1]);
  args[0].result = curve_body(&args[0], &b.comm);
  pthread_join(th, NULL);
  for (int r = 0; r < 2; r++) cr_assert_eq(args[r].result, 0, "rank %d: %s", r, args[r].msg);
  bench_close(&b);
}

/* P2 T2 with CURVE: a peer holding rank 2's key pair but calling itself "r1" is rank 2
 * (its PCP block completes rank 0's gather), and one with rank 1's key calling itself
 * "r2" is rank 1, refused on PCP, where rank 1 is not a member. */
Test(backend_host, with_curve_the_source_is_the_key_not_the_identity) {
  bench b;
  bench_open(&b, 2, 1, 2, 0, true);
  peer *as1 = bench_peer(&b, "r2", b.w.pub[1], b.w.sec[1]);
  peer *as2 = bench_peer(&b, "r1", b.w.pub[2], b.w.sec[2]);
  const block bad = {.epoch = 1, .group = SC_GROUP_PCP, .v = {666, 666}, .floats = 2};
  peer_send(as1, &bad);
  const block good = {.delay_ms = 300, .epoch = 1, .group = SC_GROUP_PCP, .v = {5, 6}, .floats = 2};
  gather2_as_sent(&b.comm, SC_GROUP_PCP, 5, 6, as2, &good, 1);
  const sc_host_comm_stats st = stats_of(&b.comm);
  cr_assert_eq(st.refused_by[SC_HOST_REFUSED_GROUP], 1);
  cr_assert_eq(st.refused, 1);
  bench_close(&b);
}
