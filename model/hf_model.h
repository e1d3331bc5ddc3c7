/* hf_model.h - a DeepSeek-V3.2 (or GLM-5) checkpoint directory (model/hf_checkpoint.h) as the model
 * sparsecp serves: its config.json as an sc_model_config, and its tensors as one TP rank's
 * sc_model_weights (issue 23, points 2 and 3 on the CPU; docs/model.md, "Serving a
 * DeepSeek-V3.2 checkpoint").
 *
 * Mapping (transformers' deepseek_v32 names on the left; TP as the synthetic table's):
 *   model.embed_tokens / model.norm / lm_head            embed / norm / head
 *     (lm_head from embed_tokens when tie_word_embeddings)
 *   input_layernorm, post_attention_layernorm            attn_norm, ffn_norm
 *   self_attn.q_a_proj, q_a_layernorm, q_b_proj          wq_a, q_norm, wq_b (rows by head)
 *   self_attn.kv_a_proj_with_mqa, kv_a_layernorm         wkv_a, kv_norm
 *   self_attn.kv_b_proj, o_proj                          wkv_b (rows by head), wo (columns)
 *   self_attn.indexer.wq_b, wk, weights_proj             indexer wq_b, wk, weights_proj
 *   self_attn.indexer.k_norm.weight, .bias               SC_WX_IDX_KNORM_W, _B
 *   mlp.gate_proj, up_proj, down_proj (dense layers)     w1, w3 (rows), w2 (columns)
 *   mlp.gate.weight, gate.e_score_correction_bias        SC_WX_ROUTER, _ROUTER_BIAS
 *   mlp.experts.E.{gate,up,down}_proj                    SC_WX_EXP_W1, W3 (rows of each
 *                                                        expert), W2 (its columns)
 *   mlp.shared_experts.{gate,up,down}_proj               SC_WX_SH_W1, W3 (rows), W2 (columns)
 * F32 weights are read as they are and BF16 ones widened exactly to f32. An F8_E4M3
 * weight stays fp8: its rank's slice of bytes and the weight_scale_inv blocks covering it
 * are kept resident and expanded to f32 before its layer runs (weights.h,
 * sc_fp8_resident); the indexer's wq_b and wk, whose rows are permuted below when its
 * rotary layout is the halves one, are dequantized at load (model/fp8_block.h).
 *
 * The indexer's rotary halves layout (pairs (x[i], x[i + d/2]) on the first d =
 * qk_rope_head_dim values of each indexer query head and of the key) is turned into the
 * interleaved layout of the kernel `rope` at load: the first d rows of each head of
 * indexer.wq_b, of indexer.wk, and the first d entries of k_norm's weight and bias are
 * permuted so that value i moves to 2i and value i + d/2 to 2i + 1. Queries and keys are
 * permuted alike, so every dot product (and LayerNorm's statistics) is unchanged.
 * GLM-5 (glm_moe_dsa) rotates interleaved pairs in its indexer, the kernel's layout: its
 * tensors are read as they are. Its "shared" layers have no indexer tensors; their
 * SC_W_IDX_* and SC_WX_IDX_* pointers stay NULL.
 *
 * Pure apart from the kernel buffers; one thread at a time per kernel context.
 */
#ifndef SC_HF_MODEL_H
#define SC_HF_MODEL_H

#include <stdint.h>

#include "base/error.h"
#include "kernels/kernels.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"
#include "model/model_config.h"
#include "model/weights.h"

/* The model configuration of a parsed config.json (dimensions, norms, rope, routing;
 * seed and init_scale keep their defaults, unused), validated. */
int sc_model_config_from_hf(const sc_hf_config *hf, sc_model_config *m, sc_diag *d);

/* Adds the eos_token_id of DIR/generation_config.json that eos lacks, after its own
 * (generate() ends at the generation config's); nothing when the file is not there.
 * SC_EINVAL for a bad file or more than SC_HF_MAX_EOS ids in all. */
int sc_hf_dir_eos(const char *dir, sc_hf_eos *eos, sc_diag *d);

/* Reads DIR/config.json into the model configuration (sc_hf_config_load's errors), its
 * end-of-sequence tokens joined by DIR/generation_config.json's (sc_hf_dir_eos). */
int sc_model_config_load_dir(const char *dir, sc_model_config *m, sc_diag *d);

/* The permutation above: row n of the interleaved layout holds row
 * sc_hf_halves_source(n, d) of the halves layout (n < d). */
static inline int64_t sc_hf_halves_source(int64_t n, int64_t d) {
  return n % 2 == 0 ? n / 2 : n / 2 + d / 2;
}

/* TP rank tp_rank's weights from an open checkpoint whose configuration gave cfg
 * (sc_model_config_from_hf), tp dividing the heads and intermediate widths. */
int sc_model_weights_from_checkpoint(sc_kernels *k, const sc_hf_checkpoint *ck,
                                     const sc_model_config *cfg, int32_t tp, int32_t tp_rank,
                                     sc_model_weights *w, sc_diag *d);

/* Opens DIR, checks it (hf_checkpoint.h), and loads rank tp_rank's weights; *cfg gets the
 * directory's model configuration. Nothing stays mapped afterwards. */
int sc_model_weights_load_dir(sc_kernels *k, const char *dir, int32_t tp, int32_t tp_rank,
                              sc_model_config *cfg, sc_model_weights *w, sc_diag *d);

#endif
