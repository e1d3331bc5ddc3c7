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

#include "actors/runtime/sc_error.h"
#include "collectives/coll_types.h"

/* ---- configuration (SPEC.md §1, DESIGN.md §7 plan --json keys) ---- */

typedef struct sc_plan_config {
  int32_t pcp;          /* P */
  int32_t dcp;          /* N */
  int32_t tp;           /* T */
  int32_t interleave;   /* I: DCP ownership grain in tokens */
  int32_t block_size;   /* B: KV block size in tokens */
  int32_t pad_multiple; /* T_pad is rounded up to this */
  int64_t max_gathered_rows; /* M: rows of the context_kv workspace over all DCP ranks */
  int32_t layers;
  int32_t heads;        /* attention heads of the whole model (split over tp) */
  int32_t kv_lora_rank;
  int32_t rope_dim;
  int32_t index_dim;
  int32_t topk;
  int32_t hidden;
  sc_dtype dtype;       /* element type of activation and KV collectives */
} sc_plan_config;

#define SC_PLAN_MAX_PARALLEL 1024      /* bound on P, N and T */
#define SC_PLAN_MAX_DIM (1 << 20)      /* bound on model dimensions */
#define SC_PLAN_DEFAULT_MAX_GATHERED_ROWS 1048576

/* The first field in which a and b differ, as "name a-value/b-value" in out (len
 * bytes), and false; true when they are the same configuration. */
bool sc_plan_config_same(const sc_plan_config *a, const sc_plan_config *b, char *out,
                         size_t len);

/* Fills the defaults of DESIGN.md §7: pcp = dcp = tp = 1, interleave 1, block_size 64,
 * pad_multiple 1, layers 1, max_gathered_rows 1048576, model dimensions of the embedded
 * model, f32 collectives. */
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

/* ---- the global batch (SPEC.md §2) ---- */

typedef struct sc_batch_req {
  int64_t id;         /* the scheduler's request id (opaque to the planner) */
  int32_t computed;   /* c: tokens already in the KV cache */
  int32_t scheduled;  /* q: query tokens this step (0 allowed) */
  bool prefill;       /* still consuming the prompt */
} sc_batch_req;

/* Largest Σq and extent the planner accepts: every index value and P*T_pad fit int32. */
#define SC_PLAN_MAX_TOKENS (1 << 27)

/* ---- the compact plan ---- */

enum { SC_REQ_PREFILL = 1u << 0, SC_REQ_SPLIT = 1u << 1 };

typedef struct sc_plan_req {
  int32_t start;   /* first global token of the request in the flattened batch */
  int32_t q;       /* scheduled tokens */
  int32_t extent;  /* E = c + q */
  int32_t cs;      /* chunk size ceil(q / 2P) when split, else q */
  int32_t region;  /* index into regions (prefill with q > 0 under DCP), else -1 */
  uint32_t flags;  /* SC_REQ_* */
} sc_plan_req;

/* One prefill request's slice of a context_kv workspace (SPEC.md §5). */
typedef struct sc_plan_region {
  int32_t req;        /* request index */
  int32_t extent;     /* E_g (full extent) */
  int32_t shard_rows; /* S_g = local_len(E_g, 0) */
  int32_t ws_start;   /* exclusive prefix sum of S within the chunk */
  int32_t cu_start;   /* exclusive prefix sum of extents within the chunk */
  int32_t chunk;
} sc_plan_region;

typedef struct sc_plan_chunk {
  int32_t first_region, num_regions;
  int32_t shard_rows_total; /* ΣS: rows each DCP rank contributes to the all-gather */
  int32_t extent_total;     /* Σ E_g: length of this chunk's deinterleave index */
} sc_plan_chunk;

/* One planned collective (SPEC.md §6). Rows are per rank. */
typedef struct sc_coll {
  int32_t seq;     /* position in the plan, 0-based */
  int32_t layer;   /* -1 for once-per-step entries */
  uint8_t group;   /* sc_group */
  uint8_t op;      /* sc_coll_op */
  uint8_t dtype;   /* sc_dtype */
  uint8_t purpose; /* sc_coll_purpose */
  int32_t chunk;   /* chunk index for context_kv, else -1 */
  int64_t rows;
  int64_t width;   /* elements per row */
} sc_coll;

typedef struct sc_plan {
  sc_plan_config cfg;

  int32_t num_reqs;
  sc_plan_req *reqs;       /* [num_reqs], batch order */
  int32_t num_ordered;
  int32_t *order;          /* request indices with q > 0 in row order: decodes first */
  int32_t num_tokens;      /* Σq */
  int32_t num_decode_tokens; /* D */
  int32_t t_pad;
  int32_t *rank_tokens;    /* [pcp]: T_local(r) */

  int32_t num_regions, num_chunks;
  sc_plan_region *regions;
  sc_plan_chunk *chunks;

  int32_t num_colls;
  sc_coll *colls;
  uint64_t fingerprint;

  /* capacities of the arrays above (reused between builds) */
  int32_t cap_reqs, cap_order, cap_pcp, cap_regions, cap_chunks, cap_colls;
} sc_plan;

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

/* ---- a rank's local view, for executors and for checking the invariant ---- */

typedef struct sc_rank_view {
  sc_rank_coords coords;
  int32_t num_rows;          /* rows on this rank */
  int32_t num_tokens;        /* T_local */
  int32_t num_prefill_tokens;
} sc_rank_view;

void sc_plan_rank_view(const sc_plan *plan, int32_t global_rank, sc_rank_view *view);

#endif
