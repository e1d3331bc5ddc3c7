/* sc_test_decode.h - the recorded-steps scenario that the CPU test (tests/unit/
 * test_harness.c, through the recorder) and the GPU test (tests/gpu/test_gpu_graphs.c,
 * through CUDA graphs) both run: two one-rank harnesses, h[0] replaying recorded decode
 * steps and h[1] launching every op, fed the same steps. Header-only, no test framework.
 *
 * Three requests with prompts of 5, 40 and 70 tokens, then decode steps with greedy
 * tokens (taken from h[0]'s logits) fed back; the third request stops after step 90, so
 * the batch changes shape. Each request owns SC_TEST_DECODE_MAXB blocks (the harnesses
 * need SC_TEST_DECODE_BLOCKS of them), and the block table grows one block at a time, so
 * that it widens and the key list doubles on the way. */
#ifndef SC_TEST_DECODE_H
#define SC_TEST_DECODE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/harness.h"

#define SC_TEST_DECODE_REQS 3
#define SC_TEST_DECODE_MAXB 32
#define SC_TEST_DECODE_BLOCKS (SC_TEST_DECODE_REQS * SC_TEST_DECODE_MAXB)

/* Called before step `step` is run (0: the prefill step). */
typedef void (*sc_test_decode_hook)(int32_t step, void *arg);

/* Runs `steps` steps (the prefill step included) on both harnesses. Returns 0 when every
 * step gave both the same logits to the bit, 1 + the first step whose logits differ, or a
 * negative code when a step failed or blocks ran out (why says which). */
static inline int sc_test_decode_pair(sc_harness *h[2], int32_t vocab, int32_t block_size,
                                      int32_t steps, sc_test_decode_hook hook, void *arg,
                                      char *why, size_t why_len) {
  enum { R = SC_TEST_DECODE_REQS, MAXB = SC_TEST_DECODE_MAXB };
  static const int32_t len[R] = {5, 40, 70};
  int32_t done[R] = {0}, next[R] = {0};
  float *lg[2] = {malloc(sizeof(float) * R * (size_t)vocab),
                  malloc(sizeof(float) * R * (size_t)vocab)};
  int rc = lg[0] && lg[1] ? 0 : SC_ENOMEM;
  for (int32_t step = 0; step < steps && rc == 0; step++) {
    sc_batch_req br[R];
    int32_t tokens[128], bstart[R + 1], blocks[R * MAXB], n = 0, nt = 0;
    bstart[0] = 0;
    for (int32_t i = 0; i < R && rc == 0; i++) {
      if (i == 2 && step > 90) continue;
      const bool prefill = step == 0;
      const int32_t q = prefill ? len[i] : 1;
      br[n] = (sc_batch_req){.id = i, .computed = done[i], .scheduled = q, .prefill = prefill};
      for (int32_t t = 0; t < q; t++)
        tokens[nt++] = prefill ? (7 * t + 13 * i + 1) % vocab : next[i];
      const int32_t nb = (done[i] + q + block_size - 1) / block_size;
      if (nb > MAXB) {
        snprintf(why, why_len, "step %d: request %d needs %d blocks, has %d", step, i, nb, MAXB);
        rc = SC_ERANGE;
      }
      for (int32_t b = 0; b < nb && rc == 0; b++) blocks[bstart[n] + b] = i * MAXB + b;
      bstart[n + 1] = bstart[n] + nb;
      n++;
    }
    if (hook && rc == 0) hook(step, arg);
    for (int k = 0; k < 2 && rc == 0; k++) {
      const sc_harness_batch b = {.step = (uint64_t)step + 1, .num_reqs = n, .reqs = br,
                                  .tokens = tokens, .block_start = bstart, .blocks = blocks};
      sc_harness_result res = {.logits = lg[k]};
      sc_diag d = {0};
      if ((rc = sc_harness_step(h[k], &b, &res, &d)) != 0)
        snprintf(why, why_len, "step %d (%s): %.200s", step, k ? "launched" : "replayed", d.msg);
    }
    if (rc == 0 && memcmp(lg[0], lg[1], sizeof(float) * (size_t)n * (size_t)vocab) != 0) {
      snprintf(why, why_len, "step %d: the replayed step's logits differ from the launched one's",
               step);
      rc = 1 + step;
    }
    for (int32_t j = 0; j < n && rc == 0; j++) {
      const int32_t i = (int32_t)br[j].id;
      const float *l = lg[0] + (size_t)j * (size_t)vocab;
      int32_t best = 0;
      for (int32_t v = 1; v < vocab; v++) best = l[v] > l[best] ? v : best;
      done[i] += br[j].scheduled;
      next[i] = best;
    }
  }
  free(lg[0]);
  free(lg[1]);
  return rc;
}

#endif
