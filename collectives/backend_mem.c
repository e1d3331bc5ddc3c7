/* backend_mem.c - in-memory collectives for ranks as threads (see backend_mem.h). */
#include "collectives/backend_mem.h"
#include "collectives/coll_reduce.h"
#include "kernels/lse_math.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

/* One group instance: the members' published arguments and the barrier state. */
typedef struct mem_group {
  int32_t size;
  int32_t arrived, departed;
  uint64_t gen;  /* round number; advances when the last member departs */
  bool ready;    /* all members arrived: buffers may be read */
  int err;       /* error of the current round, seen by every member */
  const void **send;
  size_t *count;
  int *dtype, *op;
} mem_group;

typedef struct mem_rank {
  sc_mem_world *w;
  mem_group *grp[SC_GROUP_COUNT];
  int32_t member[SC_GROUP_COUNT];
  int64_t deadline_ms;
  float *scratch;  /* reduction results, written to recv after the second barrier */
  size_t scratch_cap;
  sc_mem_queue_fn queue; /* where collectives are queued (sc_mem_comm_queue_through), or
                            NULL: they run at once */
  void *queue_ctx;
} mem_rank;

struct sc_mem_world {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* one condition for all groups: worlds are small */
  int poison;        /* 0, or the code every collective now fails with */
  sc_plan_config cfg;
  int32_t world_size;
  int32_t num_groups;
  mem_group *groups;
  mem_rank *ranks;
};

static int group_alloc(mem_group *g, int32_t size) {
  g->size = size;
  g->send = calloc((size_t)size, sizeof *g->send);
  g->count = calloc((size_t)size, sizeof *g->count);
  g->dtype = calloc((size_t)size, sizeof *g->dtype);
  g->op = calloc((size_t)size, sizeof *g->op);
  return g->send && g->count && g->dtype && g->op ? 0 : SC_ENOMEM;
}

/* The memory of a world (groups, ranks), also of one whose creation failed half-way. */
static void free_world(sc_mem_world *w) {
  for (int32_t i = 0; w->groups && i < w->num_groups; i++) {
    free(w->groups[i].send);
    free(w->groups[i].count);
    free(w->groups[i].dtype);
    free(w->groups[i].op);
  }
  free(w->groups);
  free(w->ranks);
  free(w);
}

int sc_mem_world_create(const sc_plan_config *cfg, sc_mem_world **out) {
  const int32_t P = cfg->pcp, T = cfg->tp, N = cfg->dcp;
  const int32_t W = P * T;
  /* Instances: P TP groups, T PCP groups, DCP groups (T of them when P > 1 and N = P,
   * T / N when P = 1, none when N = 1: a group of one needs no rendezvous). */
  const int32_t n_dcp = N == 1 ? 0 : (P > 1 ? T : T / N);
  int rc = SC_ENOMEM;
  sc_mem_world *w = calloc(1, sizeof *w);
  if (w == NULL) goto fail;
  w->world_size = W;
  w->cfg = *cfg;
  w->num_groups = P + T + n_dcp;
  w->groups = calloc((size_t)w->num_groups, sizeof *w->groups);
  w->ranks = calloc((size_t)W, sizeof *w->ranks);
  if (w->groups == NULL || w->ranks == NULL) goto fail_free;
  for (int32_t i = 0; i < w->num_groups; i++) {
    const int32_t size = i < P ? T : i < P + T ? P : N;
    if ((rc = group_alloc(&w->groups[i], size))) goto fail_free;
  }
  for (int32_t g = 0; g < W; g++) {
    const sc_rank_coords c = sc_plan_rank_coords(cfg, g);
    mem_rank *r = &w->ranks[g];
    r->w = w;
    r->grp[SC_GROUP_TP] = &w->groups[c.pcp_rank];
    r->member[SC_GROUP_TP] = c.tp_rank;
    r->grp[SC_GROUP_PCP] = &w->groups[P + c.tp_rank];
    r->member[SC_GROUP_PCP] = c.pcp_rank;
    if (N > 1) {
      const int32_t inst = P > 1 ? c.tp_rank : c.tp_rank / N;
      r->grp[SC_GROUP_DCP] = &w->groups[P + T + inst];
    }
    r->member[SC_GROUP_DCP] = c.dcp_rank;
  }
  if (pthread_mutex_init(&w->mu, NULL) != 0) goto fail_free;
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) != 0) goto fail_mutex;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  const int crc = pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (crc != 0) goto fail_mutex;
  *out = w;
  return 0;

fail_mutex:
  pthread_mutex_destroy(&w->mu);
  rc = SC_ESYS;
fail_free:
  free_world(w);
fail:
  return rc;
}

void sc_mem_world_destroy(sc_mem_world *w) {
  if (w == NULL) return;
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  for (int32_t g = 0; g < w->world_size; g++) free(w->ranks[g].scratch);
  free_world(w);
}

void sc_mem_world_abort(sc_mem_world *w) {
  pthread_mutex_lock(&w->mu);
  if (!w->poison) w->poison = SC_EABORTED;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void sc_mem_world_reset(sc_mem_world *w) {
  pthread_mutex_lock(&w->mu);
  w->poison = 0;
  for (int32_t i = 0; i < w->num_groups; i++) {
    mem_group *g = &w->groups[i];
    g->arrived = g->departed = 0;
    g->ready = false;
    g->err = 0;
  }
  pthread_mutex_unlock(&w->mu);
}

static const sc_coll_ops k_mem_ops; /* defined below its functions */

int sc_mem_comm_create(sc_comm *comm, sc_mem_world *w, int32_t global_rank,
                       int64_t deadline_ms) {
  if (global_rank < 0 || global_rank >= w->world_size) return SC_EINVAL;
  mem_rank *r = &w->ranks[global_rank];
  r->deadline_ms = deadline_ms;
  memset(comm, 0, sizeof *comm);
  sc_comm_init_groups(comm, &w->cfg, global_rank);
  comm->ops = &k_mem_ops;
  comm->self = r;
  return 0;
}

static int ensure_scratch(mem_rank *r, size_t n) {
  if (n <= r->scratch_cap) return 0;
  float *p = realloc(r->scratch, n * sizeof *p);
  if (p == NULL) return SC_ENOMEM;
  r->scratch = p;
  r->scratch_cap = n;
  return 0;
}

/* Phase 1: publish and wait for all members. Returns 0 with *gen set, or an error (the
 * member then did not join the round). Called with the mutex held. */
static int arrive(sc_mem_world *w, mem_group *g, int32_t m, int op, int dt, const void *send,
                  size_t count, int64_t deadline_ms, uint64_t *gen) {
  const struct timespec until = deadline_ms > 0 ? sc_time_after_ms(CLOCK_MONOTONIC, deadline_ms)
                                                : (struct timespec){0};
  /* The previous round may still be reading: wait for its last member to depart. The
   * reading phase never blocks, so this wait is short and needs no deadline. */
  while (g->ready && !w->poison) pthread_cond_wait(&w->cv, &w->mu);
  if (w->poison) return SC_EABORTED;
  g->send[m] = send;
  g->count[m] = count;
  g->dtype[m] = dt;
  g->op[m] = op;
  *gen = g->gen;
  if (++g->arrived == g->size) {
    g->ready = true;
    g->err = 0;
    for (int32_t k = 1; k < g->size; k++)
      if (g->count[k] != g->count[0] || g->dtype[k] != g->dtype[0] || g->op[k] != g->op[0])
        g->err = SC_EDESYNC;
    pthread_cond_broadcast(&w->cv);
    return 0;
  }
  while (!g->ready && !w->poison) {
    if (deadline_ms > 0) {
      if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT && !g->ready) {
        g->arrived--;
        w->poison = SC_EABORTED;
        pthread_cond_broadcast(&w->cv);
        return SC_ETIMEDOUT;
      }
    } else {
      pthread_cond_wait(&w->cv, &w->mu);
    }
  }
  if (!g->ready) { /* poisoned before the round completed: leave it */
    g->arrived--;
    return SC_EABORTED;
  }
  return 0;
}

/* Phase 2 end: the second barrier. Called with the mutex held. */
static void depart(sc_mem_world *w, mem_group *g, uint64_t gen) {
  if (++g->departed == g->size) {
    g->arrived = g->departed = 0;
    g->ready = false;
    g->gen++;
    pthread_cond_broadcast(&w->cv);
    return;
  }
  while (g->gen == gen) pthread_cond_wait(&w->cv, &w->mu);
}

/* Sums block `off` of every member's send buffer, in member order (coll_reduce.h). */
static void reduce_block(const mem_group *g, int dt, size_t off, size_t n, float *acc) {
  const size_t esz = sc_dtype_size(dt);
  for (int32_t k = 0; k < g->size; k++)
    sc_coll_accumulate((sc_dtype)dt, acc, (const char *)g->send[k] + off * esz, n, k == 0);
}

/* Joins group g's round as member m with (op, dt, send, count) and waits for every
 * member: 0 with *gen set (the members' buffers may be read until leave_round), or an
 * error: not joined (*joined false), or joined in a round that failed (g->err: leave it). */
static int enter_round(mem_rank *r, mem_group *g, int32_t m, int op, int dt, const void *send,
                       size_t count, uint64_t *gen, bool *joined) {
  sc_mem_world *w = r->w;
  *joined = false;
  pthread_mutex_lock(&w->mu);
  int rc = w->poison ? SC_EABORTED : arrive(w, g, m, op, dt, send, count, r->deadline_ms, gen);
  if (rc == 0) {
    *joined = true;
    rc = g->err;
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

static void leave_round(mem_rank *r, mem_group *g, uint64_t gen) {
  pthread_mutex_lock(&r->w->mu);
  depart(r->w, g, gen);
  pthread_mutex_unlock(&r->w->mu);
}

/* The collective itself, run now (its failures are the rendezvous's: the codes say all
 * there is). */
static int mem_run_now(mem_rank *r, sc_coll_op op, sc_group grp, sc_dtype dt,
                       const void *send, void *recv, size_t count) {
  if ((unsigned)op >= SC_OP_COUNT || (unsigned)grp >= SC_GROUP_COUNT ||
      (unsigned)dt >= SC_DT_COUNT)
    return SC_EINVAL;
  const size_t esz = sc_dtype_size(dt);
  mem_group *g = r->grp[grp];
  const int32_t m = r->member[grp];
  const int32_t size = g ? g->size : 1;
  if (op != SC_OP_ALL_GATHER && dt == SC_DT_W32) return SC_EINVAL;
  if (op == SC_OP_REDUCE_SCATTER && count % (size_t)size != 0) return SC_EINVAL;
  const size_t out_n = op == SC_OP_REDUCE_SCATTER ? count / (size_t)size : count;
  int rc = 0;
  if (op != SC_OP_ALL_GATHER && (rc = ensure_scratch(r, out_n))) return rc;
  if (g == NULL) { /* a group of one */
    pthread_mutex_lock(&r->w->mu);
    const int poisoned = r->w->poison;
    pthread_mutex_unlock(&r->w->mu);
    if (poisoned) return SC_EABORTED;
    if (count > 0 && recv != send) memmove(recv, send, count * esz);
    return 0;
  }
  uint64_t gen = 0;
  bool joined;
  rc = enter_round(r, g, m, op, dt, send, count, &gen, &joined);
  if (!joined) return rc;
  if (rc == 0 && count > 0) {
    if (op == SC_OP_ALL_GATHER) {
      for (int32_t k = 0; k < size; k++) {
        char *dst = (char *)recv + (size_t)k * count * esz;
        if (dst != g->send[k]) memmove(dst, g->send[k], count * esz);
      }
    } else {
      const size_t off = op == SC_OP_REDUCE_SCATTER ? (size_t)m * out_n : 0;
      reduce_block(g, dt, off, out_n, r->scratch);
    }
  }
  leave_round(r, g, gen);
  /* Reductions write recv only now: recv may be some member's send buffer. */
  if (rc == 0 && op != SC_OP_ALL_GATHER && out_n > 0)
    sc_coll_store((sc_dtype)dt, r->scratch, recv, out_n);
  return rc;
}

/* ---- the decode attention's LSE merge in one round (coll.h, lse_fits / lse_reduce) ---- */

/* What a member publishes for it: its LSE and its parts (read by every member). */
typedef struct mem_lse_src {
  const float *lse, *part;
} mem_lse_src;

/* The round's op in the rendezvous: apart from the plain ops, so that a member that
 * merged in one round and one that did not are a desync, not a silent mix. */
#define MEM_OP_LSE(op) (SC_OP_COUNT + (int)(op))

static bool mem_lse_fits(void *self, sc_group grp, sc_coll_op op, size_t n_rows, size_t width) {
  const mem_rank *r = self;
  if ((unsigned)grp >= SC_GROUP_COUNT || r->grp[grp] == NULL || width == 0) return false;
  const size_t G = (size_t)r->grp[grp]->size;
  return op == SC_OP_ALL_REDUCE || (op == SC_OP_REDUCE_SCATTER && n_rows % G == 0);
}

/* Per row, the weights of lse_math.h over the members' LSE, then the members' scaled
 * parts summed in member order, the product rounded before the add (C11 contracts
 * nothing): what the LSE's gather, cpu lse_scale and reduce_block give. */
static int mem_lse_now(mem_rank *r, sc_coll_op op, sc_group grp, const float *lse,
                       const float *part, float *recv, size_t n_rows, size_t width) {
  if (!mem_lse_fits(r, grp, op, n_rows, width)) return SC_EINVAL;
  mem_group *g = r->grp[grp];
  const size_t G = (size_t)g->size;
  const size_t rows = op == SC_OP_REDUCE_SCATTER ? n_rows / G : n_rows;
  const size_t row0 = op == SC_OP_REDUCE_SCATTER ? (size_t)r->member[grp] * rows : 0;
  int rc = ensure_scratch(r, rows * width + G);
  if (rc) return rc;
  const mem_lse_src mine = {lse, part};
  uint64_t gen = 0;
  bool joined;
  rc = enter_round(r, g, r->member[grp], MEM_OP_LSE(op), SC_DT_F32, &mine, n_rows * width, &gen,
                   &joined);
  if (!joined) return rc;
  float *acc = r->scratch, *lg = r->scratch + rows * width;
  for (size_t i = 0; rc == 0 && i < rows; i++) {
    for (size_t m = 0; m < G; m++) lg[m] = ((const mem_lse_src *)g->send[m])->lse[row0 + i];
    const double big_l = sc_lse_merged(lg, (int32_t)G, 1, 0);
    float *a = acc + i * width;
    for (size_t m = 0; m < G; m++) {
      const float f = sc_lse_weight(lg[m], big_l);
      const float *o = ((const mem_lse_src *)g->send[m])->part + (row0 + i) * width;
      for (size_t x = 0; x < width; x++)
        a[x] = (m == 0 ? 0.0f : a[x]) + (f == 0.0f ? 0.0f : f * o[x]);
    }
  }
  leave_round(r, g, gen);
  /* (recv may be this member's part, which the others read until they left) */
  if (rc == 0) memcpy(recv, acc, rows * width * sizeof *acc);
  return rc;
}

/* A collective's arguments, for a queue that runs it later (sc_mem_comm_queue_through). */
typedef struct mem_call {
  mem_rank *r;
  sc_coll_op op;
  sc_group grp;
  sc_dtype dt;
  const void *send;
  void *recv;
  size_t count;
  const float *lse; /* an LSE round's (send: its parts; count: its rows x width) */
  size_t width;
} mem_call;

static int mem_call_run(const void *args) {
  const mem_call *c = args;
  if (c->lse)
    return mem_lse_now(c->r, c->op, c->grp, c->lse, c->send, c->recv, c->count / c->width,
                       c->width);
  return mem_run_now(c->r, c->op, c->grp, c->dt, c->send, c->recv, c->count);
}

static int mem_run(void *self, int32_t seq, sc_coll_op op, sc_group grp, sc_dtype dt,
                   const void *send, void *recv, size_t count, sc_diag *d) {
  (void)seq, (void)d;
  mem_rank *r = self;
  if (r->queue == NULL) return mem_run_now(r, op, grp, dt, send, recv, count);
  const mem_call c = {r, op, grp, dt, send, recv, count, NULL, 0};
  return r->queue(r->queue_ctx, mem_call_run, &c, sizeof c);
}

static int mem_lse_reduce(void *self, int32_t seq, sc_coll_op op, sc_group grp, const float *lse,
                          const float *part, float *recv, size_t n_rows, size_t width,
                          sc_diag *d) {
  (void)seq, (void)d;
  mem_rank *r = self;
  if (r->queue == NULL) return mem_lse_now(r, op, grp, lse, part, recv, n_rows, width);
  const mem_call c = {r, op, grp, SC_DT_F32, part, recv, n_rows * width, lse, width};
  return r->queue(r->queue_ctx, mem_call_run, &c, sizeof c);
}

/* (the in-memory world of the tests has no steps: any abort ends it) */
static void mem_abort(void *self, uint64_t epoch) {
  (void)epoch;
  sc_mem_world_abort(((mem_rank *)self)->w);
}

static const sc_coll_ops k_mem_ops = {
    .run = mem_run,
    .abort = mem_abort,
    .lse_fits = mem_lse_fits,
    .lse_reduce = mem_lse_reduce,
};

/* The same, queued with the kernels' work (sc_mem_comm_queue_through): recordable. */
static const sc_coll_ops k_mem_queued_ops = {
    .run = mem_run,
    .abort = mem_abort,
    .lse_fits = mem_lse_fits,
    .lse_reduce = mem_lse_reduce,
    .recordable = true,
};

void sc_mem_comm_queue_through(sc_comm *comm, sc_mem_queue_fn queue, void *ctx) {
  if (comm == NULL || (comm->ops != &k_mem_ops && comm->ops != &k_mem_queued_ops)) return;
  mem_rank *r = comm->self;
  r->queue = queue;
  r->queue_ctx = ctx;
  comm->ops = queue ? &k_mem_queued_ops : &k_mem_ops;
}
