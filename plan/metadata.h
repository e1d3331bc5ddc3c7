/* metadata.h - one rank's local inputs for one step, derived from the step plan and the
 * block tables (DESIGN.md §3 step 4; SPEC.md §3-5). Pure functions: no I/O, no threads.
 *
 * Everything is host memory (int32 index arrays); the executor uploads what its kernels
 * need. Token rows are this rank's local rows in plan row order (decodes first), padded
 * to T_pad.
 *
 * Two attention paths:
 *  - cache path: decode rows always, and prefill rows when N = 1. Such a token scores
 *    and attends over the KV rows its rank holds in its own cache: the *cache key list*
 *    (slot, position) of the positions this DCP rank owns, one range per request. Only
 *    the ranges are derived here; the kernels' cache_keys op fills the entries where
 *    the indexer reads them (kernels/kernels.h), since a long context makes them large.
 *  - workspace path: prefill rows when N > 1. Each context_kv chunk gathers every DCP
 *    rank's shard of the chunk's requests (shard_src says which cache slots fill the
 *    rank's shard, -1 = padding); `deinterleave` puts the gathered rows in token order
 *    and key_pos is the position of each entry. A token's top-K positions map to
 *    workspace rows with base tok_ws_base (sc_plan_workspace_row).
 *
 * Ownership: sc_meta owns its arrays (sc_meta_free); the plan and block tables are
 * borrowed during sc_meta_build only. One thread at a time.
 */
#ifndef SC_METADATA_H
#define SC_METADATA_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "plan/plan.h"

/* Block tables of the batch, identical on all DCP ranks: row i (batch order) holds the
 * virtual block ids of request i, table[i * max_blocks + v], -1 where none. */
typedef struct sc_meta_blocks {
  const int32_t *table;
  int32_t max_blocks;
  int32_t num_blocks; /* physical blocks of each rank's cache: ids must be below */
} sc_meta_blocks;

typedef struct sc_meta_chunk {
  int32_t tok_begin, tok_end;  /* local rows of this chunk's requests (contiguous) */
  int32_t shard_rows_total;    /* ΣS */
  int32_t extent_total;        /* Σ E_g */
  int32_t *shard_src;          /* [ΣS] cache slot of each shard row, -1 = padding */
  int32_t *deinterleave;       /* [extent_total] workspace row of each context entry */
  int32_t *key_pos;            /* [extent_total] position of each context entry */
} sc_meta_chunk;

typedef struct sc_meta {
  sc_rank_coords coords;
  int32_t num_tokens;   /* T_local */
  int32_t t_pad;
  int32_t num_decode;   /* D: the first D rows */
  int32_t prefill_rows; /* T_pad - D: rows per rank of the prefill_kv gather */

  /* per local row [t_pad]; padding rows: global -1, req -1, pos 0 */
  int32_t *tok_global, *tok_req, *tok_pos;

  /* KV writes (slot or -1): decode rows [D] from the rank's own rows; prefill rows from
   * the prefill source [num_prefill_src]: with P > 1 the prefill_kv gathered buffer
   * (P blocks of prefill_rows), with P = 1 the rank's rows D .. T_pad. Only owner copies
   * (kv_write_mask) and positions this DCP rank owns get a slot. */
  int32_t *decode_slots;
  int32_t num_prefill_src;
  int32_t *prefill_slots;

  /* cache path: rows [0, cache_tok_end). The cache key list has num_keys entries, one
   * range per request with cache-path rows, in order: entries [key_range_begin[r],
   * key_range_end[r]) are this rank's local indices 0, 1, ... of request key_range_req[r]
   * (its block table row). */
  int32_t cache_tok_end;
  int32_t num_keys;
  int32_t num_key_ranges;
  int32_t *key_range_req, *key_range_begin, *key_range_end; /* [num_key_ranges] */

  /* per local row [t_pad]: key range (into the cache key list for cache-path rows, into
   * the chunk's context for workspace rows; its request's keys up to the row's own
   * position, the later ones being causally masked; empty for padding), workspace base */
  int32_t *tok_key_begin, *tok_key_end, *tok_ws_base;

  int32_t num_chunks;
  sc_meta_chunk *chunks;

  int32_t *hidden_restore; /* [plan num_tokens]: gathered slot of each global token */
  int32_t *last_token;     /* [plan num_reqs] last global token of a request, -1 if q=0 */
} sc_meta;

/* Derives the inputs of global rank `global_rank`. Fails with SC_EINVAL (and a message)
 * when a block table lacks a block that a position of the step needs, or names a block
 * outside [0, num_blocks). */
int sc_meta_build(const sc_plan *plan, int32_t global_rank, const sc_meta_blocks *bt,
                  sc_meta *m, sc_diag *d);
void sc_meta_free(sc_meta *m);

/* The dense block table [n][*max_blocks] (-1 where none) of the scheduler's CSR form
 * (entry i's virtual blocks are blocks[block_start[i] .. block_start[i+1])), into *table,
 * grown with realloc (*cap elements). Returns 0, SC_EINVAL (malformed CSR) or
 * SC_ENOMEM. */
int sc_meta_dense_blocks(int32_t n, const int32_t *block_start, const int32_t *blocks,
                         int32_t **table, size_t *cap, int32_t *max_blocks);

/* The whole derivation of one step for global rank `global_rank` from the scheduler's
 * CSR block tables (block_start [plan->num_reqs + 1], blocks): the dense table into
 * *table / *cap / *max_blocks as sc_meta_dense_blocks does (reusable across steps), then
 * sc_meta_build over it with num_blocks. *m holds zeroes or an earlier result, which is
 * freed first. The dense table stays valid for the step (the forward pass reads it).
 * Returns 0, SC_EINVAL (malformed CSR, or as sc_meta_build) or SC_ENOMEM, with d. */
int sc_meta_build_csr(const sc_plan *plan, int32_t global_rank, const int32_t *block_start,
                      const int32_t *blocks, int32_t num_blocks, int32_t **table, size_t *cap,
                      int32_t *max_blocks, sc_meta *m, sc_diag *d);

/* Top-K positions of a workspace-path row -> workspace rows (SPEC.md §5 step 5); -1 stays
 * -1. The host form of the kernels' topk_to_workspace, for tests and checks. */
void sc_meta_topk_to_workspace(const sc_plan *plan, int32_t region, const int32_t *pos,
                               int32_t n, int32_t *rows);

#endif
