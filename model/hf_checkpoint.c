/* hf_checkpoint.c - the tensor table of a DeepSeek-V3.2 config and the checked opening of
 * a checkpoint directory (see hf_checkpoint.h). */
#include "model/hf_checkpoint.h"

#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file_read.h"

/* ---- the table ---- */

typedef struct table {
  const sc_hf_config *cfg;
  sc_hf_spec *v;
  int32_t n, cap;
  bool oom;
} table;

static void add(table *b, int kind, int64_t rows, int64_t cols, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* cols 0: a 1-D tensor of rows elements. */
static void add(table *b, int kind, int64_t rows, int64_t cols, const char *fmt, ...) {
  if (b->oom) return;
  if (b->n == b->cap) {
    const int32_t cap = b->cap ? 2 * b->cap : 256;
    sc_hf_spec *v = realloc(b->v, (size_t)cap * sizeof *v);
    if (v == NULL) {
      b->oom = true;
      return;
    }
    b->v = v;
    b->cap = cap;
  }
  sc_hf_spec *s = &b->v[b->n++];
  memset(s, 0, sizeof *s);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->name, sizeof s->name, fmt, ap);
  va_end(ap);
  s->kind = kind;
  s->ndim = cols ? 2 : 1;
  s->shape[0] = rows;
  s->shape[1] = cols;
}

/* A quantizable linear "PREFIX.weight" [out, in], and its scale with fp8. */
static void add_linear(table *b, const char *prefix, int64_t out, int64_t in) {
  add(b, SC_HF_LINEAR, out, in, "%s.weight", prefix);
  const sc_hf_quant *q = &b->cfg->quant;
  if (q->fp8)
    add(b, SC_HF_SCALE, (out + q->block_rows - 1) / q->block_rows,
        (in + q->block_cols - 1) / q->block_cols, "%s.weight_scale_inv", prefix);
}

static void add_mlp(table *b, const char *prefix, int64_t inter) {
  const int64_t hid = b->cfg->hidden_size;
  char p[SC_HF_MAX_NAME];
  snprintf(p, sizeof p, "%s.gate_proj", prefix);
  add_linear(b, p, inter, hid);
  snprintf(p, sizeof p, "%s.up_proj", prefix);
  add_linear(b, p, inter, hid);
  snprintf(p, sizeof p, "%s.down_proj", prefix);
  add_linear(b, p, hid, inter);
}

static void add_layer(table *b, int32_t l) {
  const sc_hf_config *c = b->cfg;
  const int64_t hid = c->hidden_size, H = c->num_attention_heads;
  char p[SC_HF_MAX_NAME], q[SC_HF_MAX_NAME + 32]; /* q: p plus a suffix */
  add(b, SC_HF_FLOAT, hid, 0, "model.layers.%d.input_layernorm.weight", l);
#define ATTN(name) (snprintf(p, sizeof p, "model.layers.%d.self_attn.%s", l, name), p)
  add_linear(b, ATTN("q_a_proj"), c->q_lora_rank, hid);
  add(b, SC_HF_FLOAT, c->q_lora_rank, 0, "%s.weight", ATTN("q_a_layernorm"));
  add_linear(b, ATTN("q_b_proj"), H * (c->qk_nope_head_dim + c->qk_rope_head_dim),
             c->q_lora_rank);
  add_linear(b, ATTN("kv_a_proj_with_mqa"), c->kv_lora_rank + c->qk_rope_head_dim, hid);
  add(b, SC_HF_FLOAT, c->kv_lora_rank, 0, "%s.weight", ATTN("kv_a_layernorm"));
  add_linear(b, ATTN("kv_b_proj"), H * (c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank);
  add_linear(b, ATTN("o_proj"), hid, H * c->v_head_dim);
  if (!sc_hf_layer_index_shared(c, l)) { /* glm_moe_dsa's shared layers have no indexer */
    add_linear(b, ATTN("indexer.wq_b"), (int64_t)c->index_n_heads * c->index_head_dim,
               c->q_lora_rank);
    add_linear(b, ATTN("indexer.wk"), c->index_head_dim, hid);
    add(b, SC_HF_FLOAT, c->index_head_dim, 0, "%s.weight", ATTN("indexer.k_norm"));
    add(b, SC_HF_FLOAT, c->index_head_dim, 0, "%s.bias", ATTN("indexer.k_norm"));
    add(b, SC_HF_FLOAT, c->index_n_heads, hid, "%s.weight", ATTN("indexer.weights_proj"));
  }
#undef ATTN
  add(b, SC_HF_FLOAT, hid, 0, "model.layers.%d.post_attention_layernorm.weight", l);
  snprintf(p, sizeof p, "model.layers.%d.mlp", l);
  if (!sc_hf_layer_is_moe(c, l)) {
    add_mlp(b, p, c->intermediate_size);
    return;
  }
  add(b, SC_HF_FLOAT, c->n_routed_experts, hid, "%s.gate.weight", p);
  add(b, SC_HF_FLOAT, c->n_routed_experts, 0, "%s.gate.e_score_correction_bias", p);
  for (int32_t e = 0; e < c->n_routed_experts; e++) {
    snprintf(q, sizeof q, "%s.experts.%d", p, e);
    add_mlp(b, q, c->moe_intermediate_size);
  }
  snprintf(q, sizeof q, "%s.shared_experts", p);
  add_mlp(b, q, (int64_t)c->moe_intermediate_size * c->n_shared_experts);
}

int sc_hf_tensor_table(const sc_hf_config *cfg, sc_hf_spec **out, int32_t *num, sc_diag *d) {
  table b = {.cfg = cfg};
  add(&b, SC_HF_FLOAT, cfg->vocab_size, cfg->hidden_size, "model.embed_tokens.weight");
  for (int32_t l = 0; l < cfg->num_hidden_layers; l++) add_layer(&b, l);
  add(&b, SC_HF_FLOAT, cfg->hidden_size, 0, "model.norm.weight");
  if (!cfg->tie_word_embeddings)
    add(&b, SC_HF_FLOAT, cfg->vocab_size, cfg->hidden_size, "lm_head.weight");
  if (b.oom) {
    free(b.v);
    return sc_fail(d, SC_ENOMEM, "out of memory building the tensor table");
  }
  *out = b.v;
  *num = b.n;
  return 0;
}

bool sc_hf_is_mtp_tensor(const sc_hf_config *cfg, const char *name) {
  static const char prefix[] = "model.layers.";
  if (strncmp(name, prefix, sizeof prefix - 1)) return false;
  const char *s = name + sizeof prefix - 1;
  if (*s < '0' || *s > '9' || (*s == '0' && s[1] != '.')) return false;
  long n = 0;
  for (; *s >= '0' && *s <= '9' && n < INT_MAX / 10; s++) n = n * 10 + (*s - '0');
  return *s == '.' && n >= cfg->num_hidden_layers &&
         n < (long)cfg->num_hidden_layers + cfg->num_nextn_predict_layers;
}

/* ---- opening a directory ---- */

static int cmp_spec(const void *a, const void *b) {
  return strcmp(((const sc_hf_spec *)a)->name, ((const sc_hf_spec *)b)->name);
}

static int32_t find_index(const sc_hf_checkpoint *c, const char *name) {
  int32_t lo = 0, hi = c->num - 1;
  while (lo <= hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    const int k = strcmp(name, c->spec[mid].name);
    if (k == 0) return mid;
    if (k < 0) hi = mid - 1;
    else lo = mid + 1;
  }
  return -1;
}

const sc_hf_tensor *sc_hf_checkpoint_find(const sc_hf_checkpoint *c, const char *name) {
  const int32_t i = find_index(c, name);
  return i < 0 ? NULL : &c->t[i];
}

void sc_hf_checkpoint_close(sc_hf_checkpoint *c) {
  for (int32_t i = 0; i < c->num_shards; i++) {
    if (c->shards) sc_st_close(&c->shards[i]);
    if (c->shard_names) free(c->shard_names[i]);
  }
  free(c->shards);
  free(c->shard_names);
  free(c->spec);
  free(c->t);
  memset(c, 0, sizeof *c);
}

/* The shard files named so far: ids by name (a jansson object as a hash table, so that a
 * weight_map of many tensors and shards costs no quadratic search). */
typedef struct shard_set {
  json_t *ids;  /* name -> id */
  int32_t cap;  /* of c->shard_names */
} shard_set;

/* The id of shard file name in *id (added when new). SC_EINVAL past SC_HF_MAX_SHARDS. */
static int shard_id(sc_hf_checkpoint *c, shard_set *ss, const char *name, int32_t *id,
                    sc_diag *d) {
  json_t *known = json_object_get(ss->ids, name);
  if (known != NULL) {
    *id = (int32_t)json_integer_value(known);
    return 0;
  }
  if (c->num_shards == SC_HF_MAX_SHARDS)
    return sc_fail(d, SC_EINVAL, "model.safetensors.index.json: the weight_map names more than "
                   "%d shard files", SC_HF_MAX_SHARDS);
  if (c->num_shards == ss->cap) {
    const int32_t n = ss->cap ? 2 * ss->cap : 16;
    char **v = realloc(c->shard_names, (size_t)n * sizeof *v);
    if (v == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
    c->shard_names = v;
    ss->cap = n;
  }
  if ((c->shard_names[c->num_shards] = strdup(name)) == NULL ||
      json_object_set_new(ss->ids, name, json_integer(c->num_shards)) != 0) {
    free(c->shard_names[c->num_shards]);
    c->shard_names[c->num_shards] = NULL;
    return sc_fail(d, SC_ENOMEM, "out of memory");
  }
  *id = c->num_shards++;
  return 0;
}

/* dir/name into path (PATH_MAX bytes); SC_EINVAL when it does not fit (a cut path could
 * name another file). */
static int join(char *path, const char *dir, const char *name, sc_diag *d) {
  const int n = snprintf(path, PATH_MAX, "%s/%s", dir, name);
  if (n < 0 || n >= PATH_MAX)
    return sc_fail(d, SC_EINVAL, "the path of %s in %.64s... is longer than %d bytes", name,
                   dir, PATH_MAX - 1);
  return 0;
}

static bool plain_file_name(const char *s) {
  return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") && strcmp(s, "..") &&
         strlen(s) <= 255;
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
  size_t len = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* Whether two shapes are equal once their dimensions of size 1 are dropped. */
static bool same_squeezed(int na, const int64_t *a, int nb, const int64_t *b) {
  int i = 0, j = 0;
  for (;;) {
    while (i < na && a[i] == 1) i++;
    while (j < nb && b[j] == 1) j++;
    if (i == na || j == nb) return i == na && j == nb;
    if (a[i++] != b[j++]) return false;
  }
}

/* A shard tensor of the table: dtype and shape. A scale may come squeezed: transformers
 * 5.17 writes a routed expert's [n, 1] or [1, n] weight_scale_inv as [n] (the same bytes
 * in the same order). */
static int check_tensor(const sc_hf_checkpoint *c, const sc_hf_spec *s, const sc_st_tensor *t,
                        const char *shard, sc_diag *d) {
  bool ok;
  const char *want;
  if (s->kind == SC_HF_SCALE) {
    ok = t->dtype == SC_ST_F32;
    want = "F32";
  } else if (s->kind == SC_HF_LINEAR && c->cfg.quant.fp8) {
    ok = t->dtype == SC_ST_F8_E4M3;
    want = "F8_E4M3 (quantization_config is fp8)";
  } else {
    ok = t->dtype == SC_ST_F32 || t->dtype == SC_ST_BF16;
    want = s->kind == SC_HF_LINEAR ? "BF16 or F32 (no quantization_config)" : "BF16 or F32";
  }
  if (!ok)
    return sc_fail(d, SC_EINVAL, "tensor \"%s\" (in %s) has dtype %s; it must be %s", s->name,
                   shard, sc_st_dtype_name(t->dtype), want);
  const bool exact = t->ndim == s->ndim && t->shape[0] == s->shape[0] &&
                     (s->ndim == 1 || t->shape[1] == s->shape[1]);
  if (!exact &&
      !(s->kind == SC_HF_SCALE && same_squeezed(t->ndim, t->shape, s->ndim, s->shape))) {
    char got[96], need[64];
    shape_text(got, sizeof got, t->ndim, t->shape);
    shape_text(need, sizeof need, s->ndim, s->shape);
    return sc_fail(d, SC_EINVAL, "tensor \"%s\" (in %s) has shape %s; the config needs %s",
                   s->name, shard, got, need);
  }
  return 0;
}

/* weight_map, or NULL for the single-file layout: which shard each name is listed in. */
typedef struct listing {
  json_t *map;
  int32_t *spec_shard; /* [num] shard id the map names, -1 = not listed */
} listing;

static int read_index(const char *text, size_t len, sc_hf_checkpoint *c, listing *ls,
                      shard_set *ss, json_t **root, sc_diag *d) {
  json_error_t jerr;
  *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (*root == NULL)
    return sc_fail(d, SC_EINVAL, "model.safetensors.index.json: invalid JSON at line %d: %s",
                   jerr.line, jerr.text);
  ls->map = json_object_get(*root, "weight_map");
  if (!json_is_object(ls->map))
    return sc_fail(d, SC_EINVAL, "model.safetensors.index.json: \"weight_map\" must be an "
                                 "object of tensor name -> shard file");
  const char *name;
  json_t *v;
  json_object_foreach(ls->map, name, v) {
    if (!json_is_string(v) || !plain_file_name(json_string_value(v)))
      return sc_fail(d, SC_EINVAL, "model.safetensors.index.json: weight_map[\"%.96s\"] must "
                     "be the name of a file in the directory", name);
    int32_t s;
    int rc = shard_id(c, ss, json_string_value(v), &s, d);
    if (rc) return rc;
    const int32_t i = find_index(c, name);
    if (i >= 0) {
      ls->spec_shard[i] = s;
    } else if (!sc_hf_is_mtp_tensor(&c->cfg, name)) {
      return sc_fail(d, SC_EINVAL, "extra tensor \"%.96s\" (weight_map, %s): a deepseek_v32 "
                     "model of this config has no such tensor", name, json_string_value(v));
    }
  }
  return 0;
}

/* The first tensor the weight_map puts in shard. */
static const char *first_listed(const listing *ls, const char *shard) {
  const char *name;
  json_t *v;
  json_object_foreach(ls->map, name, v) if (!strcmp(json_string_value(v), shard)) return name;
  return "?";
}

/* Every tensor of shard s: listed there, of the table (checked) or MTP (skipped). */
static int scan_shard(sc_hf_checkpoint *c, const listing *ls, int32_t s, int32_t *mtp_listed,
                      sc_diag *d) {
  const sc_st_file *f = &c->shards[s];
  const char *shard = c->shard_names[s];
  int rc;
  for (int32_t k = 0; k < f->num; k++) {
    const sc_st_tensor *t = &f->t[k];
    if (ls->map != NULL) {
      json_t *m = json_object_get(ls->map, t->name);
      if (m == NULL || strcmp(json_string_value(m), shard))
        return sc_fail(d, SC_EINVAL, "tensor \"%s\" is in %s, but the weight_map %s%s", t->name,
                       shard, m ? "puts it in " : "does not list it",
                       m ? json_string_value(m) : "");
    }
    if (sc_hf_is_mtp_tensor(&c->cfg, t->name)) {
      c->mtp_tensors++;
      c->mtp_bytes += t->end - t->begin;
      (*mtp_listed)--;
      continue;
    }
    const int32_t i = find_index(c, t->name);
    if (i < 0)
      return sc_fail(d, SC_EINVAL, "extra tensor \"%s\" (in %s): a deepseek_v32 model of this "
                     "config has no such tensor", t->name, shard);
    if (c->t[i].data != NULL)
      return sc_fail(d, SC_EINVAL, "tensor \"%s\" is in both %s and %s", t->name,
                     c->shard_names[c->t[i].shard], shard);
    if ((rc = check_tensor(c, &c->spec[i], t, shard, d))) return rc;
    const sc_hf_spec *sp = &c->spec[i];
    c->t[i] = (sc_hf_tensor){.name = sp->name, .dtype = t->dtype, .ndim = sp->ndim,
                             .shape = {sp->shape[0], sp->shape[1]},
                             .data = f->data + t->begin, .bytes = t->end - t->begin,
                             .shard = s};
    if (t->dtype == SC_ST_F32) c->bytes_f32 += t->end - t->begin;
    else if (t->dtype == SC_ST_BF16) c->bytes_bf16 += t->end - t->begin;
    else c->bytes_f8 += t->end - t->begin;
  }
  return 0;
}

/* The weight_map lists an MTP tensor that its shard does not hold: name it. */
static int missing_mtp(const sc_hf_checkpoint *c, const listing *ls, sc_diag *d) {
  const char *name;
  json_t *v;
  json_object_foreach(ls->map, name, v) {
    if (!sc_hf_is_mtp_tensor(&c->cfg, name)) continue;
    for (int32_t s = 0; s < c->num_shards; s++)
      if (!strcmp(c->shard_names[s], json_string_value(v)) && !sc_st_find(&c->shards[s], name))
        return sc_fail(d, SC_EINVAL, "the weight_map puts tensor \"%.96s\" in %s, which does "
                       "not hold it", name, c->shard_names[s]);
  }
  return sc_fail(d, SC_EINVAL, "the weight_map and the shards disagree about the "
                               "multi-token-prediction tensors");
}

int sc_hf_checkpoint_open(const char *dir, sc_hf_checkpoint *c, sc_diag *d) {
  memset(c, 0, sizeof *c);
  listing ls = {0};
  shard_set ss = {0};
  json_t *index = NULL;
  char *index_text = NULL;
  size_t index_len = 0;
  char path[PATH_MAX];
  int rc = join(path, dir, "config.json", d);
  if (rc || (rc = sc_hf_config_load(path, &c->cfg, d))) goto fail;
  if ((rc = sc_hf_tensor_table(&c->cfg, &c->spec, &c->num, d))) goto fail;
  qsort(c->spec, (size_t)c->num, sizeof *c->spec, cmp_spec);
  c->t = calloc((size_t)c->num, sizeof *c->t);
  ls.spec_shard = malloc((size_t)c->num * sizeof *ls.spec_shard);
  if (c->t == NULL || ls.spec_shard == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory for %d tensors", c->num);
    goto fail;
  }
  for (int32_t i = 0; i < c->num; i++) ls.spec_shard[i] = -1;
  if ((ss.ids = json_object()) == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto fail;
  }
  /* The index when it exists (one that cannot be read is an error, not a reason to look
   * for model.safetensors), else the single file. */
  if ((rc = join(path, dir, "model.safetensors.index.json", d))) goto fail;
  sc_diag id = {0};
  rc = sc_file_read(path, 256u << 20, &index_text, &index_len, &id);
  c->indexed = rc != SC_ENOENT;
  if (rc != 0 && rc != SC_ENOENT) {
    rc = sc_fail(d, rc, "%s", sc_diag_message(&id));
    goto fail;
  }
  int32_t single;
  if (c->indexed) {
    rc = read_index(index_text, index_len, c, &ls, &ss, &index, d);
    free(index_text); /* parsed: the text is not needed any more */
    index_text = NULL;
    if (rc) goto fail;
  } else if ((rc = shard_id(c, &ss, "model.safetensors", &single, d))) {
    goto fail;
  }
  if ((c->shards = calloc((size_t)c->num_shards + 1, sizeof *c->shards)) == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto fail;
  }
  for (int32_t s = 0; s < c->num_shards; s++) {
    if ((rc = join(path, dir, c->shard_names[s], d))) goto fail;
    sc_diag sd = {0};
    if ((rc = sc_st_open(path, &c->shards[s], &sd))) {
      if (!c->indexed && rc == SC_ENOENT)
        sc_fail(d, rc, "%s holds neither model.safetensors.index.json nor model.safetensors",
                dir);
      else
        sc_fail(d, rc, "shard %s%s%s%s: %s", c->shard_names[s],
                c->indexed ? " (where the weight_map puts tensor \"" : "",
                c->indexed ? first_listed(&ls, c->shard_names[s]) : "", c->indexed ? "\")" : "",
                sc_diag_message(&sd));
      goto fail;
    }
  }
  int32_t mtp_listed = 0;
  if (ls.map != NULL) {
    const char *name;
    json_t *v;
    json_object_foreach(ls.map, name, v) mtp_listed += sc_hf_is_mtp_tensor(&c->cfg, name);
  }
  for (int32_t s = 0; s < c->num_shards; s++)
    if ((rc = scan_shard(c, &ls, s, &mtp_listed, d))) goto fail;
  if (ls.map != NULL && mtp_listed != 0) {
    rc = missing_mtp(c, &ls, d);
    goto fail;
  }
  for (int32_t i = 0; i < c->num; i++) {
    if (c->t[i].data != NULL) continue;
    if (ls.map != NULL && ls.spec_shard[i] >= 0)
      rc = sc_fail(d, SC_EINVAL, "the weight_map puts tensor \"%s\" in %s, which does not "
                   "hold it", c->spec[i].name, c->shard_names[ls.spec_shard[i]]);
    else
      rc = sc_fail(d, SC_EINVAL, "tensor \"%s\" is missing (a deepseek_v32 model of this "
                   "config has it)", c->spec[i].name);
    goto fail;
  }
  free(ls.spec_shard);
  json_decref(ss.ids);
  json_decref(index);
  return 0;
fail:
  free(ls.spec_shard);
  json_decref(ss.ids);
  json_decref(index);
  free(index_text);
  sc_hf_checkpoint_close(c);
  return rc;
}
