/* forward.h - one rank's forward pass of one step of the synthetic DeepSeek-V3.2-shaped
 * model (SPEC.md §3-7; docs/model.md has the layer math).
 *
 * Per layer: RMSNorm; MLA projections with q LoRA (wq_a, q_norm, wq_b) and kv LoRA
 * (wkv_a -> [c_kv ; k_rope], kv_norm); the lightning indexer (index queries from the q
 * latent, index keys and per-token head weights from the normed hidden); top-K; sparse
 * MLA attention with W_UK absorbed into the query and W_UV applied to the latent output;
 * o_proj; residual; RMSNorm; SwiGLU MLP; residual. Then the final norm and the LM head
 * on the last token of every request, on every rank.
 *
 * Every collective goes through sc_coll_session_run in the planned order (SPEC.md §6);
 * the shapes requested are derived here from the rank's metadata and the model, never
 * copied from the plan, so a divergence is caught by the session instead of hanging.
 * A rank with no real rows for an entry still takes part with padding.
 *
 * Compute goes through the kernel API only (kernels/kernels.h). Collective buffers are
 * kernel buffers handed to the collective backend directly: correct for the CPU backend
 * and for device-aware backends; a host backend driving device memory must stage.
 *
 * Ownership: sc_forward borrows the kernels context, weights, cache and comm (all must
 * outlive it) and owns its scratch buffers, which grow to the largest step and are
 * reused. One thread: the rank's executor (the harness thread of the rank).
 */
#ifndef SC_FORWARD_H
#define SC_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "collectives/coll.h"
#include "kernels/kernels.h"
#include "model/kv_cache.h"
#include "model/step_prof.h"
#include "model/weights.h"
#include "plan/metadata.h"

typedef struct sc_forward sc_forward;

/* cfg: the parallel configuration the plans are built with (its model dimensions must
 * equal the weights' model). The cache must have width kv_lora_rank + rope_dim +
 * index_dim and w->cfg.layers layers. */
int sc_forward_create(sc_kernels *k, const sc_model_weights *w, sc_kv_cache *cache,
                      sc_comm *comm, const sc_plan_config *cfg, sc_forward **out,
                      sc_diag *d);
void sc_forward_destroy(sc_forward *f);

/* Inputs of one step. */
typedef struct sc_forward_in {
  uint64_t step;
  const sc_plan *plan;
  const sc_meta *meta;        /* this rank's metadata of plan */
  const int32_t *tokens;      /* [plan->num_tokens] input ids, global batch order */
  const int32_t *block_table; /* dense [num_reqs][max_blocks] (sc_meta_blocks.table) */
  int32_t max_blocks;
  const uint8_t *sample;      /* [num_reqs] 1 = compute this request's logits (the
                                 scheduler's sample[]); NULL = every request with q > 0 */
  bool profile;               /* mark the step's stages (sc_forward_profile) */
  /* [num_reqs] each request's draw (model/sampling.h's sc_sample_temperature): where
   * the tokens are computed on the device (device_tokens, below), a request at
   * temperature[i] > 0 has its token drawn there (draw_rows) in place of the greedy
   * choice; NULL = every one greedy */
  const float *temperature;
  const uint64_t *seed;
  const int32_t *out_index;
  /* A step planned ahead (docs/pipeline.md, "Overlapped steps"): global token
   * follow_tok[j] is the token of logits row follow_row[j] of step `follows`, which must
   * be the step queued on this forward just before this one, its tokens computed on the
   * device (device_tokens); the step's tokens[] hold anything there. The token never visits the
   * host: the device takes it, so this step can be queued before that one has run. */
  uint64_t follows;
  int32_t n_follow;
  const int32_t *follow_tok, *follow_row;
  /* Compute each logits row's token on the device (argmax_rows, draw_rows at a
   * temperature) for the step after to follow, also where out->greedy does not read them
   * to the host: a rank other than 0, whose tokens the host never reads (rank 0 reports
   * them). out->greedy implies it. */
  bool device_tokens;
} sc_forward_in;

/* Outputs (host memory owned by the caller; any pointer may be NULL). */
typedef struct sc_forward_out {
  float *logits;     /* [num_reqs][vocab]: last token of each selected request (see
                        sample; rows of the others are zeros) */
  const uint8_t *logits_of; /* [num_reqs] with logits: 1 = read request i's row into
                        logits, 0 = leave that row of logits as it is (a greedy request
                        whose token and margin come from greedy / margins); NULL = every
                        selected request's */
  int32_t *greedy;   /* [rows] the greedy choice of every logits row (the kernels'
                        argmax_rows: sc_logits_top2's token), rows as sc_forward_logits_rows
                        numbers them, or the token drawn at its temperature; with or
                        without logits (in->device_tokens computes them without reading
                        them) */
  float *margins;    /* [rows] with greedy: each row's sc_logits_top2 margin, computed
                        beside the greedy choice (argmax_rows) */
  sc_kcand *topk;    /* [layers][plan num_tokens][topk]: the (score, position) top-K of
                        every global token this rank holds, as selected (merged over DCP
                        for decode rows); entries of other tokens are left untouched */
} sc_forward_out;

/* The logits rows of a step: row_of[i] is request i's row among the rows the step
 * computes (the selected requests with a last token on this rank, in batch order), or
 * -1; returns how many rows there are. */
int32_t sc_forward_logits_rows(const sc_meta *m, const uint8_t *sample, int32_t num_reqs,
                               int32_t *row_of);

/* Queues the step: every kernel, and every collective through the plan-checked session.
 * On a device the work may still be running when it returns 0: out->logits is filled,
 * and failures of collectives on the device are known, only once the kernels' queued
 * work has completed (ops->sync, or the callback of ops->notify) and sc_forward_finish
 * has run. in and out must stay valid until then. On failure returns the code
 * (SC_EDESYNC, SC_ETIMEDOUT, SC_EABORTED from collectives; kernel errors) with a
 * message in d; the caller aborts the other ranks (and still waits for the work queued
 * before the failure before reusing the buffers). */
int sc_forward_step(sc_forward *f, const sc_forward_in *in, sc_forward_out *out, sc_diag *d);

/* After the oldest queued step's work has completed: the outcome of its collectives on
 * the device (0, or the failure, named in d, that a stream-ordered backend reported), and
 * their device times into the comm's stats. Every step queued without a failure is
 * finished, in order; up to SC_FORWARD_IN_FLIGHT may be queued and not finished (a
 * step queued while the one before runs: overlapped steps, docs/pipeline.md). 0 when
 * none is. */
#define SC_FORWARD_IN_FLIGHT 2
int sc_forward_finish(sc_forward *f, sc_diag *d);

/* After sc_forward_finish of a step: how long the device went from the end of the
 * compute of the step queued before it to the beginning of its own (its last op to the
 * first: the first step's downloads and the second's uploads included), in ns, by two
 * stamps a step (kernels.h stamp). With overlapped steps this is the device's own time
 * between their compute (the copies between, and any wait for the host: issue 20's
 * gap); for a step queued after the one before had finished it also holds the host's
 * round trip and any wait for requests.
 * SC_ENOENT for the first step finished. */
int sc_forward_gap(const sc_forward *f, int64_t *ns);

/* After sc_forward_finish of a step queued with in->profile: the time of its stages
 * (model/step_prof.h) and from its first mark to its last. SC_ENOTSUP when it was not
 * profiled (or a mark failed). */
int sc_forward_profile(const sc_forward *f, uint64_t ns[SC_STAGE_COUNT], uint64_t *span);

/* Where the host's time went while queueing the last step that was queued without a
 * failure: its buffers and uploads (step_prepare; of it, queueing the index arrays'
 * upload and the cache key list's fill), its compute (every op queued, or one replay),
 * its logits reads; and whether the compute was a replay. */
typedef struct sc_forward_host {
  uint64_t prepare_ns, upload_ns, keys_ns, compute_ns, download_ns;
  bool replayed;
} sc_forward_host;
sc_forward_host sc_forward_host_profile(const sc_forward *f);

/* Recorded steps (kernels.h record_begin; CUDA graphs): with `on`, a step without
 * prefill rows, and without collectives unless the comm can replay them
 * (sc_coll_ops.recordable), is recorded the first time its shapes occur and replayed
 * when they recur, up to SC_FORWARD_RECS shapes at a time; the results are the same
 * bits (the same ops with the same arguments). Off by default; nothing changes on
 * backends without recordings. */
#define SC_FORWARD_RECS 8
void sc_forward_set_recordings(sc_forward *f, bool on);
/* Steps recorded and steps replayed so far (a replay of a step just recorded counts as
 * a record only). */
void sc_forward_recording_stats(const sc_forward *f, uint64_t *records, uint64_t *replays);

#endif
