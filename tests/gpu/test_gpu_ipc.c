/* test_gpu_ipc.c - the device collectives between processes sharing one GPU
 * (collectives/backend_ipc.h): G = 2 and 4 child processes on device 0, member 0
 * creating the region and passing its id through pipes. Twice: over blocks of 4 KB, so
 * that every collective takes several rounds of one thread block each (as a decode
 * step's do), and over blocks of 128 KB with 32 times the elements, so that a round
 * takes several thread blocks, whose last one publishes the member's word. Each time
 * all_gather (f32), all_reduce (f32, bf16) and reduce_scatter against sums taken on the
 * host in the same member order (so bit for bit), each collective's device time from
 * finish; then two of them captured into a CUDA graph and replayed three times over new
 * inputs (what a recorded step does). Then a member that never comes: the other's
 * finish says SC_ETIMEDOUT at the deadline, or SC_EABORTED at once when aborted from
 * another thread, naming the collective by its plan position, and the comm stays dead
 * after a reset. Also the region's note: memory member 0 exports, found by the others
 * through the handle it noted (note_export, note_check). And the decode attention's LSE
 * merge in one round against the gather, the kernels' lse_scale and the reduction, bit
 * for bit (member_lse; the 4 KB blocks are too small for it: lse_fits declines). The
 * parent never touches CUDA (a forked child of an initialised context is unusable).
 * Without MPS the children's kernels take turns by time slice (slow, but they meet).
 * Passed on one H200 with and without MPS (2026-12-05, bench/gpu-step.md); both block
 * sizes under MPS on one H100 (2026-12-06); the LSE case not run yet (session 58). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collectives/backend_ipc.h"
#include "kernels/bf16.h"
#include "kernels/lse_math.h"
#include "kernels/cuda/kernels_cuda.h"

#define BLOCK_SMALL 4096
#define BLOCK_LARGE (128 * 1024)

enum mode { ALL, ABSENT, ABORT }; /* every member; member 1 never comes (deadline, abort) */

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

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *abort_later(void *arg) {
  usleep(300 * 1000);
  sc_ipc_abort(arg);
  return NULL;
}

/* A member whose peer never comes: the first of two collectives fails on the device. */
static int member_alone(int me, sc_comm *comm, cudaStream_t st, void *send, void *recv,
                        enum mode mode) {
  sc_diag d;
  pthread_t th;
  if (mode == ABORT && pthread_create(&th, NULL, abort_later, comm) != 0) return 1;
  const double t0 = now_s();
  EXPECT(comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv,
                        64, &d) == 0, "run 0");
  EXPECT(comm->ops->run(comm->self, 1, SC_OP_ALL_REDUCE, SC_GROUP_PCP, SC_DT_F32, send, recv,
                        64, &d) == 0, "run 1");
  (void)cudaStreamSynchronize(st);
  const double took = now_s() - t0;
  if (mode == ABORT) pthread_join(th, NULL);
  double secs[2];
  int32_t failed = -1;
  const int f = comm->ops->finish(comm->self, 0, secs, 2, &failed);
  const int want = mode == ABORT ? SC_EABORTED : SC_ETIMEDOUT;
  EXPECT(f == want, "a member never came: finish %d, expected %d", f, want);
  EXPECT(failed == 0, "the failure named collective %d, expected 0", failed);
  if (mode == ABORT) EXPECT(took < 10.0, "the abort took %.1f s (deadline 60 s)", took);
  comm->ops->reset(comm->self, 2);
  EXPECT(comm->ops->run(comm->self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv,
                        64, &d) == want, "a dead comm ran a collective after its reset");
  return fails;
}

/* Collectives 0 (all_reduce f32, NR) and 1 (all_gather f32, NG) captured into a graph on
 * st and replayed three times, each over new inputs (value + the replay's number). */
static int member_graph(int G, int me, sc_comm *comm, cudaStream_t st, float *h, float *back,
                        void *send, void *recv, void *recv2, size_t NR, size_t NG) {
  sc_diag d;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  EXPECT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
  EXPECT(comm->ops->run(comm->self, 0, SC_OP_ALL_REDUCE, SC_GROUP_PCP, SC_DT_F32, send, recv,
                        NR, &d) == 0, "captured all_reduce");
  EXPECT(comm->ops->run(comm->self, 1, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv2,
                        NG, &d) == 0, "captured all_gather");
  EXPECT(cudaStreamEndCapture(st, &graph) == cudaSuccess, "end capture");
  EXPECT(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
  if (fails) return fails;
  for (int rep = 1; rep <= 3 && fails == 0; rep++) {
    for (size_t i = 0; i < NR; i++) h[i] = value(me, i) + (float)rep;
    if (cudaMemcpy(send, h, sizeof(float) * NR, cudaMemcpyHostToDevice) != cudaSuccess) abort();
    EXPECT(cudaGraphLaunch(exec, st) == cudaSuccess, "graph launch %d", rep);
    EXPECT(cudaStreamSynchronize(st) == cudaSuccess, "graph %d", rep);
    down(back, recv, sizeof(float) * NR);
    for (size_t i = 0; i < NR; i++) {
      float acc = 0.0f;
      for (int m = 0; m < G; m++) acc = acc + (value(m, i) + (float)rep);
      if (back[i] != acc) {
        EXPECT(0, "replay %d, all_reduce: element %zu: %g, expected %g", rep, i, back[i], acc);
        break;
      }
    }
    down(back, recv2, sizeof(float) * NG * G);
    for (int m = 0; m < G; m++)
      for (size_t i = 0; i < NG; i++)
        if (back[m * NG + i] != value(m, i) + (float)rep) {
          EXPECT(0, "replay %d, all_gather: member %d element %zu", rep, m, i);
          m = G;
          break;
        }
  }
  double secs[2];
  int32_t failed = -1;
  EXPECT(comm->ops->finish(comm->self, 0, secs, 2, &failed) == 0, "finish after the replays");
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
  return fails;
}

/* The decode attention's LSE merge in one round (lse_fits, lse_reduce) against the
 * plan's three steps over the same inputs on the same stream: the LSE's all_gather, the
 * kernels' lse_scale (kernels/cuda) and the all_reduce or reduce_scatter of the scaled
 * parts; bit for bit, and near a host reference. The rows hold a member's empty shard
 * (-inf, NaN parts that must not leak), a row NaN on every member (out 0) and a +inf LSE
 * (counts as -inf). Over blocks too small for one round, lse_fits declines. */
#define LSE_ROWS 100 /* (not a multiple of the combine's tile of rows) */
#define LSE_WIDTH 64
static float lse_of(int m, size_t i) {
  if (i == 5) return NAN;
  if (i == 3 && m == 1) return -INFINITY;
  if (i == 7 && m == 0) return INFINITY;
  return (float)((m * 7 + (int)i * 3) % 11) * 0.37f - 1.5f;
}

static float part_of(int m, size_t i, size_t x) {
  return i == 3 && m == 1 ? NAN : value(m, i * LSE_WIDTH + x) - 0.5f * (float)(x % 3);
}

static int member_lse(int G, int me, sc_comm *comm, cudaStream_t st, size_t block) {
  const size_t n = LSE_ROWS, w = LSE_WIDTH, nw = n * w;
  sc_kernels *k = NULL;
  EXPECT(sc_kernels_cuda_create(&k, 0, st) == 0, "kernels context");
  if (k == NULL) return fails;
  float *hl = malloc(sizeof(float) * n), *hp = malloc(sizeof(float) * nw);
  float *fused = malloc(sizeof(float) * nw), *plain = malloc(sizeof(float) * nw);
  for (size_t i = 0; i < n; i++) hl[i] = lse_of(me, i);
  for (size_t i = 0; i < n; i++)
    for (size_t x = 0; x < w; x++) hp[i * w + x] = part_of(me, i, x);
  float *lse = up(hl, sizeof(float) * n), *part = up(hp, sizeof(float) * nw);
  float *scaled = up(hp, sizeof(float) * nw), *lseg = NULL, *ra = NULL, *rb = NULL;
  if (cudaMalloc((void **)&lseg, sizeof(float) * n * (size_t)G) != cudaSuccess ||
      cudaMalloc((void **)&ra, sizeof(float) * nw) != cudaSuccess ||
      cudaMalloc((void **)&rb, sizeof(float) * nw) != cudaSuccess)
    abort();
  sc_diag d;
  int32_t seq = 0;
  comm->ops->reset(comm->self, 3);
  const sc_coll_op ops[2] = {SC_OP_ALL_REDUCE, SC_OP_REDUCE_SCATTER};
  for (int c = 0; c < 2; c++) {
    const sc_coll_op op = ops[c];
    const bool fits = comm->ops->lse_fits(comm->self, SC_GROUP_PCP, op, n, w);
    EXPECT(fits == (block >= BLOCK_LARGE), "lse_fits %d over blocks of %zu", (int)fits, block);
    if (!fits) continue;
    if (cudaMemcpy(scaled, hp, sizeof(float) * nw, cudaMemcpyHostToDevice) != cudaSuccess) abort();
    EXPECT(comm->ops->lse_reduce(comm->self, seq++, op, SC_GROUP_PCP, lse, part, ra, n, w, &d) == 0,
           "lse_reduce");
    EXPECT(comm->ops->run(comm->self, seq++, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, lse, lseg,
                          n, &d) == 0, "the LSE's gather");
    EXPECT(k->ops->lse_scale(k, G, me, (int64_t)n, (int64_t)w, lseg, scaled, NULL) == 0,
           "lse_scale");
    EXPECT(comm->ops->run(comm->self, seq++, op, SC_GROUP_PCP, SC_DT_F32, scaled, rb, nw, &d) == 0,
           "the parts' reduction");
    EXPECT(cudaStreamSynchronize(st) == cudaSuccess, "LSE round");
    const size_t rows = op == SC_OP_REDUCE_SCATTER ? n / (size_t)G : n;
    const size_t row0 = op == SC_OP_REDUCE_SCATTER ? (size_t)me * rows : 0;
    down(fused, ra, sizeof(float) * rows * w);
    down(plain, rb, sizeof(float) * rows * w);
    EXPECT(memcmp(fused, plain, sizeof(float) * rows * w) == 0,
           "%s: one round differs from the gather, scale and reduction", sc_coll_op_name(op));
    float lg[SC_IPC_MEMBERS_MAX];
    for (size_t i = 0; i < rows && fails == 0; i++) {
      for (int m = 0; m < G; m++) lg[m] = lse_of(m, row0 + i);
      const double big_l = sc_lse_merged(lg, G, 1, 0);
      for (size_t x = 0; x < w; x++) {
        double want = 0;
        for (int m = 0; m < G; m++) {
          const float f = sc_lse_weight(lg[m], big_l);
          if (f != 0.0f) want += (double)f * part_of(m, row0 + i, x);
        }
        const float got = fused[i * w + x];
        if (!(fabs(got - want) <= 1e-5 * (1 + fabs(want)))) {
          EXPECT(0, "%s: row %zu element %zu: %g, expected %g", sc_coll_op_name(op), row0 + i,
                 x, got, want);
          break;
        }
      }
    }
    down(plain, part, sizeof(float) * nw);
    EXPECT(memcmp(plain, hp, sizeof(float) * nw) == 0, "lse_reduce changed the parts");
  }
  double secs[8];
  int32_t failed = -1;
  EXPECT(comm->ops->finish(comm->self, 3, secs, seq, &failed) == 0, "finish after the LSE rounds");
  if (seq > 0) EXPECT(secs[0] > 0.0, "the LSE round's device time %g s", secs[0]);
  (void)cudaFree(lse), (void)cudaFree(part), (void)cudaFree(scaled), (void)cudaFree(lseg);
  (void)cudaFree(ra), (void)cudaFree(rb);
  free(hl), free(hp), free(fused), free(plain);
  sc_kernels_destroy(k);
  return fails;
}

/* One member's life: its comm, the collectives, the checks. Returns the number of
 * failures. */
/* The region's note (what actors/rank_ctx.c passes the shared weights' handle in):
 * member 0 exports NOTE_FLOATS values in memory of its own and notes the handle; every
 * member reads the note once it mapped the region and the others map that memory and
 * find the values. */
#define NOTE_FLOATS 4096
typedef struct test_note {
  uint32_t magic;
  unsigned char handle[SC_KCUDA_SHARE_HANDLE_BYTES];
} test_note;

static void *note_export(void *owned) {
  void *mem = NULL;
  test_note n = {.magic = 0x4e4f5445u};
  float *h = malloc(sizeof(float) * NOTE_FLOATS);
  for (size_t i = 0; i < NOTE_FLOATS; i++) h[i] = value(7, i);
  if (sc_kernels_cuda_share_alloc(sizeof(float) * NOTE_FLOATS, &mem, n.handle) != 0 ||
      cudaMemcpy(mem, h, sizeof(float) * NOTE_FLOATS, cudaMemcpyHostToDevice) != cudaSuccess ||
      sc_ipc_region_note_write(owned, &n, sizeof n) != 0)
    _exit(1);
  free(h);
  return mem;
}

static void note_check(int me, const sc_comm *comm) {
  test_note n;
  EXPECT(sc_ipc_comm_note_read(comm, SC_GROUP_PCP, &n, sizeof n) == 0 && n.magic == 0x4e4f5445u,
         "the region's note");
  if (me == 0 || n.magic != 0x4e4f5445u) return;
  void *mem = NULL;
  EXPECT(sc_kernels_cuda_share_open(n.handle, &mem) == 0, "open the noted memory");
  if (mem == NULL) return;
  float *h = malloc(sizeof(float) * NOTE_FLOATS);
  down(h, mem, sizeof(float) * NOTE_FLOATS);
  for (size_t i = 0; i < NOTE_FLOATS; i++)
    if (h[i] != value(7, i)) {
      EXPECT(0, "the noted memory: element %zu: %g", i, h[i]);
      break;
    }
  free(h);
  sc_kernels_cuda_share_close(mem);
}

static int member(int G, int me, sc_ipc_id id, void *owned, enum mode mode, size_t block) {
  if (mode != ALL && me == 1) return 0;
  sc_plan_config cfg = {.pcp = G, .dcp = G, .tp = 1};
  sc_ipc_id ids[SC_GROUP_COUNT] = {{{0}}};
  void *own[SC_GROUP_COUNT] = {NULL};
  ids[SC_GROUP_PCP] = id;
  own[SC_GROUP_PCP] = owned;
  cudaStream_t st;
  if (cudaStreamCreate(&st) != cudaSuccess) return 1;
  sc_comm comm;
  const int rc = sc_ipc_comm_create(&comm, &cfg, me, ids, own, st, mode == ABSENT ? 2000 : 60000);
  EXPECT(rc == 0, "comm create: %d", rc);
  if (rc) return fails;
  const size_t scale = block / BLOCK_SMALL; /* the elements grow with the rounds' blocks */
  const size_t NG = 3000 * scale, NR = 5000 * scale, NB = 777 * scale, NS = 1500 * scale;
  float *h = malloc(sizeof(float) * NR * 4), *back = malloc(sizeof(float) * NR * 16);
  for (size_t i = 0; i < NR; i++) h[i] = value(me, i);
  void *send = up(h, sizeof(float) * NR), *recv = NULL;
  if (cudaMalloc(&recv, sizeof(float) * NR * 16) != cudaSuccess) abort();
  sc_diag d;
  int32_t failed = -1;
  double secs[8];
  if (mode != ALL) {
    member_alone(me, &comm, st, send, recv, mode);
    sc_ipc_comm_destroy(&comm);
    return fails;
  }
  note_check(me, &comm);
  /* all_gather f32 */
  EXPECT(comm.ops->run(comm.self, 0, SC_OP_ALL_GATHER, SC_GROUP_PCP, SC_DT_F32, send, recv, NG, &d) == 0,
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
  EXPECT(comm.ops->run(comm.self, 1, SC_OP_ALL_REDUCE, SC_GROUP_PCP, SC_DT_F32, send, recv, NR, &d) == 0,
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
  EXPECT(comm.ops->run(comm.self, 2, SC_OP_ALL_REDUCE, SC_GROUP_PCP, SC_DT_BF16, sb, recv, NB, &d) == 0,
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
  EXPECT(comm.ops->run(comm.self, 3, SC_OP_REDUCE_SCATTER, SC_GROUP_PCP, SC_DT_F32, ss, recv,
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
  const int f = comm.ops->finish(comm.self, 0, secs, 4, &failed);
  EXPECT(f == 0, "finish: %d", f);
  for (int i = 0; i < 4; i++) EXPECT(secs[i] > 0.0, "collective %d: device time %g s", i, secs[i]);
  void *recv2 = NULL;
  if (cudaMalloc(&recv2, sizeof(float) * NG * 16) != cudaSuccess) abort();
  comm.ops->reset(comm.self, 2);
  member_graph(G, me, &comm, st, h, back, send, recv, recv2, NR, NG);
  member_lse(G, me, &comm, st, block);
  (void)cudaFree(recv2);
  sc_ipc_comm_destroy(&comm);
  free(h), free(back), free(hb), free(bb), free(hs);
  return fails;
}

/* G children; member 0 creates the region and writes its id to the others' pipes, then
 * waits for their exit before freeing it (it must outlive their mappings). */
static int run_group(int G, enum mode mode, size_t block) {
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
    void *owned = NULL, *noted = NULL;
    if (m == 0) {
      if (sc_ipc_region_create(G, block, &id, &owned) != 0) _exit(1);
      if (mode == ALL) noted = note_export(owned);
      for (int k = 1; k < G; k++)
        if (write(fds[k][1], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
    } else if (read(fds[m][0], &id, sizeof id) != (ssize_t)sizeof id) {
      _exit(1);
    }
    const int f = member(G, m, id, owned, mode, block);
    if (m == 0) { /* the others' mappings are closed before the region is freed */
      char c;
      for (int k = 1; k < G; k++)
        if (read(done[0], &c, 1) != 1) break;
      sc_ipc_region_destroy(owned);
      sc_kernels_cuda_share_free(noted);
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
  setenv("SPARSECP_IPC_LSE_ROUND", "1", 1); /* (off by default: backend_ipc.c) */
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
  const size_t blocks[] = {BLOCK_SMALL, BLOCK_LARGE};
  for (int G = 2; G <= 4; G += 2)
    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
      const size_t block = blocks[k];
      const int b = run_group(G, ALL, block);
      printf("%s collectives over %d processes, blocks of %zu KB, direct and replayed from a "
             "graph\n", b ? "FAIL" : "ok", G, block / 1024);
      bad += b;
    }
  int b = run_group(2, ABSENT, BLOCK_SMALL);
  printf("%s a member that never came: SC_ETIMEDOUT\n", b ? "FAIL" : "ok");
  bad += b;
  b = run_group(2, ABORT, BLOCK_SMALL);
  printf("%s a member that never came, aborted: SC_EABORTED\n", b ? "FAIL" : "ok");
  bad += b;
  return bad ? 1 : 0;
}
