/* moe_route.h - DeepSeek-V3/V3.2 expert routing (topk_method "noaux_tc", scoring_func
 * "sigmoid") and the MoE combine of one token, on the CPU in f32 (issue 23, point 2).
 * Pure math; the forward pass routes each token of a MoE layer with it (model/moe_ffn.h;
 * docs/model.md, "Serving a DeepSeek-V3.2 checkpoint").
 *
 * References (read, not copied): Hugging Face transformers
 * src/transformers/models/deepseek_v32/modeling_deepseek_v32.py (DeepseekV32TopkRouter,
 * DeepseekV32Experts, DeepseekV32MoE) and
 * deepseek-ai/DeepSeek-V3.2-Exp inference/model.py (Gate, MoE).
 *
 * For one token with router logits z (n experts, z = x . gate.weight^T in f32) and
 * e_score_correction_bias b:
 *
 *   s_e      = sigmoid(z_e)                         the score (weights come from it)
 *   c_e      = s_e + b_e                            the choice score (selection only)
 *   g_j      = the sum of the two largest c_e of group j (n_group groups of n/n_group
 *              consecutive experts)
 *   keep the topk_group groups of largest g_j; among their experts pick the k
 *   (num_experts_per_tok) of largest c_e
 *   w_e      = s_e / (sum of s over the k picked + 1e-20)  when norm_topk_prob,
 *              s_e otherwise; then w_e *= routed_scaling_factor
 *
 * Ties: torch.topk(sorted=False) leaves the winner of equal values unspecified, in both
 * references. sparsecp makes it deterministic: among equal group scores the lower group
 * index wins, among equal choice scores the lower expert index wins.
 *
 * Differences between the references (sparsecp follows transformers, which reads every key
 * of config.json; both agree on every published V3/V3.2 config):
 *  - DeepSeek's Gate normalizes whenever scoring is sigmoid, with no 1e-20; transformers
 *    only with norm_topk_prob (true in every published config) and adds 1e-20.
 *  - DeepSeek's Gate has a bias only when dim == 7168 (the full model) and without one
 *    scores a group by its largest score instead of the top-2 sum; transformers always has
 *    the bias (zeros when absent) and always sums the top 2. Checkpoints carry
 *    e_score_correction_bias for every MoE layer.
 *
 * Numbers: s_e is sigmoid computed in double and rounded to f32, c_e and g_j are f32 sums
 * (as torch's f32 ops), the weights are computed in double and rounded once.
 * Pure functions, any thread.
 */
#ifndef SC_MOE_ROUTE_H
#define SC_MOE_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "model/hf_config.h"

/* Largest n_experts sc_moe_route handles (its scratch lives on the stack): DeepSeek-V3/V3.2
 * have 256 routed experts. */
#define SC_MOE_MAX_EXPERTS 1024

typedef struct sc_moe_route_cfg {
  int32_t n_experts;          /* n_routed_experts */
  int32_t n_group, topk_group;
  int32_t k;                  /* num_experts_per_tok */
  bool norm_topk_prob;
  double routed_scaling_factor;
} sc_moe_route_cfg;

/* SC_EINVAL (with d) unless 1 <= n_experts <= SC_MOE_MAX_EXPERTS, n_group divides
 * n_experts with at least 2 experts per group (the top-2 group score), 1 <= topk_group <=
 * n_group, 1 <= k <= the experts of topk_group groups, routed_scaling_factor finite > 0. */
int sc_moe_route_check(const sc_moe_route_cfg *c, sc_diag *d);

/* The routing configuration of a parsed config.json (hf_config.h admits only topk_method
 * "noaux_tc" and scoring_func "sigmoid", what this file computes), checked. */
int sc_moe_route_cfg_from_hf(const sc_hf_config *hf, sc_moe_route_cfg *c, sc_diag *d);

/* Routes one token: logits[n_experts] (f32 router logits), bias[n_experts]
 * (e_score_correction_bias; NULL = zeros). Writes the k picked experts to experts[k] in
 * ascending index order (the order both references sum expert outputs in) and their
 * weights to weights[k]. SC_EINVAL (with d) for a configuration sc_moe_route_check
 * refuses or a logit or bias that is not finite (nothing written then). */
int sc_moe_route(const sc_moe_route_cfg *c, const float *logits, const float *bias,
                 int32_t *experts, float *weights, sc_diag *d);

/* The MoE output of one token, out[hidden] = shared[j] + sum_i weights[i] * routed[i][j]:
 * routed holds the k routed expert outputs (row i at routed + i * ld_routed, the expert of
 * experts[i] from sc_moe_route), shared the shared expert's output (NULL = none). f32,
 * accumulated as the references do: the weighted routed outputs in the given order
 * starting from 0, the shared output added last. out may alias shared. */
void sc_moe_combine(int32_t hidden, int32_t k, const float *weights, const float *routed,
                    int64_t ld_routed, const float *shared, float *out);

#endif
