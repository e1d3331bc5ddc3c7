/* The staged wrapper: collectives on kernel-context buffers through a host backend give
 * exactly what that backend gives on host memory; abort and reset reach the inner
 * backend; unwrap restores it. Ranks are threads over the in-memory backend, buffers come
 * from CPU kernel contexts (the same copy ops a CUDA context implements with cudaMemcpy). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "collectives/backend_mem.h"
#include "collectives/backend_staged.h"
#include "model/model_defaults.h"

typedef struct {
  sc_mem_world *w;
  int32_t rank;
  int rc;
  float gathered[8], reduced[4], scattered[2];
} rank_t;

static void *rank_main(void *p) {
  rank_t *r = p;
  sc_comm comm;
  sc_kernels *k;
  r->rc = sc_mem_comm_create(&comm, r->w, r->rank, 5000);
  if (r->rc || (r->rc = sc_kernels_cpu_create(&k, 1))) return NULL;
  const sc_coll_ops *inner_ops = comm.ops;
  if ((r->rc = sc_staged_comm_create(&comm, k, NULL))) return NULL;
  if (comm.ops == inner_ops) { /* (no cr_assert off the test's thread) */
    r->rc = -1000;
    return NULL;
  }
  float host[4];
  for (int i = 0; i < 4; i++) host[i] = (float)(10 * r->rank + i);
  void *send, *recv;
  k->ops->alloc(k, sizeof host, &send);
  k->ops->alloc(k, 8 * sizeof(float), &recv);
  k->ops->copy(k, send, host, sizeof host, SC_KCOPY_H2D);
  if ((r->rc = comm.ops->run(comm.self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, 4, NULL)))
    return NULL;
  k->ops->copy(k, r->gathered, recv, 8 * sizeof(float), SC_KCOPY_D2H);
  if ((r->rc = comm.ops->run(comm.self, 0, SC_OP_ALL_REDUCE, SC_GROUP_PCP, SC_DT_F32, send, recv, 4, NULL)))
    return NULL;
  k->ops->copy(k, r->reduced, recv, 4 * sizeof(float), SC_KCOPY_D2H);
  if ((r->rc =
           comm.ops->run(comm.self, 0, SC_OP_REDUCE_SCATTER, SC_GROUP_PCP, SC_DT_F32, send, recv, 4, NULL)))
    return NULL;
  k->ops->copy(k, r->scattered, recv, 2 * sizeof(float), SC_KCOPY_D2H);
  sc_staged_comm_destroy(&comm);
  if (comm.ops != inner_ops) r->rc = -1001;
  k->ops->free(k, send);
  k->ops->free(k, recv);
  sc_kernels_destroy(k);
  return NULL;
}

Test(backend_staged, same_results_as_the_in_memory_backend) {
  sc_plan_config c;
  sc_model_plan_config_default(&c);
  c.pcp = c.dcp = 2;
  sc_mem_world *w;
  cr_assert_eq(sc_mem_world_create(&c, &w), 0);
  rank_t r[2] = {{.w = w, .rank = 0}, {.w = w, .rank = 1}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, rank_main, &r[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(r[i].rc, 0);
    for (int e = 0; e < 8; e++) cr_assert_eq(r[i].gathered[e], (float)(10 * (e / 4) + e % 4));
    for (int e = 0; e < 4; e++) cr_assert_eq(r[i].reduced[e], (float)(10 + 2 * e));
    for (int e = 0; e < 2; e++) cr_assert_eq(r[i].scattered[e], (float)(10 + 2 * (2 * i + e)));
  }
  sc_mem_world_destroy(w);
}

/* An inner backend that only records what reaches it. */
static int inner_aborts;
static uint64_t inner_epoch;
static int inner_run(void *self, int32_t seq, sc_coll_op op, sc_group g, sc_dtype dt,
                     const void *send, void *recv, size_t count, sc_diag *d) {
  (void)self, (void)seq, (void)op, (void)g, (void)dt, (void)send, (void)recv, (void)count, (void)d;
  return 0;
}
static uint64_t inner_abort_epoch;
static void inner_abort(void *self, uint64_t epoch) {
  inner_aborts++;
  inner_abort_epoch = epoch;
}
static void inner_reset(void *self, uint64_t epoch) { inner_epoch = epoch; }
static const sc_coll_ops k_recording = {.run = inner_run, .abort = inner_abort,
                                        .reset = inner_reset};

Test(backend_staged, abort_and_reset_reach_the_inner_backend) {
  sc_comm comm = {.ops = &k_recording};
  sc_kernels *k;
  cr_assert_eq(sc_kernels_cpu_create(&k, 1), 0);
  cr_assert_eq(sc_staged_comm_create(&comm, k, NULL), 0);
  cr_assert_neq(comm.ops, &k_recording);
  inner_aborts = 0, inner_epoch = 0;
  comm.ops->abort(comm.self, 6);
  cr_assert_eq(inner_aborts, 1);
  cr_assert_eq(inner_abort_epoch, 6);
  comm.ops->reset(comm.self, 7);
  cr_assert_eq(inner_epoch, 7);
  sc_staged_comm_destroy(&comm);
  cr_assert_eq(comm.ops, &k_recording);
  sc_kernels_destroy(k);
}
