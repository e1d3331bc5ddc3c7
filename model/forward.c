/* forward.c - one rank's forward pass of one step (see forward.h). */
#include "model/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/kbuf.h"
#include "model/moe_ffn.h"
#include "model/yarn.h"

/* Scratch buffers (kernel memory), grown to the largest step and reused. */
enum {
  B_X, B_XN, B_QL, B_Q, B_QABS, B_KV, B_IQ, B_IW, B_OLAT, B_OV, B_AO, B_G, B_U, B_H,
  B_PG, B_SHARD, B_WS, B_TOPK, B_SEL, B_CAND, B_CANDG, B_QG, B_OD, B_LSE, B_LSEG, B_LSEX,
  B_XG, B_XL, B_LOGITS,
  /* index arrays */
  I_IDS, I_POS, I_REQ, I_DSLOT, I_PSLOT, I_KSLOT, I_KPOS, I_KB, I_KE, I_WSB, I_BT, I_SSRC,
  I_DEINT, I_CKPOS, I_LAST, I_KRREQ, I_KRB, I_KRE,
  B_COUNT
};

struct sc_forward {
  sc_kernels *k;
  const sc_model_weights *w;
  sc_kv_cache *cache;
  sc_comm *comm;
  sc_plan_config pc;
  sc_model_config mc;
  void *buf[B_COUNT];
  size_t cap[B_COUNT];
  int32_t *host_ids; /* host staging */
  size_t host_cap;
  sc_coll_session sess; /* the step's, kept until sc_forward_finish */
  sc_step_prof prof;    /* the step's stage marks, when it is profiled */
  /* rotary embedding and attention scale: the synthetic model's plain RoPE from theta
   * (inv_freq NULL) or a checkpoint's table (model/yarn.h) */
  double *inv_freq;     /* kernel buffer [rope_dim / 2], or NULL */
  float attn_factor;    /* the table's cos/sin factor */
  float scale;          /* attention softmax scale */
  sc_moe_ffn *moe;      /* MoE layers' scratch, or NULL when the model has none */
};

/* The rotary table of a checkpoint model, its scales, and the kernels it needs. */
static int setup_checkpoint(sc_forward *f, sc_diag *d) {
  const sc_model_config *m = &f->mc;
  sc_kernels *k = f->k;
  if (k->ops->rope_freq == NULL || k->ops->layernorm == NULL || k->ops->weighted_sum_rows == NULL)
    return sc_fail(d, SC_ENOTSUP, "forward: the %s kernels cannot run a DeepSeek-V3.2 "
                   "checkpoint yet (rope_freq, layernorm, weighted_sum_rows)", k->device);
  const size_t bytes = (size_t)(m->rope_dim / 2) * sizeof(double);
  double *tbl = malloc(bytes > 0 ? bytes : 1);
  if (tbl == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  int rc = sc_rope_inv_freq(&m->arch.rope, (double)m->rope_theta, m->rope_dim, tbl, d);
  if (rc == 0 && ((rc = k->ops->alloc(k, bytes, (void **)&f->inv_freq)) ||
                  (rc = k->ops->copy(k, f->inv_freq, tbl, bytes, SC_KCOPY_H2D))))
    sc_fail(d, rc, "forward: cannot upload the rotary table");
  free(tbl);
  if (rc) return rc;
  f->attn_factor = (float)sc_rope_attention_factor(&m->arch.rope);
  f->scale = (float)sc_rope_softmax_scale(&m->arch.rope, sc_model_q_head_dim(m));
  if (m->arch.route.n_experts > 0 && (rc = sc_moe_ffn_create(k, &f->moe, d))) return rc;
  return 0;
}

int sc_forward_create(sc_kernels *k, const sc_model_weights *w, sc_kv_cache *cache,
                      sc_comm *comm, const sc_plan_config *cfg, sc_forward **out,
                      sc_diag *d) {
  const sc_model_config *m = &w->cfg;
  if (cfg->layers != m->layers || cfg->heads != m->heads || cfg->kv_lora_rank != m->kv_lora_rank ||
      cfg->rope_dim != m->rope_dim || cfg->index_dim != m->index_dim || cfg->topk != m->topk ||
      cfg->hidden != m->hidden)
    return sc_fail(d, SC_EINVAL, "forward: the plan's model dimensions differ from the weights'");
  if (cfg->tp != w->tp || comm->group_rank[SC_GROUP_TP] != w->tp_rank)
    return sc_fail(d, SC_EINVAL, "forward: weights of TP rank %d/%d on TP rank %d/%d",
                   w->tp_rank, w->tp, comm->group_rank[SC_GROUP_TP], cfg->tp);
  if (cfg->dtype != SC_DT_F32)
    return sc_fail(d, SC_ENOTSUP, "forward: only f32 collectives are implemented");
  if (cache->layers != m->layers || cache->width != sc_model_kv_width(m) + m->index_dim ||
      cache->block_size != cfg->block_size)
    return sc_fail(d, SC_EINVAL, "forward: the KV cache shape does not fit the model and plan");
  sc_forward *f = calloc(1, sizeof *f);
  if (f == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  *f = (sc_forward){.k = k, .w = w, .cache = cache, .comm = comm, .pc = *cfg, .mc = *m,
                    .attn_factor = 1.0f, .scale = 1.0f / sqrtf((float)sc_model_q_head_dim(m))};
  if (m->arch.checkpoint) {
    const int rc = setup_checkpoint(f, d);
    if (rc) {
      sc_forward_destroy(f);
      return rc;
    }
  }
  *out = f;
  return 0;
}

void sc_forward_destroy(sc_forward *f) {
  if (f == NULL) return;
  for (int i = 0; i < B_COUNT; i++)
    if (f->buf[i]) f->k->ops->free(f->k, f->buf[i]);
  if (f->inv_freq) f->k->ops->free(f->k, f->inv_freq);
  sc_moe_ffn_destroy(f->moe);
  free(f->host_ids);
  free(f);
}

static void *ensure(sc_forward *f, int i, size_t bytes, int *rc) {
  return sc_kbuf_grow(f->k, &f->buf[i], &f->cap[i], bytes, rc);
}

/* Uploads n int32 from host into index buffer i. */
static int32_t *upload(sc_forward *f, int i, const int32_t *host, size_t n, int *rc) {
  int32_t *b = ensure(f, i, n * sizeof *host, rc);
  if (*rc) return NULL;
  if (n > 0 && (*rc = f->k->ops->copy(f->k, b, host, n * sizeof *host, SC_KCOPY_H2D)))
    return NULL;
  return b;
}

typedef struct step_ctx {
  sc_forward *f;
  const sc_forward_in *in;
  sc_forward_out *out;
  sc_coll_session *sess; /* &f->sess */
  sc_diag *d;
  /* dims */
  int32_t Tp, D, Hl, dn, dr, dc, dv, qd, kvw, iw, HI, dI, idr, K, hid, F, P, N, T, I, B;
  int32_t layer;
  bool has_prefill;
} step_ctx;

static int coll(step_ctx *s, int group, int op, int dtype, int purpose, int64_t rows,
                int64_t width, const void *send, void *recv) {
  const sc_coll req = {.layer = s->layer, .group = (uint8_t)group, .op = (uint8_t)op,
                       .dtype = (uint8_t)dtype, .purpose = (uint8_t)purpose, .chunk = -1,
                       .rows = rows, .width = width};
  sc_step_prof *p = &s->f->prof;
  const sc_stage was = sc_step_prof_stage(p);
  sc_step_prof_enter(p, SC_STAGE_COLL);
  const int rc = sc_coll_session_run(s->sess, &req, send, recv);
  sc_step_prof_enter(p, was);
  if (rc && s->d) *s->d = s->sess->diag;
  return rc;
}

/* Rotary embedding of n_heads heads of every local token (x, ld_tok, ld_head as the
 * kernel's): the plain RoPE of the synthetic model or the checkpoint's table. */
static int rope(step_ctx *s, int32_t n_heads, int32_t rot_dim, float *x, int64_t ld_tok,
                int64_t ld_head) {
  const sc_forward *f = s->f;
  const int32_t *pos = f->buf[I_POS];
  if (f->inv_freq == NULL)
    return f->k->ops->rope(f->k, s->Tp, n_heads, rot_dim, x, ld_tok, ld_head, pos,
                           f->mc.rope_theta);
  return f->k->ops->rope_freq(f->k, s->Tp, n_heads, rot_dim, x, ld_tok, ld_head, pos,
                              f->inv_freq, f->attn_factor);
}

/* The work queued from here on belongs to `stage` (step_prof.h). */
static void stage(step_ctx *s, sc_stage st) { sc_step_prof_enter(&s->f->prof, st); }

#define CK(expr, ...)                   \
  do {                                  \
    if ((rc = (expr)) != 0) {           \
      sc_fail(s->d, rc, __VA_ARGS__);   \
      goto out;                         \
    }                                   \
  } while (0)
/* A collective already wrote its message into d. */
#define CC(expr)                        \
  do {                                  \
    if ((rc = (expr)) != 0) goto out;   \
  } while (0)

/* Captures the selected (score, position) sets of local rows [b, e) for this layer. */
static int capture(step_ctx *s, const sc_kcand *cand_buf, int32_t b, int32_t e) {
  if (s->out == NULL || s->out->topk == NULL || e <= b) return 0;
  sc_forward *f = s->f;
  const sc_meta *m = s->in->meta;
  const size_t per = (size_t)s->K;
  sc_kcand *host = malloc((size_t)(e - b) * per * sizeof *host);
  if (host == NULL) return SC_ENOMEM;
  int rc = f->k->ops->copy(f->k, host, cand_buf + (size_t)b * per,
                           (size_t)(e - b) * per * sizeof *host, SC_KCOPY_D2H);
  if (rc == 0) {
    const size_t nt = (size_t)s->in->plan->num_tokens;
    for (int32_t k = b; k < e; k++) {
      const int32_t g = m->tok_global[k];
      if (g < 0) continue;
      memcpy(s->out->topk + ((size_t)s->layer * nt + (size_t)g) * per, host + (size_t)(k - b) * per,
             per * sizeof *host);
    }
  }
  free(host);
  return rc;
}

static int attention_layer(step_ctx *s) {
  sc_forward *f = s->f;
  sc_kernels *k = f->k;
  const sc_kernels_ops *o = k->ops;
  const sc_model_weights *w = f->w;
  const sc_meta *m = s->in->meta;
  const int32_t l = s->layer, Tp = s->Tp, D = s->D;
  int rc = 0;
  float *x = f->buf[B_X], *xn = f->buf[B_XN], *ql = f->buf[B_QL], *q = f->buf[B_Q],
        *qabs = f->buf[B_QABS], *kv = f->buf[B_KV], *iq = f->buf[B_IQ], *iwt = f->buf[B_IW],
        *olat = f->buf[B_OLAT], *ov = f->buf[B_OV], *ao = f->buf[B_AO];
  int32_t *topk = f->buf[B_TOPK], *sel = f->buf[B_SEL];
  sc_kcand *cand = f->buf[B_CAND];
  float *lsex = f->buf[B_LSEX];
  const int32_t *pos = f->buf[I_POS];
  const sc_krows cache = sc_kv_cache_rows(f->cache, l);
  const float scale = f->scale;
  /* A checkpoint's q_norm and kv_norm have their own epsilon (model_config.h). */
  const float leps = f->mc.arch.checkpoint ? f->mc.arch.latent_norm_eps : f->mc.rms_eps;
  /* A layer without its own indexer (GLM-5's "shared" layers) attends over the top-K of
   * the last layer that has one: topk, cand and sel still hold it, for the same rows, and
   * they are layer-independent (positions, cache slots, workspace rows; the context
   * workspace of a chunk has the same layout in every layer). The index key columns of
   * its KV rows are left as they are: no layer reads them. */
  const bool own = !sc_model_layer_index_shared(&f->mc, l);

  /* ---- projections ---- */
  stage(s, SC_STAGE_DENSE);
  CK(o->rmsnorm(k, Tp, s->hid, x, s->hid, sc_w(w, l, SC_W_ATTN_NORM), f->mc.rms_eps, xn, s->hid),
     "layer %d: attn_norm", l);
  const int32_t qr = f->mc.q_lora_rank;
  CK(sc_linear(k, Tp, qr, s->hid, xn, s->hid, sc_w(w, l, SC_W_WQ_A), s->hid, ql, qr, 1.0f),
     "layer %d: wq_a", l);
  CK(o->rmsnorm(k, Tp, qr, ql, qr, sc_w(w, l, SC_W_Q_NORM), leps, ql, qr),
     "layer %d: q_norm", l);
  const int64_t qw = (int64_t)s->Hl * s->qd;
  CK(sc_linear(k, Tp, qw, qr, ql, qr, sc_w(w, l, SC_W_WQ_B), qr, q, qw, 1.0f), "layer %d: wq_b", l);
  if (s->dr > 0)
    CK(rope(s, s->Hl, s->dr, q + s->dn, qw, s->qd), "layer %d: q rope", l);
  /* KV row [c_kv ; k_rope] and the index key, one cache row wide */
  CK(sc_linear(k, Tp, s->kvw, s->hid, xn, s->hid, sc_w(w, l, SC_W_WKV_A), s->hid, kv, s->iw, 1.0f),
     "layer %d: wkv_a", l);
  CK(o->rmsnorm(k, Tp, s->dc, kv, s->iw, sc_w(w, l, SC_W_KV_NORM), leps, kv, s->iw),
     "layer %d: kv_norm", l);
  if (s->dr > 0)
    CK(rope(s, 1, s->dr, kv + s->dc, s->iw, s->dr), "layer %d: k rope", l);
  const int64_t iqw = (int64_t)s->HI * s->dI;
  if (own) {
    CK(sc_linear(k, Tp, s->dI, s->hid, xn, s->hid, sc_w(w, l, SC_W_IDX_WK), s->hid, kv + s->kvw,
                 s->iw, 1.0f),
       "layer %d: indexer wk", l);
    const float *knw = sc_wx(w, l, SC_WX_IDX_KNORM_W), *knb = sc_wx(w, l, SC_WX_IDX_KNORM_B);
    if (knw != NULL) /* a checkpoint's indexer key: LayerNorm before its rotary part */
      CK(o->layernorm(k, Tp, s->dI, kv + s->kvw, s->iw, knw, knb, f->mc.arch.index_norm_eps,
                      kv + s->kvw, s->iw),
         "layer %d: indexer k_norm", l);
    CK(sc_linear(k, Tp, iqw, qr, ql, qr, sc_w(w, l, SC_W_IDX_WQ), qr, iq, iqw, 1.0f),
       "layer %d: indexer wq", l);
    if (s->idr > 0) {
      CK(rope(s, 1, s->idr, kv + s->kvw, s->iw, s->dI), "layer %d: index key rope", l);
      CK(rope(s, s->HI, s->idr, iq, iqw, s->dI), "layer %d: index query rope", l);
    }
    CK(sc_linear(k, Tp, s->HI, s->hid, xn, s->hid, sc_w(w, l, SC_W_IDX_WW), s->hid, iwt, s->HI,
                 1.0f / sqrtf((float)s->dI * (float)s->HI)),
       "layer %d: indexer weights", l);
  }
  /* Absorb W_UK: qabs[t,h,:dc] = q_nope[t,h] * W_UK[h]; then copy q_rope after it. */
  const float *wkvb = sc_w(w, l, SC_W_WKV_B);
  const int64_t hstride = (int64_t)(s->dn + s->dv) * s->dc;
  const int64_t qaw = (int64_t)s->Hl * s->kvw;
  const sc_gemm absorb = {.m = Tp, .n = s->dc, .k = s->dn, .alpha = 1.0f, .a = q, .lda = qw,
                          .stride_a = s->qd, .b = wkvb, .ldb = s->dc, .stride_b = hstride,
                          .c = qabs, .ldc = qaw, .stride_c = s->kvw, .batch = s->Hl};
  CK(o->gemm(k, &absorb), "layer %d: W_UK absorption", l);
  if (s->dr > 0) {
    const int64_t hr = (int64_t)Tp * s->Hl;
    CK(o->gather_rows(k, hr, s->dr, (sc_krows){q + s->dn, SC_KFMT_F32, s->qd, hr}, NULL,
                      (sc_krows){qabs + s->dc, SC_KFMT_F32, s->kvw, hr}),
       "layer %d: q rope copy", l);
  }
  CK(o->memset(k, olat, 0, (size_t)Tp * s->Hl * s->dc * sizeof(float)), "memset");

  /* ---- KV writes: prefill rows (owner copies, gathered over PCP), then decode rows ---- */
  const int32_t prows = m->prefill_rows;
  if (s->has_prefill) {
    const float *src = kv + (size_t)D * s->iw;
    if (s->P > 1) {
      float *pg = f->buf[B_PG];
      CC(coll(s, SC_GROUP_PCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_PREFILL_KV, prows, s->iw,
              src, pg));
      src = pg;
    }
    CK(o->kv_write(k, m->num_prefill_src, s->iw, src, s->iw, f->buf[I_PSLOT], cache),
       "layer %d: prefill KV write", l);
  }
  if (D > 0)
    CK(o->kv_write(k, D, s->iw, kv, s->iw, f->buf[I_DSLOT], cache), "layer %d: decode KV write", l);

  /* ---- workspace path: prefill rows under DCP, one context_kv gather per chunk ---- */
  if (s->has_prefill && s->N > 1) {
    float *shard = f->buf[B_SHARD], *ws = f->buf[B_WS];
    const sc_krows wsr_all = {ws, SC_KFMT_F32, s->iw, 0};
    int64_t ssrc_off = 0, deint_off = 0;
    for (int32_t c = 0; c < m->num_chunks; c++) {
      const sc_meta_chunk *mc = &m->chunks[c];
      const int32_t S = mc->shard_rows_total;
      const int32_t *ssrc = (const int32_t *)f->buf[I_SSRC] + ssrc_off;
      const int32_t *deint = (const int32_t *)f->buf[I_DEINT] + deint_off;
      const int32_t *ckpos = (const int32_t *)f->buf[I_CKPOS] + deint_off;
      ssrc_off += S;
      deint_off += mc->extent_total;
      stage(s, SC_STAGE_DENSE);
      CK(o->gather_rows(k, S, s->iw, cache, ssrc, (sc_krows){shard, SC_KFMT_F32, s->iw, S}),
         "layer %d: shard pack", l);
      CC(coll(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_CONTEXT_KV, S, s->iw,
              shard, ws));
      const int32_t tb = mc->tok_begin, n = mc->tok_end - mc->tok_begin;
      if (n <= 0) continue;
      sc_krows wsr = wsr_all;
      wsr.rows = (int64_t)s->N * S;
      const sc_indexer_args ia = {
          .n_tok = n, .n_heads = s->HI, .dim = s->dI, .topk = s->K,
          .q = iq + (size_t)tb * iqw, .ld_q = iqw, .w = iwt + (size_t)tb * s->HI, .ld_w = s->HI,
          .q_pos = pos + tb, .keys = sc_krows_col(wsr, s->kvw), .key_rows = deint,
          .key_pos = ckpos, .key_begin = (const int32_t *)f->buf[I_KB] + tb,
          .key_end = (const int32_t *)f->buf[I_KE] + tb, .out_pos = topk + (size_t)tb * s->K,
          .out_cand = cand + (size_t)tb * s->K};
      stage(s, SC_STAGE_INDEXER);
      if (own) CK(o->indexer_topk(k, &ia), "layer %d: indexer (chunk %d)", l, c);
      CK(capture(s, cand, tb, tb + n), "layer %d: top-K capture", l);
      if (own)
        CK(o->topk_to_workspace(k, n, s->K, topk + (size_t)tb * s->K,
                                (const int32_t *)f->buf[I_WSB] + tb, S, s->N, s->I,
                                sel + (size_t)tb * s->K),
           "layer %d: top-K to workspace rows", l);
      const sc_attn_args aa = {
          .n_tok = n, .n_heads = s->Hl, .dc = s->dc, .dr = s->dr, .topk = s->K, .scale = scale,
          .q = qabs + (size_t)tb * qaw, .ld_q = qaw, .kv = wsr, .sel = sel + (size_t)tb * s->K,
          .ld_sel = s->K, .out = olat + (size_t)tb * s->Hl * s->dc, .ld_out = (int64_t)s->Hl * s->dc,
          .lse = lsex + (size_t)tb * s->Hl, .ld_lse = s->Hl};
      stage(s, SC_STAGE_ATTENTION);
      CK(o->sparse_attn(k, &aa), "layer %d: prefill attention (chunk %d)", l, c);
    }
  }

  /* ---- cache path: decode rows (and prefill rows without DCP) over the local shard ---- */
  const int32_t cte = m->cache_tok_end;
  const bool dcp_decode = D > 0 && s->N > 1;
  float *qg = f->buf[B_QG];
  stage(s, SC_STAGE_INDEXER);
  if (dcp_decode && s->P == 1) { /* gather the queries of every DCP rank's heads */
    CC(coll(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_DECODE_Q, D, qaw, qabs, qg));
  }
  if (cte > 0 && own) {
    const sc_indexer_args ia = {
        .n_tok = cte, .n_heads = s->HI, .dim = s->dI, .topk = s->K, .q = iq, .ld_q = iqw,
        .w = iwt, .ld_w = s->HI, .q_pos = pos, .keys = sc_krows_col(cache, s->kvw),
        .key_rows = f->buf[I_KSLOT], .key_pos = f->buf[I_KPOS], .key_begin = f->buf[I_KB],
        .key_end = f->buf[I_KE], .out_pos = topk, .out_cand = cand};
    CK(o->indexer_topk(k, &ia), "layer %d: indexer (local cache)", l);
  }
  if (dcp_decode) { /* every rank selects the same global top-K from all shards' picks */
    sc_kcand *candg = f->buf[B_CANDG];
    /* The plan has this gather in every layer (the planner does not know which layers
     * share their top-K), so a shared layer issues it too and leaves its result unused. */
    CC(coll(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_W32, SC_PURPOSE_TOPK_CANDIDATES, D,
            2 * (int64_t)s->K, cand, candg));
    if (own) CK(o->topk_merge(k, D, s->N, s->K, candg, topk, cand), "layer %d: top-K merge", l);
  }
  CK(capture(s, cand, 0, cte), "layer %d: top-K capture", l);
  if (cte > 0 && own)
    CK(o->topk_to_slots(k, cte, s->K, topk, f->buf[I_REQ], f->buf[I_BT], s->in->max_blocks,
                        s->B, s->N, s->I, m->coords.dcp_rank, sel),
       "layer %d: top-K to cache slots", l);
  stage(s, SC_STAGE_ATTENTION);
  if (cte > 0 && !dcp_decode) {
    /* decode rows [0, D) and prefill rows [D, cte) apart: a backend may run them with
     * different kernels, and a decode token is a decode row in every layout */
    for (int part = 0; part < 2; part++) {
      const int32_t t0 = part == 0 ? 0 : D, t1 = part == 0 ? D : cte;
      if (t1 <= t0) continue;
      const sc_attn_args aa = {
          .n_tok = t1 - t0, .n_heads = s->Hl, .dc = s->dc, .dr = s->dr, .topk = s->K,
          .scale = scale, .q = qabs + (size_t)t0 * qaw, .ld_q = qaw, .kv = cache,
          .sel = sel + (size_t)t0 * s->K, .ld_sel = s->K,
          .out = olat + (size_t)t0 * s->Hl * s->dc, .ld_out = (int64_t)s->Hl * s->dc,
          .lse = lsex + (size_t)t0 * s->Hl, .ld_lse = s->Hl, .decode = part == 0,
          .model_heads = s->f->mc.heads};
      CK(o->sparse_attn(k, &aa), "layer %d: attention (local cache)", l);
    }
  } else if (dcp_decode) {
    /* Partial attention over this shard for H_att heads; rows (member, token, head) in
     * member-major order, so the reduce-scatter hands each member its own heads. */
    const int32_t nq = s->P == 1 ? s->N : 1;
    float *od = s->P == 1 ? f->buf[B_OD] : olat, *lse = f->buf[B_LSE], *lseg = f->buf[B_LSEG];
    for (int32_t mq = 0; mq < nq; mq++) {
      const float *qsrc = s->P == 1 ? qg + (size_t)mq * D * qaw : qabs;
      const sc_attn_args aa = {
          .n_tok = D, .n_heads = s->Hl, .dc = s->dc, .dr = s->dr, .topk = s->K, .scale = scale,
          .q = qsrc, .ld_q = qaw, .kv = cache, .sel = sel, .ld_sel = s->K,
          .out = od + (size_t)mq * D * s->Hl * s->dc, .ld_out = (int64_t)s->Hl * s->dc,
          .lse = lse + (size_t)mq * D * s->Hl, .ld_lse = s->Hl, .decode = true,
          .model_heads = s->f->mc.heads};
      CK(o->sparse_attn(k, &aa), "layer %d: decode attention (shard)", l);
    }
    const int64_t h_att = (int64_t)nq * s->Hl;
    CC(coll(s, SC_GROUP_DCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_DECODE_LSE, D, h_att, lse,
            lseg));
    CK(o->lse_scale(k, s->N, m->coords.dcp_rank, (int64_t)nq * D * s->Hl, s->dc, lseg, od, NULL),
       "layer %d: LSE scale", l);
    if (s->P > 1)
      CC(coll(s, SC_GROUP_DCP, SC_OP_ALL_REDUCE, SC_DT_F32, SC_PURPOSE_DECODE_OUT, D,
              h_att * s->dc, od, olat));
    else
      CC(coll(s, SC_GROUP_DCP, SC_OP_REDUCE_SCATTER, SC_DT_F32, SC_PURPOSE_DECODE_OUT, D,
              h_att * s->dc, od, olat));
  }

  /* ---- W_UV, o_proj, TP reduce, residual ---- */
  stage(s, SC_STAGE_DENSE);
  const int64_t vw = (int64_t)s->Hl * s->dv;
  const sc_gemm uv = {.trans_b = true, .m = Tp, .n = s->dv, .k = s->dc, .alpha = 1.0f,
                      .a = olat, .lda = (int64_t)s->Hl * s->dc, .stride_a = s->dc,
                      .b = wkvb + (int64_t)s->dn * s->dc, .ldb = s->dc, .stride_b = hstride,
                      .c = ov, .ldc = vw, .stride_c = s->dv, .batch = s->Hl};
  CK(o->gemm(k, &uv), "layer %d: W_UV", l);
  CK(sc_linear(k, Tp, s->hid, vw, ov, vw, sc_w(w, l, SC_W_WO), vw, ao, s->hid, 1.0f),
     "layer %d: o_proj", l);
  if (s->T > 1) {
    CC(coll(s, SC_GROUP_TP, SC_OP_ALL_REDUCE, SC_DT_F32, SC_PURPOSE_ATTN_OUT, Tp, s->hid, ao, ao));
  }
  CK(o->add(k, Tp, s->hid, ao, s->hid, x, s->hid), "layer %d: residual", l);
out:
  return rc;
}

static int mlp_layer(step_ctx *s) {
  sc_forward *f = s->f;
  sc_kernels *k = f->k;
  const sc_kernels_ops *o = k->ops;
  const sc_model_weights *w = f->w;
  const int32_t l = s->layer, Tp = s->Tp, F = s->F;
  int rc = 0;
  float *x = f->buf[B_X], *xn = f->buf[B_XN], *g = f->buf[B_G], *u = f->buf[B_U],
        *h = f->buf[B_H], *ao = f->buf[B_AO];
  CK(o->rmsnorm(k, Tp, s->hid, x, s->hid, sc_w(w, l, SC_W_FFN_NORM), f->mc.rms_eps, xn, s->hid),
     "layer %d: ffn_norm", l);
  if (sc_model_layer_is_moe(&f->mc, l)) { /* the rank's partial sum, as the dense one */
    if ((rc = sc_moe_ffn_run(f->moe, w, l, Tp, xn, s->in->meta->tok_global, ao, s->d))) goto out;
  } else {
    CK(sc_linear(k, Tp, F, s->hid, xn, s->hid, sc_w(w, l, SC_W_W1), s->hid, g, F, 1.0f),
       "layer %d: w1", l);
    CK(sc_linear(k, Tp, F, s->hid, xn, s->hid, sc_w(w, l, SC_W_W3), s->hid, u, F, 1.0f),
       "layer %d: w3", l);
    CK(o->swiglu(k, Tp, F, g, F, u, F, h, F), "layer %d: swiglu", l);
    CK(sc_linear(k, Tp, s->hid, F, h, F, sc_w(w, l, SC_W_W2), F, ao, s->hid, 1.0f),
       "layer %d: w2", l);
  }
  if (s->T > 1) {
    CC(coll(s, SC_GROUP_TP, SC_OP_ALL_REDUCE, SC_DT_F32, SC_PURPOSE_MLP_OUT, Tp, s->hid, ao, ao));
  }
  CK(o->add(k, Tp, s->hid, ao, s->hid, x, s->hid), "layer %d: residual", l);
out:
  return rc;
}

int sc_forward_step(sc_forward *f, const sc_forward_in *in, sc_forward_out *out, sc_diag *d) {
  const sc_plan *plan = in->plan;
  const sc_meta *m = in->meta;
  const sc_model_config *mc = &f->mc;
  step_ctx sx = {.f = f, .in = in, .out = out, .sess = &f->sess, .d = d, .layer = -1};
  step_ctx *s = &sx;
  int rc = 0;
  s->Tp = m->t_pad, s->D = m->num_decode;
  s->Hl = mc->heads / f->pc.tp, s->dn = mc->qk_nope_dim, s->dr = mc->rope_dim;
  s->dc = mc->kv_lora_rank, s->dv = mc->v_head_dim, s->qd = sc_model_q_head_dim(mc);
  s->kvw = s->dc + s->dr, s->iw = s->kvw + mc->index_dim, s->HI = mc->index_heads;
  s->dI = mc->index_dim, s->idr = sc_model_index_rope_dim(mc), s->K = mc->topk;
  s->hid = mc->hidden, s->F = mc->ffn_hidden / f->pc.tp;
  s->P = f->pc.pcp, s->N = f->pc.dcp, s->T = f->pc.tp, s->I = f->pc.interleave;
  s->B = f->pc.block_size;
  for (int32_t i = 0; i < plan->num_ordered && !s->has_prefill; i++)
    s->has_prefill = plan->reqs[plan->order[i]].flags & SC_REQ_PREFILL;
  sc_coll_session_begin(s->sess, f->comm, plan->colls, plan->num_colls, in->step);
  sc_step_prof_begin(&f->prof, in->profile ? f->k : NULL);

  const size_t Tp = (size_t)s->Tp, fl = sizeof(float);
  const int32_t nq = s->P == 1 ? s->N : 1;
  int64_t max_s = 0, sum_s = 0, sum_e = 0;
  for (int32_t c = 0; c < m->num_chunks; c++) {
    if (m->chunks[c].shard_rows_total > max_s) max_s = m->chunks[c].shard_rows_total;
    sum_s += m->chunks[c].shard_rows_total;
    sum_e += m->chunks[c].extent_total;
  }
  const size_t D = (size_t)s->D, K = (size_t)s->K, Hl = (size_t)s->Hl;
  ensure(f, B_X, Tp * s->hid * fl, &rc);
  ensure(f, B_XN, Tp * s->hid * fl, &rc);
  ensure(f, B_QL, Tp * mc->q_lora_rank * fl, &rc);
  ensure(f, B_Q, Tp * Hl * s->qd * fl, &rc);
  ensure(f, B_QABS, Tp * Hl * s->kvw * fl, &rc);
  ensure(f, B_KV, Tp * s->iw * fl, &rc);
  ensure(f, B_IQ, Tp * s->HI * s->dI * fl, &rc);
  ensure(f, B_IW, Tp * s->HI * fl, &rc);
  ensure(f, B_OLAT, Tp * Hl * s->dc * fl, &rc);
  ensure(f, B_OV, Tp * Hl * s->dv * fl, &rc);
  ensure(f, B_AO, Tp * s->hid * fl, &rc);
  ensure(f, B_G, Tp * s->F * fl, &rc);
  ensure(f, B_U, Tp * s->F * fl, &rc);
  ensure(f, B_H, Tp * s->F * fl, &rc);
  ensure(f, B_PG, (size_t)m->num_prefill_src * s->iw * fl, &rc);
  ensure(f, B_SHARD, (size_t)max_s * s->iw * fl, &rc);
  ensure(f, B_WS, (size_t)s->N * max_s * s->iw * fl, &rc);
  ensure(f, B_TOPK, Tp * K * sizeof(int32_t), &rc);
  ensure(f, B_SEL, Tp * K * sizeof(int32_t), &rc);
  ensure(f, B_CAND, Tp * K * sizeof(sc_kcand), &rc);
  ensure(f, B_CANDG, (size_t)s->N * D * K * sizeof(sc_kcand), &rc);
  ensure(f, B_QG, (size_t)s->N * D * Hl * s->kvw * fl, &rc);
  ensure(f, B_OD, (size_t)nq * D * Hl * s->dc * fl, &rc);
  ensure(f, B_LSE, (size_t)nq * D * Hl * fl, &rc);
  ensure(f, B_LSEG, (size_t)s->N * nq * D * Hl * fl, &rc);
  ensure(f, B_LSEX, Tp * Hl * fl, &rc);
  ensure(f, B_XG, (size_t)s->P * Tp * s->hid * fl, &rc);
  ensure(f, B_XL, (size_t)plan->num_reqs * s->hid * fl, &rc);
  ensure(f, B_LOGITS, (size_t)plan->num_reqs * mc->vocab * fl, &rc);
  CK(rc, "forward: cannot allocate step buffers");

  /* ---- index arrays ---- */
  if (f->host_cap < Tp + (size_t)plan->num_reqs) {
    int32_t *p = realloc(f->host_ids, (Tp + (size_t)plan->num_reqs) * sizeof *p);
    CK(p == NULL ? SC_ENOMEM : 0, "out of memory");
    f->host_ids = p;
    f->host_cap = Tp + (size_t)plan->num_reqs;
  }
  int32_t *ids = f->host_ids;
  for (int32_t i = 0; i < plan->num_reqs; i++)
    if (plan->reqs[i].extent > mc->max_position)
      CK(SC_ERANGE, "request %d reaches extent %d; the model's max_position is %d", i,
         plan->reqs[i].extent, mc->max_position);
  for (size_t t = 0; t < Tp; t++) {
    const int32_t g = m->tok_global[t];
    ids[t] = g < 0 ? -1 : in->tokens[g];
    if (g >= 0 && (ids[t] < 0 || ids[t] >= mc->vocab))
      CK(SC_EINVAL, "token id %d of global token %d is outside the vocabulary [0, %d)", ids[t], g,
         mc->vocab);
  }
  upload(f, I_IDS, ids, Tp, &rc);
  upload(f, I_POS, m->tok_pos, Tp, &rc);
  upload(f, I_REQ, m->tok_req, Tp, &rc);
  upload(f, I_DSLOT, m->decode_slots, D, &rc);
  upload(f, I_PSLOT, m->prefill_slots, (size_t)m->num_prefill_src, &rc);
  const size_t nkr = (size_t)m->num_key_ranges;
  const int32_t *kr_req = upload(f, I_KRREQ, m->key_range_req, nkr, &rc);
  const int32_t *kr_b = upload(f, I_KRB, m->key_range_begin, nkr, &rc);
  const int32_t *kr_e = upload(f, I_KRE, m->key_range_end, nkr, &rc);
  int32_t *kslot = ensure(f, I_KSLOT, (size_t)m->num_keys * sizeof(int32_t), &rc);
  int32_t *kpos = ensure(f, I_KPOS, (size_t)m->num_keys * sizeof(int32_t), &rc);
  upload(f, I_KB, m->tok_key_begin, Tp, &rc);
  upload(f, I_KE, m->tok_key_end, Tp, &rc);
  upload(f, I_WSB, m->tok_ws_base, Tp, &rc);
  const int32_t *bt = upload(f, I_BT, in->block_table, (size_t)plan->num_reqs * in->max_blocks, &rc);
  /* the cache key list (1 MB a step at a 128k context) is filled on the kernels' side */
  if (rc == 0 && m->num_keys > 0)
    rc = f->k->ops->cache_keys(f->k, m->num_key_ranges, m->num_keys, kr_req, kr_b, kr_e, bt,
                               in->max_blocks, f->pc.block_size, f->pc.dcp, f->pc.interleave,
                               m->coords.dcp_rank, kpos, kslot);
  int32_t *ssrc = ensure(f, I_SSRC, (size_t)sum_s * sizeof(int32_t), &rc);
  int32_t *deint = ensure(f, I_DEINT, (size_t)sum_e * sizeof(int32_t), &rc);
  int32_t *ckpos = ensure(f, I_CKPOS, (size_t)sum_e * sizeof(int32_t), &rc);
  CK(rc, "forward: cannot upload the step's index arrays");
  for (int32_t c = 0; c < m->num_chunks && rc == 0; c++) {
    const sc_meta_chunk *ch = &m->chunks[c];
    if ((rc = f->k->ops->copy(f->k, ssrc, ch->shard_src, (size_t)ch->shard_rows_total * 4,
                              SC_KCOPY_H2D)) ||
        (rc = f->k->ops->copy(f->k, deint, ch->deinterleave, (size_t)ch->extent_total * 4,
                              SC_KCOPY_H2D)) ||
        (rc = f->k->ops->copy(f->k, ckpos, ch->key_pos, (size_t)ch->extent_total * 4,
                              SC_KCOPY_H2D)))
      break;
    ssrc += ch->shard_rows_total;
    deint += ch->extent_total;
    ckpos += ch->extent_total;
  }
  CK(rc, "forward: cannot upload the chunk index arrays");

  /* ---- embedding ---- */
  float *x = f->buf[B_X];
  const sc_krows embed = {f->w->t[SC_W_EMBED], SC_KFMT_F32, s->hid, mc->vocab};
  CK(f->k->ops->gather_rows(f->k, (int64_t)Tp, s->hid, embed, f->buf[I_IDS],
                            (sc_krows){x, SC_KFMT_F32, s->hid, (int64_t)Tp}),
     "forward: embedding");

  for (s->layer = 0; s->layer < mc->layers; s->layer++) {
    /* a checkpoint's resident fp8 weights of this layer, expanded to f32 (weights.h) */
    CK(sc_model_weights_expand(f->k, f->w, s->layer), "layer %d: cannot expand its fp8 weights",
       s->layer);
    if ((rc = attention_layer(s)) || (rc = mlp_layer(s))) goto out;
  }
  s->layer = -1;

  /* ---- restore the global token order, final norm, LM head ---- */
  stage(s, SC_STAGE_HEAD);
  float *xg = x;
  if (s->P > 1) {
    xg = f->buf[B_XG];
    CC(coll(s, SC_GROUP_PCP, SC_OP_ALL_GATHER, SC_DT_F32, SC_PURPOSE_HIDDEN_RESTORE, s->Tp, s->hid,
            x, xg));
  }
  CK(sc_coll_session_end(s->sess), "%s", s->sess->diag.msg);
  if (out != NULL && out->logits != NULL) {
    int32_t *last = ids; /* reuse the staging array: rows of the last tokens */
    int32_t nl = 0;
    for (int32_t i = 0; i < plan->num_reqs; i++)
      if (m->last_token[i] >= 0 && (in->sample == NULL || in->sample[i]))
        last[nl++] = m->hidden_restore[m->last_token[i]];
    const int32_t *dlast = upload(f, I_LAST, last, (size_t)nl, &rc);
    CK(rc, "forward: upload");
    float *xl = f->buf[B_XL], *logits = f->buf[B_LOGITS];
    CK(f->k->ops->gather_rows(f->k, nl, s->hid,
                              (sc_krows){xg, SC_KFMT_F32, s->hid, (int64_t)s->P * s->Tp}, dlast,
                              (sc_krows){xl, SC_KFMT_F32, s->hid, nl}),
       "forward: last-token rows");
    CK(f->k->ops->rmsnorm(f->k, nl, s->hid, xl, s->hid, f->w->t[SC_W_NORM], mc->rms_eps, xl,
                          s->hid),
       "forward: final norm");
    CK(sc_linear(f->k, nl, mc->vocab, s->hid, xl, s->hid, f->w->t[SC_W_HEAD], s->hid, logits,
              mc->vocab, 1.0f),
       "forward: LM head");
    int32_t r = 0;
    for (int32_t i = 0; i < plan->num_reqs; i++) {
      float *dst = out->logits + (size_t)i * mc->vocab;
      if (m->last_token[i] < 0 || (in->sample != NULL && !in->sample[i])) {
        memset(dst, 0, (size_t)mc->vocab * fl);
        continue;
      }
      CK(f->k->ops->copy(f->k, dst, logits + (size_t)r++ * mc->vocab, (size_t)mc->vocab * fl,
                         SC_KCOPY_D2H_DEFERRED),
         "forward: logits download");
    }
  }
  sc_step_prof_end(&f->prof);
out:
  return rc;
}

int sc_forward_profile(const sc_forward *f, uint64_t ns[SC_STAGE_COUNT], uint64_t *span) {
  return sc_step_prof_read(&f->prof, ns, span);
}

int sc_forward_finish(sc_forward *f, sc_diag *d) {
  const int rc = sc_coll_session_finish(&f->sess);
  if (rc && d) *d = f->sess.diag;
  return rc;
}
