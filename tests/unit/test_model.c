/* test_model.c - model configuration, safetensors (round trip and every rejection),
 * synthetic weights and their TP slices, KV slot arithmetic, sampling, and the forward
 * pass refusing a collective that does not match the plan. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/backend_mem.h"
#include "kernels/bf16.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/model_defaults.h"
#include "model/safetensors.h"
#include "model/sampling.h"
#include "model/step_prof.h"
#include "model/weights.h"
#include "plan/metadata.h"

static sc_model_config tiny(void) {
  sc_model_config m;
  sc_model_config_default(&m);
  m.vocab = 64, m.hidden = 16, m.layers = 2, m.heads = 2, m.q_lora_rank = 8;
  m.kv_lora_rank = 8, m.qk_nope_dim = 4, m.rope_dim = 4, m.v_head_dim = 4;
  m.index_heads = 2, m.index_dim = 4, m.topk = 4, m.ffn_hidden = 8;
  return m;
}

static char *tmp_path(const char *tag) {
  static char buf[8][128];
  static int n;
  char *p = buf[n++ % 8];
  snprintf(p, 128, "/tmp/sc_test_model_%d_%s.safetensors", (int)getpid(), tag);
  return p;
}

/* ---- configuration ---- */

Test(model_config, defaults_are_the_shared_macros_and_valid) {
  sc_model_config m;
  sc_model_config_default(&m);
  cr_assert_eq(sc_model_config_validate(&m, NULL), 0);
  cr_assert_eq(m.kv_lora_rank, SC_MODEL_DEFAULT_KV_LORA_RANK);
  cr_assert_eq(m.rope_dim, SC_MODEL_DEFAULT_ROPE_DIM);
  cr_assert_eq(m.vocab, 32768);
  cr_assert_eq(sc_model_kv_width(&m), 576);
  sc_plan_config p, q;
  sc_model_plan_config_default(&p);
  q = p;
  sc_model_config_to_plan(&m, &q);
  q.layers = p.layers; /* the planner defaults to 1 layer (DESIGN.md §7), the model to 2 */
  cr_assert_eq(memcmp(&p, &q, sizeof p), 0, "planner defaults and model defaults disagree");
}

Test(model_config, example_file_parses) {
  sc_model_config m;
  sc_diag d = {0};
  const int rc = sc_model_config_load(SC_SOURCE_DIR "/examples/model-small.json", &m, &d);
  cr_assert_eq(rc, 0, "%s", d.msg);
  cr_assert_eq(m.hidden, 128);
  cr_assert_eq(m.kv_lora_rank, 512);
  cr_assert_eq(m.topk, 32);
  cr_assert_float_eq(m.rms_eps, 1e-6f, 1e-12f);
}

Test(model_config, eos_token_id_is_one_id_a_list_or_null) {
  const struct {
    const char *json;
    int32_t n, first, last;
  } cases[] = {{"{}", 0, 0, 0},
               {"{\"eos_token_id\": null}", 0, 0, 0},
               {"{\"eos_token_id\": 7}", 1, 7, 7},
               {"{\"eos_token_id\": [32767, 0, 12]}", 3, 32767, 12},
               {"{\"eos_token_id\": []}", 0, 0, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sc_model_config m;
    sc_diag d = {0};
    cr_assert_eq(sc_model_config_parse(cases[i].json, strlen(cases[i].json), &m, &d), 0,
                 "case %zu: %s", i, d.msg);
    cr_assert_eq(m.eos.n, cases[i].n, "case %zu", i);
    if (m.eos.n) cr_assert(m.eos.id[0] == cases[i].first && m.eos.id[m.eos.n - 1] == cases[i].last);
  }
}

Test(model_config, rejections_name_the_key) {
  const struct {
    const char *json, *needle;
  } cases[] = {
      {"{\"hiden\": 3}", "unknown model config key \"hiden\""},
      {"{\"hidden\": \"64\"}", "\"hidden\" must be an integer"},
      {"{\"hidden\": 0}", "\"hidden\" = 0 is out of range"},
      {"{\"rope_dim\": 3}", "rope_dim = 3 must be even"},
      {"{\"rms_eps\": -1}", "\"rms_eps\""},
      {"{\"rope_theta\": 0.5}", "\"rope_theta\""},
      {"{\"seed\": -4}", "\"seed\""},
      {"[1, 2]", "must be a JSON object"},
      {"{\"layers\": 2,", "invalid JSON"},
      {"{\"layers\": 2, \"layers\": 3}", "invalid JSON"},
      {"{\"vocab\": 4194304, \"hidden\": 65536}", "exceeds 2^31"},
      {"{\"eos_token_id\": 32768}", "eos_token_id 32768 is not a token id below vocab = 32768"},
      {"{\"eos_token_id\": [1, -2]}", "must hold token ids"},
      {"{\"eos_token_id\": \"</s>\"}", "must be a token id, a list of them or null"},
      {"{\"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", "lists 9 ids (at most 8)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sc_model_config m;
    sc_model_config_default(&m);
    const sc_model_config before = m;
    sc_diag d = {0};
    const int rc = sc_model_config_parse(cases[i].json, strlen(cases[i].json), &m, &d);
    cr_assert_eq(rc, SC_EINVAL, "case %zu: rc %d", i, rc);
    cr_assert(strstr(d.msg, cases[i].needle), "case %zu: message \"%s\" lacks \"%s\"", i, d.msg,
              cases[i].needle);
    cr_assert_eq(memcmp(&m, &before, sizeof m), 0, "case %zu: output modified on failure", i);
  }
  sc_model_config m = tiny();
  sc_diag d = {0};
  cr_assert_eq(sc_model_config_check_tp(&m, 2, &d), 0);
  cr_assert_eq(sc_model_config_check_tp(&m, 4, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "heads = 2 is not divisible by tp = 4"));
  cr_assert_eq(sc_model_config_load("/nonexistent/model.json", &m, &d), SC_ENOENT);
}

/* sc_model_config_same and the digest that the step plan carries (sc_engine_config_digest)
 * see every field, and no padding: a node that differs from the head in any one of them
 * must be caught, and two nodes with the same model must never be told apart. */
static void expect_differs(const sc_model_config *a, const sc_model_config *b, const char *what) {
  cr_assert(!sc_model_config_same(a, b), "same() missed %s", what);
  cr_assert(sc_model_config_digest(a) != sc_model_config_digest(b), "the digest missed %s", what);
}

Test(model_config, same_and_digest_see_every_field) {
  sc_model_config a;
  sc_model_config_default(&a);
  a.arch.checkpoint = true; /* every arch field in use, each with a value to change */
  a.arch.rope = (sc_hf_rope_scaling){1, 40.0, 4096, 32.0, 1.0, 1.0, 1.0};
  a.arch.first_dense = 1;
  a.arch.route = (sc_moe_route_cfg){8, 2, 1, 2, true, 2.5};
  a.arch.moe_inter = 64, a.arch.n_shared = 1;
  a.arch.index_norm_eps = 1e-6f, a.arch.latent_norm_eps = 1e-6f;
#define MUT(expr)                                                                       \
  do {                                                                                  \
    sc_model_config b = a;                                                              \
    expr;                                                                               \
    expect_differs(&a, &b, #expr);                                                      \
  } while (0)
  MUT(b.vocab++); MUT(b.hidden++); MUT(b.layers++); MUT(b.heads++); MUT(b.q_lora_rank++);
  MUT(b.kv_lora_rank++); MUT(b.qk_nope_dim++); MUT(b.rope_dim += 2); MUT(b.v_head_dim++);
  MUT(b.index_heads++); MUT(b.index_dim++); MUT(b.topk++); MUT(b.ffn_hidden++);
  MUT(b.max_position++); MUT(b.rms_eps *= 2); MUT(b.rope_theta *= 2); MUT(b.seed++);
  MUT(b.init_scale *= 2); MUT(b.arch.checkpoint = false); MUT(b.arch.rope.type = 0);
  MUT(b.arch.rope.factor *= 2); MUT(b.arch.rope.original_max_position_embeddings++);
  MUT(b.arch.rope.beta_fast *= 2); MUT(b.arch.rope.beta_slow *= 2);
  MUT(b.arch.rope.mscale *= 2); MUT(b.arch.rope.mscale_all_dim *= 2);
  MUT(b.arch.first_dense++); MUT(b.arch.route.n_experts++); MUT(b.arch.route.n_group++);
  MUT(b.arch.route.topk_group++); MUT(b.arch.route.k++);
  MUT(b.arch.route.norm_topk_prob = false); MUT(b.arch.route.routed_scaling_factor *= 2);
  MUT(b.arch.moe_inter++); MUT(b.arch.n_shared++); MUT(b.arch.index_norm_eps *= 2);
  MUT(b.arch.latent_norm_eps *= 2); MUT(b.arch.index_interleaved = true);
  MUT(b.arch.index_shared[0] ^= 1); MUT(b.arch.index_shared[SC_HF_MAX_LAYERS / 8 - 1] ^= 0x80);
#undef MUT
  { /* the end-of-sequence tokens are the scheduler's, not the model's computation */
    sc_model_config b = a;
    b.eos = (sc_hf_eos){.id = {7, 9}, .n = 2};
    cr_assert(sc_model_config_same(&a, &b));
    cr_assert_eq(sc_model_config_digest(&a), sc_model_config_digest(&b));
  }
  /* the same fields over other padding bytes: the same model, the same digest */
  sc_model_config b;
  memset(&b, 0xA5, sizeof b);
  b.vocab = a.vocab, b.hidden = a.hidden, b.layers = a.layers, b.heads = a.heads;
  b.q_lora_rank = a.q_lora_rank, b.kv_lora_rank = a.kv_lora_rank;
  b.qk_nope_dim = a.qk_nope_dim, b.rope_dim = a.rope_dim, b.v_head_dim = a.v_head_dim;
  b.index_heads = a.index_heads, b.index_dim = a.index_dim, b.topk = a.topk;
  b.ffn_hidden = a.ffn_hidden, b.max_position = a.max_position, b.rms_eps = a.rms_eps;
  b.rope_theta = a.rope_theta, b.seed = a.seed, b.init_scale = a.init_scale;
  b.arch.checkpoint = a.arch.checkpoint, b.arch.rope.type = a.arch.rope.type;
  b.arch.rope.factor = a.arch.rope.factor;
  b.arch.rope.original_max_position_embeddings = a.arch.rope.original_max_position_embeddings;
  b.arch.rope.beta_fast = a.arch.rope.beta_fast, b.arch.rope.beta_slow = a.arch.rope.beta_slow;
  b.arch.rope.mscale = a.arch.rope.mscale, b.arch.rope.mscale_all_dim = a.arch.rope.mscale_all_dim;
  b.arch.first_dense = a.arch.first_dense, b.arch.route.n_experts = a.arch.route.n_experts;
  b.arch.route.n_group = a.arch.route.n_group, b.arch.route.topk_group = a.arch.route.topk_group;
  b.arch.route.k = a.arch.route.k, b.arch.route.norm_topk_prob = a.arch.route.norm_topk_prob;
  b.arch.route.routed_scaling_factor = a.arch.route.routed_scaling_factor;
  b.arch.moe_inter = a.arch.moe_inter, b.arch.n_shared = a.arch.n_shared;
  b.arch.index_norm_eps = a.arch.index_norm_eps, b.arch.latent_norm_eps = a.arch.latent_norm_eps;
  b.arch.index_interleaved = a.arch.index_interleaved;
  memcpy(b.arch.index_shared, a.arch.index_shared, sizeof b.arch.index_shared);
  cr_assert(sc_model_config_same(&a, &b), "padding made two equal models differ");
  cr_assert_eq(sc_model_config_digest(&a), sc_model_config_digest(&b));
}

/* ---- weights ---- */

static float *download(sc_kernels *k, const float *buf, size_t n) {
  float *h = malloc(n * sizeof *h);
  cr_assert_eq(k->ops->copy(k, h, buf, n * sizeof *h, SC_KCOPY_D2H), 0);
  return h;
}

Test(weights, tp_slices_tile_the_full_tensors) {
  sc_kernels *k;
  cr_assert_eq(sc_kernels_cpu_create(&k, 1), 0);
  const sc_model_config m = tiny();
  sc_model_weights full, half[2];
  sc_diag d = {0};
  cr_assert_eq(sc_model_weights_synthetic(k, &m, 1, 0, &full, &d), 0, "%s", d.msg);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(sc_model_weights_synthetic(k, &m, 2, r, &half[r], &d), 0, "%s", d.msg);
  int split_seen = 0;
  for (int32_t i = 0; i < full.num; i++) {
    sc_tensor_info t;
    sc_model_tensor_info(&m, i, &t);
    float *f = download(k, full.t[i], (size_t)(t.rows * t.cols));
    for (int r = 0; r < 2; r++) {
      int64_t r0, nr, c0, nc;
      sc_model_tensor_slice(&t, 2, r, &r0, &nr, &c0, &nc);
      float *hpart = download(k, half[r].t[i], (size_t)(nr * nc));
      for (int64_t a = 0; a < nr; a++)
        for (int64_t b = 0; b < nc; b++)
          cr_assert_eq(hpart[a * nc + b], f[(r0 + a) * t.cols + c0 + b], "%s (%lld, %lld)",
                       t.name, (long long)a, (long long)b);
      split_seen += t.split != SC_SPLIT_NONE && r == 1;
      free(hpart);
    }
    /* values are synthetic, not zeros */
    double sum = 0;
    for (int64_t e = 0; e < t.rows * t.cols; e++) sum += fabs(f[e]);
    cr_assert_gt(sum, 0.0, "%s is all zeros", t.name);
    free(f);
  }
  cr_assert_eq(split_seen, 6 * m.layers); /* wq_b, wkv_b, wo, w1, w3, w2 */
  sc_model_weights_free(k, &full);
  sc_model_weights_free(k, &half[0]);
  sc_model_weights_free(k, &half[1]);
  sc_kernels_destroy(k);
}

static void roundtrip(int dtype) {
  sc_kernels *k;
  cr_assert_eq(sc_kernels_cpu_create(&k, 1), 0);
  const sc_model_config m = tiny();
  const char *path = tmp_path(dtype == SC_DT_F32 ? "f32" : "bf16");
  sc_diag d = {0};
  cr_assert_eq(sc_model_write_synthetic(&m, dtype, path, &d), 0, "%s", d.msg);
  for (int r = 0; r < 2; r++) {
    sc_model_weights w, s;
    cr_assert_eq(sc_model_weights_load(k, &m, 2, r, path, &w, &d), 0, "%s", d.msg);
    cr_assert_eq(sc_model_weights_synthetic(k, &m, 2, r, &s, &d), 0);
    for (int32_t i = 0; i < w.num; i++) {
      sc_tensor_info t;
      sc_model_tensor_info(&m, i, &t);
      int64_t r0, nr, c0, nc;
      sc_model_tensor_slice(&t, 2, r, &r0, &nr, &c0, &nc);
      float *a = download(k, w.t[i], (size_t)(nr * nc)), *b = download(k, s.t[i], (size_t)(nr * nc));
      for (int64_t e = 0; e < nr * nc; e++) {
        const float want = dtype == SC_DT_F32 ? b[e] : sc_bf16_to_f32(sc_f32_to_bf16(b[e]));
        cr_assert_eq(a[e], want, "%s element %lld: %g != %g", t.name, (long long)e, (double)a[e],
                     (double)want);
      }
      free(a);
      free(b);
    }
    sc_model_weights_free(k, &w);
    sc_model_weights_free(k, &s);
  }
  unlink(path);
  sc_kernels_destroy(k);
}

Test(weights, safetensors_roundtrip_f32) { roundtrip(SC_DT_F32); }
Test(weights, safetensors_roundtrip_bf16) { roundtrip(SC_DT_BF16); }

/* The ranks of one GPU reading one copy (actors/rank_ctx.c): every tensor of one rank's
 * weights copied into one buffer, at its own 256-byte aligned place, and the tables of
 * that rank and of another with the same weights pointing there, with the values they
 * had; the first frees its buffers then, the second keeps them and can go back to them
 * (the CPU backend's buffers are host memory: ASan sees a double or a missed free). */
Test(weights, one_buffer_holds_every_tensor_for_the_ranks_that_share_it) {
  sc_kernels *k;
  cr_assert_eq(sc_kernels_cpu_create(&k, 1), 0);
  const sc_model_config m = tiny();
  sc_model_weights owner, member, ref;
  sc_diag d = {0};
  cr_assert_eq(sc_model_weights_synthetic(k, &m, 2, 1, &owner, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_model_weights_synthetic(k, &m, 2, 1, &member, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_model_weights_synthetic(k, &m, 2, 1, &ref, &d), 0, "%s", d.msg);
  const size_t bytes = sc_model_weights_flat_bytes(&owner);
  size_t sum = 0;
  for (int32_t i = 0; i < owner.num; i++) {
    sc_tensor_info t;
    sc_model_tensor_info(&m, i, &t);
    int64_t r0, nr, c0, nc;
    sc_model_tensor_slice(&t, 2, 1, &r0, &nr, &c0, &nc);
    sum += (size_t)(nr * nc) * sizeof(float);
  }
  cr_assert(bytes >= sum && bytes % 256 == 0 && bytes < sum + 256 * (size_t)owner.num,
            "%zu bytes for %zu", bytes, sum);
  void *flat = NULL;
  cr_assert_eq(k->ops->alloc(k, bytes, &flat), 0);
  cr_assert_eq(sc_model_weights_flat_copy(k, &owner, flat), 0);
  cr_assert_eq(sc_model_weights_flat_use(k, &owner, flat, true), 0);
  cr_assert_eq(sc_model_weights_flat_bytes(&owner), bytes, "the layout's size, moved or not");
  cr_assert_eq(sc_model_weights_flat_use(k, &owner, flat, true), SC_EINVAL, "moved once");
  cr_assert_eq(sc_model_weights_flat_copy(k, &owner, flat), SC_EINVAL, "moved once");
  cr_assert_eq(sc_model_weights_flat_use(k, &member, flat, false), 0);
  cr_assert_not_null(member.own);
  const char *end = NULL;
  for (int32_t i = 0; i < owner.num; i++) {
    sc_tensor_info t;
    sc_model_tensor_info(&m, i, &t);
    int64_t r0, nr, c0, nc;
    sc_model_tensor_slice(&t, 2, 1, &r0, &nr, &c0, &nc);
    const size_t n = (size_t)(nr * nc);
    const char *at = (const char *)owner.t[i];
    cr_assert_eq(member.t[i], owner.t[i], "%s: the same place for both", t.name);
    cr_assert(at >= (const char *)flat && (size_t)(at - (const char *)flat) % 256 == 0 &&
              at + n * sizeof(float) <= (const char *)flat + bytes, "%s inside, aligned", t.name);
    cr_assert(end == NULL || at >= end, "%s after the tensor before it", t.name);
    end = at + n * sizeof(float);
    float *a = download(k, owner.t[i], n), *b = download(k, ref.t[i], n);
    cr_assert_eq(memcmp(a, b, n * sizeof(float)), 0, "%s: its values", t.name);
    free(a);
    free(b);
  }
  /* back to its own (a rebuild whose note names other weights): the buffers it held,
   * with their values; the owner kept none to go back to */
  float **kept = malloc((size_t)member.num * sizeof *kept);
  memcpy(kept, member.own, (size_t)member.num * sizeof *kept);
  cr_assert_eq(sc_model_weights_flat_drop(&owner), SC_EINVAL);
  cr_assert_eq(sc_model_weights_flat_drop(&member), 0);
  cr_assert(member.flat == NULL && member.own == NULL);
  for (int32_t i = 0; i < member.num; i++) {
    cr_assert_eq(member.t[i], kept[i]);
    sc_tensor_info t;
    sc_model_tensor_info(&m, i, &t);
    int64_t r0, nr, c0, nc;
    sc_model_tensor_slice(&t, 2, 1, &r0, &nr, &c0, &nc);
    float *a = download(k, member.t[i], (size_t)(nr * nc)), *b = download(k, ref.t[i], (size_t)(nr * nc));
    cr_assert_eq(memcmp(a, b, (size_t)(nr * nc) * sizeof(float)), 0, "%s: its own values", t.name);
    free(a);
    free(b);
  }
  free(kept);
  sc_model_weights_free(k, &owner);
  sc_model_weights_free(k, &member);
  sc_model_weights_free(k, &ref);
  k->ops->free(k, flat);
  sc_kernels_destroy(k);
}

/* ---- safetensors rejections ---- */

static size_t image(uint8_t *buf, const char *hdr, size_t data_bytes, uint64_t claimed) {
  const size_t n = strlen(hdr);
  const uint64_t len = claimed ? claimed : n;
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(len >> (8 * i));
  memcpy(buf + 8, hdr, n);
  memset(buf + 8 + n, 0, data_bytes);
  return 8 + n + data_bytes;
}

Test(safetensors, rejections) {
  static uint8_t buf[4096];
  const struct {
    const char *hdr;
    size_t data;
    uint64_t claimed;
    int code;
    const char *needle;
  } cases[] = {
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, 0, NULL},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 1ull << 40,
       SC_ETOOBIG, "exceeds the limit"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 4000, SC_EINVAL,
       "runs past the end"},
      {"[1,2]", 0, 0, SC_EINVAL, "must be a JSON object"},
      {"{\"a\":", 0, 0, SC_EINVAL, "header JSON invalid"},
      {"{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, 0, SC_ENOTSUP,
       "dtype F16"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, 0, SC_EINVAL,
       "needs 12 bytes"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, 0, SC_EINVAL,
       "outside the data section"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
       12, 0, SC_EINVAL, "overlap"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
       16, 0, SC_EINVAL, "header JSON invalid"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, 0, SC_EINVAL,
       "shape[0]"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, 0,
       SC_EINVAL, "unknown field"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, 0, SC_EINVAL, "needs \"dtype\""},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, 0, SC_EINVAL,
       "outside the data section"},
      {"{\"__metadata__\":{\"k\":3}}", 0, 0, SC_EINVAL, "__metadata__"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const size_t n = image(buf, cases[i].hdr, cases[i].data, cases[i].claimed);
    sc_st_file f;
    sc_diag d = {0};
    const int rc = sc_st_parse(buf, n, &f, &d);
    cr_assert_eq(rc, cases[i].code, "case %zu: rc %d (%s)", i, rc, d.msg);
    if (rc == 0) {
      cr_assert_eq(f.num, 1);
      sc_st_close(&f);
    } else {
      cr_assert(strstr(d.msg, cases[i].needle), "case %zu: \"%s\" lacks \"%s\"", i, d.msg,
                cases[i].needle);
    }
  }
  sc_st_file f;
  sc_diag d = {0};
  cr_assert_eq(sc_st_parse(buf, 5, &f, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "shorter than the 8-byte"));
  cr_assert_eq(sc_st_open("/nonexistent.safetensors", &f, &d), SC_ENOENT);
}

/* The weight loader checks names and shapes against the model configuration. */
Test(safetensors, loader_rejects_wrong_model) {
  sc_kernels *k;
  cr_assert_eq(sc_kernels_cpu_create(&k, 1), 0);
  sc_model_config m = tiny();
  const char *path = tmp_path("wrong");
  sc_diag d = {0};
  cr_assert_eq(sc_model_write_synthetic(&m, SC_DT_F32, path, &d), 0);
  sc_model_weights w;
  sc_model_config other = m;
  other.layers = 3; /* layer 2 is missing from the file */
  cr_assert_eq(sc_model_weights_load(k, &other, 1, 0, path, &w, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "\"layers.2.attn_norm.weight\" is missing"), "%s", d.msg);
  other = m;
  other.layers = 1; /* layer 1 is a stranger */
  cr_assert_eq(sc_model_weights_load(k, &other, 1, 0, path, &w, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "layers.1."), "%s", d.msg);
  other = m;
  other.hidden = 32;
  cr_assert_eq(sc_model_weights_load(k, &other, 1, 0, path, &w, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "has shape [64, 16]; the model config needs [64, 32]"), "%s", d.msg);
  unlink(path);
  sc_kernels_destroy(k);
}

/* ---- KV slots ---- */

Test(kv_cache, slots_are_unique_and_inside_the_rank_blocks) {
  const int32_t B = 4;
  const int32_t bt[] = {5, 2, 7, 0};
  for (int32_t N = 1; N <= 4; N++)
    for (int32_t I = 1; I <= 4; I *= 2) {
      const int32_t L = 4 * B * N;
      static int8_t used[4][64];
      memset(used, 0, sizeof used);
      for (int32_t p = 0; p < L; p++) {
        int owners = 0;
        for (int32_t r = 0; r < N; r++) {
          const int64_t s = sc_kv_slot(bt, 4, p, B, N, I, r);
          if (s < 0) continue;
          owners++;
          const int64_t blk = s / B;
          cr_assert(blk == 5 || blk == 2 || blk == 7 || blk == 0);
          cr_assert_eq(blk, bt[p / (B * N)], "p %d: block %lld", p, (long long)blk);
          cr_assert_eq(used[r][s], 0, "slot %lld of rank %d used twice", (long long)s, r);
          used[r][s] = 1;
          cr_assert_eq(s, sc_kv_slot_local(bt, 4, sc_dcp_local_index(p, N, I), B));
        }
        cr_assert_eq(owners, 1, "position %d has %d owners", p, owners);
      }
    }
  const int32_t missing[] = {3, -1};
  cr_assert_eq(sc_kv_slot(missing, 2, 9, 4, 1, 1, 0), -1);
  cr_assert_eq(sc_kv_blocks_needed(17, 4, 2), 3);
}

/* ---- sampling ---- */

/* The rules of sampling.h one element at a time: the first index of the largest non-NaN
 * logit (0 when none is), the top two values with repeats counted. */
static void top2_reference(const float *l, int32_t n, int32_t *best, float *margin) {
  int32_t bi = 0;
  for (int32_t i = 1; i < n; i++)
    if (l[i] > l[bi] || (isnan(l[bi]) && !isnan(l[i]))) bi = i;
  float a = -INFINITY, b = -INFINITY;
  for (int32_t i = 0; i < n; i++) {
    if (l[i] > a) {
      b = a;
      a = l[i];
    } else if (l[i] > b) {
      b = l[i];
    }
  }
  *best = bi;
  const float m = a - b; /* a zero margin is +0 (sampling.h) */
  *margin = n < 2 || m == 0.0f ? 0.0f : m;
}

/* The one-pass lane version, and the CPU kernels' argmax_rows, agree with the reference
 * bit for bit: random lengths around the lane blocks and the model's vocabulary, values
 * from a few levels (ties across and within lanes), +0 and -0 mixed, NaN and +-inf
 * sprinkled in, all-NaN and all--inf arrays. */
Test(sampling, the_lane_top2_is_the_reference) {
  sc_kernels *k = NULL;
  cr_assert_eq(sc_kernels_cpu_create(&k, 1), 0);
  uint64_t x = 12345;
  static float l[32768 + 40];
  for (int round = 0; round < 3000; round++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int32_t n = round < 2000 ? (int32_t)(x >> 33) % 70 : 32768 + (int32_t)(x >> 33) % 40;
    const int levels = 1 + (int)((x >> 20) % 6), special = (int)((x >> 40) % 4);
    for (int32_t i = 0; i < n; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const uint32_t r = (uint32_t)(x >> 32);
      l[i] = (float)(r % (uint32_t)levels) - 2.5f;
      if (levels == 6 && r % 3 == 0) l[i] = (r >> 8) % 2 ? 0.0f : -0.0f; /* equal zeros */
      if (special == 1 && r % 7 == 0) l[i] = NAN;
      if (special == 2 && r % 5 == 0) l[i] = -INFINITY;
      if (special == 2 && r % 13 == 0) l[i] = INFINITY; /* (two of them: a NaN margin) */
      if (special == 3) l[i] = r % 2 ? NAN : -INFINITY; /* nothing above -inf */
    }
    int32_t b0, b1;
    float m0, m1;
    top2_reference(l, n, &b0, &m0);
    sc_logits_top2(l, n, &b1, &m1);
    cr_assert_eq(b1, b0, "round %d, n %d: best %d, the reference %d", round, n, b1, b0);
    cr_assert(memcmp(&m0, &m1, sizeof m0) == 0 || (isnan(m0) && isnan(m1)),
              "round %d, n %d: margin %g, the reference %g", round, n, (double)m1, (double)m0);
    cr_assert_eq(sc_sample_greedy(l, n), b0);
    /* the CPU kernels' argmax_rows, which the overlapped executor takes a greedy entry's
     * token and margin from (test_gpu_kernels holds the CUDA one to the same) */
    int32_t b2 = -1;
    float m2 = -1.0f;
    if (n > 0) {
      cr_assert_eq(k->ops->argmax_rows(k, 1, n, l, n, &b2, &m2), 0);
      cr_assert_eq(b2, b0, "round %d, n %d: argmax_rows %d, the reference %d", round, n, b2, b0);
      cr_assert(memcmp(&m0, &m2, sizeof m0) == 0 || (isnan(m0) && isnan(m2)),
                "round %d, n %d: argmax_rows' margin %g, the reference %g", round, n,
                (double)m2, (double)m0);
    }
  }
  k->ops->destroy(k);
}

/* The draw in lanes (float weights from a polynomial, block sums) lands on the token of
 * the reference's (double, libm) but for a draw within rounding of a boundary: random
 * lengths around the blocks, DeepSeek-V3.2's vocabulary and 300000, temperatures from 0.05
 * to 4, NaN and -inf never drawn, rows without a number or with an infinity giving the
 * greedy token, and the same draw every time. */
Test(sampling, the_lanes_draw_is_the_reference_draw) {
  static float l[300000];
  uint64_t x = 99;
  const float temps[] = {0.05f, 0.3f, 0.7f, 1.0f, 2.0f, 4.0f};
  int draws = 0, differ = 0;
  for (int round = 0; round < 244; round++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    /* (the last rounds' rows pass 1024 blocks: their block sums are computed again) */
    const int32_t n = round < 200   ? 1 + (int32_t)(x >> 33) % 700
                      : round < 240 ? 129280 - (int32_t)(x >> 33) % 300
                                    : 300000 - (int32_t)(x >> 33) % 300;
    const int special = (int)((x >> 40) % 4);
    for (int32_t i = 0; i < n; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const uint32_t r = (uint32_t)(x >> 32);
      l[i] = (float)(r % 100000u) * 2e-4f - 10.0f;
      if (special == 1 && r % 7 == 0) l[i] = NAN;
      if (special == 2 && r % 5 == 0) l[i] = -INFINITY;
    }
    const float t = temps[round % 6];
    for (int d = 0; d < (n > 200000 ? 100 : n > 1000 ? 20 : 50); d++) {
      const int32_t a = sc_sample_temperature(l, n, t, (uint64_t)round, d);
      const int32_t b = sc_sample_temperature_ref(l, n, t, (uint64_t)round, d);
      cr_assert(a >= 0 && a < n && !isnan(l[a]) && l[a] != -INFINITY,
                "round %d, n %d: drew %d (%g)", round, n, a, (double)(a >= 0 && a < n ? l[a] : 0));
      cr_assert_eq(a, sc_sample_temperature(l, n, t, (uint64_t)round, d));
      cr_assert_eq(a,
                   sc_sample_temperature_at(l, n, t, (uint64_t)round, d, sc_sample_greedy(l, n)));
      draws++;
      differ += a != b;
    }
  }
  cr_assert(differ * 1000 <= draws, "%d of %d draws differ from the reference", differ, draws);
  /* no number, or an infinity: the greedy token (as the reference) */
  const float nan3[] = {NAN, NAN, NAN}, ninf3[] = {-INFINITY, -INFINITY, -INFINITY},
              inf3[] = {1.0f, INFINITY, 2.0f};
  cr_assert_eq(sc_sample_temperature(nan3, 3, 1.0f, 5, 0),
               sc_sample_temperature_ref(nan3, 3, 1.0f, 5, 0));
  cr_assert_eq(sc_sample_temperature(ninf3, 3, 1.0f, 5, 0),
               sc_sample_temperature_ref(ninf3, 3, 1.0f, 5, 0));
  cr_assert_eq(sc_sample_temperature(inf3, 3, 1.0f, 5, 0), 1);
  cr_assert_eq(sc_sample_temperature_ref(inf3, 3, 1.0f, 5, 0), 1);
}

/* The kernels' draw_rows (the CPU backend's) draws sc_sample_temperature's token, rows
 * at temperature 0 keeping their greedy token; a token out of the row is refused. */
Test(sampling, the_kernels_draw_the_hosts_token) {
  sc_kernels *k = NULL;
  cr_assert_eq(sc_kernels_cpu_create(&k, 1), 0);
  enum { ROWS = 6, W = 1000, LD = 1003 };
  static float x[ROWS * LD];
  uint64_t h = 7;
  for (int i = 0; i < ROWS * LD; i++) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((h >> 40) % 1000u) * 0.01f - 5.0f;
  }
  x[2 * LD + 5] = NAN, x[3 * LD + 9] = -INFINITY;
  const float temp[ROWS] = {0.5f, 1.0f, 0.0f, 2.0f, 0.9f, 1.3f};
  const uint64_t seed[ROWS] = {1, 2, 3, 4, 5, 6};
  const int32_t index[ROWS] = {0, 7, 3, 11, 2, 5};
  int32_t tok[ROWS];
  cr_assert_eq(k->ops->argmax_rows(k, ROWS, W, x, LD, tok, NULL), 0);
  cr_assert_eq(k->ops->draw_rows(k, ROWS, W, x, LD, temp, seed, index, tok), 0);
  for (int r = 0; r < ROWS; r++)
    cr_assert_eq(tok[r], sc_sample_temperature(x + r * LD, W, temp[r], seed[r], index[r]),
                 "row %d", r);
  int32_t bad[ROWS] = {0, 0, 0, 0, 0, W};
  cr_assert_eq(k->ops->draw_rows(k, ROWS, W, x, LD, temp, seed, index, bad), SC_ERANGE);
  k->ops->destroy(k);
}

Test(sampling, greedy_temperature_margin) {
  const float l[] = {1.0f, 3.0f, NAN, 3.0f, -2.0f};
  cr_assert_eq(sc_sample_greedy(l, 5), 1);
  cr_assert_float_eq(sc_logits_top2_margin(l, 5), 0.0f, 0.0f);
  const float l2[] = {0.5f, 2.0f, 1.0f};
  cr_assert_float_eq(sc_logits_top2_margin(l2, 3), 1.0f, 1e-7f);
  cr_assert_eq(sc_sample_temperature(l2, 3, 0.0f, 1, 0), 1);
  /* deterministic per (seed, index); frequencies follow softmax(l / t) */
  int counts[3] = {0};
  for (int i = 0; i < 20000; i++) {
    const int32_t a = sc_sample_temperature(l2, 3, 1.0f, 42, i);
    cr_assert_eq(a, sc_sample_temperature(l2, 3, 1.0f, 42, i));
    counts[a]++;
  }
  const double z = exp(0.5) + exp(2.0) + exp(1.0);
  cr_assert(fabs(counts[1] / 20000.0 - exp(2.0) / z) < 0.02, "%d", counts[1]);
  cr_assert(fabs(counts[0] / 20000.0 - exp(0.5) / z) < 0.02, "%d", counts[0]);
}

/* ---- the forward pass refuses a desynchronised collective ---- */

typedef struct desync_rank {
  sc_mem_world *w;
  const sc_plan *plan, *meta_plan;
  const sc_plan_config *pc;
  const sc_model_config *m;
  int32_t g;
  int rc;
  sc_diag d;
  bool profile; /* queue the step with its stage marks, read them after */
  int prof_rc;
  uint64_t ns[SC_STAGE_COUNT], span;
  float *logits;   /* sc_forward_out's, when asked for */
  bool greedy_on;  /* ask for the greedy tokens too, into greedy[] */
  int32_t greedy[8];
} desync_rank;

/* What a rank of these tests holds: kernels, comm, weights, cache, forward, metadata. */
typedef struct rank_env {
  sc_kernels *k;
  sc_comm comm;
  sc_model_weights wt;
  sc_kv_cache cache;
  sc_forward *f;
  sc_meta meta;
} rank_env;

static const int32_t k_bt[2 * 4] = {0, 1, 2, 3, 4, 5, 6, 7};
static const int32_t k_tokens[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void env_open(const desync_rank *r, rank_env *e) {
  sc_kernels_cpu_create(&e->k, 1);
  sc_mem_comm_create(&e->comm, r->w, r->g, 10000);
  sc_model_weights_synthetic(e->k, r->m, r->pc->tp, e->comm.group_rank[SC_GROUP_TP], &e->wt,
                             NULL);
  sc_kv_cache_create(e->k, r->m->layers, 16, r->pc->block_size,
                     sc_model_kv_width(r->m) + r->m->index_dim, r->m->index_dim, SC_KFMT_F32,
                     SC_KFMT_F32, &e->cache, NULL);
  sc_forward_create(e->k, &e->wt, &e->cache, &e->comm, r->pc, &e->f, NULL);
  const sc_meta_blocks mb = {.table = k_bt, .max_blocks = 4, .num_blocks = 16};
  cr_assert_eq(sc_meta_build(r->meta_plan, r->g, &mb, &e->meta, NULL), 0);
}

static void env_close(rank_env *e) {
  sc_meta_free(&e->meta);
  sc_forward_destroy(e->f);
  sc_kv_cache_free(e->k, &e->cache);
  sc_model_weights_free(e->k, &e->wt);
  sc_kernels_destroy(e->k);
}

static sc_forward_in step_in(const desync_rank *r, const rank_env *e, uint64_t step) {
  return (sc_forward_in){.step = step, .plan = r->plan, .meta = &e->meta, .tokens = k_tokens,
                         .block_table = k_bt, .max_blocks = 4, .profile = r->profile};
}

static void *desync_main(void *arg) {
  desync_rank *r = arg;
  rank_env e;
  env_open(r, &e);
  const sc_forward_in in = step_in(r, &e, 3);
  sc_forward_out out = {.logits = r->logits, .greedy = r->greedy_on ? r->greedy : NULL};
  r->rc = sc_forward_step(e.f, &in, r->logits || r->greedy_on ? &out : NULL, &r->d);
  if (r->rc) sc_mem_world_abort(r->w);
  if (r->rc == 0) r->rc = sc_forward_finish(e.f, &r->d);
  r->prof_rc = sc_forward_profile(e.f, r->ns, &r->span);
  env_close(&e);
  return NULL;
}

/* The layout of the two-rank steps below: the tiny model split over TP 2. */
static sc_plan_config tp2_layout(const sc_model_config *m) {
  sc_plan_config pc;
  sc_model_plan_config_default(&pc);
  sc_model_config_to_plan(m, &pc);
  pc.tp = 2;
  pc.block_size = 4;
  return pc;
}

static const sc_batch_req two_prefills[2] = {
    {.id = 0, .computed = 0, .scheduled = 5, .prefill = true},
    {.id = 1, .computed = 0, .scheduled = 3, .prefill = true}};

static void run_two_ranks(desync_rank r[2]) {
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, desync_main, &r[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
}

/* One step of two_prefills on the tiny model's two TP ranks: its plan, world and the
 * ranks' defaults, which a test changes before run_two_ranks(t.r). Not moved once
 * initialised: the ranks point into it. */
typedef struct two_rank_step {
  sc_model_config m;
  sc_plan_config pc;
  sc_plan plan;
  sc_mem_world *w;
  desync_rank r[2];
} two_rank_step;

static void two_rank_step_init(two_rank_step *t) {
  t->m = tiny();
  t->pc = tp2_layout(&t->m);
  sc_plan_init(&t->plan);
  cr_assert_eq(sc_plan_build(&t->plan, &t->pc, two_prefills, 2, NULL), 0);
  cr_assert_eq(sc_mem_world_create(&t->pc, &t->w), 0);
  for (int i = 0; i < 2; i++)
    t->r[i] = (desync_rank){.w = t->w, .plan = &t->plan, .meta_plan = &t->plan, .pc = &t->pc,
                            .m = &t->m, .g = i};
}

static void two_rank_step_free(two_rank_step *t) {
  sc_mem_world_destroy(t->w);
  sc_plan_free(&t->plan);
}

Test(forward, rank_with_wrong_local_view_is_refused_not_hung) {
  const sc_model_config m = tiny();
  sc_plan_config pc = tp2_layout(&m);
  const sc_batch_req *a = two_prefills;
  const sc_batch_req b[2] = {{.id = 0, .computed = 0, .scheduled = 5, .prefill = true},
                             {.id = 1, .computed = 0, .scheduled = 4, .prefill = true}};
  sc_plan pa, pb;
  sc_plan_init(&pa);
  sc_plan_init(&pb);
  cr_assert_eq(sc_plan_build(&pa, &pc, a, 2, NULL), 0);
  cr_assert_eq(sc_plan_build(&pb, &pc, b, 2, NULL), 0);
  sc_mem_world *w;
  cr_assert_eq(sc_mem_world_create(&pc, &w), 0);
  /* rank 1 derived its local inputs from another batch than the plan it was sent */
  desync_rank r[2] = {{.w = w, .plan = &pa, .meta_plan = &pa, .pc = &pc, .m = &m, .g = 0},
                      {.w = w, .plan = &pa, .meta_plan = &pb, .pc = &pc, .m = &m, .g = 1}};
  run_two_ranks(r);
  cr_assert_eq(r[1].rc, SC_EDESYNC, "rank 1: %s", r[1].d.msg);
  cr_assert(strstr(r[1].d.msg, "desync on rank 1, step 3, seq 0"), "%s", r[1].d.msg);
  cr_assert(strstr(r[1].d.msg, "rows=8") && strstr(r[1].d.msg, "rows=9"), "%s", r[1].d.msg);
  cr_assert_eq(r[0].rc, SC_EABORTED, "rank 0: %s", r[0].d.msg);
  sc_mem_world_destroy(w);
  sc_plan_free(&pa);
  sc_plan_free(&pb);
}

/* Overlapped steps on several ranks (docs/pipeline.md): every rank computes the greedy
 * tokens of the step's logits rows, rank 0 with its logits, the others without, and
 * they all agree with the host's choice over rank 0's logits. */
Test(forward, every_rank_computes_the_greedy_tokens_rank_0_takes_from_its_logits) {
  two_rank_step t;
  two_rank_step_init(&t);
  float *logits = calloc(2 * (size_t)t.m.vocab, sizeof *logits);
  for (int i = 0; i < 2; i++) {
    t.r[i].logits = i == 0 ? logits : NULL;
    t.r[i].greedy_on = true;
    for (int j = 0; j < 8; j++) t.r[i].greedy[j] = -1;
  }
  run_two_ranks(t.r);
  for (int i = 0; i < 2; i++) cr_assert_eq(t.r[i].rc, 0, "rank %d: %s", i, t.r[i].d.msg);
  for (int row = 0; row < 2; row++) { /* both requests have a logits row, in order */
    int32_t tok;
    float margin;
    sc_logits_top2(logits + (size_t)row * t.m.vocab, t.m.vocab, &tok, &margin);
    for (int i = 0; i < 2; i++)
      cr_assert_eq(t.r[i].greedy[row], tok, "row %d: rank %d %d, the host %d", row, i,
                   t.r[i].greedy[row], tok);
  }
  free(logits);
  two_rank_step_free(&t);
}

/* The memory backend made to look stream-ordered: finish is told each step, in the
 * order the forward finishes them, and fails one chosen step's collective. */
typedef struct ordered_comm {
  const sc_coll_ops *inner_ops;
  void *inner;
  uint64_t finished[4];
  int n_finished;
  uint64_t fail_step;
  int32_t fail_call;
} ordered_comm;

static int oc_run(void *self, int32_t seq, sc_coll_op op, sc_group g, sc_dtype dt,
                  const void *send, void *recv, size_t count, sc_diag *d) {
  ordered_comm *o = self;
  return o->inner_ops->run(o->inner, seq, op, g, dt, send, recv, count, d);
}

static int oc_finish(void *self, uint64_t epoch, double *seconds, int32_t n, int32_t *failed) {
  ordered_comm *o = self;
  if (o->n_finished < 4) o->finished[o->n_finished++] = epoch;
  for (int32_t i = 0; i < n; i++) seconds[i] = 0.0;
  if (epoch != o->fail_step) return 0;
  *failed = o->fail_call;
  return SC_ETIMEDOUT;
}

static const sc_coll_ops k_ordered = {.run = oc_run, .finish = oc_finish, .overlaps = true};

typedef struct overlap_rank {
  desync_rank r;
  ordered_comm oc;
  int rc3, fin[3];
  sc_diag d3, dfin[3];
} overlap_rank;

static void *overlap_main(void *arg) {
  overlap_rank *o = arg;
  rank_env e;
  env_open(&o->r, &e);
  o->oc.inner_ops = e.comm.ops, o->oc.inner = e.comm.self;
  e.comm.ops = &k_ordered, e.comm.self = &o->oc;
  const sc_forward_in a = step_in(&o->r, &e, 3), b = step_in(&o->r, &e, 4),
                      c = step_in(&o->r, &e, 5);
  o->r.rc = sc_forward_step(e.f, &a, NULL, &o->r.d);
  if (o->r.rc == 0) o->r.rc = sc_forward_step(e.f, &b, NULL, &o->r.d);
  o->rc3 = sc_forward_step(e.f, &c, NULL, &o->d3); /* two unfinished: refused */
  for (int i = 0; i < 3; i++) o->fin[i] = sc_forward_finish(e.f, &o->dfin[i]);
  e.comm.ops = o->oc.inner_ops, e.comm.self = o->oc.inner;
  env_close(&e);
  return NULL;
}

/* Overlapped steps on a stream-ordered backend (the IPC backend's): two steps queued
 * before either is finished keep a collective session each, finished in queue order
 * with their own step; a third is refused; a failure on the device is named with the
 * step and plan position it belongs to. */
Test(forward, two_queued_steps_are_finished_in_order_each_with_its_session) {
  two_rank_step t;
  two_rank_step_init(&t);
  overlap_rank o[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    o[i] = (overlap_rank){.r = t.r[i], .oc = {.fail_step = 4, .fail_call = 1}};
    pthread_create(&th[i], NULL, overlap_main, &o[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(o[i].r.rc, 0, "rank %d: %s", i, o[i].r.d.msg);
    cr_assert_eq(o[i].rc3, SC_EINVAL, "rank %d: a third step was queued", i);
    cr_assert(strstr(o[i].d3.msg, "2 steps unfinished"), "%s", o[i].d3.msg);
    cr_assert_eq(o[i].fin[0], 0, "rank %d: step 3: %s", i, o[i].dfin[0].msg);
    cr_assert_eq(o[i].fin[1], SC_ETIMEDOUT, "rank %d: step 4 finished with %d", i, o[i].fin[1]);
    cr_assert(strstr(o[i].dfin[1].msg, "step 4, seq 1"), "%s", o[i].dfin[1].msg);
    cr_assert_eq(o[i].fin[2], 0, "rank %d: nothing left to finish", i);
    cr_assert_eq(o[i].oc.n_finished, 2);
    cr_assert(o[i].oc.finished[0] == 3 && o[i].oc.finished[1] == 4);
  }
  two_rank_step_free(&t);
}

static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

typedef struct gap_rank {
  desync_rank r;
  int rc[3], fin_rc[3], gap_rc[3];
  int64_t gap_ns[3];
} gap_rank;

/* Steps a and b queued 200 ms apart, then a finished, c queued at once, b and c
 * finished: the gap read after each finish. */
static void *gap_main(void *arg) {
  gap_rank *g = arg;
  rank_env e;
  env_open(&g->r, &e);
  const sc_forward_in in[3] = {step_in(&g->r, &e, 3), step_in(&g->r, &e, 4),
                               step_in(&g->r, &e, 5)};
  g->rc[0] = sc_forward_step(e.f, &in[0], NULL, &g->r.d);
  sleep_ms(200);
  g->rc[1] = sc_forward_step(e.f, &in[1], NULL, &g->r.d);
  for (int i = 0; i < 3; i++) {
    if (i == 1) g->rc[2] = sc_forward_step(e.f, &in[2], NULL, &g->r.d);
    g->fin_rc[i] = sc_forward_finish(e.f, &g->r.d);
    g->gap_rc[i] = sc_forward_gap(e.f, &g->gap_ns[i]);
  }
  env_close(&e);
  return NULL;
}

/* sc_forward_gap: the time from the step before's end to a step's beginning, each step's
 * own stamps also while the next is queued (here c's are written before b is read: a
 * read of a's end would give 200 ms or more). */
Test(forward, the_gap_is_from_the_step_before_to_this_one) {
  two_rank_step t;
  two_rank_step_init(&t);
  gap_rank g[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    g[i] = (gap_rank){.r = t.r[i]};
    pthread_create(&th[i], NULL, gap_main, &g[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) {
    for (int s = 0; s < 3; s++) {
      cr_assert_eq(g[i].rc[s], 0, "rank %d, step %d: %s", i, s, g[i].r.d.msg);
      cr_assert_eq(g[i].fin_rc[s], 0, "rank %d, step %d: %s", i, s, g[i].r.d.msg);
    }
    cr_assert_eq(g[i].gap_rc[0], SC_ENOENT, "rank %d: the first step has no step before", i);
    cr_assert_eq(g[i].gap_rc[1], 0);
    cr_assert_eq(g[i].gap_rc[2], 0);
    cr_assert_geq(g[i].gap_ns[1], 200000000, "rank %d: a to b %lld ns", i,
                  (long long)g[i].gap_ns[1]);
    cr_assert(g[i].gap_ns[2] >= 0 && g[i].gap_ns[2] < 200000000, "rank %d: b to c %lld ns", i,
              (long long)g[i].gap_ns[2]);
  }
  two_rank_step_free(&t);
}

/* ---- where a step's time goes (model/step_prof.h) ---- */

Test(step_prof, stretches_are_summed_by_stage) {
  sc_kernels *k;
  cr_assert_eq(sc_kernels_cpu_create(&k, 1), 0);
  sc_step_prof *p = calloc(1, sizeof *p);
  sc_step_prof_begin(p, k);
  sc_step_prof_enter(p, SC_STAGE_DENSE);
  sleep_ms(30);
  sc_step_prof_enter(p, SC_STAGE_DENSE); /* already there: no mark */
  sleep_ms(10);
  sc_step_prof_enter(p, SC_STAGE_COLL);
  sleep_ms(20);
  sc_step_prof_enter(p, SC_STAGE_DENSE);
  sleep_ms(5);
  sc_step_prof_end(p);
  cr_assert_eq(p->n, 5, "begin, dense, coll, dense, end: %d marks", p->n);
  cr_assert_eq(p->unmarked, 0);
  uint64_t ns[SC_STAGE_COUNT], span;
  cr_assert_eq(sc_step_prof_read(p, ns, &span), 0);
  uint64_t sum = 0;
  for (int i = 0; i < SC_STAGE_COUNT; i++) sum += ns[i];
  cr_assert_eq(sum, span, "the stages add up to the span");
  /* lower bounds only (a loaded machine oversleeps, by any amount): with the sum equal to
   * the span, a stretch counted in the wrong stage or twice still fails one of them */
  cr_assert(ns[SC_STAGE_DENSE] >= 45000000, "dense %llu", (unsigned long long)ns[SC_STAGE_DENSE]);
  cr_assert(ns[SC_STAGE_COLL] >= 20000000, "coll %llu", (unsigned long long)ns[SC_STAGE_COLL]);
  cr_assert(ns[SC_STAGE_INPUT] < 5000000 && ns[SC_STAGE_ATTENTION] == 0);
  cr_assert_str_eq(sc_stage_name(SC_STAGE_COLL), "collectives");
  /* more stage changes than marks: the last stretch takes the rest, the total holds */
  sc_step_prof_begin(p, k);
  for (int i = 0; i < 3 * SC_KMARK_MAX; i++)
    sc_step_prof_enter(p, i % 2 ? SC_STAGE_INDEXER : SC_STAGE_ATTENTION);
  sleep_ms(10);
  sc_step_prof_end(p);
  cr_assert_eq(p->n, SC_KMARK_MAX);
  /* ... and says so: the changes past mark SC_KMARK_MAX - 2 are counted (and logged once) */
  cr_assert_eq(p->unmarked, 3 * SC_KMARK_MAX - (SC_KMARK_MAX - 2), "%d", (int)p->unmarked);
  cr_assert(p->warned);
  cr_assert_eq(sc_step_prof_read(p, ns, &span), 0);
  sum = 0;
  for (int i = 0; i < SC_STAGE_COUNT; i++) sum += ns[i];
  cr_assert_eq(sum, span);
  cr_assert(span >= 10000000);
  /* the next step starts with none unmarked */
  sc_step_prof_begin(p, k);
  sc_step_prof_end(p);
  cr_assert_eq(p->unmarked, 0);
  /* off: nothing recorded, nothing to read */
  sc_step_prof_begin(p, NULL);
  sc_step_prof_enter(p, SC_STAGE_DENSE);
  sc_step_prof_end(p);
  cr_assert_eq(sc_step_prof_read(p, ns, &span), SC_ENOTSUP);
  cr_assert_eq(span, 0);
  free(p);
  sc_kernels_destroy(k);
}

/* A profiled step of two TP ranks: every stage the tiny model runs takes time, the
 * TP all-reduces show as collectives, and the stages add up to the step's span. */
Test(step_prof, a_profiled_forward_step_has_every_stage) {
  two_rank_step t;
  two_rank_step_init(&t);
  desync_rank *r = t.r;
  r[0].profile = true;
  run_two_ranks(r);
  for (int i = 0; i < 2; i++) cr_assert_eq(r[i].rc, 0, "rank %d: %s", i, r[i].d.msg);
  cr_assert_eq(r[0].prof_rc, 0);
  uint64_t sum = 0;
  for (int i = 0; i < SC_STAGE_COUNT; i++) {
    sum += r[0].ns[i];
    if (i != SC_STAGE_HEAD) /* (no logits asked for: the head stretch may be empty) */
      cr_assert(r[0].ns[i] > 0, "stage %s took no time", sc_stage_name(i));
  }
  cr_assert_eq(sum, r[0].span);
  cr_assert_eq(r[1].prof_rc, SC_ENOTSUP, "rank 1 was not profiled");
  two_rank_step_free(&t);
}
