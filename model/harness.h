/* harness.h - P x T ranks as threads of one process over the in-memory collective
 * backend (collectives/backend_mem.h), driven by the planner's plan: the quick way to
 * run the distributed math without sockets (issue 5; the multi-process path is the
 * runtime's).
 *
 * Each rank owns a CPU kernel context, its TP slice of the weights, its KV cache shard
 * and an sc_forward. A step builds the plan once (as the head would), derives every
 * rank's metadata, runs all ranks concurrently, and returns rank 0's logits and the
 * top-K sets of every global token (checking that all ranks holding a copy of a token
 * selected the same set). When a rank fails, the harness aborts the in-memory world so
 * the others return instead of hanging, and reports the first failure that was not a
 * consequence of the abort.
 *
 * Ownership: the harness owns everything it creates. One thread drives it.
 */
#ifndef SC_HARNESS_H
#define SC_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "model/model_config.h"
#include "plan/plan.h"

typedef struct sc_harness_config {
  sc_plan_config plan;    /* pcp, dcp, tp, interleave, block_size, pad_multiple,
                             max_gathered_rows; model dimensions are taken from model */
  sc_model_config model;
  int32_t num_blocks;     /* physical blocks per rank (= the scheduler's virtual pool) */
  sc_kfmt kv_fmt;         /* SC_KFMT_F32, SC_KFMT_BF16 or SC_KFMT_FP8_DS_MLA (index_fp8) */
  bool index_fp8;         /* engine.h: the indexer keys in fp8_index rows */
  int kernel_threads;     /* per rank context (>= 1) */
  int64_t deadline_ms;    /* per collective; <= 0: none */
  const char *weights;    /* safetensors file, or NULL for synthetic weights */
  const char *model_dir;  /* a DeepSeek-V3.2 checkpoint directory (engine.h), or NULL */
  bool cuda;              /* one rank on CUDA device 0 instead of the CPU (the in-memory
                             backend cannot move device memory: more ranks are refused) */
  bool no_recordings;     /* engine.h: never replay recorded steps */
  bool cpu_recorder;      /* engine.h: CPU kernels that record by keeping the calls;
                             the ranks' in-memory collectives are then queued with
                             their ops, so steps with collectives are recorded too */
} sc_harness_config;

typedef struct sc_harness sc_harness;

int sc_harness_create(const sc_harness_config *cfg, sc_harness **out, sc_diag *d);
void sc_harness_destroy(sc_harness *h);

/* One step's batch: the planner input, the input token ids (Σq, batch order) and the
 * block tables in CSR form (entry i's virtual blocks are blocks[block_start[i] ..
 * block_start[i+1]), as sc_sched_step emits them). */
typedef struct sc_harness_batch {
  uint64_t step;
  int32_t num_reqs;
  const sc_batch_req *reqs;
  const int32_t *tokens;
  const int32_t *block_start, *blocks;
  const uint8_t *sample; /* [num_reqs] requests whose logits are wanted, or NULL: all */
} sc_harness_batch;

typedef struct sc_harness_result {
  float *logits;    /* [num_reqs][vocab] or NULL: rank 0's logits of each request's last
                       token (zeros for q = 0 and for requests not in sample) */
  sc_kcand *topk;   /* [layers][Σq][topk] or NULL */
  int32_t topk_disagreements; /* (layer, token) pairs where two ranks' copies differ */
  int32_t logit_disagreements;/* ranks whose logits are not bit-identical to rank 0's */
  uint64_t fingerprint;       /* of the step's collective plan */
  int32_t num_colls;
  int32_t num_chunks;         /* context_kv chunks of the step (SPEC.md §5) */
  int32_t empty_ranks;        /* ranks that had no real rows (they ran on padding) */
} sc_harness_result;

int sc_harness_step(sc_harness *h, const sc_harness_batch *b, sc_harness_result *res,
                    sc_diag *d);

/* Rank r's kernel context (for tests that act on it between steps); NULL past the
 * world. */
sc_kernels *sc_harness_kernels(const sc_harness *h, int32_t r);

/* Rank 0's steps recorded and replayed so far (engine.h). */
void sc_harness_recording_stats(const sc_harness *h, uint64_t *records, uint64_t *replays);

#endif
