/* The staged wrapper: collectives on kernel-context buffers through a host backend give
 * exactly what the host backend gives on host memory; abort and reset reach the inner
 * backend; unwrap restores it. Ranks are threads over the in-memory backend, buffers come
 * from CPU kernel contexts (the same copy ops a CUDA context implements with cudaMemcpy). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "collectives/backend_mem.h"
#include "collectives/backend_staged.h"

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
  r->rc = sc_mem_comm_init(r->w, r->rank, 5000, &comm);
  if (r->rc || (r->rc = sc_kernels_cpu_create(&k, 1))) return NULL;
  const sc_coll_ops *inner_ops = comm.ops;
  if ((r->rc = sc_coll_staged_wrap(&comm, k, NULL))) return NULL;
  cr_assert_neq(comm.ops, inner_ops);
  float host[4];
  for (int i = 0; i < 4; i++) host[i] = (float)(10 * r->rank + i);
  void *send, *recv;
  k->ops->alloc(k, sizeof host, &send);
  k->ops->alloc(k, 8 * sizeof(float), &recv);
  k->ops->copy(k, send, host, sizeof host, SC_KCOPY_H2D);
  if ((r->rc = comm.ops->run(comm.self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, 4)))
    return NULL;
  k->ops->copy(k, r->gathered, recv, 8 * sizeof(float), SC_KCOPY_D2H);
  if ((r->rc = comm.ops->run(comm.self, SC_OP_ALL_REDUCE, SC_GROUP_PCP, SC_DT_F32, send, recv, 4)))
    return NULL;
  k->ops->copy(k, r->reduced, recv, 4 * sizeof(float), SC_KCOPY_D2H);
  if ((r->rc =
           comm.ops->run(comm.self, SC_OP_REDUCE_SCATTER, SC_GROUP_PCP, SC_DT_F32, send, recv, 4)))
    return NULL;
  k->ops->copy(k, r->scattered, recv, 2 * sizeof(float), SC_KCOPY_D2H);
  comm.ops->reset(comm.self, 2); /* reaches the inner backend (no effect on a clean world) */
  sc_coll_staged_unwrap(&comm);
  cr_assert_eq(comm.ops, inner_ops);
  k->ops->free(k, send);
  k->ops->free(k, recv);
  sc_kernels_destroy(k);
  return NULL;
}

Test(backend_staged, same_results_as_the_host_backend) {
  sc_plan_config c;
  sc_plan_config_default(&c);
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
