/* step_abort.h - a step_abort message, as every pipeline actor that fails a step sends
 * it: to the scheduler (a rank reporting its failure) or from the scheduler to every
 * comm actor (docs/pipeline.md, "Failure").
 */
#ifndef SC_STEP_ABORT_H
#define SC_STEP_ABORT_H

#include <stdint.h>

#include "actors/runtime/sc_actor.h"
#include "collectives/coll.h"

/* Sends step_abort {code, rank, step, message} to dst from inside an actor; with a
 * failure record of that step (the comm's last_failure; may be NULL) also its sequence
 * number and the expected and requested collectives. Returns 0 or the send's code. */
int sc_step_abort_send(sc_ctx *c, sc_actor_id dst, uint64_t step, int32_t rank, int code,
                       const char *message, const sc_coll_failure *failure);

#endif
