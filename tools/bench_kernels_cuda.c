/* bench_kernels_cuda.c - `sparsecp bench kernels --device cuda`: the CUDA kernels at the
 * shapes of the issue, each as achieved TFLOP/s and GB/s beside its roofline floor and,
 * for attention, beside FlashMLA's published figures.
 *
 * Ceilings are measured in the same run, first: a device-to-device copy of 1 GiB
 * (bytes read plus written) and an 8192^3 bf16 cuBLAS product (f32 accumulation), both
 * on random data. A case's floor is max(FLOPs / bf16 rate, bytes / copy rate), where
 * bytes is the least traffic the op must move (each input read once, each output written
 * once). Times come from CUDA events on the kernel context's stream after two warm-up
 * calls; each sample averages enough back-to-back calls to last min_s; the reported
 * value is the median of `runs` samples. Inputs are random (never zeros) and larger than
 * the 60 MB L2 where the real op streams from HBM.
 *
 * FLOP counts (multiply-add = 2), as the CPU benchmark's:
 *   sparse_attn   n_tok * heads * topk * (2 (dc+dr) + 2 dc)
 *   indexer       2 * H_I * d_I per (token, causal key)
 * Result names equal the CPU kernels' with param "device":"cuda"; every result carries
 * tflops, gbps, time_us, floor_us, floor_bound and fraction_of_floor; attention adds
 * flashmla_tflops (410 decode / 640 prefill, H800) and fraction_of_flashmla.
 *
 * SC_BENCH_KERNELS_ONLY=NAME runs the cases whose name contains NAME;
 * SC_BENCH_INDEXER_TOKENS=N further keeps the indexer cases of N query tokens (so that a
 * profiler's first k_idx_tc launch is the case it wants, e.g. 32768: model-long's prompt),
 * and SC_BENCH_INDEXER_KEYS=N those over N keys (131072: one decode token at 128k). */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/bf16.h"
#include "kernels/fp8_e4m3.h"
#include "kernels/cuda/kernels_cuda.h"
#include "tools/bench.h"

#define KC_MAX_RUNS 16

typedef struct {
  sc_bench *b;
  sc_kernels *k;
  cudaStream_t st;
  cudaEvent_t e0, e1;
  int runs;
  double min_s;
  double copy_gbps;   /* measured device copy, bytes read + written per second / 1e9 */
  double bf16_tflops; /* measured cuBLAS bf16 product */
} kc_ctx;

typedef int (*kc_fn)(kc_ctx *c, void *arg);

static int cuda_rc(cudaError_t e) { return e == cudaSuccess ? 0 : SC_ESYS; }

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s;
}
static float frand(uint32_t *s) { return (float)(lcg(s) >> 8) * (2.0f / 16777216.0f) - 1.0f; }

static void *dalloc(kc_ctx *c, size_t bytes) {
  void *p = NULL;
  return c->k->ops->alloc(c->k, bytes, &p) == 0 ? p : NULL;
}

/* A device buffer of n random floats in [-1, 1). */
static float *rand_f32(kc_ctx *c, size_t n, uint32_t seed) {
  float *h = malloc(n * sizeof *h);
  float *d = dalloc(c, n * sizeof *h);
  if (h && d) {
    for (size_t i = 0; i < n; i++) h[i] = frand(&seed);
    if (c->k->ops->copy(c->k, d, h, n * sizeof *h, SC_KCOPY_H2D) != 0) d = NULL;
  }
  free(h);
  return d;
}

/* `bytes` of device memory filled by repeating the host block h of blk bytes (the reads
 * of the benchmarks are random rows over far more than the L2, so repetition is
 * harmless); frees h. */
static void *repeat_block(kc_ctx *c, void *h, size_t blk, size_t bytes) {
  char *d = dalloc(c, bytes);
  if (h == NULL || d == NULL) goto out;
  if (c->k->ops->copy(c->k, d, h, blk, SC_KCOPY_H2D) != 0) {
    d = NULL;
    goto out;
  }
  for (size_t off = blk; off < bytes; off += blk)
    if (c->k->ops->copy(c->k, d + off, d, bytes - off < blk ? bytes - off : blk,
                        SC_KCOPY_D2D) != 0) {
      d = NULL;
      goto out;
    }
out:
  free(h);
  return d;
}

#define BIG_BLOCK ((size_t)64 << 20)

/* `bytes` of random bf16 values (a 64 MiB block repeated). */
static void *rand_bf16_big(kc_ctx *c, size_t bytes, uint32_t seed) {
  const size_t blk = bytes < BIG_BLOCK ? bytes : BIG_BLOCK;
  uint16_t *h = malloc(blk);
  if (h != NULL)
    for (size_t i = 0; i < blk / 2; i++) h[i] = sc_f32_to_bf16(frand(&seed));
  return repeat_block(c, h, blk, bytes);
}

/* n fp8_index key rows of dim random values, ld bytes apart (a block of up to 64 MiB of
 * rows, quantized as a cache would hold them, repeated). */
static void *rand_fp8_index_big(kc_ctx *c, int64_t n, int32_t dim, int64_t ld, uint32_t seed) {
  const size_t bytes = (size_t)n * (size_t)ld;
  const size_t rows = (bytes < BIG_BLOCK ? bytes : BIG_BLOCK) / (size_t)ld;
  uint8_t *h = calloc(rows, (size_t)ld);
  float *v = malloc(sizeof(float) * (size_t)dim);
  if (h != NULL && v != NULL)
    for (size_t r = 0; r < rows; r++) {
      for (int32_t i = 0; i < dim; i++) v[i] = frand(&seed);
      sc_kfp8_index_quantize(v, dim, h + r * (size_t)ld);
    }
  free(v);
  return repeat_block(c, h, rows * (size_t)ld, bytes);
}

static void *upload(kc_ctx *c, const void *h, size_t bytes) {
  void *d = dalloc(c, bytes);
  if (d && c->k->ops->copy(c->k, d, h, bytes, SC_KCOPY_H2D) != 0) return NULL;
  return d;
}

/* Seconds per call of fn, `runs` samples (see the file comment). */
static int time_op(kc_ctx *c, kc_fn fn, void *arg, double *samples) {
  int rc;
  for (int i = 0; i < 2; i++)
    if ((rc = fn(c, arg))) return rc;
  if ((rc = cuda_rc(cudaEventRecord(c->e0, c->st))) || (rc = fn(c, arg)) ||
      (rc = cuda_rc(cudaEventRecord(c->e1, c->st))) ||
      (rc = cuda_rc(cudaEventSynchronize(c->e1))))
    return rc;
  float ms = 0;
  if ((rc = cuda_rc(cudaEventElapsedTime(&ms, c->e0, c->e1)))) return rc;
  int reps = ms > 0 ? (int)ceil(c->min_s * 1e3 / ms) : 100;
  reps = reps < 1 ? 1 : reps > 2000 ? 2000 : reps;
  for (int r = 0; r < c->runs; r++) {
    if ((rc = cuda_rc(cudaEventRecord(c->e0, c->st)))) return rc;
    for (int i = 0; i < reps; i++)
      if ((rc = fn(c, arg))) return rc;
    if ((rc = cuda_rc(cudaEventRecord(c->e1, c->st))) ||
        (rc = cuda_rc(cudaEventSynchronize(c->e1))) ||
        (rc = cuda_rc(cudaEventElapsedTime(&ms, c->e0, c->e1))))
      return rc;
    samples[r] = (double)ms * 1e-3 / reps;
  }
  return c->k->ops->sync(c->k); /* surfaces index errors the kernels recorded */
}

/* Records one case: samples (seconds per call) become `unit` (gflop/s when flops > 0,
 * else gb/s); extra fields as the file comment says. */
static void report(kc_ctx *c, const char *name, const char *params, double flops,
                   double bytes, const double *secs, double ref_tflops) {
  double samples[KC_MAX_RUNS];
  const bool by_flops = flops > 0;
  for (int i = 0; i < c->runs; i++)
    samples[i] = (by_flops ? flops : bytes) / secs[i] * 1e-9;
  const double t = sc_bench_median(secs, c->runs);
  const double t_c = flops / (c->bf16_tflops * 1e12), t_m = bytes / (c->copy_gbps * 1e9);
  const double floor_s = t_c > t_m ? t_c : t_m;
  char extra[512];
  int len = snprintf(extra, sizeof extra,
                     "\"tflops\":%.3f,\"gbps\":%.1f,\"time_us\":%.2f,\"floor_us\":%.2f,"
                     "\"floor_bound\":\"%s\",\"fraction_of_floor\":%.4f,"
                     "\"bf16_peak_tflops\":%.1f,\"copy_gbps\":%.1f",
                     flops / t * 1e-12, bytes / t * 1e-9, t * 1e6, floor_s * 1e6,
                     t_c > t_m ? "compute" : "memory", floor_s / t, c->bf16_tflops,
                     c->copy_gbps);
  if (ref_tflops > 0)
    snprintf(extra + len, sizeof extra - (size_t)len,
             ",\"flashmla_tflops\":%.0f,\"fraction_of_flashmla\":%.4f", ref_tflops,
             flops / t * 1e-12 / ref_tflops);
  sc_bench_add(c->b, name, params, by_flops ? "gflop/s" : "gb/s", samples, c->runs, extra);
}

/* ---- ceilings ---- */

typedef struct {
  void *a, *b;
  size_t bytes;
} copy_case;

static int run_copy(kc_ctx *c, void *p) {
  copy_case *cc = p;
  return c->k->ops->copy(c->k, cc->b, cc->a, cc->bytes, SC_KCOPY_D2D);
}

typedef struct {
  cublasHandle_t h;
  int n;
  void *a, *b, *d;
} gemm_case;

static int run_gemm(kc_ctx *c, void *p) {
  (void)c;
  gemm_case *g = p;
  const float alpha = 1.0f, beta = 0.0f;
  return cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &alpha, g->a,
                      CUDA_R_16BF, g->n, g->b, CUDA_R_16BF, g->n, &beta, g->d, CUDA_R_16BF,
                      g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS
             ? 0
             : SC_ESYS;
}

static int ceilings(kc_ctx *c) {
  double secs[KC_MAX_RUNS];
  int rc = SC_ENOMEM;
  const size_t bytes = c->b->quick ? ((size_t)64 << 20) : ((size_t)1 << 30);
  copy_case cc = {rand_bf16_big(c, bytes, 11), dalloc(c, bytes), bytes};
  gemm_case g = {NULL, c->b->quick ? 2048 : 8192, NULL, NULL, NULL};
  const size_t gb = sizeof(uint16_t) * (size_t)g.n * (size_t)g.n;
  g.a = rand_bf16_big(c, gb, 12);
  g.b = rand_bf16_big(c, gb, 13);
  g.d = dalloc(c, gb);
  if (!cc.a || !cc.b || !g.a || !g.b || !g.d) goto out;
  double copy_secs[KC_MAX_RUNS];
  if ((rc = time_op(c, run_copy, &cc, copy_secs))) goto out;
  c->copy_gbps = 2.0 * (double)bytes / sc_bench_median(copy_secs, c->runs) * 1e-9;
  if (cublasCreate(&g.h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(g.h, c->st) != CUBLAS_STATUS_SUCCESS) {
    rc = SC_ESYS;
    goto out;
  }
  if ((rc = time_op(c, run_gemm, &g, secs))) goto out;
  const double flops = 2.0 * g.n * (double)g.n * g.n;
  c->bf16_tflops = flops / sc_bench_median(secs, c->runs) * 1e-12;
  char params[320];
  struct cudaDeviceProp prop;
  if ((rc = cuda_rc(cudaGetDeviceProperties(&prop, 0)))) goto out;
  snprintf(params, sizeof params,
           "\"device\":\"cuda\",\"gpu\":\"%.64s\",\"sms\":%d,\"bytes\":%zu,\"role\":\"ceiling\"",
           prop.name, prop.multiProcessorCount, bytes);
  report(c, "kernel.copy", params, 0, 2.0 * (double)bytes, copy_secs, 0);
  snprintf(params, sizeof params,
           "\"device\":\"cuda\",\"m\":%d,\"n\":%d,\"k\":%d,\"dtype\":\"bf16\",\"role\":\"ceiling\"",
           g.n, g.n, g.n);
  report(c, "kernel.gemm", params, flops, 3.0 * (double)gb, secs, 0);
out:
  if (g.h) cublasDestroy(g.h);
  void *bufs[] = {cc.a, cc.b, g.a, g.b, g.d};
  for (int i = 0; i < 5; i++)
    if (bufs[i]) c->k->ops->free(c->k, bufs[i]);
  return rc;
}

/* ---- sparse attention ---- */

typedef struct {
  sc_attn_args a;
} attn_case;

static int run_attn(kc_ctx *c, void *p) { return c->k->ops->sparse_attn(c->k, &((attn_case *)p)->a); }

/* n_req requests of `ctx` rows each; token t belongs to request t / per_req and selects
 * topk random rows of its request. ref: FlashMLA's figure for the shape. */
static int bench_attn(kc_ctx *c, const char *name, int32_t n_tok, int32_t per_req,
                      int32_t heads, int32_t topk, int64_t ctx, sc_kfmt fmt, double ref) {
  const int32_t dc = 512, dr = 64, w = dc + dr;
  const int32_t n_req = (n_tok + per_req - 1) / per_req;
  const int64_t rows = (int64_t)n_req * ctx;
  const int64_t rb = sc_kfmt_row_bytes(fmt, w);
  int rc = SC_ENOMEM;
  int32_t *sel = malloc(sizeof(int32_t) * (size_t)n_tok * topk);
  void *kv = NULL, *q = NULL, *dsel = NULL, *out = NULL, *lse = NULL, *src = NULL, *slots = NULL;
  if (sel == NULL) goto out;
  uint32_t seed = 7;
  for (int64_t t = 0; t < n_tok; t++)
    for (int32_t i = 0; i < topk; i++)
      sel[t * topk + i] = (int32_t)((t / per_req) * ctx + (int64_t)(lcg(&seed) >> 4) % ctx);
  if (fmt == SC_KFMT_BF16) {
    kv = rand_bf16_big(c, (size_t)(rows * rb), 9);
  } else if (fmt == SC_KFMT_F32) {
    kv = rand_f32(c, (size_t)(rows * w), 9);
  } else { /* quantize random f32 rows chunk by chunk with kv_write */
    const int64_t chunk = 32768;
    int32_t *h = malloc(sizeof(int32_t) * (size_t)chunk);
    kv = dalloc(c, (size_t)(rows * rb));
    src = rand_f32(c, (size_t)(chunk * w), 10);
    slots = dalloc(c, sizeof(int32_t) * (size_t)chunk);
    if (h == NULL || kv == NULL || src == NULL || slots == NULL) {
      free(h);
      goto out;
    }
    int wrc = 0;
    for (int64_t base = 0; base < rows && wrc == 0; base += chunk) {
      const int64_t n = rows - base < chunk ? rows - base : chunk;
      for (int64_t i = 0; i < n; i++) h[i] = (int32_t)(base + i);
      /* copy stages h, so h may be refilled right after */
      if ((wrc = c->k->ops->copy(c->k, slots, h, sizeof(int32_t) * (size_t)n, SC_KCOPY_H2D)) == 0)
        wrc = c->k->ops->kv_write(c->k, n, w, src, w, slots,
                                  (sc_krows){kv, SC_KFMT_FP8_DS_MLA, rb, rows});
    }
    free(h);
    if (wrc != 0 || (wrc = c->k->ops->sync(c->k)) != 0) {
      rc = wrc;
      goto out;
    }
  }
  q = rand_f32(c, (size_t)n_tok * heads * w, 8);
  dsel = upload(c, sel, sizeof(int32_t) * (size_t)n_tok * topk);
  out = dalloc(c, sizeof(float) * (size_t)n_tok * heads * dc);
  lse = dalloc(c, sizeof(float) * (size_t)n_tok * heads);
  if (!kv || !q || !dsel || !out || !lse) goto out;
  attn_case ac = {{.n_tok = n_tok, .n_heads = heads, .dc = dc, .dr = dr, .topk = topk,
                   .scale = 1.0f / sqrtf((float)w), .q = q, .ld_q = (int64_t)heads * w,
                   .kv = {kv, fmt, fmt == SC_KFMT_FP8_DS_MLA ? rb : w, rows}, .sel = dsel,
                   .ld_sel = topk, .out = out, .ld_out = (int64_t)heads * dc, .lse = lse,
                   .ld_lse = heads, .decode = strstr(name, ".decode") != NULL}};
  double secs[KC_MAX_RUNS];
  if ((rc = time_op(c, run_attn, &ac, secs))) goto out;
  char params[256];
  snprintf(params, sizeof params,
           "\"device\":\"cuda\",\"tokens\":%d,\"q_per_request\":%d,\"heads\":%d,\"topk\":%d,"
           "\"kv_width\":%d,\"kv_rows\":%lld,\"kv\":\"%s\"",
           n_tok, per_req, heads, topk, w, (long long)rows,
           fmt == SC_KFMT_BF16 ? "bf16" : fmt == SC_KFMT_F32 ? "f32" : "fp8_ds_mla");
  const double pairs = (double)n_tok * topk;
  const double flops = pairs * heads * (2.0 * w + 2.0 * dc);
  const double bytes = pairs * ((double)rb + 4) +                 /* selected rows, indices */
                       (double)n_tok * heads * (4.0 * w + 4.0 * dc + 4); /* q, out, lse */
  report(c, name, params, flops, bytes, secs, ref);
out:
  free(sel);
  void *bufs[] = {kv, q, dsel, out, lse, src, slots};
  for (int i = 0; i < 7; i++)
    if (bufs[i]) c->k->ops->free(c->k, bufs[i]);
  return rc;
}

/* ---- indexer ---- */

typedef struct {
  sc_indexer_args a;
} idx_case;

static int run_idx(kc_ctx *c, void *p) { return c->k->ops->indexer_topk(c->k, &((idx_case *)p)->a); }

/* IDX_DECODE: every token its own request of ctx keys, all visible (a batch of decode
 * tokens); IDX_SHARED: every token sees all ctx keys of one request, the problem
 * bench/indexer_ref.py's decode case solves (its tokens share one key set), so that the
 * two compare like for like; IDX_PREFILL: n_tok consecutive query tokens at the end of
 * one request of ctx keys (causal). */
typedef enum { IDX_DECODE, IDX_SHARED, IDX_PREFILL } idx_phase;

static int bench_indexer(kc_ctx *c, idx_phase phase, int32_t n_tok, int32_t heads, int32_t dim,
                         int32_t ctx, int32_t topk, sc_kfmt kfmt) {
  const bool decode = phase == IDX_DECODE;
  const char *only_tok = getenv("SC_BENCH_INDEXER_TOKENS");
  const char *only_keys = getenv("SC_BENCH_INDEXER_KEYS");
  if ((only_tok && only_tok[0] && atoi(only_tok) != n_tok) ||
      (only_keys && only_keys[0] && atoi(only_keys) != ctx))
    return 0;
  const int64_t nkeys = decode ? (int64_t)n_tok * ctx : ctx;
  int32_t *qpos = malloc(sizeof(int32_t) * (size_t)n_tok), *kb = malloc(sizeof(int32_t) * (size_t)n_tok),
          *ke = malloc(sizeof(int32_t) * (size_t)n_tok), *kpos = malloc(sizeof(int32_t) * (size_t)nkeys);
  void *bufs[8] = {0};
  int rc = SC_ENOMEM;
  if (!qpos || !kb || !ke || !kpos) goto out;
  double pairs = 0;
  for (int32_t t = 0; t < n_tok; t++) {
    kb[t] = decode ? t * ctx : 0;
    ke[t] = kb[t] + ctx;
    qpos[t] = phase == IDX_PREFILL ? ctx - n_tok + t : ctx - 1;
    pairs += qpos[t] + 1;
  }
  for (int64_t e = 0; e < nkeys; e++) kpos[e] = (int32_t)(e % ctx);
  bufs[0] = rand_f32(c, (size_t)n_tok * heads * dim, 3);
  bufs[1] = rand_f32(c, (size_t)n_tok * heads, 4);
  /* fp8_index rows as the KV cache lays them out */
  const int64_t ld = kfmt == SC_KFMT_FP8_INDEX ? SC_KFP8_INDEX_ROW_STEP(dim) : dim;
  const double row_bytes = kfmt == SC_KFMT_FP8_INDEX ? (double)SC_KFP8_INDEX_ROW_BYTES(dim)
                                                      : (double)sc_kfmt_size(kfmt) * dim;
  bufs[2] = kfmt == SC_KFMT_F32        ? (void *)rand_f32(c, (size_t)nkeys * dim, 5)
            : kfmt == SC_KFMT_FP8_INDEX ? rand_fp8_index_big(c, nkeys, dim, ld, 5)
                                        : rand_bf16_big(c, sizeof(uint16_t) * (size_t)nkeys * dim, 5);
  bufs[3] = upload(c, qpos, sizeof(int32_t) * (size_t)n_tok);
  bufs[4] = upload(c, kb, sizeof(int32_t) * (size_t)n_tok);
  bufs[5] = upload(c, ke, sizeof(int32_t) * (size_t)n_tok);
  bufs[6] = upload(c, kpos, sizeof(int32_t) * (size_t)nkeys);
  bufs[7] = dalloc(c, sizeof(sc_kcand) * (size_t)n_tok * topk);
  for (int i = 0; i < 8; i++)
    if (bufs[i] == NULL) goto out;
  idx_case ic = {{.n_tok = n_tok, .n_heads = heads, .dim = dim, .topk = topk, .q = bufs[0],
                  .ld_q = (int64_t)heads * dim, .w = bufs[1], .ld_w = heads, .q_pos = bufs[3],
                  .keys = {bufs[2], kfmt, ld, nkeys}, .key_pos = bufs[6],
                  .key_begin = bufs[4], .key_end = bufs[5], .out_cand = bufs[7],
                  .max_keys = ctx, /* (the model passes its block table's width) */
                  /* (a prompt's tokens share their list, as the forward pass says) */
                  .keys_shared = !decode}};
  double secs[KC_MAX_RUNS];
  if ((rc = time_op(c, run_idx, &ic, secs))) goto out;
  char params[256];
  snprintf(params, sizeof params,
           "\"device\":\"cuda\",\"phase\":\"%s\",\"tokens\":%d,\"index_heads\":%d,"
           "\"index_dim\":%d,\"keys\":%d,\"topk\":%d,\"keys_fmt\":\"%s\"",
           phase == IDX_DECODE ? "decode" : phase == IDX_SHARED ? "decode_shared" : "prefill",
           n_tok, heads, dim, ctx, topk,
           kfmt == SC_KFMT_F32 ? "f32" : kfmt == SC_KFMT_FP8_INDEX ? "fp8_index" : "bf16");
  const double flops = 2.0 * heads * dim * pairs;
  const double bytes = (decode ? (double)nkeys : (double)ctx) * (row_bytes + 4.0) +
                       (double)n_tok * (4.0 * heads * dim + 4.0 * heads + 8.0 * topk);
  report(c, "kernel.indexer", params, flops, bytes, secs, 0);
out:
  for (int i = 0; i < 8; i++)
    if (bufs[i]) c->k->ops->free(c->k, bufs[i]);
  free(qpos), free(kb), free(ke), free(kpos);
  return rc;
}

/* ---- top-K merge, gather, KV write ---- */

typedef struct {
  int32_t n_tok, shards, topk;
  void *cand, *out;
} merge_case;

static int run_merge(kc_ctx *c, void *p) {
  merge_case *m = p;
  return c->k->ops->topk_merge(c->k, m->n_tok, m->shards, m->topk, m->cand, m->out, NULL);
}

static int bench_merge(kc_ctx *c, int32_t n_tok, int32_t shards, int32_t topk) {
  const size_t n = (size_t)n_tok * shards * topk;
  sc_kcand *h = malloc(n * sizeof *h);
  merge_case m = {n_tok, shards, topk, NULL, NULL};
  int rc = SC_ENOMEM;
  if (h == NULL) goto out;
  uint32_t seed = 6;
  for (int32_t r = 0; r < shards; r++)
    for (int32_t t = 0; t < n_tok; t++)
      for (int32_t i = 0; i < topk; i++)
        h[((size_t)r * n_tok + t) * topk + i] = (sc_kcand){frand(&seed), i * shards + r};
  m.cand = upload(c, h, n * sizeof *h);
  m.out = dalloc(c, sizeof(int32_t) * (size_t)n_tok * topk);
  if (!m.cand || !m.out) goto out;
  double secs[KC_MAX_RUNS];
  if ((rc = time_op(c, run_merge, &m, secs))) goto out;
  char params[160];
  snprintf(params, sizeof params,
           "\"device\":\"cuda\",\"tokens\":%d,\"shards\":%d,\"topk\":%d,\"op\":\"merge\"", n_tok,
           shards, topk);
  report(c, "kernel.topk", params, 0, (double)n * 8 + (double)n_tok * topk * 4, secs, 0);
out:
  if (m.cand) c->k->ops->free(c->k, m.cand);
  if (m.out) c->k->ops->free(c->k, m.out);
  free(h);
  return rc;
}

typedef struct {
  int64_t n, width;
  sc_krows src, dst;
  const int32_t *idx;
} gather_case;

static int run_gather(kc_ctx *c, void *p) {
  gather_case *g = p;
  return c->k->ops->gather_rows(c->k, g->n, g->width, g->src, g->idx, g->dst);
}

/* The context_kv deinterleave of SPEC.md §5 with N = 4, I = 1: token p comes from
 * workspace row (p mod 4) * S + p / 4; rows of kv_width + index_dim bf16 values. */
static int bench_gather(kc_ctx *c, int64_t n, int64_t width) {
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
  gather_case g = {n, width, {0}, {0}, NULL};
  int rc = SC_ENOMEM;
  if (idx == NULL) goto out;
  for (int64_t p = 0; p < n; p++) idx[p] = (int32_t)((p % 4) * (n / 4) + p / 4);
  g.src = (sc_krows){rand_bf16_big(c, sizeof(uint16_t) * (size_t)(n * width), 14), SC_KFMT_BF16,
                     width, n};
  g.dst = (sc_krows){dalloc(c, sizeof(uint16_t) * (size_t)(n * width)), SC_KFMT_BF16, width, n};
  g.idx = upload(c, idx, sizeof(int32_t) * (size_t)n);
  if (!g.src.data || !g.dst.data || !g.idx) goto out;
  double secs[KC_MAX_RUNS];
  if ((rc = time_op(c, run_gather, &g, secs))) goto out;
  char params[160];
  snprintf(params, sizeof params,
           "\"device\":\"cuda\",\"rows\":%lld,\"width\":%lld,\"fmt\":\"bf16\",\"op\":\"deinterleave\"",
           (long long)n, (long long)width);
  report(c, "kernel.gather", params, 0, (double)n * (4.0 * width + 4), secs, 0);
out:
  if (g.src.data) c->k->ops->free(c->k, g.src.data);
  if (g.dst.data) c->k->ops->free(c->k, g.dst.data);
  if (g.idx) c->k->ops->free(c->k, (void *)g.idx);
  free(idx);
  return rc;
}

typedef struct {
  int64_t n;
  const float *src;
  const int32_t *slots;
  sc_krows cache;
} kvw_case;

static int run_kvw(kc_ctx *c, void *p) {
  kvw_case *v = p;
  return c->k->ops->kv_write(c->k, v->n, 576, v->src, 576, v->slots, v->cache);
}

static int bench_kv_write(kc_ctx *c, int64_t n, sc_kfmt fmt) {
  const int64_t rb = sc_kfmt_row_bytes(fmt, 576);
  int32_t *h = malloc(sizeof(int32_t) * (size_t)n);
  kvw_case v = {n, NULL, NULL, {0}};
  int rc = SC_ENOMEM;
  if (h == NULL) goto out;
  for (int64_t i = 0; i < n; i++) h[i] = (int32_t)((i * 7919) % n); /* a permutation (7919 is odd, n a power of two) */
  v.src = rand_f32(c, (size_t)(n * 576), 15);
  v.slots = upload(c, h, sizeof(int32_t) * (size_t)n);
  v.cache = (sc_krows){dalloc(c, (size_t)(n * rb)), fmt, fmt == SC_KFMT_FP8_DS_MLA ? rb : 576, n};
  if (!v.src || !v.slots || !v.cache.data) goto out;
  double secs[KC_MAX_RUNS];
  if ((rc = time_op(c, run_kvw, &v, secs))) goto out;
  char params[160];
  snprintf(params, sizeof params, "\"device\":\"cuda\",\"rows\":%lld,\"width\":576,\"kv\":\"%s\"",
           (long long)n, fmt == SC_KFMT_BF16 ? "bf16" : "fp8_ds_mla");
  report(c, "kernel.kv_write", params, 0, (double)n * (576.0 * 4 + (double)rb + 4), secs, 0);
out:
  if (v.src) c->k->ops->free(c->k, (void *)v.src);
  if (v.slots) c->k->ops->free(c->k, (void *)v.slots);
  if (v.cache.data) c->k->ops->free(c->k, v.cache.data);
  free(h);
  return rc;
}

/* SC_BENCH_KERNELS_ONLY=substring restricts the cases to names containing it (the
 * ceilings always run: every floor needs them), e.g. for a profiler run. */
static bool wanted(const char *name) {
  const char *only = getenv("SC_BENCH_KERNELS_ONLY");
  return only == NULL || only[0] == 0 || strstr(name, only) != NULL;
}

int sc_bench_kernels_cuda(sc_bench *b) {
  if (sc_cuda_device_count() == 0) {
    fprintf(stderr, "sparsecp bench kernels: no CUDA device\n");
    return SC_ENOTSUP;
  }
  kc_ctx c = {.b = b, .runs = b->quick ? 3 : 10, .min_s = b->quick ? 0.002 : 0.03};
  int rc = sc_kernels_cuda_create(&c.k, 0, NULL);
  if (rc) return rc;
  c.st = (cudaStream_t)sc_kernels_cuda_stream(c.k);
  if ((rc = cuda_rc(cudaEventCreate(&c.e0))) || (rc = cuda_rc(cudaEventCreate(&c.e1)))) goto out;
  const bool q = b->quick;
  if ((rc = ceilings(&c))) goto out;
  /* sparse decode: batch 128, 128 heads, 1 and 2 query tokens per request, top-K 2048 */
  for (int sq = 1; sq <= 2 && wanted("kernel.sparse_attn.decode"); sq++)
    for (int f = 0; f < 2; f++)
      if ((rc = bench_attn(&c, "kernel.sparse_attn.decode", (q ? 8 : 128) * sq, sq, 128,
                           q ? 256 : 2048, q ? 4096 : 16384,
                           f ? SC_KFMT_FP8_DS_MLA : SC_KFMT_BF16, 410)))
        goto out;
  /* sparse prefill: 2048 query tokens of one request over a 64K-row workspace; and over
   * 2048 rows (2.4 MB, resident in L2): the kernel's rate when its rows arrive fast, so
   * that the two say how much of the first is the rows' way from memory (FlashMLA runs
   * both shapes too: bench/attn_anchor.py) */
  if (wanted("kernel.sparse_attn.prefill") &&
      (rc = bench_attn(&c, "kernel.sparse_attn.prefill", q ? 64 : 2048, q ? 64 : 2048, 128,
                       q ? 256 : 2048, q ? 8192 : 65536, SC_KFMT_BF16, 640)))
    goto out;
  if (wanted("kernel.sparse_attn.prefill_l2") &&
      (rc = bench_attn(&c, "kernel.sparse_attn.prefill_l2", q ? 64 : 2048, q ? 64 : 2048, 128,
                       q ? 256 : 2048, q ? 256 : 2048, SC_KFMT_BF16, 0)))
    goto out;
  /* examples/model-long.json's attention (8 heads, top-K 2048 over a 32k context), one
   * decode token and a 4096-token prefill chunk, with the KV rows in f32 (the pipeline's
   * default: the CUDA-core split kernel), in bf16 (--kv-format bf16: the few-heads
   * tensor-core kernel, the decode token in splits) and in fp8_ds_mla (the same kernel,
   * its tiles dequantized from staged rows) */
  static const sc_kfmt long_fmts[] = {SC_KFMT_F32, SC_KFMT_BF16, SC_KFMT_FP8_DS_MLA};
  for (size_t fi = 0; fi < sizeof long_fmts / sizeof long_fmts[0]; fi++) {
    const sc_kfmt fmt = long_fmts[fi];
    if (wanted("kernel.sparse_attn.decode") &&
        (rc = bench_attn(&c, "kernel.sparse_attn.decode", 1, 1, 8, q ? 256 : 2048,
                         q ? 4096 : 32768, fmt, 0)))
      goto out;
    if (wanted("kernel.sparse_attn.prefill") &&
        (rc = bench_attn(&c, "kernel.sparse_attn.prefill", q ? 64 : 4096, q ? 64 : 4096, 8,
                         q ? 256 : 2048, q ? 4096 : 32768, fmt, 0)))
      goto out;
  }
  /* DeepSeek-V3.2's indexer shape over bf16 keys, and over fp8_index keys as the model
   * keeps them (half the bytes a key); the decode tokens also over one shared context,
   * PyTorch's anchor's problem */
  for (int f8 = 0; f8 < 2 && wanted("kernel.indexer"); f8++) {
    const sc_kfmt kf = f8 ? SC_KFMT_FP8_INDEX : SC_KFMT_BF16;
    if ((rc = bench_indexer(&c, IDX_DECODE, q ? 8 : 128, 64, 128, q ? 4096 : 16384,
                            q ? 256 : 2048, kf)) ||
        (rc = bench_indexer(&c, IDX_PREFILL, q ? 64 : 1024, 64, 128, q ? 4096 : 16384,
                            q ? 256 : 2048, kf)) ||
        (rc = bench_indexer(&c, IDX_SHARED, q ? 8 : 128, 64, 128, q ? 4096 : 16384,
                            q ? 256 : 2048, kf)))
      goto out;
  }
  /* examples/model-long.json's indexer (4 heads x 64, top-K 2048, keys in its f32 cache,
   * then in a cache of bf16 rows, as bench e2e's runs keep them): one decode token over
   * a long context, what a decode step at 32k and 128k context pays per layer, and a
   * whole 32k prompt in one step, what its prefill pays per layer */
  for (int bf = 0; bf < 2 && wanted("kernel.indexer"); bf++)
    for (int32_t ctx = 32768; ctx <= 131072; ctx *= 4)
      if ((rc = bench_indexer(&c, IDX_DECODE, 1, 4, 64, q ? ctx / 8 : ctx, q ? 256 : 2048,
                              bf ? SC_KFMT_BF16 : SC_KFMT_F32)))
        goto out;
  /* (and the same prompt over bf16 keys, as a cache of bf16 rows holds them; alone with
   * SC_BENCH_KERNELS_ONLY=kernel.indexer.prompt, for a profiler) */
  for (int bf = 0; bf < 2 && wanted("kernel.indexer.prompt"); bf++)
    if ((rc = bench_indexer(&c, IDX_PREFILL, q ? 2048 : 32768, 4, 64, q ? 2048 : 32768,
                            q ? 256 : 2048, bf ? SC_KFMT_BF16 : SC_KFMT_F32)))
      goto out;
  if (wanted("kernel.topk") && (rc = bench_merge(&c, q ? 8 : 128, 4, q ? 256 : 2048))) goto out;
  /* a decode step's merge under DCP: a few tokens, one block each (their time is the op's) */
  if (wanted("kernel.topk") && (rc = bench_merge(&c, 4, 4, q ? 256 : 2048))) goto out;
  if (wanted("kernel.gather") && (rc = bench_gather(&c, q ? 16384 : 262144, 704))) goto out;
  if (wanted("kernel.kv_write") &&
      ((rc = bench_kv_write(&c, q ? 16384 : 131072, SC_KFMT_BF16)) ||
       (rc = bench_kv_write(&c, q ? 16384 : 131072, SC_KFMT_FP8_DS_MLA))))
    goto out;
out:
  if (c.e0) cudaEventDestroy(c.e0);
  if (c.e1) cudaEventDestroy(c.e1);
  sc_kernels_destroy(c.k);
  return rc;
}
