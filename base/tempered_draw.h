/* tempered_draw.h - a token drawn from softmax(logits / t) given the row's greedy token,
 * in vector lanes: model/sampling.h's sc_sample_temperature, here so that the CPU
 * kernels' draw_rows computes the same token (a kernel may not call the model layer),
 * and kernels/cuda/cuda_rows.cu's k_draw_rows repeats its arithmetic operation for
 * operation (no contraction, the same order), so host and device draw the same token.
 * Header-only (static inline); any thread. */
#ifndef SC_TEMPERED_DRAW_H
#define SC_TEMPERED_DRAW_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/hash.h"

typedef float sc_draw_v4f __attribute__((vector_size(16)));
typedef int32_t sc_draw_v4i __attribute__((vector_size(16)));
static inline sc_draw_v4f sc_draw_blend(sc_draw_v4i m, sc_draw_v4f a, sc_draw_v4f b) {
  return (sc_draw_v4f)((m & (sc_draw_v4i)a) | (~m & (sc_draw_v4i)b));
}

/*
 * The head draws every tempered request's token after every step: two passes of libm's
 * double exp over the vocabulary took 1.3 ms a request at DeepSeek-V3.2's 129280 logits
 * on the build VM (16 such requests: 21 ms of host a step, against a GPU decode step of
 * a fraction of a millisecond). Here a logit's weight is 2^y, y = (l - max) log2(e) / t,
 * from a fixed degree-6 polynomial of y's fraction in float (relative error 2.4e-7 at most)
 * times 2^round(y) set in the exponent's bits; 0 for a NaN and below 2^-126. No libm,
 * and fp-contract is off (ISO C): the weights depend on neither a library's exp nor the
 * compiler's contraction (IEEE float operations in a fixed order). The sum is taken
 * over blocks of SC_DRAW_BLOCK logits, each block in four float lanes and then in double
 * in a fixed order, so the draw depends on (logits, t, seed, index) alone. */

#define SC_DRAW_BLOCK 256
#define SC_DRAW_KEPT 1024 /* block sums on the stack: 8 KB */

/* The weights of four logits (see above): y <= 0, since l <= max. */
static inline sc_draw_v4f sc_draw_weights(sc_draw_v4f l, float mx, float k) {
  const sc_draw_v4f zero = {0.0f, 0.0f, 0.0f, 0.0f};
  sc_draw_v4f y = (l - mx) * k;
  const sc_draw_v4i ok = y >= -126.0f; /* (false for NaN and -inf) */
  y = sc_draw_blend(ok, y, zero);
  const sc_draw_v4i m = __builtin_convertvector(0.5f - y, sc_draw_v4i); /* round(-y), 0..126 */
  const sc_draw_v4f f = y + __builtin_convertvector(m, sc_draw_v4f);   /* [-0.5, 0.5] */
  /* 2^f: Taylor's coefficients of e^(f ln 2) to the sixth power */
  sc_draw_v4f p = f * 1.5403530393381609e-4f + 1.3333558146428443e-3f;
  p = p * f + 9.6181291076284772e-3f;
  p = p * f + 5.5504108664821580e-2f;
  p = p * f + 2.4022650695910071e-1f;
  p = p * f + 6.9314718055994531e-1f;
  p = p * f + 1.0f;
  const sc_draw_v4i bits = (127 - m) << 23; /* 2^-m, m <= 126: a normal number */
  sc_draw_v4f scale;
  memcpy(&scale, &bits, sizeof scale);
  return sc_draw_blend(ok, p * scale, zero);
}

/* Four logits from i on (NaN past the end: weight 0). */
static inline sc_draw_v4f sc_draw_load4(const float *logits, int32_t vocab, int32_t i) {
  sc_draw_v4f v;
  if (i + 4 <= vocab) {
    memcpy(&v, logits + i, sizeof v);
  } else {
    float t[4] = {NAN, NAN, NAN, NAN};
    for (int j = 0; i + j < vocab; j++) t[j] = logits[i + j];
    memcpy(&v, t, sizeof v);
  }
  return v;
}

/* Where block b ends. */
static inline int32_t sc_draw_block_end(int32_t vocab, int32_t b) {
  return (b + 1) * SC_DRAW_BLOCK < vocab ? (b + 1) * SC_DRAW_BLOCK : vocab;
}

/* The sum of block b's weights (its four lanes, then in double in lane order). */
static inline double sc_draw_block(const float *logits, int32_t vocab, int32_t b, float mx,
                                   float k) {
  const int32_t end = sc_draw_block_end(vocab, b);
  sc_draw_v4f acc = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int32_t i = b * SC_DRAW_BLOCK; i < end; i += 4)
    acc += sc_draw_weights(sc_draw_load4(logits, vocab, i), mx, k);
  return (((double)acc[0] + (double)acc[1]) + (double)acc[2]) + (double)acc[3];
}

static inline int32_t sc_draw_tempered(const float *logits, int32_t vocab, float temperature,
                                        uint64_t seed, int32_t index, int32_t best) {
  if (!(temperature > 0.0f)) return best;
  const float mx = logits[best];
  if (!isfinite(mx)) return best; /* (no number, or an infinity: the reference's answer) */
  const float k = (float)(1.4426950408889634 / (double)temperature);
  const int32_t nb = (vocab + SC_DRAW_BLOCK - 1) / SC_DRAW_BLOCK;
  /* the block sums, kept where they fit (a vocabulary of up to 262144), else computed
   * again, alike */
  double kept[SC_DRAW_KEPT];
  double sum = 0;
  for (int32_t b = 0; b < nb; b++) {
    const double w = sc_draw_block(logits, vocab, b, mx, k);
    if (b < SC_DRAW_KEPT) kept[b] = w;
    sum += w;
  }
  const uint64_t h = sc_mix64(sc_mix64(seed) ^ (uint64_t)index);
  const double u = (double)(h >> 11) * (1.0 / 9007199254740992.0) * sum; /* [0, sum) */
  /* the block the draw lands in, then its logits one by one */
  double acc = 0;
  int32_t b = 0;
  for (; b < nb; b++) {
    const double w = b < SC_DRAW_KEPT ? kept[b] : sc_draw_block(logits, vocab, b, mx, k);
    if (u < acc + w) break;
    acc += w;
  }
  if (b == nb) return best; /* rounding left u at the very end */
  const int32_t end = sc_draw_block_end(vocab, b);
  int32_t last = -1;
  for (int32_t i = b * SC_DRAW_BLOCK; i < end; i += 4) {
    float w[4];
    const sc_draw_v4f wv = sc_draw_weights(sc_draw_load4(logits, vocab, i), mx, k);
    memcpy(w, &wv, sizeof w);
    for (int j = 0; j < 4 && i + j < end; j++) {
      if (w[j] == 0.0f) continue;
      acc += (double)w[j];
      last = i + j;
      if (u < acc) return last;
    }
  }
  /* the block's sum in lanes came out above its logits' one by one */
  return last >= 0 ? last : best;
}

#endif
