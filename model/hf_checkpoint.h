/* hf_checkpoint.h - a DeepSeek-V3.2 (or GLM-5) checkpoint directory as published (Hugging Face
 * layout): config.json (model/hf_config.h), then either model.safetensors.index.json
 * ({"weight_map": {tensor: shard file}}) with its shards, or one model.safetensors.
 *
 * The tensor table is computed from the config. Names and shapes ([out, in] for linear
 * layers) are those of transformers' deepseek_v32 (modeling_deepseek_v32.py; its
 * save_pretrained writes routed experts one by one, as DeepSeek does) and of the
 * published checkpoint that DeepSeek's inference/convert.py reads:
 *
 *   model.embed_tokens.weight [vocab, hidden]        model.norm.weight [hidden]
 *   lm_head.weight [vocab, hidden]                   (absent when tie_word_embeddings)
 *   model.layers.L.input_layernorm.weight, post_attention_layernorm.weight [hidden]
 *   model.layers.L.self_attn.
 *     q_a_proj [q_lora, hidden]            q_a_layernorm [q_lora]
 *     q_b_proj [heads*(nope+rope), q_lora]
 *     kv_a_proj_with_mqa [kv_lora+rope, hidden]   kv_a_layernorm [kv_lora]
 *     kv_b_proj [heads*(nope+v), kv_lora]  o_proj [hidden, heads*v]
 *     indexer.wq_b [index_heads*index_dim, q_lora]   indexer.wk [index_dim, hidden]
 *     indexer.k_norm.weight, indexer.k_norm.bias [index_dim] (a LayerNorm)
 *     indexer.weights_proj [index_heads, hidden]
 *     (the five indexer tensors only in layers with an indexer: glm_moe_dsa's "shared"
 *     layers have none, as GlmMoeDsaAttention builds no indexer there)
 *   dense layers (L < first_k_dense_replace): model.layers.L.mlp.
 *     gate_proj, up_proj [intermediate, hidden]; down_proj [hidden, intermediate]
 *   MoE layers: model.layers.L.mlp.
 *     gate.weight [experts, hidden]        gate.e_score_correction_bias [experts]
 *     experts.E.gate_proj, up_proj [moe_inter, hidden]; experts.E.down_proj
 *     [hidden, moe_inter] for E < n_routed_experts
 *     shared_experts.gate_proj, up_proj [moe_inter*n_shared, hidden]; down_proj
 *     [hidden, moe_inter*n_shared]
 *   (".weight" after every name above except the two with their own suffix.)
 *
 * dtypes: with quantization_config (fp8), the "quantized linears" - every q/kv/o
 * projection, indexer.wq_b and indexer.wk, and every gate/up/down projection (dense,
 * routed and shared) - are F8_E4M3 with "NAME.weight_scale_inv" F32 [ceil(out/br),
 * ceil(in/bc)] beside them (DeepSeek's Linear is fp8 unless built with a dtype); the
 * rest stay in BF16 or F32 (embed_tokens, lm_head, the norms, k_norm, weights_proj,
 * mlp.gate and its e_score_correction_bias: DeepSeek keeps weights_proj and the router
 * in bf16/f32; transformers keeps gate.weight, e_score_correction_bias and weights_proj
 * in f32). Without quantization_config every tensor is BF16 or F32 and no scale exists.
 * A scale whose shape equals the table's once dimensions of size 1 are dropped is
 * accepted (transformers 5.17 saves a routed expert's [n, 1] or [1, n] scale as [n]; the
 * bytes are the same) and reported with the table's shape.
 *
 * The multi-token-prediction layers (model.layers.N.* for num_hidden_layers <= N <
 * num_hidden_layers + num_nextn_predict_layers) are recognized and skipped: counted, not
 * checked, not part of the table (DeepSeek's convert.py and transformers skip them too).
 *
 * Checked, each failure an error naming the tensor (and the shard): a tensor of the
 * table missing, one not in the table ("extra"), a wrong shape or dtype, a tensor in two
 * shards, a weight_map entry whose shard does not hold it, a shard tensor the weight_map
 * does not list or puts elsewhere, a shard file that does not exist (SC_ENOENT) or cannot
 * be parsed (safetensors.h's rules). Shard names must be plain file names in the
 * directory, at most SC_HF_MAX_SHARDS of them. Layout errors are SC_EINVAL or SC_ENOENT
 * (SC_ETOOBIG and SC_ENOTSUP from the safetensors reader: a header over its limit, a
 * dtype other than F32, BF16 and F8_E4M3); a file that exists but cannot be opened, mapped
 * or read (permissions, a folder) SC_EIO; out of memory SC_ENOMEM.
 *
 * Ownership: sc_hf_checkpoint owns the table and the mapped shards; tensor pointers are
 * valid until sc_hf_checkpoint_close. On failure nothing stays mapped or allocated. One
 * thread at a time; const lookups may run concurrently.
 */
#ifndef SC_HF_CHECKPOINT_H
#define SC_HF_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "model/hf_config.h"
#include "model/safetensors.h"

#define SC_HF_MAX_NAME 96
#define SC_HF_MAX_SHARDS 4096 /* shard files of one directory (DeepSeek-V3.2 has 163) */

/* What a table entry may hold. */
typedef enum sc_hf_kind {
  SC_HF_FLOAT = 0, /* BF16 or F32: embeddings, norms, biases, router, weights_proj */
  SC_HF_LINEAR = 1, /* a quantized linear: F8_E4M3 with quant.fp8, else BF16 or F32 */
  SC_HF_SCALE = 2, /* weight_scale_inv: F32 */
} sc_hf_kind;

typedef struct sc_hf_spec {
  char name[SC_HF_MAX_NAME];
  int kind; /* sc_hf_kind */
  int ndim; /* 1 or 2 */
  int64_t shape[2];
} sc_hf_spec;

/* The table of cfg, in model order (embed_tokens, layer by layer, norm, lm_head; each
 * scale right after its weight). *out is malloc'd; free() it. */
int sc_hf_tensor_table(const sc_hf_config *cfg, sc_hf_spec **out, int32_t *num, sc_diag *d);

/* True when name is a tensor of a multi-token-prediction layer of cfg. */
bool sc_hf_is_mtp_tensor(const sc_hf_config *cfg, const char *name);

typedef struct sc_hf_tensor {
  const char *name; /* the table's */
  int dtype;        /* sc_st_dtype */
  int ndim;         /* the table's shape (the file's equals it, or squeezes a scale's) */
  int64_t shape[2];
  const uint8_t *data; /* in the mapped shard */
  uint64_t bytes;
  int32_t shard;
} sc_hf_tensor;

typedef struct sc_hf_checkpoint {
  sc_hf_config cfg;
  bool indexed;          /* model.safetensors.index.json (else one model.safetensors) */
  int32_t num_shards;
  char **shard_names;    /* [num_shards] file names */
  sc_st_file *shards;    /* [num_shards] mapped */
  int32_t num;           /* tensors of the table */
  sc_hf_spec *spec;      /* [num], sorted by name */
  sc_hf_tensor *t;       /* [num], parallel to spec */
  int32_t mtp_tensors;   /* skipped multi-token-prediction tensors */
  uint64_t mtp_bytes;
  uint64_t bytes_f32, bytes_bf16, bytes_f8; /* of the checked tensors, by dtype */
} sc_hf_checkpoint;

/* Opens and checks the directory dir. */
int sc_hf_checkpoint_open(const char *dir, sc_hf_checkpoint *c, sc_diag *d);
void sc_hf_checkpoint_close(sc_hf_checkpoint *c);

/* The tensor of the table named name, or NULL. */
const sc_hf_tensor *sc_hf_checkpoint_find(const sc_hf_checkpoint *c, const char *name);

#endif
