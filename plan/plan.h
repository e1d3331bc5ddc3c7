/* plan.h - the PCP x DCP step planner (SPEC.md §1-6). Pure functions: no I/O, no
 * threads, no global state.
 *
 * One call, sc_plan_build(), turns the global batch of a step into the *compact plan*:
 * per-request layout facts, per-rank token counts, the global chunk plan and the
 * collective plan with its fingerprint. Its size is O(requests + layers), never
 * O(tokens), so it is cheap to ship to every rank. The per-token index arrays
 * (padded_gather_idx, hidden_restore_idx, kv_write_mask, deinterleave_idx) are derived
 * from it by the sc_plan_fill_* functions into caller buffers, or entry by entry with the
 * inline helpers, so a consumer (a GPU kernel, say) can generate them on the fly.
 *
 * The central invariant: everything here is a function of the configuration and the
 * global batch only. No rank identity enters sc_plan_build(); the per-rank views
 * (sc_plan_rank_rows, sc_plan_rank_view) are read-only projections of the same plan.
 *
 * Memory: an sc_plan owns arrays that grow geometrically and are reused by the next
 * build, so steady-state planning allocates nothing. Nothing is allocated per token.
 *
 * Threads: an sc_plan is used by one thread at a time; const functions may run
 * concurrently on a plan that is not being rebuilt.
 */
#ifndef SC_PLAN_H
#define SC_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "plan/plan_types.h"

/* ---- configuration (SPEC.md §1; the struct is in plan_types.h) ---- */

/* The first field in which a and b differ, as "name a-value/b-value" in out (len
 * bytes), and false; true when they are the same configuration. */
bool sc_plan_config_same(const sc_plan_config *a, const sc_plan_config *b, char *out,
                         size_t len);

/* Fills the layout defaults of DESIGN.md §7: pcp = dcp = tp = 1, interleave 1,
 * block_size 64, pad_multiple 1, layers 1, max_gathered_rows 1048576, f32 collectives.
 * The model dimensions (heads, kv_lora_rank, rope_dim, index_dim, topk, hidden) are left
 * 0: they are the model's, an input to the planner, which has no model of its own
 * (sc_model_plan_config_default in model/model_defaults.h adds the embedded model's). */
void sc_plan_config_default(sc_plan_config *cfg);

/* Checks every rule of SPEC.md §1 and the dimension bounds; on failure returns SC_EINVAL
 * (or SC_ENOTSUP for the not-yet-supported N = P*T) and writes into d a message naming
 * the broken rule. */
int sc_plan_config_validate(const sc_plan_config *cfg, sc_diag *d);

static inline int32_t sc_plan_world_size(const sc_plan_config *cfg) {
  return cfg->pcp * cfg->tp;
}

/* Coordinates of global rank g (SPEC.md §1). */
typedef struct sc_rank_coords {
  int32_t global, pcp_rank, tp_rank, dcp_rank;
} sc_rank_coords;
sc_rank_coords sc_plan_rank_coords(const sc_plan_config *cfg, int32_t global_rank);

/* ---- the compact plan (its structs are in plan_types.h) ---- */

void sc_plan_init(sc_plan *plan);
void sc_plan_free(sc_plan *plan);
/* Makes room for the given element counts in the plan's arrays (contents unspecified),
 * for code that fills a plan from elsewhere (the step_plan message). 0 or SC_ENOMEM. */
int sc_plan_reserve(sc_plan *plan, int32_t reqs, int32_t order, int32_t pcp, int32_t regions,
                    int32_t chunks, int32_t colls);

/* Builds the compact plan of one step. cfg must be valid (sc_plan_config_validate); the
 * batch is validated here. On failure returns a negative code, fills d, and leaves the
 * plan empty (num_reqs = 0) but reusable. */
int sc_plan_build(sc_plan *plan, const sc_plan_config *cfg, const sc_batch_req *reqs,
                  int32_t num_reqs, sc_diag *d);

/* ---- per-rank rows (projections of the plan) ---- */

typedef struct sc_plan_row {
  int32_t req;    /* request index */
  int32_t offset; /* query offset within the request */
  int32_t len;
  bool split;     /* a DualChunkSwap chunk (false: the whole request, replicated) */
} sc_plan_row;

/* Rows of request `req` held by PCP rank `pcp_rank`: writes 0, 1 or 2 rows into
 * out[2] in ascending offset and returns how many. */
int sc_plan_req_rows(const sc_plan *plan, int32_t req, int32_t pcp_rank,
                     sc_plan_row out[2]);

/* ---- per-token index arrays ---- */

static inline int64_t sc_plan_gather_slots(const sc_plan *plan) {
  return (int64_t)plan->cfg.pcp * plan->t_pad;
}

/* Fills padded_gather_idx and kv_write_mask ([P*T_pad] each) and hidden_restore_idx
 * ([num_tokens]). Any pointer may be NULL to skip that array. */
void sc_plan_fill_gather(const sc_plan *plan, int32_t *padded_gather_idx,
                         int32_t *hidden_restore_idx, uint8_t *kv_write_mask);

/* Fills the deinterleave index of one chunk ([chunks[chunk].extent_total]). */
void sc_plan_fill_deinterleave(const sc_plan *plan, int32_t chunk, int32_t *out);

/* Workspace row of token position p of region g (SPEC.md §5 step 5), for consumers
 * that map top-K ids on the fly; p = -1 gives -1. */
static inline int32_t sc_plan_workspace_row(const sc_plan *plan, int32_t region,
                                            int32_t p) {
  if (p < 0) return -1;
  const sc_plan_region *g = &plan->regions[region];
  const int32_t n = plan->cfg.dcp, il = plan->cfg.interleave;
  const int32_t owner = (p / il) % n;
  const int32_t j = (p / (n * il)) * il + p % il;
  return owner * plan->chunks[g->chunk].shard_rows_total + g->ws_start + j;
}

/* Fills the DCP local sequence lengths ([num_reqs * dcp], request-major). */
void sc_plan_fill_dcp_local_lens(const sc_plan *plan, int32_t *out);

/* ---- the collective plan ---- */

/* 64-bit fingerprint over a list of planned collectives (FNV-1a over every field). */
uint64_t sc_coll_fingerprint(const sc_coll *colls, int32_t n);

/* Whether a requested collective is exactly the planned one (all fields but seq and
 * chunk, which the requester does not know). */
bool sc_coll_matches(const sc_coll *planned, const sc_coll *requested);

/* Bytes of the block each member of a group of group_size ranks sends to each other
 * member in the direct exchange of collective c (the host backend's): all_gather and
 * all_reduce send the whole buffer (rows*width elements), reduce_scatter the receiver's
 * share of it (rows*width/group_size elements). */
size_t sc_coll_block_bytes(const sc_coll *c, int32_t group_size);

/* Ranks in `group` (sc_group) under cfg: tp T, pcp P, dcp N (SPEC.md §1). */
int32_t sc_plan_group_size(const sc_plan_config *cfg, int group);

/* The plan's collectives summed by purpose (sc_coll_purpose): colls[k] how many entries
 * have purpose k, bytes[k] the sum of their sc_coll_block_bytes (the block each member
 * of the entry's group sends; what a rank moves per peer). Both arrays are overwritten.
 * What the scheduler's metrics add up over the steps (stats_report). */
void sc_plan_purpose_totals(const sc_plan *plan, uint64_t colls[SC_PURPOSE_COUNT],
                            uint64_t bytes[SC_PURPOSE_COUNT]);

/* The largest sc_coll_block_bytes of any collective that sc_plan_build can plan for cfg
 * (valid) in a step that schedules at most max_step_tokens query tokens in all (0 when
 * no step can: max_step_tokens < 1); SIZE_MAX when it does not fit a size_t. What a
 * rank may hold for one block of a peer before it knows the plan (backend_host.h). */
size_t sc_plan_max_block_bytes(const sc_plan_config *cfg, int64_t max_step_tokens);

/* ---- a rank's local view, for executors and for checking the invariant ---- */

typedef struct sc_rank_view {
  sc_rank_coords coords;
  int32_t num_rows;          /* rows on this rank */
  int32_t num_tokens;        /* T_local */
  int32_t num_prefill_tokens;
} sc_rank_view;

void sc_plan_rank_view(const sc_plan *plan, int32_t global_rank, sc_rank_view *view);

#endif
