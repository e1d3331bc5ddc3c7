/* weights.h - the tensors of the model, for one TP rank.
 *
 * The tensor table (sc_model_tensor_info) names every tensor of the full model with its
 * shape ([out, in] for linear layers, as in PyTorch checkpoints) and how TP splits it:
 * head-split and MLP-up tensors by rows, o_proj and MLP-down by columns; everything else
 * (embedding, norms, the latent projections, the indexer, the LM head) is replicated.
 * Synthetic weights, the safetensors loader and the writer all walk this one table.
 *
 * Synthetic values are a counter-based hash of (seed, tensor name, element index of the
 * *full* tensor), so every rank computes identical values and a TP rank's slice is
 * exactly the slice of the full tensor, without generating the rest.
 *
 * Ownership: sc_model_weights owns its kernel buffers (allocated from the sc_kernels
 * context passed in; free with the same context). One thread at a time; the buffers
 * are read-only after construction and may be shared by ranks of one process that use
 * the same kernel context kind (the CPU backend's buffers are host memory).
 */
#ifndef SC_MODEL_WEIGHTS_H
#define SC_MODEL_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "kernels/kernels.h"
#include "model/model_config.h"

/* Per-layer tensors, in table order. */
typedef enum sc_wkind {
  SC_W_ATTN_NORM = 0, /* [hidden] */
  SC_W_WQ_A,          /* [q_lora_rank, hidden] */
  SC_W_Q_NORM,        /* [q_lora_rank] */
  SC_W_WQ_B,          /* [heads*(qk_nope+rope), q_lora_rank], rows split by head */
  SC_W_WKV_A,         /* [kv_lora_rank+rope, hidden] */
  SC_W_KV_NORM,       /* [kv_lora_rank] */
  SC_W_WKV_B,         /* [heads*(qk_nope+v_head), kv_lora_rank]: per head W_UK then W_UV */
  SC_W_WO,            /* [hidden, heads*v_head], columns split by head */
  SC_W_IDX_WQ,        /* [index_heads*index_dim, q_lora_rank] */
  SC_W_IDX_WK,        /* [index_dim, hidden] */
  SC_W_IDX_WW,        /* [index_heads, hidden]: per-token head weights */
  SC_W_FFN_NORM,      /* [hidden] */
  SC_W_W1,            /* [ffn_hidden, hidden] gate, rows split */
  SC_W_W3,            /* [ffn_hidden, hidden] up, rows split */
  SC_W_W2,            /* [hidden, ffn_hidden] down, columns split */
  SC_W_LAYER_COUNT
} sc_wkind;

/* Whole-model tensors: embed [vocab, hidden], norm [hidden], head [vocab, hidden]. */
enum { SC_W_EMBED = 0, SC_W_NORM = 1, SC_W_HEAD = 2, SC_W_GLOBAL_COUNT = 3 };

typedef enum sc_wsplit { SC_SPLIT_NONE = 0, SC_SPLIT_ROWS = 1, SC_SPLIT_COLS = 2 } sc_wsplit;
typedef enum sc_winit { SC_INIT_LINEAR = 0, SC_INIT_NORM = 1, SC_INIT_EMBED = 2 } sc_winit;

typedef struct sc_tensor_info {
  char name[64];
  int ndim;        /* 1 or 2 */
  int64_t rows, cols; /* full shape; ndim 1: rows = 1, cols = length */
  sc_wsplit split;
  sc_winit init;
} sc_tensor_info;

static inline int32_t sc_model_tensor_count(const sc_model_config *c) {
  return SC_W_GLOBAL_COUNT + c->layers * SC_W_LAYER_COUNT;
}
static inline int32_t sc_model_tensor_index(int32_t layer, sc_wkind kind) {
  return SC_W_GLOBAL_COUNT + layer * SC_W_LAYER_COUNT + (int32_t)kind;
}
/* Name, full shape and split of tensor `index` (0 <= index < count). */
void sc_model_tensor_info(const sc_model_config *c, int32_t index, sc_tensor_info *out);

/* The block of the full tensor held by TP rank `rank` of `tp`. */
void sc_model_tensor_slice(const sc_tensor_info *t, int32_t tp, int32_t rank, int64_t *row0,
                           int64_t *rows, int64_t *col0, int64_t *cols);

/* Synthetic value of element (r, c) of a tensor of the full model. */
float sc_model_synthetic_value(const sc_model_config *c, const sc_tensor_info *t, int64_t r,
                               int64_t col);

/* Per-layer tensors of a DeepSeek-V3.2 checkpoint that the synthetic model has no
 * counterpart for (model/hf_model.h loads them; NULL where a layer has none, and all
 * NULL for the synthetic model). Experts are stacked: expert e's slice of this TP rank
 * starts at e * (its slice's size). */
typedef enum sc_wxkind {
  SC_WX_IDX_KNORM_W = 0, /* [index_dim] the indexer key's LayerNorm weight */
  SC_WX_IDX_KNORM_B,     /* [index_dim] and bias */
  SC_WX_ROUTER,          /* [n_experts, hidden] mlp.gate.weight */
  SC_WX_ROUTER_BIAS,     /* [n_experts] e_score_correction_bias */
  SC_WX_EXP_W1,          /* [n_experts][moe_inter/T, hidden] gate_proj rows of this rank */
  SC_WX_EXP_W3,          /* [n_experts][moe_inter/T, hidden] up_proj rows */
  SC_WX_EXP_W2,          /* [n_experts][hidden, moe_inter/T] down_proj columns */
  SC_WX_SH_W1,           /* [n_shared*moe_inter/T, hidden] shared expert gate_proj rows */
  SC_WX_SH_W3,           /* [n_shared*moe_inter/T, hidden] up_proj rows */
  SC_WX_SH_W2,           /* [hidden, n_shared*moe_inter/T] down_proj columns */
  SC_WX_COUNT
} sc_wxkind;

/* An fp8 weight of a checkpoint kept resident (issue 23, point 3): the rank's slice as
 * e4m3 bytes and its block scales, in kernel buffers (a quarter of the f32 bytes plus
 * 1/16384th for the scales), expanded to f32 by sc_model_weights_expand when its layer
 * is about to run, into the buffer *slot points at. That buffer is shared by the same
 * tensor of every layer, so only one layer's f32 weights exist at a time. `mats`
 * matrices (the routed experts) are stored one after the other, as the f32 ones are. */
typedef struct sc_fp8_resident {
  int32_t layer;
  float **slot;              /* the table entry the forward reads (&t[i] or &x[j]) */
  uint8_t *q;                /* kernel buffer: mats x rows x cols e4m3 bytes */
  float *scale;              /* kernel buffer: mats x srows x scols f32 */
  int32_t mats;
  int64_t rows, cols, srows, scols;
  int32_t r_off, c_off;      /* where the slice starts inside its first scale block */
  int32_t block_rows, block_cols;
  int32_t scratch;           /* which shared f32 buffer it expands into */
  /* where it came from, for checks: the checkpoint tensor of matrix 0 (the others are
   * the next experts', "experts.E." in the name) and the slice's first row and column */
  char source[96];
  int64_t row0, col0;
} sc_fp8_resident;

typedef struct sc_model_weights {
  sc_model_config cfg;
  int32_t tp, tp_rank;
  int32_t num;
  float **t; /* [num] kernel buffers, each the rank's slice, row-major (NULL: a tensor
                the model does not have, e.g. the dense FFN of a checkpoint's MoE layer;
                for a resident fp8 weight, its layer's expansion, see sc_fp8_resident) */
  float **x; /* [cfg.layers * SC_WX_COUNT] sc_wxkind buffers, or NULL (synthetic) */
  sc_fp8_resident *fp8;  /* [num_fp8] the resident fp8 weights, in layer order */
  int32_t num_fp8;
  int32_t *fp8_first;    /* [cfg.layers + 1]: layer l's are fp8[fp8_first[l] ..
                            fp8_first[l + 1]) (NULL without any) */
  float **scratch;       /* [num_scratch] the f32 buffers they expand into (owned) */
  int32_t num_scratch;
  void *flat;            /* borrowed: the one buffer t[] points into once
                            sc_model_weights_flat_use moved them (NULL: t[] owned) */
  float **own;           /* [num] the buffers t[] held before, kept by flat_use, or NULL */
} sc_model_weights;

/* Expands layer `layer`'s resident fp8 weights into their f32 buffers (queued on k, as the
 * layer's work that follows is). A no-op without them. The forward calls it first thing
 * in every layer. */
int sc_model_weights_expand(sc_kernels *k, const sc_model_weights *w, int32_t layer);

static inline float *sc_w(const sc_model_weights *w, int32_t layer, sc_wkind kind) {
  return w->t[sc_model_tensor_index(layer, kind)];
}
static inline float *sc_wx(const sc_model_weights *w, int32_t layer, sc_wxkind kind) {
  return w->x ? w->x[layer * SC_WX_COUNT + (int32_t)kind] : NULL;
}

/* Synthetic weights of TP rank tp_rank (cfg valid, sc_model_config_check_tp passed). */
int sc_model_weights_synthetic(sc_kernels *k, const sc_model_config *cfg, int32_t tp,
                               int32_t tp_rank, sc_model_weights *w, sc_diag *d);

/* Weights of TP rank tp_rank from a safetensors file holding the full model: every
 * tensor of the table must be present with its full shape and dtype F32 or BF16, and no
 * other tensor may be (a misnamed tensor is an error, not silently ignored). */
int sc_model_weights_load(sc_kernels *k, const sc_model_config *cfg, int32_t tp,
                          int32_t tp_rank, const char *path, sc_model_weights *w,
                          sc_diag *d);

void sc_model_weights_free(sc_kernels *k, sc_model_weights *w);

/* One buffer for every tensor: the weights that the ranks of one GPU share, one copy
 * read by all (actors/rank_ctx.c; four ranks that each read their own copy of the same
 * weights pay the device's memory four times where one copy's reads meet in its L2).
 * Tensors in table order, each at a multiple of 256 bytes.
 * flat_bytes: the buffer's size (the same before and after a move), or 0 where the
 * weights cannot move there: a checkpoint's (resident fp8 weights and per-layer extras
 * are not in the layout). flat_copy queues the copy of every tensor into flat (a kernel
 * buffer of flat_bytes) and waits for it. flat_use points the table into flat, which
 * must hold this table's values (flat_copy's of equal weights), and frees the buffers it
 * held (free_own) or keeps them until sc_model_weights_free or flat_drop; flat stays the
 * caller's. Both refuse weights that moved already (SC_EINVAL). Either before the
 * forward's first step or with its recordings forgotten. */
size_t sc_model_weights_flat_bytes(const sc_model_weights *w);
int sc_model_weights_flat_copy(sc_kernels *k, const sc_model_weights *w, void *flat);
int sc_model_weights_flat_use(sc_kernels *k, sc_model_weights *w, void *flat, bool free_own);
/* Points the table back at the buffers flat_use kept (SC_EINVAL where it kept none). */
int sc_model_weights_flat_drop(sc_model_weights *w);

/* For the loaders: checks the TP split of cfg and rank, and sets w up with its fields and
 * an empty table of sc_model_tensor_count(cfg) buffers (w->x stays NULL). On failure w is
 * empty (nothing to free). */
int sc_model_weights_begin(const sc_model_config *cfg, int32_t tp, int32_t tp_rank,
                           sc_model_weights *w, sc_diag *d);

/* Writes the full synthetic model of cfg as a safetensors file (dtype SC_DT_F32 or
 * SC_DT_BF16). */
int sc_model_write_synthetic(const sc_model_config *cfg, int dtype, const char *path,
                             sc_diag *d);

#endif
