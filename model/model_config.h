/* model_config.h - the configuration of the synthetic DeepSeek-V3.2-shaped model
 * (docs/model.md lists every key with its meaning and default).
 *
 * Pure: parsing takes text, loading a file is a thin wrapper. Defaults come from
 * model_defaults.h, which the planner shares, so `sparsecp plan` and the model agree.
 * Any thread; no global state.
 */
#ifndef SC_MODEL_CONFIG_H
#define SC_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "model/hf_config.h"
#include "model/moe_route.h"
#include "plan/plan.h"

/* The pieces of a DeepSeek-V3.2 checkpoint's architecture that the synthetic model does
 * not have (model/hf_model.h fills them from config.json; docs/model.md gives the
 * formulas). All zero in the synthetic model, which keeps its dense SwiGLU FFN in every
 * layer, plain RoPE from rope_theta, the softmax scale 1/sqrt(qk head dim) and an
 * indexer key without norm; there is no JSON key for them in the synthetic config. */
typedef struct sc_model_arch {
  bool checkpoint;            /* the fields below are in use */
  sc_hf_rope_scaling rope;    /* YaRN (or plain) rotary table and its scales, with
                                 rope_theta */
  int32_t first_dense;        /* layers [0, first_dense) dense (ffn_hidden), the rest MoE
                                 when route.n_experts > 0 */
  sc_moe_route_cfg route;     /* routed experts and their routing */
  int32_t moe_inter;          /* each routed expert's intermediate width (split over TP) */
  int32_t n_shared;           /* shared experts, fused into one of n_shared * moe_inter */
  float index_norm_eps;       /* the indexer key's LayerNorm epsilon */
  float latent_norm_eps;      /* q_norm's and kv_norm's RMSNorm epsilon (transformers'
                                 q_a_layernorm and kv_a_layernorm: 1e-6 whatever
                                 rms_norm_eps says); the synthetic model uses rms_eps */
  bool index_interleaved;     /* the checkpoint's indexer rotary layout is the kernel's
                                 (glm_moe_dsa); else halves, permuted at load */
  uint8_t index_shared[SC_HF_MAX_LAYERS / 8]; /* bit l: layer l has no indexer and reuses
                                 the top-K of the last layer before it that has one */
} sc_model_arch;

typedef struct sc_model_config {
  int32_t vocab;
  int32_t hidden;
  int32_t layers;
  int32_t heads;        /* attention heads of the whole model (split over TP) */
  int32_t q_lora_rank;  /* query low-rank latent */
  int32_t kv_lora_rank; /* compressed KV latent c_kv (dc) */
  int32_t qk_nope_dim;  /* per-head non-rotary query/key width */
  int32_t rope_dim;     /* rotary width (dr): k_rope is shared by all heads */
  int32_t v_head_dim;
  int32_t index_heads;  /* lightning indexer heads H_I (not split over TP) */
  int32_t index_dim;    /* indexer head width d_I (also the stored index-key width) */
  int32_t topk;         /* K: context tokens each query attends to */
  int32_t ffn_hidden;   /* SwiGLU intermediate width (split over TP) */
  int32_t max_position; /* largest request extent the model accepts */
  float rms_eps;
  float rope_theta;
  uint64_t seed;        /* synthetic weights */
  float init_scale;     /* synthetic weights: uniform(+-init_scale / sqrt(fan_in)) */
  sc_model_arch arch;   /* a checkpoint's architecture (zero: the synthetic model) */
  /* The tokens a request ends at (eos_token_id; none in the embedded model). Not part
   * of what the model computes: sc_model_config_same and the digest leave it out. */
  sc_hf_eos eos;
} sc_model_config;

#define SC_MODEL_MAX_DIM (1 << 16)
#define SC_MODEL_MAX_VOCAB (1 << 22)

void sc_model_config_default(sc_model_config *c);

/* Checks ranges and the structural rules (rope_dim even, ...). SC_EINVAL + message. */
int sc_model_config_validate(const sc_model_config *c, sc_diag *d);

/* Checks that the model can be split over tp ranks (heads and ffn_hidden divisible). */
int sc_model_config_check_tp(const sc_model_config *c, int32_t tp, sc_diag *d);

/* Parses a JSON object of config keys onto the defaults; unknown keys, wrong types and
 * invalid values are errors naming the key. The result is validated. */
int sc_model_config_parse(const char *text, size_t len, sc_model_config *c, sc_diag *d);

/* Applies the keys of a jansson object (json_t *) onto c, checking each key's range
 * but not the rules across fields (sc_model_config_validate does those). */
int sc_model_config_apply_json(sc_model_config *c, const void *json_object, sc_diag *d);

/* Reads and parses a JSON file (at most 1 MiB; base/file_read.h says the errors of
 * reading it). */
int sc_model_config_load(const char *path, sc_model_config *c, sc_diag *d);

/* a and b describe the same model (every field, the checkpoint architecture included;
 * not eos, which is the scheduler's, not the forward pass's). */
bool sc_model_config_same(const sc_model_config *a, const sc_model_config *b);
/* A 64-bit digest of every field sc_model_config_same compares (FNV-1a): equal for the
 * same model on any host of the same byte order (the fields go as their bytes; every
 * supported host is little-endian). */
uint64_t sc_model_config_digest(const sc_model_config *c);

/* Copies the model dimensions the planner needs into a parallel configuration. */
void sc_model_config_to_plan(const sc_model_config *m, sc_plan_config *p);

/* Derived widths. */
static inline int32_t sc_model_kv_width(const sc_model_config *c) {
  return c->kv_lora_rank + c->rope_dim; /* one KV row: [c_kv ; k_rope] */
}
static inline int32_t sc_model_q_head_dim(const sc_model_config *c) {
  return c->qk_nope_dim + c->rope_dim;
}
/* Layer l's FFN is a mixture of experts (else the dense SwiGLU of ffn_hidden). */
static inline bool sc_model_layer_is_moe(const sc_model_config *c, int32_t l) {
  return c->arch.route.n_experts > 0 && l >= c->arch.first_dense;
}
/* Layer l has no indexer of its own (glm_moe_dsa's "shared" layers): its attention uses
 * the top-K selection of the last layer before it that has one. */
static inline bool sc_model_layer_index_shared(const sc_model_config *c, int32_t l) {
  return c->arch.checkpoint && l >= 0 && l < c->layers &&
         ((c->arch.index_shared[l >> 3] >> (l & 7)) & 1);
}
/* Rotary width of the indexer: the first min(rope_dim, index_dim) values, made even. */
static inline int32_t sc_model_index_rope_dim(const sc_model_config *c) {
  const int32_t r = c->rope_dim < c->index_dim ? c->rope_dim : c->index_dim;
  return r & ~1;
}

#endif
