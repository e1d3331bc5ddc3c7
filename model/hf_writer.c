/* hf_writer.c - a small DeepSeek-V3.2 checkpoint directory of the real layout
 * (hf_writer.h). */
#include "model/hf_writer.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
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
#include "model/hf_model.h"
#include "model/safetensors.h"

#define BLOCK 128        /* weight_block_size, as DeepSeek's release */
#define FP8_MAX 448.0f   /* the largest finite e4m3fn value */
#define MAX_SHARDS 99

void sc_hf_gen_default(sc_hf_gen *g) {
  *g = (sc_hf_gen){.layers = 4, .dense_layers = 2, .experts = 16, .hidden = 256,
                   .vocab = 2048, .shards = 2, .fp8 = true, .seed = 1};
}

/* ---- config.json ---- */

static int check_gen(const sc_hf_gen *g, sc_diag *d) {
  if (g->layers < 1 || g->layers > 64)
    return sc_fail(d, SC_EINVAL, "layers = %d: must be in [1, 64]", g->layers);
  if (g->dense_layers < 0 || g->dense_layers > g->layers)
    return sc_fail(d, SC_EINVAL, "dense layers = %d: must be in [0, layers = %d]",
                   g->dense_layers, g->layers);
  if (g->experts < 8 || g->experts > 256 || g->experts % 4)
    return sc_fail(d, SC_EINVAL, "experts = %d: must be a multiple of 4 in [8, 256] (4 groups "
                   "of at least 2, 2 groups chosen, 4 experts per token)", g->experts);
  if (g->hidden < 64 || g->hidden > 4096 || g->hidden % 64)
    return sc_fail(d, SC_EINVAL, "hidden = %d: must be a multiple of 64 in [64, 4096]",
                   g->hidden);
  if (g->vocab < 256 || g->vocab > 131072)
    return sc_fail(d, SC_EINVAL, "vocab = %d: must be in [256, 131072]", g->vocab);
  if (g->shards < 1 || g->shards > MAX_SHARDS)
    return sc_fail(d, SC_EINVAL, "shards = %d: must be in [1, %d]", g->shards, MAX_SHARDS);
  return 0;
}

static json_t *config_json(const sc_hf_gen *g) {
  const int32_t h = g->hidden, heads = h / 32, nope = 32, rope = 16;
  json_t *layer_types = json_array(), *mlp_types = json_array(), *index_types = json_array();
  for (int32_t l = 0; l < g->layers; l++) {
    json_array_append_new(layer_types, json_string("deepseek_sparse_attention"));
    json_array_append_new(mlp_types, json_string(l < g->dense_layers ? "dense" : "sparse"));
    json_array_append_new(index_types, json_string(l % 2 ? "shared" : "full"));
  }
  json_t *c = json_pack(
      "{s:[s], s:b, s:f, s:i, s:i, s:s, s:i, s:i, s:s, s:i, s:i, s:i, s:i, s:f, s:i, s:i,"
      " s:o, s:i, s:b, s:o, s:s, s:i}",
      "architectures", g->glm ? "GlmMoeDsaForCausalLM" : "DeepseekV32ForCausalLM",
      "attention_bias", 0, "attention_dropout", 0.0,
      "bos_token_id", 0, "eos_token_id", 1, "dtype", "bfloat16", "first_k_dense_replace",
      g->dense_layers, "head_dim", rope, "hidden_act", "silu", "hidden_size", h,
      "index_head_dim", 64, "index_n_heads", 4, "index_topk", 64, "initializer_range", 0.02,
      "intermediate_size", 5 * h / 2, "kv_lora_rank", h / 4, "layer_types", layer_types,
      "max_position_embeddings", 2048, "mlp_bias", 0, "mlp_layer_types", mlp_types,
      "model_type", g->glm ? "glm_moe_dsa" : "deepseek_v32", "moe_intermediate_size", h / 4);
  json_t *rest = json_pack(
      "{s:i, s:i, s:i, s:b, s:i, s:i, s:i, s:i, s:n, s:i, s:i, s:i, s:i, s:f, s:f, s:b,"
      " s:i, s:b, s:i, s:i}",
      "n_group", 4, "n_routed_experts", g->experts, "n_shared_experts", 1, "norm_topk_prob", 1,
      "num_attention_heads", heads, "num_experts_per_tok", 4, "num_hidden_layers", g->layers,
      "num_key_value_heads", heads, "pad_token_id", "q_lora_rank", h / 2, "qk_head_dim",
      nope + rope, "qk_nope_head_dim", nope, "qk_rope_head_dim", rope, "rms_norm_eps",
      g->glm ? 1e-5 : 1e-6,
      "routed_scaling_factor", 2.5, "tie_word_embeddings", 0, "topk_group", 2, "use_cache", 1,
      "v_head_dim", 32, "vocab_size", g->vocab);
  json_t *rp = json_pack("{s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:s}", "beta_fast", 32.0,
                         "beta_slow", 1.0, "factor", 4.0, "mscale", 1.0, "mscale_all_dim", 1.0,
                         "original_max_position_embeddings", 512, "rope_theta", 10000.0,
                         "rope_type", "yarn");
  if (c == NULL || rest == NULL || rp == NULL || index_types == NULL ||
      json_object_update(c, rest) != 0 || json_object_set_new(c, "rope_parameters", rp) != 0)
    goto oom;
  rp = NULL;
  json_t *it = index_types; /* set_new takes it, whether it succeeds or not */
  index_types = NULL;
  if (!g->glm)
    json_decref(it);
  else if (json_object_set_new(c, "indexer_types", it) != 0 ||
           json_object_set_new(c, "indexer_rope_interleave", json_true()) != 0)
    goto oom;
  json_decref(rest);
  rest = NULL;
  if (g->fp8) {
    json_t *q = json_pack("{s:s, s:b, s:n, s:n, s:s, s:s, s:[i, i]}", "activation_scheme",
                          "dynamic", "dequantize", 0, "modules_to_convert",
                          "modules_to_not_convert", "quant_method", "fp8", "scale_fmt", "float",
                          "weight_block_size", BLOCK, BLOCK);
    if (q == NULL || json_object_set_new(c, "quantization_config", q) != 0) goto oom;
  }
  return c;
oom:
  json_decref(c);
  json_decref(rest);
  json_decref(rp);
  json_decref(index_types);
  return NULL;
}

static char *dump(json_t *j) {
  return json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
}

int sc_hf_gen_config(const sc_hf_gen *g, char **text, sc_hf_config *c, sc_diag *d) {
  int rc = check_gen(g, d);
  if (rc) return rc;
  json_t *j = config_json(g);
  char *t = j ? dump(j) : NULL;
  json_decref(j);
  if (t == NULL) return sc_fail(d, SC_ENOMEM, "out of memory making config.json");
  /* the reader's own checks, so that what is written is what it reads and serves */
  sc_hf_config hf;
  sc_model_config m;
  sc_diag why = {0};
  if ((rc = sc_hf_config_parse(t, strlen(t), &hf, &why)) ||
      (rc = sc_model_config_from_hf(&hf, &m, &why))) {
    free(t);
    return sc_fail(d, rc, "the generated config is refused: %s", sc_diag_message(&why));
  }
  if (c != NULL) *c = hf;
  *text = t;
  return 0;
}

/* ---- tensor values ---- */

typedef enum role { R_LINEAR, R_EMBED, R_NORM, R_BIAS, R_SCALE } role;

static bool ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

static role role_of(const sc_hf_spec *s) {
  if (s->kind == SC_HF_SCALE) return R_SCALE;
  if (s->kind == SC_HF_LINEAR) return R_LINEAR;
  if (ends_with(s->name, "embed_tokens.weight")) return R_EMBED;
  if (ends_with(s->name, ".bias")) return R_BIAS;
  return s->ndim == 1 ? R_NORM : R_LINEAR; /* norms; lm_head, router, weights_proj */
}

static int64_t cols_of(const sc_hf_spec *s) { return s->ndim == 2 ? s->shape[1] : s->shape[0]; }
static int64_t rows_of(const sc_hf_spec *s) { return s->ndim == 2 ? s->shape[0] : 1; }

/* Element (r, c) of tensor s (not a scale) before any rounding. */
static float value(const sc_hf_spec *s, uint64_t ts, int64_t r, int64_t c) {
  const int64_t cols = cols_of(s);
  const float u = sc_hash_pm1(ts, r * cols + c);
  switch (role_of(s)) {
  case R_EMBED: return u;
  case R_NORM: return 1.0f + 0.1f * u;
  case R_BIAS: return 0.1f * u;
  default: return u / sqrtf((float)cols);
  }
}

/* The 128 x 128 block (br, bc) of weight s: scale_inv (the largest |w| / 448, 1 for an
 * all-zero block) and, when q is not NULL, its e4m3 codes into q (row-major, cols wide). */
static float quantize_block(const sc_hf_spec *s, uint64_t ts, int64_t br, int64_t bc,
                            uint8_t *q) {
  const int64_t rows = rows_of(s), cols = cols_of(s);
  const int64_t r1 = (br + 1) * BLOCK < rows ? (br + 1) * BLOCK : rows;
  const int64_t c1 = (bc + 1) * BLOCK < cols ? (bc + 1) * BLOCK : cols;
  float amax = 0.0f;
  for (int64_t r = br * BLOCK; r < r1; r++)
    for (int64_t c = bc * BLOCK; c < c1; c++) amax = fmaxf(amax, fabsf(value(s, ts, r, c)));
  const float scale_inv = amax > 0.0f ? amax / FP8_MAX : 1.0f;
  if (q != NULL)
    for (int64_t r = br * BLOCK; r < r1; r++)
      for (int64_t c = bc * BLOCK; c < c1; c++)
        q[r * cols + c] = sc_f32_to_e4m3(value(s, ts, r, c) / scale_inv);
  return scale_inv;
}

typedef struct writer {
  const sc_hf_gen *g;
  const sc_hf_spec *spec; /* the table */
  int32_t num;
  int *dtype;             /* [num] sc_st_dtype */
  const int32_t *idx;     /* the shard being written: its table indices */
} writer;

static int fill(void *ud, int32_t i, void *dst) {
  const writer *w = ud;
  const int32_t t = w->idx[i];
  const sc_hf_spec *s = &w->spec[t];
  if (role_of(s) == R_SCALE) { /* the scales of the weight right before it (table order) */
    assert(t > 0 && w->spec[t - 1].kind == SC_HF_LINEAR);
    const sc_hf_spec *ws = &w->spec[t - 1];
    const uint64_t ts = sc_hash_name(w->g->seed, ws->name);
    for (int64_t br = 0; br < s->shape[0]; br++)
      for (int64_t bc = 0; bc < s->shape[1]; bc++) {
        const float v = quantize_block(ws, ts, br, bc, NULL);
        memcpy((char *)dst + 4 * (br * s->shape[1] + bc), &v, 4);
      }
    return 0;
  }
  const uint64_t ts = sc_hash_name(w->g->seed, s->name);
  const int64_t rows = rows_of(s), cols = cols_of(s);
  if (w->dtype[t] == SC_ST_F8_E4M3) {
    for (int64_t br = 0; br * BLOCK < rows; br++)
      for (int64_t bc = 0; bc * BLOCK < cols; bc++) quantize_block(s, ts, br, bc, dst);
    return 0;
  }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      const float v = value(s, ts, r, c);
      const int64_t e = r * cols + c;
      if (w->dtype[t] == SC_ST_F32) {
        memcpy((char *)dst + 4 * e, &v, 4);
      } else {
        const uint16_t b = sc_f32_to_bf16(v);
        memcpy((char *)dst + 2 * e, &b, 2);
      }
    }
  return 0;
}

static int dtype_of(const sc_hf_spec *s, bool fp8) {
  if (s->kind == SC_HF_SCALE) return SC_ST_F32;
  if (s->kind == SC_HF_LINEAR) return fp8 ? SC_ST_F8_E4M3 : SC_ST_BF16;
  return fp8 && ends_with(s->name, "e_score_correction_bias") ? SC_ST_F32 : SC_ST_BF16;
}

/* ---- files ---- */

/* dir/file into path (PATH_CAP bytes); false when it does not fit. */
#define PATH_CAP 4200
static bool join(char *path, const char *dir, const char *file) {
  const int n = snprintf(path, PATH_CAP, "%s/%s", dir, file);
  return n >= 0 && n < PATH_CAP;
}

static int write_text(const char *dir, const char *file, const char *text, sc_diag *d) {
  char path[PATH_CAP];
  if (!join(path, dir, file)) return sc_fail(d, SC_EINVAL, "path too long: %s/%s", dir, file);
  FILE *f = fopen(path, "w");
  if (f == NULL) return sc_fail(d, SC_EIO, "cannot create %s: %s", path, strerror(errno));
  const bool ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  if (fclose(f) != 0 || !ok) return sc_fail(d, SC_EIO, "cannot write %s", path);
  return 0;
}

static int write_json(const char *dir, const char *file, json_t *j, sc_diag *d) {
  char *t = j ? dump(j) : NULL;
  json_decref(j);
  if (t == NULL) return sc_fail(d, SC_ENOMEM, "out of memory making %s", file);
  const int rc = write_text(dir, file, t, d);
  free(t);
  return rc;
}

/* The shard of each table entry: consecutive runs of about equal bytes, a scale with its
 * weight, every shard non-empty (shards <= the number of weights). */
static int assign_shards(const writer *w, const uint64_t *bytes, int32_t n, int32_t *shard,
                         sc_diag *d) {
  int32_t groups = 0;
  uint64_t total = 0;
  for (int32_t t = 0; t < w->num; t++) {
    groups += w->spec[t].kind != SC_HF_SCALE;
    total += bytes[t];
  }
  if (n > groups)
    return sc_fail(d, SC_EINVAL, "shards = %d: the model has only %d weights to spread", n,
                   groups);
  uint64_t before = 0;
  int32_t s = 0, g = 0;
  for (int32_t t = 0; t < w->num; t++) {
    if (w->spec[t].kind != SC_HF_SCALE) {
      if (g > 0) {
        int32_t want = (int32_t)((double)before * n / (double)total);
        if (want > s + 1) want = s + 1;           /* one shard at a time: none stays empty */
        if (want < n - (groups - g)) want = n - (groups - g); /* enough left for the rest */
        s = want > s ? want : s;
      }
      g++;
    }
    shard[t] = s;
    before += bytes[t];
  }
  return 0;
}

static int write_shards(const char *dir, writer *w, int32_t n, sc_diag *d) {
  const int32_t num = w->num;
  uint64_t *bytes = calloc((size_t)num, sizeof *bytes);
  int32_t *shard = calloc((size_t)num, sizeof *shard), *idx = calloc((size_t)num, sizeof *idx);
  sc_st_out *out = calloc((size_t)num, sizeof *out);
  json_t *map = json_object();
  int rc = 0;
  if (bytes == NULL || shard == NULL || idx == NULL || out == NULL || map == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto out;
  }
  uint64_t total = 0, params = 0;
  for (int32_t t = 0; t < num; t++) {
    const sc_hf_spec *s = &w->spec[t];
    const uint64_t numel = (uint64_t)rows_of(s) * (uint64_t)cols_of(s);
    bytes[t] = numel * sc_st_dtype_size(w->dtype[t]);
    total += bytes[t];
    /* transformers counts parameters, not buffers: the bias is a buffer */
    if (!ends_with(s->name, "e_score_correction_bias")) params += numel;
  }
  if ((rc = assign_shards(w, bytes, n, shard, d))) goto out;
  static const char *const META[] = {"format", "pt", NULL};
  for (int32_t k = 0, t0 = 0; k < n; k++) {
    char file[64], path[PATH_CAP];
    if (n == 1) snprintf(file, sizeof file, "model.safetensors");
    else snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", k + 1, n);
    int32_t m = 0;
    for (int32_t t = t0; t < num && shard[t] == k; t++, m++) {
      const sc_hf_spec *s = &w->spec[t];
      idx[m] = t;
      out[m] = (sc_st_out){.name = s->name, .dtype = w->dtype[t], .ndim = s->ndim,
                           .shape = {s->shape[0], s->shape[1]}};
      if (json_object_set_new(map, s->name, json_string(file)) != 0) {
        rc = sc_fail(d, SC_ENOMEM, "out of memory");
        goto out;
      }
    }
    t0 += m;
    w->idx = idx;
    if (!join(path, dir, file)) {
      rc = sc_fail(d, SC_EINVAL, "path too long: %s/%s", dir, file);
      goto out;
    }
    if ((rc = sc_st_write_meta(path, out, m, fill, w, META, d))) goto out;
  }
  if (n > 1) {
    json_t *index = json_pack("{s:{s:I, s:I}, s:O}", "metadata", "total_parameters",
                              (json_int_t)params, "total_size", (json_int_t)total,
                              "weight_map", map);
    rc = write_json(dir, "model.safetensors.index.json", index, d);
  }
out:
  json_decref(map);
  free(bytes);
  free(shard);
  free(idx);
  free(out);
  return rc;
}

/* Writes every file of the checkpoint into the existing empty folder dir. */
static int write_files(const char *dir, const sc_hf_gen *g, const char *config_text,
                       const sc_hf_config *cfg, sc_diag *d) {
  sc_hf_spec *spec = NULL;
  int32_t num = 0;
  int *dtype = NULL;
  int rc = write_text(dir, "config.json", config_text, d);
  if (rc) return rc;
  json_t *gen = json_pack("{s:b, s:i, s:i, s:b, s:b, s:b}", "_from_model_config", 1,
                          "bos_token_id", 0, "eos_token_id", 1, "output_attentions", 0,
                          "output_hidden_states", 0, "use_cache", 1);
  if ((rc = write_json(dir, "generation_config.json", gen, d))) return rc;
  if ((rc = sc_hf_tensor_table(cfg, &spec, &num, d))) return rc;
  if ((dtype = calloc((size_t)num, sizeof *dtype)) == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto out;
  }
  for (int32_t t = 0; t < num; t++) dtype[t] = dtype_of(&spec[t], cfg->quant.fp8);
  writer w = {.g = g, .spec = spec, .num = num, .dtype = dtype};
  rc = write_shards(dir, &w, g->shards, d);
out:
  free(dtype);
  free(spec);
  return rc;
}

/* Removes the folder dir and the files in it (ours: nothing else writes there). */
static void remove_dir(const char *dir) {
  DIR *dp = opendir(dir);
  if (dp != NULL) {
    const struct dirent *e;
    char path[PATH_CAP];
    while ((e = readdir(dp)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      if (join(path, dir, e->d_name)) unlink(path);
    }
    closedir(dp);
  }
  rmdir(dir);
}

/* 0 when dir does not exist or is an empty folder; SC_EINVAL when it holds anything or
 * is not a folder; SC_EIO when it cannot be looked at. */
static int check_target(const char *dir, sc_diag *d) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (errno == ENOENT) return 0;
    return sc_fail(d, errno == ENOTDIR ? SC_EINVAL : SC_EIO, "%s: %s", dir, strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return sc_fail(d, SC_EINVAL, "%s exists and is not a directory (nothing is overwritten)",
                   dir);
  DIR *dp = opendir(dir);
  if (dp == NULL) return sc_fail(d, SC_EIO, "cannot read directory %s: %s", dir, strerror(errno));
  const struct dirent *e;
  bool empty = true;
  while (empty && (e = readdir(dp)) != NULL)
    empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
  closedir(dp);
  if (!empty)
    return sc_fail(d, SC_EINVAL, "%s exists and is not empty (nothing is overwritten)", dir);
  return 0;
}

int sc_hf_write_dir(const char *dir_in, const sc_hf_gen *g, sc_diag *d) {
  char dir[4000], tmp[4096];
  size_t len = strlen(dir_in);
  while (len > 1 && dir_in[len - 1] == '/') len--; /* "out/": the sibling is "out.tmp-..." */
  if (len == 0 || len >= sizeof dir || (len == 1 && dir_in[0] == '/'))
    return sc_fail(d, SC_EINVAL, "bad directory name \"%s\"", dir_in);
  memcpy(dir, dir_in, len);
  dir[len] = '\0';
  char *text = NULL;
  sc_hf_config cfg;
  int rc = sc_hf_gen_config(g, &text, &cfg, d);
  if (rc || (rc = check_target(dir, d))) goto out;
  bool made = false;
  for (int i = 0; i < 1000 && !made; i++) {
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%d", dir, (long)getpid(), i);
    if (mkdir(tmp, 0777) == 0) made = true;
    else if (errno != EEXIST) break;
  }
  if (!made) {
    rc = sc_fail(d, errno == ENOENT || errno == ENOTDIR ? SC_EINVAL : SC_EIO,
                 "cannot create a directory beside %s: %s", dir, strerror(errno));
    goto out;
  }
  if ((rc = write_files(tmp, g, text, &cfg, d)) == 0 && rename(tmp, dir) != 0) {
    /* an empty folder is replaced; one that was filled meanwhile is not */
    const bool taken = errno == ENOTEMPTY || errno == EEXIST || errno == ENOTDIR ||
                       errno == EISDIR;
    rc = sc_fail(d, taken ? SC_EINVAL : SC_EIO, "cannot rename %s to %s: %s", tmp, dir,
                 strerror(errno));
  }
  if (rc) remove_dir(tmp);
out:
  free(text);
  return rc;
}
