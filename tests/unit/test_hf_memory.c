/* test_hf_memory.c - memory per rank of a checkpoint's model (model/hf_memory.h), on the
 * tiny fp8 checkpoint transformers saved (tests/data/hf_checkpoint/tiny-fp8: 2 layers,
 * layer 0 dense and layer 1 MoE with 4 routed experts and a shared one, vocab 256, hidden
 * 64, 2 heads, fp8 blocks of 32 x 32), computed by hand below. */
#include <criterion/criterion.h>
#include <string.h>

#include "model/hf_config.h"
#include "model/hf_memory.h"

static sc_hf_config tiny(void) {
  sc_hf_config c;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_config_load(SC_HF_DATA "/tiny-fp8/config.json", &c, &d), 0, "%s", d.msg);
  return c;
}

/* The whole table in the released dtypes is what transformers wrote: the index's
 * "total_size" of tiny-fp8 is 146352 bytes. */
Test(hf_memory, whole_model_is_the_saved_size) {
  const sc_hf_config c = tiny();
  sc_hf_mem m;
  sc_diag d = {0};
  const sc_hf_mem_in in = {.pcp = 1, .dcp = 1, .tp = 1, .block_size = 16, .context = 1000,
                           .budget = 256};
  cr_assert_eq(sc_hf_memory(&c, &in, &m, &d), 0, "%s", d.msg);
  cr_assert_eq(m.weights_total, 146352);
  cr_assert_eq(m.weights_stored, 146352); /* one rank holds all of it */
  /* the 112164 elements that are not scales (transformers.json's bf16 model: 224328
   * bytes), in f32 */
  cr_assert_eq(m.weights_f32, 112164 * 4);
  /* N = 1: the rank holds every position, in blocks of 16: 63 blocks */
  cr_assert_eq(m.kv_slots, 1008);
  cr_assert_eq(m.workspace, 0);
}

/* P 1, N 2, T 2, by hand (bytes; fp8 1 per element, bf16 2, scales f32 4 per block):
 *
 * every rank whole: embed_tokens and lm_head 2 x 256 x 64 x 2 = 65536; model.norm 128;
 *   per layer input/post norms 128 + 128, q_a_layernorm 96, kv_a_layernorm 64, k_norm
 *   weight and bias 64, weights_proj [2, 64] 256 = 736, x 2 layers = 1472; per layer
 *   q_a_proj [48, 64] 3072 + scale [2, 2] 16, kv_a_proj [40, 64] 2560 + 16, indexer wq_b
 *   [32, 48] 1536 + [1, 2] 8, wk [16, 64] 1024 + 8 = 8240, x 2 = 16480; the router
 *   [4, 64] bf16 512 and e_score_correction_bias [4] f32 16 = 528.
 *   Replicated: 65536 + 128 + 1472 + 16480 + 528 = 84144.
 * split, per layer: q_b_proj [48, 48] rows: 24 x 48 = 1152, its scale [2, 2]: rank 0's rows
 *   0-23 lie in block row 0 (2 blocks, 8), rank 1's rows 24-47 in block rows 0 and 1 (4
 *   blocks, 16); kv_b_proj [64, 32] rows: 32 x 32 = 1024 + one block row of [2, 1] = 4;
 *   o_proj [64, 32] columns: 64 x 16 = 1024 + one block column of [2, 1] = 8. Rank 0
 *   3220, rank 1 3228 per layer; x 2 = 6440 / 6456.
 *   Dense MLP (layer 0): gate/up [96, 64] rows 48 x 64 = 3072 each with 2 x 2 blocks (16)
 *   of [3, 2]; down [64, 96] columns 64 x 48 = 3072 with 2 x 2 blocks of [2, 3] = 16:
 *   9264 on both ranks. MoE (layer 1): 4 routed + 1 shared expert of [32, 64] gate/up
 *   (16 rows: 1024 + 2 blocks 8) and [64, 32] down (16 columns: 1024 + 2 blocks 8):
 *   5 x 3096 = 15480.
 * Rank 1 holds the most: 84144 + 6456 + 9264 + 15480 = 115344 (rank 0: 115328).
 * f32: the replicated elements 32768 + 64 + 736 + 16384 + 260 = 50212 and the rank's
 *   split ones 2 x (1152 + 1024 + 1024) + 3 x 3072 + 15 x 1024 = 30976: 81188 x 4.
 * KV: rows of 32 + 8 + 16 = 56 values, 2 layers: 224 bytes per token in bf16, 448 in
 *   f32; N = 2, B = 16: ceil(1000 / 32) = 32 virtual blocks, 16 slots each on a rank.
 * Step buffers, values per row (model/forward.c's buffers; heads per rank 1): hidden x 3
 *   192, q_lora 48, q 24, absorbed q 40, KV + index row 56, indexer q 32 and weights 2,
 *   o_lat 32, o_v 16, lse 1, MLP 3 x 48 = 144, MoE 2 picks x (2 x 64 + 3 x 16) = 352
 *   plus 4 router logits, top-K 4 x 8 = 32, PCP gathers 64 + 56: 1095 values, 256 rows.
 * Workspace (N = 2): (N + 1) x ceil(1000 / 2) rows of 56 f32. */
Test(hf_memory, tiny_fp8_at_p1_n2_t2_by_hand) {
  const sc_hf_config c = tiny();
  sc_hf_mem m;
  sc_diag d = {0};
  const sc_hf_mem_in in = {.pcp = 1, .dcp = 2, .tp = 2, .block_size = 16, .context = 1000,
                           .budget = 256};
  cr_assert_eq(sc_hf_memory(&c, &in, &m, &d), 0, "%s", d.msg);
  cr_assert_eq(m.weights_replicated, 84144);
  cr_assert_eq(m.weights_stored, 115344);
  cr_assert_eq(m.weights_total, 146352);
  cr_assert_eq(m.weights_f32, 81188 * 4);
  cr_assert_eq(m.kv_row_values, 56);
  cr_assert_eq(m.kv_token_bf16, 224);
  cr_assert_eq(m.kv_token_f32, 448);
  cr_assert_eq(m.kv_slots, 512);
  cr_assert_eq(m.kv_bf16, 512 * 224);
  /* fp8 index keys: 40 bf16 values (80 bytes) and a 16-value key in 16 + 4 bytes padded
   * to 32, a layer: the bf16 row's 112 (a key this short saves nothing) */
  cr_assert_eq(m.kv_token_bf16_fp8_index, 2 * (40 * 2 + 32));
  cr_assert_eq(m.kv_bf16_fp8_index, 512 * 224);
  cr_assert_eq(m.kv_token_fp8_ds_mla, 0); /* (kv_lora 32: not the fp8_ds_mla row's 512) */
  cr_assert_eq(m.kv_fp8_ds_mla, 0);
  cr_assert_eq(m.kv_f32, 512 * 448);
  cr_assert_eq(m.step_rows, 256);
  cr_assert_eq(m.step_buffers, 256 * 1095 * 4);
  cr_assert_eq(m.workspace, 3 * 500 * 56 * 4);
}

/* fp8_ds_mla rows where the model has their widths (kv_lora 512, rope 64): 656 bytes a
 * row and the key's fp8_index row (index_dim 64: 64 + 4 bytes padded to 80), a layer. */
Test(hf_memory, fp8_ds_mla_rows_by_hand) {
  sc_hf_config c = tiny();
  c.kv_lora_rank = 512, c.qk_rope_head_dim = 64, c.index_head_dim = 64;
  sc_hf_mem m;
  sc_diag d = {0};
  const sc_hf_mem_in in = {.pcp = 1, .dcp = 2, .tp = 2, .block_size = 16, .context = 1000,
                           .budget = 256};
  cr_assert_eq(sc_hf_memory(&c, &in, &m, &d), 0, "%s", d.msg);
  cr_assert_eq(m.kv_token_fp8_ds_mla, 2 * (656 + 80));
  cr_assert_eq(m.kv_fp8_ds_mla, 512 * 2 * (656 + 80));
  cr_assert_eq(m.kv_token_bf16, 2 * (512 + 64 + 64) * 2);
}

Test(hf_memory, refuses_layouts_sparsecp_does_not_run) {
  const sc_hf_config c = tiny();
  sc_hf_mem m;
  sc_diag d = {0};
  sc_hf_mem_in in = {.pcp = 2, .dcp = 3, .tp = 1, .block_size = 16, .context = 100,
                     .budget = 256};
  cr_assert_eq(sc_hf_memory(&c, &in, &m, &d), SC_EINVAL);
  in = (sc_hf_mem_in){.pcp = 1, .dcp = 1, .tp = 4, .block_size = 16, .context = 100,
                      .budget = 256};
  cr_assert_eq(sc_hf_memory(&c, &in, &m, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "not divisible by tp = 4"), "%s", d.msg);
  in.tp = 1, in.context = 0;
  cr_assert_eq(sc_hf_memory(&c, &in, &m, &d), SC_EINVAL);
}
