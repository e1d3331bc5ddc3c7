/* test_gpu_nccl.c - the NCCL backend on one GPU: one-rank communicators driven through
 * the plan-checked session (all_gather, all_reduce in place and not, reduce_scatter, f32,
 * bf16 and 32-bit words, against the data sent), the desync refusal, and the failure
 * paths: a collective stuck behind a busy stream past its deadline (SC_ETIMEDOUT, the
 * communicators aborted, later calls SC_EABORTED), an abort from another thread, and an
 * initialisation whose peer never joins (SC_ETIMEDOUT). Skips (77) without a GPU. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "actors/runtime/sc_time.h"
#include "collectives/backend_nccl.h"
#include "tests/gpu/gpu_spin.h"
#include "tests/gpu/gpu_test.h"

GPU_TEST_GLOBALS

static int make_comm(const sc_plan_config *cfg, int64_t deadline_ms, sc_comm *comm) {
  sc_nccl_id ids[SC_GROUP_COUNT];
  memset(ids, 0, sizeof ids);
  for (int g = 0; g < SC_GROUP_COUNT; g++)
    if (sc_nccl_id_needed(cfg, (sc_group)g) && sc_nccl_get_unique_id(&ids[g]) != 0) return -1;
  return sc_nccl_comm_init(cfg, 0, 0, ids, NULL, deadline_ms, comm);
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) abort();
  return p;
}

static void case_one_rank_session(void) {
  sc_plan_config cfg;
  sc_plan_config_default(&cfg);
  sc_comm comm;
  REQUIRE(make_comm(&cfg, 5000, &comm) == 0, "one-rank init");
  CHECK(comm.group_size[SC_GROUP_TP] == 1 && comm.group_size[SC_GROUP_DCP] == 1, "sizes");
  const sc_coll plan[] = {
      {0, 0, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_W32, SC_PURPOSE_TOPK_CANDIDATES, -1, 16, 128},
      {1, 0, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_DECODE_LSE, -1, 16, 8},
      {2, 0, SC_GROUP_DCP, SC_OP_REDUCE_SCATTER, SC_DT_F32, SC_PURPOSE_DECODE_OUT, -1, 16, 512},
      {3, 0, SC_GROUP_TP, SC_OP_ALL_REDUCE, SC_DT_F32, SC_PURPOSE_ATTN_OUT, -1, 33, 1024},
      {4, 0, SC_GROUP_TP, SC_OP_ALL_REDUCE, SC_DT_BF16, SC_PURPOSE_MLP_OUT, -1, 33, 1024},
      {5, -1, SC_GROUP_PCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_HIDDEN_RESTORE, -1, 33, 256},
  };
  const int n = (int)(sizeof plan / sizeof plan[0]);
  sc_coll_session s;
  sc_coll_session_begin(&s, &comm, plan, n, 42);
  for (int i = 0; i < n; i++) {
    const size_t count = (size_t)(plan[i].rows * plan[i].width);
    const size_t bytes = count * sc_dtype_size(plan[i].dtype);
    uint8_t *h = malloc(bytes), *back = malloc(bytes);
    for (size_t b = 0; b < bytes; b++) h[b] = (uint8_t)gt_int(1, 120); /* finite, nonzero */
    void *send = dev_alloc(bytes), *recv = dev_alloc(bytes);
    CHECK(cudaMemcpy(send, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "upload");
    CHECK(cudaMemset(recv, 0xff, bytes) == cudaSuccess, "poison");
    const bool in_place = i == 3; /* all_reduce with recv == send */
    CHECK(sc_coll_session_run(&s, &plan[i], send, in_place ? send : recv) == 0, "entry %d: %s", i,
          sc_diag_message(&s.diag));
    CHECK(cudaMemcpy(back, in_place ? send : recv, bytes, cudaMemcpyDeviceToHost) == cudaSuccess,
          "download");
    /* a group of one: gather, sum and scatter all give back the data sent */
    CHECK(memcmp(h, back, bytes) == 0, "entry %d (%s): result differs from the data sent", i,
          sc_coll_op_name(plan[i].op));
    cudaFree(send), cudaFree(recv);
    free(h), free(back);
  }
  CHECK(sc_coll_session_end(&s) == 0, "session end");

  /* an abort request no collective acted on is forgotten by reset (a new step) */
  sc_nccl_abort(&comm);
  comm.ops->reset(comm.self, 1);
  float *one = dev_alloc(sizeof(float) * 64);
  CHECK(comm.ops->run(comm.self, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, one, one, 64) == 0,
        "reset clears a pending abort request");
  sc_nccl_abort(&comm);
  CHECK(comm.ops->run(comm.self, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, one, one, 64) ==
            SC_EABORTED,
        "an abort request fails the next collective");
  comm.ops->reset(comm.self, 2);
  CHECK(comm.ops->run(comm.self, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, one, one, 64) ==
            SC_EABORTED,
        "aborted communicators stay dead after reset");
  cudaFree(one);

  /* a request that does not match the plan is refused before anything runs */
  sc_coll_session_begin(&s, &comm, plan, n, 43);
  sc_coll wrong = plan[0];
  wrong.rows = 17;
  void *buf = dev_alloc(1 << 16);
  CHECK(sc_coll_session_run(&s, &wrong, buf, buf) == SC_EDESYNC, "desync must be refused");
  CHECK(sc_coll_session_run(&s, &plan[0], buf, buf) == SC_EDESYNC, "a failed session stays failed");
  cudaFree(buf);
  sc_nccl_comm_destroy(&comm);
}

static void case_deadline(void) {
  sc_plan_config cfg;
  sc_plan_config_default(&cfg);
  sc_comm comm;
  REQUIRE(make_comm(&cfg, 300, &comm) == 0, "init");
  float *buf = dev_alloc(sizeof(float) * 1024);
  REQUIRE(sc_test_gpu_spin(sc_nccl_comm_stream(&comm), 1500) == 0, "spin");
  const uint64_t t0 = sc_now_ns();
  const int rc = comm.ops->run(comm.self, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, buf, buf, 1024);
  const double waited = (double)(sc_now_ns() - t0) * 1e-9;
  CHECK(rc == SC_ETIMEDOUT, "expected SC_ETIMEDOUT, got %d", rc);
  /* detected at the deadline; ncclCommAbort then waits for the work queued ahead of the
   * collective (the 1.5 s spin) and tears the communicator down (about 2 s on the H200,
   * 2026-11-29): bounded, never a hang */
  CHECK(waited >= 0.29 && waited < 8.0, "deadline of 0.3 s honoured (waited %.3f s)", waited);
  printf("     deadline 0.3 s, returned after %.3f s (abort included)\n", waited);
  CHECK(comm.ops->run(comm.self, SC_OP_ALL_GATHER, SC_GROUP_DCP, SC_DT_F32, buf, buf, 16) ==
            SC_EABORTED,
        "calls after the abort fail");
  sc_nccl_comm_destroy(&comm);
  cudaDeviceSynchronize();
  cudaFree(buf);
}

typedef struct {
  sc_comm *comm;
  int ms;
} abort_arg;

static void *abort_later(void *p) {
  abort_arg *a = p;
  const struct timespec ts = {0, a->ms * 1000000L};
  nanosleep(&ts, NULL);
  sc_nccl_abort(a->comm);
  return NULL;
}

static void case_abort_thread(void) {
  sc_plan_config cfg;
  sc_plan_config_default(&cfg);
  sc_comm comm;
  REQUIRE(make_comm(&cfg, 10000, &comm) == 0, "init");
  float *buf = dev_alloc(sizeof(float) * 1024);
  REQUIRE(sc_test_gpu_spin(sc_nccl_comm_stream(&comm), 1500) == 0, "spin");
  abort_arg aa = {&comm, 200};
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, abort_later, &aa) == 0, "thread");
  const uint64_t t0 = sc_now_ns();
  const int rc = comm.ops->run(comm.self, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, buf, buf, 1024);
  const double waited = (double)(sc_now_ns() - t0) * 1e-9;
  pthread_join(th, NULL);
  CHECK(rc == SC_EABORTED, "expected SC_EABORTED, got %d", rc);
  CHECK(waited < 8.0, "abort ends the wait (%.3f s, ncclCommAbort included)", waited);
  printf("     abort requested after 0.2 s, returned after %.3f s\n", waited);
  sc_nccl_comm_destroy(&comm);
  cudaDeviceSynchronize();
  cudaFree(buf);
}

static void case_init_timeout(void) {
  sc_plan_config cfg;
  sc_plan_config_default(&cfg);
  cfg.tp = 2; /* rank 0 of a two-rank TP group whose other member never comes */
  sc_comm comm;
  const uint64_t t0 = sc_now_ns();
  const int rc = make_comm(&cfg, 1500, &comm);
  const double waited = (double)(sc_now_ns() - t0) * 1e-9;
  CHECK(rc == SC_ETIMEDOUT, "expected SC_ETIMEDOUT, got %d", rc);
  CHECK(waited >= 1.4 && waited < 10, "init deadline honoured (%.3f s)", waited);
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("no CUDA device: NCCL tests skipped\n");
    return GPU_TEST_SKIP;
  }
  gt_init_seed();
  RUN_CASE(case_one_rank_session);
  RUN_CASE(case_deadline);
  RUN_CASE(case_abort_thread);
  RUN_CASE(case_init_timeout);
  printf("%s: %d failure(s)\n", gt_failures ? "FAILED" : "PASSED", gt_failures);
  return gt_failures ? 1 : 0;
}
