/* tap_steps.h - rank 0's step results as a node's tap publishes them, for benches that
 * need what the pipeline measured per step (with "profile": the stage times and the
 * device's busy time, step_result.stage_ns and device_ns).
 *
 * A tap subscription takes a moment to reach the node (ZeroMQ's PUB/SUB), and a step
 * result of that moment is not seen: open the reader before the work it is to watch,
 * proving it up with earlier steps (sc_tap_steps_drain after a warm-up request).
 *
 * Ownership: the reader owns its socket and context; bodies it hands out are the
 * caller's (sc_msg_body_destroy). Threads: one thread at a time. */
#ifndef SC_TAP_STEPS_H
#define SC_TAP_STEPS_H

#include "messages/messages.h"

typedef struct sc_tap_steps sc_tap_steps;

/* Subscribes to "0/scheduler/step_result" on a plain (not CURVE) tap endpoint. 0,
 * SC_ENOMEM or SC_EIO. */
int sc_tap_steps_open(const char *endpoint, sc_tap_steps **out);
/* The next step result within ms: 0 with *r (the caller's), SC_ETIMEDOUT, or SC_EPROTO
 * for a record that does not decode as one. */
int sc_tap_steps_next(sc_tap_steps *t, int ms, sc_msg_step_result **r);
/* Drops what arrives until ms pass without a result; returns how many were dropped. */
int sc_tap_steps_drain(sc_tap_steps *t, int ms);
void sc_tap_steps_close(sc_tap_steps *t);

#endif
