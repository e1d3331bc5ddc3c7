/* plan_types.h - the types of a step plan that travel between processes: the parallel
 * configuration, the global batch, the compact plan and its collectives (SPEC.md §1-6),
 * and the plan as the step_plan message carries it. Types only: messages/ declares its
 * bodies with these (schema.def) without linking the planner; plan.h has the functions.
 * Changing a field changes the wire format (messages/schema.def lists every one).
 */
#ifndef SC_PLAN_TYPES_H
#define SC_PLAN_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/coll_types.h"

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
  uint64_t engine_digest; /* what else the ranks compute with (the model, its weights' kind,
                             the KV format: sc_engine_config_digest), as a
                             digest that rides with the layout so that a rank can see that
                             the head's is its own; never planned with. 0: not known */
} sc_plan_config;

#define SC_PLAN_MAX_PARALLEL 1024      /* bound on P, N and T */
#define SC_PLAN_MAX_DIM (1 << 20)      /* bound on model dimensions */
#define SC_PLAN_DEFAULT_MAX_GATHERED_ROWS 1048576

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

/* ---- the plan as it travels ---- */

/* The compact plan as the step_plan message carries it: the same arrays, borrowed (from
 * the plan on the sending side, from the message on the receiving one), with the element
 * counts as they arrived (any value a peer may send) and the scheduler's request id of
 * each request. sc_plan_from_wire (plan_wire.h) checks it
 * before a rank relies on it. */
typedef struct sc_plan_wire {
  sc_plan_config config;
  const int64_t *req_ids;
  uint32_t num_req_ids;
  const sc_plan_req *reqs;
  uint32_t num_reqs;
  const int32_t *order;
  uint32_t num_order;
  int32_t num_tokens, num_decode_tokens, t_pad;
  const int32_t *rank_tokens;
  uint32_t num_rank_tokens;
  const sc_plan_region *regions;
  uint32_t num_regions;
  const sc_plan_chunk *chunks;
  uint32_t num_chunks;
  const sc_coll *colls;
  uint32_t num_colls;
  uint64_t fingerprint;
} sc_plan_wire;

#endif
