/* step_gate.c - the executor/comm protocol of step_gate.h.
 *
 * Why two sequentially consistent atomics suffice for aborts. The comm records the abort
 * (raises `aborted` to the step) and then reads `executing`; the executor publishes the
 * step it enters (`executing`) and then reads `aborted`. All four accesses are seq_cst,
 * so they fall in one total order: whichever of the two writes comes first, the other
 * side's later read sees it. So at least one side notices:
 *   - the executor reads aborted >= step: the step does not start (SC_EABORTED);
 *   - the comm reads executing == step: it aborts the backend's collectives of that step.
 * Both may happen; neither hurts. An abort that reaches the backend before the executor's
 * reset for the step still holds after it: backends keep the highest aborted epoch and
 * compare it with the running one (coll.h, sc_coll_ops.abort), they do not clear it. An
 * abort of a step that already ended finds executing != step and only raises `aborted`,
 * which no later step is below. `aborted` only grows (a late abort of an earlier step
 * never lowers it), so it needs a compare-and-swap, not a store.
 *
 * `ready` is published under the mutex so that a waiter cannot miss the broadcast between
 * testing it and sleeping; its readers outside the mutex only ask whether it changed.
 *
 * Closing uses the same pairing: close stores ready = 0 and then reads `executing`; enter
 * stores `executing` and then reads `ready`. Either close sees the step and waits for it
 * to leave, or enter sees the gate closed and returns before touching the comm (its reset
 * included), so the comm is never replaced under a running step. */
#include "collectives/step_gate.h"

#include <time.h>

#include "base/clock.h"

void sc_step_gate_init(sc_step_gate *g, sc_comm *comm, bool ready) {
  g->comm = comm;
  atomic_init(&g->ready, ready ? 1 : 0);
  atomic_init(&g->executing, 0);
  atomic_init(&g->aborted, 0);
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
}

void sc_step_gate_destroy(sc_step_gate *g) {
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
}

void sc_step_gate_set_ready(sc_step_gate *g, int state) {
  pthread_mutex_lock(&g->mu);
  atomic_store(&g->ready, state);
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

bool sc_step_gate_pending(sc_step_gate *g) { return atomic_load(&g->ready) == 0; }

bool sc_step_gate_abort(sc_step_gate *g, uint64_t step) {
  uint64_t prev = atomic_load(&g->aborted);
  while (prev < step && !atomic_compare_exchange_weak(&g->aborted, &prev, step)) {
  }
  if (atomic_load(&g->executing) != step || g->comm->ops == NULL || g->comm->ops->abort == NULL)
    return false;
  g->comm->ops->abort(g->comm->self, step);
  return true;
}

int sc_step_gate_wait_ready(sc_step_gate *g, int64_t timeout_ms) {
  if (atomic_load(&g->ready) == 1) return 0;
  const struct timespec until = sc_time_after_ms(CLOCK_REALTIME, timeout_ms);
  pthread_mutex_lock(&g->mu);
  while (atomic_load(&g->ready) == 0)
    if (pthread_cond_timedwait(&g->cv, &g->mu, &until) != 0) break;
  const int st = atomic_load(&g->ready);
  pthread_mutex_unlock(&g->mu);
  return st == 1 ? 0 : st < 0 ? st : SC_ETIMEDOUT;
}

int sc_step_gate_close(sc_step_gate *g, int64_t timeout_ms) {
  pthread_mutex_lock(&g->mu);
  atomic_store(&g->ready, 0);
  pthread_mutex_unlock(&g->mu);
  /* the step inside (an aborted one: the scheduler rebuilds only after aborting) is
   * aborted again here, so that a step_abort lost on its way cannot hold the rebuild
   * (a step that is just being refused by enter may be hit too: harmless) */
  const uint64_t inside = atomic_load(&g->executing);
  if (inside != 0) (void)sc_step_gate_abort(g, inside);
  const uint64_t until = sc_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
  while (atomic_load(&g->executing) != 0) {
    if (sc_now_ns() > until) return SC_ETIMEDOUT;
    const struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return 0;
}

int sc_step_gate_enter(sc_step_gate *g, uint64_t step) {
  atomic_store(&g->executing, step);
  if (atomic_load(&g->ready) != 1) return SC_EABORTED; /* closed: the comm is being replaced */
  if (g->comm->ops->reset) g->comm->ops->reset(g->comm->self, step);
  return atomic_load(&g->aborted) >= step ? SC_EABORTED : 0;
}

void sc_step_gate_leave(sc_step_gate *g) { atomic_store(&g->executing, 0); }

void sc_step_gate_abort_all(sc_step_gate *g) {
  if (g->comm->ops && g->comm->ops->abort) g->comm->ops->abort(g->comm->self, 0);
}
