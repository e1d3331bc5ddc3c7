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
/* The same, given the greedy token (sc_sample_greedy's: the head has it from its top-2
 * pass, which takes a quarter of a draw's time). */
int32_t sc_sample_temperature_at(const float *logits, int32_t vocab, float temperature,
                                 uint64_t seed, int32_t index, int32_t best);
/* The same draw in double with libm's exp, one logit at a time (sampling.h's rule before
 * 2026-12-07): the statement the lanes are held to (they agree but for a draw that lands
 * within rounding of a boundary between two tokens), and `bench kernels`' baseline. */
int32_t sc_sample_temperature_ref(const float *logits, int32_t vocab, float temperature,
                                  uint64_t seed, int32_t index);

/* The largest logit minus the second largest: >= 0 (+0 when they are equal), NaN when
 * both are the same infinity or none is above -inf; 0 for vocab < 2. */
float sc_logits_top2_margin(const float *logits, int32_t vocab);

/* Both in one pass (what the head does for every sampled request of a step): *best as
 * sc_sample_greedy, *margin as sc_logits_top2_margin. */
void sc_logits_top2(const float *logits, int32_t vocab, int32_t *best, float *margin);
/* The same answer one element at a time: the first index of the largest non-NaN logit
 * (0 when none is above -inf), the top two values with repeats counted. The rules'
 * statement, and `bench kernels`' baseline for sc_logits_top2 (host.sample_top2). */
void sc_logits_top2_scalar(const float *logits, int32_t vocab, int32_t *best, float *margin);

#endif
