/* gpu_bench_kernels.c - runs sc_bench_kernels_cuda (tools/bench_kernels_cuda.c) outside
 * the sparsecp program: `gpu_bench_kernels [--json] [--quick]`, printing the same
 * document as `sparsecp bench kernels --device cuda`. Exits 77 without a GPU. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/kernels_cuda.h"
#include "tools/bench.h"

int main(int argc, char **argv) {
  sc_bench b = {.kind = "kernels", .device = "cuda"};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) b.json = true;
    else if (strcmp(argv[i], "--quick") == 0) b.quick = true;
    else {
      fprintf(stderr, "usage: gpu_bench_kernels [--json] [--quick]\n");
      return 2;
    }
  }
  if (sc_cuda_device_count() == 0) {
    fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  const int rc = sc_bench_run(&b, "kernels (cuda)", sc_bench_kernels_cuda);
  if (rc != 0) fprintf(stderr, "bench kernels (cuda) failed: %d\n", rc);
  return rc == 0 ? 0 : 1;
}
