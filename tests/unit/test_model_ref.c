/* test_model_ref.c - the model's math against an independent float64 implementation
 * written from docs/model.md: no kernels, no weight absorption (keys and values are
 * expanded per head from c_kv with W_UK and W_UV), brute-force top-K. The equivalence
 * test compares distributed runs with the single-rank run; this one checks that the
 * single-rank run computes the documented model. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fp8_e4m3.h"
#include "model/harness.h"
#include "model/model_defaults.h"
#include "model/sampling.h"
#include "model/weights.h"

extern void openblas_set_num_threads(int);

static sc_model_config ref_model(void) {
  sc_model_config m;
  sc_model_config_default(&m);
  m.vocab = 128, m.hidden = 32, m.layers = 2, m.heads = 2, m.q_lora_rank = 16;
  m.kv_lora_rank = 16, m.qk_nope_dim = 8, m.rope_dim = 8, m.v_head_dim = 8;
  m.index_heads = 2, m.index_dim = 8, m.topk = 4, m.ffn_hidden = 32, m.seed = 99;
  return m;
}

/* full tensor i as doubles, [rows][cols] */
static double *tensor(const sc_model_config *m, int32_t i) {
  sc_tensor_info t;
  sc_model_tensor_info(m, i, &t);
  double *o = malloc(sizeof(double) * (size_t)(t.rows * t.cols));
  for (int64_t r = 0; r < t.rows; r++)
    for (int64_t c = 0; c < t.cols; c++)
      o[r * t.cols + c] = sc_model_synthetic_value(m, &t, r, c);
  return o;
}

/* y[n] = W[n][k] x[k] */
static void matvec(const double *w, int n, int k, const double *x, double *y) {
  for (int i = 0; i < n; i++) {
    double s = 0;
    for (int j = 0; j < k; j++) s += w[(size_t)i * k + j] * x[j];
    y[i] = s;
  }
}

static void rmsnorm(double *x, int n, const double *w, double eps) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  const double inv = 1.0 / sqrt(ss / n + eps);
  for (int i = 0; i < n; i++) x[i] = x[i] * inv * w[i];
}

static void rope(double *x, int rot, int pos, double theta) {
  for (int i = 0; i < rot / 2; i++) {
    const double a = pos * pow(theta, -2.0 * i / rot), cs = cos(a), sn = sin(a);
    const double u = x[2 * i], v = x[2 * i + 1];
    x[2 * i] = u * cs - v * sn;
    x[2 * i + 1] = u * sn + v * cs;
  }
}

enum { MAXL = 16 };

typedef struct ref_out {
  double logits[128];
  int32_t topk[2][MAXL][4];   /* [layer][token][k] */
  double kth_gap[2][MAXL];    /* score gap between the K-th and (K+1)-th candidate */
  double score[2][MAXL][MAXL]; /* [layer][token][key]: every indexer score, keys <= token */
  double score_max[2][MAXL];   /* the largest |score| of a token */
} ref_out;

/* n values as an fp8_index row holds them (docs/model.md, "fp8 index keys"): the
 * quantizer's rule of kernels/fp8_e4m3.h on the values in f32 (as the forward has them),
 * each then scale times its e4m3 value. */
static void round_e4m3(double *v, int n) {
  float f[64], amax = 0.0f;
  for (int i = 0; i < n; i++) f[i] = (float)v[i], amax = fmaxf(amax, fabsf(f[i]));
  const float sc = sc_kfp8_index_scale(amax);
  for (int i = 0; i < n; i++) v[i] = (double)sc * sc_e4m3_value(sc_e4m3_encode(f[i] / sc));
}

/* The documented model over tokens[0..L) of one request (positions 0..L-1); index_fp8:
 * the indexer's keys and each query head rounded by round_e4m3 (--index-format fp8). */
static void reference(const sc_model_config *m, const int32_t *tokens, int L, bool index_fp8,
                      ref_out *out) {
  const int H = m->heads, dn = m->qk_nope_dim, dr = m->rope_dim, dc = m->kv_lora_rank;
  const int dv = m->v_head_dim, hid = m->hidden, qr = m->q_lora_rank, HI = m->index_heads;
  const int dI = m->index_dim, K = m->topk, F = m->ffn_hidden, qd = dn + dr;
  const int idr = sc_model_index_rope_dim(m);
  const double eps = m->rms_eps, theta = m->rope_theta;
  double *emb = tensor(m, SC_W_EMBED);
  double x[MAXL][64], c[MAXL][32], kr[MAXL][16], kidx[MAXL][16];
  for (int t = 0; t < L; t++)
    for (int i = 0; i < hid; i++) x[t][i] = emb[(size_t)tokens[t] * hid + i];
  for (int l = 0; l < m->layers; l++) {
    double *W[SC_W_LAYER_COUNT];
    for (int kk = 0; kk < SC_W_LAYER_COUNT; kk++)
      W[kk] = tensor(m, sc_model_tensor_index(l, (sc_wkind)kk));
    double q[MAXL][64], qidx[MAXL][32], widx[MAXL][4], xn[MAXL][64];
    for (int t = 0; t < L; t++) {
      memcpy(xn[t], x[t], sizeof(double) * hid);
      rmsnorm(xn[t], hid, W[SC_W_ATTN_NORM], eps);
      double ql[32], kv[64];
      matvec(W[SC_W_WQ_A], qr, hid, xn[t], ql);
      rmsnorm(ql, qr, W[SC_W_Q_NORM], eps);
      matvec(W[SC_W_WQ_B], H * qd, qr, ql, q[t]);
      for (int h = 0; h < H; h++) rope(q[t] + h * qd + dn, dr, t, theta);
      matvec(W[SC_W_WKV_A], dc + dr, hid, xn[t], kv);
      rmsnorm(kv, dc, W[SC_W_KV_NORM], eps);
      memcpy(c[t], kv, sizeof(double) * dc);
      memcpy(kr[t], kv + dc, sizeof(double) * dr);
      rope(kr[t], dr, t, theta);
      matvec(W[SC_W_IDX_WK], dI, hid, xn[t], kidx[t]);
      rope(kidx[t], idr, t, theta);
      matvec(W[SC_W_IDX_WQ], HI * dI, qr, ql, qidx[t]);
      for (int h = 0; h < HI; h++) rope(qidx[t] + h * dI, idr, t, theta);
      if (index_fp8) {
        round_e4m3(kidx[t], dI);
        for (int h = 0; h < HI; h++) round_e4m3(qidx[t] + h * dI, dI);
      }
      matvec(W[SC_W_IDX_WW], HI, hid, xn[t], widx[t]);
      for (int h = 0; h < HI; h++) widx[t][h] /= sqrt((double)dI * HI);
    }
    for (int t = 0; t < L; t++) {
      /* indexer: brute force over s <= t, (score desc, pos asc) */
      double score[MAXL];
      int order[MAXL];
      for (int s = 0; s <= t; s++) {
        double sc = 0;
        for (int h = 0; h < HI; h++) {
          double dot = 0;
          for (int i = 0; i < dI; i++) dot += qidx[t][h * dI + i] * kidx[s][i];
          sc += widx[t][h] * (dot > 0 ? dot : 0);
        }
        score[s] = sc;
        order[s] = s;
        out->score[l][t][s] = sc;
        out->score_max[l][t] = fmax(out->score_max[l][t], fabs(sc));
      }
      for (int a = 0; a <= t; a++)
        for (int b = a + 1; b <= t; b++)
          if (score[order[b]] > score[order[a]] ||
              (score[order[b]] == score[order[a]] && order[b] < order[a])) {
            const int tmp = order[a];
            order[a] = order[b];
            order[b] = tmp;
          }
      const int nsel = t + 1 < K ? t + 1 : K;
      for (int k = 0; k < K; k++) out->topk[l][t][k] = k < nsel ? order[k] : -1;
      out->kth_gap[l][t] = t + 1 > K ? score[order[K - 1]] - score[order[K]] : INFINITY;
      /* attention with expanded keys and values */
      double o[64] = {0};
      for (int h = 0; h < H; h++) {
        const double *wuk = W[SC_W_WKV_B] + (size_t)h * (dn + dv) * dc;
        const double *wuv = wuk + (size_t)dn * dc;
        double s[4], mx = -INFINITY, v[4][16];
        for (int k = 0; k < nsel; k++) {
          const int j = order[k];
          double kn[16], dot = 0;
          matvec(wuk, dn, dc, c[j], kn);
          for (int i = 0; i < dn; i++) dot += q[t][h * qd + i] * kn[i];
          for (int i = 0; i < dr; i++) dot += q[t][h * qd + dn + i] * kr[j][i];
          s[k] = dot / sqrt((double)qd);
          mx = s[k] > mx ? s[k] : mx;
          matvec(wuv, dv, dc, c[j], v[k]);
        }
        double z = 0;
        for (int k = 0; k < nsel; k++) z += exp(s[k] - mx);
        for (int k = 0; k < nsel; k++)
          for (int i = 0; i < dv; i++) o[h * dv + i] += exp(s[k] - mx) / z * v[k][i];
      }
      double ao[64];
      matvec(W[SC_W_WO], hid, H * dv, o, ao);
      /* the residual waits until every token of the layer has attended: the KV and
       * index keys above were computed from the layer's input */
      memcpy(xn[t], ao, sizeof(double) * hid);
    }
    for (int t = 0; t < L; t++) {
      for (int i = 0; i < hid; i++) x[t][i] += xn[t][i];
      double y[64], g[32], u[32], hh[32], mo[64];
      memcpy(y, x[t], sizeof(double) * hid);
      rmsnorm(y, hid, W[SC_W_FFN_NORM], eps);
      matvec(W[SC_W_W1], F, hid, y, g);
      matvec(W[SC_W_W3], F, hid, y, u);
      for (int i = 0; i < F; i++) hh[i] = g[i] / (1 + exp(-g[i])) * u[i];
      matvec(W[SC_W_W2], hid, F, hh, mo);
      for (int i = 0; i < hid; i++) x[t][i] += mo[i];
    }
    for (int kk = 0; kk < SC_W_LAYER_COUNT; kk++) free(W[kk]);
  }
  double *norm = tensor(m, SC_W_NORM), *head = tensor(m, SC_W_HEAD);
  double y[64];
  memcpy(y, x[L - 1], sizeof(double) * hid);
  rmsnorm(y, hid, norm, eps);
  matvec(head, m->vocab, hid, y, out->logits);
  free(norm);
  free(head);
  free(emb);
}

static void compare(const sc_model_config *m, const ref_out *r, const float *logits,
                    const sc_kcand *topk, int nt, int tok0, int *near_ties) {
  const int K = m->topk;
  bool tie = false;
  for (int l = 0; l < m->layers; l++)
    for (int t = 0; t < nt; t++) {
      const sc_kcand *got = topk + ((size_t)l * nt + t) * K;
      for (int k = 0; k < K; k++) { /* each pick's score, as the float64 model's */
        const int32_t p = got[k].pos;
        if (p < 0) continue;
        cr_assert(p <= tok0 + t, "layer %d token %d: picked the later key %d", l, tok0 + t, p);
        const double want = r->score[l][tok0 + t][p];
        cr_assert_leq(fabs(got[k].score - want), 1e-5 * r->score_max[l][tok0 + t] + 1e-9,
                      "layer %d token %d key %d: score %.9g, float64 %.9g", l, tok0 + t, p,
                      (double)got[k].score, want);
      }
      for (int k = 0; k < K; k++) {
        bool found = false;
        for (int j = 0; j < K && !found; j++) found = got[j].pos == r->topk[l][tok0 + t][k];
        if (!found) {
          cr_assert_lt(r->kth_gap[l][tok0 + t], 1e-5, "layer %d token %d: top-K differs", l,
                       tok0 + t);
          tie = true;
        }
      }
    }
  if (tie) {
    (*near_ties)++;
    return;
  }
  double mx = 0, diff = 0;
  for (int v = 0; v < m->vocab; v++) {
    mx = fmax(mx, fabs(r->logits[v]));
    diff = fmax(diff, fabs(r->logits[v] - logits[v]));
  }
  cr_assert_leq(diff, 1e-4 * mx, "logits differ from float64: rel %g", diff / mx);
  fprintf(stderr, "model_ref: step at token %d: logits rel %.3g vs float64\n", tok0, diff / mx);
}

/* index_fp8: the harness keeps fp8 index keys and the float64 model rounds as they do */
static void single_rank_vs_float64(bool index_fp8) {
  openblas_set_num_threads(1);
  const sc_model_config m = ref_model();
  sc_harness_config hc = {.model = m, .num_blocks = 8, .kv_fmt = SC_KFMT_F32,
                          .index_fp8 = index_fp8, .kernel_threads = 1};
  sc_model_plan_config_default(&hc.plan);
  hc.plan.block_size = 4;
  sc_harness *h;
  sc_diag d = {0};
  cr_assert_eq(sc_harness_create(&hc, &h, &d), 0, "%s", d.msg);
  int32_t tokens[MAXL];
  for (int i = 0; i < MAXL; i++) tokens[i] = (i * 53 + 11) % m.vocab;
  const int32_t bstart[2] = {0, 4}, blocks[4] = {2, 0, 3, 1};
  int near_ties = 0, compared = 0;
  /* step 1: prefill 10 tokens; steps 2..4: decode one token each */
  for (int st = 0; st < 4; st++) {
    const int q = st == 0 ? 10 : 1, c = st == 0 ? 0 : 9 + st;
    const sc_batch_req req = {.id = 5, .computed = c, .scheduled = q, .prefill = st == 0};
    const sc_harness_batch b = {.step = (uint64_t)st + 1, .num_reqs = 1, .reqs = &req,
                                .tokens = tokens + c, .block_start = bstart, .blocks = blocks};
    float logits[128];
    sc_kcand topk[2 * 10 * 4];
    sc_harness_result r = {.logits = logits, .topk = topk};
    cr_assert_eq(sc_harness_step(h, &b, &r, &d), 0, "%s", d.msg);
    ref_out *ro = calloc(1, sizeof *ro);
    reference(&m, tokens, c + q, index_fp8, ro);
    compare(&m, ro, logits, topk, q, c, &near_ties);
    compared++;
    free(ro);
  }
  cr_assert_leq(near_ties, 1, "%d of %d steps were near ties", near_ties, compared);
  sc_harness_destroy(h);
}

Test(model_ref, single_rank_matches_float64_model) { single_rank_vs_float64(false); }
Test(model_ref, single_rank_fp8_index_keys_match_float64_model) { single_rank_vs_float64(true); }

/* A multi-request batch (a chunked prefill with c > 0 and q > 1, a decode beside a
 * prefill, decodes of q = 2 and 3) on several layouts, each request against the float64
 * model over its own tokens: an error that every layout shares (the equivalence tests
 * compare layouts with each other) shows here. */
static void batch_vs_float64(int P, int N, int T, int I, bool index_fp8) {
  openblas_set_num_threads(1);
  const sc_model_config m = ref_model();
  sc_harness_config hc = {.model = m, .num_blocks = 16, .kv_fmt = SC_KFMT_F32,
                          .index_fp8 = index_fp8, .kernel_threads = 1};
  sc_model_plan_config_default(&hc.plan);
  hc.plan.block_size = 4;
  hc.plan.pcp = P;
  hc.plan.dcp = N;
  hc.plan.tp = T;
  hc.plan.interleave = I;
  sc_harness *h;
  sc_diag d = {0};
  cr_assert_eq(sc_harness_create(&hc, &h, &d), 0, "%s", d.msg);
  int32_t ta[MAXL], tb[MAXL];
  for (int i = 0; i < MAXL; i++) ta[i] = (i * 53 + 11) % m.vocab, tb[i] = (i * 29 + 5) % m.vocab;
  /* A: blocks 0..3, B: blocks 4..7 (virtual blocks of B*N tokens) */
  const int32_t bstart[3] = {0, 4, 8}, blocks[8] = {2, 0, 3, 1, 6, 4, 7, 5};
  /* step 1: A prefill 6. step 2: A prefill 4 more (c 6), B prefill 5. step 3: A decode,
   * B prefill 3 more (c 5). step 4: both decode. */
  const int steps[5][4] = {{0, 6, -1, 0}, {6, 4, 0, 5}, {10, 1, 5, 3}, {11, 1, 8, 1}, {12, 2, 9, 3}};
  const bool apf[5] = {true, true, false, false, false}, bpf[5] = {false, true, true, false, false};
  int near_ties = 0;
  for (int st = 0; st < 5; st++) {
    sc_batch_req req[2] = {{.id = 1, .computed = steps[st][0], .scheduled = steps[st][1], .prefill = apf[st]},
                           {.id = 2, .computed = steps[st][2] < 0 ? 0 : steps[st][2],
                            .scheduled = steps[st][2] < 0 ? 0 : steps[st][3], .prefill = bpf[st]}};
    const int nreq = steps[st][2] < 0 ? 1 : 2;
    int32_t toks[32], nt = 0;
    for (int t = 0; t < req[0].scheduled; t++) toks[nt++] = ta[req[0].computed + t];
    for (int t = 0; nreq > 1 && t < req[1].scheduled; t++) toks[nt++] = tb[req[1].computed + t];
    const sc_harness_batch b = {.step = (uint64_t)st + 1, .num_reqs = nreq, .reqs = req,
                                .tokens = toks, .block_start = bstart, .blocks = blocks};
    float logits[2 * 128];
    sc_kcand topk[2 * 32 * 4];
    sc_harness_result r = {.logits = logits, .topk = topk};
    cr_assert_eq(sc_harness_step(h, &b, &r, &d), 0, "step %d: %s", st, d.msg);
    /* per request: the float64 model over its own tokens only */
    int off = 0;
    for (int i = 0; i < nreq; i++) {
      const int c = req[i].computed, q = req[i].scheduled;
      ref_out *ro = calloc(1, sizeof *ro);
      reference(&m, i == 0 ? ta : tb, c + q, index_fp8, ro);
      /* top-K of this request's tokens: rows off..off+q of [layer][nt][K] */
      sc_kcand sub[2 * 16 * 4];
      for (int l = 0; l < m.layers; l++)
        for (int t = 0; t < q; t++)
          memcpy(&sub[((size_t)l * q + t) * 4], &topk[((size_t)l * nt + off + t) * 4], 4 * sizeof(sc_kcand));
      compare(&m, ro, logits + (size_t)i * m.vocab, sub, q, c, &near_ties);
      off += q;
      free(ro);
    }
  }
  cr_assert_leq(near_ties, 2);
  sc_harness_destroy(h);
}

Test(model_ref, batch_single_rank_vs_float64) { batch_vs_float64(1, 1, 1, 1, false); }
Test(model_ref, batch_p2_n2_vs_float64) { batch_vs_float64(2, 2, 1, 1, false); }
Test(model_ref, batch_p2_n1_vs_float64) { batch_vs_float64(2, 1, 1, 1, false); }
Test(model_ref, batch_p4_n4_i2_vs_float64) { batch_vs_float64(4, 4, 1, 2, false); }
Test(model_ref, batch_p1_t2_n2_vs_float64) { batch_vs_float64(1, 2, 2, 1, false); }
Test(model_ref, batch_p2_t2_n2_i4_vs_float64) { batch_vs_float64(2, 2, 2, 4, false); }

/* fp8 index keys: the layouts that read them the most ways (DCP's workspace and merge) */
Test(model_ref, batch_p2_n2_fp8_index_keys_vs_float64) { batch_vs_float64(2, 2, 1, 1, true); }
Test(model_ref, batch_p1_t2_n2_fp8_index_keys_vs_float64) { batch_vs_float64(1, 2, 2, 1, true); }
