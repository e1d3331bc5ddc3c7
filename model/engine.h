/* engine.h - one rank's compute: a kernel context, the rank's slice of the weights, its
 * KV cache shard and the forward pass, fed one step at a time with the step plan (SPEC.md
 * §3-7). The executor actor (actors/executor) drives one engine per node process; the
 * threaded test harness (harness.h) drives one per thread. Everything a step needs besides the plan (metadata,
 * the dense block table) is derived here.
 *
 * Ownership: the engine owns its kernel context, weights, cache and scratch, and borrows
 * the comm (which must outlive it). Threads: one thread at a time (the executor's).
 */
#ifndef SC_ENGINE_H
#define SC_ENGINE_H

#include <stdint.h>

#include "collectives/coll.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/model_config.h"
#include "plan/plan.h"

typedef struct sc_engine_config {
  sc_plan_config plan;    /* parallel layout; its model dimensions are set from model */
  sc_model_config model;
  const char *weights;    /* safetensors file, or NULL for synthetic weights (seeded) */
  const char *model_dir;  /* a DeepSeek-V3.2 checkpoint directory (model/hf_model.h), or
                             NULL; model must then be the directory's configuration
                             (sc_model_config_load_dir), which create checks. CPU only
                             for now: the CUDA kernels lack the checkpoint's ops */
  int32_t num_blocks;     /* physical KV blocks of this rank (= the scheduler's pool) */
  sc_kfmt kv_fmt;         /* SC_KFMT_F32, SC_KFMT_BF16 or SC_KFMT_FP8_DS_MLA (index_fp8) */
  bool index_fp8;         /* the indexer keys in fp8_index rows of their own (DeepSeek-V3.2's
                             format, model/kv_cache.h), not in the KV rows in kv_fmt */
  int kernel_threads;     /* CPU kernel worker threads (>= 1) */
  bool cuda;              /* kernels on a CUDA device instead of the CPU */
  bool gemm_tf32;         /* CUDA: cuBLAS's gemms on TF32 tensor cores (sc_kernels_cuda_
                             set_tf32: ~1e-3 relative, where f32 is the CPU's rounding) */
  int cuda_device;        /* which device */
  int32_t ranks_per_gpu;  /* CUDA: ranks whose kernels may run beside this one's on its
                             device (MPS clients), this one included; 0 or 1: none
                             (sc_kernels_cuda_set_gpu_ranks; the pipeline's "ranks_per_gpu") */
  bool no_recordings;     /* run every step's ops as they are called, never replaying a
                             recording of them (sc_forward_set_recordings; the pipeline's
                             "cuda_graphs": false) */
  bool cpu_recorder;      /* CPU kernels wrapped in a recorder (kernels/kernels_recorder.h):
                             the recorded-step path on the CPU, for tests */
} sc_engine_config;

typedef struct sc_engine sc_engine;

/* A digest of what a rank computes with beyond the layout: the model (every field of
 * cfg->model, sc_model_config_digest), whether its weights come from a file, and the KV
 * and index formats. Not the weights' path (nodes may keep the same checkpoint at other
 * paths) nor the backend. Equal on every node that read the same cluster file and model;
 * the planner carries it (sc_plan_config.engine_digest) for the ranks to compare. */
uint64_t sc_engine_config_digest(const sc_engine_config *cfg);

/* Validates the configuration (model, layout, TP split) and builds the rank's state.
 * comm must already describe global_rank's groups (any backend). */
int sc_engine_create(const sc_engine_config *cfg, int32_t global_rank, sc_comm *comm,
                     sc_engine **out, sc_diag *d);
void sc_engine_destroy(sc_engine *e);

const sc_model_config *sc_engine_model(const sc_engine *e);
/* The engine's kernel context (the buffers its collectives see live there). */
sc_kernels *sc_engine_kernels(const sc_engine *e);

/* The engine's weights in one buffer that the ranks of one GPU share
 * (sc_model_weights_flat_*, actors/rank_ctx.c): the buffer's size (0: these weights
 * cannot move there), the copy of this engine's weights into a buffer of that size, and
 * moving the engine's table there, freeing or keeping the buffers it held (free_own). A
 * kernel context on CUDA forgets its recorded steps then (they read the old buffers).
 * The engine's thread, or any thread before its first step. */
size_t sc_engine_weights_flat_bytes(const sc_engine *e);
int sc_engine_weights_flat_copy(sc_engine *e, void *flat);
int sc_engine_weights_flat_use(sc_engine *e, void *flat, bool free_own);
/* Back to the buffers flat_use kept (sc_model_weights_flat_drop), recordings forgotten. */
int sc_engine_weights_flat_drop(sc_engine *e);

/* One step's inputs: the plan, the input token ids (Σq, batch order) and the block
 * tables in CSR form (entry i's virtual blocks: blocks[block_start[i] .. [i+1])). */
typedef struct sc_engine_batch {
  uint64_t step;
  const sc_plan *plan;
  const int32_t *tokens;
  const int32_t *block_start, *blocks;
  const uint8_t *sample;  /* [num_reqs] 1 = compute this entry's logits; NULL = all */
} sc_engine_batch;

/* Runs the step (every collective through comm, in plan order), deriving the rank's
 * metadata and dense block table first. Failures: the collective codes of
 * sc_forward_step (SC_EDESYNC, SC_ETIMEDOUT, SC_EABORTED) or SC_EINVAL for inconsistent
 * inputs, with d saying why. */
int sc_engine_step(sc_engine *e, const sc_engine_batch *b, sc_forward_out *out, sc_diag *d);

/* The same with the metadata already derived (the pipeline's metadata actor does that
 * on its own thread): in.meta and in.block_table must be this rank's. Returns once the
 * step has completed on the device. */
int sc_engine_run(sc_engine *e, const sc_forward_in *in, sc_forward_out *out, sc_diag *d);

/* sc_engine_run in two halves, for a caller that must not wait for the device (the
 * executor): sc_engine_queue queues the step (sc_forward_step) and returns; the caller
 * then asks the kernels for a notify (sc_engine_kernels(e)->ops->notify) and, in its
 * callback's aftermath, calls sc_engine_finish with the callback's status: 0, or the
 * failure of a collective on the device or of a kernel, with d saying which. in and out
 * must stay valid until then; a failed queue still needs the notify before the next
 * step (work queued before the failure may be running), but no finish. Two steps may be
 * queued before the first is finished (overlapped steps): finishes come in queue order
 * (sc_forward_finish). */
int sc_engine_queue(sc_engine *e, const sc_forward_in *in, sc_forward_out *out, sc_diag *d);
int sc_engine_finish(sc_engine *e, int status, sc_diag *d);

/* After sc_engine_finish: the device's time between the step before and this one
 * (sc_forward_gap). */
int sc_engine_gap(const sc_engine *e, int64_t *ns);

/* Steps recorded and replayed so far (sc_forward_recording_stats). */
void sc_engine_recording_stats(const sc_engine *e, uint64_t *records, uint64_t *replays);

/* After sc_engine_finish of a step queued with in->profile: its per-stage times
 * (sc_forward_profile). */
int sc_engine_profile(const sc_engine *e, uint64_t ns[SC_STAGE_COUNT], uint64_t *span);
/* The host's time queueing the last step (sc_forward_host_profile; profiled or not). */
sc_forward_host sc_engine_host_profile(const sc_engine *e);

#endif
