/* hf_model.c - a DeepSeek-V3.2 checkpoint as sparsecp's model: configuration
 * and one TP rank's weights (hf_model.h). */
#include "model/hf_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fp8_block.h"

int sc_model_config_from_hf(const sc_hf_config *hf, sc_model_config *m, sc_diag *d) {
  sc_model_config c;
  sc_model_config_default(&c);
  c.vocab = hf->vocab_size;
  c.hidden = hf->hidden_size;
  c.layers = hf->num_hidden_layers;
  c.heads = hf->num_attention_heads;
  c.q_lora_rank = hf->q_lora_rank;
  c.kv_lora_rank = hf->kv_lora_rank;
  c.qk_nope_dim = hf->qk_nope_head_dim;
  c.rope_dim = hf->qk_rope_head_dim;
  c.v_head_dim = hf->v_head_dim;
  c.index_heads = hf->index_n_heads;
  c.index_dim = hf->index_head_dim;
  c.topk = hf->index_topk;
  c.ffn_hidden = hf->intermediate_size;
  /* the planner's bound on a request is the serving limit; the model allows
   * more */
  c.max_position = hf->max_position_embeddings < SC_PLAN_MAX_TOKENS ? hf->max_position_embeddings
                                                                    : SC_PLAN_MAX_TOKENS;
  c.rms_eps = (float)hf->rms_norm_eps;
  c.rope_theta = (float)hf->rope_theta;
  sc_model_arch *a = &c.arch;
  a->checkpoint = true;
  a->rope = hf->rope;
  a->first_dense = hf->first_k_dense_replace < hf->num_hidden_layers ? hf->first_k_dense_replace
                                                                     : hf->num_hidden_layers;
  int rc = sc_moe_route_cfg_from_hf(hf, &a->route, d);
  if (rc) return rc;
  a->moe_inter = hf->moe_intermediate_size;
  a->n_shared = hf->n_shared_experts;
  a->index_norm_eps = 1e-6f; /* transformers' DeepseekV32Indexer: nn.LayerNorm(eps=1e-6) */
  /* q_a_layernorm and kv_a_layernorm are built without rms_norm_eps, so with the RMSNorm's
   * default 1e-6 (transformers' deepseek_v32 and glm_moe_dsa, DeepSeek's inference code) */
  a->latent_norm_eps = 1e-6f;
  a->index_interleaved = hf->index_rope_interleaved;
  memcpy(a->index_shared, hf->index_shared, sizeof a->index_shared);
  c.eos = hf->eos;
  if (hf->index_head_dim < hf->qk_rope_head_dim)
    return sc_fail(d, SC_EINVAL, "index_head_dim %d < qk_rope_head_dim %d", hf->index_head_dim,
                   hf->qk_rope_head_dim);
  if ((rc = sc_model_config_validate(&c, d))) return rc;
  *m = c;
  return 0;
}

int sc_hf_dir_eos(const char *dir, sc_hf_eos *eos, sc_diag *d) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/generation_config.json", dir) >= sizeof path)
    return sc_fail(d, SC_EINVAL, "model directory path too long");
  sc_hf_eos more = {.n = 0};
  int rc = sc_hf_generation_eos_load(path, &more, d);
  if (rc == SC_ENOENT) { /* (a directory may have none) */
    if (d) *d = (sc_diag){0};
    return 0;
  }
  return rc ? rc : sc_hf_eos_merge(eos, &more, d);
}

int sc_model_config_load_dir(const char *dir, sc_model_config *m, sc_diag *d) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path)
    return sc_fail(d, SC_EINVAL, "model directory path too long");
  sc_hf_config hf;
  int rc = sc_hf_config_load(path, &hf, d);
  if (rc == 0) rc = sc_hf_dir_eos(dir, &hf.eos, d);
  return rc ? rc : sc_model_config_from_hf(&hf, m, d);
}

/* ---- reading one tensor's block as f32 ---- */

typedef struct loader {
  sc_kernels *k;
  const sc_hf_checkpoint *ck;
  sc_diag *d;
  float *host; /* staging */
  size_t cap;
  sc_model_weights *w; /* where resident fp8 weights are recorded (weights.h) */
  int32_t cap_fp8;
} loader;

static float *stage(loader *L, size_t n) {
  if (n > L->cap) {
    float *p = realloc(L->host, n * sizeof *p);
    if (p == NULL) return NULL;
    L->host = p;
    L->cap = n;
  }
  return L->host;
}

/* Rows [r0, r0+nr) x columns [c0, c0+nc) of tensor `name` (1-D: one row) into
 * out. */
static int read_block(loader *L, const char *name, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                      float *out) {
  const sc_hf_tensor *t = sc_hf_checkpoint_find(L->ck, name);
  if (t == NULL) return sc_fail(L->d, SC_EINVAL, "checkpoint: tensor \"%s\" is missing", name);
  const int64_t rows = t->ndim == 2 ? t->shape[0] : 1,
                cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
  if (r0 < 0 || c0 < 0 || r0 + nr > rows || c0 + nc > cols)
    return sc_fail(L->d, SC_ERANGE, "checkpoint: block outside tensor \"%s\"", name);
  int rc;
  if (t->dtype == SC_ST_F8_E4M3) {
    char sname[SC_HF_MAX_NAME + 16];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    const sc_hf_tensor *s = sc_hf_checkpoint_find(L->ck, sname);
    if (s == NULL)
      return sc_fail(L->d, SC_EINVAL, "checkpoint: fp8 tensor \"%s\" has no \"%s\"", name, sname);
    const sc_fp8_weight fw = {.q = t->data,
                              .scale = s->data,
                              .rows = rows,
                              .cols = cols,
                              .block_rows = L->ck->cfg.quant.block_rows,
                              .block_cols = L->ck->cfg.quant.block_cols};
    rc = sc_fp8_dequant_f32(&fw, r0, nr, c0, nc, out);
  } else {
    const sc_st_file *f = &L->ck->shards[t->shard];
    const sc_st_tensor *e = sc_st_find(f, name);
    rc = e ? sc_st_read_f32(f, e, r0, nr, c0, nc, out) : SC_EINVAL;
  }
  return rc ? sc_fail(L->d, rc, "checkpoint: cannot read tensor \"%s\"", name) : 0;
}

/* ---- fp8 weights kept resident (weights.h, sc_fp8_resident) ---- */

/* The shared f32 buffer a resident weight expands into: one per table kind, one per
 * extra (sc_wxkind) kind. */
#define SCRATCH_TABLE(kind) ((int32_t)(kind))
#define SCRATCH_EXTRA(kind) (SC_W_LAYER_COUNT + (int32_t)(kind))
#define SCRATCH_COUNT (SC_W_LAYER_COUNT + SC_WX_COUNT)

/* Whether tensor `name` is stored in fp8 (then kept resident, unless its rows need a
 * permutation at load: the indexer's, dequantized to f32 as before). */
static bool is_fp8(loader *L, const char *name) {
  const sc_hf_tensor *t = sc_hf_checkpoint_find(L->ck, name);
  return t != NULL && t->dtype == SC_ST_F8_E4M3 && t->ndim == 2;
}

/* Records matrices names[0..mats) (each [rows, cols] in the file, all alike), the rank's
 * block [r0, r0+nr) x [c0, c0+nc) of each, as one resident weight of `layer` read through
 * *slot and expanding into shared buffer `scratch`: the e4m3 bytes and the scale blocks
 * covering the slice, uploaded. */
static int add_resident(loader *L, int32_t layer, float **slot, int32_t scratch,
                        const char *const *names, int32_t mats, int64_t r0, int64_t nr,
                        int64_t c0, int64_t nc) {
  const int32_t br = L->ck->cfg.quant.block_rows, bc = L->ck->cfg.quant.block_cols;
  const int32_t r_off = (int32_t)(r0 % br), c_off = (int32_t)(c0 % bc);
  const int64_t srows = (r_off + nr - 1) / br + 1, scols = (c_off + nc - 1) / bc + 1;
  const size_t qbytes = (size_t)(mats * nr * nc), sfloats = (size_t)(mats * srows * scols);
  /* staging: the bytes, then the scales (in floats) */
  float *h = stage(L, (qbytes + 3) / 4 + sfloats);
  if (h == NULL) return sc_fail(L->d, SC_ENOMEM, "out of memory for tensor \"%s\"", names[0]);
  uint8_t *hq = (uint8_t *)h;
  float *hs = h + (qbytes + 3) / 4;
  for (int32_t m = 0; m < mats; m++) {
    const sc_hf_tensor *t = sc_hf_checkpoint_find(L->ck, names[m]);
    char sname[SC_HF_MAX_NAME + 16];
    snprintf(sname, sizeof sname, "%s_scale_inv", names[m]);
    const sc_hf_tensor *s = sc_hf_checkpoint_find(L->ck, sname);
    if (t == NULL || s == NULL)
      return sc_fail(L->d, SC_EINVAL, "checkpoint: fp8 tensor \"%s\" or its scales are missing",
                     names[m]);
    const int64_t rows = t->shape[0], cols = t->shape[1], full_scols = (cols + bc - 1) / bc;
    if (r0 + nr > rows || c0 + nc > cols ||
        (uint64_t)((rows + br - 1) / br * full_scols) * 4 > s->bytes)
      return sc_fail(L->d, SC_ERANGE, "checkpoint: block outside tensor \"%s\"", names[m]);
    for (int64_t r = 0; r < nr; r++)
      memcpy(hq + (m * nr + r) * nc, t->data + (r0 + r) * cols + c0, (size_t)nc);
    for (int64_t sr = 0; sr < srows; sr++)
      memcpy(hs + (m * srows + sr) * scols, s->data + ((r0 / br + sr) * full_scols + c0 / bc) * 4,
             (size_t)scols * 4);
  }
  sc_model_weights *w = L->w;
  if (w->num_fp8 == L->cap_fp8) {
    const int32_t cap = L->cap_fp8 ? 2 * L->cap_fp8 : 64;
    sc_fp8_resident *p = realloc(w->fp8, sizeof *p * (size_t)cap);
    if (p == NULL) return sc_fail(L->d, SC_ENOMEM, "out of memory");
    w->fp8 = p;
    L->cap_fp8 = cap;
  }
  sc_fp8_resident *r = &w->fp8[w->num_fp8];
  *r = (sc_fp8_resident){.layer = layer, .slot = slot, .mats = mats, .rows = nr, .cols = nc,
                         .srows = srows, .scols = scols, .r_off = r_off, .c_off = c_off,
                         .block_rows = br, .block_cols = bc, .scratch = scratch,
                         .row0 = r0, .col0 = c0};
  snprintf(r->source, sizeof r->source, "%s", names[0]);
  w->num_fp8++; /* (freed with the weights from here on, whatever follows) */
  int rc = L->k->ops->alloc(L->k, qbytes, (void **)&r->q);
  if (rc == 0) rc = L->k->ops->copy(L->k, r->q, hq, qbytes, SC_KCOPY_H2D);
  if (rc == 0) rc = L->k->ops->alloc(L->k, sfloats * sizeof(float), (void **)&r->scale);
  if (rc == 0) rc = L->k->ops->copy(L->k, r->scale, hs, sfloats * sizeof(float), SC_KCOPY_H2D);
  return rc ? sc_fail(L->d, rc, "cannot upload fp8 tensor \"%s\"", names[0]) : 0;
}

static int by_layer(const void *a, const void *b) {
  const int32_t la = ((const sc_fp8_resident *)a)->layer, lb = ((const sc_fp8_resident *)b)->layer;
  return (la > lb) - (la < lb);
}

/* The records in layer order with each layer's first (the forward expands one layer at a
 * time), the shared buffers, each as large as its largest user, and every resident
 * weight's table entry pointed at its own. */
static int assign_scratch(loader *L) {
  sc_model_weights *w = L->w;
  if (w->num_fp8 == 0) return 0;
  qsort(w->fp8, (size_t)w->num_fp8, sizeof *w->fp8, by_layer); /* (slots point into t, x) */
  const int32_t layers = w->cfg.layers;
  if ((w->fp8_first = calloc((size_t)layers + 1, sizeof *w->fp8_first)) == NULL)
    return sc_fail(L->d, SC_ENOMEM, "out of memory");
  for (int32_t l = 0, i = 0; l <= layers; l++) {
    while (i < w->num_fp8 && w->fp8[i].layer < l) i++;
    w->fp8_first[l] = i;
  }
  size_t need[SCRATCH_COUNT] = {0};
  for (int32_t i = 0; i < w->num_fp8; i++) {
    const sc_fp8_resident *r = &w->fp8[i];
    const size_t n = (size_t)(r->mats * r->rows * r->cols);
    if (n > need[r->scratch]) need[r->scratch] = n;
  }
  w->scratch = calloc(SCRATCH_COUNT, sizeof *w->scratch);
  if (w->scratch == NULL) return sc_fail(L->d, SC_ENOMEM, "out of memory");
  w->num_scratch = SCRATCH_COUNT;
  for (int32_t i = 0; i < SCRATCH_COUNT; i++) {
    if (need[i] == 0) continue;
    const int rc = L->k->ops->alloc(L->k, need[i] * sizeof(float), (void **)&w->scratch[i]);
    if (rc) return sc_fail(L->d, rc, "cannot allocate an fp8 expansion buffer (%zu floats)", need[i]);
  }
  for (int32_t i = 0; i < w->num_fp8; i++) *w->fp8[i].slot = w->scratch[w->fp8[i].scratch];
  return 0;
}

/* A kernel buffer of n floats holding host. */
static int upload(loader *L, const float *host, size_t n, const char *what, float **out) {
  int rc = L->k->ops->alloc(L->k, n * sizeof(float), (void **)out);
  if (rc) return sc_fail(L->d, rc, "cannot allocate tensor \"%s\" (%zu floats)", what, n);
  rc = L->k->ops->copy(L->k, *out, host, n * sizeof(float), SC_KCOPY_H2D);
  return rc ? sc_fail(L->d, rc, "cannot upload tensor \"%s\"", what) : 0;
}

/* Permutes the first d rows (of ncols each) of every one of `groups` groups of
 * `stride` rows from the halves to the interleaved layout (hf_model.h). */
static int halves_to_interleaved(float *x, int64_t groups, int64_t stride, int64_t d,
                                 int64_t ncols) {
  float *tmp = malloc((size_t)(d * ncols) * sizeof *tmp);
  if (tmp == NULL) return SC_ENOMEM;
  for (int64_t g = 0; g < groups; g++) {
    float *base = x + g * stride * ncols;
    memcpy(tmp, base, (size_t)(d * ncols) * sizeof *tmp);
    for (int64_t n = 0; n < d; n++)
      memcpy(base + n * ncols, tmp + sc_hf_halves_source(n, d) * ncols,
             (size_t)ncols * sizeof *tmp);
  }
  free(tmp);
  return 0;
}

/* The checkpoint name of a table tensor (synthetic kinds), or "" when the layer
 * has none. */
static void hf_name(const sc_model_config *c, int32_t index, char *out, size_t cap) {
  if (index < SC_W_GLOBAL_COUNT) {
    static const char *const g[] = {"model.embed_tokens.weight", "model.norm.weight",
                                    "lm_head.weight"};
    snprintf(out, cap, "%s", g[index]);
    return;
  }
  static const char *const L[SC_W_LAYER_COUNT] = {
      [SC_W_ATTN_NORM] = "input_layernorm.weight",
      [SC_W_WQ_A] = "self_attn.q_a_proj.weight",
      [SC_W_Q_NORM] = "self_attn.q_a_layernorm.weight",
      [SC_W_WQ_B] = "self_attn.q_b_proj.weight",
      [SC_W_WKV_A] = "self_attn.kv_a_proj_with_mqa.weight",
      [SC_W_KV_NORM] = "self_attn.kv_a_layernorm.weight",
      [SC_W_WKV_B] = "self_attn.kv_b_proj.weight",
      [SC_W_WO] = "self_attn.o_proj.weight",
      [SC_W_IDX_WQ] = "self_attn.indexer.wq_b.weight",
      [SC_W_IDX_WK] = "self_attn.indexer.wk.weight",
      [SC_W_IDX_WW] = "self_attn.indexer.weights_proj.weight",
      [SC_W_FFN_NORM] = "post_attention_layernorm.weight",
      [SC_W_W1] = "mlp.gate_proj.weight",
      [SC_W_W3] = "mlp.up_proj.weight",
      [SC_W_W2] = "mlp.down_proj.weight"};
  const int32_t layer = (index - SC_W_GLOBAL_COUNT) / SC_W_LAYER_COUNT;
  const int32_t kind = (index - SC_W_GLOBAL_COUNT) % SC_W_LAYER_COUNT;
  const bool dense_ffn = kind == SC_W_W1 || kind == SC_W_W3 || kind == SC_W_W2;
  const bool indexer = kind == SC_W_IDX_WQ || kind == SC_W_IDX_WK || kind == SC_W_IDX_WW;
  if ((dense_ffn && sc_model_layer_is_moe(c, layer)) ||
      (indexer && sc_model_layer_index_shared(c, layer))) {
    out[0] = '\0';
    return;
  }
  snprintf(out, cap, "model.layers.%d.%s", layer, L[kind]);
}

/* One tensor of the synthetic table: its TP slice, permuted for the indexer. */
static int load_table_tensor(loader *L, const sc_model_config *c, int32_t tp, int32_t rank,
                             int32_t index, float **out) {
  char name[SC_HF_MAX_NAME];
  hf_name(c, index, name, sizeof name);
  if (name[0] == '\0') return 0;
  if (index == SC_W_HEAD && L->ck->cfg.tie_word_embeddings)
    snprintf(name, sizeof name, "%s", "model.embed_tokens.weight");
  sc_tensor_info t;
  sc_model_tensor_info(c, index, &t);
  int64_t r0, nr, c0, nc;
  sc_model_tensor_slice(&t, tp, rank, &r0, &nr, &c0, &nc);
  const int32_t kind =
      index < SC_W_GLOBAL_COUNT ? -1 : (index - SC_W_GLOBAL_COUNT) % SC_W_LAYER_COUNT;
  const bool permuted =
      (kind == SC_W_IDX_WQ || kind == SC_W_IDX_WK) && !c->arch.index_interleaved;
  if (kind >= 0 && !permuted && is_fp8(L, name)) {
    const char *const names[1] = {name};
    return add_resident(L, (index - SC_W_GLOBAL_COUNT) / SC_W_LAYER_COUNT, out,
                        SCRATCH_TABLE(kind), names, 1, r0, nr, c0, nc);
  }
  float *h = stage(L, (size_t)(nr * nc));
  if (h == NULL) return sc_fail(L->d, SC_ENOMEM, "out of memory for tensor \"%s\"", name);
  int rc = read_block(L, name, r0, nr, c0, nc, h);
  if (rc) return rc;
  if (kind == SC_W_IDX_WQ && !c->arch.index_interleaved)
    rc = halves_to_interleaved(h, c->index_heads, c->index_dim, c->rope_dim, nc);
  if (kind == SC_W_IDX_WK && !c->arch.index_interleaved)
    rc = halves_to_interleaved(h, 1, c->index_dim, c->rope_dim, nc);
  if (rc) return sc_fail(L->d, rc, "out of memory");
  return upload(L, h, (size_t)(nr * nc), name, out);
}

/* Expert tensors of one MoE layer `pre` ("model.layers.L.mlp."): each routed
 * expert's rows (split = rows) or columns of this rank, stacked expert by
 * expert. */
static int load_experts(loader *L, const sc_model_config *c, int32_t tp, int32_t rank,
                        int32_t layer, const char *pre, const char *proj, bool split_cols,
                        sc_wxkind kind, float **out) {
  const int32_t E = c->arch.route.n_experts;
  const int64_t il = c->arch.moe_inter / tp, hid = c->hidden, per = il * hid;
  char first[SC_HF_MAX_NAME];
  snprintf(first, sizeof first, "%sexperts.0.%s.weight", pre, proj);
  if (is_fp8(L, first)) { /* every expert's, stacked (the checkpoint's check made them alike) */
    char(*names)[SC_HF_MAX_NAME] = malloc(sizeof *names * (size_t)E);
    const char **ptrs = malloc(sizeof *ptrs * (size_t)E);
    int rc = names && ptrs ? 0 : sc_fail(L->d, SC_ENOMEM, "out of memory");
    for (int32_t e = 0; rc == 0 && e < E; e++) {
      snprintf(names[e], sizeof names[e], "%sexperts.%d.%s.weight", pre, e, proj);
      ptrs[e] = names[e];
    }
    if (rc == 0)
      rc = split_cols ? add_resident(L, layer, out, SCRATCH_EXTRA(kind), ptrs, E, 0, hid, rank * il, il)
                      : add_resident(L, layer, out, SCRATCH_EXTRA(kind), ptrs, E, rank * il, il, 0, hid);
    free(names);
    free(ptrs);
    return rc;
  }
  float *h = stage(L, (size_t)(per * E));
  if (h == NULL) return sc_fail(L->d, SC_ENOMEM, "out of memory for %sexperts", pre);
  char name[SC_HF_MAX_NAME];
  for (int32_t e = 0; e < E; e++) {
    snprintf(name, sizeof name, "%sexperts.%d.%s.weight", pre, e, proj);
    const int rc = split_cols ? read_block(L, name, 0, hid, rank * il, il, h + e * per)
                              : read_block(L, name, rank * il, il, 0, hid, h + e * per);
    if (rc) return rc;
  }
  snprintf(name, sizeof name, "%sexperts.*.%s.weight", pre, proj);
  return upload(L, h, (size_t)(per * E), name, out);
}

/* A tensor read whole (replicated), or the rank's rows / columns (`split` 1 /
 * 2) of a [rows, cols] one; an fp8 one of layer `layer` is kept resident, expanding into
 * the shared buffer of `kind`. */
static int load_plain(loader *L, const char *name, int64_t rows, int64_t cols, int split,
                      int32_t tp, int32_t rank, int32_t layer, sc_wxkind kind, float **out) {
  int64_t r0 = 0, nr = rows, c0 = 0, nc = cols;
  if (split == 1) nr = rows / tp, r0 = rank * nr;
  if (split == 2) nc = cols / tp, c0 = rank * nc;
  if (is_fp8(L, name)) {
    const char *const names[1] = {name};
    return add_resident(L, layer, out, SCRATCH_EXTRA(kind), names, 1, r0, nr, c0, nc);
  }
  float *h = stage(L, (size_t)(nr * nc));
  if (h == NULL) return sc_fail(L->d, SC_ENOMEM, "out of memory for tensor \"%s\"", name);
  const int rc = read_block(L, name, r0, nr, c0, nc, h);
  return rc ? rc : upload(L, h, (size_t)(nr * nc), name, out);
}

static int load_layer_extras(loader *L, const sc_model_config *c, int32_t tp, int32_t rank,
                             int32_t l, float **x) {
  char pre[48], name[SC_HF_MAX_NAME]; /* "model.layers.L.mlp." fits pre */
  int rc;
  /* the indexer key's LayerNorm, permuted like wk's rows (none in a shared layer) */
  static const char *const kn[2] = {"weight", "bias"};
  for (int i = 0; i < 2 && !sc_model_layer_index_shared(c, l); i++) {
    snprintf(name, sizeof name, "model.layers.%d.self_attn.indexer.k_norm.%s", l, kn[i]);
    float *h = stage(L, (size_t)c->index_dim);
    if (h == NULL) return sc_fail(L->d, SC_ENOMEM, "out of memory");
    if ((rc = read_block(L, name, 0, 1, 0, c->index_dim, h))) return rc;
    if (!c->arch.index_interleaved &&
        (rc = halves_to_interleaved(h, 1, c->index_dim, c->rope_dim, 1)))
      return sc_fail(L->d, rc, "out of memory");
    if ((rc = upload(L, h, (size_t)c->index_dim, name, &x[SC_WX_IDX_KNORM_W + i]))) return rc;
  }
  if (!sc_model_layer_is_moe(c, l)) return 0;
  const int64_t E = c->arch.route.n_experts, hid = c->hidden;
  const int64_t sh = (int64_t)c->arch.moe_inter * c->arch.n_shared;
  snprintf(pre, sizeof pre, "model.layers.%d.mlp.", l);
  snprintf(name, sizeof name, "%sgate.weight", pre);
  if ((rc = load_plain(L, name, E, hid, 0, tp, rank, l, SC_WX_ROUTER, &x[SC_WX_ROUTER])))
    return rc;
  snprintf(name, sizeof name, "%sgate.e_score_correction_bias", pre);
  if ((rc = load_plain(L, name, 1, E, 0, tp, rank, l, SC_WX_ROUTER_BIAS, &x[SC_WX_ROUTER_BIAS])))
    return rc;
  if ((rc = load_experts(L, c, tp, rank, l, pre, "gate_proj", false, SC_WX_EXP_W1,
                         &x[SC_WX_EXP_W1])) ||
      (rc = load_experts(L, c, tp, rank, l, pre, "up_proj", false, SC_WX_EXP_W3,
                         &x[SC_WX_EXP_W3])) ||
      (rc = load_experts(L, c, tp, rank, l, pre, "down_proj", true, SC_WX_EXP_W2,
                         &x[SC_WX_EXP_W2])))
    return rc;
  snprintf(name, sizeof name, "%sshared_experts.gate_proj.weight", pre);
  if ((rc = load_plain(L, name, sh, hid, 1, tp, rank, l, SC_WX_SH_W1, &x[SC_WX_SH_W1])))
    return rc;
  snprintf(name, sizeof name, "%sshared_experts.up_proj.weight", pre);
  if ((rc = load_plain(L, name, sh, hid, 1, tp, rank, l, SC_WX_SH_W3, &x[SC_WX_SH_W3])))
    return rc;
  snprintf(name, sizeof name, "%sshared_experts.down_proj.weight", pre);
  return load_plain(L, name, hid, sh, 2, tp, rank, l, SC_WX_SH_W2, &x[SC_WX_SH_W2]);
}

int sc_model_weights_from_checkpoint(sc_kernels *k, const sc_hf_checkpoint *ck,
                                     const sc_model_config *cfg, int32_t tp, int32_t tp_rank,
                                     sc_model_weights *w, sc_diag *d) {
  int rc = sc_model_weights_begin(cfg, tp, tp_rank, w, d);
  if (rc) return rc;
  loader L = {.k = k, .ck = ck, .d = d, .w = w};
  w->x = calloc((size_t)cfg->layers * SC_WX_COUNT, sizeof *w->x);
  if (w->x == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto fail;
  }
  for (int32_t i = 0; i < w->num && rc == 0; i++)
    rc = load_table_tensor(&L, cfg, tp, tp_rank, i, &w->t[i]);
  for (int32_t l = 0; l < cfg->layers && rc == 0; l++)
    rc = load_layer_extras(&L, cfg, tp, tp_rank, l, w->x + (size_t)l * SC_WX_COUNT);
  if (rc == 0) rc = assign_scratch(&L);
  if (rc) goto fail;
  free(L.host);
  return 0;
fail:
  free(L.host);
  sc_model_weights_free(k, w);
  return rc;
}

int sc_model_weights_load_dir(sc_kernels *k, const char *dir, int32_t tp, int32_t tp_rank,
                              sc_model_config *cfg, sc_model_weights *w, sc_diag *d) {
  sc_hf_checkpoint ck;
  int rc = sc_hf_checkpoint_open(dir, &ck, d);
  if (rc) return rc;
  if ((rc = sc_model_config_from_hf(&ck.cfg, cfg, d)) == 0)
    rc = sc_model_weights_from_checkpoint(k, &ck, cfg, tp, tp_rank, w, d);
  sc_hf_checkpoint_close(&ck);
  return rc;
}
