/* test_gpu_nccl.c - the NCCL backend on one GPU: one-rank communicators driven through
 * the plan-checked session (all_gather, all_reduce in place and not, reduce_scatter, f32,
 * bf16 and 32-bit words, against the data sent), the desync refusal, the stream order
 * (a collective waits for the compute work queued before it, and compute queued after
 * it waits for the collective, while the host does not wait at all), the watch pokes,
 * the deadline (it bounds the collective, not the compute queued ahead of it; with two
 * GPUs, a collective whose peer never joins: the watch aborts the communicators, finish
 * says SC_ETIMEDOUT for that collective, later calls SC_EABORTED), an abort from another
 * thread, and an initialisation whose peer never joins (SC_ETIMEDOUT). Skips (77)
 * without a GPU. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "collectives/backend_nccl.h"
#include "model/model_defaults.h"
#include "tests/gpu/gpu_spin.h"
#include "tests/gpu/gpu_test.h"

GPU_TEST_GLOBALS

static int make_comm_on(const sc_plan_config *cfg, int64_t deadline_ms, void *compute,
                        sc_comm *comm) {
  sc_nccl_id ids[SC_GROUP_COUNT];
  memset(ids, 0, sizeof ids);
  for (int g = 0; g < SC_GROUP_COUNT; g++)
    if (sc_nccl_id_needed(cfg, (sc_group)g) && sc_nccl_get_unique_id(&ids[g]) != 0) return -1;
  return sc_nccl_comm_create(comm, cfg, 0, 0, ids, compute, deadline_ms);
}

/* compute stream NULL: the legacy default stream, which cudaMemcpy uses too */
static int make_comm(const sc_plan_config *cfg, int64_t deadline_ms, sc_comm *comm) {
  return make_comm_on(cfg, deadline_ms, NULL, comm);
}

/* Runs the watch as the comm actor does, until nothing is outstanding. */
static void watch_until_idle(sc_comm *comm) {
  for (int64_t ms; (ms = sc_nccl_watch(comm)) >= 0;) {
    const struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) abort();
  return p;
}

static void case_one_rank_session(void) {
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
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
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "drain");
  CHECK(sc_coll_session_finish(&s) == 0, "finish: %s", sc_diag_message(&s.diag));
  CHECK(comm.stats[SC_PURPOSE_DECODE_OUT].calls == 1 &&
            comm.stats[SC_PURPOSE_DECODE_OUT].seconds > 0,
        "device time of the reduce_scatter from its events (%g s)",
        comm.stats[SC_PURPOSE_DECODE_OUT].seconds);

  /* an abort with nothing in flight takes the communicators down at once, for good */
  comm.ops->reset(comm.self, 1);
  float *one = dev_alloc(sizeof(float) * 64);
  CHECK(comm.ops->run(comm.self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, one, one, 64, NULL) == 0,
        "a collective before the abort");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "drain");
  sc_nccl_abort(&comm);
  CHECK(comm.ops->run(comm.self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, one, one, 64, NULL) ==
            SC_EABORTED,
        "an abort fails the next collective");
  comm.ops->reset(comm.self, 2);
  CHECK(comm.ops->run(comm.self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, one, one, 64, NULL) ==
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

static atomic_int g_pokes;
static void count_poke(void *arg) {
  (void)arg;
  atomic_fetch_add(&g_pokes, 1);
}

/* The collective sits at its place in the compute stream: the comm stream waits for the
 * memset queued (behind a spin) before it, and the read queued after it sees its result;
 * the host got control back long before. */
static void case_stream_order(void) {
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cudaStream_t cs;
  REQUIRE(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess, "stream");
  sc_comm comm;
  REQUIRE(make_comm_on(&cfg, 5000, cs, &comm) == 0, "init");
  sc_nccl_set_watch(&comm, count_poke, NULL);
  const size_t n = 1 << 16;
  float *send = dev_alloc(n * sizeof *send), *recv = dev_alloc(n * sizeof *recv);
  uint32_t *host = NULL; /* pinned: a read into pageable memory would wait */
  REQUIRE(cudaMallocHost((void **)&host, n * sizeof *host) == cudaSuccess, "pinned");
  CHECK(cudaMemset(send, 0, n * sizeof *send) == cudaSuccess &&
            cudaMemset(recv, 0, n * sizeof *recv) == cudaSuccess && cudaDeviceSynchronize() == 0,
        "clear");
  const uint64_t t0 = sc_now_ns();
  REQUIRE(sc_test_gpu_spin(cs, 300) == 0, "spin");
  CHECK(cudaMemsetAsync(send, 0x3f, n * sizeof *send, cs) == cudaSuccess, "fill");
  comm.ops->reset(comm.self, 1);
  CHECK(comm.ops->run(comm.self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, send, recv, n, NULL) == 0,
        "queue");
  const double queued_s = (double)(sc_now_ns() - t0) * 1e-9;
  CHECK(cudaMemcpyAsync(host, recv, n * sizeof *host, cudaMemcpyDeviceToHost, cs) == 0, "read");
  CHECK(queued_s < 0.2, "queueing behind 0.3 s of compute returned after %.3f s", queued_s);
  CHECK(sc_nccl_watch(&comm) > 0, "the watch sees the collective outstanding");
  CHECK(cudaStreamSynchronize(cs) == cudaSuccess, "drain");
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += host[i] != 0x3f3f3f3fu;
  CHECK(bad == 0, "%zu of %zu values missed the compute work queued before the collective",
        bad, n);
  watch_until_idle(&comm); /* the host function after the collective may lag the stream */
  CHECK(sc_nccl_watch(&comm) == -1, "nothing outstanding after the drain");
  CHECK(atomic_load(&g_pokes) >= 1, "the watch was poked (%d)", atomic_load(&g_pokes));
  double sec = 0;
  int32_t failed = -1;
  CHECK(comm.ops->finish(comm.self, 0, &sec, 1, &failed) == 0 && sec > 0, "finish: %g s", sec);
  sc_nccl_set_watch(&comm, NULL, NULL);
  sc_nccl_comm_destroy(&comm);
  cudaFree(send), cudaFree(recv), cudaFreeHost(host);
  cudaStreamDestroy(cs);
}

/* The deadline bounds the collective, not the compute queued ahead of it: a one-rank
 * all_reduce behind 1.5 s of compute on its compute stream, with a 0.3 s deadline,
 * completes (its clock used to start when it was queued). */
static void case_compute_ahead_is_not_the_collectives(void) {
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cudaStream_t cs;
  REQUIRE(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess, "stream");
  sc_comm comm;
  REQUIRE(make_comm_on(&cfg, 300, cs, &comm) == 0, "init");
  float *buf = dev_alloc(sizeof(float) * 1024);
  const uint64_t t0 = sc_now_ns();
  REQUIRE(sc_test_gpu_spin(cs, 1500) == 0, "spin");
  comm.ops->reset(comm.self, 1);
  CHECK(comm.ops->run(comm.self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, buf, buf, 1024, NULL) == 0,
        "queueing returns at once");
  watch_until_idle(&comm);
  const double waited = (double)(sc_now_ns() - t0) * 1e-9;
  CHECK(waited >= 1.4, "the collective finished after %.3f s, before the compute ahead of it",
        waited);
  double sec = 0;
  int32_t failed = -1;
  const int rc = comm.ops->finish(comm.self, 0, &sec, 1, &failed);
  CHECK(rc == 0, "finish: %d (collective %d): the compute ahead was counted", rc, failed);
  sc_nccl_comm_destroy(&comm);
  cudaFree(buf);
  cudaStreamDestroy(cs);
}

typedef struct {
  const sc_plan_config *cfg;
  const sc_nccl_id *ids; /* [SC_GROUP_COUNT] */
  int32_t rank;
  sc_comm comm;
  int rc;
} init_arg;

/* Creates the rank's communicators, then runs one all_reduce with its peer: NCCL
 * connects the ranks on their first collective, and a first collective whose peer never
 * comes waits in its enqueue (bounded by the same deadline), not on the stream. */
static void *init_rank(void *p) {
  init_arg *a = p;
  /* (the deadline bounds the initialisation too: a two-rank init took over 0.3 s) */
  a->rc = sc_nccl_comm_create(&a->comm, a->cfg, a->rank, a->rank, a->ids, NULL, 3000);
  if (a->rc != 0) return NULL;
  float *buf = NULL;
  if (cudaSetDevice(a->rank) != cudaSuccess || cudaMalloc((void **)&buf, 4096) != cudaSuccess) {
    a->rc = SC_ESYS;
    return NULL;
  }
  a->comm.ops->reset(a->comm.self, 1);
  a->rc = a->comm.ops->run(a->comm.self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, buf, buf,
                           1024, NULL);
  if (a->rc == 0) {
    watch_until_idle(&a->comm);
    double sec = 0;
    int32_t failed = -1;
    a->rc = a->comm.ops->finish(a->comm.self, 0, &sec, 1, &failed);
  }
  cudaFree(buf);
  return NULL;
}

/* A collective that started and never completes (rank 1 of the TP pair never joins it):
 * the watch aborts the communicators at the deadline, finish says SC_ETIMEDOUT for that
 * collective, later calls SC_EABORTED. Two GPUs (NCCL puts no two ranks on one). */
static void case_deadline(void) {
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 2) {
    printf("     skipped: needs two GPUs\n");
    return;
  }
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.tp = 2;
  sc_nccl_id ids[2][SC_GROUP_COUNT];
  memset(ids, 0, sizeof ids);
  for (int32_t r = 0; r < 2; r++)
    for (int g = 0; g < SC_GROUP_COUNT; g++) {
      if (!sc_nccl_id_needed(&cfg, (sc_group)g)) continue;
      if (sc_nccl_id_owner(&cfg, r, (sc_group)g))
        REQUIRE(sc_nccl_get_unique_id(&ids[r][g]) == 0, "unique id");
      else
        ids[r][g] = ids[0][g]; /* (here only the TP pair is shared, and rank 0 owns it) */
    }
  init_arg a[2] = {{&cfg, ids[0], 0, {0}, -1}, {&cfg, ids[1], 1, {0}, -1}};
  pthread_t th[2];
  for (int r = 0; r < 2; r++) REQUIRE(pthread_create(&th[r], NULL, init_rank, &a[r]) == 0, "thread");
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  REQUIRE(a[0].rc == 0 && a[1].rc == 0, "two-rank init and first all_reduce: %d, %d",
          a[0].rc, a[1].rc);
  sc_comm *comm = &a[0].comm;
  REQUIRE(cudaSetDevice(0) == cudaSuccess, "device 0");
  float *buf = dev_alloc(sizeof(float) * 1024);
  comm->ops->reset(comm->self, 2);
  const uint64_t t0 = sc_now_ns();
  CHECK(comm->ops->run(comm->self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, buf, buf, 1024, NULL) == 0,
        "queueing returns at once");
  watch_until_idle(comm);
  const double waited = (double)(sc_now_ns() - t0) * 1e-9;
  CHECK(waited >= 2.99 && waited < 12.0, "deadline of 3 s honoured (watch ended after %.3f s)",
        waited);
  printf("     deadline 3 s, the watch aborted after %.3f s (abort included)\n", waited);
  double sec = 0;
  int32_t failed = -1;
  const int rc = comm->ops->finish(comm->self, 0, &sec, 1, &failed);
  CHECK(rc == SC_ETIMEDOUT && failed == 0, "finish: expected SC_ETIMEDOUT for collective 0, got "
        "%d for %d", rc, failed);
  CHECK(comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, SC_GROUP_DCP, SC_DT_F32, buf, buf, 16, NULL) ==
            SC_EABORTED,
        "calls after the abort fail");
  sc_nccl_comm_destroy(&a[0].comm);
  sc_nccl_comm_destroy(&a[1].comm);
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
  sc_model_plan_config_default(&cfg);
  sc_comm comm;
  REQUIRE(make_comm(&cfg, 10000, &comm) == 0, "init");
  float *buf = dev_alloc(sizeof(float) * 1024);
  REQUIRE(sc_test_gpu_spin(sc_nccl_comm_stream(&comm), 1500) == 0, "spin");
  CHECK(comm.ops->run(comm.self, 0, SC_OP_ALL_REDUCE, SC_GROUP_TP, SC_DT_F32, buf, buf, 1024, NULL) == 0,
        "queueing returns at once");
  abort_arg aa = {&comm, 200};
  pthread_t th;
  const uint64_t t0 = sc_now_ns();
  REQUIRE(pthread_create(&th, NULL, abort_later, &aa) == 0, "thread");
  pthread_join(th, NULL);
  const double waited = (double)(sc_now_ns() - t0) * 1e-9;
  CHECK(waited < 8.0, "the abort returned after %.3f s (ncclCommAbort included)", waited);
  printf("     abort requested after 0.2 s, returned after %.3f s\n", waited);
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "the streams drain after the abort");
  double sec = 0;
  int32_t failed = -1;
  const int rc = comm.ops->finish(comm.self, 0, &sec, 1, &failed);
  CHECK(rc == SC_EABORTED && failed == 0, "finish: expected SC_EABORTED for collective 0, got "
        "%d for %d", rc, failed);
  sc_nccl_comm_destroy(&comm);
  cudaFree(buf);
}

static void case_init_timeout(void) {
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
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
  RUN_CASE(case_stream_order);
  RUN_CASE(case_compute_ahead_is_not_the_collectives);
  RUN_CASE(case_deadline);
  RUN_CASE(case_abort_thread);
  RUN_CASE(case_init_timeout);
  printf("%s: %d failure(s)\n", gt_failures ? "FAILED" : "PASSED", gt_failures);
  return gt_failures ? 1 : 0;
}
