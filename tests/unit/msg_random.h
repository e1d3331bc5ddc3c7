/* msg_random.h - random valid message bodies for the messages tests and the fuzzer's
 * seed generator, driven by the schema's field descriptors (so every new type and field
 * is covered without touching the tests). */
#ifndef SC_TEST_MSG_RANDOM_H
#define SC_TEST_MSG_RANDOM_H

#include <stdint.h>

#include "messages/messages.h"

typedef struct msg_rng {
  uint64_t s;
} msg_rng;

uint64_t msg_rng_next(msg_rng *r);

/* Fills a zeroed body of `type` with random values that satisfy the declared ranges and
 * the type's checks under lim (vocabulary, prompt and generation limits; lengths within
 * max_str/max_bin/max_array). Returns 0 or SC_ENOMEM. */
int msg_random_body(msg_rng *r, int type, void *body, const sc_msg_limits *lim);

void msg_random_envelope(msg_rng *r, int type, sc_envelope *env);

#endif
