/* sampling.h - choosing the next token from logits: greedy and seeded temperature
 * sampling, plus the top-2 margin the equivalence test uses to tell ties from errors.
 * Pure functions on host arrays; any thread.
 */
#ifndef SC_SAMPLING_H
#define SC_SAMPLING_H

#include <stdint.h>

/* Index of the largest logit; ties go to the lowest index; NaN never wins. */
int32_t sc_sample_greedy(const float *logits, int32_t vocab);

/* Draws from softmax(logits / temperature) with a stream fixed by (seed, output index)
 * alone, so every rank and every rerun draws the same token, and so does the same
 * request sent again, through any front (the OpenAI API's `seed`: the gateway's internal
 * request ids differ from run to run and must not enter). temperature <= 0 is greedy. */
int32_t sc_sample_temperature(const float *logits, int32_t vocab, float temperature,
                              uint64_t seed, int32_t index);

/* The largest logit minus the second largest (>= 0; 0 for vocab < 2). */
float sc_logits_top2_margin(const float *logits, int32_t vocab);

#endif
