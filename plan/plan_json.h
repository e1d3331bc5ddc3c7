/* plan_json.h - the JSON contract of `sparsecp plan` (DESIGN.md §7): parsing the input
 * {"config": {...}, "requests": [...]} and rendering a plan as one JSON object.
 * Pure: text in, text out; the caller does the I/O. Any thread.
 */
#ifndef SC_PLAN_JSON_H
#define SC_PLAN_JSON_H

#include "base/jsonw.h"
#include "plan/plan.h"

/* Parses a planner input document. Missing config keys keep the values *cfg holds on
 * entry (the caller's defaults: DESIGN.md §7 gives the layout of sc_plan_config_default
 * and the embedded model's dimensions); unknown keys, wrong types and out-of-range values are
 * errors (SC_EINVAL with a message naming the key). The configuration is validated.
 * On success *reqs is a malloc'd array of *num_reqs entries owned by the caller. */
int sc_plan_input_parse(const char *text, size_t len, sc_plan_config *cfg,
                        sc_batch_req **reqs, int32_t *num_reqs, sc_diag *d);

/* Applies the keys of a JSON object (a jansson json_t *) onto cfg; used for the "config"
 * member here and by other files that embed a parallel configuration. */
int sc_plan_config_apply_json(sc_plan_config *cfg, const void *json_object, sc_diag *d);

/* Renders the plan with exactly the keys of the contract. Returns 0 or SC_ENOMEM. */
int sc_plan_render_json(const sc_plan *plan, sc_jsonw *w);

/* "%016llx" of the fingerprint into buf[17]. */
void sc_plan_fingerprint_hex(uint64_t fp, char buf[17]);

#endif
