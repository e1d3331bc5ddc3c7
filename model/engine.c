/* engine.c - one rank's compute state and its step (engine.h). */
#include "model/engine.h"

#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "kernels/kernels_recorder.h"
#include "model/hf_model.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "plan/metadata.h"
#ifdef SC_HAVE_CUDA
#include "kernels/cuda/kernels_cuda.h"
#endif

struct sc_engine {
  sc_engine_config cfg;
  sc_plan_config pc;
  int32_t rank;
  sc_kernels *k;
  sc_model_weights w;
  sc_kv_cache cache;
  bool have_weights, have_cache;
  sc_forward *fwd;
  sc_meta meta;
  int32_t *bt;      /* dense block table [num_reqs][max_blocks] */
  size_t bt_cap;
};

void sc_engine_destroy(sc_engine *e) {
  if (e == NULL) return;
  sc_forward_destroy(e->fwd);
  sc_meta_free(&e->meta);
  if (e->have_cache) sc_kv_cache_free(e->k, &e->cache);
  if (e->have_weights) sc_model_weights_free(e->k, &e->w);
  sc_kernels_destroy(e->k);
  free(e->bt);
  free(e);
}

size_t sc_engine_weights_flat_bytes(const sc_engine *e) {
  return e->have_weights ? sc_model_weights_flat_bytes(&e->w) : 0;
}

int sc_engine_weights_flat_copy(sc_engine *e, void *flat) {
  return sc_model_weights_flat_copy(e->k, &e->w, flat);
}

/* (a recorded step holds the buffers it read) */
static void forget_recordings(sc_engine *e) {
#ifdef SC_HAVE_CUDA
  if (e->cfg.cuda) sc_kernels_cuda_forget_recordings(e->k);
#else
  (void)e;
#endif
}

int sc_engine_weights_flat_use(sc_engine *e, void *flat, bool free_own) {
  const int rc = sc_model_weights_flat_use(e->k, &e->w, flat, free_own);
  if (rc == 0) forget_recordings(e);
  return rc;
}

int sc_engine_weights_flat_drop(sc_engine *e) {
  const int rc = sc_model_weights_flat_drop(&e->w);
  if (rc == 0) forget_recordings(e);
  return rc;
}

uint64_t sc_engine_config_digest(const sc_engine_config *cfg) {
  const uint8_t rest[4] = {(uint8_t)cfg->kv_fmt, cfg->index_fp8, cfg->weights != NULL,
                           cfg->gemm_tf32};
  return sc_fnv1a(sc_model_config_digest(&cfg->model), rest, sizeof rest);
}

int sc_engine_create(const sc_engine_config *cfg, int32_t global_rank, sc_comm *comm,
                     sc_engine **out, sc_diag *d) {
  *out = NULL;
  sc_engine *e = calloc(1, sizeof *e);
  if (e == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  e->cfg = *cfg;
  e->cfg.weights = NULL; /* borrowed only during create */
  e->cfg.model_dir = NULL;
  e->rank = global_rank;
  e->pc = cfg->plan;
  sc_model_config_to_plan(&cfg->model, &e->pc);
  int rc;
  if ((rc = sc_model_config_validate(&cfg->model, d)) ||
      (rc = sc_plan_config_validate(&e->pc, d)) ||
      (rc = sc_model_config_check_tp(&cfg->model, e->pc.tp, d)))
    goto fail;
  if (cfg->num_blocks < 1) {
    rc = sc_fail(d, SC_EINVAL, "num_blocks must be >= 1");
    goto fail;
  }
  if (cfg->model_dir != NULL && cfg->weights != NULL) {
    rc = sc_fail(d, SC_EINVAL, "a model directory brings its own weights: give no weights file");
    goto fail;
  }
  if (cfg->cuda) {
#ifdef SC_HAVE_CUDA
    if ((rc = sc_kernels_cuda_create(&e->k, cfg->cuda_device, NULL))) {
      sc_fail(d, rc, "rank %d: cannot create a CUDA kernel context on device %d: %s",
              global_rank, cfg->cuda_device, sc_strerror(rc));
      goto fail;
    }
    if (cfg->ranks_per_gpu > 1 &&
        (rc = sc_kernels_cuda_set_gpu_ranks(e->k, cfg->ranks_per_gpu))) {
      sc_fail(d, rc, "rank %d: cannot share the GPU among %d ranks: %s", global_rank,
              cfg->ranks_per_gpu, sc_strerror(rc));
      goto fail;
    }
    if (cfg->gemm_tf32 && (rc = sc_kernels_cuda_set_tf32(e->k, true))) {
      sc_fail(d, rc, "rank %d: cannot put the gemms on TF32: %s", global_rank, sc_strerror(rc));
      goto fail;
    }
#else
    rc = sc_fail(d, SC_ENOTSUP, "this sparsecp was built without CUDA (no nvcc at build time)");
    goto fail;
#endif
  } else if ((rc = sc_kernels_cpu_create(&e->k, cfg->kernel_threads > 0 ? cfg->kernel_threads : 1))) {
    sc_fail(d, rc, "rank %d: cannot create the CPU kernel context", global_rank);
    goto fail;
  } else if (cfg->cpu_recorder) {
    sc_kernels *w = NULL;
    if ((rc = sc_kernels_recorder_wrap(e->k, &w))) {
      sc_fail(d, rc, "rank %d: cannot wrap the CPU kernels in a recorder", global_rank);
      goto fail;
    }
    e->k = w;
  }
  const int32_t tp_rank = comm->group_rank[SC_GROUP_TP];
  if (cfg->model_dir != NULL) {
    sc_model_config dir_model;
    rc = sc_model_weights_load_dir(e->k, cfg->model_dir, e->pc.tp, tp_rank, &dir_model, &e->w, d);
    if (rc == 0 && !sc_model_config_same(&dir_model, &cfg->model))
      rc = sc_fail(d, SC_EINVAL, "model directory %s: its config.json is not the model this "
                   "rank was configured with (changed while starting?)", cfg->model_dir);
  } else {
    rc = cfg->weights
             ? sc_model_weights_load(e->k, &cfg->model, e->pc.tp, tp_rank, cfg->weights, &e->w, d)
             : sc_model_weights_synthetic(e->k, &cfg->model, e->pc.tp, tp_rank, &e->w, d);
  }
  if (rc) {
    if (e->w.t != NULL) sc_model_weights_free(e->k, &e->w);
    goto fail;
  }
  e->have_weights = true;
  const int32_t width = sc_model_kv_width(&cfg->model) + cfg->model.index_dim;
  if ((rc = sc_kv_cache_create(e->k, cfg->model.layers, cfg->num_blocks, e->pc.block_size,
                               width, cfg->model.index_dim, cfg->kv_fmt,
                               cfg->index_fp8 ? SC_KFMT_FP8_INDEX : cfg->kv_fmt, &e->cache, d)))
    goto fail;
  e->have_cache = true;
  if ((rc = sc_forward_create(e->k, &e->w, &e->cache, comm, &e->pc, &e->fwd, d))) goto fail;
  sc_forward_set_recordings(e->fwd, !cfg->no_recordings);
  *out = e;
  return 0;
fail:
  sc_engine_destroy(e);
  return rc;
}

const sc_model_config *sc_engine_model(const sc_engine *e) { return &e->cfg.model; }
sc_kernels *sc_engine_kernels(const sc_engine *e) { return e->k; }

int sc_engine_step(sc_engine *e, const sc_engine_batch *b, sc_forward_out *out, sc_diag *d) {
  const sc_plan *plan = b->plan;
  int32_t max_blocks = 1;
  const int rc = sc_meta_build_csr(plan, e->rank, b->block_start, b->blocks, e->cfg.num_blocks,
                                   &e->bt, &e->bt_cap, &max_blocks, &e->meta, d);
  if (rc) return rc;
  const sc_forward_in in = {.step = b->step, .plan = plan, .meta = &e->meta,
                            .tokens = b->tokens, .block_table = e->bt,
                            .max_blocks = max_blocks, .sample = b->sample};
  return sc_engine_run(e, &in, out, d);
}

int sc_engine_queue(sc_engine *e, const sc_forward_in *in, sc_forward_out *out, sc_diag *d) {
  return sc_forward_step(e->fwd, in, out, d);
}

void sc_engine_recording_stats(const sc_engine *e, uint64_t *records, uint64_t *replays) {
  sc_forward_recording_stats(e->fwd, records, replays);
}

sc_forward_host sc_engine_host_profile(const sc_engine *e) {
  return sc_forward_host_profile(e->fwd);
}

int sc_engine_gap(const sc_engine *e, int64_t *ns) { return sc_forward_gap(e->fwd, ns); }

int sc_engine_profile(const sc_engine *e, uint64_t ns[SC_STAGE_COUNT], uint64_t *span) {
  return sc_forward_profile(e->fwd, ns, span);
}

static int device_status(int status, sc_diag *d) {
  if (status == 0) return 0;
  /* (no rank: whoever reports the step's failure names it) */
  return sc_fail(d, status, "a kernel failed on the device: %s", sc_strerror(status));
}

int sc_engine_finish(sc_engine *e, int status, sc_diag *d) {
  /* a collective that failed on the device explains a kernel error after it better */
  const int rc = sc_forward_finish(e->fwd, d);
  return rc ? rc : device_status(status, d);
}

int sc_engine_run(sc_engine *e, const sc_forward_in *in, sc_forward_out *out, sc_diag *d) {
  const int rc = sc_engine_queue(e, in, out, d);
  /* even after a failure: work queued before it must drain before buffers are reused */
  const int status = e->k->ops->sync(e->k);
  return rc ? rc : sc_engine_finish(e, status, d);
}
