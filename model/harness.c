/* harness.c - ranks as threads over the in-memory backend (harness.h). */
#include "model/harness.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/backend_mem.h"
#include "kernels/kernels_recorder.h"
#include "model/engine.h"

typedef struct rank {
  sc_harness *h;
  int32_t g;
  sc_comm comm;
  sc_engine *engine;
  /* per step */
  sc_kcand *topk;
  float *logits;
  int rc;
  sc_diag diag;
} rank;

struct sc_harness {
  sc_harness_config cfg;
  sc_plan_config pc;
  int32_t world;
  sc_mem_world *mem;
  rank *ranks;
  sc_plan plan;
  const sc_harness_batch *batch; /* the step being run */
};


void sc_harness_destroy(sc_harness *h) {
  if (h == NULL) return;
  for (int32_t g = 0; h->ranks && g < h->world; g++) sc_engine_destroy(h->ranks[g].engine);
  free(h->ranks);
  sc_mem_world_destroy(h->mem);
  sc_plan_free(&h->plan);
  free(h);
}

/* (sc_mem_queue_fn over a rank's recorder) */
static int queue_in_recording(void *ctx, int (*fn)(const void *args), const void *args,
                              size_t size) {
  return sc_kernels_recorder_call(ctx, fn, args, size);
}

int sc_harness_create(const sc_harness_config *cfg, sc_harness **out, sc_diag *d) {
  *out = NULL;
  int rc;
  sc_harness *h = calloc(1, sizeof *h);
  if (h == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  h->cfg = *cfg;
  h->pc = cfg->plan;
  sc_model_config_to_plan(&cfg->model, &h->pc);
  sc_plan_init(&h->plan);
  if ((rc = sc_model_config_validate(&cfg->model, d)) ||
      (rc = sc_plan_config_validate(&h->pc, d)))
    goto fail;
  h->world = sc_plan_world_size(&h->pc);
  if (cfg->cuda && h->world != 1) {
    rc = sc_fail(d, SC_ENOTSUP, "harness: CUDA ranks need a device-aware backend: one rank only");
    goto fail;
  }
  if ((rc = sc_mem_world_create(&h->pc, &h->mem))) {
    sc_fail(d, rc, "cannot create the in-memory world");
    goto fail;
  }
  if ((h->ranks = calloc((size_t)h->world, sizeof *h->ranks)) == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto fail;
  }
  const sc_engine_config ec = {.plan = cfg->plan, .model = cfg->model, .weights = cfg->weights,
                              .model_dir = cfg->model_dir,
                               .num_blocks = cfg->num_blocks, .kv_fmt = cfg->kv_fmt,
                               .index_fp8 = cfg->index_fp8,
                               .kernel_threads = cfg->kernel_threads, .cuda = cfg->cuda,
                               .no_recordings = cfg->no_recordings,
                               .cpu_recorder = cfg->cpu_recorder};
  for (int32_t g = 0; g < h->world; g++) {
    rank *r = &h->ranks[g];
    r->h = h;
    r->g = g;
    if ((rc = sc_mem_comm_create(&r->comm, h->mem, g, cfg->deadline_ms)) ||
        (rc = sc_engine_create(&ec, g, &r->comm, &r->engine, d)))
      goto fail;
    /* recording ranks queue their collectives with their ops, so that steps with
     * collectives are recorded and replayed too (model/forward.c) */
    if (cfg->cpu_recorder && !cfg->cuda && !cfg->no_recordings)
      sc_mem_comm_queue_through(&r->comm, queue_in_recording, sc_engine_kernels(r->engine));
  }
  *out = h;
  return 0;
fail:
  sc_harness_destroy(h);
  return rc;
}

static void *rank_main(void *arg) {
  rank *r = arg;
  sc_harness *h = r->h;
  const sc_harness_batch *b = h->batch;
  const sc_engine_batch eb = {.step = b->step, .plan = &h->plan, .tokens = b->tokens,
                              .block_start = b->block_start, .blocks = b->blocks,
                              .sample = b->sample};
  sc_forward_out fo = {.logits = r->logits, .topk = r->topk};
  r->rc = sc_engine_step(r->engine, &eb, &fo, &r->diag);
  if (r->rc) sc_mem_world_abort(h->mem); /* wake the others: the step is dead */
  return NULL;
}

static bool same_set(const sc_kcand *a, const sc_kcand *b, int32_t k) {
  for (int32_t i = 0; i < k; i++)
    if (a[i].pos != b[i].pos) return false;
  return true;
}

int sc_harness_step(sc_harness *h, const sc_harness_batch *b, sc_harness_result *res,
                    sc_diag *d) {
  const sc_model_config *mc = &h->cfg.model;
  int rc = sc_plan_build(&h->plan, &h->pc, b->reqs, b->num_reqs, d);
  if (rc) return rc;
  const sc_plan *plan = &h->plan;
  const size_t nt = (size_t)plan->num_tokens, K = (size_t)mc->topk;
  const size_t topk_n = (size_t)mc->layers * nt * K;
  const size_t logit_n = (size_t)b->num_reqs * (size_t)mc->vocab;
  pthread_t *th = NULL;
  bool *started = NULL;

  th = calloc((size_t)h->world, sizeof *th);
  started = calloc((size_t)h->world, sizeof *started);
  if (th == NULL || started == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto out;
  }
  h->batch = b;
  for (int32_t g = 0; g < h->world; g++) {
    rank *r = &h->ranks[g];
    r->rc = 0;
    r->diag = (sc_diag){0};
    r->topk = res && res->topk ? malloc(topk_n * sizeof *r->topk + 1) : NULL;
    r->logits = NULL;
    if (res && res->logits) {
      r->logits = g == 0 ? res->logits : malloc(logit_n * sizeof *r->logits + 1);
      if (r->logits == NULL) {
        rc = sc_fail(d, SC_ENOMEM, "out of memory");
        goto out;
      }
    }
    if (res && res->topk && r->topk == NULL) {
      rc = sc_fail(d, SC_ENOMEM, "out of memory");
      goto out;
    }
    for (size_t i = 0; r->topk && i < topk_n; i++) r->topk[i] = (sc_kcand){0, INT32_MIN};
  }
  for (int32_t g = 0; g < h->world; g++) {
    if (pthread_create(&th[g], NULL, rank_main, &h->ranks[g]) != 0) {
      sc_mem_world_abort(h->mem);
      rc = sc_fail(d, SC_ESYS, "cannot start the thread of rank %d", g);
      break;
    }
    started[g] = true;
  }
  for (int32_t g = 0; g < h->world; g++)
    if (started[g]) pthread_join(th[g], NULL);
  if (rc) goto out;
  /* The root cause: the first failure that is not the abort it triggered. */
  for (int32_t pass = 0; pass < 2 && rc == 0; pass++)
    for (int32_t g = 0; g < h->world && rc == 0; g++) {
      const rank *r = &h->ranks[g];
      if (r->rc && (pass == 1 || r->rc != SC_EABORTED)) {
        rc = r->rc;
        if (d) *d = r->diag;
      }
    }
  if (rc) goto out;

  if (res) {
    res->fingerprint = plan->fingerprint;
    res->num_colls = plan->num_colls;
    res->num_chunks = plan->num_chunks;
    res->empty_ranks = 0;
    for (int32_t g = 0; g < h->world; g++) {
      sc_rank_view v;
      sc_plan_rank_view(plan, g, &v);
      res->empty_ranks += v.num_tokens == 0;
    }
    res->topk_disagreements = 0;
    res->logit_disagreements = 0;
    for (int32_t g = 1; res->logits && g < h->world; g++)
      res->logit_disagreements +=
          memcmp(h->ranks[g].logits, res->logits, logit_n * sizeof *res->logits) != 0;
    if (res->topk) {
      for (size_t e = 0; e < (size_t)mc->layers * nt; e++) {
        const sc_kcand *first = NULL;
        bool differ = false;
        for (int32_t g = 0; g < h->world; g++) {
          const sc_kcand *c = h->ranks[g].topk + e * K;
          if (c[0].pos == INT32_MIN) continue; /* this rank holds no copy */
          if (first == NULL) first = c;
          else if (!same_set(first, c, (int32_t)K)) differ = true;
        }
        res->topk_disagreements += differ;
        if (first) memcpy(res->topk + e * K, first, K * sizeof *first);
        else
          for (size_t i = 0; i < K; i++) res->topk[e * K + i] = (sc_kcand){0, INT32_MIN};
      }
    }
  }
out:
  if (rc) sc_mem_world_reset(h->mem);
  for (int32_t g = 0; g < h->world; g++) {
    free(h->ranks[g].topk);
    h->ranks[g].topk = NULL;
    if (g > 0) free(h->ranks[g].logits);
    h->ranks[g].logits = NULL;
  }
  free(th);
  free(started);
  return rc;
}

void sc_harness_recording_stats(const sc_harness *h, uint64_t *records, uint64_t *replays) {
  sc_engine_recording_stats(h->ranks[0].engine, records, replays);
}

sc_kernels *sc_harness_kernels(const sc_harness *h, int32_t r) {
  return r >= 0 && r < h->world ? sc_engine_kernels(h->ranks[r].engine) : NULL;
}
