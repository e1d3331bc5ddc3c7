/* cmd_bench.c - `sparsecp bench KIND [--json] [--quick] [--device ...] [formats]`. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "tools/bench.h"
#include "tools/cli.h"

static const struct {
  const char *kind;
  sc_bench_fn fn;
  const char *what;
} k_bench_kinds[] = {
    {"plan", sc_bench_plan, "time to plan one step: compact plan and index arrays"},
    {"kernels", sc_bench_kernels, "GFLOP/s of indexer, top-K, sparse attention, BLAS vs peak"},
    {"codec", sc_bench_codec, "message encode/decode rates: a small message, a step plan"},
    {"messages", sc_bench_messages, "actor message rate and round trip: inproc, ipc, tcp, tcp+curve, tap"},
    {"e2e", sc_bench_e2e,
     "prefill/decode tok/s of local CPU clusters P1N1..P4N4, step overhead;\n"
     "             --device cuda: TTFT and TPOT at long contexts on one GPU (and at\n"
     "             P2 N2 on two, where the machine has them)"},
    {"http", sc_bench_http, "req/s, TTFT, TPOT of 1/16/64 streaming clients: HTTP vs ZeroMQ"},
    {"faults", sc_bench_faults,
     "node and head kills under launch with client load: lost requests, tokens that\n"
     "             differ from a fault-free run, hangs, leftovers, recovery time (exit 1 on any)"},
};
#define NUM_KINDS (sizeof k_bench_kinds / sizeof k_bench_kinds[0])

static void help(FILE *f) {
  fprintf(f, "usage: sparsecp bench KIND [--json] [--quick] [--device cpu|cuda]\n"
             "                      [--kv-format f32|bf16|fp8_ds_mla] [--index-format kv|fp8]\n"
             "                      [--gemm-precision f32|tf32]\n\nKinds:\n");
  for (size_t i = 0; i < NUM_KINDS; i++)
    fprintf(f, "  %-10s %s\n", k_bench_kinds[i].kind, k_bench_kinds[i].what);
  fprintf(f,
          "\n  --json   print {\"bench\", \"machine\", \"date\", \"results\": [...]} "
          "(DESIGN.md §7)\n"
          "  --quick  fewer, shorter runs (a smoke test, not a measurement)\n"
          "  --device cpu|cuda  kernel backend of `bench kernels`; for `bench e2e`, cuda\n"
          "                     times long contexts on one GPU, and on two at P2 N2 where\n"
          "                     there are two (examples/model-long.json)\n"
          "  --kv-format F, --index-format I, --gemm-precision G  bench e2e --device cuda:\n"
          "                     only the cases of these KV rows, index keys and gemms (a\n"
          "                     format alone: with its default keys); without them f32 and\n"
          "                     bf16 rows with their keys, bf16 rows with fp8 keys,\n"
          "                     fp8_ds_mla rows (fp8 keys), bf16 rows with TF32 gemms\n");
}

int sc_cmd_bench(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"quick", no_argument, NULL, 'q'},
                                       {"device", required_argument, NULL, 'd'},
                                       {"kv-format", required_argument, NULL, 'k'},
                                       {"index-format", required_argument, NULL, 'i'},
                                       {"gemm-precision", required_argument, NULL, 'g'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  sc_bench b = {0};
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'j': b.json = true; break;
    case 'q': b.quick = true; break;
    case 'd': b.device = optarg; break;
    case 'k': b.kv_format = optarg; break;
    case 'i': b.index_format = optarg; break;
    case 'g': b.gemm_precision = optarg; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    help(stderr);
    return SC_EXIT_USAGE;
  }
  const char *kind = argv[optind];
  sc_bench_fn fn = NULL;
  for (size_t i = 0; i < NUM_KINDS; i++)
    if (strcmp(kind, k_bench_kinds[i].kind) == 0) fn = k_bench_kinds[i].fn;
  if (fn == NULL) {
    sc_cli_error("bench", "unknown benchmark '%s'", kind);
    help(stderr);
    return SC_EXIT_USAGE;
  }
  /* (kernels and e2e read it; the others would ignore it silently) */
  if (b.device != NULL && strcmp(kind, "kernels") != 0 && strcmp(kind, "e2e") != 0) {
    sc_cli_error("bench", "--device applies to bench kernels and bench e2e");
    return SC_EXIT_USAGE;
  }
  /* (only the GPU's long-context cases come in these formats) */
  if ((b.kv_format != NULL || b.index_format != NULL || b.gemm_precision != NULL) &&
      (strcmp(kind, "e2e") != 0 || b.device == NULL || strcmp(b.device, "cuda") != 0)) {
    sc_cli_error("bench", "--kv-format, --index-format and --gemm-precision apply to bench "
                          "e2e --device cuda");
    return SC_EXIT_USAGE;
  }
  if (b.gemm_precision != NULL && strcmp(b.gemm_precision, "f32") != 0 &&
      strcmp(b.gemm_precision, "tf32") != 0) {
    sc_cli_error("bench", "--gemm-precision %s: f32 or tf32", b.gemm_precision);
    return SC_EXIT_USAGE;
  }
  if (b.kv_format != NULL && strcmp(b.kv_format, "f32") != 0 &&
      strcmp(b.kv_format, "bf16") != 0 && strcmp(b.kv_format, "fp8_ds_mla") != 0) {
    sc_cli_error("bench", "--kv-format %s: f32, bf16 or fp8_ds_mla", b.kv_format);
    return SC_EXIT_USAGE;
  }
  if (b.index_format != NULL &&
      (strcmp(b.index_format, "kv") != 0 && strcmp(b.index_format, "fp8") != 0)) {
    sc_cli_error("bench", "--index-format %s: kv or fp8", b.index_format);
    return SC_EXIT_USAGE;
  }
  /* (bench e2e's layouts: f32 and bf16 rows with their keys, bf16 and fp8_ds_mla rows
   * with fp8 keys apart) */
  const bool fp8_keys = b.index_format != NULL && strcmp(b.index_format, "fp8") == 0;
  const bool kv_keys = b.index_format != NULL && !fp8_keys;
  if (b.kv_format != NULL && ((fp8_keys && strcmp(b.kv_format, "f32") == 0) ||
                              (kv_keys && strcmp(b.kv_format, "fp8_ds_mla") == 0))) {
    sc_cli_error("bench", "--kv-format %s --index-format %s: bench e2e has no such cases",
                 b.kv_format, b.index_format);
    return SC_EXIT_USAGE;
  }
  b.kind = kind;
  const int rc = sc_bench_run(&b, kind, fn);
  if (rc != 0) sc_cli_error("bench", "%s failed: %s", kind, sc_strerror(rc));
  /* SC_EINVAL: the benchmark refused its input (an environment selection, a device) */
  return rc == 0 ? SC_EXIT_OK : rc == SC_EINVAL ? SC_EXIT_USAGE : SC_EXIT_FAILURE;
}
