/* test_gpu_graphs.c - recordings (kernels.h record_begin: CUDA graphs) and the forward
 * pass's recorded decode steps (model/forward.c step_recorded).
 *
 * The kernel cases pin the contract: a replay reads its buffers as they are when it
 * runs, a refused op fails the recording without running anything, a recording goes
 * stale when scratch moves, and marks recorded in it time the replay. The forward case
 * runs the same requests through two one-rank CUDA harnesses, one replaying recorded
 * steps and one launching every op, and requires the same logits to the bit at every
 * step while the context grows past block and key-list boundaries (what the recordings
 * must not hold on to). */
#include <stdbool.h>

#include "kernels/cuda/kernels_cuda.h"
#include "kernels/kernels.h"
#include "model/harness.h"
#include "tests/common/sc_test_decode.h"
#include "tests/gpu/gpu_test.h"

GPU_TEST_GLOBALS

static sc_kernels *G;

static float *dev_f32(const float *h, size_t n) {
  float *b = NULL;
  if (G->ops->alloc(G, n * sizeof *b, (void **)&b) != 0) abort();
  if (h != NULL && G->ops->copy(G, b, h, n * sizeof *b, SC_KCOPY_H2D) != 0) abort();
  return b;
}

static void down(float *h, const float *d, size_t n) {
  if (G->ops->copy(G, h, d, n * sizeof *h, SC_KCOPY_D2H) != 0 || G->ops->sync(G) != 0) abort();
}

/* y += x recorded once, replayed three times with x changed in between: every replay
 * adds the x the buffer holds when it runs. */
static void case_replay_reads_current_buffers(void) {
  enum { N = 1000 };
  float *x0 = gt_rand_f32(N, -1, 1), *x1 = gt_rand_f32(N, -1, 1), *y0 = gt_rand_f32(N, -1, 1);
  float *x = dev_f32(x0, N), *y = dev_f32(y0, N);
  sc_krecording *r = NULL;
  REQUIRE(G->ops->record_begin(G) == 0, "record_begin");
  CHECK(G->ops->add(G, 1, N, x, N, y, N) == 0, "add while recording");
  REQUIRE(G->ops->record_end(G, &r) == 0 && r != NULL, "record_end");
  float got[N];
  down(got, y, N);
  CHECK(memcmp(got, y0, sizeof got) == 0, "recording ran the op");
  CHECK(G->ops->replay(G, r) == 0 && G->ops->replay(G, r) == 0, "replay");
  if (G->ops->copy(G, x, x1, sizeof x1[0] * N, SC_KCOPY_H2D) != 0) abort();
  CHECK(G->ops->replay(G, r) == 0, "replay");
  down(got, y, N);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += got[i] != ((y0[i] + x0[i]) + x0[i]) + x1[i];
  CHECK(bad == 0, "%d of %d sums differ from y + x0 + x0 + x1", bad, N);
  G->ops->recording_free(G, r);
  G->ops->free(G, x);
  G->ops->free(G, y);
  free(x0), free(x1), free(y0);
}

/* A copy from host memory while recording is refused; so is the recording, and nothing
 * queued in it ran. The context then works as before. */
static void case_refused_op_fails_the_recording(void) {
  enum { N = 64 };
  float *h = gt_rand_f32(N, -1, 1), *y0 = gt_rand_f32(N, -1, 1);
  float *x = dev_f32(h, N), *y = dev_f32(y0, N);
  sc_krecording *r = NULL;
  REQUIRE(G->ops->record_begin(G) == 0, "record_begin");
  CHECK(G->ops->add(G, 1, N, x, N, y, N) == 0, "add while recording");
  CHECK(G->ops->copy(G, x, h, sizeof h[0] * N, SC_KCOPY_H2D) == SC_EAGAIN, "h2d refused");
  CHECK(G->ops->sync(G) == SC_EAGAIN, "sync refused");
  CHECK(G->ops->record_end(G, &r) == SC_EAGAIN && r == NULL, "the recording fails");
  float got[N];
  down(got, y, N);
  CHECK(memcmp(got, y0, sizeof got) == 0, "an op of the failed recording ran");
  CHECK(G->ops->replay(G, NULL) == SC_EINVAL, "replay of nothing");
  CHECK(G->ops->add(G, 1, N, x, N, y, N) == 0, "the context still runs ops");
  down(got, y, N);
  CHECK(got[0] == y0[0] + h[0], "add after a failed recording");
  G->ops->free(G, x);
  G->ops->free(G, y);
  free(h), free(y0);
}

/* An indexer recorded at one size, the scratch then grown by a larger one: the first
 * recording is stale (SC_EAGAIN, nothing queued), and one made after the growth replays
 * to the same selection as the op run directly. */
static void case_scratch_growth_makes_recordings_stale(void) {
  const int32_t H = 4, dim = 64, K = 64, keys = 3000, T_small = 2, T_big = 600;
  float *q = gt_rand_f32((size_t)T_big * H * dim, -1, 1), *w = gt_rand_f32((size_t)T_big * H, 0, 1);
  float *kh = gt_rand_f32((size_t)keys * dim, -1, 1);
  int32_t *pos = malloc(sizeof(int32_t) * keys), *qpos = malloc(sizeof(int32_t) * T_big);
  int32_t *kb = calloc((size_t)T_big, sizeof(int32_t)), *ke = malloc(sizeof(int32_t) * T_big);
  for (int32_t i = 0; i < keys; i++) pos[i] = i;
  for (int32_t t = 0; t < T_big; t++) qpos[t] = keys, ke[t] = keys;
  float *dq = dev_f32(q, (size_t)T_big * H * dim), *dw = dev_f32(w, (size_t)T_big * H);
  float *dk = dev_f32(kh, (size_t)keys * dim);
  int32_t *dpos, *dqpos, *dkb, *dke, *out;
  if (G->ops->alloc(G, 4 * (size_t)keys, (void **)&dpos) || G->ops->alloc(G, 4 * (size_t)T_big, (void **)&dqpos) ||
      G->ops->alloc(G, 4 * (size_t)T_big, (void **)&dkb) || G->ops->alloc(G, 4 * (size_t)T_big, (void **)&dke) ||
      G->ops->alloc(G, 4 * (size_t)T_big * K, (void **)&out) ||
      G->ops->copy(G, dpos, pos, 4 * (size_t)keys, SC_KCOPY_H2D) ||
      G->ops->copy(G, dqpos, qpos, 4 * (size_t)T_big, SC_KCOPY_H2D) ||
      G->ops->copy(G, dkb, kb, 4 * (size_t)T_big, SC_KCOPY_H2D) ||
      G->ops->copy(G, dke, ke, 4 * (size_t)T_big, SC_KCOPY_H2D))
    abort();
  sc_indexer_args a = {.n_tok = T_small, .n_heads = H, .dim = dim, .topk = K, .q = dq,
                       .ld_q = (int64_t)H * dim, .w = dw, .ld_w = H, .q_pos = dqpos,
                       .keys = {dk, SC_KFMT_F32, dim, keys}, .key_pos = dpos, .key_begin = dkb,
                       .key_end = dke, .out_pos = out};
  int32_t direct[2 * 64], replayed[2 * 64];
  /* the direct run first: it sizes the scratch for T_small */
  REQUIRE(G->ops->indexer_topk(G, &a) == 0, "indexer");
  if (G->ops->copy(G, direct, out, sizeof direct, SC_KCOPY_D2H) || G->ops->sync(G)) abort();
  sc_krecording *r = NULL;
  REQUIRE(G->ops->record_begin(G) == 0, "record_begin");
  CHECK(G->ops->indexer_topk(G, &a) == 0, "indexer while recording");
  REQUIRE(G->ops->record_end(G, &r) == 0 && r != NULL, "record_end");
  if (G->ops->memset(G, out, 0xff, sizeof replayed)) abort();
  CHECK(G->ops->replay(G, r) == 0, "replay");
  if (G->ops->copy(G, replayed, out, sizeof replayed, SC_KCOPY_D2H) || G->ops->sync(G)) abort();
  CHECK(memcmp(direct, replayed, sizeof direct) == 0, "the replay selected other keys");
  sc_indexer_args big = a;
  big.n_tok = T_big;
  REQUIRE(G->ops->indexer_topk(G, &big) == 0, "indexer, many tokens");
  CHECK(G->ops->replay(G, r) == SC_EAGAIN, "a recording is stale once scratch moved");
  /* recording the larger one now needs no growth: it is made */
  G->ops->recording_free(G, r);
  r = NULL;
  REQUIRE(G->ops->record_begin(G) == 0, "record_begin");
  CHECK(G->ops->indexer_topk(G, &a) == 0, "indexer while recording");
  CHECK(G->ops->record_end(G, &r) == 0 && r != NULL, "record_end after the growth");
  G->ops->recording_free(G, r);
  void *bufs[] = {dq, dw, dk, dpos, dqpos, dkb, dke, out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) G->ops->free(G, bufs[i]);
  free(q), free(w), free(kh), free(pos), free(qpos), free(kb), free(ke);
}

/* Marks inside a recording time each replay: mark 0 before, 1 and 2 recorded around a
 * large copy, 3 after; read after the replay they are in order and 1..2 holds the copy. */
static void case_marks_in_a_recording(void) {
  const size_t n = (size_t)64 << 20; /* 256 MB: long enough to see */
  float *a = dev_f32(NULL, n), *b = dev_f32(NULL, n);
  sc_krecording *r = NULL;
  REQUIRE(G->ops->record_begin(G) == 0, "record_begin");
  CHECK(G->ops->mark(G, 1) == 0 && G->ops->copy(G, b, a, n * 4, SC_KCOPY_D2D) == 0 &&
            G->ops->mark(G, 2) == 0,
        "marks and a copy while recording");
  REQUIRE(G->ops->record_end(G, &r) == 0 && r != NULL, "record_end");
  for (int rep = 0; rep < 2; rep++) {
    uint64_t ns[4] = {0};
    CHECK(G->ops->mark(G, 0) == 0 && G->ops->replay(G, r) == 0 && G->ops->mark(G, 3) == 0,
          "mark, replay, mark");
    CHECK(G->ops->sync(G) == 0 && G->ops->marks_read(G, 4, ns) == 0, "marks read");
    CHECK(ns[1] <= ns[2] && ns[2] <= ns[3] && ns[2] - ns[1] > 10000,
          "replay %d: marks at %llu %llu %llu ns", rep, (unsigned long long)ns[1],
          (unsigned long long)ns[2], (unsigned long long)ns[3]);
  }
  G->ops->recording_free(G, r);
  G->ops->free(G, a);
  G->ops->free(G, b);
}

/* ---- the forward pass ---- */

/* The scenario of tests/common/sc_test_decode.h (the CPU test runs it through the
 * recorder) on CUDA with bf16 rows and blocks of 16 tokens: replayed and launched steps
 * give the same logits to the bit at every step. */
static void case_forward_recorded_steps_match(void) {
  sc_model_config m;
  sc_model_config_default(&m);
  m.layers = 3;
  m.max_position = 1024;
  sc_harness_config hc = {.model = m, .num_blocks = SC_TEST_DECODE_BLOCKS,
                          .kv_fmt = SC_KFMT_BF16, .kernel_threads = 1, .cuda = true};
  sc_plan_config_default(&hc.plan);
  hc.plan.block_size = 16;
  sc_harness *h[2] = {NULL, NULL};
  sc_diag d = {0};
  REQUIRE(sc_harness_create(&hc, &h[0], &d) == 0, "harness: %s", d.msg);
  hc.no_recordings = true;
  REQUIRE(sc_harness_create(&hc, &h[1], &d) == 0, "harness: %s", d.msg);
  char why[256] = "";
  const int rc = sc_test_decode_pair(h, m.vocab, hc.plan.block_size, 151, NULL, NULL, why,
                                     sizeof why);
  CHECK(rc == 0, "%s", why);
  uint64_t rec[2], rep[2];
  sc_harness_recording_stats(h[0], &rec[0], &rep[0]);
  sc_harness_recording_stats(h[1], &rec[1], &rep[1]);
  printf("     151 steps: %llu recorded, %llu replayed (the launched run: %llu, %llu)\n",
         (unsigned long long)rec[0], (unsigned long long)rep[0], (unsigned long long)rec[1],
         (unsigned long long)rep[1]);
  CHECK(rec[1] == 0 && rep[1] == 0, "the harness without recordings recorded");
  CHECK(rep[0] >= 120, "only %llu of 150 decode steps were replays", (unsigned long long)rep[0]);
  CHECK(rec[0] >= 2, "the batch changed shape: expected a second recording");
  sc_harness_destroy(h[0]);
  sc_harness_destroy(h[1]);
}

int main(void) {
  if (sc_cuda_device_count() == 0) {
    printf("no CUDA device: GPU recording tests skipped\n");
    return GPU_TEST_SKIP;
  }
  gt_init_seed();
  if (sc_kernels_cuda_create(&G, 0, NULL) != 0) {
    fprintf(stderr, "cannot create the kernel context\n");
    return 1;
  }
  RUN_CASE(case_replay_reads_current_buffers);
  RUN_CASE(case_refused_op_fails_the_recording);
  RUN_CASE(case_scratch_growth_makes_recordings_stale);
  RUN_CASE(case_marks_in_a_recording);
  sc_kernels_destroy(G);
  RUN_CASE(case_forward_recorded_steps_match);
  printf("%s: %d failure(s)\n", gt_failures ? "FAILED" : "PASSED", gt_failures);
  return gt_failures ? 1 : 0;
}
