/* plan_check.h - an independent checker of every property SPEC.md §3-6 promises about a
 * step plan, for property tests over random batches. It recomputes what it needs from
 * the batch with straightforward per-token loops (no shared code with the planner's
 * fast paths beyond the DCP ownership formulas of dcp.h). */
#ifndef SC_TEST_PLAN_CHECK_H
#define SC_TEST_PLAN_CHECK_H

#include <stddef.h>

#include "plan/plan.h"

/* Returns 0 if every property holds, else -1 with a description in why. */
int sc_check_plan(const sc_plan *plan, const sc_batch_req *reqs, int32_t n, char *why,
                  size_t why_len);

#endif
