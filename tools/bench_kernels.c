/* bench_kernels.c - `sparsecp bench kernels [--device cpu] [--json]`: achieved GFLOP/s of
 * the sparse-attention kernels beside the BLAS peak measured in the same run
 * (`--device cuda` goes to bench_kernels_cuda.c, which measures against the GPU's
 * roofline instead).
 *
 * Everything goes through the kernel API (kernels/kernels.h), with inputs moved by the
 * API's copy. FLOP counts (documented in docs/kernels.md) count multiply-adds as 2:
 *   gemm            2 m n k
 *   indexer         2 H_I d_I per (token, causal key)          (the scores; the ReLU,
 *                   head sum and selection are extra work, not counted)
 *   sparse_attn     2 H (dc + dr) + 2 H dc per (token, selected row)
 *   topk (merge)    no FLOPs: reported as candidates per second (unit gcand/s)
 *   gather          the deinterleave of a context_kv workspace, unit gb/s (read+write)
 * Each result carries peak_gflops (the large sgemm of this run) and fraction_of_peak,
 * plus per_cpu_second (the same rate per CPU-second of this process: robust to other
 * load on a shared machine), cores_used (CPU time over wall time) and
 * fraction_of_peak_cpu (per_cpu_second over the peak sgemm's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "kernels/bf16.h"
#include "kernels/kernels.h"
#include "model/sampling.h"
#include "tools/bench.h"

typedef struct {
  sc_bench *b;
  sc_kernels *k;
  int threads;
  int runs;
  double min_s;
  double peak;     /* GFLOP/s of the large sgemm */
  double peak_cpu; /* the same per CPU-second */
  int rc;      /* first op failure inside a timed closure */
  int64_t calls; /* closure calls, counted to turn process CPU time into a rate */
} kb_ctx;

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Uploads n floats uniform in [lo, hi) (seeded LCG: identical inputs every run). */
static void *upload_f32(kb_ctx *c, size_t n, float lo, float hi, uint32_t seed) {
  float *h = malloc(n * sizeof *h);
  void *d = NULL;
  if (h == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    h[i] = lo + (hi - lo) * (float)(seed >> 8) * (1.0f / 16777216.0f);
  }
  if (c->k->ops->alloc(c->k, n * sizeof *h, &d) == 0 &&
      c->k->ops->copy(c->k, d, h, n * sizeof *h, SC_KCOPY_H2D) != 0) {
    c->k->ops->free(c->k, d);
    d = NULL;
  }
  free(h);
  return d;
}

static void *upload(kb_ctx *c, const void *h, size_t bytes) {
  void *d = NULL;
  if (c->k->ops->alloc(c->k, bytes, &d) != 0) return NULL;
  if (c->k->ops->copy(c->k, d, h, bytes, SC_KCOPY_H2D) != 0) {
    c->k->ops->free(c->k, d);
    return NULL;
  }
  return d;
}

static void *zeros(kb_ctx *c, size_t bytes) {
  void *d = NULL;
  if (c->k->ops->alloc(c->k, bytes, &d) != 0) return NULL;
  if (c->k->ops->memset(c->k, d, 0, bytes) != 0) {
    c->k->ops->free(c->k, d);
    return NULL;
  }
  return d;
}

static void release(kb_ctx *c, void **bufs, int n) {
  for (int i = 0; i < n; i++)
    if (bufs[i] != NULL) c->k->ops->free(c->k, bufs[i]);
}

/* Times fn and records samples converted to `unit` per second given `work` units per
 * call; returns the median rate. */
static double measure(kb_ctx *c, void (*fn)(void *), void *arg, double work,
                      const char *name, const char *params, const char *unit,
                      const char *extra_fmt_gbps, double bytes, bool sets_peak) {
  double samples[16];
  const int runs = c->runs;
  c->rc = 0;
  c->calls = 0;
  const double cpu0 = cpu_seconds(), wall0 = (double)sc_now_ns() * 1e-9;
  sc_bench_time(fn, arg, runs, c->min_s, samples);
  const double cpu = cpu_seconds() - cpu0, wall = (double)sc_now_ns() * 1e-9 - wall0;
  for (int i = 0; i < runs; i++) samples[i] = work / samples[i] * 1e-9;
  const double med = sc_bench_median(samples, runs);
  if (sets_peak) c->peak = med;
  char extra[384];
  int len = snprintf(extra, sizeof extra, "\"peak_gflops\":%.3f", c->peak);
  if (strcmp(unit, "gflop/s") == 0 && c->peak > 0)
    len += snprintf(extra + len, sizeof extra - (size_t)len, ",\"fraction_of_peak\":%.4f",
                    med / c->peak);
  if (extra_fmt_gbps != NULL && bytes > 0)
    len += snprintf(extra + len, sizeof extra - (size_t)len, ",\"gbps\":%.3f",
                    med / work * bytes);
  /* The machine may be shared: the rate per CPU-second of this process and the cores it
   * actually got say how much of a low wall-clock rate is contention. */
  if (cpu > 0 && wall > 0) {
    const double per_cpu = work * (double)c->calls / cpu * 1e-9;
    if (sets_peak) c->peak_cpu = per_cpu;
    len += snprintf(extra + len, sizeof extra - (size_t)len,
                    ",\"per_cpu_second\":%.3f,\"cores_used\":%.2f", per_cpu, cpu / wall);
    if (strcmp(unit, "gflop/s") == 0 && c->peak_cpu > 0)
      snprintf(extra + len, sizeof extra - (size_t)len, ",\"fraction_of_peak_cpu\":%.4f",
               per_cpu / c->peak_cpu);
  }
  if (c->rc == 0) sc_bench_add(c->b, name, params, unit, samples, runs, extra);
  return med;
}

/* ---- gemm ---- */

typedef struct {
  kb_ctx *c;
  sc_gemm g;
} gemm_case;

static void run_gemm(void *p) {
  gemm_case *gc = p;
  const int rc = gc->c->k->ops->gemm(gc->c->k, &gc->g);
  gc->c->calls++;
  if (rc != 0) gc->c->rc = rc;
}

static int bench_gemm(kb_ctx *c, int64_t m, int64_t n, int64_t kk, bool trans_b,
                      bool is_peak) {
  void *bufs[3] = {upload_f32(c, (size_t)(m * kk), -1, 1, 1),
                   upload_f32(c, (size_t)(n * kk), -1, 1, 2), zeros(c, sizeof(float) * (size_t)(m * n))};
  if (!bufs[0] || !bufs[1] || !bufs[2]) {
    release(c, bufs, 3);
    return SC_ENOMEM;
  }
  gemm_case gc = {c, {.trans_b = trans_b, .m = m, .n = n, .k = kk, .alpha = 1, .beta = 0,
                      .a = bufs[0], .lda = kk, .b = bufs[1], .ldb = trans_b ? kk : n,
                      .c = bufs[2], .ldc = n}};
  char params[192];
  snprintf(params, sizeof params,
           "\"device\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"op\":\"%s\",\"role\":\"%s\","
           "\"threads\":%d",
           c->k->device, (long long)m, (long long)n, (long long)kk, trans_b ? "A*B^T" : "A*B",
           is_peak ? "peak" : "model", c->threads);
  const double flops = 2.0 * (double)m * (double)n * (double)kk;
  /* the peak is measured first, so every later result can be set beside it */
  measure(c, run_gemm, &gc, flops, "kernel.gemm", params, "gflop/s", NULL, 0, is_peak);
  release(c, bufs, 3);
  return c->rc;
}

/* ---- indexer and top-K merge ---- */

typedef struct {
  kb_ctx *c;
  sc_indexer_args a;
} idx_case;

static void run_indexer(void *p) {
  idx_case *ic = p;
  const int rc = ic->c->k->ops->indexer_topk(ic->c->k, &ic->a);
  ic->c->calls++;
  if (rc != 0) ic->c->rc = rc;
}

/* n_tok query tokens at the end of a context of n_keys tokens (prefill rows of one long
 * request: token t sees n_keys - n_tok + t + 1 keys). */
static int bench_indexer(kb_ctx *c, int32_t n_tok, int32_t heads, int32_t dim,
                         int32_t n_keys, int32_t topk) {
  int32_t *qpos = malloc(sizeof(int32_t) * (size_t)n_tok);
  int32_t *kb = calloc((size_t)n_tok, sizeof(int32_t));
  int32_t *ke = malloc(sizeof(int32_t) * (size_t)n_tok);
  int32_t *kpos = malloc(sizeof(int32_t) * (size_t)n_keys);
  int rc = SC_ENOMEM;
  void *bufs[9] = {0};
  if (!qpos || !kb || !ke || !kpos) goto out;
  double pairs = 0;
  for (int32_t t = 0; t < n_tok; t++) {
    qpos[t] = n_keys - n_tok + t;
    ke[t] = n_keys;
    pairs += qpos[t] + 1;
  }
  for (int32_t i = 0; i < n_keys; i++) kpos[i] = i;
  bufs[0] = upload_f32(c, (size_t)n_tok * heads * dim, -1, 1, 3);
  bufs[1] = upload_f32(c, (size_t)n_tok * heads, 0, 0.1f, 4);
  bufs[2] = upload_f32(c, (size_t)n_keys * dim, -1, 1, 5);
  bufs[3] = upload(c, qpos, sizeof(int32_t) * (size_t)n_tok);
  bufs[4] = upload(c, kb, sizeof(int32_t) * (size_t)n_tok);
  bufs[5] = upload(c, ke, sizeof(int32_t) * (size_t)n_tok);
  bufs[6] = upload(c, kpos, sizeof(int32_t) * (size_t)n_keys);
  bufs[7] = zeros(c, sizeof(sc_kcand) * (size_t)n_tok * topk);
  for (int i = 0; i < 8; i++)
    if (bufs[i] == NULL) goto out;
  idx_case ic = {c, {.n_tok = n_tok, .n_heads = heads, .dim = dim, .topk = topk,
                     .q = bufs[0], .ld_q = (int64_t)heads * dim, .w = bufs[1], .ld_w = heads,
                     .q_pos = bufs[3], .keys = {bufs[2], SC_KFMT_F32, dim, n_keys},
                     .key_pos = bufs[6], .key_begin = bufs[4], .key_end = bufs[5],
                     .out_cand = bufs[7]}};
  char params[224];
  snprintf(params, sizeof params,
           "\"device\":\"%s\",\"tokens\":%d,\"index_heads\":%d,\"index_dim\":%d,"
           "\"keys\":%d,\"topk\":%d,\"threads\":%d",
           c->k->device, n_tok, heads, dim, n_keys, topk, c->threads);
  measure(c, run_indexer, &ic, 2.0 * heads * dim * pairs, "kernel.indexer", params,
          "gflop/s", NULL, 0, false);
  rc = c->rc;
out:
  release(c, bufs, 9);
  free(qpos);
  free(kb);
  free(ke);
  free(kpos);
  return rc;
}

typedef struct {
  kb_ctx *c;
  int32_t n_tok, shards, topk;
  const sc_kcand *cand;
  int32_t *out;
} merge_case;

static void run_merge(void *p) {
  merge_case *mc = p;
  const int rc = mc->c->k->ops->topk_merge(mc->c->k, mc->n_tok, mc->shards, mc->topk,
                                           mc->cand, mc->out, NULL);
  mc->c->calls++;
  if (rc != 0) mc->c->rc = rc;
}

/* DCP decode: candidates of `shards` ranks (distinct positions, random scores). */
static int bench_topk_merge(kb_ctx *c, int32_t n_tok, int32_t shards, int32_t topk) {
  const size_t n = (size_t)n_tok * shards * topk;
  sc_kcand *h = malloc(n * sizeof *h);
  void *bufs[2] = {0};
  int rc = SC_ENOMEM;
  if (h == NULL) goto out;
  uint32_t seed = 6;
  for (int32_t r = 0; r < shards; r++)
    for (int32_t t = 0; t < n_tok; t++)
      for (int32_t i = 0; i < topk; i++) {
        seed = seed * 1664525u + 1013904223u;
        /* best-first, as indexer_topk writes each shard's list */
        const float u = (float)(seed >> 8) * (0.9f / 16777216.0f);
        h[((size_t)r * n_tok + t) * topk + i] = (sc_kcand){(float)(topk - i) + u, i * shards + r};
      }
  bufs[0] = upload(c, h, n * sizeof *h);
  bufs[1] = zeros(c, sizeof(int32_t) * (size_t)n_tok * topk);
  if (!bufs[0] || !bufs[1]) goto out;
  merge_case mc = {c, n_tok, shards, topk, bufs[0], bufs[1]};
  char params[160];
  snprintf(params, sizeof params,
           "\"device\":\"%s\",\"tokens\":%d,\"shards\":%d,\"topk\":%d,\"op\":\"merge\","
           "\"threads\":%d",
           c->k->device, n_tok, shards, topk, c->threads);
  measure(c, run_merge, &mc, (double)n, "kernel.topk", params, "gcand/s", NULL, 0, false);
  rc = c->rc;
out:
  release(c, bufs, 2);
  free(h);
  return rc;
}

/* ---- workspace deinterleave gather ---- */

typedef struct {
  kb_ctx *c;
  int64_t n, width;
  sc_krows src, dst;
  const int32_t *idx;
} gather_case;

static void run_gather(void *p) {
  gather_case *gc = p;
  const int rc = gc->c->k->ops->gather_rows(gc->c->k, gc->n, gc->width, gc->src, gc->idx,
                                            gc->dst);
  gc->c->calls++;
  if (rc != 0) gc->c->rc = rc;
}

/* One request of `extent` tokens gathered over n DCP ranks (interleave 1) and put back in
 * token order: idx[p] = owner(p) * S + j(p), SPEC.md §5. Rows are kv_width + index_dim
 * wide, as in the context_kv all-gather. GB/s counts bytes read plus written. */
static int bench_gather(kb_ctx *c, int32_t extent, int32_t n, int32_t width, sc_kfmt fmt) {
  const int32_t shard = (extent + n - 1) / n;
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)extent);
  void *bufs[3] = {0};
  int rc = SC_ENOMEM;
  if (idx == NULL) goto out;
  for (int32_t p = 0; p < extent; p++) idx[p] = (p % n) * shard + p / n;
  const size_t rowb = (size_t)width * sc_kfmt_size(fmt);
  bufs[0] = zeros(c, rowb * (size_t)shard * (size_t)n);
  bufs[1] = zeros(c, rowb * (size_t)extent);
  bufs[2] = upload(c, idx, sizeof(int32_t) * (size_t)extent);
  if (!bufs[0] || !bufs[1] || !bufs[2]) goto out;
  gather_case gc = {c, extent, width, {bufs[0], fmt, width, (int64_t)shard * n},
                    {bufs[1], fmt, width, extent}, bufs[2]};
  char params[192];
  snprintf(params, sizeof params,
           "\"device\":\"%s\",\"op\":\"deinterleave\",\"rows\":%d,\"dcp\":%d,"
           "\"width\":%d,\"dtype\":\"%s\",\"threads\":%d",
           c->k->device, extent, n, width, fmt == SC_KFMT_F32 ? "f32" : "bf16", c->threads);
  measure(c, run_gather, &gc, 2.0 * (double)rowb * extent, "kernel.gather", params, "gb/s",
          NULL, 0, false);
  rc = c->rc;
out:
  release(c, bufs, 3);
  free(idx);
  return rc;
}

/* ---- sparse attention ---- */

typedef struct {
  kb_ctx *c;
  sc_attn_args a;
} attn_case;

static void run_attn(void *p) {
  attn_case *ac = p;
  const int rc = ac->c->k->ops->sparse_attn(ac->c->k, &ac->a);
  ac->c->calls++;
  if (rc != 0) ac->c->rc = rc;
}

static int bench_attn(kb_ctx *c, const char *name, int32_t n_tok, int32_t heads,
                      int32_t topk, int64_t rows, sc_kfmt fmt) {
  const int32_t dc = 512, dr = 64, w = dc + dr;
  int32_t *sel = malloc(sizeof(int32_t) * (size_t)n_tok * topk);
  void *bufs[5] = {0};
  int rc = SC_ENOMEM;
  if (sel == NULL) goto out;
  uint32_t seed = 7;
  for (int64_t i = 0; i < (int64_t)n_tok * topk; i++) {
    seed = seed * 1664525u + 1013904223u;
    sel[i] = (int32_t)((seed >> 4) % (uint32_t)rows);
  }
  bufs[0] = upload_f32(c, (size_t)n_tok * heads * w, -1, 1, 8);
  if (fmt == SC_KFMT_F32) {
    bufs[1] = upload_f32(c, (size_t)rows * w, -1, 1, 9);
  } else {
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)rows * w);
    if (h == NULL) goto out;
    for (int64_t i = 0; i < rows * w; i++) h[i] = sc_f32_to_bf16((float)((i * 7919) % 2001) / 1000.0f - 1.0f);
    bufs[1] = upload(c, h, sizeof(uint16_t) * (size_t)rows * w);
    free(h);
  }
  bufs[2] = upload(c, sel, sizeof(int32_t) * (size_t)n_tok * topk);
  bufs[3] = zeros(c, sizeof(float) * (size_t)n_tok * heads * dc);
  bufs[4] = zeros(c, sizeof(float) * (size_t)n_tok * heads);
  for (int i = 0; i < 5; i++)
    if (bufs[i] == NULL) goto out;
  attn_case ac = {c, {.n_tok = n_tok, .n_heads = heads, .dc = dc, .dr = dr, .topk = topk,
                      .scale = 1.0f / sqrtf((float)w), .q = bufs[0],
                      .ld_q = (int64_t)heads * w, .kv = {bufs[1], fmt, w, rows},
                      .sel = bufs[2], .ld_sel = topk, .out = bufs[3],
                      .ld_out = (int64_t)heads * dc, .lse = bufs[4], .ld_lse = heads}};
  char params[224];
  snprintf(params, sizeof params,
           "\"device\":\"%s\",\"tokens\":%d,\"heads\":%d,\"topk\":%d,\"kv_width\":%d,"
           "\"kv_rows\":%lld,\"kv\":\"%s\",\"threads\":%d",
           c->k->device, n_tok, heads, topk, w, (long long)rows,
           fmt == SC_KFMT_F32 ? "f32" : "bf16", c->threads);
  const double pairs = (double)n_tok * topk;
  const double flops = pairs * heads * (2.0 * w + 2.0 * dc);
  const double bytes = pairs * w * (double)sc_kfmt_size(fmt); /* selected KV rows read */
  measure(c, run_attn, &ac, flops, name, params, "gflop/s", "gbps", bytes, false);
  rc = c->rc;
out:
  release(c, bufs, 5);
  free(sel);
  return rc;
}

/* ---- the head's sampling pass (model/sampling.h) ---- */

typedef struct {
  kb_ctx *c;
  const float *logits;
  int32_t vocab;
  bool lanes;
  int32_t draw; /* the output index of the next draw (run_draw) */
  volatile int32_t sink;
} top2_case;

static void run_top2(void *p) {
  top2_case *tc = p;
  int32_t best;
  float margin;
  if (tc->lanes) sc_logits_top2(tc->logits, tc->vocab, &best, &margin);
  else sc_logits_top2_scalar(tc->logits, tc->vocab, &best, &margin);
  tc->sink += best + (margin > 0);
  tc->c->calls++;
}

static void run_draw(void *p) {
  top2_case *tc = p;
  const int32_t i = tc->draw++;
  tc->sink += tc->lanes ? sc_sample_temperature(tc->logits, tc->vocab, 0.8f, 7, i)
                        : sc_sample_temperature_ref(tc->logits, tc->vocab, 0.8f, 7, i);
  tc->c->calls++;
}

/* The greedy token and top-2 margin of one request's logits, which the head computes for
 * every sampled request after every step, and the draw of a request at a temperature:
 * one element at a time (the rules' statement, what the head ran before) and in vector
 * lanes, in the same run; the draw also at DeepSeek-V3.2's vocabulary. */
static int bench_top2(kb_ctx *c, int32_t vocab) {
  const int32_t sizes[2] = {vocab, 129280}, most = vocab > sizes[1] ? vocab : sizes[1];
  float *l = malloc(sizeof *l * (size_t)most);
  if (l == NULL) return SC_ENOMEM;
  uint32_t seed = 7;
  for (int32_t i = 0; i < most; i++) {
    seed = seed * 1664525u + 1013904223u;
    l[i] = (float)(seed >> 8) * (20.0f / 16777216.0f) - 10.0f;
  }
  for (int lanes = 0; lanes < 2 && c->rc == 0; lanes++) {
    top2_case tc = {.c = c, .logits = l, .vocab = vocab, .lanes = lanes == 1};
    char params[160];
    snprintf(params, sizeof params, "\"device\":\"host\",\"vocab\":%d,\"impl\":\"%s\"",
             vocab, lanes ? "lanes" : "scalar");
    measure(c, run_top2, &tc, (double)vocab, "host.sample_top2", params, "glogit/s", NULL, 0,
            false);
  }
  for (int s = 0; s < 2 && c->rc == 0; s++) {
    const int32_t v = sizes[s];
    for (int lanes = 0; lanes < 2 && c->rc == 0; lanes++) {
      top2_case tc = {.c = c, .logits = l, .vocab = v, .lanes = lanes == 1};
      char params[160];
      snprintf(params, sizeof params,
               "\"device\":\"host\",\"vocab\":%d,\"temperature\":0.8,\"impl\":\"%s\"", v,
               lanes ? "lanes" : "scalar");
      measure(c, run_draw, &tc, (double)v, "host.sample_temperature", params, "glogit/s", NULL,
              0, false);
    }
  }
  free(l);
  return c->rc;
}

int sc_bench_kernels(sc_bench *b) {
  const char *device = b->device ? b->device : "cpu";
  if (strcmp(device, "cuda") == 0) {
#ifdef SC_HAVE_CUDA
    return sc_bench_kernels_cuda(b); /* tools/bench_kernels_cuda.c */
#else
    fprintf(stderr, "sparsecp bench kernels: this sparsecp was built without CUDA\n");
    return SC_ENOTSUP;
#endif
  }
  if (strcmp(device, "cpu") != 0) {
    fprintf(stderr, "sparsecp bench kernels: --device must be cpu or cuda\n");
    return SC_EINVAL;
  }

  kb_ctx c = {.b = b, .runs = b->quick ? 2 : 5, .min_s = b->quick ? 0.001 : 0.3};
  /* one context thread per core, or SPARSECP_KERNEL_THREADS (to measure scaling) */
  const long nproc = sysconf(_SC_NPROCESSORS_ONLN);
  c.threads = (int)(nproc > 0 ? nproc : 1);
  const char *env = getenv("SPARSECP_KERNEL_THREADS");
  if (env != NULL && atoi(env) >= 1 && atoi(env) <= 256) c.threads = atoi(env);
  int rc = sc_kernels_cpu_create(&c.k, c.threads);
  if (rc != 0) return rc;
  const bool q = b->quick;
  /* BLAS peak first, then the products of the model (q/kv projections, W_UK absorption) */
  if ((rc = bench_gemm(&c, q ? 256 : 2048, q ? 256 : 2048, q ? 256 : 2048, false, true)) ||
      (rc = bench_gemm(&c, q ? 64 : 512, q ? 256 : 2048, q ? 64 : 512, true, false)) ||
      (rc = bench_gemm(&c, q ? 16 : 128, 512, 128, false, false)))
    goto out;
  if ((rc = bench_indexer(&c, q ? 8 : 128, q ? 8 : 64, q ? 32 : 128, q ? 512 : 8192,
                          q ? 64 : 2048)))
    goto out;
  if ((rc = bench_topk_merge(&c, q ? 8 : 128, 4, q ? 64 : 2048))) goto out;
  if ((rc = bench_gather(&c, q ? 4096 : 65536, 4, 576 + 128, SC_KFMT_BF16))) goto out;
  if ((rc = bench_attn(&c, "kernel.sparse_attn.decode", q ? 4 : 64, q ? 4 : 16,
                       q ? 64 : 2048, q ? 1024 : 32768, SC_KFMT_F32)) ||
      (rc = bench_attn(&c, "kernel.sparse_attn.decode", q ? 4 : 64, q ? 4 : 16,
                       q ? 64 : 2048, q ? 1024 : 32768, SC_KFMT_BF16)) ||
      (rc = bench_attn(&c, "kernel.sparse_attn.prefill", q ? 8 : 256, q ? 4 : 16,
                       q ? 64 : 2048, q ? 1024 : 8192, SC_KFMT_F32)))
    goto out;
  rc = bench_top2(&c, 32768);
out:
  sc_kernels_destroy(c.k);
  return rc;
}
