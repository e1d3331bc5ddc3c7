/* test_step_gate.c - the executor/comm protocol of collectives/step_gate.h, against a
 * backend that records what reaches it. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "collectives/step_gate.h"

typedef struct fake_be {
  _Atomic uint64_t aborted; /* last epoch passed to abort, +1 (0: none) */
  _Atomic int aborts;
  uint64_t epoch;           /* last reset */
} fake_be;

static void fake_abort(void *self, uint64_t epoch) {
  fake_be *b = self;
  atomic_store(&b->aborted, epoch + 1);
  atomic_fetch_add(&b->aborts, 1);
}

static void fake_reset(void *self, uint64_t epoch) { ((fake_be *)self)->epoch = epoch; }

static const sc_coll_ops k_fake_ops = {.abort = fake_abort, .reset = fake_reset};

Test(step_gate, an_abort_before_the_step_keeps_it_from_starting) {
  fake_be be = {0};
  sc_comm comm = {.ops = &k_fake_ops, .self = &be};
  sc_step_gate g;
  sc_step_gate_init(&g, &comm, true);
  cr_assert_not(sc_step_gate_abort(&g, 3), "nothing runs: the backend is not called");
  cr_assert_eq(atomic_load(&be.aborts), 0);
  cr_assert_eq(sc_step_gate_enter(&g, 3), SC_EABORTED);
  cr_assert_eq(be.epoch, 3, "the epoch starts all the same");
  sc_step_gate_leave(&g);
  cr_assert_eq(sc_step_gate_enter(&g, 4), 0, "the next step is not touched");
  sc_step_gate_leave(&g);
  sc_step_gate_destroy(&g);
}

Test(step_gate, an_abort_while_the_step_runs_reaches_the_backend) {
  fake_be be = {0};
  sc_comm comm = {.ops = &k_fake_ops, .self = &be};
  sc_step_gate g;
  sc_step_gate_init(&g, &comm, true);
  cr_assert_eq(sc_step_gate_enter(&g, 5), 0);
  cr_assert_not(sc_step_gate_abort(&g, 4), "an abort of an earlier step misses this one");
  cr_assert_eq(atomic_load(&be.aborts), 0);
  cr_assert(sc_step_gate_abort(&g, 5));
  cr_assert_eq(atomic_load(&be.aborted), 5 + 1, "the backend hears the step's epoch");
  sc_step_gate_leave(&g);
  cr_assert_not(sc_step_gate_abort(&g, 5), "after the step, nothing runs");
  cr_assert_eq(atomic_load(&be.aborts), 1);
  cr_assert_eq(sc_step_gate_enter(&g, 6), 0);
  sc_step_gate_abort_all(&g);
  cr_assert_eq(atomic_load(&be.aborted), 0 + 1, "at shutdown: every step (epoch 0)");
  sc_step_gate_leave(&g);
  sc_step_gate_destroy(&g);
}

/* The race itself: whenever the abort comes relative to enter, the step either does not
 * start or has its collectives aborted (never neither). */
typedef struct race {
  sc_step_gate *g;
  uint64_t step;
  _Atomic int go;
} race;

static void *abort_side(void *arg) {
  race *r = arg;
  while (!atomic_load(&r->go)) {
  }
  sc_step_gate_abort(r->g, r->step);
  return NULL;
}

Test(step_gate, an_abort_racing_the_enter_is_never_lost) {
  fake_be be = {0};
  sc_comm comm = {.ops = &k_fake_ops, .self = &be};
  sc_step_gate g;
  sc_step_gate_init(&g, &comm, true);
  for (uint64_t step = 1; step <= 2000; step++) {
    race r = {.g = &g, .step = step};
    atomic_store(&be.aborted, 0);
    pthread_t t;
    pthread_create(&t, NULL, abort_side, &r);
    atomic_store(&r.go, 1);
    const int rc = sc_step_gate_enter(&g, step);
    pthread_join(t, NULL);
    cr_assert(rc == SC_EABORTED || atomic_load(&be.aborted) == step + 1,
              "step %llu: the abort was lost", (unsigned long long)step);
    sc_step_gate_leave(&g);
  }
  sc_step_gate_destroy(&g);
}

static void *open_later(void *arg) {
  usleep(20000);
  sc_step_gate_set_ready(arg, 1);
  return NULL;
}

Test(step_gate, the_executor_waits_for_the_communicators) {
  sc_comm comm = {.ops = &k_fake_ops};
  sc_step_gate g;
  sc_step_gate_init(&g, &comm, false);
  cr_assert(sc_step_gate_pending(&g));
  cr_assert_eq(sc_step_gate_wait_ready(&g, 10), SC_ETIMEDOUT);
  pthread_t t;
  pthread_create(&t, NULL, open_later, &g);
  cr_assert_eq(sc_step_gate_wait_ready(&g, 5000), 0);
  pthread_join(t, NULL);
  cr_assert_not(sc_step_gate_pending(&g));
  sc_step_gate_set_ready(&g, SC_ESYS);
  cr_assert_eq(sc_step_gate_wait_ready(&g, 10), SC_ESYS, "a failure is the answer");
  sc_step_gate_destroy(&g);
}

/* Closing for a rebuild: the close waits for the step inside to leave, and a step that
 * enters a closed gate neither runs nor touches the comm (no reset reaches it). */
static void *leave_later(void *arg) {
  usleep(20000);
  sc_step_gate_leave(arg);
  return NULL;
}

Test(step_gate, a_close_waits_for_the_step_inside_and_keeps_the_next_out) {
  fake_be be = {0};
  sc_comm comm = {.ops = &k_fake_ops, .self = &be};
  sc_step_gate g;
  sc_step_gate_init(&g, &comm, true);
  cr_assert_eq(sc_step_gate_enter(&g, 7), 0);
  cr_assert_eq(sc_step_gate_close(&g, 1), SC_ETIMEDOUT, "step 7 is still inside");
  cr_assert_eq(atomic_load(&be.aborted), 7 + 1, "the close aborted the step inside");
  pthread_t t;
  pthread_create(&t, NULL, leave_later, &g);
  cr_assert_eq(sc_step_gate_close(&g, 5000), 0, "step 7 left");
  pthread_join(t, NULL);
  cr_assert(sc_step_gate_pending(&g));
  cr_assert_eq(sc_step_gate_wait_ready(&g, 10), SC_ETIMEDOUT, "a closed gate holds the next step");
  cr_assert_eq(sc_step_gate_enter(&g, 8), SC_EABORTED);
  cr_assert_eq(be.epoch, 7, "the closed gate's step did not reach the comm");
  sc_step_gate_leave(&g);
  sc_step_gate_set_ready(&g, 1); /* the new communicators */
  cr_assert_eq(sc_step_gate_enter(&g, 9), 0);
  cr_assert_eq(be.epoch, 9);
  sc_step_gate_leave(&g);
  sc_step_gate_destroy(&g);
}

/* The race of close and enter: whatever the order, either the close saw the step inside
 * (and so waited for its leave) or the step saw the gate closed (and did not run). */
typedef struct close_race {
  sc_step_gate *g;
  _Atomic int go;
  int rc;
  bool saw_inside;
} close_race;

static void *close_side(void *arg) {
  close_race *r = arg;
  while (!atomic_load(&r->go)) {
  }
  r->rc = sc_step_gate_close(r->g, 0);
  r->saw_inside = r->rc == SC_ETIMEDOUT;
  return NULL;
}

Test(step_gate, a_close_racing_the_enter_never_misses_the_step) {
  fake_be be = {0};
  sc_comm comm = {.ops = &k_fake_ops, .self = &be};
  sc_step_gate g;
  sc_step_gate_init(&g, &comm, true);
  for (uint64_t step = 1; step <= 2000; step++) {
    close_race r = {.g = &g};
    pthread_t t;
    pthread_create(&t, NULL, close_side, &r);
    atomic_store(&r.go, 1);
    const int rc = sc_step_gate_enter(&g, step);
    pthread_join(t, NULL);
    cr_assert(rc == SC_EABORTED || r.saw_inside,
              "step %llu ran while the close thought the gate empty", (unsigned long long)step);
    sc_step_gate_leave(&g);
    sc_step_gate_set_ready(&g, 1);
  }
  sc_step_gate_destroy(&g);
}
