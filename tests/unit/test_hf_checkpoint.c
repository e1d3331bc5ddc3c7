/* test_hf_checkpoint.c - DeepSeek-V3.2 checkpoint directories (issue 23, point 1):
 * fp8 e4m3 decoding and block dequantization, the config.json parser, F8_E4M3 in
 * safetensors, and the checked opening of tiny checkpoints of the real layout written
 * here (2 layers, one dense and one MoE; fp8 weights with block scales; two shards and an
 * index; an MTP layer), each rule broken once. The table is also compared with what
 * transformers' deepseek_v32 saves in bf16 and in fp8 (tests/data/hf_checkpoint, made by
 * make_reference.py), both saved directories must open, and e4m3 decoding and block
 * dequantization must give torch's values exactly. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "kernels/bf16.h"
#include "model/fp8_block.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"
#include "model/hf_model.h"
#include "model/safetensors.h"

/* ---- fp8 ---- */

Test(fp8_block, known_values) {
  cr_assert_eq(sc_e4m3_to_f32(0x38), 1.0f);
  cr_assert_eq(sc_e4m3_to_f32(0x3c), 1.5f);
  cr_assert_eq(sc_e4m3_to_f32(0x40), 2.0f);
  cr_assert_eq(sc_e4m3_to_f32(0x7e), 448.0f);
  cr_assert_eq(sc_e4m3_to_f32(0xfe), -448.0f);
  cr_assert_eq(sc_e4m3_to_f32(0x01), ldexpf(1.0f, -9)); /* smallest subnormal */
  cr_assert_eq(sc_e4m3_to_f32(0x07), 7 * ldexpf(1.0f, -9));
  cr_assert_eq(sc_e4m3_to_f32(0x08), ldexpf(1.0f, -6)); /* smallest normal */
  cr_assert_eq(sc_e4m3_to_f32(0x78), 256.0f);
  cr_assert_eq(sc_e4m3_to_f32(0x00), 0.0f);
  cr_assert(signbit(sc_e4m3_to_f32(0x80)) && sc_e4m3_to_f32(0x80) == 0.0f);
  cr_assert(isnan(sc_e4m3_to_f32(0x7f)) && isnan(sc_e4m3_to_f32(0xff)));
  for (int b = 0; b < 256; b++)
    if ((b & 0x7f) != 0x7f) cr_assert(isfinite(sc_e4m3_to_f32((uint8_t)b)), "0x%02x", b);
}

Test(fp8_block, encode_round_trips_and_rounds_to_even) {
  for (int b = 0; b < 256; b++) {
    if ((b & 0x7f) == 0x7f) continue;
    cr_assert_eq(sc_f32_to_e4m3(sc_e4m3_to_f32((uint8_t)b)), b, "0x%02x", b);
  }
  cr_assert_eq(sc_f32_to_e4m3(1.0625f), 0x38); /* halfway 1.0 / 1.125: even */
  cr_assert_eq(sc_f32_to_e4m3(1.1875f), 0x3a); /* halfway 1.125 / 1.25: even */
  cr_assert_eq(sc_f32_to_e4m3(1.07f), 0x39);
  cr_assert_eq(sc_f32_to_e4m3(1000.0f), 0x7e);
  cr_assert_eq(sc_f32_to_e4m3(-1e30f), 0xfe);
  cr_assert_eq(sc_f32_to_e4m3(ldexpf(1.0f, -11)), 0x00); /* below half the smallest */
  cr_assert_eq(sc_f32_to_e4m3(NAN), 0x7f);
}

Test(fp8_block, dequant_blocks_and_slices) {
  enum { R = 5, C = 7 }; /* blocks 2 x 3: scale [3, 3], last blocks partial */
  uint8_t q[R * C];
  float scale[9];
  for (int i = 0; i < R * C; i++) q[i] = (uint8_t)((i * 37) % 0x7e) | (i % 3 == 0 ? 0x80 : 0);
  for (int i = 0; i < 9; i++) scale[i] = 0.25f * (float)(i + 1);
  const sc_fp8_weight w = {q, scale, R, C, 2, 3};
  float out[R * C];
  uint16_t ob[R * C];
  cr_assert_eq(sc_fp8_dequant_f32(&w, 0, R, 0, C, out), 0);
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++)
      cr_assert_eq(out[r * C + c], sc_e4m3_to_f32(q[r * C + c]) * scale[(r / 2) * 3 + c / 3],
                   "(%d, %d)", r, c);
  /* a TP slice: rows 1..3, columns 2..6 */
  cr_assert_eq(sc_fp8_dequant_f32(&w, 1, 3, 2, 5, out), 0);
  cr_assert_eq(sc_fp8_dequant_bf16(&w, 1, 3, 2, 5, ob), 0);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 5; c++) {
      const float want = sc_e4m3_to_f32(q[(1 + r) * C + 2 + c]) * scale[((1 + r) / 2) * 3 + (2 + c) / 3];
      cr_assert_eq(out[r * 5 + c], want);
      cr_assert_eq(ob[r * 5 + c], sc_f32_to_bf16(want));
    }
  cr_assert_eq(sc_fp8_dequant_f32(&w, 4, 2, 0, 1, out), SC_ERANGE);
  cr_assert_eq(sc_fp8_dequant_f32(&w, 0, 1, 6, 2, out), SC_ERANGE);
  /* bounds whose sum overflows are outside too (not wrapped to a small number) */
  cr_assert_eq(sc_fp8_dequant_f32(&w, 1, INT64_MAX, 0, 1, out), SC_ERANGE);
  cr_assert_eq(sc_fp8_dequant_f32(&w, 0, 1, 2, INT64_MAX, out), SC_ERANGE);
  cr_assert_eq(sc_fp8_dequant_f32(&w, INT64_MAX, 1, 0, 1, out), SC_ERANGE);
  const sc_fp8_weight bad = {q, scale, R, C, 0, 3};
  cr_assert_eq(sc_fp8_dequant_f32(&bad, 0, 1, 0, 1, out), SC_EINVAL);
}

/* ---- safetensors F8_E4M3 ---- */

static int fill_bytes(void *ud, int32_t index, void *dst) {
  (void)ud;
  memset(dst, 0x38 + index, 6);
  return 0;
}

Test(safetensors_fp8, written_parsed_and_not_read_as_f32) {
  char path[] = "/tmp/sc_st_fp8_XXXXXX";
  const int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  const sc_st_out t[2] = {{"q", SC_ST_F8_E4M3, 2, {2, 3}}, {"r", SC_ST_F8_E4M3, 1, {6}}};
  sc_diag d = {0};
  cr_assert_eq(sc_st_write(path, t, 2, fill_bytes, NULL, &d), 0, "%s", d.msg);
  sc_st_file f;
  cr_assert_eq(sc_st_open(path, &f, &d), 0, "%s", d.msg);
  const sc_st_tensor *q = sc_st_find(&f, "q");
  cr_assert(q != NULL);
  cr_assert_eq(q->dtype, SC_ST_F8_E4M3);
  cr_assert_eq(q->end - q->begin, 6);
  cr_assert_eq(f.data[q->begin], 0x38);
  float out[6];
  cr_assert_eq(sc_st_read_f32(&f, q, 0, 2, 0, 3, out), SC_ENOTSUP);
  cr_assert_eq(sc_st_read_f32(&f, q, 1, INT64_MAX, 0, 3, out), SC_ERANGE);
  cr_assert_eq(sc_st_read_f32(&f, q, 0, 2, 1, INT64_MAX, out), SC_ERANGE);
  sc_st_close(&f);
  unlink(path);
  static const char hdr[] = "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[0,4]}}";
  uint8_t buf[8 + sizeof hdr + 4] = {sizeof hdr - 1};
  memcpy(buf + 8, hdr, sizeof hdr - 1);
  cr_assert_eq(sc_st_parse(buf, 8 + sizeof hdr - 1 + 4, &f, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "needs 3 bytes"), "%s", d.msg);
  cr_assert_eq(sc_st_dtype_size(SC_ST_F8_E4M3), 1);
  cr_assert_str_eq(sc_st_dtype_name(SC_ST_BF16), "BF16");
  cr_assert_eq(sc_st_dtype_size(99), 0);
}

/* ---- config.json ---- */

/* The published DeepSeek-V3.2 config.json (deepseek-ai/DeepSeek-V3.2). */
static const char REAL_CONFIG[] =
    "{\"architectures\": [\"DeepseekV32ForCausalLM\"], \"attention_bias\": false,"
    " \"attention_dropout\": 0.0, \"bos_token_id\": 0, \"eos_token_id\": 1, \"ep_size\": 1,"
    " \"first_k_dense_replace\": 3, \"hidden_act\": \"silu\", \"hidden_size\": 7168,"
    " \"index_head_dim\": 128, \"index_n_heads\": 64, \"index_topk\": 2048,"
    " \"initializer_range\": 0.02, \"intermediate_size\": 18432, \"kv_lora_rank\": 512,"
    " \"max_position_embeddings\": 163840, \"model_type\": \"deepseek_v32\","
    " \"moe_intermediate_size\": 2048, \"moe_layer_freq\": 1, \"n_group\": 8,"
    " \"n_routed_experts\": 256, \"n_shared_experts\": 1, \"norm_topk_prob\": true,"
    " \"num_attention_heads\": 128, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 61,"
    " \"num_key_value_heads\": 128, \"num_nextn_predict_layers\": 1, \"q_lora_rank\": 1536,"
    " \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64,"
    " \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\","
    " \"quant_method\": \"fp8\", \"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]},"
    " \"rms_norm_eps\": 1e-06, \"rope_scaling\": {\"beta_fast\": 32, \"beta_slow\": 1,"
    " \"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 1.0,"
    " \"original_max_position_embeddings\": 4096, \"type\": \"yarn\"}, \"rope_theta\": 10000,"
    " \"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\","
    " \"tie_word_embeddings\": false, \"topk_group\": 4, \"topk_method\": \"noaux_tc\","
    " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.44.2\", \"use_cache\": true,"
    " \"v_head_dim\": 128, \"vocab_size\": 129280}";

Test(hf_config, the_published_config) {
  sc_hf_config c;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_config_parse(REAL_CONFIG, strlen(REAL_CONFIG), &c, &d), 0, "%s", d.msg);
  cr_assert_str_eq(c.model_type, "deepseek_v32");
  cr_assert_eq(c.num_hidden_layers, 61);
  cr_assert_eq(c.first_k_dense_replace, 3);
  cr_assert_eq(c.n_routed_experts, 256);
  cr_assert_eq(c.num_experts_per_tok, 8);
  cr_assert_eq(c.n_group, 8);
  cr_assert_eq(c.topk_group, 4);
  cr_assert_eq(c.index_n_heads, 64);
  cr_assert_eq(c.index_head_dim, 128);
  cr_assert_eq(c.index_topk, 2048);
  cr_assert_eq(c.vocab_size, 129280);
  cr_assert_eq(c.num_nextn_predict_layers, 1);
  cr_assert_eq(c.rope.type, SC_HF_ROPE_YARN);
  cr_assert_eq(c.rope.factor, 40.0);
  cr_assert_eq(c.rope.original_max_position_embeddings, 4096);
  cr_assert_eq(c.rope.beta_fast, 32.0);
  cr_assert_eq(c.rope.mscale_all_dim, 1.0);
  cr_assert_eq(c.rope_theta, 10000.0);
  cr_assert_eq(c.routed_scaling_factor, 2.5);
  cr_assert(c.norm_topk_prob && !c.tie_word_embeddings);
  cr_assert(c.quant.fp8);
  cr_assert_eq(c.quant.block_rows, 128);
  cr_assert_eq(c.quant.block_cols, 128);
  cr_assert_str_eq(c.quant.scale_fmt, "ue8m0");
  cr_assert_str_eq(c.topk_method, "noaux_tc");
  cr_assert_eq(c.unknown_keys, 0);
  cr_assert(c.eos.n == 1 && c.eos.id[0] == 1);

  /* The table of the full model: 3 + 61*21 attention/norm tensors, 3 dense MLPs of 6,
   * 58 MoE MLPs of 2 + 256*6 + 6 (weights with their scales). */
  sc_hf_spec *t;
  int32_t n;
  cr_assert_eq(sc_hf_tensor_table(&c, &t, &n, &d), 0);
  cr_assert_eq(n, 3 + 61 * 21 + 3 * 6 + 58 * (2 + 256 * 6 + 6));
  bool seen = false;
  for (int32_t i = 0; i < n; i++)
    if (!strcmp(t[i].name, "model.layers.60.mlp.experts.255.down_proj.weight_scale_inv")) {
      cr_assert_eq(t[i].kind, SC_HF_SCALE);
      cr_assert_eq(t[i].shape[0], 56); /* 7168 / 128 */
      cr_assert_eq(t[i].shape[1], 16); /* 2048 / 128 */
      cr_assert_str_eq(t[i - 1].name, "model.layers.60.mlp.experts.255.down_proj.weight");
      seen = true;
    }
  cr_assert(seen);
  free(t);
  cr_assert(sc_hf_is_mtp_tensor(&c, "model.layers.61.eh_proj.weight"));
  cr_assert(!sc_hf_is_mtp_tensor(&c, "model.layers.60.eh_proj.weight"));
  cr_assert(!sc_hf_is_mtp_tensor(&c, "model.layers.62.eh_proj.weight"));
  cr_assert(!sc_hf_is_mtp_tensor(&c, "model.layers.061.x"));
}

/* src with the first `from` replaced by `to` (which may be empty), into out. */
static char *edit(const char *src, const char *from, const char *to, char *out, size_t cap) {
  const char *at = strstr(src, from);
  cr_assert(at != NULL, "%s", from);
  cr_assert((size_t)snprintf(out, cap, "%.*s%s%s", (int)(at - src), src, to, at + strlen(from)) < cap);
  return out;
}

/* A config edited (the first `from` replaced by `to`) that must be refused with a
 * message containing `want`. */
typedef struct refusal {
  const char *from, *to, *want;
} refusal;

/* Each case applied to base: SC_EINVAL with its message, and the config untouched. */
static void expect_refusals(const char *base, const refusal *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char buf[8192];
    edit(base, cases[i].from, cases[i].to, buf, sizeof buf);
    sc_hf_config c;
    memset(&c, 0x5a, sizeof c);
    sc_diag d = {0};
    cr_assert_eq(sc_hf_config_parse(buf, strlen(buf), &c, &d), SC_EINVAL, "case %zu", i);
    cr_assert(strstr(d.msg, cases[i].want), "case %zu: \"%s\" lacks \"%s\"", i, d.msg,
              cases[i].want);
    cr_assert_eq(c.num_hidden_layers, 0x5a5a5a5a, "case %zu: c changed on failure", i);
  }
}

Test(hf_config, errors_name_the_key) {
  static const refusal cases[] = {
      {"\"deepseek_v32\"", "\"deepseek_v3\"", "\"model_type\" = \"deepseek_v3\" is not supported"},
      {"\"index_topk\": 2048,", "", "\"index_topk\" is missing"},
      {"\"hidden_size\": 7168", "\"hidden_size\": \"7168\"", "\"hidden_size\" must be an integer"},
      {"\"num_hidden_layers\": 61", "\"num_hidden_layers\": 0", "\"num_hidden_layers\" = 0 is out of range"},
      {"\"type\": \"yarn\"", "\"type\": \"linear\"", "rope_scaling.\"type\" = \"linear\""},
      {"\"factor\": 40", "\"factor\": 0.5", "rope_scaling.\"factor\""},
      {"\"original_max_position_embeddings\": 4096,", "", "rope_scaling.\"original_max_position_embeddings\""},
      {"\"beta_fast\": 32", "\"beta_fast\": 0.5", "rope_scaling.\"beta_fast\" = 0.5 must be >= beta_slow"},
      {"\"rope_theta\": 10000,", "", "\"rope_theta\" is missing"},
      {"\"fmt\": \"e4m3\"", "\"fmt\": \"e5m2\"", "quantization_config.\"fmt\""},
      {"[128, 128]", "[128]", "quantization_config.\"weight_block_size\""},
      {"\"quant_method\": \"fp8\"", "\"quant_method\": \"awq\"", "quantization_config.\"quant_method\""},
      {"\"num_key_value_heads\": 128", "\"num_key_value_heads\": 1", "\"num_key_value_heads\" = 1 must equal"},
      {"\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": 63", "\"qk_rope_head_dim\" = 63 must be even"},
      {"\"index_head_dim\": 128", "\"index_head_dim\": 32", "\"index_head_dim\" = 32 must be >="},
      {"\"n_group\": 8", "\"n_group\": 7", "\"n_group\" = 7 must divide"},
      {"\"topk_group\": 4", "\"topk_group\": 9", "\"topk_group\" = 9 must be <="},
      {"\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 200", "\"num_experts_per_tok\" = 200 exceeds"},
      {"\"scoring_func\": \"sigmoid\"", "\"scoring_func\": \"softmax\"", "\"scoring_func\" = \"softmax\""},
      {"\"topk_method\": \"noaux_tc\"", "\"topk_method\": \"greedy\"", "\"topk_method\" = \"greedy\""},
      {"\"norm_topk_prob\": true", "\"norm_topk_prob\": 1", "\"norm_topk_prob\" must be true or false"},
      {"\"attention_bias\": false", "\"attention_bias\": true", "\"attention_bias\" = true"},
      {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "\"hidden_act\" = \"gelu\""},
      {"\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2", "\"moe_layer_freq\" must be 1"},
      {"\"first_k_dense_replace\": 3", "\"first_k_dense_replace\": 62", "\"first_k_dense_replace\" = 62"},
      {"\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": -1", "\"rms_norm_eps\" = -1"},
      {"\"use_cache\": true", "\"rope_parameters\": {\"rope_type\": \"default\"}", "not both"},
      {"{", "{\"a\": 1, \"a\": 2, ", "invalid JSON"},
      /* a few bytes must not ask for a table of gigabytes */
      {"\"n_routed_experts\": 256", "\"n_routed_experts\": 65536",
       "\"n_routed_experts\" = 65536 in each of 58 MoE layers makes 3801088 routed experts"},
      {"\"q_lora_rank\": 1536", "\"q_lora_rank\": null", "(queries without a LoRA)"},
      {"\"q_lora_rank\": 1536", "\"q_lora_rank\": 0", "(queries without a LoRA)"},
      {"\"eos_token_id\": 1", "\"eos_token_id\": \"1\"", "\"eos_token_id\" must be a token id"},
      {"\"eos_token_id\": 1", "\"eos_token_id\": [1, -1]", "\"eos_token_id\" must hold token ids"},
  };
  expect_refusals(REAL_CONFIG, cases, sizeof cases / sizeof cases[0]);
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "%s", path);
  cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
  fclose(f);
}

/* A checkpoint directory's end-of-sequence tokens: config.json's, then those of
 * generation_config.json that config.json lacks (generate() ends at the latter's). */
Test(hf_config, eos_of_config_and_generation_config) {
  char dir[] = "/tmp/sc_eos_XXXXXX";
  cr_assert(mkdtemp(dir) != NULL);
  write_file(dir, "config.json", REAL_CONFIG);
  sc_model_config m;
  sc_diag d = {0};
  cr_assert_eq(sc_model_config_load_dir(dir, &m, &d), 0, "%s", d.msg); /* no generation config */
  cr_assert(m.eos.n == 1 && m.eos.id[0] == 1);
  write_file(dir, "generation_config.json", "{\"eos_token_id\": [129, 1, 7], \"top_p\": 0.95}");
  cr_assert_eq(sc_model_config_load_dir(dir, &m, &d), 0, "%s", d.msg);
  cr_assert(m.eos.n == 3 && m.eos.id[0] == 1 && m.eos.id[1] == 129 && m.eos.id[2] == 7);
  write_file(dir, "generation_config.json", "{\"do_sample\": true}");
  cr_assert_eq(sc_model_config_load_dir(dir, &m, &d), 0, "%s", d.msg);
  cr_assert(m.eos.n == 1 && m.eos.id[0] == 1);
  static const struct {
    const char *text, *want;
  } bad[] = {{"[1]", "generation_config.json: not a JSON object"},
             {"{\"eos_token_id\": 1.5}", "generation_config.json: \"eos_token_id\" must be"},
             {"{\"eos_token_id\": [2, 3, 4, 5, 6, 7, 8, 9]}", "more than 8 end-of-sequence"},
             {"{\"eos_token_id\": 129280}", "eos_token_id 129280 is not a token id below"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_file(dir, "generation_config.json", bad[i].text);
    cr_assert_eq(sc_model_config_load_dir(dir, &m, &d), SC_EINVAL, "%s", bad[i].text);
    cr_assert(strstr(d.msg, bad[i].want), "%s: \"%s\" lacks \"%s\"", bad[i].text, d.msg,
              bad[i].want);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  cr_assert_eq(unlink(path), 0);
  snprintf(path, sizeof path, "%s/config.json", dir);
  cr_assert_eq(unlink(path), 0);
  cr_assert_eq(rmdir(dir), 0);
}

Test(hf_config, transformers_form_and_ignored_keys) {
  sc_hf_config c;
  sc_diag d = {0};
  /* DeepSeek's yarn block under transformers' key, with rope_theta moved inside */
  char a[sizeof REAL_CONFIG + 512], b[sizeof REAL_CONFIG + 512];
  edit(REAL_CONFIG, "\"type\": \"yarn\"}, \"rope_theta\": 10000,",
       "\"rope_type\": \"yarn\", \"rope_theta\": 5e4},", a, sizeof a);
  edit(a, "\"rope_scaling\"", "\"rope_parameters\"", b, sizeof b);
  cr_assert_eq(sc_hf_config_parse(b, strlen(b), &c, &d), 0, "%s", d.msg);
  cr_assert_eq(c.rope_theta, 5e4);
  cr_assert_eq(c.rope.factor, 40.0);
  /* ... and under an unknown key rope_theta is nowhere */
  edit(a, "\"rope_scaling\"", "\"rope_paramet\"", b, sizeof b);
  cr_assert_eq(sc_hf_config_parse(b, strlen(b), &c, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "\"rope_theta\" is missing"), "%s", d.msg);
  /* the real transformers 5 form, as saved by make_reference.py */
  static const char tf[] =
      "{\"model_type\": \"deepseek_v32\", \"vocab_size\": 256, \"hidden_size\": 64,"
      " \"intermediate_size\": 96, \"moe_intermediate_size\": 32, \"num_hidden_layers\": 2,"
      " \"num_attention_heads\": 2, \"q_lora_rank\": 48, \"kv_lora_rank\": 32,"
      " \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 16,"
      " \"n_routed_experts\": 4, \"n_shared_experts\": 1, \"num_experts_per_tok\": 2,"
      " \"n_group\": 2, \"topk_group\": 1, \"norm_topk_prob\": true,"
      " \"routed_scaling_factor\": 2.5, \"first_k_dense_replace\": 1, \"rms_norm_eps\": 1e-6,"
      " \"index_n_heads\": 2, \"index_head_dim\": 16, \"index_topk\": 8,"
      " \"max_position_embeddings\": 256, \"mlp_layer_types\": [\"dense\", \"sparse\"],"
      " \"head_dim\": 8, \"qk_head_dim\": 24, \"dtype\": \"bfloat16\", \"pad_token_id\": null,"
      " \"some_future_key\": 1, \"another\": [],"
      " \"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 10000.0,"
      " \"factor\": 4.0, \"original_max_position_embeddings\": 64}}";
  cr_assert_eq(sc_hf_config_parse(tf, strlen(tf), &c, &d), 0, "%s", d.msg);
  cr_assert_eq(c.rope_theta, 10000.0);
  cr_assert_eq(c.rope.type, SC_HF_ROPE_YARN);
  cr_assert_eq(c.rope.beta_fast, 32.0); /* defaults */
  cr_assert_eq(c.rope.beta_slow, 1.0);
  cr_assert_eq(c.rope.mscale, 1.0);
  cr_assert_eq(c.rope.mscale_all_dim, 0.0);
  cr_assert(!c.quant.fp8);
  cr_assert_eq(c.num_key_value_heads, 2);
  cr_assert_eq(c.num_nextn_predict_layers, 0);
  cr_assert_str_eq(c.scoring_func, "sigmoid");
  cr_assert_eq(c.unknown_keys, 2);
  cr_assert_str_eq(c.first_unknown, "some_future_key");
  edit(tf, "[\"dense\", \"sparse\"]", "[\"dense\", \"dense\"]", b, sizeof b);
  cr_assert_eq(sc_hf_config_parse(b, strlen(b), &c, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "\"mlp_layer_types\"[1] must be \"sparse\""), "%s", d.msg);
}

/* ---- GLM-5 (glm_moe_dsa) ---- */

/* GLM-5's dimensions (transformers' GlmMoeDsaConfig defaults, zai-org/GLM-5) with the keys
 * its config.json carries beside them (rope_interleave, indexer_rope_interleave, MTP). */
static const char GLM_CONFIG[] =
    "{\"architectures\": [\"GlmMoeDsaForCausalLM\"], \"model_type\": \"glm_moe_dsa\","
    " \"attention_bias\": false, \"first_k_dense_replace\": 3, \"hidden_act\": \"silu\","
    " \"hidden_size\": 6144, \"head_dim\": 64, \"index_head_dim\": 128, \"index_n_heads\": 32,"
    " \"index_topk\": 2048, \"indexer_rope_interleave\": true, \"intermediate_size\": 12288,"
    " \"kv_lora_rank\": 512, \"max_position_embeddings\": 202752,"
    " \"moe_intermediate_size\": 2048, \"moe_layer_freq\": 1, \"n_group\": 1,"
    " \"n_routed_experts\": 256, \"n_shared_experts\": 1, \"norm_topk_prob\": true,"
    " \"num_attention_heads\": 64, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 78,"
    " \"num_key_value_heads\": 64, \"num_nextn_predict_layers\": 1, \"q_lora_rank\": 2048,"
    " \"qk_head_dim\": 256, \"qk_nope_head_dim\": 192, \"qk_rope_head_dim\": 64,"
    " \"rms_norm_eps\": 1e-05, \"rope_interleave\": true,"
    " \"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"default\"},"
    " \"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\","
    " \"tie_word_embeddings\": false, \"topk_group\": 1, \"topk_method\": \"noaux_tc\","
    " \"dtype\": \"bfloat16\", \"use_cache\": true, \"v_head_dim\": 256, \"vocab_size\": 154880}";

static int parse_glm(const char *from, const char *to, sc_hf_config *c, sc_diag *d) {
  char buf[sizeof GLM_CONFIG + 1024];
  edit(GLM_CONFIG, from, to, buf, sizeof buf);
  return sc_hf_config_parse(buf, strlen(buf), c, d);
}

/* The text that adds `"key": [...]` to GLM_CONFIG, one entry per character of pat ('F'
 * "full", 'S' "shared", anything else that character as an entry). */
static const char *types_key(const char *key, const char *pat, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "\"moe_layer_freq\": 1, \"%s\": [", key);
  for (const char *c = pat; *c && n < cap; c++)
    n += (size_t)snprintf(out + n, cap - n, "%s\"%s\"", c == pat ? "" : ", ",
                          *c == 'F' ? "full" : *c == 'S' ? "shared" : "sparse");
  cr_assert(n + 3 < cap);
  strcat(out, "],");
  return out;
}

/* 78 layers of 'F' but for the given 'S' positions (-1 ends the list). */
static const char *pat78(char *out, const int *shared) {
  memset(out, 'F', 78);
  out[78] = '\0';
  for (; *shared >= 0; shared++) out[*shared] = 'S';
  return out;
}

/* The layers a config makes "shared", as a string of 'F' and 'S'. */
static void pattern_of(const sc_hf_config *c, char *out) {
  for (int32_t l = 0; l < c->num_hidden_layers; l++)
    out[l] = sc_hf_layer_index_shared(c, l) ? 'S' : 'F';
  out[c->num_hidden_layers] = '\0';
}

Test(hf_config, glm_moe_dsa) {
  sc_hf_config c;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_config_parse(GLM_CONFIG, strlen(GLM_CONFIG), &c, &d), 0, "%s", d.msg);
  cr_assert_str_eq(c.model_type, "glm_moe_dsa");
  cr_assert(c.index_rope_interleaved);
  cr_assert_eq(c.index_shared_layers, 0); /* no sharing keys: every layer "full" */
  cr_assert_eq(c.rope.type, SC_HF_ROPE_DEFAULT);
  cr_assert_eq(c.rope_theta, 1e6);
  cr_assert_eq(c.rms_norm_eps, 1e-5);
  cr_assert_eq(c.n_group, 1);
  cr_assert_eq(c.unknown_keys, 0);
  sc_hf_spec *t;
  int32_t n, n_all;
  cr_assert_eq(sc_hf_tensor_table(&c, &t, &n_all, &d), 0);
  free(t);
  /* a sharing schedule: index_topk_freq 4 from index_skip_topk_offset 3 */
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,",
                         "\"moe_layer_freq\": 1, \"index_topk_freq\": 4, \"index_skip_topk_offset\": 3,",
                         &c, &d), 0, "%s", d.msg);
  char pat[SC_HF_MAX_LAYERS + 1];
  pattern_of(&c, pat);
  cr_assert_eq(strncmp(pat, "FFFSSSFSSSFSSSF", 15), 0, "%s", pat);
  cr_assert_eq(c.index_shared_layers, 78 - 21, "%d", c.index_shared_layers); /* 0-2, 6, 10, ..., 74 */
  /* a shared layer has no indexer tensors: 5 fewer each */
  cr_assert_eq(sc_hf_tensor_table(&c, &t, &n, &d), 0);
  cr_assert_eq(n, n_all - 5 * 57);
  for (int32_t i = 0; i < n; i++)
    cr_assert(strncmp(t[i].name, "model.layers.3.self_attn.indexer", 32), "%s", t[i].name);
  free(t);
  /* index_skip_topk_offset defaults to 2 */
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"index_topk_freq\": 2,",
                         &c, &d), 0, "%s", d.msg);
  pattern_of(&c, pat);
  cr_assert_eq(strncmp(pat, "FFSFSF", 6), 0, "%s", pat);
  /* a pattern string, a pattern list, and indexer_types over both */
  char list[4096] = "\"moe_layer_freq\": 1, \"index_topk_pattern\": \"FFFS";
  for (int i = 4; i < 78; i++) strcat(list, i % 2 ? "S" : "F");
  strcat(list, "\",");
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,", list, &c, &d), 0, "%s", d.msg);
  pattern_of(&c, pat);
  cr_assert_eq(strncmp(pat, "FFFSFSF", 7), 0, "%s", pat);
  cr_assert_eq(c.index_shared_layers, 38);
  char want[80];
  types_key("indexer_types", pat78(want, (const int[]){1, 77, -1}), list, sizeof list);
  char both[4200]; /* indexer_types wins over index_topk_freq */
  snprintf(both, sizeof both, "\"index_topk_freq\": 4, %s", list);
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,", both, &c, &d), 0, "%s", d.msg);
  pattern_of(&c, pat);
  cr_assert_str_eq(pat, want);
  cr_assert_eq(c.index_shared_layers, 2);
  types_key("index_topk_pattern", want, list, sizeof list); /* the list form of the pattern */
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,", list, &c, &d), 0, "%s", d.msg);
  pattern_of(&c, pat);
  cr_assert_str_eq(pat, want);
  /* the model sparsecp serves from it */
  sc_model_config m;
  cr_assert_eq(sc_model_config_from_hf(&c, &m, &d), 0, "%s", d.msg);
  cr_assert(m.arch.index_interleaved);
  cr_assert(sc_model_layer_index_shared(&m, 1) && sc_model_layer_index_shared(&m, 77));
  cr_assert(!sc_model_layer_index_shared(&m, 0) && !sc_model_layer_index_shared(&m, 2));
  cr_assert_eq(m.arch.latent_norm_eps, 1e-6f); /* q_a/kv_a_layernorm, not rms_norm_eps */
  cr_assert_eq(m.rms_eps, 1e-5f);
  /* deepseek_v32 does not know the sharing keys: ignored, counted */
  char b[sizeof REAL_CONFIG + 512];
  edit(REAL_CONFIG, "\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"index_topk_freq\": 4,", b,
       sizeof b);
  cr_assert_eq(sc_hf_config_parse(b, strlen(b), &c, &d), 0, "%s", d.msg);
  cr_assert(!c.index_rope_interleaved);
  cr_assert_eq(c.index_shared_layers, 0);
  cr_assert_eq(c.unknown_keys, 1);
}

Test(hf_config, glm_errors_name_the_key) {
  static const refusal cases[] = {
      {"\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"indexer_types\": [\"full\", \"shared\"],",
       "\"indexer_types\" must be a list of num_hidden_layers = 78 entries"},
      {"\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"indexer_types\": \"full\",",
       "\"indexer_types\" must be a list of num_hidden_layers = 78"},
      {"\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"index_topk_pattern\": \"FS\",",
       "\"index_topk_pattern\" must be a list of num_hidden_layers = 78 entries \"full\" or "
       "\"shared\" (or a string of as many 'F' and 'S')"},
      {"\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"index_topk_freq\": 0,",
       "\"index_topk_freq\" must be an integer in [1, 1024]"},
      {"\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"index_topk_freq\": \"4\",",
       "\"index_topk_freq\" must be an integer"},
      {"\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"index_skip_topk_offset\": -1,",
       "\"index_skip_topk_offset\" must be an integer in [0, 1024]"},
      {"\"moe_layer_freq\": 1,",
       "\"moe_layer_freq\": 1, \"index_topk_freq\": 2, \"index_skip_topk_offset\": 0,",
       "\"index_skip_topk_offset\" makes layer 0 \"shared\""},
      {"\"indexer_rope_interleave\": true", "\"indexer_rope_interleave\": false",
       "\"indexer_rope_interleave\" = false contradicts model_type \"glm_moe_dsa\""},
      {"\"indexer_rope_interleave\": true", "\"indexer_rope_interleave\": 1",
       "\"indexer_rope_interleave\" must be true or false"},
      {"\"rope_interleave\": true", "\"rope_interleave\": false", "\"rope_interleave\" = false"},
      {"\"glm_moe_dsa\"", "\"glm_moe\"", "\"model_type\" = \"glm_moe\" is not supported"},
  };
  expect_refusals(GLM_CONFIG, cases, sizeof cases / sizeof cases[0]);
  /* each entry checked, and the first layer must have an indexer */
  char list[4096], pat[80];
  sc_hf_config c;
  sc_diag d = {0};
  pat78(pat, (const int[]){-1});
  pat[5] = 'x';
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,", types_key("indexer_types", pat, list, sizeof list),
                         &c, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "\"indexer_types\"[5] must be \"full\" or \"shared\""), "%s", d.msg);
  pat78(pat, (const int[]){0, -1});
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,", types_key("indexer_types", pat, list, sizeof list),
                         &c, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "\"indexer_types\" makes layer 0 \"shared\""), "%s", d.msg);
  snprintf(list, sizeof list, "\"moe_layer_freq\": 1, \"index_topk_pattern\": \"%s\",", pat);
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,", list, &c, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "\"index_topk_pattern\" makes layer 0 \"shared\""), "%s", d.msg);
  pat[3] = 'f';
  snprintf(list, sizeof list, "\"moe_layer_freq\": 1, \"index_topk_pattern\": \"%s\",", pat);
  cr_assert_eq(parse_glm("\"moe_layer_freq\": 1,", list, &c, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "\"index_topk_pattern\"[3] must be 'F' or 'S'"), "%s", d.msg);
  /* deepseek_v32's indexer rotates halves: a config saying otherwise is refused */
  char b[sizeof REAL_CONFIG + 512];
  edit(REAL_CONFIG, "\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"indexer_rope_interleave\": true,",
       b, sizeof b);
  cr_assert_eq(sc_hf_config_parse(b, strlen(b), &c, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "contradicts model_type \"deepseek_v32\", whose indexer rotates "
                          "half-split pairs"), "%s", d.msg);
  edit(REAL_CONFIG, "\"moe_layer_freq\": 1,", "\"moe_layer_freq\": 1, \"indexer_rope_interleave\": false,",
       b, sizeof b);
  cr_assert_eq(sc_hf_config_parse(b, strlen(b), &c, &d), 0, "%s", d.msg);
}

/* ---- checkpoint directories ---- */

/* The tiny fp8 model: 2 layers (dense, MoE with 4 routed experts in 2 groups, 1 shared),
 * blocks of 32 so that scales have several blocks and partial ones (48 = 32 + 16), and
 * one MTP layer. */
static const char TINY[] =
    "{\"architectures\": [\"DeepseekV32ForCausalLM\"], \"model_type\": \"deepseek_v32\","
    " \"vocab_size\": 128, \"hidden_size\": 64, \"intermediate_size\": 96,"
    " \"moe_intermediate_size\": 32, \"num_hidden_layers\": 2, \"first_k_dense_replace\": 1,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 2, \"q_lora_rank\": 48,"
    " \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8,"
    " \"v_head_dim\": 16, \"n_routed_experts\": 4, \"n_shared_experts\": 1,"
    " \"num_experts_per_tok\": 2, \"n_group\": 2, \"topk_group\": 1, \"topk_method\": \"noaux_tc\","
    " \"scoring_func\": \"sigmoid\", \"norm_topk_prob\": true, \"routed_scaling_factor\": 2.5,"
    " \"index_n_heads\": 2, \"index_head_dim\": 16, \"index_topk\": 8,"
    " \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000,"
    " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": 64,"
    " \"beta_fast\": 32, \"beta_slow\": 1, \"mscale\": 1.0, \"mscale_all_dim\": 1.0},"
    " \"tie_word_embeddings\": false, \"num_nextn_predict_layers\": 1, \"torch_dtype\": \"bfloat16\","
    " \"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\","
    " \"weight_block_size\": [32, 32], \"activation_scheme\": \"dynamic\"}}";

/* MTP tensors written besides the model (layer 2 = num_hidden_layers). */
static const struct {
  const char *name;
  int dtype, ndim;
  int64_t shape[2];
} MTP[] = {
    {"model.layers.2.enorm.weight", SC_ST_BF16, 1, {64}},
    {"model.layers.2.hnorm.weight", SC_ST_BF16, 1, {64}},
    {"model.layers.2.eh_proj.weight", SC_ST_BF16, 2, {64, 128}},
    {"model.layers.2.shared_head.norm.weight", SC_ST_BF16, 1, {64}},
    {"model.layers.2.self_attn.q_a_proj.weight", SC_ST_F8_E4M3, 2, {48, 64}},
    {"model.layers.2.self_attn.q_a_proj.weight_scale_inv", SC_ST_F32, 2, {2, 2}},
};
#define NUM_MTP (int32_t)(sizeof MTP / sizeof MTP[0])

/* One way to break the directory. */
typedef struct breakage {
  const char *config;     /* config.json text (default TINY) */
  const char *drop;       /* left out of its shard and of the weight_map */
  const char *unshard;    /* left out of its shard, still in the weight_map */
  const char *unlist;     /* left out of the weight_map, still in its shard */
  const char *extra;      /* an extra tensor, listed in the weight_map */
  const char *reshape;    /* written one row longer */
  const char *retype;     /* written in BF16 (F32 if it is BF16) */
  const char *dup;        /* listed in its shard (the first), also written in the second */
  bool no_shard2;         /* the second shard file is not written */
  bool mtp;               /* write the MTP tensors */
  bool single;            /* one model.safetensors, no index */
} breakage;

typedef struct ckpt {
  char dir[64];
  int32_t num;
  sc_st_out *out;
  char (*names)[SC_HF_MAX_NAME];
} ckpt;

static uint64_t name_hash(const char *s) { return sc_mix64(sc_fnv1a(SC_FNV_OFFSET, s, strlen(s))); }

/* The value of element i of an fp8 weight's dequantized form is e4m3(code(i)) * scale. */
static uint8_t code_at(const char *name, int64_t i) {
  const uint8_t b = (uint8_t)(sc_mix64(name_hash(name) ^ (uint64_t)i) & 0xff);
  return (b & 0x7f) == 0x7f ? 0x38 : b;
}

static float scale_value(const char *name, int64_t i) {
  return 0.001f * (float)(1 + (sc_mix64(name_hash(name) + (uint64_t)i) % 17));
}

static int fill(void *ud, int32_t index, void *dst) {
  const ckpt *k = ud;
  const sc_st_out *o = &k->out[index];
  int64_t n = 1;
  for (int i = 0; i < o->ndim; i++) n *= o->shape[i];
  for (int64_t i = 0; i < n; i++) {
    if (o->dtype == SC_ST_F8_E4M3) {
      ((uint8_t *)dst)[i] = code_at(o->name, i);
    } else if (o->dtype == SC_ST_F32) {
      const float v = scale_value(o->name, i);
      memcpy((char *)dst + 4 * i, &v, 4);
    } else {
      const uint16_t h = sc_f32_to_bf16(1.0f + scale_value(o->name, i));
      memcpy((char *)dst + 2 * i, &h, 2);
    }
  }
  return 0;
}

static void write_text(const char *dir, const char *file, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "w");
  cr_assert(f != NULL, "%s", path);
  fputs(text, f);
  fclose(f);
}

static void add_out(ckpt *k, const char *name, int dtype, int ndim, const int64_t *shape) {
  const int32_t i = k->num++;
  snprintf(k->names[i], SC_HF_MAX_NAME, "%s", name);
  k->out[i] = (sc_st_out){.name = k->names[i], .dtype = dtype, .ndim = ndim};
  for (int j = 0; j < ndim; j++) k->out[i].shape[j] = shape[j];
}

static bool is(const char *a, const char *b) { return b != NULL && !strcmp(a, b); }

/* The tensor table of config text that must parse (*spec malloc'd); its size. */
static int32_t table_of(const char *text, sc_hf_spec **spec) {
  sc_hf_config cfg;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_config_parse(text, strlen(text), &cfg, &d), 0, "%s", d.msg);
  int32_t n;
  cr_assert_eq(sc_hf_tensor_table(&cfg, spec, &n, &d), 0, "%s", d.msg);
  return n;
}

/* Writes the tiny checkpoint into a new temporary directory, broken as b says. */
static void write_ckpt(ckpt *k, const breakage *b) {
  snprintf(k->dir, sizeof k->dir, "/tmp/sc_hfckpt_XXXXXX");
  cr_assert(mkdtemp(k->dir) != NULL);
  const char *cfg_text = b->config ? b->config : TINY;
  write_text(k->dir, "config.json", cfg_text);
  sc_diag d = {0};
  sc_hf_spec *spec;
  const int32_t n = table_of(TINY, &spec);
  k->num = 0;
  k->out = calloc((size_t)n + NUM_MTP + 1, sizeof *k->out);
  k->names = calloc((size_t)n + NUM_MTP + 1, sizeof *k->names);
  for (int32_t i = 0; i < n; i++) {
    const sc_hf_spec *s = &spec[i];
    if (is(s->name, b->drop) || is(s->name, b->unshard)) continue;
    int dtype = s->kind == SC_HF_LINEAR ? SC_ST_F8_E4M3 : s->kind == SC_HF_SCALE ? SC_ST_F32
                                                                                 : SC_ST_BF16;
    if (is(s->name, b->retype)) dtype = dtype == SC_ST_BF16 ? SC_ST_F32 : SC_ST_BF16;
    int64_t shape[2] = {s->shape[0] + is(s->name, b->reshape), s->shape[1]};
    add_out(k, s->name, dtype, s->ndim, shape);
  }
  if (b->extra) add_out(k, b->extra, SC_ST_BF16, 1, (int64_t[]){4});
  if (b->mtp)
    for (int32_t i = 0; i < NUM_MTP; i++)
      if (!is(MTP[i].name, b->unshard))
        add_out(k, MTP[i].name, MTP[i].dtype, MTP[i].ndim, MTP[i].shape);
  static const char *const SHARD[2] = {"model-00001-of-00002.safetensors",
                                       "model-00002-of-00002.safetensors"};
  const int32_t half = k->num / 2;
  int32_t dup_at = -1;
  for (int32_t i = 0; b->dup != NULL && i < half; i++)
    if (is(k->out[i].name, b->dup)) k->out[dup_at = k->num++] = k->out[i];
  cr_assert(b->dup == NULL || dup_at >= 0, "%s is not in the first shard", b->dup);
  if (b->single) {
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", k->dir);
    cr_assert_eq(sc_st_write(path, k->out, k->num, fill, k, &d), 0, "%s", d.msg);
  } else {
    json_t *map = json_object();
    for (int s = 0; s < 2; s++) {
      ckpt part = {.num = s ? k->num - half : half, .out = k->out + (s ? half : 0)};
      for (int32_t i = 0; i < part.num; i++)
        if (!is(part.out[i].name, b->unlist) && part.out + i != k->out + dup_at)
          json_object_set_new(map, part.out[i].name, json_string(SHARD[s]));
      if (s == 1 && b->no_shard2) continue;
      char path[128];
      snprintf(path, sizeof path, "%s/%s", k->dir, SHARD[s]);
      cr_assert_eq(sc_st_write(path, part.out, part.num, fill, &part, &d), 0, "%s", d.msg);
    }
    if (b->unshard) json_object_set_new(map, b->unshard, json_string(SHARD[0]));
    json_t *root = json_pack("{s:{s:i}, s:o}", "metadata", "total_size", 0, "weight_map", map);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    write_text(k->dir, "model.safetensors.index.json", text);
    free(text);
    json_decref(root);
  }
  free(spec);
}

static void remove_ckpt(ckpt *k) {
  static const char *const FILES[] = {"config.json", "model.safetensors.index.json",
                                      "model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors", "model.safetensors"};
  for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", k->dir, FILES[i]);
    unlink(path);
  }
  rmdir(k->dir);
  free(k->out);
  free(k->names);
}

/* Whether this process maps any file of dir. */
static bool maps_dir(const char *dir) {
  FILE *f = fopen("/proc/self/maps", "r");
  cr_assert(f != NULL);
  char line[512];
  bool found = false;
  while (fgets(line, sizeof line, f)) found = found || strstr(line, dir) != NULL;
  fclose(f);
  return found;
}

/* Opens dir; expects rc and a message containing want and want2 (either may be NULL),
 * and after a failure nothing mapped. */
static void expect_dir(const char *dir, int rc, const char *want, const char *want2) {
  sc_hf_checkpoint c;
  sc_diag d = {0};
  const int got = sc_hf_checkpoint_open(dir, &c, &d);
  cr_assert_eq(got, rc, "rc %d (%s), expected %d", got, d.msg, rc);
  if (want) cr_assert(strstr(d.msg, want), "\"%s\" lacks \"%s\"", d.msg, want);
  if (want2) cr_assert(strstr(d.msg, want2), "\"%s\" lacks \"%s\"", d.msg, want2);
  if (got) {
    cr_assert(!maps_dir(dir), "a shard stays mapped after a failure");
    cr_assert(c.shards == NULL && c.num == 0);
  }
  if (got == 0) sc_hf_checkpoint_close(&c);
}

/* Opens a checkpoint broken by b, as expect_dir. */
static void expect(const breakage *b, int rc, const char *want, const char *want2) {
  ckpt k;
  write_ckpt(&k, b);
  expect_dir(k.dir, rc, want, want2);
  remove_ckpt(&k);
}

Test(hf_checkpoint, valid_sharded_fp8_with_mtp) {
  ckpt k;
  write_ckpt(&k, &(breakage){.mtp = true});
  sc_hf_checkpoint c;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_checkpoint_open(k.dir, &c, &d), 0, "%s", d.msg);
  cr_assert(c.indexed);
  cr_assert_eq(c.num_shards, 2);
  cr_assert_eq(c.mtp_tensors, NUM_MTP);
  cr_assert_eq(c.num + NUM_MTP, k.num);
  cr_assert(sc_hf_checkpoint_find(&c, MTP[0].name) == NULL);
  cr_assert(maps_dir(k.dir));
  /* a routed expert's fp8 weight and its scale, dequantized through the lookup */
  const char *wn = "model.layers.1.mlp.experts.3.down_proj.weight";
  const sc_hf_tensor *w = sc_hf_checkpoint_find(&c, wn);
  const sc_hf_tensor *s =
      sc_hf_checkpoint_find(&c, "model.layers.1.mlp.experts.3.down_proj.weight_scale_inv");
  cr_assert(w != NULL && s != NULL);
  cr_assert_eq(w->dtype, SC_ST_F8_E4M3);
  cr_assert_eq(w->shape[0], 64);
  cr_assert_eq(w->shape[1], 32);
  cr_assert_eq(s->dtype, SC_ST_F32);
  cr_assert_eq(s->shape[0], 2);
  cr_assert_eq(s->shape[1], 1);
  const sc_fp8_weight fw = {w->data, s->data, 64, 32, c.cfg.quant.block_rows, c.cfg.quant.block_cols};
  float out[64 * 32];
  cr_assert_eq(sc_fp8_dequant_f32(&fw, 0, 64, 0, 32, out), 0);
  for (int64_t r = 0; r < 64; r++)
    for (int64_t col = 0; col < 32; col++)
      cr_assert_eq(out[r * 32 + col], sc_e4m3_to_f32(code_at(wn, r * 32 + col)) *
                                          scale_value(s->name, (r / 32) * 1 + col / 32));
  /* q_b_proj [2*(16+8), 48]: scales [ceil(48/32), ceil(48/32)] = [2, 2] */
  const sc_hf_tensor *qs = sc_hf_checkpoint_find(&c, "model.layers.0.self_attn.q_b_proj.weight_scale_inv");
  cr_assert(qs && qs->shape[0] == 2 && qs->shape[1] == 2);
  const sc_hf_tensor *wp = sc_hf_checkpoint_find(&c, "model.layers.1.self_attn.indexer.weights_proj.weight");
  cr_assert(wp && wp->dtype == SC_ST_BF16);
  cr_assert(sc_hf_checkpoint_find(&c, "model.layers.1.self_attn.indexer.weights_proj.weight_scale_inv") == NULL);
  cr_assert(c.bytes_f8 > 0 && c.bytes_bf16 > 0 && c.bytes_f32 > 0);
  sc_hf_checkpoint_close(&c);
  cr_assert(!maps_dir(k.dir));
  remove_ckpt(&k);
}

Test(hf_checkpoint, valid_single_file) { expect(&(breakage){.single = true}, 0, NULL, NULL); }

Test(hf_checkpoint, missing_tensor) {
  expect(&(breakage){.drop = "model.layers.1.mlp.experts.2.up_proj.weight_scale_inv"}, SC_EINVAL,
         "tensor \"model.layers.1.mlp.experts.2.up_proj.weight_scale_inv\" is missing", NULL);
  expect(&(breakage){.drop = "lm_head.weight", .single = true}, SC_EINVAL,
         "\"lm_head.weight\" is missing", NULL);
}

Test(hf_checkpoint, extra_tensor) {
  expect(&(breakage){.extra = "model.layers.1.mlp.experts.4.gate_proj.weight"}, SC_EINVAL,
         "extra tensor \"model.layers.1.mlp.experts.4.gate_proj.weight\"", NULL);
  expect(&(breakage){.extra = "model.layers.0.mlp.gate.weight", .single = true}, SC_EINVAL,
         "extra tensor \"model.layers.0.mlp.gate.weight\" (in model.safetensors)", NULL);
  /* MTP tensors of a config without MTP layers are extra */
  char cfg[sizeof TINY + 64];
  edit(TINY, "\"num_nextn_predict_layers\": 1", "\"num_nextn_predict_layers\": 0", cfg, sizeof cfg);
  expect(&(breakage){.config = cfg, .mtp = true}, SC_EINVAL, "extra tensor \"model.layers.2.", NULL);
}

Test(hf_checkpoint, wrong_shape) {
  expect(&(breakage){.reshape = "model.layers.0.self_attn.kv_b_proj.weight"}, SC_EINVAL,
         "tensor \"model.layers.0.self_attn.kv_b_proj.weight\"", "has shape [65, 32]; the config needs [64, 32]");
  expect(&(breakage){.reshape = "model.layers.1.self_attn.indexer.k_norm.bias"}, SC_EINVAL,
         "\"model.layers.1.self_attn.indexer.k_norm.bias\"", "[17]");
  /* a scale may be squeezed (tiny-fp8 has some), but not of another size */
  expect(&(breakage){.reshape = "model.layers.1.mlp.experts.0.down_proj.weight_scale_inv"},
         SC_EINVAL, "has shape [3, 1]; the config needs [2, 1]", NULL);
}

Test(hf_checkpoint, wrong_dtype) {
  expect(&(breakage){.retype = "model.layers.0.self_attn.o_proj.weight"}, SC_EINVAL,
         "tensor \"model.layers.0.self_attn.o_proj.weight\"", "has dtype BF16; it must be F8_E4M3");
  expect(&(breakage){.retype = "model.layers.1.mlp.shared_experts.down_proj.weight_scale_inv"},
         SC_EINVAL, "shared_experts.down_proj.weight_scale_inv\"", "must be F32");
}

Test(hf_checkpoint, shards_and_weight_map) {
  expect(&(breakage){.no_shard2 = true}, SC_ENOENT, "shard model-00002-of-00002.safetensors",
         "(where the weight_map puts tensor \"");
  expect(&(breakage){.unshard = "model.layers.1.self_attn.indexer.wk.weight"}, SC_EINVAL,
         "the weight_map puts tensor \"model.layers.1.self_attn.indexer.wk.weight\" in "
         "model-00001-of-00002.safetensors, which does not hold it", NULL);
  expect(&(breakage){.unlist = "model.norm.weight"}, SC_EINVAL,
         "tensor \"model.norm.weight\" is in model-00002-of-00002.safetensors, but the "
         "weight_map does not list it", NULL);
  expect(&(breakage){.unlist = MTP[3].name, .mtp = true}, SC_EINVAL, MTP[3].name,
         "does not list it");
  expect(&(breakage){.unshard = "model.layers.2.hnorm.weight", .mtp = true}, SC_EINVAL,
         "\"model.layers.2.hnorm.weight\"", "does not hold it");
  /* a second copy in another shard, the weight_map naming the first */
  expect(&(breakage){.dup = "model.embed_tokens.weight"}, SC_EINVAL,
         "tensor \"model.embed_tokens.weight\" is in model-00002-of-00002.safetensors, but "
         "the weight_map puts it in model-00001-of-00002.safetensors", NULL);
}

/* A file that exists but cannot be opened is an I/O failure (SC_EIO: `checkpoint` exits
 * 1), not a missing file, and an index that cannot be read is not passed over for a
 * model.safetensors beside it. A symbolic link to itself stands for the unreadable file
 * (permissions do not stop root). */
Test(hf_checkpoint, unreadable_files) {
  ckpt k;
  write_ckpt(&k, &(breakage){0});
  char path[128];
  snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", k.dir);
  cr_assert_eq(unlink(path), 0);
  cr_assert_eq(symlink(path, path), 0);
  expect_dir(k.dir, SC_EIO, "shard model-00002-of-00002.safetensors", NULL);
  remove_ckpt(&k);

  write_ckpt(&k, &(breakage){.single = true});
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", k.dir);
  cr_assert_eq(symlink(path, path), 0);
  expect_dir(k.dir, SC_EIO, "model.safetensors.index.json", NULL);
  remove_ckpt(&k);
}

/* Hostile indexes: more shard files than a directory may have (refused before any is
 * opened), a name with a NUL byte, a name twice, a directory path too long to extend. */
Test(hf_checkpoint, hostile_index_and_paths) {
  char cfg[sizeof TINY + 64];
  edit(TINY, "\"n_routed_experts\": 4", "\"n_routed_experts\": 1024", cfg, sizeof cfg);
  sc_hf_spec *spec;
  const int32_t n = table_of(cfg, &spec);
  cr_assert_gt(n, SC_HF_MAX_SHARDS);
  ckpt k = {0};
  snprintf(k.dir, sizeof k.dir, "/tmp/sc_hfckpt_XXXXXX");
  cr_assert(mkdtemp(k.dir) != NULL);
  write_text(k.dir, "config.json", cfg);
  json_t *map = json_object();
  for (int32_t i = 0; i < n; i++) {
    char shard[32];
    snprintf(shard, sizeof shard, "s%d.safetensors", (int)i);
    json_object_set_new(map, spec[i].name, json_string(shard));
  }
  free(spec);
  json_t *root = json_pack("{s:o}", "weight_map", map);
  char *text = json_dumps(root, 0);
  write_text(k.dir, "model.safetensors.index.json", text);
  free(text);
  json_decref(root);
  expect_dir(k.dir, SC_EINVAL, "more than 4096 shard files", NULL);

  write_text(k.dir, "config.json", TINY);
  write_text(k.dir, "model.safetensors.index.json",
             "{\"weight_map\": {\"model.norm.weight\\u0000x\": \"a.safetensors\"}}");
  expect_dir(k.dir, SC_EINVAL, "invalid JSON", NULL);
  write_text(k.dir, "model.safetensors.index.json",
             "{\"weight_map\": {\"model.norm.weight\": \"a.safetensors\","
             " \"model.norm.weight\": \"b.safetensors\"}}");
  expect_dir(k.dir, SC_EINVAL, "duplicate object key", NULL);
  remove_ckpt(&k);

  char dir[PATH_MAX];
  memset(dir, '/', sizeof dir - 8);
  dir[sizeof dir - 8] = '\0';
  expect_dir(dir, SC_EINVAL, "config.json", "bytes");
}

Test(hf_checkpoint, truncated_shard) {
  ckpt k;
  write_ckpt(&k, &(breakage){0});
  char path[128];
  snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", k.dir);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_assert_eq(truncate(path, st.st_size - 100), 0);
  expect_dir(k.dir, SC_EINVAL, "shard model-00002-of-00002.safetensors",
             "lie outside the data section");
  remove_ckpt(&k);
}

Test(hf_checkpoint, bad_config) {
  char cfg[sizeof TINY + 64];
  edit(TINY, "\"deepseek_v32\"", "\"deepseek_v3\"", cfg, sizeof cfg);
  expect(&(breakage){.config = cfg}, SC_EINVAL, "\"model_type\" = \"deepseek_v3\"", NULL);
  edit(TINY, "\"index_n_heads\": 2,", "", cfg, sizeof cfg);
  expect(&(breakage){.config = cfg}, SC_EINVAL, "\"index_n_heads\" is missing", NULL);
  edit(TINY, "\"factor\": 4", "\"factor\": 0", cfg, sizeof cfg);
  expect(&(breakage){.config = cfg}, SC_EINVAL, "rope_scaling.\"factor\"", NULL);
}

Test(hf_checkpoint, no_directory) {
  sc_hf_checkpoint c;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_checkpoint_open("/nonexistent-sc-dir", &c, &d), SC_ENOENT);
  cr_assert(strstr(d.msg, "config.json"), "%s", d.msg);
  ckpt k;
  write_ckpt(&k, &(breakage){.single = true});
  char path[128];
  snprintf(path, sizeof path, "%s/model.safetensors", k.dir);
  unlink(path);
  cr_assert_eq(sc_hf_checkpoint_open(k.dir, &c, &d), SC_ENOENT);
  cr_assert(strstr(d.msg, "neither model.safetensors.index.json nor model.safetensors"), "%s", d.msg);
  remove_ckpt(&k);
}

/* ---- against transformers ---- */

/* The shape of a table entry equals the saved one, or (scales only) squeezes to it. */
static void expect_shape(const sc_hf_spec *t, json_t *sh) {
  int64_t got[SC_ST_MAX_DIMS];
  size_t n = 0, k = 0;
  for (size_t j = 0; j < json_array_size(sh) && j < SC_ST_MAX_DIMS; j++)
    if (json_integer_value(json_array_get(sh, j)) != 1 || t->kind != SC_HF_SCALE)
      got[n++] = json_integer_value(json_array_get(sh, j));
  if (t->kind != SC_HF_SCALE) cr_assert_eq(n, (size_t)t->ndim, "%s", t->name);
  for (int j = 0; j < t->ndim; j++) {
    if (t->kind == SC_HF_SCALE && t->shape[j] == 1) continue;
    cr_assert(k < n && got[k] == t->shape[j], "%s: dimension %d", t->name, j);
    k++;
  }
  cr_assert_eq(k, n, "%s", t->name);
}

/* sparsecp's table for the config of a transformers reference file names exactly the
 * tensors transformers saved, with their shapes and dtype classes. */
static void compare_table(const char *ref_path, const char *dir, int32_t shards) {
  json_error_t err;
  json_t *ref = json_load_file(ref_path, 0, &err);
  cr_assert(ref != NULL, "%s: %s", ref_path, err.text);
  char *cfg_text = json_dumps(json_object_get(ref, "config"), 0);
  sc_hf_config cfg;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_config_parse(cfg_text, strlen(cfg_text), &cfg, &d), 0, "%s", d.msg);
  cr_assert_eq(cfg.unknown_keys, 0, "%s", cfg.first_unknown);
  free(cfg_text);
  sc_hf_spec *t;
  int32_t n;
  cr_assert_eq(sc_hf_tensor_table(&cfg, &t, &n, &d), 0);
  json_t *tensors = json_object_get(ref, "tensors");
  cr_assert_eq((size_t)n, json_object_size(tensors));
  for (int32_t i = 0; i < n; i++) {
    json_t *e = json_object_get(tensors, t[i].name);
    cr_assert(e != NULL, "transformers saves no tensor \"%s\"", t[i].name);
    expect_shape(&t[i], json_object_get(e, "shape"));
    const char *dt = json_string_value(json_object_get(e, "dtype"));
    const bool fp8 = t[i].kind == SC_HF_LINEAR && cfg.quant.fp8;
    if (fp8) cr_assert_str_eq(dt, "F8_E4M3", "%s", t[i].name);
    else if (t[i].kind == SC_HF_SCALE) cr_assert_str_eq(dt, "F32", "%s", t[i].name);
    else cr_assert(!strcmp(dt, "BF16") || !strcmp(dt, "F32"), "%s: %s", t[i].name, dt);
  }
  free(t);
  json_decref(ref);
  sc_hf_checkpoint c;
  cr_assert_eq(sc_hf_checkpoint_open(dir, &c, &d), 0, "%s", d.msg);
  cr_assert_eq(c.num, n);
  cr_assert_eq(c.num_shards, shards);
  sc_hf_checkpoint_close(&c);
}

Test(hf_checkpoint, table_matches_transformers_fp8) {
  compare_table(SC_HF_DATA "/transformers-fp8.json", SC_HF_DATA "/tiny-fp8", 2);
}

/* Every e4m3 byte as torch decodes it, and weights of the transformers fp8 checkpoint
 * dequantized by torch, against fp8_block through the checkpoint's lookup. */
Test(hf_checkpoint, fp8_matches_torch) {
  json_error_t err;
  json_t *ref = json_load_file(SC_HF_DATA "/transformers-fp8.json", 0, &err);
  cr_assert(ref != NULL, "%s", err.text);
  json_t *codes = json_object_get(ref, "e4m3");
  cr_assert_eq(json_array_size(codes), 256);
  for (int b = 0; b < 256; b++) {
    json_t *v = json_array_get(codes, (size_t)b);
    if (json_is_null(v)) cr_assert(isnan(sc_e4m3_to_f32((uint8_t)b)), "0x%02x", b);
    else cr_assert_eq(sc_e4m3_to_f32((uint8_t)b), (float)json_number_value(v), "0x%02x", b);
  }
  sc_hf_checkpoint c;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_checkpoint_open(SC_HF_DATA "/tiny-fp8", &c, &d), 0, "%s", d.msg);
  json_t *deq = json_object_get(ref, "dequant");
  cr_assert_eq(json_object_size(deq), 2);
  const char *name;
  json_t *rows;
  json_object_foreach(deq, name, rows) {
    const sc_hf_tensor *w = sc_hf_checkpoint_find(&c, name);
    char sname[SC_HF_MAX_NAME + 16];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    const sc_hf_tensor *s = sc_hf_checkpoint_find(&c, sname);
    cr_assert(w && s && w->dtype == SC_ST_F8_E4M3, "%s", name);
    const sc_fp8_weight fw = {w->data, s->data, w->shape[0], w->shape[1],
                              c.cfg.quant.block_rows, c.cfg.quant.block_cols};
    float *out = malloc((size_t)(w->shape[0] * w->shape[1]) * sizeof *out);
    cr_assert_eq(sc_fp8_dequant_f32(&fw, 0, w->shape[0], 0, w->shape[1], out), 0);
    cr_assert_eq(json_array_size(rows), (size_t)w->shape[0]);
    for (int64_t r = 0; r < w->shape[0]; r++)
      for (int64_t col = 0; col < w->shape[1]; col++) {
        const double want = json_number_value(json_array_get(json_array_get(rows, (size_t)r), (size_t)col));
        cr_assert_eq(out[r * w->shape[1] + col], (float)want, "%s (%lld, %lld)", name,
                     (long long)r, (long long)col);
      }
    free(out);
  }
  sc_hf_checkpoint_close(&c);
  json_decref(ref);
}

Test(hf_checkpoint, table_matches_transformers) {
  compare_table(SC_HF_DATA "/transformers.json", SC_HF_DATA "/tiny-bf16", 3);
}
