/* hf_config.h - the Hugging Face config.json of a DeepSeek-V3.2 checkpoint
 * (DeepseekV32ForCausalLM, model_type "deepseek_v32"), as DeepSeek publishes it and as
 * transformers (>= 5) saves it, or of GLM-5 (GlmMoeDsaForCausalLM, "glm_moe_dsa"), the
 * same architecture with two differences (docs/model.md, "GLM-5"): its indexer rotates
 * interleaved pairs, and layers whose indexer_types entry is "shared" have no indexer
 * and reuse the top-K selection of the last "full" layer before them.
 *
 * model_type "deepseek_v32" and "glm_moe_dsa" are accepted. "deepseek_v3" (V3, V3.1) is
 * refused: it has no lightning indexer (no index_* keys, no self_attn.indexer tensors),
 * so it is not the sparse-attention model sparsecp serves.
 *
 * Keys read (docs/model.md, "DeepSeek-V3.2 checkpoint directories"):
 *   required  vocab_size hidden_size intermediate_size moe_intermediate_size
 *             num_hidden_layers num_attention_heads q_lora_rank kv_lora_rank
 *             qk_nope_head_dim qk_rope_head_dim v_head_dim n_routed_experts
 *             n_shared_experts num_experts_per_tok n_group topk_group norm_topk_prob
 *             routed_scaling_factor first_k_dense_replace rms_norm_eps index_n_heads
 *             index_head_dim index_topk max_position_embeddings, and rope_theta (at the
 *             top, or inside rope_parameters)
 *   optional  num_key_value_heads (= num_attention_heads: MLA keys are per head),
 *             topk_method ("noaux_tc"), scoring_func ("sigmoid") - transformers 5 writes
 *             neither, its router implements only these; tie_word_embeddings (false);
 *             num_nextn_predict_layers (0); rope_scaling (DeepSeek's form, with "type")
 *             or rope_parameters (transformers 5's, with "rope_type" and rope_theta):
 *             absent/null or type "default" = plain RoPE, "yarn" = YaRN with factor,
 *             original_max_position_embeddings (required), beta_fast (32), beta_slow (1),
 *             mscale (1), mscale_all_dim (0); quantization_config (absent = unquantized
 *             weights): quant_method "fp8", fmt "e4m3", weight_block_size [r, c],
 *             activation_scheme "dynamic", scale_fmt (kept, e.g. "ue8m0"); its
 *             modules_to_not_convert must be absent or empty and other keys are ignored
 *   checked   attention_bias and mlp_bias false, hidden_act "silu", moe_layer_freq 1,
 *             mlp_layer_types (transformers 5) equal to first_k_dense_replace x "dense"
 *             then "sparse": the tensor table depends on them; rope_interleave true
 *             (the MLA rotary layout) and indexer_rope_interleave equal to the model
 *             type's indexer layout (false for deepseek_v32, true for glm_moe_dsa;
 *             transformers ignores both keys, vLLM reads them), when present
 *   glm_moe_dsa only (transformers' GlmMoeDsaConfig.__post_init__): indexer_types, a
 *             list of num_hidden_layers strings "full" or "shared"; when absent or null,
 *             index_topk_pattern (a string of 'F'/'S', or such a list), else layer i is
 *             "full" iff max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0
 *             (defaults 2 and 1: every layer "full"). Layer 0 must be "full" (a shared
 *             layer needs a previous full one). For deepseek_v32 these keys are unknown.
 *   eos       eos_token_id: one token id, a list of up to SC_HF_MAX_EOS, or null
 *             (none); generation_config.json beside config.json may name more
 *             (sc_hf_generation_eos_load): the ids a request ends at (docs/model.md)
 *   ignored   architectures attention_dropout auto_map bos_token_id
 *             pad_token_id dtype torch_dtype ep_size initializer_range
 *             transformers_version use_cache head_dim qk_head_dim layer_types
 *             _name_or_path base_model_tp_plan base_model_pp_plan base_model_ep_plan
 *             (transformers' parallel plans); any other key is ignored too, counted in unknown_keys with
 *             the first one named, so that a tool can show it.
 * q_lora_rank null or 0 (DeepSeek-V2-Lite's "no q LoRA") is refused with that reason: the
 * V3.2 indexer projects its queries from the q LoRA.
 * Missing required keys, wrong types, values out of range, and rules across keys
 * (qk_rope_head_dim even, index_head_dim >= qk_rope_head_dim, n_routed_experts divisible
 * by n_group with at least two experts per group, num_experts_per_tok <= the experts of
 * topk_group groups, n_routed_experts x MoE layers <= SC_HF_MAX_ROUTED, ...) are
 * SC_EINVAL with a message naming the key.
 *
 * Pure: parsing takes text; loading a file is a thin wrapper. Any thread.
 */
#ifndef SC_HF_CONFIG_H
#define SC_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef enum sc_hf_rope_type { SC_HF_ROPE_DEFAULT = 0, SC_HF_ROPE_YARN = 1 } sc_hf_rope_type;

typedef struct sc_hf_rope_scaling {
  int type; /* sc_hf_rope_type; the other fields are set for YaRN only */
  double factor;
  int32_t original_max_position_embeddings;
  double beta_fast, beta_slow, mscale, mscale_all_dim;
} sc_hf_rope_scaling;

typedef struct sc_hf_quant {
  bool fp8;                        /* quantization_config present: block-scaled e4m3 */
  int32_t block_rows, block_cols;  /* weight_block_size */
  char activation_scheme[16];      /* "dynamic" */
  char scale_fmt[16];              /* "" when absent */
} sc_hf_quant;

/* End-of-sequence token ids: config.json's eos_token_id (DeepSeek-V3.2: one; GLM-5's
 * generation_config.json: three). */
#define SC_HF_MAX_EOS 8
typedef struct sc_hf_eos {
  int32_t id[SC_HF_MAX_EOS];
  int32_t n;
} sc_hf_eos;

#define SC_HF_MAX_LAYERS 1024
/* n_routed_experts x MoE layers: the tensor table has about 6 entries per routed expert
 * of each MoE layer, so this bounds what a config can make sparsecp allocate. */
#define SC_HF_MAX_ROUTED (1 << 16)

typedef struct sc_hf_config {
  char model_type[16];       /* "deepseek_v32" or "glm_moe_dsa" */
  int32_t vocab_size, hidden_size, intermediate_size, moe_intermediate_size;
  int32_t num_hidden_layers, num_attention_heads, num_key_value_heads;
  int32_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
  int32_t n_routed_experts, n_shared_experts, num_experts_per_tok, n_group, topk_group;
  int32_t first_k_dense_replace;
  int32_t index_n_heads, index_head_dim, index_topk;
  int32_t max_position_embeddings, num_nextn_predict_layers;
  char topk_method[16], scoring_func[16];
  bool norm_topk_prob, tie_word_embeddings;
  double routed_scaling_factor, rope_theta, rms_norm_eps;
  sc_hf_rope_scaling rope;
  sc_hf_quant quant;
  bool index_rope_interleaved; /* the indexer rotates pairs (x[2i], x[2i+1]) (glm_moe_dsa);
                                  else halves (x[i], x[i + d/2]) (deepseek_v32) */
  sc_hf_eos eos;               /* eos_token_id (none when absent or null) */
  int32_t index_shared_layers; /* layers whose indexer_types entry is "shared" */
  uint8_t index_shared[SC_HF_MAX_LAYERS / 8]; /* bit l: layer l is "shared" */
  int32_t unknown_keys;    /* keys neither read nor on the ignore list */
  char first_unknown[64];  /* the first of them, "" if none */
} sc_hf_config;

/* Parses config.json text into c (all fields set; c untouched on failure). */
int sc_hf_config_parse(const char *text, size_t len, sc_hf_config *c, sc_diag *d);

/* Reads and parses a config.json file (at most 1 MiB; base/file_read.h: SC_ENOENT when
 * it does not exist, SC_EIO when it cannot be opened or read, SC_ETOOBIG). */
int sc_hf_config_load(const char *path, sc_hf_config *c, sc_diag *d);

/* eos_token_id as Hugging Face's configs give it (json_value a json_t *: an integer id,
 * an array of them, or null; NULL = absent): into out, none for null or absent. `file`
 * names the file in the message of SC_EINVAL (a negative id, another type, more than
 * SC_HF_MAX_EOS ids). */
int sc_hf_eos_parse(const void *json_value, const char *file, sc_hf_eos *out, sc_diag *d);

/* Adds the ids of `more` that `into` lacks, after its own (SC_EINVAL past SC_HF_MAX_EOS). */
int sc_hf_eos_merge(sc_hf_eos *into, const sc_hf_eos *more, sc_diag *d);

/* A checkpoint's generation_config.json (transformers' GenerationConfig, which generate()
 * takes its eos_token_id from): its eos_token_id into out (none when the key is absent
 * or null); its other keys are not read. SC_ENOENT when the file does not exist (the
 * published checkpoints and `sparsecp mkmodel`'s have one; a directory need not), else as
 * sc_hf_config_load. */
int sc_hf_generation_eos_load(const char *path, sc_hf_eos *out, sc_diag *d);

/* Layer l has no indexer and reuses the top-K of the last "full" layer before it. */
static inline bool sc_hf_layer_index_shared(const sc_hf_config *c, int32_t layer) {
  return (c->index_shared[layer >> 3] >> (layer & 7)) & 1;
}

/* Layers 0 .. first_k_dense_replace-1 have a dense MLP, the rest MoE. */
static inline bool sc_hf_layer_is_moe(const sc_hf_config *c, int32_t layer) {
  return layer >= c->first_k_dense_replace;
}

#endif
