/* sampling.c - greedy and seeded temperature sampling (sampling.h). */
#include "model/sampling.h"

#include <math.h>

#include "base/hash.h"

int32_t sc_sample_greedy(const float *logits, int32_t vocab) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; i++)
    if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i]))) best = i;
  return best;
}

int32_t sc_sample_temperature(const float *logits, int32_t vocab, float temperature,
                              uint64_t seed, int32_t index) {
  if (!(temperature > 0.0f)) return sc_sample_greedy(logits, vocab);
  const int32_t best = sc_sample_greedy(logits, vocab);
  const double mx = logits[best], inv_t = 1.0 / temperature;
  double sum = 0;
  for (int32_t i = 0; i < vocab; i++)
    if (!isnan(logits[i])) sum += exp(((double)logits[i] - mx) * inv_t);
  const uint64_t h = sc_mix64(sc_mix64(seed) ^ (uint64_t)index);
  const double u = (double)(h >> 11) * (1.0 / 9007199254740992.0) * sum; /* [0, sum) */
  double acc = 0;
  for (int32_t i = 0; i < vocab; i++) {
    if (isnan(logits[i])) continue;
    acc += exp(((double)logits[i] - mx) * inv_t);
    if (u < acc) return i;
  }
  return best; /* rounding left u at the very end */
}

float sc_logits_top2_margin(const float *logits, int32_t vocab) {
  if (vocab < 2) return 0.0f;
  float a = -INFINITY, b = -INFINITY;
  for (int32_t i = 0; i < vocab; i++) {
    const float v = logits[i];
    if (v > a) {
      b = a;
      a = v;
    } else if (v > b) {
      b = v;
    }
  }
  return a - b;
}
