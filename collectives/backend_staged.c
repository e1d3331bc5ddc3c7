#include "collectives/backend_staged.h"

#include <stdlib.h>

#include "base/grow.h"

/* Only the inner backend (ops, self) moves here: everything else in the sc_comm (groups,
 * session bookkeeping, stats) stays where it is and goes on being written while wrapped. */
typedef struct staged {
  const sc_coll_ops *inner_ops;
  void *inner_self;
  const sc_comm *comm; /* for the group sizes */
  sc_kernels *k;
  void *send_h, *recv_h;
  size_t cap_send, cap_recv;
} staged;

static int st_run(void *self, int32_t seq, sc_coll_op op, sc_group g, sc_dtype dt,
                  const void *send, void *recv, size_t count, sc_diag *d) {
  staged *s = self;
  const size_t esz = sc_dtype_size(dt), G = (size_t)s->comm->group_size[g];
  const size_t in = count * esz;
  const size_t out = op == SC_OP_ALL_GATHER ? G * in : op == SC_OP_REDUCE_SCATTER ? in / G : in;
  int rc;
  if ((rc = sc_grow(&s->send_h, &s->cap_send, in + 1)) ||
      (rc = sc_grow(&s->recv_h, &s->cap_recv, out + 1)))
    return rc;
  if (in && (rc = s->k->ops->copy(s->k, s->send_h, send, in, SC_KCOPY_D2H))) return rc;
  rc = s->inner_ops->run(s->inner_self, seq, op, g, dt, s->send_h, s->recv_h, count, d);
  if (rc == 0 && out) rc = s->k->ops->copy(s->k, recv, s->recv_h, out, SC_KCOPY_H2D);
  return rc;
}

static void st_abort(void *self, uint64_t epoch) {
  staged *s = self;
  if (s->inner_ops->abort) s->inner_ops->abort(s->inner_self, epoch);
}
static void st_reset(void *self, uint64_t epoch) {
  staged *s = self;
  if (s->inner_ops->reset) s->inner_ops->reset(s->inner_self, epoch);
}
static void st_expect(void *self, uint64_t epoch, const sc_coll *plan, int32_t num) {
  staged *s = self;
  if (s->inner_ops->expect) s->inner_ops->expect(s->inner_self, epoch, plan, num);
}

/* (no finish: run completes each collective, and the session's wall time includes the
 * staging copies, which is what a staged collective costs) */
static const sc_coll_ops k_staged_ops = {.run = st_run, .abort = st_abort, .reset = st_reset,
                                         .expect = st_expect};

int sc_staged_comm_create(sc_comm *comm, sc_kernels *k, sc_diag *d) {
  staged *s = calloc(1, sizeof *s);
  if (s == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  s->inner_ops = comm->ops;
  s->inner_self = comm->self;
  s->comm = comm;
  s->k = k;
  comm->ops = &k_staged_ops;
  comm->self = s;
  return 0;
}

void sc_staged_comm_destroy(sc_comm *comm) {
  if (comm->ops != &k_staged_ops) return;
  staged *s = comm->self;
  comm->ops = s->inner_ops;
  comm->self = s->inner_self;
  free(s->send_h);
  free(s->recv_h);
  free(s);
}
