/* ctx_share.cu - what one GPU costs processes that share it in lock step.
 *
 * Several ranks of a cluster on one GPU (run --gpus 1 --pcp 4 ...) are several processes,
 * each with its own CUDA context, that meet at every collective: each waits for its own
 * kernels (a device-to-host copy and a stream sync), then for the other processes (the
 * host exchange). This program is that pattern without the rest of sparsecp: PROCS
 * processes, each ITERS times launching KERNELS tiny kernels, copying 4 KiB back to pinned
 * memory, syncing its stream, and meeting the others at a spinning barrier in shared
 * memory. It prints the median iteration time. Comparing PROCS=1 with PROCS=4, and four
 * processes with and without an MPS server (one shared context), separates what the
 * sharing costs from what the work costs.
 *
 * Build: the CUDA build makes it (build/tests/gpu/ctx_share); or nvcc -O2 -arch=sm_90 -o
 *        ctx_share tests/gpu/ctx_share.cu
 * Usage: ctx_share PROCS ITERS KERNELS
 */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__global__ void touch(int *x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

typedef struct shared {
  int arrived; /* __atomic builtins: nvcc compiles this host code as C++ */
  int round;
  int failed;  /* a process ended in error: the others leave the barrier */
  double median_us[64];
} shared;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Sense by round number: the last to arrive resets the count and opens the next round. */
static void barrier(shared *s, int procs, int *my_round) {
  const int r = (*my_round)++;
  if (__atomic_fetch_add(&s->arrived, 1, __ATOMIC_ACQ_REL) == procs - 1) {
    __atomic_store_n(&s->arrived, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->round, r + 1, __ATOMIC_RELEASE);
  } else {
    while (__atomic_load_n(&s->round, __ATOMIC_ACQUIRE) <= r)
      if (__atomic_load_n(&s->failed, __ATOMIC_RELAXED)) _exit(1);
  }
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define CHECK(call)                                                               \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                 \
      _exit(1);                                                                   \
    }                                                                             \
  } while (0)

static void child(shared *s, int me, int procs, int iters, int kernels) {
  const int n = 1024;
  int *dev, *host;
  cudaStream_t st;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CHECK(cudaMalloc(&dev, n * sizeof(int)));
  CHECK(cudaMallocHost(&host, n * sizeof(int)));
  CHECK(cudaMemsetAsync(dev, 0, n * sizeof(int), st));
  double *t = (double *)malloc(sizeof(double) * (size_t)iters);
  if (t == NULL) {
    fprintf(stderr, "out of memory\n");
    _exit(1);
  }
  int my_round = 0;
  const int warm = 50;
  for (int i = -warm; i < iters; i++) {
    const double t0 = now_us();
    for (int k = 0; k < kernels; k++) touch<<<(n + 255) / 256, 256, 0, st>>>(dev, n);
    CHECK(cudaMemcpyAsync(host, dev, n * sizeof(int), cudaMemcpyDeviceToHost, st));
    CHECK(cudaStreamSynchronize(st));
    barrier(s, procs, &my_round);
    if (i >= 0) t[i] = now_us() - t0;
  }
  qsort(t, (size_t)iters, sizeof *t, cmp);
  s->median_us[me] = t[iters / 2];
  _exit(0);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PROCS ITERS KERNELS\n", argv[0]);
    return 2;
  }
  const int procs = atoi(argv[1]), iters = atoi(argv[2]), kernels = atoi(argv[3]);
  if (procs < 1 || procs > 64 || iters < 1 || kernels < 0) {
    fprintf(stderr, "PROCS 1..64, ITERS >= 1, KERNELS >= 0\n");
    return 2;
  }
  shared *s = (shared *)mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) return perror("mmap"), 1;
  memset(s, 0, sizeof *s);
  /* Fork before any CUDA call: a context does not survive fork. */
  for (int p = 0; p < procs; p++) {
    const pid_t pid = fork();
    if (pid < 0) return perror("fork"), 1;
    if (pid == 0) child(s, p, procs, iters, kernels);
  }
  int failed = 0, status;
  while (wait(&status) > 0)
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed = 1;
      __atomic_store_n(&s->failed, 1, __ATOMIC_RELAXED);
    }
  if (failed) return 1;
  double worst = 0;
  for (int p = 0; p < procs; p++) worst = s->median_us[p] > worst ? s->median_us[p] : worst;
  printf("{\"procs\": %d, \"iters\": %d, \"kernels\": %d, \"median_us\": %.1f}\n", procs, iters,
         kernels, worst);
  return 0;
}
