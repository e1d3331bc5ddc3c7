/* gpu_bench_kernels.c - runs sc_bench_kernels_cuda (tools/bench_kernels_cuda.c) outside
 * the sparsecp program: `gpu_bench_kernels [--json] [--quick]`, printing the same
 * document as `sparsecp bench kernels --device cuda`. Exits 77 without a GPU. */
#include <stdio.h>
#include <string.h>
#include <time.h>

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
  char machine[512], date[32];
  sc_bench_machine(machine, sizeof machine);
  const time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  if (!b.json) printf("bench kernels (cuda) on %s, %s\n", machine, date);
  sc_jsonw_init(&b.results);
  sc_jsonw_arr_begin(&b.results);
  const int rc = sc_bench_kernels_cuda(&b);
  sc_jsonw_arr_end(&b.results);
  if (rc == 0 && b.json) {
    sc_jsonw w;
    sc_jsonw_init(&w);
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_str(&w, "bench", "kernels");
    sc_jsonw_kv_str(&w, "machine", machine);
    sc_jsonw_kv_str(&w, "date", date);
    sc_jsonw_key(&w, "results");
    sc_jsonw_raw(&w, sc_jsonw_str(&b.results), b.results.len);
    sc_jsonw_obj_end(&w);
    puts(sc_jsonw_str(&w));
    sc_jsonw_free(&w);
  }
  sc_jsonw_free(&b.results);
  if (rc != 0) fprintf(stderr, "bench kernels (cuda) failed: %d\n", rc);
  return rc == 0 ? 0 : 1;
}
