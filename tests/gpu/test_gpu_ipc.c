/* test_gpu_ipc.c - the device collectives between processes sharing one GPU
 * (collectives/backend_ipc.h, WIP): G = 2 and 4 child processes on device 0, member 0
 * creating the region (blocks of 4 KB, so that every collective takes several rounds)
 * and passing its id through pipes; all_gather (f32, words), all_reduce (f32, bf16) and
 * reduce_scatter against sums taken on the host in the same member order (so bit for
 * bit); then a member that never comes: the other's finish says SC_ETIMEDOUT. The
 * parent never touches CUDA (a forked child of an initialised context is unusable).
 * Without MPS the children's kernels take turns by time slice (slow, but they meet).
 * Never run yet. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/backend_ipc.h"
#include "kernels/bf16.h"

#define BLOCK 4096

static int fails;
#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      fails++;                                                     \
      fprintf(stderr, "  FAIL member %d: ", me), fprintf(stderr, __VA_ARGS__); \
      fputc('\n', stderr);                                         \
    }                                                              \
  } while (0)

static float value(int m, size_t i) { return (float)(m + 1) * 0.1f + (float)i * 1e-3f; }

static void *up(const void *h, size_t n) {
  void *d = NULL;
  if (cudaMalloc(&d, n) != cudaSuccess || cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) != cudaSuccess)
    abort();
  return d;
}

static void down(void *h, const void *d, size_t n) {
  if (cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) != cudaSuccess) abort();
}

/* One member's life: its comm, the collectives, the checks. `absent`: the member that
 * never calls (-1: none). Returns the number of failures. */
static int member(int G, int me, sc_ipc_id id, void *owned, int absent) {
  if (me == absent) return 0;
  sc_plan_config cfg = {.pcp = G, .dcp = G, .tp = 1};
  sc_ipc_id ids[SC_GROUP_COUNT] = {{{0}}};
  void *own[SC_GROUP_COUNT] = {NULL};
  ids[SC_GROUP_PCP] = id;
  own[SC_GROUP_PCP] = owned;
  cudaStream_t st;
  if (cudaStreamCreate(&st) != cudaSuccess) return 1;
  sc_comm comm;
  const int rc = sc_ipc_comm_create(&comm, &cfg, me, ids, own, st, absent >= 0 ? 2000 : 30000);
  EXPECT(rc == 0, "comm create: %d", rc);
  if (rc) return fails;
  enum { NG = 3000, NR = 5000, NB = 777, NS = 1500 };
  float *h = malloc(sizeof(float) * NR * 4), *back = malloc(sizeof(float) * NR * 16);
  for (size_t i = 0; i < NR; i++) h[i] = value(me, i);
  void *send = up(h, sizeof(float) * NR), *recv = NULL;
  if (cudaMalloc(&recv, sizeof(float) * NR * 16) != cudaSuccess) abort();
  sc_diag d;
  int32_t failed = -1;
  double secs[8];
  if (absent >= 0) {
    EXPECT(comm.ops->run(comm.self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, NG,
                         &d) == 0,
           "run");
    (void)cudaStreamSynchronize(st);
    const int f = comm.ops->finish(comm.self, secs, 1, &failed);
    EXPECT(f == SC_ETIMEDOUT, "a member never came: finish %d, expected SC_ETIMEDOUT", f);
    sc_ipc_comm_destroy(&comm);
    return fails;
  }
  /* all_gather f32 */
  EXPECT(comm.ops->run(comm.self, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, NG, &d) == 0,
         "all_gather");
  (void)cudaStreamSynchronize(st);
  down(back, recv, sizeof(float) * NG * G);
  for (int m = 0; m < G; m++)
    for (size_t i = 0; i < NG; i++)
      if (back[m * NG + i] != value(m, i)) {
        EXPECT(0, "all_gather: member %d element %zu: %g", m, i, back[m * NG + i]);
        break;
      }
  /* all_reduce f32 */
  EXPECT(comm.ops->run(comm.self, SC_OP_ALL_REDUCE, SC_GROUP_PCP, SC_DT_F32, send, recv, NR, &d) == 0,
         "all_reduce");
  (void)cudaStreamSynchronize(st);
  down(back, recv, sizeof(float) * NR);
  for (size_t i = 0; i < NR; i++) {
    float acc = 0.0f;
    for (int m = 0; m < G; m++) acc = acc + value(m, i);
    if (back[i] != acc) {
      EXPECT(0, "all_reduce f32: element %zu: %g, expected %g", i, back[i], acc);
      break;
    }
  }
  /* all_reduce bf16 */
  uint16_t *hb = malloc(sizeof(uint16_t) * NB), *bb = malloc(sizeof(uint16_t) * NB);
  for (size_t i = 0; i < NB; i++) hb[i] = sc_f32_to_bf16(value(me, i));
  void *sb = up(hb, sizeof(uint16_t) * NB);
  EXPECT(comm.ops->run(comm.self, SC_OP_ALL_REDUCE, SC_GROUP_PCP, SC_DT_BF16, sb, recv, NB, &d) == 0,
         "all_reduce bf16");
  (void)cudaStreamSynchronize(st);
  down(bb, recv, sizeof(uint16_t) * NB);
  for (size_t i = 0; i < NB; i++) {
    float acc = 0.0f;
    for (int m = 0; m < G; m++) acc = acc + sc_bf16_to_f32(sc_f32_to_bf16(value(m, i)));
    if (bb[i] != sc_f32_to_bf16(acc)) {
      EXPECT(0, "all_reduce bf16: element %zu", i);
      break;
    }
  }
  /* reduce_scatter f32: block b of every member's send summed on member b */
  float *hs = malloc(sizeof(float) * NS * G);
  for (size_t i = 0; i < (size_t)NS * G; i++) hs[i] = value(me, i);
  void *ss = up(hs, sizeof(float) * NS * G);
  EXPECT(comm.ops->run(comm.self, SC_OP_REDUCE_SCATTER, SC_GROUP_PCP, SC_DT_F32, ss, recv,
                       (size_t)NS * G, &d) == 0,
         "reduce_scatter");
  (void)cudaStreamSynchronize(st);
  down(back, recv, sizeof(float) * NS);
  for (size_t i = 0; i < NS; i++) {
    float acc = 0.0f;
    for (int m = 0; m < G; m++) acc = acc + value(m, (size_t)me * NS + i);
    if (back[i] != acc) {
      EXPECT(0, "reduce_scatter: element %zu: %g, expected %g", i, back[i], acc);
      break;
    }
  }
  const int f = comm.ops->finish(comm.self, secs, 4, &failed);
  EXPECT(f == 0, "finish: %d", f);
  sc_ipc_comm_destroy(&comm);
  free(h), free(back), free(hb), free(bb), free(hs);
  return fails;
}

/* G children; member 0 creates the region and writes its id to the others' pipes, then
 * waits for their exit before freeing it (it must outlive their mappings). */
static int run_group(int G, int absent) {
  int fds[16][2], done[2];
  pid_t pid[16];
  if (pipe(done) != 0) return 1;
  for (int m = 1; m < G; m++)
    if (pipe(fds[m]) != 0) return 1;
  for (int m = 0; m < G; m++) {
    pid[m] = fork();
    if (pid[m] < 0) return 1;
    if (pid[m] > 0) continue;
    sc_ipc_id id;
    void *owned = NULL;
    if (m == 0) {
      if (sc_ipc_region_create(G, BLOCK, &id, &owned) != 0) _exit(1);
      for (int k = 1; k < G; k++)
        if (write(fds[k][1], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
    } else if (read(fds[m][0], &id, sizeof id) != (ssize_t)sizeof id) {
      _exit(1);
    }
    const int f = member(G, m, id, owned, absent);
    if (m == 0) { /* the others' mappings are closed before the region is freed */
      char c;
      for (int k = 1; k < G; k++)
        if (read(done[0], &c, 1) != 1) break;
      sc_ipc_region_destroy(owned);
    } else if (write(done[1], "x", 1) != 1) {
      _exit(1);
    }
    _exit(f ? 1 : 0);
  }
  int bad = 0;
  for (int m = 0; m < G; m++) {
    int status = 0;
    waitpid(pid[m], &status, 0);
    bad += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  for (int m = 1; m < G; m++) close(fds[m][0]), close(fds[m][1]);
  close(done[0]), close(done[1]);
  return bad;
}

int main(void) {
  pid_t probe = fork();
  if (probe == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 77);
  }
  int st = 0;
  waitpid(probe, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    printf("no CUDA device: IPC collective tests skipped\n");
    return 77;
  }
  int bad = 0;
  for (int G = 2; G <= 4; G += 2) {
    const int b = run_group(G, -1);
    printf("%s collectives over %d processes\n", b ? "FAIL" : "ok", G);
    bad += b;
  }
  const int b = run_group(2, 1);
  printf("%s a member that never came: SC_ETIMEDOUT\n", b ? "FAIL" : "ok");
  bad += b;
  return bad ? 1 : 0;
}
