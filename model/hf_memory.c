/* hf_memory.c - memory per rank of a checkpoint's model (hf_memory.h). */
#include "model/hf_memory.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/hf_checkpoint.h"
#include "model/hf_model.h"
#include "model/model_config.h"
#include "model/model_defaults.h"
#include "plan/plan.h"

enum { SPLIT_NONE = 0, SPLIT_ROWS = 1, SPLIT_COLS = 2 };

static bool ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

/* How the loader splits the weight named base (".weight" of a table entry, without a
 * scale's "_scale_inv") over TP: hf_model.h's table. */
static int split_of(const char *base) {
  if (ends_with(base, ".q_b_proj.weight") || ends_with(base, ".kv_b_proj.weight") ||
      ends_with(base, ".gate_proj.weight") || ends_with(base, ".up_proj.weight"))
    return SPLIT_ROWS;
  if (ends_with(base, ".o_proj.weight") || ends_with(base, ".down_proj.weight"))
    return SPLIT_COLS;
  return SPLIT_NONE;
}

/* Blocks of size b covering the n elements from n * r (rank r's slice). */
static int64_t blocks_of_slice(int64_t n, int32_t r, int64_t b) {
  const int64_t first = n * r, last = n * (r + 1) - 1;
  return last / b - first / b + 1;
}

int sc_hf_memory(const sc_hf_config *cfg, const sc_hf_mem_in *in, sc_hf_mem *out, sc_diag *d) {
  if (in->block_size < 1 || in->budget < 1 || in->context < 1)
    return sc_fail(d, SC_EINVAL, "block size, budget and context must be >= 1");
  sc_model_config m;
  int rc = sc_model_config_from_hf(cfg, &m, d);
  if (rc) return rc;
  sc_plan_config pc;
  sc_model_plan_config_default(&pc);
  pc.pcp = in->pcp, pc.dcp = in->dcp, pc.tp = in->tp, pc.block_size = in->block_size;
  sc_model_config_to_plan(&m, &pc);
  if ((rc = sc_plan_config_validate(&pc, d)) || (rc = sc_model_config_check_tp(&m, in->tp, d)))
    return rc;
  sc_hf_spec *spec = NULL;
  int32_t num = 0;
  if ((rc = sc_hf_tensor_table(cfg, &spec, &num, d))) return rc;
  const int32_t T = in->tp;
  uint64_t *stored = calloc((size_t)T, sizeof *stored), *f32 = calloc((size_t)T, sizeof *f32);
  if (stored == NULL || f32 == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto out;
  }
  sc_hf_mem o = {0};
  for (int32_t i = 0; i < num; i++) {
    const sc_hf_spec *s = &spec[i];
    const int64_t rows = s->ndim == 2 ? s->shape[0] : 1;
    const int64_t cols = s->ndim == 2 ? s->shape[1] : s->shape[0];
    if (s->kind == SC_HF_SCALE) { /* F32 blocks of its weight, the one before it */
      const sc_hf_spec *w = &spec[i - 1];
      const int split = split_of(w->name);
      o.weights_total += (uint64_t)(rows * cols) * 4;
      if (split == SPLIT_NONE) o.weights_replicated += (uint64_t)(rows * cols) * 4;
      for (int32_t r = 0; r < T; r++) {
        const int64_t br = split == SPLIT_ROWS
                               ? blocks_of_slice(w->shape[0] / T, r, cfg->quant.block_rows)
                               : rows;
        const int64_t bc = split == SPLIT_COLS
                               ? blocks_of_slice(w->shape[1] / T, r, cfg->quant.block_cols)
                               : cols;
        stored[r] += (uint64_t)(br * bc) * 4;
      }
      continue;
    }
    const int split = split_of(s->name);
    const uint64_t elem = s->kind == SC_HF_LINEAR ? (cfg->quant.fp8 ? 1 : 2)
                          : ends_with(s->name, "e_score_correction_bias") ? 4
                                                                          : 2;
    const uint64_t numel = (uint64_t)(rows * cols), slice = split ? numel / (uint64_t)T : numel;
    o.weights_total += numel * elem;
    if (!split) o.weights_replicated += numel * elem;
    for (int32_t r = 0; r < T; r++) {
      stored[r] += slice * elem;
      f32[r] += slice * 4;
    }
  }
  int32_t top = 0;
  for (int32_t r = 1; r < T; r++)
    if (stored[r] > stored[top]) top = r;
  o.weights_stored = stored[top];
  o.weights_f32 = f32[top];

  /* KV cache */
  const int64_t L = in->context, B = in->block_size, N = in->dcp;
  const int64_t iw = (int64_t)cfg->kv_lora_rank + cfg->qk_rope_head_dim + cfg->index_head_dim;
  o.kv_row_values = iw;
  o.kv_token_f32 = (uint64_t)(iw * cfg->num_hidden_layers) * 4;
  o.kv_token_bf16 = (uint64_t)(iw * cfg->num_hidden_layers) * 2;
  o.kv_token_bf16_fp8_index =
      (uint64_t)(((iw - cfg->index_head_dim) * 2 + SC_KFP8_INDEX_ROW_STEP(cfg->index_head_dim)) *
                 cfg->num_hidden_layers);
  if (cfg->kv_lora_rank == SC_KFP8_DS_MLA_NOPE && cfg->qk_rope_head_dim == SC_KFP8_DS_MLA_ROPE)
    o.kv_token_fp8_ds_mla =
        (uint64_t)((SC_KFP8_DS_MLA_ROW_BYTES + SC_KFP8_INDEX_ROW_STEP(cfg->index_head_dim)) *
                   cfg->num_hidden_layers);
  o.kv_slots = (L + B * N - 1) / (B * N) * B;
  o.kv_f32 = (uint64_t)o.kv_slots * o.kv_token_f32;
  o.kv_bf16 = (uint64_t)o.kv_slots * o.kv_token_bf16;
  o.kv_bf16_fp8_index = (uint64_t)o.kv_slots * o.kv_token_bf16_fp8_index;
  o.kv_fp8_ds_mla = (uint64_t)o.kv_slots * o.kv_token_fp8_ds_mla;

  /* step buffers (values per row, f32), model/forward.c's and moe_ffn.c's */
  const int64_t P = in->pcp, hid = cfg->hidden_size, Hl = cfg->num_attention_heads / T;
  const int64_t dc = cfg->kv_lora_rank, dr = cfg->qk_rope_head_dim, HI = cfg->index_n_heads;
  const int64_t K = cfg->index_topk, k = cfg->num_experts_per_tok, E = cfg->n_routed_experts;
  const bool moe = cfg->first_k_dense_replace < cfg->num_hidden_layers;
  const int64_t per_row =
      3 * hid + cfg->q_lora_rank + Hl * (cfg->qk_nope_head_dim + dr) + Hl * (dc + dr) + iw +
      HI * cfg->index_head_dim + HI + Hl * dc + Hl * cfg->v_head_dim + Hl +
      3 * (cfg->intermediate_size / T) +
      (moe ? k * (2 * hid + 3 * (cfg->moe_intermediate_size / T)) + E : 0) + 4 * K +
      P * hid + P * iw;
  o.step_rows = (in->budget + P - 1) / P;
  o.step_buffers = (uint64_t)(o.step_rows * per_row) * 4;
  const int64_t shard = (L + N - 1) / N;
  o.workspace = N > 1 ? (uint64_t)((N + 1) * shard * iw) * 4 : 0;
  *out = o;
out:
  free(stored);
  free(f32);
  free(spec);
  return rc;
}
