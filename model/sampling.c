/* sampling.c - greedy and seeded temperature sampling (sampling.h). */
#include "model/sampling.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/hash.h"
#include "base/tempered_draw.h"

/* a - b, with a zero always +0: which of a -0 and a +0 is "first" depends on the order
 * values are met in, which the lanes change (NaN stays: the same infinity twice). */
static float margin_of(int32_t vocab, float a, float b) {
  const float m = a - b;
  return vocab < 2 || m == 0.0f ? 0.0f : m;
}

/* The rules one element at a time (sampling.h). The lane pass below falls back to it
 * when no logit is above -inf, where "first non-NaN" and "index 0" part ways. */
void sc_logits_top2_scalar(const float *logits, int32_t vocab, int32_t *best, float *margin) {
  int32_t bi = 0;
  for (int32_t i = 1; i < vocab; i++)
    if (logits[i] > logits[bi] || (isnan(logits[bi]) && !isnan(logits[i]))) bi = i;
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
  *best = bi;
  *margin = margin_of(vocab, a, b);
}

#define TOP2_LANES 16

/* Four-float vectors (GCC/Clang vector extensions: SSE on x86-64, NEON on arm64), and a
 * blend by a comparison's mask (-1 where true). A NaN compares false. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
static inline v4f blend(v4i m, v4f a, v4f b) { return (v4f)((m & (v4i)a) | (~m & (v4i)b)); }

/* One pass in TOP2_LANES independent lanes (lane j takes the indices i with i % LANES ==
 * j), four vectors of four: each lane keeps its largest value, its second (repeats
 * counted: an equal value lands there), and the first index of its largest (strict >,
 * indices rising). NaN compares false everywhere and so never enters. Merging the lanes
 * gives exactly the scalar rules' answer: the top two of all values are among the lanes'
 * top twos, and the first index of the largest is the least of the lanes' first indices
 * that reach it. This runs on the head after every step for every sampled request
 * (32768 logits a request for the synthetic models), where the two scalar loops took
 * ~60 us on the build VM (tests/unit/test_model.c checks it against them). */
void sc_logits_top2(const float *logits, int32_t vocab, int32_t *best, float *margin) {
  enum { NV = TOP2_LANES / 4 };
  v4f m1[NV], m2[NV];
  v4i at[NV], idx[NV];
  const v4f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  for (int k = 0; k < NV; k++) {
    m1[k] = m2[k] = ninf;
    at[k] = (v4i){-1, -1, -1, -1};
    idx[k] = (v4i){4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3};
  }
  const v4i step = {TOP2_LANES, TOP2_LANES, TOP2_LANES, TOP2_LANES};
  int32_t i = 0;
  for (; i + TOP2_LANES <= vocab; i += TOP2_LANES)
    for (int k = 0; k < NV; k++) {
      v4f v;
      memcpy(&v, logits + i + 4 * k, sizeof v);
      const v4i up = v > m1[k];
      const v4f lo = blend(up, m1[k], v); /* NaN: lo = NaN, which m2 never takes */
      at[k] = (up & idx[k]) | (~up & at[k]);
      m1[k] = blend(up, v, m1[k]);
      m2[k] = blend(lo > m2[k], lo, m2[k]);
      idx[k] += step;
    }
  float l1[TOP2_LANES], l2[TOP2_LANES];
  int32_t la[TOP2_LANES];
  memcpy(l1, m1, sizeof l1);
  memcpy(l2, m2, sizeof l2);
  memcpy(la, at, sizeof la);
  for (int j = 0; i < vocab; i++, j++) { /* the last partial block, same rules */
    const float v = logits[i];
    const bool up = v > l1[j];
    const float lo = up ? l1[j] : v;
    if (up) la[j] = i, l1[j] = v;
    if (lo > l2[j]) l2[j] = lo;
  }
  float a = -INFINITY, b = -INFINITY;
  int32_t bi = -1;
  for (int j = 0; j < TOP2_LANES; j++) {
    if (l1[j] > a) {
      b = a > l2[j] ? a : l2[j];
      a = l1[j];
      bi = la[j];
    } else {
      if (l1[j] == a && la[j] < bi) bi = la[j];
      if (l1[j] > b) b = l1[j]; /* (a lane's second is below its first) */
    }
  }
  if (bi < 0) { /* nothing above -inf: the reference's own tie-breaking among NaN/-inf */
    sc_logits_top2_scalar(logits, vocab, best, margin);
    return;
  }
  *best = bi;
  *margin = margin_of(vocab, a, b);
}

int32_t sc_sample_greedy(const float *logits, int32_t vocab) {
  int32_t best;
  float margin;
  sc_logits_top2(logits, vocab, &best, &margin);
  return best;
}

int32_t sc_sample_temperature_ref(const float *logits, int32_t vocab, float temperature,
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

int32_t sc_sample_temperature(const float *logits, int32_t vocab, float temperature,
                              uint64_t seed, int32_t index) {
  return sc_draw_tempered(logits, vocab, temperature, seed, index,
                          sc_sample_greedy(logits, vocab));
}

int32_t sc_sample_temperature_at(const float *logits, int32_t vocab, float temperature,
                                 uint64_t seed, int32_t index, int32_t best) {
  return sc_draw_tempered(logits, vocab, temperature, seed, index, best);
}

float sc_logits_top2_margin(const float *logits, int32_t vocab) {
  int32_t best;
  float margin;
  sc_logits_top2(logits, vocab, &best, &margin);
  return margin;
}
