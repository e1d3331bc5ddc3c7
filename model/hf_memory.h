/* hf_memory.h - the memory one rank (one GPU) needs for a DeepSeek-V3.2 checkpoint's model
 * at a layout (P, N, T) and a context length: weights, KV cache, step buffers (issue 23,
 * "what the real 671B model needs"; `sparsecp checkpoint DIR --memory`, docs/model.md).
 *
 * Weights: the tensor table of the config (model/hf_checkpoint.h: the multi-token-
 * prediction layer is not part of it, as sparsecp does not load it), each tensor sliced as
 * the loader slices it for TP rank r of T (model/hf_model.h): rows of q_b_proj, kv_b_proj
 * and of every gate_proj/up_proj (dense MLP, each routed expert, the shared expert),
 * columns of o_proj and every down_proj; everything else whole on every rank (embeddings
 * and lm_head too). PCP and DCP ranks hold the same weights as their TP peers. Two
 * figures, the largest over the T ranks:
 *   stored  the checkpoint's dtypes as released: a quantized linear 1 byte per element
 *           (fp8) with its F32 weight_scale_inv blocks covering the rank's slice (2 bytes
 *           without quantization_config), e_score_correction_bias F32, the rest BF16
 *   f32     every element in f32, scales dropped - what the engine held when it
 *           dequantized every weight at load
 * (The engine now keeps fp8 weights resident but the bf16 tensors in f32, plus one
 * layer's f32 expansion, docs/model.md: between the two, not counted here yet.)
 *
 * KV cache: a cached token is one row per layer of kv_lora_rank + qk_rope_head_dim (the
 * MLA row, 576 in V3.2) + index_head_dim (the indexer key kept beside it, 128) values, in
 * f32 or bf16 (the formats the engine's KV cache supports, pipeline kv_format); or bf16
 * KV rows and the key in an fp8 row of its own (pipeline index_format "fp8":
 * SC_KFP8_INDEX_ROW_STEP, 144 bytes at 128 values). A rank
 * holds a position only if its DCP group gives it to it (SPEC.md §4): with N > 1 a
 * request of L tokens takes ceil(L / (B N)) blocks of B slots on each rank of its group
 * (B the KV block size), with N = 1 every rank holds all L (TP and PCP peers each keep
 * their own copy: the MLA row is shared by all heads).
 *
 * Step buffers (an estimate, f32): the forward's per-step buffers (model/forward.c) for
 * ceil(budget / P) rows on the rank, all of them prefill rows: hidden rows and norms,
 * queries, the absorbed queries (heads / T of kv_lora + rope), KV and index rows, the
 * indexer's queries and weights, attention outputs, the MLP's three intermediate rows
 * (the larger of intermediate_size / T and the picked experts' moe_intermediate_size / T
 * per routed choice), top-K indices and candidates, the PCP gather of hidden rows; and
 * with N > 1 the context workspace of a prefill chunk that gathers the whole context
 * (L rows of the KV row width, plus the rank's L / N shard). Not counted: the indexer's
 * score rows and kernel scratch, the logits (requests x vocab), the allocator's slack.
 *
 * Pure; any thread.
 */
#ifndef SC_HF_MEMORY_H
#define SC_HF_MEMORY_H

#include <stdint.h>

#include "base/error.h"
#include "model/hf_config.h"

typedef struct sc_hf_mem_in {
  int32_t pcp, dcp, tp;
  int32_t block_size; /* KV block B (the pipeline's default: 16) */
  int64_t context;    /* L: tokens of one request held in the KV cache (its extent) */
  int32_t budget;     /* tokens of one step (the scheduler's token_budget: 256) */
} sc_hf_mem_in;

typedef struct sc_hf_mem {
  uint64_t weights_stored;     /* the largest rank's weights in the released dtypes */
  uint64_t weights_replicated; /* the part of it every rank holds whole */
  uint64_t weights_f32;        /* the same slices in f32 (the CPU backend today) */
  uint64_t weights_total;      /* the whole table in the released dtypes, one copy */
  int64_t kv_row_values;       /* per token and layer: kv_lora + rope + index_dim */
  uint64_t kv_token_f32, kv_token_bf16; /* per cached token on a rank, all layers */
  uint64_t kv_token_bf16_fp8_index; /* the same with bf16 KV rows and fp8 index keys in
                                       rows of their own (--index-format fp8) */
  uint64_t kv_token_fp8_ds_mla; /* with fp8_ds_mla KV rows (656 bytes) and fp8 index keys
                                   (--kv-format fp8_ds_mla); 0 for a model whose rows are
                                   not that format's (kv_lora_rank 512, rope 64) */
  int64_t kv_slots;            /* KV slots the rank holds for the context */
  uint64_t kv_f32, kv_bf16, kv_bf16_fp8_index, kv_fp8_ds_mla; /* kv_slots x kv_token_* */
  int64_t step_rows;           /* ceil(budget / P) */
  uint64_t step_buffers;       /* the step buffers' estimate for step_rows */
  uint64_t workspace;          /* the DCP context workspace (0 with N = 1) */
} sc_hf_mem;

/* What one rank needs in all with fp8 weights as released and a bf16 KV cache. */
static inline uint64_t sc_hf_mem_total(const sc_hf_mem *m) {
  return m->weights_stored + m->kv_bf16 + m->step_buffers + m->workspace;
}

/* The figures of cfg at in's layout. SC_EINVAL naming the rule when (P, N, T) is not a
 * layout sparsecp runs (SPEC.md §1; T dividing the heads and intermediate widths),
 * block_size, budget or context < 1, or the config is not one sparsecp serves. */
int sc_hf_memory(const sc_hf_config *cfg, const sc_hf_mem_in *in, sc_hf_mem *out, sc_diag *d);

#endif
