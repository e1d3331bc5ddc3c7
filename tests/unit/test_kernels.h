/* test_kernels.h - helpers shared by the kernel tests (test_kernels_*.c): a context,
 * buffers moved only through the API's copy (so the tests would run unchanged against a
 * device backend), and a seeded generator. */
#ifndef SC_TEST_KERNELS_H
#define SC_TEST_KERNELS_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"
#include "kernels/kernels.h"
#include "tests/common/sc_test_rng.h"

static inline sc_kernels *tk_ctx(int threads) {
  sc_kernels *k = NULL;
  cr_assert_eq(sc_kernels_cpu_create(&k, threads), 0);
  return k;
}

/* A buffer holding a copy of `bytes` of host memory. */
static inline void *tk_up(sc_kernels *k, const void *host, size_t bytes) {
  void *b = NULL;
  cr_assert_eq(k->ops->alloc(k, bytes, &b), 0);
  if (bytes > 0) cr_assert_eq(k->ops->copy(k, b, host, bytes, SC_KCOPY_H2D), 0);
  return b;
}

/* A zeroed buffer. */
static inline void *tk_zeros(sc_kernels *k, size_t bytes) {
  void *b = NULL;
  cr_assert_eq(k->ops->alloc(k, bytes, &b), 0);
  cr_assert_eq(k->ops->memset(k, b, 0, bytes), 0);
  return b;
}

static inline void tk_down(sc_kernels *k, void *host, const void *buf, size_t bytes) {
  cr_assert_eq(k->ops->copy(k, host, buf, bytes, SC_KCOPY_D2H), 0);
  cr_assert_eq(k->ops->sync(k), 0);
}

/* The shared seeded generator (tests/common/sc_test_rng.h) under the kernel tests' names. */
static inline uint64_t tk_next(uint64_t *s) { return sc_test_rng_next(s); }
static inline double tk_unif(uint64_t *s, double lo, double hi) { return sc_test_rng_unif(s, lo, hi); }
static inline int64_t tk_int(uint64_t *s, int64_t lo, int64_t hi) { /* [lo, hi] */
  return sc_test_rng_int(s, lo, hi);
}
static inline float *tk_rand_f32(uint64_t *s, size_t n, double lo, double hi) {
  float *v = malloc(n * sizeof *v);
  cr_assert_not_null(v);
  sc_test_rng_fill_f32(s, v, n, lo, hi);
  return v;
}
static inline void tk_shuffle_i32(uint64_t *s, int32_t *v, int64_t n) { sc_test_rng_shuffle_i32(s, v, n); }

#endif
