/* plan_wire.h - a plan crossing between processes: its wire form (sc_plan_wire in
 * plan_types.h, what the step_plan message carries) and the receiving rank's gate.
 *
 * The head ships the plan it built (sc_plan_wire_of, then messages/ copies it into a
 * step_plan message); every rank views the message it received as a wire plan and passes
 * it through sc_plan_from_wire before anything follows an index in it. Pure functions.
 * Any thread (one plan per thread at a time).
 */
#ifndef SC_PLAN_WIRE_H
#define SC_PLAN_WIRE_H

#include "plan/plan.h"

/* Fills w with a view of plan (borrowed arrays) and the scheduler's request ids
 * (req_ids: plan->num_reqs entries, or NULL for zeros). */
void sc_plan_wire_of(const sc_plan *plan, const int64_t *req_ids, sc_plan_wire *w);

/* Copies a received wire plan into plan (initialized with sc_plan_init; its arrays are
 * reused and grown), after checking everything sc_plan_fill_* and the per-rank views
 * rely on: a valid configuration, consistent counts and indices, decodes ordered first,
 * regions exactly for the prefills under DCP and inside their chunks, rows that fit
 * T_pad, and the fingerprint recomputed from the collectives. On failure returns
 * SC_EINVAL / SC_EPROTO / SC_ENOMEM with d naming the inconsistency and leaves plan
 * empty (num_reqs = 0). */
int sc_plan_from_wire(const sc_plan_wire *w, sc_plan *plan, sc_diag *d);

#endif
