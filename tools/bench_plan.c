/* bench_plan.c - `sparsecp bench plan`: the time to plan one step.
 *
 * The compact plan (sc_plan_build) and the per-token index arrays (sc_plan_fill_*) are
 * timed separately, on three batch shapes at P = N in {2, 4, 8}, with the dimensions of
 * the real DeepSeek-V3.2 (61 layers, so the collective plan has its real length). */
#include <stdio.h>
#include <stdlib.h>

#include "model/model_defaults.h"
#include "plan/plan.h"
#include "tools/bench.h"

typedef struct {
  sc_plan plan;
  sc_plan_config cfg;
  sc_batch_req *reqs;
  int32_t n;
  int32_t *idx;     /* gather + restore + deinterleave + lens */
  uint8_t *mask;
  int64_t entries;  /* index entries produced per fill */
} plan_case;

static void run_build(void *ctx) {
  plan_case *c = ctx;
  sc_plan_build(&c->plan, &c->cfg, c->reqs, c->n, NULL);
}

static void run_index(void *ctx) {
  plan_case *c = ctx;
  const sc_plan *p = &c->plan;
  const int64_t slots = sc_plan_gather_slots(p);
  int32_t *gather = c->idx, *restore = gather + slots, *deint = restore + p->num_tokens;
  sc_plan_fill_gather(p, gather, restore, c->mask);
  for (int32_t k = 0; k < p->num_chunks; k++) {
    sc_plan_fill_deinterleave(p, k, deint);
    deint += p->chunks[k].extent_total;
  }
  sc_plan_fill_dcp_local_lens(p, deint);
}

static int measure(sc_bench *b, int pcp, int decodes, int prefills, int prefill_len) {
  plan_case c = {0};
  sc_plan_init(&c.plan);
  sc_model_plan_config_default(&c.cfg);
  c.cfg.pcp = c.cfg.dcp = pcp;
  c.cfg.layers = 61;
  c.cfg.heads = 128;
  c.cfg.index_dim = 128;
  c.cfg.topk = 2048;
  c.cfg.hidden = 7168;
  c.n = decodes + prefills;
  c.reqs = calloc((size_t)c.n, sizeof *c.reqs);
  if (c.reqs == NULL) return -1;
  unsigned seed = 12345;
  for (int i = 0; i < decodes; i++) {
    seed = seed * 1103515245u + 12345u;
    c.reqs[i] = (sc_batch_req){.id = i, .computed = 1024 + (int32_t)(seed >> 16) % 31744,
                               .scheduled = 1, .prefill = false};
  }
  for (int i = 0; i < prefills; i++)
    c.reqs[decodes + i] = (sc_batch_req){.id = decodes + i, .scheduled = prefill_len,
                                         .prefill = true};
  sc_diag d = {0};
  int rc = sc_plan_build(&c.plan, &c.cfg, c.reqs, c.n, &d);
  if (rc != 0) {
    fprintf(stderr, "bench plan: %s\n", sc_diag_message(&d));
    goto out;
  }
  const sc_plan *p = &c.plan;
  const int64_t slots = sc_plan_gather_slots(p);
  int64_t deint = 0;
  for (int32_t k = 0; k < p->num_chunks; k++) deint += p->chunks[k].extent_total;
  c.entries = 2 * slots + p->num_tokens + deint + (int64_t)p->num_reqs * c.cfg.dcp;
  c.idx = malloc(sizeof *c.idx * (size_t)(slots + p->num_tokens + deint +
                                          (int64_t)p->num_reqs * c.cfg.dcp));
  c.mask = malloc((size_t)slots);
  if (c.idx == NULL || c.mask == NULL) {
    rc = -1;
    goto out;
  }
  const int runs = b->quick ? 3 : 15;
  const double min_s = b->quick ? 0.002 : 0.02;
  double samples[15];
  char params[256];
  snprintf(params, sizeof params,
           "\"pcp\":%d,\"dcp\":%d,\"decodes\":%d,\"prefills\":%d,\"prefill_len\":%d,"
           "\"layers\":%d",
           pcp, pcp, decodes, prefills, prefill_len, c.cfg.layers);

  sc_bench_time(run_build, &c, runs, min_s, samples);
  for (int i = 0; i < runs; i++) samples[i] *= 1e6;
  char extra[128];
  snprintf(extra, sizeof extra, "\"requests\":%d,\"collectives\":%d", c.n, p->num_colls);
  sc_bench_add(b, "plan.compact", params, "us", samples, runs, extra);

  sc_bench_time(run_index, &c, runs, min_s, samples);
  for (int i = 0; i < runs; i++) samples[i] *= 1e9 / (double)c.entries;
  snprintf(extra, sizeof extra, "\"entries\":%lld", (long long)c.entries);
  sc_bench_add(b, "plan.index", params, "ns", samples, runs, extra);
out:
  free(c.reqs);
  free(c.idx);
  free(c.mask);
  sc_plan_free(&c.plan);
  return rc;
}

int sc_bench_plan(sc_bench *b) {
  static const int pcps[] = {2, 4, 8};
  for (int i = 0; i < 3; i++) {
    int rc;
    if ((rc = measure(b, pcps[i], 1024, 0, 0)) ||
        (rc = measure(b, pcps[i], 256, 4, 8192)) ||
        (rc = measure(b, pcps[i], 0, 1, 131072)))
      return rc;
  }
  return 0;
}
