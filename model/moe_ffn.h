/* moe_ffn.h - one rank's part of a DeepSeek-V3.2 MoE layer's FFN (issue 23, points 2 and
 * 4), through the kernel API:
 *
 *   z      = xn · routerᵀ (f32)      picks, weights = sc_moe_route(z, bias) per token
 *   y_e    = W2_e · (SiLU(W1_e · xn) ⊙ (W3_e · xn))     for the tokens that picked e
 *   shared = W2_s · (SiLU(W1_s · xn) ⊙ (W3_s · xn))
 *   out    = Σ_picked w_e · y_e + shared          (sc_moe_combine's order, weighted_sum_rows)
 *
 * with W1, W3 this TP rank's rows of every expert's intermediate dimension and W2 its
 * columns, so `out` is the rank's partial sum: the planned mlp_out all-reduce (SPEC.md §6)
 * completes it, as it does the dense FFN's. The router and its inputs are replicated, so
 * every TP rank routes every token alike. A token's result depends on its own row only
 * (routing per token; each expert's rows gathered in token order), whatever else the
 * batch holds.
 *
 * The routing runs on the host (model/moe_route.h): the router logits are copied back, a
 * synchronous read on a device backend. Padding rows (no token) are not routed and get
 * only the shared expert's output, which nobody reads.
 *
 * Ownership: the scratch belongs to the sc_moe_ffn (kernel buffers of the context given
 * to create). One thread at a time (the forward's).
 */
#ifndef SC_MOE_FFN_H
#define SC_MOE_FFN_H

#include <stdint.h>

#include "base/error.h"
#include "kernels/kernels.h"
#include "model/weights.h"

typedef struct sc_moe_ffn sc_moe_ffn;

int sc_moe_ffn_create(sc_kernels *k, sc_moe_ffn **out, sc_diag *d);
void sc_moe_ffn_destroy(sc_moe_ffn *m);

/* out[rows][hidden] (ld hidden) = this rank's partial FFN output of MoE layer `layer` for
 * xn[rows][hidden] (ld hidden); tok_global (host, [rows]) < 0 marks padding rows. */
int sc_moe_ffn_run(sc_moe_ffn *m, const sc_model_weights *w, int32_t layer, int64_t rows,
                   const float *xn, const int32_t *tok_global, float *out, sc_diag *d);

#endif
