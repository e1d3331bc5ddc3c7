/* cpu_elementwise.c - RMSNorm, LayerNorm, RoPE (interleaved pairs, from theta or a
 * frequency table), SwiGLU, the residual add and the weighted row sum of the MoE combine.
 * Row loops split over the worker pool; sums of squares in double so the reference is
 * insensitive to the dimension. */
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/fp8_e4m3.h"

typedef struct {
  int64_t dim;
  const float *x, *w;
  int64_t ld_x, ld_out;
  float eps;
  float *out;
} rms_job;

static int rms_rows(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const rms_job *j = p;
  for (int64_t r = b; r < e; r++) {
    const float *x = j->x + r * j->ld_x;
    float *o = j->out + r * j->ld_out;
    double ss = 0;
    for (int64_t i = 0; i < j->dim; i++) ss += (double)x[i] * x[i];
    const float inv = (float)(1.0 / sqrt(ss / (double)j->dim + (double)j->eps));
    for (int64_t i = 0; i < j->dim; i++) o[i] = x[i] * inv * (j->w ? j->w[i] : 1.0f);
  }
  return 0;
}

int sc_kcpu_rmsnorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                    int64_t ld_x, const float *w, float eps, float *out, int64_t ld_out) {
  SC_KCHECK(sc_kcheck_rmsnorm(n_rows, dim, x, ld_x, eps, out, ld_out));
  rms_job j = {dim, x, w, ld_x, ld_out, eps, out};
  return sc_kcpu_parallel(sc_kcpu_of(k), n_rows, 64, rms_rows, &j);
}

typedef struct {
  int32_t n_heads, rot_dim;
  float *x;
  int64_t ld_tok, ld_head;
  const int32_t *pos;
  const double *freq; /* theta^(-2i/rot_dim) for i < rot_dim/2: the same for every token */
  double factor;      /* multiplies cos and sin (transformers' attention_scaling) */
} rope_job;

static int rope_rows(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const rope_job *j = p;
  for (int64_t t = b; t < e; t++) {
    const double pos = (double)j->pos[t];
    for (int32_t i = 0; i < j->rot_dim / 2; i++) {
      /* angle in double: positions reach 1e5+, where float phase error would show */
      const double ang = pos * j->freq[i];
      const float cs = (float)(cos(ang) * j->factor), sn = (float)(sin(ang) * j->factor);
      for (int32_t h = 0; h < j->n_heads; h++) {
        float *v = j->x + t * j->ld_tok + h * j->ld_head + 2 * i;
        const float a = v[0], c = v[1];
        v[0] = a * cs - c * sn;
        v[1] = a * sn + c * cs;
      }
    }
  }
  return 0;
}

int sc_kcpu_rope(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim, float *x,
                 int64_t ld_tok, int64_t ld_head, const int32_t *pos, float theta) {
  SC_KCHECK(sc_kcheck_rope(n_tok, n_heads, rot_dim, x, ld_head, pos, theta));
  double *freq = malloc(sizeof *freq * (size_t)(rot_dim / 2));
  if (freq == NULL) return SC_ENOMEM;
  for (int32_t i = 0; i < rot_dim / 2; i++) freq[i] = pow(theta, -2.0 * i / (double)rot_dim);
  rope_job j = {n_heads, rot_dim, x, ld_tok, ld_head, pos, freq, 1.0};
  const int rc = sc_kcpu_parallel(sc_kcpu_of(k), n_tok, 16, rope_rows, &j);
  free(freq);
  return rc;
}

int sc_kcpu_rope_freq(sc_kernels *k, int64_t n_tok, int32_t n_heads, int32_t rot_dim,
                      float *x, int64_t ld_tok, int64_t ld_head, const int32_t *pos,
                      const double *inv_freq, float attn_factor) {
  SC_KCHECK(sc_kcheck_rope_freq(n_tok, n_heads, rot_dim, x, ld_head, pos, inv_freq, attn_factor));
  rope_job j = {n_heads, rot_dim, x, ld_tok, ld_head, pos, inv_freq, (double)attn_factor};
  return sc_kcpu_parallel(sc_kcpu_of(k), n_tok, 16, rope_rows, &j);
}

typedef struct {
  int64_t dim;
  const float *x, *w, *b;
  int64_t ld_x, ld_out;
  float eps;
  float *out;
} ln_job;

static int ln_rows(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const ln_job *j = p;
  for (int64_t r = b; r < e; r++) {
    const float *x = j->x + r * j->ld_x;
    float *o = j->out + r * j->ld_out;
    double s = 0, ss = 0;
    for (int64_t i = 0; i < j->dim; i++) s += x[i];
    const double mean = s / (double)j->dim;
    for (int64_t i = 0; i < j->dim; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    const double inv = 1.0 / sqrt(ss / (double)j->dim + (double)j->eps);
    for (int64_t i = 0; i < j->dim; i++)
      o[i] = (float)(((double)x[i] - mean) * inv) * (j->w ? j->w[i] : 1.0f) + (j->b ? j->b[i] : 0.0f);
  }
  return 0;
}

int sc_kcpu_layernorm(sc_kernels *k, int64_t n_rows, int64_t dim, const float *x,
                      int64_t ld_x, const float *w, const float *b, float eps, float *out,
                      int64_t ld_out) {
  SC_KCHECK(sc_kcheck_rmsnorm(n_rows, dim, x, ld_x, eps, out, ld_out));
  ln_job j = {dim, x, w, b, ld_x, ld_out, eps, out};
  return sc_kcpu_parallel(sc_kcpu_of(k), n_rows, 64, ln_rows, &j);
}

typedef struct {
  int32_t topk;
  int64_t width, ld_src, src_rows, ld_add, ld_out;
  const float *src, *weight, *add;
  const int32_t *rows;
  float *out;
} wsum_job;

static int wsum_rows(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const wsum_job *j = p;
  for (int64_t t = b; t < e; t++) {
    float *o = j->out + t * j->ld_out;
    for (int64_t c = 0; c < j->width; c++) o[c] = 0.0f;
    for (int32_t i = 0; i < j->topk; i++) {
      const int64_t r = j->rows[t * j->topk + i];
      if (r == -1) continue;
      if (r < 0 || r >= j->src_rows) return SC_ERANGE;
      const float w = j->weight[t * j->topk + i], *s = j->src + r * j->ld_src;
      for (int64_t c = 0; c < j->width; c++) o[c] += w * s[c];
    }
    if (j->add != NULL) {
      const float *a = j->add + t * j->ld_add;
      for (int64_t c = 0; c < j->width; c++) o[c] += a[c];
    }
  }
  return 0;
}

int sc_kcpu_weighted_sum_rows(sc_kernels *k, int64_t n_tok, int32_t topk, int64_t width,
                              const float *src, int64_t ld_src, int64_t src_rows,
                              const int32_t *rows, const float *weight, const float *add,
                              int64_t ld_add, float *out, int64_t ld_out) {
  SC_KCHECK(sc_kcheck_weighted_sum_rows(n_tok, topk, width, src, ld_src, src_rows, rows, weight,
                                        add, ld_add, out, ld_out));
  wsum_job j = {topk, width, ld_src, src_rows, ld_add, ld_out, src, weight, add, rows, out};
  return sc_kcpu_parallel(sc_kcpu_of(k), n_tok, 16, wsum_rows, &j);
}

typedef struct {
  int64_t rows, cols, srows, scols;
  const uint8_t *q;
  const float *scale;
  int32_t r_off, c_off, br, bc;
  float *out;
} dequant_job;

/* items: (matrix, row) pairs */
static int dequant_rows(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const dequant_job *j = p;
  for (int64_t it = b; it < e; it++) {
    const int64_t m = it / j->rows, r = it % j->rows;
    const uint8_t *q = j->q + it * j->cols;
    const float *s = j->scale + m * j->srows * j->scols + ((r + j->r_off) / j->br) * j->scols;
    float *o = j->out + it * j->cols;
    for (int64_t c = 0; c < j->cols; c++)
      o[c] = sc_e4m3_value(q[c]) * s[(c + j->c_off) / j->bc];
  }
  return 0;
}

int sc_kcpu_dequant_fp8(sc_kernels *k, int32_t mats, int64_t rows, int64_t cols,
                        const uint8_t *q, const float *scale, int64_t srows, int64_t scols,
                        int32_t r_off, int32_t c_off, int32_t block_rows, int32_t block_cols,
                        float *out) {
  SC_KCHECK(sc_kcheck_dequant_fp8(mats, rows, cols, q, scale, srows, scols, r_off, c_off,
                                  block_rows, block_cols, out));
  dequant_job j = {rows, cols, srows, scols, q, scale, r_off, c_off, block_rows, block_cols, out};
  return sc_kcpu_parallel(sc_kcpu_of(k), (int64_t)mats * rows, 16, dequant_rows, &j);
}

typedef struct {
  int64_t inter;
  const float *gate, *up;
  int64_t ld_gate, ld_up, ld_out;
  float *out;
} swiglu_job;

static int swiglu_rows(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const swiglu_job *j = p;
  for (int64_t r = b; r < e; r++) {
    const float *g = j->gate + r * j->ld_gate, *u = j->up + r * j->ld_up;
    float *o = j->out + r * j->ld_out;
    for (int64_t i = 0; i < j->inter; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
  }
  return 0;
}

int sc_kcpu_swiglu(sc_kernels *k, int64_t n_rows, int64_t inter, const float *gate,
                   int64_t ld_gate, const float *up, int64_t ld_up, float *out,
                   int64_t ld_out) {
  SC_KCHECK(sc_kcheck_rows_op(n_rows, inter, gate, up, out));
  swiglu_job j = {inter, gate, up, ld_gate, ld_up, ld_out, out};
  return sc_kcpu_parallel(sc_kcpu_of(k), n_rows, 16, swiglu_rows, &j);
}

typedef struct {
  int64_t width;
  const float *x;
  int64_t ld_x, ld_y;
  float *y;
} add_job;

static int add_rows(void *p, int64_t b, int64_t e, int worker) {
  (void)worker;
  const add_job *j = p;
  for (int64_t r = b; r < e; r++) {
    const float *x = j->x + r * j->ld_x;
    float *y = j->y + r * j->ld_y;
    for (int64_t i = 0; i < j->width; i++) y[i] += x[i];
  }
  return 0;
}

int sc_kcpu_add(sc_kernels *k, int64_t n_rows, int64_t width, const float *x,
                int64_t ld_x, float *y, int64_t ld_y) {
  SC_KCHECK(sc_kcheck_rows_op(n_rows, width, x, y, y));
  add_job j = {width, x, ld_x, ld_y, y};
  return sc_kcpu_parallel(sc_kcpu_of(k), n_rows, 64, add_rows, &j);
}
