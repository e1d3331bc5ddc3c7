/* model_defaults.h - default dimensions of the embedded synthetic model.
 *
 * Small enough for a 2-core CPU, but with the real DeepSeek-V3.2 KV row (kv_lora_rank 512
 * + rope_dim 64 = 576 values per token) and a realistic vocabulary. `sparsecp plan` falls
 * back to these when a dimension is not given (sc_model_plan_config_default), so that it
 * describes the collectives of the model `sparsecp run` serves.
 * model_config.c fills sc_model_config from the same macros (docs/model.md).
 */
#ifndef SC_MODEL_DEFAULTS_H
#define SC_MODEL_DEFAULTS_H

#include "plan/plan.h"

#define SC_MODEL_DEFAULT_LAYERS 2
#define SC_MODEL_DEFAULT_HIDDEN 512
#define SC_MODEL_DEFAULT_HEADS 8
#define SC_MODEL_DEFAULT_KV_LORA_RANK 512
#define SC_MODEL_DEFAULT_ROPE_DIM 64
#define SC_MODEL_DEFAULT_INDEX_DIM 64
#define SC_MODEL_DEFAULT_TOPK 64
#define SC_MODEL_DEFAULT_VOCAB 32768

/* The rest of the model (not needed by the planner). */
#define SC_MODEL_DEFAULT_Q_LORA_RANK 256
#define SC_MODEL_DEFAULT_QK_NOPE_DIM 64
#define SC_MODEL_DEFAULT_V_HEAD_DIM 64
#define SC_MODEL_DEFAULT_INDEX_HEADS 4
#define SC_MODEL_DEFAULT_FFN_HIDDEN 1024
#define SC_MODEL_DEFAULT_RMS_EPS 1e-6
#define SC_MODEL_DEFAULT_ROPE_THETA 10000.0
#define SC_MODEL_DEFAULT_MAX_POSITION 65536
#define SC_MODEL_DEFAULT_SEED 1234
#define SC_MODEL_DEFAULT_INIT_SCALE 1.0

/* The planner's defaults (sc_plan_config_default: one layer, DESIGN.md §7) with the
 * dimensions of the embedded model, which the planner takes as input. */
static inline void sc_model_plan_config_default(sc_plan_config *cfg) {
  sc_plan_config_default(cfg);
  cfg->heads = SC_MODEL_DEFAULT_HEADS;
  cfg->kv_lora_rank = SC_MODEL_DEFAULT_KV_LORA_RANK;
  cfg->rope_dim = SC_MODEL_DEFAULT_ROPE_DIM;
  cfg->index_dim = SC_MODEL_DEFAULT_INDEX_DIM;
  cfg->topk = SC_MODEL_DEFAULT_TOPK;
  cfg->hidden = SC_MODEL_DEFAULT_HIDDEN;
}

#endif
