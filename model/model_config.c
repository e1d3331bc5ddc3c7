/* model_config.c - defaults, JSON parsing and validation of the model configuration. */
#include "model/model_config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file_read.h"
#include "base/hash.h"
#include "model/model_defaults.h"

void sc_model_config_default(sc_model_config *c) {
  *c = (sc_model_config){
      .vocab = SC_MODEL_DEFAULT_VOCAB,
      .hidden = SC_MODEL_DEFAULT_HIDDEN,
      .layers = SC_MODEL_DEFAULT_LAYERS,
      .heads = SC_MODEL_DEFAULT_HEADS,
      .q_lora_rank = SC_MODEL_DEFAULT_Q_LORA_RANK,
      .kv_lora_rank = SC_MODEL_DEFAULT_KV_LORA_RANK,
      .qk_nope_dim = SC_MODEL_DEFAULT_QK_NOPE_DIM,
      .rope_dim = SC_MODEL_DEFAULT_ROPE_DIM,
      .v_head_dim = SC_MODEL_DEFAULT_V_HEAD_DIM,
      .index_heads = SC_MODEL_DEFAULT_INDEX_HEADS,
      .index_dim = SC_MODEL_DEFAULT_INDEX_DIM,
      .topk = SC_MODEL_DEFAULT_TOPK,
      .ffn_hidden = SC_MODEL_DEFAULT_FFN_HIDDEN,
      .max_position = SC_MODEL_DEFAULT_MAX_POSITION,
      .rms_eps = (float)SC_MODEL_DEFAULT_RMS_EPS,
      .rope_theta = (float)SC_MODEL_DEFAULT_ROPE_THETA,
      .seed = SC_MODEL_DEFAULT_SEED,
      .init_scale = (float)SC_MODEL_DEFAULT_INIT_SCALE,
  };
}

/* The integer keys, their fields and ranges: one table drives parsing and validation. */
typedef struct int_key {
  const char *name;
  size_t off;
  int64_t lo, hi;
} int_key;

#define K(name, lo, hi) {#name, offsetof(sc_model_config, name), lo, hi}
static const int_key INT_KEYS[] = {
    K(vocab, 2, SC_MODEL_MAX_VOCAB),
    K(hidden, 1, SC_MODEL_MAX_DIM),
    K(layers, 1, 1024),
    K(heads, 1, 1024),
    K(q_lora_rank, 1, SC_MODEL_MAX_DIM),
    K(kv_lora_rank, 1, SC_MODEL_MAX_DIM),
    K(qk_nope_dim, 1, SC_MODEL_MAX_DIM),
    K(rope_dim, 0, SC_MODEL_MAX_DIM),
    K(v_head_dim, 1, SC_MODEL_MAX_DIM),
    K(index_heads, 1, 1024),
    K(index_dim, 1, SC_MODEL_MAX_DIM),
    K(topk, 1, SC_MODEL_MAX_DIM),
    K(ffn_hidden, 1, 1 << 20),
    K(max_position, 1, SC_PLAN_MAX_TOKENS),
};
#undef K

static int32_t *int_field(sc_model_config *c, const int_key *k) {
  return (int32_t *)((char *)c + k->off);
}

int sc_model_config_validate(const sc_model_config *c, sc_diag *d) {
  for (size_t i = 0; i < sizeof INT_KEYS / sizeof INT_KEYS[0]; i++) {
    const int_key *k = &INT_KEYS[i];
    const int64_t v = *int_field((sc_model_config *)c, k);
    if (v < k->lo || v > k->hi)
      return sc_fail(d, SC_EINVAL, "model %s = %lld is out of range: it must be in [%lld, %lld]",
                     k->name, (long long)v, (long long)k->lo, (long long)k->hi);
  }
  if (c->rope_dim % 2 != 0)
    return sc_fail(d, SC_EINVAL,
                   "model rope_dim = %d must be even (rotary pairs of two values)", c->rope_dim);
  if (!(c->rms_eps > 0.0f) || !isfinite(c->rms_eps))
    return sc_fail(d, SC_EINVAL, "model rms_eps = %g must be a finite number > 0",
                   (double)c->rms_eps);
  if (!(c->rope_theta > 1.0f) || !isfinite(c->rope_theta))
    return sc_fail(d, SC_EINVAL, "model rope_theta = %g must be a finite number > 1",
                   (double)c->rope_theta);
  if (!(c->init_scale > 0.0f) || !isfinite(c->init_scale))
    return sc_fail(d, SC_EINVAL, "model init_scale = %g must be a finite number > 0",
                   (double)c->init_scale);
  const sc_model_arch *a = &c->arch;
  if (a->route.n_experts > 0) {
    int rc = sc_moe_route_check(&a->route, d);
    if (rc) return rc;
    if (a->moe_inter < 1 || a->moe_inter > (1 << 20) || a->n_shared < 0 || a->n_shared > 64 ||
        a->first_dense < 0 || a->first_dense > c->layers)
      return sc_fail(d, SC_EINVAL, "model MoE: moe_inter %d, n_shared %d or first_dense %d "
                     "out of range", a->moe_inter, a->n_shared, a->first_dense);
  }
  if (a->checkpoint && (!(a->index_norm_eps > 0.0f) || !(a->latent_norm_eps > 0.0f)))
    return sc_fail(d, SC_EINVAL, "model index_norm_eps and latent_norm_eps must be > 0");
  if (sc_model_layer_index_shared(c, 0))
    return sc_fail(d, SC_EINVAL, "model layer 0 cannot reuse an earlier layer's top-K");
  if (c->eos.n < 0 || c->eos.n > SC_HF_MAX_EOS)
    return sc_fail(d, SC_EINVAL, "model: %d eos_token_id values (at most %d)", c->eos.n,
                   SC_HF_MAX_EOS);
  for (int32_t i = 0; i < c->eos.n; i++)
    if (c->eos.id[i] < 0 || c->eos.id[i] >= c->vocab)
      return sc_fail(d, SC_EINVAL, "model eos_token_id %d is not a token id below vocab = %d",
                     c->eos.id[i], c->vocab);
  /* The largest weight matrix must stay addressable with 32-bit row counts. */
  if ((int64_t)c->vocab * c->hidden > ((int64_t)1 << 31))
    return sc_fail(d, SC_EINVAL, "model vocab * hidden = %lld exceeds 2^31 elements",
                   (long long)c->vocab * c->hidden);
  return 0;
}

/* Every field of the configuration as bytes, one after another (no padding): what
 * sc_model_config_same compares and sc_model_config_digest hashes, so that the two can
 * never disagree about which fields make a model. Floats go as their bits: -0 and 0 differ,
 * which only errs towards "not the same". */
typedef struct canon {
  uint8_t b[sizeof(sc_model_config) + 64];
  size_t n;
} canon;

static void put(canon *k, const void *p, size_t n) {
  memcpy(k->b + k->n, p, n);
  k->n += n;
}
#define PUT(k, x) put(k, &(x), sizeof(x))

static void canon_of(const sc_model_config *c, canon *k) {
  k->n = 0;
  for (size_t i = 0; i < sizeof INT_KEYS / sizeof INT_KEYS[0]; i++)
    put(k, int_field((sc_model_config *)c, &INT_KEYS[i]), sizeof(int32_t));
  PUT(k, c->rms_eps), PUT(k, c->rope_theta), PUT(k, c->seed), PUT(k, c->init_scale);
  const sc_model_arch *x = &c->arch;
  const sc_hf_rope_scaling *r = &x->rope;
  const uint8_t flags = (uint8_t)(x->checkpoint | x->route.norm_topk_prob << 1 |
                                  x->index_interleaved << 2);
  PUT(k, flags), PUT(k, r->type), PUT(k, r->factor);
  PUT(k, r->original_max_position_embeddings), PUT(k, r->beta_fast), PUT(k, r->beta_slow);
  PUT(k, r->mscale), PUT(k, r->mscale_all_dim), PUT(k, x->first_dense);
  PUT(k, x->route.n_experts), PUT(k, x->route.n_group), PUT(k, x->route.topk_group);
  PUT(k, x->route.k), PUT(k, x->route.routed_scaling_factor), PUT(k, x->moe_inter);
  PUT(k, x->n_shared), PUT(k, x->index_norm_eps), PUT(k, x->latent_norm_eps);
  PUT(k, x->index_shared);
}
#undef PUT

bool sc_model_config_same(const sc_model_config *a, const sc_model_config *b) {
  canon x, y;
  canon_of(a, &x), canon_of(b, &y);
  return x.n == y.n && !memcmp(x.b, y.b, x.n);
}

uint64_t sc_model_config_digest(const sc_model_config *c) {
  canon k;
  canon_of(c, &k);
  return sc_fnv1a(SC_FNV_OFFSET, k.b, k.n);
}

int sc_model_config_check_tp(const sc_model_config *c, int32_t tp, sc_diag *d) {
  if (tp < 1) return sc_fail(d, SC_EINVAL, "tp = %d must be >= 1", tp);
  if (c->heads % tp != 0)
    return sc_fail(d, SC_EINVAL,
                   "model heads = %d is not divisible by tp = %d (TP splits attention heads)",
                   c->heads, tp);
  if (c->ffn_hidden % tp != 0)
    return sc_fail(d, SC_EINVAL,
                   "model ffn_hidden = %d is not divisible by tp = %d (TP splits the MLP)",
                   c->ffn_hidden, tp);
  if (c->arch.route.n_experts > 0 && c->arch.moe_inter % tp != 0)
    return sc_fail(d, SC_EINVAL,
                   "model moe_intermediate_size = %d is not divisible by tp = %d (TP splits "
                   "each expert's intermediate dimension)",
                   c->arch.moe_inter, tp);
  return 0;
}

static int apply_float(const char *key, json_t *val, double lo_excl, float *out, sc_diag *d) {
  if (!json_is_number(val))
    return sc_fail(d, SC_EINVAL, "model config key \"%s\" must be a number", key);
  const double v = json_number_value(val);
  if (!(v > lo_excl) || !isfinite(v) || v > 1e30)
    return sc_fail(d, SC_EINVAL, "model config key \"%s\" = %g must be a finite number > %g",
                   key, v, lo_excl);
  *out = (float)v;
  return 0;
}

int sc_model_config_apply_json(sc_model_config *c, const void *json_object, sc_diag *d) {
  json_t *obj = (json_t *)json_object;
  if (!json_is_object(obj)) return sc_fail(d, SC_EINVAL, "the model config must be a JSON object");
  const char *key;
  json_t *val;
  int rc;
  json_object_foreach(obj, key, val) {
    if (!strcmp(key, "rms_eps")) {
      if ((rc = apply_float(key, val, 0.0, &c->rms_eps, d))) return rc;
      continue;
    }
    if (!strcmp(key, "rope_theta")) {
      if ((rc = apply_float(key, val, 1.0, &c->rope_theta, d))) return rc;
      continue;
    }
    if (!strcmp(key, "init_scale")) {
      if ((rc = apply_float(key, val, 0.0, &c->init_scale, d))) return rc;
      continue;
    }
    if (!strcmp(key, "eos_token_id")) {
      if ((rc = sc_hf_eos_parse(val, "model config", &c->eos, d))) return rc;
      continue;
    }
    if (!strcmp(key, "seed")) {
      if (!json_is_integer(val) || json_integer_value(val) < 0)
        return sc_fail(d, SC_EINVAL, "model config key \"seed\" must be an integer >= 0");
      c->seed = (uint64_t)json_integer_value(val);
      continue;
    }
    const int_key *k = NULL;
    for (size_t i = 0; i < sizeof INT_KEYS / sizeof INT_KEYS[0]; i++)
      if (!strcmp(key, INT_KEYS[i].name)) k = &INT_KEYS[i];
    if (k == NULL)
      return sc_fail(d, SC_EINVAL,
                     "unknown model config key \"%s\" (docs/model.md lists the keys)", key);
    if (!json_is_integer(val))
      return sc_fail(d, SC_EINVAL, "model config key \"%s\" must be an integer", key);
    const json_int_t v = json_integer_value(val);
    if (v < k->lo || v > k->hi)
      return sc_fail(d, SC_EINVAL,
                     "model config key \"%s\" = %lld is out of range: it must be in [%lld, %lld]",
                     key, (long long)v, (long long)k->lo, (long long)k->hi);
    *int_field(c, k) = (int32_t)v;
  }
  return 0;
}

int sc_model_config_parse(const char *text, size_t len, sc_model_config *c, sc_diag *d) {
  sc_model_config tmp;
  sc_model_config_default(&tmp);
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return sc_fail(d, SC_EINVAL, "model config: invalid JSON at line %d column %d: %s",
                   jerr.line, jerr.column, jerr.text);
  int rc = sc_model_config_apply_json(&tmp, root, d);
  json_decref(root);
  if (rc == 0) rc = sc_model_config_validate(&tmp, d);
  if (rc == 0) *c = tmp;
  return rc;
}

int sc_model_config_load(const char *path, sc_model_config *c, sc_diag *d) {
  char *buf = NULL;
  size_t n = 0;
  int rc = sc_file_read(path, 1u << 20, &buf, &n, d);
  if (rc == 0) rc = sc_model_config_parse(buf, n, c, d);
  free(buf);
  return rc;
}

void sc_model_config_to_plan(const sc_model_config *m, sc_plan_config *p) {
  p->layers = m->layers;
  p->heads = m->heads;
  p->kv_lora_rank = m->kv_lora_rank;
  p->rope_dim = m->rope_dim;
  p->index_dim = m->index_dim;
  p->topk = m->topk;
  p->hidden = m->hidden;
}
