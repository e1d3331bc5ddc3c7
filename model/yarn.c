/* yarn.c - YaRN rotary frequencies, scale corrections and rotation (see yarn.h). */
#include "model/yarn.h"

#include <assert.h>
#include <math.h>

double sc_yarn_correction_dim(double num_rotations, int32_t rot_dim, double theta,
                              int32_t original_max_position_embeddings) {
  return (double)rot_dim *
         log((double)original_max_position_embeddings / (num_rotations * 2.0 * M_PI)) /
         (2.0 * log(theta));
}

void sc_yarn_correction_range(const sc_hf_rope_scaling *y, int32_t rot_dim, double theta,
                              int32_t *low, int32_t *high) {
  const int32_t L = y->original_max_position_embeddings;
  const double lo = floor(sc_yarn_correction_dim(y->beta_fast, rot_dim, theta, L));
  const double hi = ceil(sc_yarn_correction_dim(y->beta_slow, rot_dim, theta, L));
  /* As the references: low is clamped from below only, high from above only, so high <
   * low can happen (then the ramp is 0 or 1 throughout). The wide bounds only keep the
   * conversion defined; they change no ramp value. */
  const double wide = (double)(1 << 30);
  *low = (int32_t)(lo < 0 ? 0 : lo > wide ? wide : lo);
  *high = (int32_t)(hi > rot_dim - 1 ? rot_dim - 1 : hi < -wide ? -wide : hi);
}

double sc_yarn_ramp(int32_t i, int32_t low, int32_t high) {
  const double span = low == high ? 0.001 : (double)high - (double)low;
  const double r = ((double)i - (double)low) / span;
  return r < 0 ? 0 : r > 1 ? 1 : r;
}

double sc_yarn_get_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

int sc_rope_inv_freq(const sc_hf_rope_scaling *rope, double theta, int32_t rot_dim,
                     double *inv_freq, sc_diag *d) {
  if (rot_dim < 2 || rot_dim % 2)
    return sc_fail(d, SC_EINVAL, "rope: rotary width %d must be even and >= 2", rot_dim);
  if (!isfinite(theta) || !(theta > 1.0))
    return sc_fail(d, SC_EINVAL, "rope: rope_theta = %g must be a finite number > 1", theta);
  if (rope->type != SC_HF_ROPE_DEFAULT && rope->type != SC_HF_ROPE_YARN)
    return sc_fail(d, SC_EINVAL, "rope: unknown rope type %d", rope->type);
  const bool yarn = rope->type == SC_HF_ROPE_YARN;
  if (yarn && (!isfinite(rope->factor) || !(rope->factor >= 1.0) ||
               !isfinite(rope->beta_fast) || !(rope->beta_slow > 0.0) ||
               !(rope->beta_fast >= rope->beta_slow) ||
               rope->original_max_position_embeddings < 1))
    return sc_fail(d, SC_EINVAL,
                   "rope: YaRN needs factor >= 1 (%g), beta_fast >= beta_slow > 0 (%g, %g) and "
                   "original_max_position_embeddings >= 1 (%d)",
                   rope->factor, rope->beta_fast, rope->beta_slow,
                   rope->original_max_position_embeddings);
  int32_t low = 0, high = 0;
  if (yarn) sc_yarn_correction_range(rope, rot_dim, theta, &low, &high);
  for (int32_t i = 0; i < rot_dim / 2; i++) {
    const double base = 1.0 / pow(theta, 2.0 * i / (double)rot_dim);
    if (!yarn) {
      inv_freq[i] = base;
      continue;
    }
    /* transformers' names: extrapolation factor e = 1 - ramp, and
     * inv_freq = interpolation * (1 - e) + extrapolation * e */
    const double e = 1.0 - sc_yarn_ramp(i, low, high);
    inv_freq[i] = base / rope->factor * (1.0 - e) + base * e;
  }
  return 0;
}

double sc_rope_attention_factor(const sc_hf_rope_scaling *rope) {
  if (rope->type != SC_HF_ROPE_YARN) return 1.0;
  const double s = rope->factor;
  if (rope->mscale != 0.0 && rope->mscale_all_dim != 0.0)
    return sc_yarn_get_mscale(s, rope->mscale) / sc_yarn_get_mscale(s, rope->mscale_all_dim);
  return sc_yarn_get_mscale(s, 1.0);
}

double sc_rope_softmax_scale(const sc_hf_rope_scaling *rope, int32_t qk_head_dim) {
  assert(qk_head_dim > 0);
  double scale = 1.0 / sqrt((double)qk_head_dim);
  if (rope->type == SC_HF_ROPE_YARN && rope->mscale_all_dim != 0.0) {
    const double m = sc_yarn_get_mscale(rope->factor, rope->mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

void sc_rope_rotate(sc_rope_layout layout, int32_t rot_dim, const double *inv_freq,
                    double attn_factor, int64_t pos, float *x) {
  assert(rot_dim >= 2 && rot_dim % 2 == 0);
  const int32_t half = rot_dim / 2;
  for (int32_t i = 0; i < half; i++) {
    float *a = layout == SC_ROPE_INTERLEAVED ? x + 2 * i : x + i;
    float *b = layout == SC_ROPE_INTERLEAVED ? x + 2 * i + 1 : x + i + half;
    const double t = (double)pos * inv_freq[i];
    const double c = cos(t) * attn_factor, s = sin(t) * attn_factor;
    const double va = *a, vb = *b;
    *a = (float)(va * c - vb * s);
    *b = (float)(va * s + vb * c);
  }
}
