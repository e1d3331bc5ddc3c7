/* weights.c - the tensor table, synthetic weights, safetensors loading and writing. */
#include "model/weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "kernels/bf16.h"
#include "model/safetensors.h"

typedef struct layer_tensor {
  const char *name;
  sc_wsplit split;
  sc_winit init;
} layer_tensor;

static const layer_tensor LAYER[SC_W_LAYER_COUNT] = {
    [SC_W_ATTN_NORM] = {"attn_norm.weight", SC_SPLIT_NONE, SC_INIT_NORM},
    [SC_W_WQ_A] = {"attn.wq_a.weight", SC_SPLIT_NONE, SC_INIT_LINEAR},
    [SC_W_Q_NORM] = {"attn.q_norm.weight", SC_SPLIT_NONE, SC_INIT_NORM},
    [SC_W_WQ_B] = {"attn.wq_b.weight", SC_SPLIT_ROWS, SC_INIT_LINEAR},
    [SC_W_WKV_A] = {"attn.wkv_a.weight", SC_SPLIT_NONE, SC_INIT_LINEAR},
    [SC_W_KV_NORM] = {"attn.kv_norm.weight", SC_SPLIT_NONE, SC_INIT_NORM},
    [SC_W_WKV_B] = {"attn.wkv_b.weight", SC_SPLIT_ROWS, SC_INIT_LINEAR},
    [SC_W_WO] = {"attn.wo.weight", SC_SPLIT_COLS, SC_INIT_LINEAR},
    [SC_W_IDX_WQ] = {"attn.indexer.wq_b.weight", SC_SPLIT_NONE, SC_INIT_LINEAR},
    [SC_W_IDX_WK] = {"attn.indexer.wk.weight", SC_SPLIT_NONE, SC_INIT_LINEAR},
    [SC_W_IDX_WW] = {"attn.indexer.weights_proj.weight", SC_SPLIT_NONE, SC_INIT_LINEAR},
    [SC_W_FFN_NORM] = {"ffn_norm.weight", SC_SPLIT_NONE, SC_INIT_NORM},
    [SC_W_W1] = {"ffn.w1.weight", SC_SPLIT_ROWS, SC_INIT_LINEAR},
    [SC_W_W3] = {"ffn.w3.weight", SC_SPLIT_ROWS, SC_INIT_LINEAR},
    [SC_W_W2] = {"ffn.w2.weight", SC_SPLIT_COLS, SC_INIT_LINEAR},
};

static void layer_shape(const sc_model_config *c, sc_wkind k, int64_t *rows, int64_t *cols) {
  const int64_t H = c->heads, hid = c->hidden;
  switch (k) {
  case SC_W_ATTN_NORM: case SC_W_FFN_NORM: *rows = 1; *cols = hid; break;
  case SC_W_WQ_A: *rows = c->q_lora_rank; *cols = hid; break;
  case SC_W_Q_NORM: *rows = 1; *cols = c->q_lora_rank; break;
  case SC_W_WQ_B: *rows = H * (c->qk_nope_dim + c->rope_dim); *cols = c->q_lora_rank; break;
  case SC_W_WKV_A: *rows = c->kv_lora_rank + c->rope_dim; *cols = hid; break;
  case SC_W_KV_NORM: *rows = 1; *cols = c->kv_lora_rank; break;
  case SC_W_WKV_B: *rows = H * (c->qk_nope_dim + c->v_head_dim); *cols = c->kv_lora_rank; break;
  case SC_W_WO: *rows = hid; *cols = H * c->v_head_dim; break;
  case SC_W_IDX_WQ: *rows = (int64_t)c->index_heads * c->index_dim; *cols = c->q_lora_rank; break;
  case SC_W_IDX_WK: *rows = c->index_dim; *cols = hid; break;
  case SC_W_IDX_WW: *rows = c->index_heads; *cols = hid; break;
  case SC_W_W1: case SC_W_W3: *rows = c->ffn_hidden; *cols = hid; break;
  case SC_W_W2: *rows = hid; *cols = c->ffn_hidden; break;
  default: *rows = *cols = 0; break;
  }
}

void sc_model_tensor_info(const sc_model_config *c, int32_t index, sc_tensor_info *o) {
  memset(o, 0, sizeof *o);
  if (index < SC_W_GLOBAL_COUNT) {
    static const char *const names[] = {"embed.weight", "norm.weight", "head.weight"};
    snprintf(o->name, sizeof o->name, "%s", names[index]);
    o->split = SC_SPLIT_NONE;
    if (index == SC_W_NORM) {
      o->ndim = 1, o->rows = 1, o->cols = c->hidden, o->init = SC_INIT_NORM;
    } else {
      o->ndim = 2, o->rows = c->vocab, o->cols = c->hidden;
      o->init = index == SC_W_EMBED ? SC_INIT_EMBED : SC_INIT_LINEAR;
    }
    return;
  }
  const int32_t layer = (index - SC_W_GLOBAL_COUNT) / SC_W_LAYER_COUNT;
  const sc_wkind k = (sc_wkind)((index - SC_W_GLOBAL_COUNT) % SC_W_LAYER_COUNT);
  snprintf(o->name, sizeof o->name, "layers.%d.%s", layer, LAYER[k].name);
  layer_shape(c, k, &o->rows, &o->cols);
  o->ndim = LAYER[k].init == SC_INIT_NORM ? 1 : 2;
  o->split = LAYER[k].split;
  o->init = LAYER[k].init;
}

void sc_model_tensor_slice(const sc_tensor_info *t, int32_t tp, int32_t rank, int64_t *row0,
                           int64_t *rows, int64_t *col0, int64_t *cols) {
  *row0 = 0, *rows = t->rows, *col0 = 0, *cols = t->cols;
  if (t->split == SC_SPLIT_ROWS) {
    *rows = t->rows / tp;
    *row0 = *rows * rank;
  } else if (t->split == SC_SPLIT_COLS) {
    *cols = t->cols / tp;
    *col0 = *cols * rank;
  }
}

static float value_at(const sc_model_config *c, const sc_tensor_info *t, uint64_t ts,
                      int64_t r, int64_t col) {
  const float u = sc_hash_pm1(ts, r * t->cols + col);
  switch (t->init) {
  case SC_INIT_NORM: return 1.0f + 0.1f * u;
  case SC_INIT_EMBED: return u;
  default: return u * c->init_scale / sqrtf((float)t->cols);
  }
}

float sc_model_synthetic_value(const sc_model_config *c, const sc_tensor_info *t, int64_t r,
                               int64_t col) {
  return value_at(c, t, sc_hash_name(c->seed, t->name), r, col);
}

int sc_model_weights_expand(sc_kernels *k, const sc_model_weights *w, int32_t layer) {
  if (w->fp8_first == NULL || layer < 0 || layer >= w->cfg.layers) return 0;
  for (int32_t i = w->fp8_first[layer]; i < w->fp8_first[layer + 1]; i++) {
    const sc_fp8_resident *r = &w->fp8[i];
    const int rc = k->ops->dequant_fp8(k, r->mats, r->rows, r->cols, r->q, r->scale, r->srows,
                                       r->scols, r->r_off, r->c_off, r->block_rows,
                                       r->block_cols, *r->slot);
    if (rc) return rc;
  }
  return 0;
}

void sc_model_weights_free(sc_kernels *k, sc_model_weights *w) {
  /* the table entries of resident fp8 weights point into the shared scratch buffers:
   * cleared here, the buffers freed once */
  for (int32_t i = 0; i < w->num_fp8; i++) {
    if (w->fp8[i].slot) *w->fp8[i].slot = NULL;
    if (w->fp8[i].q) k->ops->free(k, w->fp8[i].q);
    if (w->fp8[i].scale) k->ops->free(k, w->fp8[i].scale);
  }
  for (int32_t i = 0; i < w->num_scratch; i++)
    if (w->scratch[i]) k->ops->free(k, w->scratch[i]);
  free(w->fp8);
  free(w->fp8_first);
  free(w->scratch);
  if (w->t != NULL && w->flat == NULL) /* (else they point into the caller's buffer) */
    for (int32_t i = 0; i < w->num; i++)
      if (w->t[i]) k->ops->free(k, w->t[i]);
  if (w->own != NULL)
    for (int32_t i = 0; i < w->num; i++)
      if (w->own[i]) k->ops->free(k, w->own[i]);
  free(w->own);
  if (w->x != NULL)
    for (int32_t i = 0; i < w->cfg.layers * SC_WX_COUNT; i++)
      if (w->x[i]) k->ops->free(k, w->x[i]);
  free(w->t);
  free(w->x);
  memset(w, 0, sizeof *w);
}

/* ---- one buffer for every tensor (weights.h) ---- */

#define FLAT_ALIGN 256

/* Tensor i's bytes (its slice, f32), 0 for one the model lacks. */
static size_t flat_size(const sc_model_weights *w, int32_t i) {
  if (w->t[i] == NULL) return 0;
  sc_tensor_info t;
  sc_model_tensor_info(&w->cfg, i, &t);
  int64_t r0, nr, c0, nc;
  sc_model_tensor_slice(&t, w->tp, w->tp_rank, &r0, &nr, &c0, &nc);
  return (size_t)(nr * nc) * sizeof(float);
}

static size_t flat_next(size_t at, size_t size) {
  return at + (size + FLAT_ALIGN - 1) / FLAT_ALIGN * FLAT_ALIGN;
}

size_t sc_model_weights_flat_bytes(const sc_model_weights *w) {
  if (w->t == NULL || w->x != NULL || w->num_fp8 > 0) return 0;
  size_t at = 0;
  for (int32_t i = 0; i < w->num; i++) at = flat_next(at, flat_size(w, i));
  return at;
}

int sc_model_weights_flat_copy(sc_kernels *k, const sc_model_weights *w, void *flat) {
  if (flat == NULL || w->flat != NULL || sc_model_weights_flat_bytes(w) == 0) return SC_EINVAL;
  size_t at = 0;
  for (int32_t i = 0; i < w->num; i++) {
    const size_t n = flat_size(w, i);
    int rc;
    if (n > 0 && (rc = k->ops->copy(k, (char *)flat + at, w->t[i], n, SC_KCOPY_D2D))) return rc;
    at = flat_next(at, n);
  }
  return k->ops->sync(k);
}

int sc_model_weights_flat_use(sc_kernels *k, sc_model_weights *w, void *flat, bool free_own) {
  if (flat == NULL || w->flat != NULL || sc_model_weights_flat_bytes(w) == 0) return SC_EINVAL;
  float **own = NULL;
  if (!free_own && (own = calloc((size_t)w->num, sizeof *own)) == NULL) return SC_ENOMEM;
  size_t at = 0;
  for (int32_t i = 0; i < w->num; i++) {
    const size_t n = flat_size(w, i);
    if (n == 0) continue;
    if (free_own)
      k->ops->free(k, w->t[i]);
    else
      own[i] = w->t[i];
    w->t[i] = (float *)((char *)flat + at);
    at = flat_next(at, n);
  }
  w->flat = flat;
  w->own = own;
  return 0;
}

int sc_model_weights_flat_drop(sc_model_weights *w) {
  if (w->flat == NULL || w->own == NULL) return SC_EINVAL;
  for (int32_t i = 0; i < w->num; i++)
    if (w->own[i] != NULL) w->t[i] = w->own[i];
  free(w->own);
  w->own = NULL;
  w->flat = NULL;
  return 0;
}

/* The source of one rank's slice: synthetic or a file. */
typedef struct source {
  const sc_model_config *cfg;
  const sc_st_file *file; /* NULL: synthetic */
} source;

static int fill_slice(const source *s, const sc_tensor_info *t, int64_t r0, int64_t nr,
                      int64_t c0, int64_t nc, float *host, sc_diag *d) {
  if (s->file == NULL) {
    const uint64_t ts = sc_hash_name(s->cfg->seed, t->name);
    for (int64_t r = 0; r < nr; r++)
      for (int64_t c = 0; c < nc; c++) host[r * nc + c] = value_at(s->cfg, t, ts, r0 + r, c0 + c);
    return 0;
  }
  const sc_st_tensor *e = sc_st_find(s->file, t->name);
  if (e == NULL)
    return sc_fail(d, SC_EINVAL, "safetensors: tensor \"%s\" is missing", t->name);
  const bool ok = t->ndim == 1 ? (e->ndim == 1 && e->shape[0] == t->cols)
                               : (e->ndim == 2 && e->shape[0] == t->rows && e->shape[1] == t->cols);
  if (!ok) {
    char got[96] = "";
    size_t len = 0;
    for (int i = 0; i < e->ndim && len < sizeof got - 24; i++)
      len += (size_t)snprintf(got + len, sizeof got - len, "%s%lld", i ? ", " : "",
                              (long long)e->shape[i]);
    if (t->ndim == 1)
      return sc_fail(d, SC_EINVAL, "safetensors: tensor \"%s\" has shape [%s]; the model "
                     "config needs [%lld]", t->name, got, (long long)t->cols);
    return sc_fail(d, SC_EINVAL, "safetensors: tensor \"%s\" has shape [%s]; the model config "
                   "needs [%lld, %lld]", t->name, got, (long long)t->rows, (long long)t->cols);
  }
  int rc = sc_st_read_f32(s->file, e, r0, nr, c0, nc, host);
  if (rc) return sc_fail(d, rc, "safetensors: cannot read tensor \"%s\"", t->name);
  return 0;
}

int sc_model_weights_begin(const sc_model_config *cfg, int32_t tp, int32_t tp_rank,
                           sc_model_weights *w, sc_diag *d) {
  memset(w, 0, sizeof *w);
  const int rc = sc_model_config_check_tp(cfg, tp, d);
  if (rc) return rc;
  if (tp_rank < 0 || tp_rank >= tp)
    return sc_fail(d, SC_EINVAL, "tp_rank %d is outside [0, %d)", tp_rank, tp);
  const int32_t num = sc_model_tensor_count(cfg);
  if ((w->t = calloc((size_t)num, sizeof *w->t)) == NULL)
    return sc_fail(d, SC_ENOMEM, "out of memory");
  w->cfg = *cfg;
  w->tp = tp;
  w->tp_rank = tp_rank;
  w->num = num;
  return 0;
}

static int build(sc_kernels *k, const sc_model_config *cfg, int32_t tp, int32_t tp_rank,
                 const source *src, sc_model_weights *w, sc_diag *d) {
  memset(w, 0, sizeof *w);
  if (cfg->arch.checkpoint)
    return sc_fail(d, SC_EINVAL, "a DeepSeek-V3.2 checkpoint's model has no synthetic or "
                   "single-file weights: load it from its directory (--model-dir)");
  int rc = sc_model_weights_begin(cfg, tp, tp_rank, w, d);
  if (rc) return rc;
  float *host = NULL;
  size_t host_cap = 0;
  for (int32_t i = 0; i < w->num; i++) {
    sc_tensor_info t;
    sc_model_tensor_info(cfg, i, &t);
    int64_t r0, nr, c0, nc;
    sc_model_tensor_slice(&t, tp, tp_rank, &r0, &nr, &c0, &nc);
    const size_t n = (size_t)(nr * nc);
    if (n > host_cap) {
      float *p = realloc(host, n * sizeof *p);
      if (p == NULL) {
        rc = sc_fail(d, SC_ENOMEM, "out of memory for tensor \"%s\"", t.name);
        goto fail;
      }
      host = p;
      host_cap = n;
    }
    if ((rc = fill_slice(src, &t, r0, nr, c0, nc, host, d))) goto fail;
    if ((rc = k->ops->alloc(k, n * sizeof(float), (void **)&w->t[i]))) {
      sc_fail(d, rc, "cannot allocate tensor \"%s\" (%zu floats)", t.name, n);
      goto fail;
    }
    if ((rc = k->ops->copy(k, w->t[i], host, n * sizeof(float), SC_KCOPY_H2D))) {
      sc_fail(d, rc, "cannot upload tensor \"%s\"", t.name);
      goto fail;
    }
  }
  free(host);
  return 0;
fail:
  free(host);
  sc_model_weights_free(k, w);
  return rc;
}

int sc_model_weights_synthetic(sc_kernels *k, const sc_model_config *cfg, int32_t tp,
                               int32_t tp_rank, sc_model_weights *w, sc_diag *d) {
  const source s = {.cfg = cfg};
  return build(k, cfg, tp, tp_rank, &s, w, d);
}

int sc_model_weights_load(sc_kernels *k, const sc_model_config *cfg, int32_t tp,
                          int32_t tp_rank, const char *path, sc_model_weights *w,
                          sc_diag *d) {
  sc_st_file f;
  int rc = sc_st_open(path, &f, d);
  if (rc) return rc;
  /* Every table tensor must be found (checked while filling); with unique names, equal
   * counts then mean nothing else is there. Otherwise name the first stranger. */
  const int32_t count = sc_model_tensor_count(cfg);
  for (int32_t i = 0; f.num != count && i < f.num; i++) {
    bool known = false;
    for (int32_t j = 0; j < count && !known; j++) {
      sc_tensor_info t;
      sc_model_tensor_info(cfg, j, &t);
      known = !strcmp(t.name, f.t[i].name);
    }
    if (!known) {
      rc = sc_fail(d, SC_EINVAL,
                   "safetensors: %s holds tensor \"%s\", which the model config (%d layers) "
                   "does not have",
                   path, f.t[i].name, cfg->layers);
      goto out;
    }
  }
  const source s = {.cfg = cfg, .file = &f};
  rc = build(k, cfg, tp, tp_rank, &s, w, d);
out:
  sc_st_close(&f);
  return rc;
}

typedef struct write_ctx {
  const sc_model_config *cfg;
  int dtype;
} write_ctx;

static int fill_synthetic(void *ud, int32_t index, void *dst) {
  const write_ctx *x = ud;
  sc_tensor_info t;
  sc_model_tensor_info(x->cfg, index, &t);
  const uint64_t ts = sc_hash_name(x->cfg->seed, t.name);
  for (int64_t r = 0; r < t.rows; r++)
    for (int64_t c = 0; c < t.cols; c++) {
      const float v = value_at(x->cfg, &t, ts, r, c);
      const int64_t i = r * t.cols + c;
      if (x->dtype == SC_DT_F32) {
        memcpy((char *)dst + i * 4, &v, 4);
      } else {
        const uint16_t b = sc_f32_to_bf16(v);
        memcpy((char *)dst + i * 2, &b, 2);
      }
    }
  return 0;
}

int sc_model_write_synthetic(const sc_model_config *cfg, int dtype, const char *path,
                             sc_diag *d) {
  if (dtype != SC_DT_F32 && dtype != SC_DT_BF16)
    return sc_fail(d, SC_EINVAL, "safetensors dtype must be F32 or BF16");
  const int32_t n = sc_model_tensor_count(cfg);
  sc_st_out *outs = calloc((size_t)n, sizeof *outs);
  sc_tensor_info *infos = calloc((size_t)n, sizeof *infos);
  int rc = 0;
  if (outs == NULL || infos == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto out;
  }
  for (int32_t i = 0; i < n; i++) {
    sc_model_tensor_info(cfg, i, &infos[i]);
    outs[i] = (sc_st_out){.name = infos[i].name, .dtype = dtype, .ndim = infos[i].ndim};
    if (infos[i].ndim == 1) {
      outs[i].shape[0] = infos[i].cols;
    } else {
      outs[i].shape[0] = infos[i].rows;
      outs[i].shape[1] = infos[i].cols;
    }
  }
  write_ctx x = {.cfg = cfg, .dtype = dtype};
  rc = sc_st_write(path, outs, n, fill_synthetic, &x, d);
out:
  free(outs);
  free(infos);
  return rc;
}
