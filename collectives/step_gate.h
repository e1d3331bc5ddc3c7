/* step_gate.h - where a rank's executor and its comm actor meet (DESIGN.md §3 step 5).
 *
 * The executor runs a step's collectives on its own thread, through the plan-checked
 * session; the comm actor, on another thread, owns the communicators: it creates them
 * (NCCL: after the unique ids were exchanged) and aborts them when the scheduler aborts
 * a step, so that no rank stays blocked in a collective whose peers have given up. The
 * two share nothing else. The gate holds what they share and the protocol around it:
 *
 *   executor: for every step sc_step_gate_wait_ready (it waits only while the
 *             communicators do not exist: at start-up and during a rebuild),
 *             sc_step_gate_enter ... run the step ...
 *             sc_step_gate_leave; with overlapped steps (docs/pipeline.md) the next
 *             step enters before the one before has left (leave comes once no step
 *             is queued): the gate then holds the step entered last, which is right
 *             when the one before's collectives ended before it entered (host
 *             collectives), or when an abort of the step entered last ends the one
 *             before's too (the IPC backend: an abort kills its comm, and the scheduler
 *             aborts both steps, the later one having taken its tokens from the earlier);
 *             several ranks on NCCL do not overlap;
 *   comm:     sc_step_gate_set_ready once the communicators exist (or failed),
 *             sc_step_gate_abort for every step_abort the scheduler sends;
 *             sc_step_gate_close before it replaces the communicators (a rebuild),
 *             then sc_step_gate_set_ready again.
 *
 * An abort must reach a step whenever it comes: before the step starts (it must not
 * start), while it runs (its collectives must fail at once), or after it ended (nothing
 * to do, and the next step must not suffer from it). See step_gate.c for why the two
 * atomics below are enough.
 *
 * Ownership: the gate borrows the comm, which outlives it. Threads: as listed above;
 * sc_step_gate_init and _destroy while neither side runs.
 */
#ifndef SC_STEP_GATE_H
#define SC_STEP_GATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "collectives/coll.h"

typedef struct sc_step_gate {
  sc_comm *comm;
  _Atomic int ready;         /* 0 pending (NCCL: ids not exchanged yet), 1 ready,
                                < 0 failed (an SC_E* code) */
  pthread_mutex_t mu;        /* with cv: sc_step_gate_wait_ready sleeps on `ready` */
  pthread_cond_t cv;
  _Atomic uint64_t executing; /* step the executor is inside, 0 when idle */
  _Atomic uint64_t aborted;   /* highest step the comm was told to abort */
} sc_step_gate;

/* ready: whether the communicators exist already (the host backend's do at once). */
void sc_step_gate_init(sc_step_gate *g, sc_comm *comm, bool ready);
void sc_step_gate_destroy(sc_step_gate *g);

/* ---- the comm actor's side ---- */

/* Publishes the communicators' state, 1 (ready) or a negative code, and wakes the
 * executor if it waits. */
void sc_step_gate_set_ready(sc_step_gate *g, int state);
/* Whether the communicators are still to be created. */
bool sc_step_gate_pending(sc_step_gate *g);
/* Closes the gate before the communicators are replaced: no step enters from now on (a
 * step that tries fails with SC_EABORTED without touching the comm; the next waits in
 * sc_step_gate_wait_ready), the step inside, if any, has its collectives aborted, and
 * it waits up to timeout_ms for that step to leave (its compute may still run: the
 * abort ends only its collectives). 0, or SC_ETIMEDOUT with a step still inside (the
 * gate stays closed). */
int sc_step_gate_close(sc_step_gate *g, int64_t timeout_ms);
/* Aborts step `step`: it will not start, or its collectives fail with SC_EABORTED if it
 * runs. Returns true when it was running (its collectives were aborted just now), for the
 * caller's log. */
bool sc_step_gate_abort(sc_step_gate *g, uint64_t step);

/* ---- the executor's side ---- */

/* Waits up to timeout_ms for the communicators; 0, their failure code, or SC_ETIMEDOUT. */
int sc_step_gate_wait_ready(sc_step_gate *g, int64_t timeout_ms);
/* Enters step (increasing from 1): starts the backend's new epoch (leftovers of an
 * aborted earlier step are dropped), then looks for an abort that came first. 0, or
 * SC_EABORTED when the step was aborted before it started or the gate was closed
 * meanwhile (leave it all the same). */
int sc_step_gate_enter(sc_step_gate *g, uint64_t step);
/* Leaves the step entered last: an abort from now on finds no step running. */
void sc_step_gate_leave(sc_step_gate *g);
/* At shutdown, with a step still running: aborts the collectives of every step, since a
 * step may wait for a peer that is gone and nothing will use them again. */
void sc_step_gate_abort_all(sc_step_gate *g);

#endif
