/* gpu_test.h - a minimal harness for the GPU tests (plain C programs, no Criterion: its
 * per-test fork does not mix with an initialised CUDA context).
 *
 * A program runs its cases in order, prints one line per case and exits 0 when all
 * pass, 1 on any failure, and GPU_TEST_SKIP (77, ctest's SKIP_RETURN_CODE) when there is
 * no CUDA device. CHECK records a failure and continues; REQUIRE returns from the case.
 * Inputs come from a seeded splitmix64 whose seed is printed (and may be set with the
 * environment variable SC_GPU_SEED), so every run draws fresh inputs yet any failure can
 * be replayed. Single-threaded unless a case says otherwise. */
#ifndef SC_GPU_TEST_H
#define SC_GPU_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/common/sc_test_rng.h"

#define GPU_TEST_SKIP 77

extern int gt_failures;      /* failures of the whole program */
extern int gt_case_failures; /* failures of the current case */
extern uint64_t gt_seed;

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      gt_failures++;                                                       \
      gt_case_failures++;                                                  \
      fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
    }                                                                      \
  } while (0)

#define REQUIRE(cond, ...)        \
  do {                            \
    int gt_before_ = gt_failures; \
    CHECK(cond, __VA_ARGS__);     \
    if (gt_failures != gt_before_) return; \
  } while (0)

/* SC_GPU_CASES=substring runs only the cases whose name contains it (e.g. attention, to
 * check one kernel in a short device call). */
#define RUN_CASE(fn)                                                          \
  do {                                                                        \
    const char *only_ = getenv("SC_GPU_CASES");                               \
    if (only_ != NULL && only_[0] != 0 && strstr(#fn, only_) == NULL) break;  \
    gt_case_failures = 0;                                                     \
    const double t0_ = (double)clock() / CLOCKS_PER_SEC;                      \
    fn();                                                                     \
    printf("%-4s %-36s (%.2f s cpu)\n", gt_case_failures ? "FAIL" : "ok", #fn, \
           (double)clock() / CLOCKS_PER_SEC - t0_);                           \
    fflush(stdout);                                                           \
  } while (0)

#define GPU_TEST_GLOBALS \
  int gt_failures, gt_case_failures; \
  uint64_t gt_seed;

/* Seeds from SC_GPU_SEED or the clock; prints the seed. */
static inline void gt_init_seed(void) {
  const char *s = getenv("SC_GPU_SEED");
  gt_seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
  printf("seed %llu (replay with SC_GPU_SEED)\n", (unsigned long long)gt_seed);
}

/* The shared generator (tests/common/sc_test_rng.h) over the program's seed. */
static inline uint64_t gt_next(void) { return sc_test_rng_next(&gt_seed); }
static inline double gt_unif(double lo, double hi) { return sc_test_rng_unif(&gt_seed, lo, hi); }
static inline int64_t gt_int(int64_t lo, int64_t hi) { /* [lo, hi] */
  return sc_test_rng_int(&gt_seed, lo, hi);
}
static inline float *gt_rand_f32(size_t n, double lo, double hi) {
  float *v = malloc(n * sizeof *v + 1);
  if (v == NULL) abort();
  sc_test_rng_fill_f32(&gt_seed, v, n, lo, hi);
  return v;
}
static inline void gt_shuffle_i32(int32_t *v, int64_t n) { sc_test_rng_shuffle_i32(&gt_seed, v, n); }

/* ||a - b|| / ||b|| over n floats; NaN anywhere in a or b gives +inf. */
static inline double gt_rel_err(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(a[i]) || isnan(b[i])) return INFINITY;
    const double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
