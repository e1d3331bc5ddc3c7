/* sc_test_rng.h - the seeded generator shared by the tests (kernel tests, GPU tests,
 * random messages): splitmix64 over an explicit uint64_t state, header-only, plain C11
 * (no allocation, no test framework), so that any test, fuzzer or nvcc-built program can
 * include it as "tests/common/sc_test_rng.h".
 *
 * The sequences are part of the tests' contract: a seed printed for replay (SC_GPU_SEED,
 * the kernel tests' seeds) must draw the same inputs after any change here. */
#ifndef SC_TEST_RNG_H
#define SC_TEST_RNG_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64: advances *s and returns the next 64 bits. */
static inline uint64_t sc_test_rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A double in [lo, hi) from the top 53 bits of one draw. */
static inline double sc_test_rng_unif(uint64_t *s, double lo, double hi) {
  return lo + (hi - lo) * (double)(sc_test_rng_next(s) >> 11) * 0x1.0p-53;
}

/* An integer in [lo, hi] (inclusive; modulo, so very slightly biased). One draw. */
static inline int64_t sc_test_rng_int(uint64_t *s, int64_t lo, int64_t hi) {
  return lo + (int64_t)(sc_test_rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* v[0..n) = uniform floats in [lo, hi), one draw each, in index order. */
static inline void sc_test_rng_fill_f32(uint64_t *s, float *v, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; i++) v[i] = (float)sc_test_rng_unif(s, lo, hi);
}

/* Fisher-Yates shuffle of v[0..n), from the last element down. */
static inline void sc_test_rng_shuffle_i32(uint64_t *s, int32_t *v, int64_t n) {
  for (int64_t i = n - 1; i > 0; i--) {
    const int64_t j = sc_test_rng_int(s, 0, i);
    const int32_t t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

#endif
