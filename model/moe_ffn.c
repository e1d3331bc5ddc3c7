/* moe_ffn.c - one rank's part of a MoE layer's FFN (moe_ffn.h). */
#include "model/moe_ffn.h"

#include <stdlib.h>
#include <string.h>

#include "model/kbuf.h"
#include "model/moe_route.h"

enum { M_LOGITS, M_XG, M_G, M_U, M_Y, M_SG, M_SU, M_S, M_SRC, M_ROWS, M_W, M_COUNT };

struct sc_moe_ffn {
  sc_kernels *k;
  void *buf[M_COUNT];
  size_t cap[M_COUNT];
  /* host */
  float *logits, *bias, *weights;
  int32_t *picks, *src, *rows, *count;
  size_t host_rows, host_experts;
};

int sc_moe_ffn_create(sc_kernels *k, sc_moe_ffn **out, sc_diag *d) {
  sc_moe_ffn *m = calloc(1, sizeof *m);
  if (m == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  m->k = k;
  *out = m;
  return 0;
}

static void free_host(sc_moe_ffn *m) {
  free(m->logits), free(m->bias), free(m->weights);
  free(m->picks), free(m->src), free(m->rows), free(m->count);
  m->logits = m->bias = m->weights = NULL;
  m->picks = m->src = m->rows = m->count = NULL;
  m->host_rows = m->host_experts = 0;
}

void sc_moe_ffn_destroy(sc_moe_ffn *m) {
  if (m == NULL) return;
  for (int i = 0; i < M_COUNT; i++)
    if (m->buf[i]) m->k->ops->free(m->k, m->buf[i]);
  free_host(m);
  free(m);
}

/* Host arrays for `rows` tokens, k picks each, E experts. */
static int host_grow(sc_moe_ffn *m, size_t rows, size_t k, size_t E) {
  if (rows <= m->host_rows && E <= m->host_experts) return 0;
  free_host(m);
  const size_t r = rows > 1 ? rows : 1;
  m->logits = malloc(r * E * sizeof(float));
  m->bias = malloc(E * sizeof(float));
  m->weights = malloc(r * k * sizeof(float));
  m->picks = malloc(r * k * sizeof(int32_t));
  m->src = malloc(r * k * sizeof(int32_t));
  m->rows = malloc(r * k * sizeof(int32_t));
  m->count = malloc((E + 1) * sizeof(int32_t));
  if (!m->logits || !m->bias || !m->weights || !m->picks || !m->src || !m->rows || !m->count) {
    free_host(m);
    return SC_ENOMEM;
  }
  m->host_rows = r;
  m->host_experts = E;
  return 0;
}

#define CK(expr, ...)                                                                              \
  do {                                                                                             \
    if ((rc = (expr)) != 0) {                                                                      \
      sc_fail(d, rc, __VA_ARGS__);                                                                 \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)

int sc_moe_ffn_run(sc_moe_ffn *m, const sc_model_weights *w, int32_t layer, int64_t rows,
                   const float *xn, const int32_t *tok_global, float *out, sc_diag *d) {
  sc_kernels *k = m->k;
  const sc_kernels_ops *o = k->ops;
  const sc_model_config *c = &w->cfg;
  const sc_moe_route_cfg *rc_cfg = &c->arch.route;
  const int32_t E = rc_cfg->n_experts, K = rc_cfg->k, hid = c->hidden;
  const int64_t il = c->arch.moe_inter / w->tp;
  const int64_t sl = il * c->arch.n_shared;
  const size_t fl = sizeof(float);
  int rc = 0;
  if (rows == 0) return 0;
  if (o->weighted_sum_rows == NULL)
    return sc_fail(d, SC_ENOTSUP, "the %s kernels cannot run a MoE layer yet", k->device);
  CK(host_grow(m, (size_t)rows, (size_t)K, (size_t)E), "out of memory");

  /* ---- routing: f32 logits, then per token on the host ---- */
  float *logits = sc_kbuf_grow(k, &m->buf[M_LOGITS], &m->cap[M_LOGITS], (size_t)rows * E * fl, &rc);
  CK(rc, "MoE: cannot allocate the router logits");
  CK(sc_linear(k, rows, E, hid, xn, hid, sc_wx(w, layer, SC_WX_ROUTER), hid, logits, E, 1.0f),
     "layer %d: router", layer);
  CK(o->copy(k, m->logits, logits, (size_t)rows * E * fl, SC_KCOPY_D2H), "layer %d: router logits",
     layer);
  CK(o->copy(k, m->bias, sc_wx(w, layer, SC_WX_ROUTER_BIAS), (size_t)E * fl, SC_KCOPY_D2H),
     "layer %d: router bias", layer);
  memset(m->count, 0, (size_t)(E + 1) * sizeof *m->count);
  for (int64_t t = 0; t < rows; t++) {
    int32_t *p = m->picks + t * K;
    float *wt = m->weights + t * K;
    if (tok_global[t] < 0) {
      for (int32_t i = 0; i < K; i++) p[i] = -1, wt[i] = 0.0f;
      continue;
    }
    if ((rc = sc_moe_route(rc_cfg, m->logits + t * E, m->bias, p, wt, d))) goto out;
    for (int32_t i = 0; i < K; i++) m->count[p[i] + 1]++;
  }
  /* expert-major segments: expert e's tokens, in token order, from count[e] on */
  for (int32_t e = 0; e < E; e++) m->count[e + 1] += m->count[e];
  const int32_t n_picks = m->count[E];
  {
    int32_t next[SC_MOE_MAX_EXPERTS]; /* the next free row of each expert's segment */
    memcpy(next, m->count, (size_t)E * sizeof *next);
    for (int64_t t = 0; t < rows; t++)
      for (int32_t i = 0; i < K; i++) {
        const int32_t e = m->picks[t * K + i];
        if (e < 0) {
          m->rows[t * K + i] = -1;
          continue;
        }
        m->src[next[e]] = (int32_t)t;
        m->rows[t * K + i] = next[e]++;
      }
  }

  /* ---- routed experts on their gathered rows ---- */
  const size_t np = n_picks > 0 ? (size_t)n_picks : 1;
  int32_t *src = sc_kbuf_grow(k, &m->buf[M_SRC], &m->cap[M_SRC], np * sizeof(int32_t), &rc);
  int32_t *rws =
      sc_kbuf_grow(k, &m->buf[M_ROWS], &m->cap[M_ROWS], (size_t)rows * K * sizeof(int32_t), &rc);
  float *wts = sc_kbuf_grow(k, &m->buf[M_W], &m->cap[M_W], (size_t)rows * K * fl, &rc);
  float *xg = sc_kbuf_grow(k, &m->buf[M_XG], &m->cap[M_XG], np * hid * fl, &rc);
  float *g = sc_kbuf_grow(k, &m->buf[M_G], &m->cap[M_G], np * il * fl, &rc);
  float *u = sc_kbuf_grow(k, &m->buf[M_U], &m->cap[M_U], np * il * fl, &rc);
  float *y = sc_kbuf_grow(k, &m->buf[M_Y], &m->cap[M_Y], np * hid * fl, &rc);
  float *sg = sc_kbuf_grow(k, &m->buf[M_SG], &m->cap[M_SG], (size_t)rows * sl * fl, &rc);
  float *su = sc_kbuf_grow(k, &m->buf[M_SU], &m->cap[M_SU], (size_t)rows * sl * fl, &rc);
  float *sh = sc_kbuf_grow(k, &m->buf[M_S], &m->cap[M_S], (size_t)rows * hid * fl, &rc);
  CK(rc, "MoE: cannot allocate scratch");
  CK(o->copy(k, src, m->src, (size_t)n_picks * sizeof(int32_t), SC_KCOPY_H2D), "MoE: upload");
  CK(o->copy(k, rws, m->rows, (size_t)rows * K * sizeof(int32_t), SC_KCOPY_H2D), "MoE: upload");
  CK(o->copy(k, wts, m->weights, (size_t)rows * K * fl, SC_KCOPY_H2D), "MoE: upload");
  CK(o->gather_rows(k, n_picks, hid, (sc_krows){(void *)xn, SC_KFMT_F32, hid, rows}, src,
                    (sc_krows){xg, SC_KFMT_F32, hid, n_picks}),
     "layer %d: MoE token gather", layer);
  const float *w1 = sc_wx(w, layer, SC_WX_EXP_W1), *w3 = sc_wx(w, layer, SC_WX_EXP_W3),
              *w2 = sc_wx(w, layer, SC_WX_EXP_W2);
  for (int32_t e = 0; e < E; e++) {
    const int64_t b = m->count[e], n = m->count[e + 1] - b;
    if (n == 0) continue;
    const int64_t off = (int64_t)e * il * hid;
    CK(sc_linear_gated(k, n, il, hid, xg + b * hid, w1 + off, w3 + off, g + b * il, u + b * il),
       "layer %d: expert %d gate, up and swiglu", layer, e);
    CK(sc_linear(k, n, hid, il, g + b * il, il, w2 + off, il, y + b * hid, hid, 1.0f),
       "layer %d: expert %d down", layer, e);
  }

  /* ---- shared expert on every row (when there is one), then the combine ---- */
  if (sl > 0) {
    CK(sc_linear_gated(k, rows, sl, hid, xn, sc_wx(w, layer, SC_WX_SH_W1),
                       sc_wx(w, layer, SC_WX_SH_W3), sg, su),
       "layer %d: shared gate, up and swiglu", layer);
    CK(sc_linear(k, rows, hid, sl, sg, sl, sc_wx(w, layer, SC_WX_SH_W2), sl, sh, hid, 1.0f),
       "layer %d: shared down", layer);
  }
  CK(o->weighted_sum_rows(k, rows, K, hid, y, hid, n_picks, rws, wts, sl > 0 ? sh : NULL, hid, out,
                          hid),
     "layer %d: MoE combine", layer);
out:
  return rc;
}
