/* moe_route.c - noaux_tc sigmoid routing and the MoE combine (see moe_route.h). */
#include "model/moe_route.h"

#include <math.h>
#include <string.h>

int sc_moe_route_check(const sc_moe_route_cfg *c, sc_diag *d) {
  if (c->n_experts < 1 || c->n_experts > SC_MOE_MAX_EXPERTS)
    return sc_fail(d, SC_EINVAL, "moe: n_routed_experts = %d must be in [1, %d]", c->n_experts,
                   SC_MOE_MAX_EXPERTS);
  if (c->n_group < 1 || c->n_experts % c->n_group || c->n_experts / c->n_group < 2)
    return sc_fail(d, SC_EINVAL,
                   "moe: n_group = %d must divide n_routed_experts = %d into groups of at "
                   "least 2 experts",
                   c->n_group, c->n_experts);
  if (c->topk_group < 1 || c->topk_group > c->n_group)
    return sc_fail(d, SC_EINVAL, "moe: topk_group = %d must be in [1, n_group = %d]",
                   c->topk_group, c->n_group);
  const int32_t reach = c->topk_group * (c->n_experts / c->n_group);
  if (c->k < 1 || c->k > reach)
    return sc_fail(d, SC_EINVAL,
                   "moe: num_experts_per_tok = %d must be in [1, %d] (the experts of topk_group "
                   "groups)",
                   c->k, reach);
  if (!isfinite(c->routed_scaling_factor) || !(c->routed_scaling_factor > 0))
    return sc_fail(d, SC_EINVAL, "moe: routed_scaling_factor = %g must be a finite number > 0",
                   c->routed_scaling_factor);
  return 0;
}

int sc_moe_route_cfg_from_hf(const sc_hf_config *hf, sc_moe_route_cfg *c, sc_diag *d) {
  const sc_moe_route_cfg r = {
      .n_experts = hf->n_routed_experts,
      .n_group = hf->n_group,
      .topk_group = hf->topk_group,
      .k = hf->num_experts_per_tok,
      .norm_topk_prob = hf->norm_topk_prob,
      .routed_scaling_factor = hf->routed_scaling_factor,
  };
  const int rc = sc_moe_route_check(&r, d);
  if (rc == 0) *c = r;
  return rc;
}

/* Index of the largest v[i] with allowed[i] (and then clears it): the lowest such index
 * among equal values, -1 when none is allowed. */
static int32_t take_best(const float *v, bool *allowed, int32_t n) {
  int32_t best = -1;
  for (int32_t i = 0; i < n; i++)
    if (allowed[i] && (best < 0 || v[i] > v[best])) best = i;
  if (best >= 0) allowed[best] = false;
  return best;
}

int sc_moe_route(const sc_moe_route_cfg *c, const float *logits, const float *bias,
                 int32_t *experts, float *weights, sc_diag *d) {
  int rc = sc_moe_route_check(c, d);
  if (rc) return rc;
  const int32_t n = c->n_experts, per = n / c->n_group;
  float score[SC_MOE_MAX_EXPERTS], choice[SC_MOE_MAX_EXPERTS];
  float gscore[SC_MOE_MAX_EXPERTS / 2];
  bool avail[SC_MOE_MAX_EXPERTS], picked[SC_MOE_MAX_EXPERTS];
  for (int32_t e = 0; e < n; e++) {
    const float b = bias ? bias[e] : 0.0f;
    if (!isfinite(logits[e]) || !isfinite(b))
      return sc_fail(d, SC_EINVAL, "moe: router logit %g or bias %g of expert %d is not finite",
                     (double)logits[e], (double)b, e);
    score[e] = (float)(1.0 / (1.0 + exp(-(double)logits[e])));
    choice[e] = score[e] + b;
  }
  /* group score: the two largest choice scores of the group, summed in f32 */
  for (int32_t g = 0; g < c->n_group; g++) {
    const float *v = choice + (int64_t)g * per;
    float a = -INFINITY, b = -INFINITY; /* a >= b, the two largest */
    for (int32_t i = 0; i < per; i++) {
      if (v[i] > a) {
        b = a;
        a = v[i];
      } else if (v[i] > b) {
        b = v[i];
      }
    }
    gscore[g] = a + b;
  }
  /* keep topk_group groups: their experts become available to the pick */
  memset(avail, 0, sizeof avail[0] * (size_t)n);
  bool gopen[SC_MOE_MAX_EXPERTS / 2];
  for (int32_t g = 0; g < c->n_group; g++) gopen[g] = true;
  for (int32_t t = 0; t < c->topk_group; t++) {
    const int32_t g = take_best(gscore, gopen, c->n_group);
    for (int32_t i = 0; i < per; i++) avail[(int64_t)g * per + i] = true;
  }
  memset(picked, 0, sizeof picked[0] * (size_t)n);
  for (int32_t t = 0; t < c->k; t++) picked[take_best(choice, avail, n)] = true;
  double sum = 0;
  for (int32_t e = 0; e < n; e++)
    if (picked[e]) sum += score[e];
  const double den = c->norm_topk_prob ? sum + 1e-20 : 1.0;
  int32_t j = 0;
  for (int32_t e = 0; e < n; e++) {
    if (!picked[e]) continue;
    experts[j] = e;
    weights[j++] = (float)((double)score[e] / den * c->routed_scaling_factor);
  }
  return 0;
}

void sc_moe_combine(int32_t hidden, int32_t k, const float *weights, const float *routed,
                    int64_t ld_routed, const float *shared, float *out) {
  for (int32_t h = 0; h < hidden; h++) {
    float y = 0.0f;
    for (int32_t i = 0; i < k; i++) y += weights[i] * routed[i * ld_routed + h];
    out[h] = shared ? y + shared[h] : y;
  }
}
