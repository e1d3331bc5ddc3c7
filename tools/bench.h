/* bench.h - the benchmark harness behind `sparsecp bench KIND [--json]`.
 *
 * A report collects results and prints them at the end, either as the JSON document of
 * DESIGN.md §7 ({"bench", "machine", "date", "results": [...]}) or as a table. Each
 * result is a set of samples reduced to median, min and max. Kinds register in
 * k_bench_kinds (cmd_bench.c).
 */
#ifndef SC_BENCH_H
#define SC_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/jsonw.h"

typedef struct sc_bench {
  const char *kind;
  bool json;
  bool quick;      /* --quick: fewer and shorter runs, for smoke tests */
  const char *device; /* --device: kernel backend of `bench kernels` (NULL = cpu) */
  /* --kv-format f32|bf16|fp8_ds_mla, --index-format kv|fp8: `bench e2e --device cuda`
   * times only the cases of these rows (NULL: every one; cmd_bench checks the values) */
  const char *kv_format, *index_format;
  const char *gemm_precision; /* --gemm-precision f32|tf32: the same, of the gemms */
  sc_jsonw results; /* the JSON array of results, built incrementally */
  int num_results;
} sc_bench;

/* One measured case. params and extra are JSON object *members* without braces
 * (e.g. "\"pcp\":2,\"dcp\":2"), extra may be NULL. samples are in `unit`. */
void sc_bench_add(sc_bench *b, const char *name, const char *params, const char *unit,
                  const double *samples, int n, const char *extra);

/* Median of n samples (sorts a copy). */
double sc_bench_median(const double *samples, int n);

/* Nearest-rank percentile p (0..100] of v[0..n), sorting v in place; NAN when n is 0.
 * The one definition behind every p50/p99 the tools print. */
double sc_bench_percentile(double *v, int n, double p);

/* Calls fn(ctx) repeatedly for at least min_seconds per sample and returns seconds per
 * call in samples[0..runs). A warm-up sample is taken first and discarded. */
void sc_bench_time(void (*fn)(void *ctx), void *ctx, int runs, double min_seconds,
                   double *samples);

/* Machine description ("cpu model, N cores, kernel") into buf. */
void sc_bench_machine(char *buf, int len);

/* Which of n names a comma-separated list picks (the benches' environment choices, as
 * "tcp,tcp+curve"): sets on[i] for each name listed, leaves the others. Returns how many
 * entries it read, or -1 when one names none of them (or the list is too long). */
int sc_bench_pick(const char *list, int n, const char *(*name_of)(int i), bool *on);

typedef int (*sc_bench_fn)(sc_bench *b);

/* Runs one benchmark kind: prints the table header ("bench LABEL on MACHINE, DATE")
 * unless b->json, collects fn's results and, when fn succeeds and b->json, prints the
 * DESIGN.md §7 document with "bench": b->kind. Returns fn's status. */
int sc_bench_run(sc_bench *b, const char *label, sc_bench_fn fn);

int sc_bench_plan(sc_bench *b);
int sc_bench_kernels(sc_bench *b);
/* The CUDA kernels (tools/bench_kernels_cuda.c, built only with CUDA): achieved TFLOP/s
 * and GB/s beside the roofline floor measured in the same run (cuBLAS bf16 gemm, device
 * copy) and FlashMLA's published figures. SC_ENOTSUP without a GPU. */
int sc_bench_kernels_cuda(sc_bench *b);
int sc_bench_codec(sc_bench *b);
int sc_bench_messages(sc_bench *b);
/* End-to-end prefill/decode tok/s and runtime overhead on local CPU clusters (bench_e2e.c);
 * with --device cuda, sc_bench_e2e_long. */
int sc_bench_e2e(sc_bench *b);
/* Long contexts on one GPU (bench_e2e_long.c, built only with CUDA): TTFT of one long
 * prompt and TPOT after it, at 64, 32k and 128k tokens of examples/model-long.json. */
int sc_bench_e2e_long(sc_bench *b);
/* The HTTP front against the ZeroMQ client on one local CPU cluster (bench_http.c):
 * requests/s, TTFT and TPOT of 1, 16 and 64 streaming clients on each. */
int sc_bench_http(sc_bench *b);
/* A fault campaign under `sparsecp launch` (bench_faults.c): random node and head kills
 * under client load; counts of hangs, leftover processes, lost requests and tokens that
 * differ from a fault-free run, recovery times. Fails (SC_EIO) when a count is not 0. */
int sc_bench_faults(sc_bench *b);

#endif
