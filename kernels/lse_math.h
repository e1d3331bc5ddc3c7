/* lse_math.h - the LSE merge rule of SPEC.md §7, written once for every backend: the CPU
 * backend compiles it as C, the CUDA backend as device code (SC_HOSTDEV). A merge
 * over shards r of a row i reads lse[r * n_rows + i]:
 *   NaN and +inf count as -inf; m = max over shards (0 if all are -inf);
 *   L = m + ln Σ exp(lse_r - m) (-inf when every shard is -inf);
 *   shard r's weight is exp(lse_r - L), exactly 0 for a -inf shard.
 * Pure inline functions; any thread. */
#ifndef SC_LSE_MATH_H
#define SC_LSE_MATH_H

#include <math.h>
#include <stdint.h>

#include "base/hostdev.h"


SC_HOSTDEV float sc_lse_clean(float l) { return l < INFINITY ? l : -INFINITY; }

SC_HOSTDEV double sc_lse_merged(const float *lse, int32_t n_shards, int64_t n_rows,
                                  int64_t i) {
  float m = -INFINITY;
  for (int32_t r = 0; r < n_shards; r++) {
    const float l = sc_lse_clean(lse[r * n_rows + i]);
    m = l > m ? l : m;
  }
  if (m == -INFINITY) m = 0.0f; /* all empty: ln Σ 0 = -inf below */
  double sum = 0;
  for (int32_t r = 0; r < n_shards; r++) {
    const float l = sc_lse_clean(lse[r * n_rows + i]);
    if (l != -INFINITY) sum += exp((double)l - m);
  }
  return sum > 0 ? (double)m + log(sum) : -INFINITY;
}

SC_HOSTDEV float sc_lse_weight(float lse_r, double big_l) {
  const float l = sc_lse_clean(lse_r);
  return l == -INFINITY ? 0.0f : (float)exp((double)l - big_l);
}

#endif
