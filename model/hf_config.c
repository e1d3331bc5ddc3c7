/* hf_config.c - parsing and checking a DeepSeek-V3.2 config.json (see hf_config.h). */
#include "model/hf_config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file_read.h"

/* The integer keys: one table drives reading and range checks. */
typedef struct int_key {
  const char *name;
  size_t off;
  int64_t lo, hi;
  bool required;
} int_key;

#define K(name, lo, hi, req) {#name, offsetof(sc_hf_config, name), lo, hi, req}
static const int_key INT_KEYS[] = {
    K(vocab_size, 2, 1 << 24, true),
    K(hidden_size, 1, 1 << 16, true),
    K(intermediate_size, 1, 1 << 20, true),
    K(moe_intermediate_size, 1, 1 << 20, true),
    K(num_hidden_layers, 1, SC_HF_MAX_LAYERS, true),
    K(num_attention_heads, 1, 1024, true),
    K(num_key_value_heads, 1, 1024, false),
    K(q_lora_rank, 1, 1 << 16, true),
    K(kv_lora_rank, 1, 1 << 16, true),
    K(qk_nope_head_dim, 1, 1 << 16, true),
    K(qk_rope_head_dim, 2, 1 << 16, true),
    K(v_head_dim, 1, 1 << 16, true),
    K(n_routed_experts, 1, 1 << 16, true),
    K(n_shared_experts, 1, 64, true),
    K(num_experts_per_tok, 1, 1 << 16, true),
    K(n_group, 1, 1 << 16, true),
    K(topk_group, 1, 1 << 16, true),
    K(first_k_dense_replace, 0, SC_HF_MAX_LAYERS, true),
    K(index_n_heads, 1, 1024, true),
    K(index_head_dim, 1, 1 << 16, true),
    K(index_topk, 1, 1 << 24, true),
    K(max_position_embeddings, 1, INT32_MAX, true),
    K(num_nextn_predict_layers, 0, 16, false),
};
#undef K

/* Keys that configs carry and sparsecp does not need. */
static const char *const IGNORED[] = {
    "architectures", "attention_dropout", "auto_map", "bos_token_id", "pad_token_id",
    "dtype", "torch_dtype", "ep_size", "initializer_range",
    "transformers_version", "use_cache", "head_dim", "qk_head_dim", "layer_types",
    "_name_or_path", "base_model_tp_plan", "base_model_pp_plan", "base_model_ep_plan"};

/* Keys handled by name below (besides the integer table). */
static const char *const HANDLED[] = {
    "model_type", "topk_method", "scoring_func", "norm_topk_prob", "tie_word_embeddings",
    "routed_scaling_factor", "rope_theta", "rms_norm_eps", "rope_scaling", "rope_parameters",
    "quantization_config", "attention_bias", "mlp_bias", "hidden_act", "moe_layer_freq",
    "mlp_layer_types", "rope_interleave", "indexer_rope_interleave", "eos_token_id"};

/* The keys of glm_moe_dsa's indexer sharing (unknown keys for deepseek_v32). */
static const char *const GLM_HANDLED[] = {"indexer_types", "index_topk_pattern",
                                          "index_topk_freq", "index_skip_topk_offset"};

static bool in_list(const char *key, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(key, list[i])) return true;
  return false;
}
#define IN(key, list) in_list(key, list, sizeof list / sizeof list[0])

static int32_t *int_field(sc_hf_config *c, const int_key *k) {
  return (int32_t *)((char *)c + k->off);
}

/* A number > lo_excl (or >= lo when inclusive), finite, at most 1e30. */
static int get_double(json_t *obj, const char *where, const char *key, bool required,
                      double dflt, double lo, bool inclusive, double *out, sc_diag *d) {
  json_t *v = json_object_get(obj, key);
  if (v == NULL) {
    if (required) return sc_fail(d, SC_EINVAL, "config.json: %s\"%s\" is missing", where, key);
    *out = dflt;
    return 0;
  }
  if (!json_is_number(v))
    return sc_fail(d, SC_EINVAL, "config.json: %s\"%s\" must be a number", where, key);
  const double x = json_number_value(v);
  if (!isfinite(x) || x > 1e30 || (inclusive ? !(x >= lo) : !(x > lo)))
    return sc_fail(d, SC_EINVAL, "config.json: %s\"%s\" = %g must be a finite number %s %g",
                   where, key, x, inclusive ? ">=" : ">", lo);
  *out = x;
  return 0;
}

/* An optional string that must be one of the allowed values (NULL-terminated list). */
static int get_choice(json_t *obj, const char *where, const char *key, const char *dflt,
                      const char *const *allowed, char *out, size_t cap, sc_diag *d) {
  json_t *v = json_object_get(obj, key);
  const char *s = dflt;
  if (v != NULL && !json_is_null(v)) {
    if (!json_is_string(v))
      return sc_fail(d, SC_EINVAL, "config.json: %s\"%s\" must be a string", where, key);
    s = json_string_value(v);
  }
  bool ok = false;
  for (size_t i = 0; allowed[i] != NULL && !ok; i++) ok = !strcmp(s, allowed[i]);
  if (!ok)
    return sc_fail(d, SC_EINVAL, "config.json: %s\"%s\" = \"%.40s\" is not supported (%s%s%s)",
                   where, key, s, allowed[0], allowed[1] ? " or " : "",
                   allowed[1] ? allowed[1] : "");
  snprintf(out, cap, "%s", s);
  return 0;
}

static int get_bool(json_t *obj, const char *key, bool required, bool dflt, bool *out,
                    sc_diag *d) {
  json_t *v = json_object_get(obj, key);
  if (v == NULL) {
    if (required) return sc_fail(d, SC_EINVAL, "config.json: \"%s\" is missing", key);
    *out = dflt;
    return 0;
  }
  if (!json_is_boolean(v))
    return sc_fail(d, SC_EINVAL, "config.json: \"%s\" must be true or false", key);
  *out = json_is_true(v);
  return 0;
}

/* rope_scaling (DeepSeek: "type") or rope_parameters (transformers 5: "rope_type" and
 * "rope_theta"); name is the key it came from. */
static int parse_rope(json_t *r, const char *name, sc_hf_config *c, sc_diag *d) {
  char where[48];
  snprintf(where, sizeof where, "%s.", name);
  if (!json_is_object(r))
    return sc_fail(d, SC_EINVAL, "config.json: \"%s\" must be an object or null", name);
  json_t *t = json_object_get(r, "rope_type");
  const char *tkey = "rope_type";
  if (t == NULL) {
    t = json_object_get(r, "type");
    tkey = "type";
  }
  if (!json_is_string(t))
    return sc_fail(d, SC_EINVAL, "config.json: %s\"type\" (or \"rope_type\") must be a string",
                   where);
  if (json_object_get(r, "rope_theta") != NULL) {
    int rc = get_double(r, where, "rope_theta", true, 0, 1.0, false, &c->rope_theta, d);
    if (rc) return rc;
  }
  const char *ts = json_string_value(t);
  if (!strcmp(ts, "default")) {
    c->rope = (sc_hf_rope_scaling){.type = SC_HF_ROPE_DEFAULT};
    return 0;
  }
  if (strcmp(ts, "yarn"))
    return sc_fail(d, SC_EINVAL,
                   "config.json: %s\"%s\" = \"%.40s\" is not supported (\"yarn\" or \"default\")",
                   where, tkey, ts);
  sc_hf_rope_scaling y = {.type = SC_HF_ROPE_YARN};
  int rc;
  if ((rc = get_double(r, where, "factor", true, 0, 1.0, true, &y.factor, d)) ||
      (rc = get_double(r, where, "beta_fast", false, 32, 0, false, &y.beta_fast, d)) ||
      (rc = get_double(r, where, "beta_slow", false, 1, 0, false, &y.beta_slow, d)) ||
      (rc = get_double(r, where, "mscale", false, 1, 0, true, &y.mscale, d)) ||
      (rc = get_double(r, where, "mscale_all_dim", false, 0, 0, true, &y.mscale_all_dim, d)))
    return rc;
  if (y.beta_fast < y.beta_slow)
    return sc_fail(d, SC_EINVAL, "config.json: %s\"beta_fast\" = %g must be >= beta_slow = %g",
                   where, y.beta_fast, y.beta_slow);
  json_t *o = json_object_get(r, "original_max_position_embeddings");
  if (!json_is_integer(o) || json_integer_value(o) < 1 ||
      json_integer_value(o) > c->max_position_embeddings)
    return sc_fail(d, SC_EINVAL,
                   "config.json: %s\"original_max_position_embeddings\" must be an integer in "
                   "[1, max_position_embeddings = %d]",
                   where, c->max_position_embeddings);
  y.original_max_position_embeddings = (int32_t)json_integer_value(o);
  c->rope = y;
  return 0;
}

static int parse_quant(json_t *q, sc_hf_quant *out, sc_diag *d) {
  static const char *const FP8[] = {"fp8", NULL}, *const E4M3[] = {"e4m3", NULL},
                           *const DYN[] = {"dynamic", NULL};
  const char *where = "quantization_config.";
  if (!json_is_object(q))
    return sc_fail(d, SC_EINVAL, "config.json: \"quantization_config\" must be an object");
  sc_hf_quant r = {.fp8 = true};
  char buf[16];
  int rc;
  if (json_object_get(q, "quant_method") == NULL)
    return sc_fail(d, SC_EINVAL, "config.json: %s\"quant_method\" is missing", where);
  if ((rc = get_choice(q, where, "quant_method", "", FP8, buf, sizeof buf, d)) ||
      (rc = get_choice(q, where, "fmt", "e4m3", E4M3, buf, sizeof buf, d)) ||
      (rc = get_choice(q, where, "activation_scheme", "dynamic", DYN, r.activation_scheme,
                       sizeof r.activation_scheme, d)))
    return rc;
  json_t *bs = json_object_get(q, "weight_block_size");
  if (!json_is_array(bs) || json_array_size(bs) != 2 ||
      !json_is_integer(json_array_get(bs, 0)) || !json_is_integer(json_array_get(bs, 1)) ||
      json_integer_value(json_array_get(bs, 0)) < 1 ||
      json_integer_value(json_array_get(bs, 0)) > 4096 ||
      json_integer_value(json_array_get(bs, 1)) < 1 ||
      json_integer_value(json_array_get(bs, 1)) > 4096)
    return sc_fail(d, SC_EINVAL,
                   "config.json: %s\"weight_block_size\" must be two integers in [1, 4096]",
                   where);
  r.block_rows = (int32_t)json_integer_value(json_array_get(bs, 0));
  r.block_cols = (int32_t)json_integer_value(json_array_get(bs, 1));
  json_t *sf = json_object_get(q, "scale_fmt");
  if (sf != NULL && !json_is_null(sf)) {
    if (!json_is_string(sf) || strlen(json_string_value(sf)) >= sizeof r.scale_fmt)
      return sc_fail(d, SC_EINVAL, "config.json: %s\"scale_fmt\" must be a short string", where);
    snprintf(r.scale_fmt, sizeof r.scale_fmt, "%s", json_string_value(sf));
  }
  json_t *nc = json_object_get(q, "modules_to_not_convert");
  if (nc != NULL && !json_is_null(nc) && !(json_is_array(nc) && json_array_size(nc) == 0))
    return sc_fail(d, SC_EINVAL,
                   "config.json: %s\"modules_to_not_convert\" is not supported (the tensors "
                   "kept unquantized are fixed: docs/model.md)",
                   where);
  *out = r;
  return 0;
}

/* The keys that only have to agree with what sparsecp assumes. */
static int check_fixed(json_t *root, const sc_hf_config *c, sc_diag *d) {
  static const char *const SILU[] = {"silu", NULL};
  char buf[16];
  bool b;
  int rc;
  if ((rc = get_bool(root, "attention_bias", false, false, &b, d))) return rc;
  if (b) return sc_fail(d, SC_EINVAL, "config.json: \"attention_bias\" = true is not supported");
  if ((rc = get_bool(root, "mlp_bias", false, false, &b, d))) return rc;
  if (b) return sc_fail(d, SC_EINVAL, "config.json: \"mlp_bias\" = true is not supported");
  if ((rc = get_choice(root, "", "hidden_act", "silu", SILU, buf, sizeof buf, d))) return rc;
  json_t *f = json_object_get(root, "moe_layer_freq");
  if (f != NULL && !(json_is_integer(f) && json_integer_value(f) == 1))
    return sc_fail(d, SC_EINVAL, "config.json: \"moe_layer_freq\" must be 1 (every layer from "
                                 "first_k_dense_replace on is MoE)");
  json_t *m = json_object_get(root, "mlp_layer_types");
  if (m != NULL && !json_is_null(m)) {
    if (!json_is_array(m) || json_array_size(m) != (size_t)c->num_hidden_layers)
      return sc_fail(d, SC_EINVAL, "config.json: \"mlp_layer_types\" must be a list of "
                                   "num_hidden_layers = %d strings", c->num_hidden_layers);
    for (int32_t i = 0; i < c->num_hidden_layers; i++) {
      const char *want = sc_hf_layer_is_moe(c, i) ? "sparse" : "dense";
      json_t *s = json_array_get(m, (size_t)i);
      if (!json_is_string(s) || strcmp(json_string_value(s), want))
        return sc_fail(d, SC_EINVAL,
                       "config.json: \"mlp_layer_types\"[%d] must be \"%s\" "
                       "(first_k_dense_replace = %d)",
                       i, want, c->first_k_dense_replace);
    }
  }
  return 0;
}

/* The rotary layouts: rope_interleave (the MLA's) must be true and
 * indexer_rope_interleave must be the model type's indexer layout, when present. */
static int check_interleave(json_t *root, sc_hf_config *c, sc_diag *d) {
  bool b;
  int rc;
  if ((rc = get_bool(root, "rope_interleave", false, true, &b, d))) return rc;
  if (!b)
    return sc_fail(d, SC_EINVAL, "config.json: \"rope_interleave\" = false is not supported "
                                 "(the MLA rotary pairs are interleaved in %s)", c->model_type);
  if ((rc = get_bool(root, "indexer_rope_interleave", false, c->index_rope_interleaved, &b, d)))
    return rc;
  if (b != c->index_rope_interleaved)
    return sc_fail(d, SC_EINVAL, "config.json: \"indexer_rope_interleave\" = %s contradicts "
                   "model_type \"%s\", whose indexer rotates %s pairs", b ? "true" : "false",
                   c->model_type, c->index_rope_interleaved ? "interleaved" : "half-split");
  return 0;
}

/* An optional integer key in [lo, hi], dflt when absent or null. */
static int get_int(json_t *obj, const char *key, int64_t dflt, int64_t lo, int64_t hi,
                   int64_t *out, sc_diag *d) {
  json_t *v = json_object_get(obj, key);
  *out = dflt;
  if (v == NULL || json_is_null(v)) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return sc_fail(d, SC_EINVAL, "config.json: \"%s\" must be an integer in [%lld, %lld]", key,
                   (long long)lo, (long long)hi);
  *out = json_integer_value(v);
  return 0;
}

/* Layer l's entry of indexer_types or index_topk_pattern: 1 "full", 0 "shared", -1 other. */
static int indexer_type_at(json_t *list, int32_t l) {
  if (json_is_string(list)) {
    const char ch = json_string_value(list)[l];
    return ch == 'F' ? 1 : ch == 'S' ? 0 : -1;
  }
  json_t *s = json_array_get(list, (size_t)l);
  if (!json_is_string(s)) return -1;
  const char *v = json_string_value(s);
  return !strcmp(v, "full") ? 1 : !strcmp(v, "shared") ? 0 : -1;
}

/* glm_moe_dsa's per-layer indexer types (hf_config.h), as GlmMoeDsaConfig derives them. */
static int parse_indexer_types(json_t *root, sc_hf_config *c, sc_diag *d) {
  const int32_t L = c->num_hidden_layers;
  const char *key = "indexer_types";
  json_t *list = json_object_get(root, key);
  if (list == NULL || json_is_null(list)) {
    key = "index_topk_pattern";
    list = json_object_get(root, key);
  }
  if (list != NULL && !json_is_null(list)) {
    const size_t n = json_is_string(list) ? strlen(json_string_value(list))
                     : json_is_array(list) ? json_array_size(list) : 0;
    if (n != (size_t)L)
      return sc_fail(d, SC_EINVAL, "config.json: \"%s\" must be a list of num_hidden_layers "
                     "= %d entries \"full\" or \"shared\"%s", key, L,
                     strcmp(key, "indexer_types") ? " (or a string of as many 'F' and 'S')" : "");
    for (int32_t l = 0; l < L; l++) {
      const int t = indexer_type_at(list, l);
      if (t < 0)
        return sc_fail(d, SC_EINVAL, "config.json: \"%s\"[%d] must be %s", key, l,
                       json_is_string(list) ? "'F' or 'S'" : "\"full\" or \"shared\"");
      if (t == 0) c->index_shared[l >> 3] |= (uint8_t)(1u << (l & 7));
    }
  } else {
    int64_t freq, offset;
    int rc;
    key = "index_skip_topk_offset"; /* with index_topk_freq > 1, 0 makes layer 0 shared */
    if ((rc = get_int(root, "index_topk_freq", 1, 1, SC_HF_MAX_LAYERS, &freq, d)) ||
        (rc = get_int(root, "index_skip_topk_offset", 2, 0, SC_HF_MAX_LAYERS, &offset, d)))
      return rc;
    for (int32_t l = 0; l < L; l++) {
      const int64_t j = l - offset + 1;
      if ((j > 0 ? j : 0) % freq != 0) c->index_shared[l >> 3] |= (uint8_t)(1u << (l & 7));
    }
  }
  for (int32_t l = 0; l < L; l++) c->index_shared_layers += sc_hf_layer_index_shared(c, l);
  if (sc_hf_layer_index_shared(c, 0))
    return sc_fail(d, SC_EINVAL, "config.json: \"%s\" makes layer 0 \"shared\": a shared layer "
                   "reuses the top-K of an earlier \"full\" one, so the first must be full", key);
  return 0;
}

/* Rules across keys. */
static int check_rules(const sc_hf_config *c, sc_diag *d) {
  if (c->num_key_value_heads != c->num_attention_heads)
    return sc_fail(d, SC_EINVAL, "config.json: \"num_key_value_heads\" = %d must equal "
                   "num_attention_heads = %d (MLA keys and values are per head)",
                   c->num_key_value_heads, c->num_attention_heads);
  if (c->qk_rope_head_dim % 2)
    return sc_fail(d, SC_EINVAL, "config.json: \"qk_rope_head_dim\" = %d must be even",
                   c->qk_rope_head_dim);
  if (c->index_head_dim < c->qk_rope_head_dim)
    return sc_fail(d, SC_EINVAL, "config.json: \"index_head_dim\" = %d must be >= "
                   "qk_rope_head_dim = %d (the indexer rotates its first qk_rope_head_dim "
                   "values)", c->index_head_dim, c->qk_rope_head_dim);
  if (c->first_k_dense_replace > c->num_hidden_layers)
    return sc_fail(d, SC_EINVAL, "config.json: \"first_k_dense_replace\" = %d must be <= "
                   "num_hidden_layers = %d", c->first_k_dense_replace, c->num_hidden_layers);
  /* The tensor table grows with the routed experts of every MoE layer (6 tensors each
   * with fp8): a bound keeps a config of a few bytes from asking for gigabytes. */
  const int64_t routed = (int64_t)c->n_routed_experts *
                         (c->num_hidden_layers - c->first_k_dense_replace);
  if (routed > SC_HF_MAX_ROUTED)
    return sc_fail(d, SC_EINVAL, "config.json: \"n_routed_experts\" = %d in each of %d MoE "
                   "layers makes %lld routed experts; at most %d are supported (DeepSeek-V3.2 "
                   "has 256 x 58 = 14848)", c->n_routed_experts,
                   c->num_hidden_layers - c->first_k_dense_replace, (long long)routed,
                   SC_HF_MAX_ROUTED);
  if (c->n_group > c->n_routed_experts || c->n_routed_experts % c->n_group ||
      c->n_routed_experts / c->n_group < 2)
    return sc_fail(d, SC_EINVAL, "config.json: \"n_group\" = %d must divide n_routed_experts "
                   "= %d into groups of at least 2 (a group scores by its two best experts)",
                   c->n_group, c->n_routed_experts);
  if (c->topk_group > c->n_group)
    return sc_fail(d, SC_EINVAL, "config.json: \"topk_group\" = %d must be <= n_group = %d",
                   c->topk_group, c->n_group);
  const int64_t reach = (int64_t)c->topk_group * (c->n_routed_experts / c->n_group);
  if (c->num_experts_per_tok > reach)
    return sc_fail(d, SC_EINVAL, "config.json: \"num_experts_per_tok\" = %d exceeds the %lld "
                   "experts of topk_group = %d groups", c->num_experts_per_tok,
                   (long long)reach, c->topk_group);
  if ((int64_t)c->vocab_size * c->hidden_size > ((int64_t)1 << 34))
    return sc_fail(d, SC_EINVAL, "config.json: \"vocab_size\" x hidden_size is too large");
  return 0;
}

static int parse_root(json_t *root, sc_hf_config *c, sc_diag *d) {
  static const char *const NOAUX[] = {"noaux_tc", NULL}, *const SIGMOID[] = {"sigmoid", NULL};
  if (!json_is_object(root)) return sc_fail(d, SC_EINVAL, "config.json must be a JSON object");
  memset(c, 0, sizeof *c);
  json_t *mt = json_object_get(root, "model_type");
  if (!json_is_string(mt))
    return sc_fail(d, SC_EINVAL, "config.json: \"model_type\" is missing or not a string");
  const bool glm = !strcmp(json_string_value(mt), "glm_moe_dsa");
  if (strcmp(json_string_value(mt), "deepseek_v32") && !glm)
    return sc_fail(d, SC_EINVAL,
                   "config.json: \"model_type\" = \"%.40s\" is not supported (only "
                   "\"deepseek_v32\", DeepSeek-V3.2 with its lightning indexer, and "
                   "\"glm_moe_dsa\", GLM-5)",
                   json_string_value(mt));
  snprintf(c->model_type, sizeof c->model_type, "%s", json_string_value(mt));
  c->index_rope_interleaved = glm;
  /* DeepSeek-V2-Lite's way of saying "queries without a LoRA"; V3.2's indexer projects
   * its queries from the q LoRA, so there is no such model to read. */
  json_t *ql = json_object_get(root, "q_lora_rank");
  if (json_is_null(ql) || (json_is_integer(ql) && json_integer_value(ql) == 0))
    return sc_fail(d, SC_EINVAL, "config.json: \"q_lora_rank\" = %s (queries without a LoRA) "
                   "is not supported: DeepSeek-V3.2's indexer projects its queries from the "
                   "q LoRA", json_is_null(ql) ? "null" : "0");
  for (size_t i = 0; i < sizeof INT_KEYS / sizeof INT_KEYS[0]; i++) {
    const int_key *k = &INT_KEYS[i];
    json_t *v = json_object_get(root, k->name);
    if (v == NULL) {
      if (k->required)
        return sc_fail(d, SC_EINVAL, "config.json: \"%s\" is missing", k->name);
      continue;
    }
    if (!json_is_integer(v))
      return sc_fail(d, SC_EINVAL, "config.json: \"%s\" must be an integer", k->name);
    const json_int_t x = json_integer_value(v);
    if (x < k->lo || x > k->hi)
      return sc_fail(d, SC_EINVAL,
                     "config.json: \"%s\" = %lld is out of range: it must be in [%lld, %lld]",
                     k->name, (long long)x, (long long)k->lo, (long long)k->hi);
    *int_field(c, k) = (int32_t)x;
  }
  if (json_object_get(root, "num_key_value_heads") == NULL)
    c->num_key_value_heads = c->num_attention_heads;
  int rc;
  if ((rc = get_choice(root, "", "topk_method", "noaux_tc", NOAUX, c->topk_method,
                       sizeof c->topk_method, d)) ||
      (rc = get_choice(root, "", "scoring_func", "sigmoid", SIGMOID, c->scoring_func,
                       sizeof c->scoring_func, d)) ||
      (rc = get_bool(root, "norm_topk_prob", true, false, &c->norm_topk_prob, d)) ||
      (rc = get_bool(root, "tie_word_embeddings", false, false, &c->tie_word_embeddings, d)) ||
      (rc = get_double(root, "", "routed_scaling_factor", true, 0, 0, false,
                       &c->routed_scaling_factor, d)) ||
      (rc = get_double(root, "", "rms_norm_eps", true, 0, 0, false, &c->rms_norm_eps, d)))
    return rc;
  json_t *rs = json_object_get(root, "rope_scaling");
  json_t *rp = json_object_get(root, "rope_parameters");
  if (rs && !json_is_null(rs) && rp && !json_is_null(rp))
    return sc_fail(d, SC_EINVAL, "config.json: give \"rope_scaling\" or \"rope_parameters\", "
                                 "not both");
  if (json_object_get(root, "rope_theta") != NULL &&
      (rc = get_double(root, "", "rope_theta", true, 0, 1.0, false, &c->rope_theta, d)))
    return rc;
  if (rs && !json_is_null(rs) && (rc = parse_rope(rs, "rope_scaling", c, d))) return rc;
  if (rp && !json_is_null(rp) && (rc = parse_rope(rp, "rope_parameters", c, d))) return rc;
  if (c->rope_theta == 0)
    return sc_fail(d, SC_EINVAL, "config.json: \"rope_theta\" is missing (at the top or in "
                                 "rope_parameters)");
  json_t *q = json_object_get(root, "quantization_config");
  if (q != NULL && !json_is_null(q) && (rc = parse_quant(q, &c->quant, d))) return rc;
  if ((rc = sc_hf_eos_parse(json_object_get(root, "eos_token_id"), "config.json", &c->eos, d)))
    return rc;
  if ((rc = check_fixed(root, c, d)) || (rc = check_interleave(root, c, d)) ||
      (rc = check_rules(c, d)) || (glm && (rc = parse_indexer_types(root, c, d))))
    return rc;
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    bool known = IN(key, IGNORED) || IN(key, HANDLED) || (glm && IN(key, GLM_HANDLED));
    for (size_t i = 0; i < sizeof INT_KEYS / sizeof INT_KEYS[0] && !known; i++)
      known = !strcmp(key, INT_KEYS[i].name);
    if (known) continue;
    if (c->unknown_keys++ == 0) snprintf(c->first_unknown, sizeof c->first_unknown, "%s", key);
  }
  return 0;
}

int sc_hf_eos_parse(const void *json_value, const char *file, sc_hf_eos *out, sc_diag *d) {
  const json_t *v = json_value;
  sc_hf_eos e = {.n = 0};
  const bool list = json_is_array(v);
  if (v != NULL && !json_is_null(v) && !list && !json_is_integer(v))
    return sc_fail(d, SC_EINVAL, "%s: \"eos_token_id\" must be a token id, a list of them "
                   "or null", file);
  const size_t n = list ? json_array_size(v) : v != NULL && !json_is_null(v);
  if (n > SC_HF_MAX_EOS)
    return sc_fail(d, SC_EINVAL, "%s: \"eos_token_id\" lists %zu ids (at most %d)", file, n,
                   SC_HF_MAX_EOS);
  for (size_t i = 0; i < n; i++) {
    const json_t *x = list ? json_array_get(v, i) : v;
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
      return sc_fail(d, SC_EINVAL, "%s: \"eos_token_id\" must hold token ids (integers >= 0)",
                     file);
    e.id[e.n++] = (int32_t)json_integer_value(x);
  }
  *out = e;
  return 0;
}

int sc_hf_eos_merge(sc_hf_eos *into, const sc_hf_eos *more, sc_diag *d) {
  for (int32_t i = 0; i < more->n; i++) {
    bool have = false;
    for (int32_t j = 0; j < into->n && !have; j++) have = into->id[j] == more->id[i];
    if (have) continue;
    if (into->n == SC_HF_MAX_EOS)
      return sc_fail(d, SC_EINVAL, "more than %d end-of-sequence token ids (config.json and "
                     "generation_config.json together)", SC_HF_MAX_EOS);
    into->id[into->n++] = more->id[i];
  }
  return 0;
}

int sc_hf_generation_eos_load(const char *path, sc_hf_eos *out, sc_diag *d) {
  char *buf = NULL;
  size_t n = 0;
  int rc = sc_file_read(path, 1u << 20, &buf, &n, d);
  if (rc) return rc;
  json_error_t jerr;
  json_t *root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &jerr);
  free(buf);
  if (root == NULL || !json_is_object(root)) {
    if (root) json_decref(root);
    return sc_fail(d, SC_EINVAL, "generation_config.json: not a JSON object%s%s",
                   root ? "" : ": ", root ? "" : jerr.text);
  }
  rc = sc_hf_eos_parse(json_object_get(root, "eos_token_id"), "generation_config.json", out, d);
  json_decref(root);
  return rc;
}

int sc_hf_config_parse(const char *text, size_t len, sc_hf_config *c, sc_diag *d) {
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return sc_fail(d, SC_EINVAL, "config.json: invalid JSON at line %d column %d: %s",
                   jerr.line, jerr.column, jerr.text);
  sc_hf_config tmp;
  const int rc = parse_root(root, &tmp, d);
  json_decref(root);
  if (rc == 0) *c = tmp;
  return rc;
}

int sc_hf_config_load(const char *path, sc_hf_config *c, sc_diag *d) {
  char *buf = NULL;
  size_t n = 0;
  int rc = sc_file_read(path, 1u << 20, &buf, &n, d);
  if (rc == 0) rc = sc_hf_config_parse(buf, n, c, d);
  free(buf);
  return rc;
}
