/* test_hf_writer.c - the generated DeepSeek-V3.2 checkpoints (model/hf_writer.h, issue 23
 * point 5): the config of the default sizes as the reader parses it, the refused sizes,
 * the fp8 and bf16 models of one seed being one model (every fp8 weight dequantizes to the
 * bf16 one within e4m3's rounding, every block's largest code is 448), the dtypes and
 * the shards (a scale beside its weight, none empty), and that an existing non-empty
 * directory is refused untouched with nothing left beside it. The CLI test
 * (tests/cli/mkmodel_cli.sh) serves the written models. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/bf16.h"
#include "model/fp8_block.h"
#include "model/hf_checkpoint.h"
#include "model/hf_writer.h"

Test(hf_writer, config_of_the_default_sizes) {
  sc_hf_gen g;
  sc_hf_gen_default(&g);
  char *text = NULL;
  sc_hf_config c;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_gen_config(&g, &text, &c, &d), 0, "%s", d.msg);
  cr_assert(strstr(text, "\"model_type\": \"deepseek_v32\""), "%s", text);
  cr_assert(strstr(text, "\"rope_parameters\""), "%s", text);
  free(text);
  cr_assert_eq(c.num_hidden_layers, 4);
  cr_assert_eq(c.first_k_dense_replace, 2);
  cr_assert_eq(c.n_routed_experts, 16);
  cr_assert_eq(c.n_group, 4);
  cr_assert_eq(c.topk_group, 2);
  cr_assert_eq(c.num_experts_per_tok, 4);
  cr_assert_eq(c.n_shared_experts, 1);
  cr_assert_eq(c.hidden_size, 256);
  cr_assert_eq(c.num_attention_heads, 8);
  cr_assert_eq(c.q_lora_rank, 128);
  cr_assert_eq(c.kv_lora_rank, 64);
  cr_assert_eq(c.qk_nope_head_dim, 32);
  cr_assert_eq(c.qk_rope_head_dim, 16);
  cr_assert_eq(c.v_head_dim, 32);
  cr_assert_eq(c.intermediate_size, 640);
  cr_assert_eq(c.moe_intermediate_size, 64);
  cr_assert_eq(c.index_n_heads, 4);
  cr_assert_eq(c.index_head_dim, 64);
  cr_assert_eq(c.index_topk, 64);
  cr_assert_eq(c.vocab_size, 2048);
  cr_assert_eq(c.max_position_embeddings, 2048);
  cr_assert_eq(c.rope.type, SC_HF_ROPE_YARN);
  cr_assert_eq(c.rope.factor, 4.0);
  cr_assert_eq(c.rope.original_max_position_embeddings, 512);
  cr_assert_eq(c.rms_norm_eps, 1e-6);
  cr_assert_eq(c.routed_scaling_factor, 2.5);
  cr_assert(c.quant.fp8 && c.quant.block_rows == 128 && c.quant.block_cols == 128);
  cr_assert_eq(c.unknown_keys, 0, "unknown key %s", c.first_unknown);
  g.fp8 = false;
  cr_assert_eq(sc_hf_gen_config(&g, &text, &c, &d), 0, "%s", d.msg);
  free(text);
  cr_assert(!c.quant.fp8);
}

Test(hf_writer, refuses_bad_sizes) {
  static const struct {
    size_t field; /* offset of an int32_t of sc_hf_gen */
    int32_t value;
    const char *want;
  } cases[] = {
      {offsetof(sc_hf_gen, layers), 0, "layers = 0"},
      {offsetof(sc_hf_gen, layers), 65, "layers = 65"},
      {offsetof(sc_hf_gen, dense_layers), 5, "dense layers = 5"},
      {offsetof(sc_hf_gen, dense_layers), -1, "dense layers = -1"},
      {offsetof(sc_hf_gen, experts), 6, "experts = 6"},
      {offsetof(sc_hf_gen, experts), 18, "experts = 18"},
      {offsetof(sc_hf_gen, experts), 260, "experts = 260"},
      {offsetof(sc_hf_gen, hidden), 96, "hidden = 96"},
      {offsetof(sc_hf_gen, hidden), 32, "hidden = 32"},
      {offsetof(sc_hf_gen, vocab), 100, "vocab = 100"},
      {offsetof(sc_hf_gen, shards), 0, "shards = 0"},
      {offsetof(sc_hf_gen, shards), 100, "shards = 100"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sc_hf_gen g;
    sc_hf_gen_default(&g);
    memcpy((char *)&g + cases[i].field, &cases[i].value, sizeof(int32_t));
    char *text = NULL;
    sc_diag d = {0};
    cr_assert_eq(sc_hf_gen_config(&g, &text, NULL, &d), SC_EINVAL, "case %zu", i);
    cr_assert(strstr(d.msg, cases[i].want), "\"%s\" lacks \"%s\"", d.msg, cases[i].want);
    cr_assert(text == NULL);
  }
  /* more shards than weights: refused when writing, nothing left */
  sc_hf_gen g;
  sc_hf_gen_default(&g);
  g.layers = 1, g.dense_layers = 1, g.shards = 99;
  char parent[] = "/tmp/sc_hfw_XXXXXX", dir[64];
  cr_assert(mkdtemp(parent) != NULL);
  snprintf(dir, sizeof dir, "%s/m", parent);
  sc_diag d = {0};
  cr_assert_eq(sc_hf_write_dir(dir, &g, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "shards = 99: the model has only"), "%s", d.msg);
  cr_assert_eq(rmdir(parent), 0, "something was left in %s", parent);
}

static void write_model(const char *dir, bool fp8, int32_t shards) {
  sc_hf_gen g;
  sc_hf_gen_default(&g);
  g.fp8 = fp8;
  g.shards = shards;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_write_dir(dir, &g, &d), 0, "%s", d.msg);
}

static void remove_tree(const char *dir) {
  DIR *dp = opendir(dir);
  if (dp == NULL) return;
  struct dirent *e;
  char path[512];
  while ((e = readdir(dp)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  closedir(dp);
  rmdir(dir);
}

/* Every fp8 weight of the fp8 model against the same tensor of the bf16 model (one seed):
 * the same value up to e4m3 rounding (half a step: 1/16 of the value, or 2^-10 of the
 * block's scale below e4m3's smallest normal 2^-6) and bf16 rounding (2^-8 relative);
 * each block's largest |code| is exactly 448, as amax / scale_inv is. */
Test(hf_writer, fp8_and_bf16_are_one_model) {
  char parent[] = "/tmp/sc_hfw_XXXXXX", d8[64], d16[64];
  cr_assert(mkdtemp(parent) != NULL);
  snprintf(d8, sizeof d8, "%s/fp8", parent);
  snprintf(d16, sizeof d16, "%s/bf16", parent);
  write_model(d8, true, 3);
  write_model(d16, false, 1);
  sc_hf_checkpoint a, b;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_checkpoint_open(d8, &a, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_hf_checkpoint_open(d16, &b, &d), 0, "%s", d.msg);
  cr_assert(a.indexed && a.num_shards == 3);
  cr_assert(!b.indexed && b.num_shards == 1);
  int32_t shard_used[3] = {0}, checked = 0;
  for (int32_t i = 0; i < a.num; i++) {
    const sc_hf_tensor *t = &a.t[i];
    shard_used[t->shard]++;
    const bool bias = strstr(t->name, "e_score_correction_bias") != NULL;
    if (a.spec[i].kind == SC_HF_SCALE) {
      cr_assert_eq(t->dtype, SC_ST_F32, "%s", t->name);
      continue;
    }
    const sc_hf_tensor *u = sc_hf_checkpoint_find(&b, t->name);
    cr_assert(u != NULL && u->dtype == SC_ST_BF16, "%s", t->name);
    if (a.spec[i].kind != SC_HF_LINEAR) {
      cr_assert_eq(t->dtype, bias ? SC_ST_F32 : SC_ST_BF16, "%s", t->name);
      continue;
    }
    cr_assert_eq(t->dtype, SC_ST_F8_E4M3, "%s", t->name);
    char sname[SC_HF_MAX_NAME + 16];
    snprintf(sname, sizeof sname, "%s_scale_inv", t->name);
    const sc_hf_tensor *s = sc_hf_checkpoint_find(&a, sname);
    cr_assert(s != NULL && s->shard == t->shard, "%s: its scale is not beside it", t->name);
    const int64_t rows = t->shape[0], cols = t->shape[1], sc = s->shape[1];
    float *w = malloc((size_t)(rows * cols) * sizeof *w);
    const sc_fp8_weight fw = {.q = t->data, .scale = s->data, .rows = rows, .cols = cols,
                              .block_rows = 128, .block_cols = 128};
    cr_assert_eq(sc_fp8_dequant_f32(&fw, 0, rows, 0, cols, w), 0);
    float *blockmax = calloc((size_t)(s->shape[0] * sc), sizeof *blockmax);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) {
        const int64_t e = r * cols + c;
        float scale;
        memcpy(&scale, s->data + 4 * ((r / 128) * sc + c / 128), 4);
        const uint8_t *p = u->data + 2 * e;
        const float ref = sc_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
        const float tol = fabsf(ref) / 16 + scale / 1024 + fabsf(ref) / 256;
        cr_assert(fabsf(w[e] - ref) <= tol, "%s[%lld][%lld]: fp8 %g, bf16 %g", t->name,
                  (long long)r, (long long)c, w[e], ref);
        float *m = &blockmax[(r / 128) * sc + c / 128];
        *m = fmaxf(*m, fabsf(sc_e4m3_to_f32(t->data[e])));
      }
    for (int64_t k = 0; k < s->shape[0] * sc; k++)
      cr_assert_eq(blockmax[k], 448.0f, "%s block %lld: largest code %g", t->name,
                   (long long)k, blockmax[k]);
    free(blockmax);
    free(w);
    checked++;
  }
  cr_assert_eq(checked, 4 * 7 + 2 * 3 + 2 * (16 + 1) * 3); /* attention, dense, MoE linears */
  for (int k = 0; k < 3; k++) cr_assert_gt(shard_used[k], 0, "shard %d is empty", k);
  sc_hf_checkpoint_close(&a);
  sc_hf_checkpoint_close(&b);
  remove_tree(d8);
  remove_tree(d16);
  cr_assert_eq(rmdir(parent), 0, "something was left in %s", parent);
}

Test(hf_writer, never_overwrites) {
  char parent[] = "/tmp/sc_hfw_XXXXXX", dir[64], file[80];
  cr_assert(mkdtemp(parent) != NULL);
  snprintf(dir, sizeof dir, "%s/m", parent);
  cr_assert_eq(mkdir(dir, 0777), 0);
  snprintf(file, sizeof file, "%s/mine.txt", dir);
  FILE *f = fopen(file, "w");
  fputs("keep", f);
  fclose(f);
  sc_hf_gen g;
  sc_hf_gen_default(&g);
  sc_diag d = {0};
  cr_assert_eq(sc_hf_write_dir(dir, &g, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "exists and is not empty"), "%s", d.msg);
  /* untouched, and nothing beside it */
  DIR *dp = opendir(parent);
  struct dirent *e;
  int n = 0;
  while ((e = readdir(dp)) != NULL) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(dp);
  cr_assert_eq(n, 1);
  cr_assert_eq(unlink(file), 0);
  /* an empty directory is filled */
  cr_assert_eq(sc_hf_write_dir(dir, &g, &d), 0, "%s", d.msg);
  sc_hf_checkpoint c;
  cr_assert_eq(sc_hf_checkpoint_open(dir, &c, &d), 0, "%s", d.msg);
  sc_hf_checkpoint_close(&c);
  remove_tree(dir);
  cr_assert_eq(rmdir(parent), 0);
}
