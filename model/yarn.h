/* yarn.h - rotary embedding of DeepSeek-V3/V3.2 checkpoints: the YaRN frequency table,
 * its attention-scale corrections, and the two pair layouts the model uses (issue 23,
 * point 2). Pure math; the forward pass of a checkpoint model takes its table
 * (sc_rope_inv_freq, through the kernel rope_freq), its cos/sin factor and its softmax
 * scale from here (docs/model.md, "Serving a DeepSeek-V3.2 checkpoint").
 *
 * References (read, not copied): Hugging Face transformers
 * src/transformers/modeling_rope_utils.py (_compute_yarn_parameters, its get_mscale,
 * find_correction_dim, find_correction_range, linear_ramp_factor),
 * src/transformers/models/deepseek_v32/modeling_deepseek_v32.py (DeepseekV32RotaryEmbedding,
 * yarn_get_mscale, yarn_apply_mscale, apply_rotary_pos_emb_interleave, the indexer's
 * apply_rotary_pos_emb), and deepseek-ai/DeepSeek-V3.2-Exp inference/model.py
 * (precompute_freqs_cis, apply_rotary_emb, MLA.__init__'s softmax_scale, Indexer.forward).
 *
 * With rot_dim = qk_rope_head_dim (d), theta = rope_theta, and for YaRN factor s,
 * original_max_position_embeddings L, beta_fast bf, beta_slow bs:
 *
 *   base_i   = theta^(-2i/d), i < d/2                    (plain RoPE: inv_freq_i = base_i)
 *   cdim(r)  = d * ln(L / (2 pi r)) / (2 ln theta)
 *   low      = max(floor(cdim(bf)), 0),  high = min(ceil(cdim(bs)), d - 1)
 *   ramp_i   = clamp((i - low) / (high - low), 0, 1)     (high += 0.001 when low == high;
 *                                                          high < low is left as it is)
 *   inv_freq_i = base_i / s * ramp_i + base_i * (1 - ramp_i)
 *
 * so pairs below `low` keep their frequency (extrapolation), pairs above `high` are
 * divided by s (interpolation), and a linear blend lies between. A pair i at position p
 * rotates by the angle p * inv_freq_i.
 *
 *   get_mscale(s, m)   = 1 if s <= 1, else 0.1 * m * ln(s) + 1
 *   softmax scale      = qk_head_dim^-0.5 * get_mscale(s, mscale_all_dim)^2
 *                        (transformers: only when mscale_all_dim != 0; plain RoPE: no factor)
 *   cos/sin factor a   = get_mscale(s, mscale) / get_mscale(s, mscale_all_dim) when both are
 *                        non-zero, else get_mscale(s, 1); plain RoPE: 1. transformers
 *                        multiplies cos and sin by a, i.e. the rotated values; DeepSeek's
 *                        inference code has no such factor. Every published V3/V3.2 config
 *                        has mscale = mscale_all_dim = 1, so a = 1 exactly and both agree;
 *                        sparsecp follows transformers (the general formula).
 *
 * Layouts (which values form a rotated pair):
 *   SC_ROPE_INTERLEAVED  pair i = (x[2i], x[2i+1]). The MLA attention: q_rope, the last
 *                        qk_rope_head_dim values of each query head, and k_rope, the last
 *                        qk_rope_head_dim values of wkv_a's output (DeepSeek's
 *                        apply_rotary_emb default; transformers' apply_rotary_pos_emb_interleave,
 *                        which returns the result de-interleaved: [evens ; odds], the same
 *                        dot products). The layout of sparsecp's kernel `rope`.
 *   SC_ROPE_HALVES       pair i = (x[i], x[i + d/2]) (rotate_half, "NeoX"). The lightning
 *                        indexer: the FIRST qk_rope_head_dim values of each indexer query
 *                        head and of the indexer key (DeepSeek's apply_rotary_emb(..., False)
 *                        since the fix of 2025-11, transformers' indexer).
 * Both layouts use the same frequency table (YaRN included) and position.
 *
 * Everything is computed in double; the references compute the table and the angle
 * p * inv_freq in float32 (docs/model.md says what that changes). Pure, any thread.
 */
#ifndef SC_YARN_H
#define SC_YARN_H

#include <stdint.h>

#include "base/error.h"
#include "model/hf_config.h"

typedef enum sc_rope_layout {
  SC_ROPE_INTERLEAVED = 0, /* (x[2i], x[2i+1]): MLA q_rope / k_rope */
  SC_ROPE_HALVES = 1,      /* (x[i], x[i + d/2]): the lightning indexer */
} sc_rope_layout;

/* cdim(r) above: the pair index whose wavelength makes r full turns over L positions. */
double sc_yarn_correction_dim(double num_rotations, int32_t rot_dim, double theta,
                              int32_t original_max_position_embeddings);

/* low and high above: truncated to integers (transformers' default truncate = true,
 * DeepSeek's only form), then low = max(low, 0) and high = min(high, rot_dim - 1) as both
 * references do, so high < low is possible (a range past either end of the pairs). */
void sc_yarn_correction_range(const sc_hf_rope_scaling *y, int32_t rot_dim, double theta,
                              int32_t *low, int32_t *high);

/* ramp_i above for pair i (0 = keep the frequency, 1 = divide it by the factor). */
double sc_yarn_ramp(int32_t i, int32_t low, int32_t high);

/* get_mscale(s, m) above. */
double sc_yarn_get_mscale(double scale, double mscale);

/* inv_freq[0 .. rot_dim/2) for rope (type default: plain RoPE; yarn: the blend above).
 * SC_EINVAL (with d) for rot_dim < 2 or odd, theta <= 1 or not finite, an unknown type, or
 * YaRN fields out of range (factor < 1, beta_slow <= 0, beta_fast < beta_slow,
 * original_max_position_embeddings < 1): what hf_config.h already refuses. */
int sc_rope_inv_freq(const sc_hf_rope_scaling *rope, double theta, int32_t rot_dim,
                     double *inv_freq, sc_diag *d);

/* The cos/sin factor a above (transformers' attention_factor / attention_scaling). */
double sc_rope_attention_factor(const sc_hf_rope_scaling *rope);

/* The attention softmax scale: qk_head_dim^-0.5 times get_mscale(factor,
 * mscale_all_dim)^2 for YaRN with mscale_all_dim != 0. qk_head_dim =
 * qk_nope_head_dim + qk_rope_head_dim (> 0). */
double sc_rope_softmax_scale(const sc_hf_rope_scaling *rope, int32_t qk_head_dim);

/* Rotates x[0 .. rot_dim) in place for position pos: pair (a, b) of the layout becomes
 * (a cos t - b sin t, a sin t + b cos t) * attn_factor, t = pos * inv_freq[i], in double,
 * rounded once to float. rot_dim even and >= 2 (assert). */
void sc_rope_rotate(sc_rope_layout layout, int32_t rot_dim, const double *inv_freq,
                    double attn_factor, int64_t pos, float *x);

#endif
