/* hf_writer.h - writing a small DeepSeek-V3.2 checkpoint directory of the real layout
 * (`sparsecp mkmodel`, issue 23 point 5): what transformers' deepseek_v32 save_pretrained
 * writes, scaled down, with seeded weights.
 *
 * The directory: config.json (model_type deepseek_v32, the keys transformers 5 saves:
 * rope_parameters with YaRN, mlp_layer_types, quantization_config as FineGrainedFP8
 * writes it), generation_config.json, and either one model.safetensors (one shard) or
 * model-0000i-of-0000n.safetensors with model.safetensors.index.json ({"metadata":
 * {"total_parameters", "total_size"}, "weight_map"}); every shard's header carries
 * {"__metadata__": {"format": "pt"}} as torch's writer does.
 *
 * Writer and reader cannot disagree: the config text is made first and parsed back with
 * the reader's sc_hf_config_parse (and mapped with sc_model_config_from_hf, so that a
 * written model is one sparsecp serves); the tensors written are exactly the reader's
 * table (sc_hf_tensor_table) in its order, with a weight's scale in the same shard.
 *
 * dtypes (as transformers saves them, tests/data/hf_checkpoint/transformers*.json): with
 * fp8 every quantized linear of the table is F8_E4M3 with F32 weight_scale_inv blocks of
 * 128 x 128, quantized as FineGrainedFP8 does (scale_inv = the block's largest |w| / 448,
 * q = e4m3(w / scale_inv)); e_score_correction_bias F32; everything else BF16. Without
 * fp8 every tensor is BF16.
 *
 * Values, deterministic from (seed, tensor name, element index) (base/hash.h's stream,
 * u uniform in [-1, 1)): linear weights u / sqrt(in) (before quantization; the fp8 and
 * bf16 models of one seed are the same model up to rounding), the router and
 * weights_proj likewise, lm_head u / sqrt(hidden), embeddings u, norm weights (RMSNorm
 * and k_norm) 1 + 0.1 u, k_norm's bias and e_score_correction_bias 0.1 u.
 *
 * Pure apart from the files written; any thread, one call per directory.
 */
#ifndef SC_HF_WRITER_H
#define SC_HF_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "model/hf_config.h"

/* The sizes of a generated model. The other dimensions follow from hidden (docs/model.md,
 * "Small checkpoints of the real layout"): heads hidden/32, q_lora hidden/2, kv_lora
 * hidden/4, qk_nope 32, qk_rope 16, v_head 32, intermediate 5*hidden/2, moe_intermediate
 * hidden/4, index 4 heads x 64 with top-K 64; 4 groups of experts, 2 of them chosen, 4
 * experts per token, 1 shared expert; YaRN (factor 4 over 512 positions, 2048 in all). */
typedef struct sc_hf_gen {
  int32_t layers;       /* num_hidden_layers, 1..64 (default 4) */
  int32_t dense_layers; /* first_k_dense_replace, 0..layers (default 2) */
  int32_t experts;      /* n_routed_experts, a multiple of 4 in 8..256 (default 16) */
  int32_t hidden;       /* hidden_size, a multiple of 64 in 64..4096 (default 256) */
  int32_t vocab;        /* vocab_size, 256..131072 (default 2048) */
  int32_t shards;       /* safetensors files, 1..99, at most one per weight (default 2) */
  bool fp8;             /* fp8 weights with block scales (default), else bf16 */
  bool glm;             /* GLM-5's glm_moe_dsa: model_type, architectures, rms_norm_eps
                           1e-5, indexer_rope_interleave, and indexer_types "full" for
                           even layers, "shared" for odd ones (which have no indexer
                           tensors); else deepseek_v32 (default) */
  uint64_t seed;        /* of the weights (default 1) */
} sc_hf_gen;

void sc_hf_gen_default(sc_hf_gen *g);

/* The config.json text of g (*text malloc'd, free() it) and, when c is not NULL, the
 * config the reader parses from it. SC_EINVAL naming the field when a size is out of
 * range or the model would not be servable. */
int sc_hf_gen_config(const sc_hf_gen *g, char **text, sc_hf_config *c, sc_diag *d);

/* Writes the checkpoint of g as directory dir. dir must not exist or be an empty
 * directory (else SC_EINVAL: nothing is ever overwritten); its parent must exist. The
 * files are written into a new sibling directory "dir.tmp-PID-N" that is renamed to dir
 * at the end, so a failure (SC_EIO, SC_ENOMEM) leaves nothing behind and a reader never
 * sees a half-written directory. */
int sc_hf_write_dir(const char *dir, const sc_hf_gen *g, sc_diag *d);

#endif
