/* The recorder (kernels/kernels_recorder.h): recordings by keeping the calls, on the CPU
 * backend. The contract of kernels.h's record_begin: nothing runs while recording; a
 * replay reads the buffers as they are then; refused calls fail the recording. */
#include <string.h>

#include "kernels/kernels_recorder.h"
#include "test_kernels.h"

static sc_kernels *recorder(void) {
  sc_kernels *cpu = NULL, *k = NULL;
  cr_assert_eq(sc_kernels_cpu_create(&cpu, 1), 0);
  cr_assert_eq(sc_kernels_recorder_wrap(cpu, &k), 0);
  cr_assert_eq(sc_kernels_recorder_wrap(k, &(sc_kernels *){NULL}), SC_EINVAL,
               "a backend that records already is not wrapped");
  return k;
}

static float *buf(sc_kernels *k, const float *h, size_t n) {
  float *b = NULL;
  cr_assert_eq(k->ops->alloc(k, n * sizeof *b, (void **)&b), 0);
  cr_assert_eq(k->ops->copy(k, b, h, n * sizeof *b, SC_KCOPY_H2D), 0);
  return b;
}

Test(recorder, a_replay_reads_the_buffers_as_they_are_then) {
  sc_kernels *k = recorder();
  enum { N = 100 };
  float x0[N], x1[N], y0[N], got[N];
  for (int i = 0; i < N; i++) x0[i] = (float)i, x1[i] = 0.5f * (float)i, y0[i] = 1.0f;
  float *x = buf(k, x0, N), *y = buf(k, y0, N);
  sc_krecording *r = NULL;
  cr_assert_eq(k->ops->record_begin(k), 0);
  cr_assert_eq(k->ops->add(k, 1, N, x, N, y, N), 0);
  cr_assert_eq(k->ops->mark(k, 1), 0);
  cr_assert_eq(k->ops->record_end(k, &r), 0);
  cr_assert_not_null(r);
  cr_assert_eq(k->ops->copy(k, got, y, sizeof got, SC_KCOPY_D2H), 0);
  cr_assert_eq(memcmp(got, y0, sizeof got), 0, "the recording ran its op");
  cr_assert_eq(k->ops->replay(k, r), 0);
  cr_assert_eq(k->ops->copy(k, x, x1, sizeof x1, SC_KCOPY_H2D), 0);
  cr_assert_eq(k->ops->replay(k, r), 0);
  cr_assert_eq(k->ops->copy(k, got, y, sizeof got, SC_KCOPY_D2H), 0);
  for (int i = 0; i < N; i++) cr_assert_eq(got[i], (y0[i] + x0[i]) + x1[i], "element %d", i);
  k->ops->recording_free(k, r);
  k->ops->free(k, x);
  k->ops->free(k, y);
  sc_kernels_destroy(k);
}

Test(recorder, a_refused_call_fails_the_recording_and_nothing_runs) {
  sc_kernels *k = recorder();
  enum { N = 16 };
  float h[N], y0[N], got[N];
  for (int i = 0; i < N; i++) h[i] = 2.0f, y0[i] = 1.0f;
  float *x = buf(k, h, N), *y = buf(k, y0, N);
  sc_krecording *r = NULL;
  void *p = NULL;
  cr_assert_eq(k->ops->record_begin(k), 0);
  cr_assert_eq(k->ops->record_begin(k), SC_EINVAL, "one recording at a time");
  cr_assert_eq(k->ops->add(k, 1, N, x, N, y, N), 0);
  cr_assert_eq(k->ops->copy(k, x, h, sizeof h, SC_KCOPY_H2D), SC_EAGAIN);
  cr_assert_eq(k->ops->alloc(k, 64, &p), SC_EAGAIN);
  cr_assert_null(p);
  cr_assert_eq(k->ops->sync(k), SC_EAGAIN);
  cr_assert_eq(k->ops->record_end(k, &r), SC_EAGAIN);
  cr_assert_null(r);
  cr_assert_eq(k->ops->copy(k, got, y, sizeof got, SC_KCOPY_D2H), 0);
  cr_assert_eq(memcmp(got, y0, sizeof got), 0, "an op of the failed recording ran");
  cr_assert_eq(k->ops->replay(k, NULL), SC_EINVAL);
  cr_assert_eq(k->ops->add(k, 1, N, x, N, y, N), 0, "ops run again once it has ended");
  cr_assert_eq(k->ops->copy(k, got, y, sizeof got, SC_KCOPY_D2H), 0);
  cr_assert_eq(got[0], 3.0f);
  k->ops->free(k, x);
  k->ops->free(k, y);
  sc_kernels_destroy(k);
}
