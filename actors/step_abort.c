/* step_abort.c - sending a step_abort (step_abort.h). */
#include "actors/step_abort.h"

#include <stdlib.h>
#include <string.h>

int sc_step_abort_send(sc_ctx *c, sc_actor_id dst, uint64_t step, int32_t rank, int code,
                       const char *message, const sc_coll_failure *f) {
  sc_msg_step_abort *a = sc_msg_body_new(SC_MSG_STEP_ABORT);
  if (a == NULL || (a->message = strdup(message)) == NULL) {
    sc_msg_body_destroy(SC_MSG_STEP_ABORT, a);
    return SC_ENOMEM;
  }
  a->reason = code;
  a->rank = rank;
  a->step = step;
  a->seq = -1;
  if (f && f->step == step && f->code != 0) {
    a->seq = f->seq;
    a->expected = f->expected;
    a->actual = f->actual;
  }
  const int rc = sc_send_step(c, dst, SC_MSG_STEP_ABORT, step, a);
  if (rc) sc_msg_body_destroy(SC_MSG_STEP_ABORT, a);
  return rc;
}
