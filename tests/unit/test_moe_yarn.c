/* test_moe_yarn.c - the DeepSeek-V3.2 architecture pieces of issue 23, point 2, as pure
 * functions (the forward pass uses them; test_hf_forward.c checks the whole): YaRN rotary
 * frequencies, scale corrections and the two rotary layouts (model/yarn.h), noaux_tc
 * sigmoid routing and the MoE combine (model/moe_route.h).
 *
 * tests/data/moe_yarn/reference.json is made by make_reference.py there, which follows
 * transformers' _compute_yarn_parameters, DeepseekV32RotaryEmbedding, the two
 * apply_rotary_pos_emb forms and DeepseekV32TopkRouter line by line in float64. Tolerances:
 * frequencies and scales 1e-12 relative (both sides compute in double), rotations 2e-6 of
 * the vector's largest value (the C side rounds to f32 once), expert sets exact, routing
 * weights and the combine 1e-6 relative (f32 scores and outputs). The rest are cases
 * checked by hand: factor 1 is plain RoPE, the beta range boundaries, n_group 1 is plain
 * top-k, ties, normalization on and off, a bias that changes the pick but not the weights,
 * and the refusals. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "model/hf_config.h"
#include "model/moe_route.h"
#include "model/yarn.h"

static json_t *reference(void) {
  json_error_t err;
  json_t *r = json_load_file(SC_MOE_YARN_DATA "/reference.json", 0, &err);
  cr_assert_not_null(r, "reference.json: %s (line %d)", err.text, err.line);
  return r;
}

/* The reference's list under key, with at least at_least cases. */
static const json_t *cases_of(const json_t *r, const char *key, size_t at_least) {
  const json_t *a = json_object_get(r, key);
  cr_assert_geq(json_array_size(a), at_least, "reference.json: %s", key);
  return a;
}

static double num(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  cr_assert(json_is_number(v), "reference key %s", key);
  return json_number_value(v);
}

static void floats(const json_t *arr, float *out, size_t n) {
  cr_assert_eq(json_array_size(arr), n);
  for (size_t i = 0; i < n; i++) out[i] = (float)json_number_value(json_array_get(arr, i));
}

static bool near(double got, double want, double tol) {
  return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

static bool rel(double got, double want, double tol) {
  return fabs(got - want) <= tol * fabs(want);
}

/* ---- YaRN ---- */

static sc_hf_rope_scaling yarn(double factor, int32_t orig, double bf, double bs, double m,
                               double mad) {
  return (sc_hf_rope_scaling){.type = SC_HF_ROPE_YARN, .factor = factor,
                              .original_max_position_embeddings = orig, .beta_fast = bf,
                              .beta_slow = bs, .mscale = m, .mscale_all_dim = mad};
}

static const sc_hf_rope_scaling k_plain = {.type = SC_HF_ROPE_DEFAULT};

Test(yarn, transformers_reference) {
  json_t *r = reference();
  size_t i;
  const json_t *c;
  json_array_foreach(cases_of(r, "yarn", 10), i, c) {
    const char *name = json_string_value(json_object_get(c, "name"));
    const json_t *rp = json_object_get(c, "rope");
    const int32_t d = (int32_t)num(c, "rot_dim");
    const double theta = num(rp, "rope_theta");
    const bool is_yarn = !strcmp(json_string_value(json_object_get(rp, "rope_type")), "yarn");
    const sc_hf_rope_scaling rs =
        is_yarn ? yarn(num(rp, "factor"), (int32_t)num(rp, "original_max_position_embeddings"),
                       num(rp, "beta_fast"), num(rp, "beta_slow"), num(rp, "mscale"),
                       num(rp, "mscale_all_dim"))
                : k_plain;
    double inv[64];
    cr_assert_leq(d, 128);
    cr_assert_eq(sc_rope_inv_freq(&rs, theta, d, inv, NULL), 0, "%s", name);
    if (is_yarn) {
      int32_t lo, hi;
      sc_yarn_correction_range(&rs, d, theta, &lo, &hi);
      cr_expect_eq(lo, (int32_t)num(c, "low"), "%s: low %d", name, lo);
      cr_expect_eq(hi, (int32_t)num(c, "high"), "%s: high %d", name, hi);
    }
    const json_t *want = json_object_get(c, "inv_freq");
    cr_assert_eq(json_array_size(want), (size_t)d / 2);
    for (int32_t j = 0; j < d / 2; j++)
      cr_expect(rel(inv[j], json_number_value(json_array_get(want, (size_t)j)), 1e-12),
                "%s: inv_freq[%d] = %.17g", name, j, inv[j]);
    const double af = sc_rope_attention_factor(&rs);
    cr_expect(rel(af, num(c, "attention_factor"), 1e-12), "%s: attention factor %.17g", name, af);
    const double ss = sc_rope_softmax_scale(&rs, (int32_t)num(c, "qk_head_dim"));
    cr_expect(rel(ss, num(c, "softmax_scale"), 1e-12), "%s: softmax scale %.17g", name, ss);

    float x[128];
    floats(json_object_get(c, "x"), x, (size_t)d);
    double xmax = 0;
    for (int32_t j = 0; j < d; j++) xmax = fmax(xmax, fabs(x[j]));
    const double tol = 2e-6 * xmax * fmax(1.0, af);
    size_t p;
    const json_t *rot;
    json_array_foreach(json_object_get(c, "rotations"), p, rot) {
      const int64_t pos = (int64_t)num(rot, "pos");
      float h[128], il[128];
      memcpy(h, x, sizeof x[0] * (size_t)d);
      memcpy(il, x, sizeof x[0] * (size_t)d);
      sc_rope_rotate(SC_ROPE_HALVES, d, inv, af, pos, h);
      sc_rope_rotate(SC_ROPE_INTERLEAVED, d, inv, af, pos, il);
      const json_t *wh = json_object_get(rot, "halves"), *wi = json_object_get(rot, "interleave_hf");
      for (int32_t j = 0; j < d; j++) {
        const double hv = json_number_value(json_array_get(wh, (size_t)j));
        cr_expect(fabs(h[j] - hv) <= tol, "%s pos %lld: halves[%d] %.9g vs %.9g", name,
                  (long long)pos, j, h[j], hv);
      }
      /* transformers' interleave form returns [rotated evens ; rotated odds]; sparsecp keeps
       * the pairs in place: x[2i] is its element i, x[2i+1] its element i + d/2 */
      for (int32_t j = 0; j < d / 2; j++) {
        const double e = json_number_value(json_array_get(wi, (size_t)j));
        const double o = json_number_value(json_array_get(wi, (size_t)(j + d / 2)));
        cr_expect(fabs(il[2 * j] - e) <= tol && fabs(il[2 * j + 1] - o) <= tol,
                  "%s pos %lld: pair %d (%.9g, %.9g) vs (%.9g, %.9g)", name, (long long)pos, j,
                  il[2 * j], il[2 * j + 1], e, o);
      }
    }
  }
  json_decref(r);
}

Test(yarn, factor_one_is_plain_rope) {
  const sc_hf_rope_scaling one = yarn(1.0, 4096, 32, 1, 1, 1);
  double a[32], b[32];
  cr_assert_eq(sc_rope_inv_freq(&one, 10000.0, 64, a, NULL), 0);
  cr_assert_eq(sc_rope_inv_freq(&k_plain, 10000.0, 64, b, NULL), 0);
  for (int i = 0; i < 32; i++) {
    /* the kernel `rope`'s table: theta^(-2i/rot_dim) */
    const double kernel = pow(10000.0, -2.0 * i / 64.0);
    cr_expect(rel(a[i], kernel, 1e-15) && rel(b[i], kernel, 1e-15), "pair %d: %.17g %.17g", i,
              a[i], b[i]);
  }
  cr_expect_eq(sc_rope_attention_factor(&one), 1.0);
  cr_expect_eq(sc_rope_attention_factor(&k_plain), 1.0);
  cr_expect_eq(sc_rope_softmax_scale(&one, 192), 1.0 / sqrt(192.0));
  cr_expect_eq(sc_rope_softmax_scale(&k_plain, 192), 1.0 / sqrt(192.0));
}

/* DeepSeek-V3.2's own numbers: d 64, theta 1e4, factor 40, L 4096, beta 32 / 1.
 * cdim(32) = 64 ln(4096 / 64 pi) / (2 ln 1e4) = 10.472, cdim(1) = 22.513. */
Test(yarn, beta_range_boundaries) {
  const sc_hf_rope_scaling v32 = yarn(40.0, 4096, 32, 1, 1, 1);
  cr_expect(fabs(sc_yarn_correction_dim(32, 64, 1e4, 4096) - 10.47224) < 1e-5);
  cr_expect(fabs(sc_yarn_correction_dim(1, 64, 1e4, 4096) - 22.51344) < 1e-5);
  int32_t lo, hi;
  sc_yarn_correction_range(&v32, 64, 1e4, &lo, &hi);
  cr_assert_eq(lo, 10);
  cr_assert_eq(hi, 23);
  double inv[32];
  cr_assert_eq(sc_rope_inv_freq(&v32, 1e4, 64, inv, NULL), 0);
  for (int i = 0; i < 32; i++) {
    const double base = pow(1e4, -i / 32.0);
    if (i <= 10) cr_expect(rel(inv[i], base, 1e-15), "pair %d keeps its frequency", i);
    if (i >= 23) cr_expect(rel(inv[i], base / 40, 1e-15), "pair %d is interpolated", i);
    if (i > 10 && i < 23) {
      const double r = (i - 10) / 13.0;
      cr_expect(rel(inv[i], base / 40 * r + base * (1 - r), 1e-14), "pair %d blends", i);
      cr_expect(inv[i] < base && inv[i] > base / 40);
    }
  }
  cr_expect_eq(sc_yarn_ramp(10, 10, 23), 0.0);
  cr_expect_eq(sc_yarn_ramp(23, 10, 23), 1.0);
  cr_expect_eq(sc_yarn_ramp(0, 10, 23), 0.0);
  cr_expect_eq(sc_yarn_ramp(31, 10, 23), 1.0);
  /* low == high: the references widen by 0.001, a step at low */
  cr_expect_eq(sc_yarn_ramp(4, 4, 4), 0.0);
  cr_expect_eq(sc_yarn_ramp(5, 4, 4), 1.0);
  /* mscale: 0.1 ln 40 + 1 = 1.368888; softmax scale 192^-0.5 * 1.368888^2 */
  cr_expect(fabs(sc_yarn_get_mscale(40, 1) - 1.3688879454113936) < 1e-15);
  cr_expect(fabs(sc_rope_softmax_scale(&v32, 192) - 0.13523377886088) < 1e-13);
  cr_expect_eq(sc_rope_attention_factor(&v32), 1.0);
  cr_expect_eq(sc_yarn_get_mscale(0.5, 1), 1.0);
}

Test(yarn, rotation_by_hand) {
  const double inv[2] = {1.0, 0.5};
  /* interleaved pairs (x0, x1), (x2, x3) */
  float x[4] = {1, 0, 0, 1};
  sc_rope_rotate(SC_ROPE_INTERLEAVED, 4, inv, 1.0, 1, x);
  cr_expect(fabsf(x[0] - (float)cos(1.0)) < 1e-7f && fabsf(x[1] - (float)sin(1.0)) < 1e-7f);
  cr_expect(fabsf(x[2] + (float)sin(0.5)) < 1e-7f && fabsf(x[3] - (float)cos(0.5)) < 1e-7f);
  /* halves: pairs (x0, x2), (x1, x3) */
  float y[4] = {1, 0, 0, 1};
  sc_rope_rotate(SC_ROPE_HALVES, 4, inv, 1.0, 1, y);
  cr_expect(fabsf(y[0] - (float)cos(1.0)) < 1e-7f && fabsf(y[2] - (float)sin(1.0)) < 1e-7f);
  cr_expect(fabsf(y[1] + (float)sin(0.5)) < 1e-7f && fabsf(y[3] - (float)cos(0.5)) < 1e-7f);
  /* position 0 only scales by the attention factor */
  float z[4] = {1, -2, 3, -4};
  sc_rope_rotate(SC_ROPE_HALVES, 4, inv, 1.5, 0, z);
  cr_expect(z[0] == 1.5f && z[1] == -3.0f && z[2] == 4.5f && z[3] == -6.0f);
}

Test(yarn, refusals) {
  double inv[8];
  sc_diag d = {0};
  cr_expect_eq(sc_rope_inv_freq(&k_plain, 1e4, 7, inv, &d), SC_EINVAL);
  cr_expect(strstr(d.msg, "even") != NULL, "%s", d.msg);
  cr_expect_eq(sc_rope_inv_freq(&k_plain, 1e4, 0, inv, NULL), SC_EINVAL);
  cr_expect_eq(sc_rope_inv_freq(&k_plain, 1.0, 8, inv, NULL), SC_EINVAL);
  cr_expect_eq(sc_rope_inv_freq(&k_plain, NAN, 8, inv, NULL), SC_EINVAL);
  const sc_hf_rope_scaling small = yarn(0.5, 64, 32, 1, 1, 1), beta = yarn(4, 64, 1, 32, 1, 1),
                           orig = yarn(4, 0, 32, 1, 1, 1);
  cr_expect_eq(sc_rope_inv_freq(&small, 1e4, 8, inv, NULL), SC_EINVAL);
  cr_expect_eq(sc_rope_inv_freq(&beta, 1e4, 8, inv, NULL), SC_EINVAL);
  cr_expect_eq(sc_rope_inv_freq(&orig, 1e4, 8, inv, NULL), SC_EINVAL);
  const sc_hf_rope_scaling odd = {.type = 7};
  cr_expect_eq(sc_rope_inv_freq(&odd, 1e4, 8, inv, NULL), SC_EINVAL);
}

/* transformers' tiny deepseek_v32 (tests/data/hf_checkpoint/tiny-bf16) through the config
 * parser: its rope and routing settings are the reference's tiny_checkpoint cases. */
Test(yarn, from_saved_config) {
  sc_hf_config hf;
  sc_diag d = {0};
  cr_assert_eq(sc_hf_config_load(SC_HF_DATA "/tiny-bf16/config.json", &hf, &d), 0, "%s", d.msg);
  double inv[4];
  cr_assert_eq(sc_rope_inv_freq(&hf.rope, hf.rope_theta, hf.qk_rope_head_dim, inv, NULL), 0);
  json_t *r = reference();
  const json_t *tiny = json_array_get(json_object_get(r, "yarn"), 1);
  cr_assert_str_eq(json_string_value(json_object_get(tiny, "name")), "tiny_checkpoint");
  for (int i = 0; i < 4; i++)
    cr_expect(rel(inv[i], json_number_value(json_array_get(json_object_get(tiny, "inv_freq"),
                                                            (size_t)i)), 1e-12));
  json_decref(r);
  sc_moe_route_cfg mc;
  cr_assert_eq(sc_moe_route_cfg_from_hf(&hf, &mc, &d), 0, "%s", d.msg);
  cr_expect(mc.n_experts == 4 && mc.n_group == 2 && mc.topk_group == 1 && mc.k == 2);
  cr_expect(mc.norm_topk_prob && mc.routed_scaling_factor == 2.5);
}

/* ---- routing ---- */

static float sigmoid(float z) { return (float)(1.0 / (1.0 + exp(-(double)z))); }

Test(moe_route, transformers_reference) {
  json_t *r = reference();
  size_t i;
  const json_t *c;
  json_array_foreach(cases_of(r, "route", 24), i, c) {
    const char *name = json_string_value(json_object_get(c, "name"));
    const sc_moe_route_cfg cfg = {
        .n_experts = (int32_t)num(c, "n_experts"), .n_group = (int32_t)num(c, "n_group"),
        .topk_group = (int32_t)num(c, "topk_group"), .k = (int32_t)num(c, "k"),
        .norm_topk_prob = json_is_true(json_object_get(c, "norm_topk_prob")),
        .routed_scaling_factor = num(c, "routed_scaling_factor")};
    float logits[256], bias[256], w[16], routed[16 * 8], shared[8], out[8];
    int32_t ex[16];
    cr_assert_leq(cfg.n_experts, 256);
    cr_assert_leq(cfg.k, 16);
    floats(json_object_get(c, "logits"), logits, (size_t)cfg.n_experts);
    floats(json_object_get(c, "bias"), bias, (size_t)cfg.n_experts);
    sc_diag d = {0};
    cr_assert_eq(sc_moe_route(&cfg, logits, bias, ex, w, &d), 0, "%s: %s", name, d.msg);
    const json_t *we = json_object_get(c, "experts"), *ww = json_object_get(c, "weights");
    for (int32_t j = 0; j < cfg.k; j++) {
      cr_expect_eq(ex[j], (int32_t)json_integer_value(json_array_get(we, (size_t)j)),
                   "%s: expert %d is %d", name, j, ex[j]);
      cr_expect(rel(w[j], json_number_value(json_array_get(ww, (size_t)j)), 1e-6),
                "%s: weight %d = %.9g", name, j, w[j]);
    }
    const int32_t hidden = (int32_t)num(c, "hidden");
    cr_assert_eq(hidden, 8);
    const json_t *rr = json_object_get(c, "routed");
    for (int32_t j = 0; j < cfg.k; j++) floats(json_array_get(rr, (size_t)j), routed + j * 8, 8);
    floats(json_object_get(c, "shared"), shared, 8);
    sc_moe_combine(hidden, cfg.k, w, routed, 8, shared, out);
    for (int32_t h = 0; h < hidden; h++) {
      const double want = json_number_value(json_array_get(json_object_get(c, "combined"),
                                                           (size_t)h));
      cr_expect(near(out[h], want, 1e-6 * cfg.routed_scaling_factor * cfg.k), "%s: out[%d]",
                name, h);
    }
  }
  json_decref(r);
}

/* n_group 1 (and every group kept) is the plain top-k of the choice scores */
Test(moe_route, one_group_is_plain_topk) {
  float logits[24], bias[24];
  uint32_t s = 12345;
  for (int e = 0; e < 24; e++) {
    s = s * 1664525u + 1013904223u;
    logits[e] = (float)((s >> 8) % 20000) / 4000.0f - 2.5f;
    s = s * 1664525u + 1013904223u;
    bias[e] = (float)((s >> 8) % 1000) / 5000.0f - 0.1f;
  }
  const sc_moe_route_cfg g1 = {24, 1, 1, 5, true, 1.0}, all = {24, 6, 6, 5, true, 1.0};
  int32_t a[5], b[5];
  float wa[5], wb[5];
  cr_assert_eq(sc_moe_route(&g1, logits, bias, a, wa, NULL), 0);
  cr_assert_eq(sc_moe_route(&all, logits, bias, b, wb, NULL), 0);
  /* brute force: an expert is picked iff fewer than 5 others beat it */
  int n = 0;
  for (int e = 0; e < 24; e++) {
    const float ce = sigmoid(logits[e]) + bias[e];
    int better = 0;
    for (int f = 0; f < 24; f++) {
      const float cf = sigmoid(logits[f]) + bias[f];
      better += cf > ce || (cf == ce && f < e);
    }
    if (better < 5) {
      cr_expect_eq(a[n], e);
      cr_expect_eq(b[n], e);
      n++;
    }
  }
  cr_assert_eq(n, 5);
  for (int j = 0; j < 5; j++) cr_expect_eq(wa[j], wb[j]);
}

Test(moe_route, ties_go_to_the_lower_index) {
  float z[8] = {0}, w[2];
  int32_t ex[2];
  /* all equal: groups 0 and 1 are kept, experts 0 and 1 picked */
  const sc_moe_route_cfg c = {8, 4, 2, 2, true, 1.0};
  cr_assert_eq(sc_moe_route(&c, z, NULL, ex, w, NULL), 0);
  cr_expect(ex[0] == 0 && ex[1] == 1);
  cr_expect(w[0] == 0.5f && w[1] == 0.5f);
  /* groups 1 and 3 tie above the rest: group 1 is kept; inside, experts 2 and 3 tie with
   * each other and beat nothing else */
  float t[8] = {-1, -1, 2, 2, -1, -1, 2, 2};
  const sc_moe_route_cfg one = {8, 4, 1, 1, true, 1.0};
  cr_assert_eq(sc_moe_route(&one, t, NULL, ex, w, NULL), 0);
  cr_expect_eq(ex[0], 2);
  const sc_moe_route_cfg two = {8, 4, 2, 3, true, 1.0};
  int32_t e3[3];
  float w3[3];
  cr_assert_eq(sc_moe_route(&two, t, NULL, e3, w3, NULL), 0);
  cr_expect(e3[0] == 2 && e3[1] == 3 && e3[2] == 6, "%d %d %d", e3[0], e3[1], e3[2]);
}

/* a group is judged by its top-2 sum: the single best expert can be left out */
Test(moe_route, group_limit_excludes_the_best_expert) {
  const float z[4] = {5.0f, -5.0f, 2.0f, 2.0f}; /* group 0 sums 1.0, group 1 sums 1.76 */
  const sc_moe_route_cfg c = {4, 2, 1, 1, true, 1.0};
  int32_t ex[1];
  float w[1];
  cr_assert_eq(sc_moe_route(&c, z, NULL, ex, w, NULL), 0);
  cr_expect_eq(ex[0], 2);
  cr_expect_eq(w[0], 1.0f);
}

Test(moe_route, normalization_on_and_off) {
  const float z[8] = {0.5f, -1.0f, 3.0f, 0.0f, 1.5f, -2.0f, 2.5f, 1.0f};
  int32_t ex[3];
  float w[3];
  const sc_moe_route_cfg on = {8, 2, 2, 3, true, 2.5}, off = {8, 2, 2, 3, false, 2.5};
  cr_assert_eq(sc_moe_route(&on, z, NULL, ex, w, NULL), 0);
  cr_expect(ex[0] == 2 && ex[1] == 4 && ex[2] == 6);
  const double s2 = 1 / (1 + exp(-3.0)), s4 = 1 / (1 + exp(-1.5)), s6 = 1 / (1 + exp(-2.5));
  cr_expect(rel(w[0] + w[1] + w[2], 2.5, 1e-6));
  cr_expect(rel(w[0], 2.5 * s2 / (s2 + s4 + s6), 1e-6));
  cr_expect(rel(w[2], 2.5 * s6 / (s2 + s4 + s6), 1e-6));
  cr_assert_eq(sc_moe_route(&off, z, NULL, ex, w, NULL), 0);
  cr_expect(rel(w[0], 2.5 * s2, 1e-6) && rel(w[1], 2.5 * s4, 1e-6) && rel(w[2], 2.5 * s6, 1e-6));
}

Test(moe_route, bias_changes_the_pick_not_the_weights) {
  const float z[4] = {1.0f, 0.0f, 0.5f, -0.5f};
  const float bias[4] = {0.0f, 0.4f, 0.0f, 0.0f}; /* expert 1: 0.5 + 0.4 > 0.731 */
  const sc_moe_route_cfg c = {4, 1, 1, 1, false, 1.0};
  int32_t ex[1];
  float w[1];
  cr_assert_eq(sc_moe_route(&c, z, NULL, ex, w, NULL), 0);
  cr_expect_eq(ex[0], 0);
  cr_expect_eq(w[0], sigmoid(1.0f));
  cr_assert_eq(sc_moe_route(&c, z, bias, ex, w, NULL), 0);
  cr_expect_eq(ex[0], 1);
  cr_expect_eq(w[0], 0.5f, "the weight is the sigmoid score, without the bias");
}

Test(moe_route, combine) {
  const float w[2] = {0.25f, 2.0f};
  const float routed[2][3] = {{4, 8, -4}, {1, -1, 0.5f}};
  float shared[3] = {1, 1, 1}, out[3];
  sc_moe_combine(3, 2, w, &routed[0][0], 3, shared, out);
  cr_expect(out[0] == 4.0f && out[1] == 1.0f && out[2] == 1.0f);
  sc_moe_combine(3, 2, w, &routed[0][0], 3, NULL, out);
  cr_expect(out[0] == 3.0f && out[1] == 0.0f && out[2] == 0.0f);
  sc_moe_combine(3, 2, w, &routed[0][0], 3, shared, shared); /* in place */
  cr_expect(shared[0] == 4.0f && shared[1] == 1.0f && shared[2] == 1.0f);
}

Test(moe_route, refusals) {
  float z[8] = {0}, w[4];
  int32_t ex[4] = {-7, -7, -7, -7};
  sc_diag d = {0};
  const sc_moe_route_cfg bad[] = {
      {0, 1, 1, 1, true, 1.0},                       /* no experts */
      {SC_MOE_MAX_EXPERTS + 2, 1, 1, 1, true, 1.0},  /* too many */
      {8, 3, 1, 1, true, 1.0},                       /* groups do not divide */
      {8, 8, 1, 1, true, 1.0},                       /* one expert per group */
      {8, 2, 3, 1, true, 1.0},                       /* topk_group > n_group */
      {8, 4, 1, 3, true, 1.0},                       /* k beyond one group of 2 */
      {8, 2, 1, 0, true, 1.0},                       /* k 0 */
      {8, 2, 1, 1, true, 0.0},                       /* scale 0 */
      {8, 2, 1, 1, true, NAN},                       /* scale NaN */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_eq(sc_moe_route_check(&bad[i], NULL), SC_EINVAL, "case %zu", i);
    cr_expect_eq(sc_moe_route(&bad[i], z, NULL, ex, w, NULL), SC_EINVAL, "case %zu", i);
  }
  const sc_moe_route_cfg ok = {8, 2, 1, 2, true, 1.0};
  z[3] = NAN;
  cr_expect_eq(sc_moe_route(&ok, z, NULL, ex, w, &d), SC_EINVAL);
  cr_expect(strstr(d.msg, "expert 3") != NULL, "%s", d.msg);
  z[3] = 0;
  const float bias[8] = {0, 0, 0, 0, 0, INFINITY, 0, 0};
  cr_expect_eq(sc_moe_route(&ok, z, bias, ex, w, NULL), SC_EINVAL);
  cr_expect_eq(ex[0], -7, "nothing written on failure");
}
