/* metadata.c - per-rank step inputs from the plan and the block tables (metadata.h). */
#include "plan/metadata.h"

#include <stdlib.h>
#include <string.h>

#include "plan/dcp.h"

void sc_meta_free(sc_meta *m) {
  free(m->tok_global);
  free(m->tok_req);
  free(m->tok_pos);
  free(m->decode_slots);
  free(m->prefill_slots);
  free(m->key_range_req);
  free(m->key_range_begin);
  free(m->key_range_end);
  free(m->tok_key_begin);
  free(m->tok_key_end);
  free(m->tok_ws_base);
  for (int32_t c = 0; m->chunks && c < m->num_chunks; c++) {
    free(m->chunks[c].shard_src);
    free(m->chunks[c].deinterleave);
    free(m->chunks[c].key_pos);
  }
  free(m->chunks);
  free(m->hidden_restore);
  free(m->last_token);
  memset(m, 0, sizeof *m);
}

static int32_t *alloc_i32(size_t n, int *rc) {
  int32_t *p = malloc((n ? n : 1) * sizeof *p);
  if (p == NULL) *rc = SC_ENOMEM;
  return p;
}

static const int32_t *bt_row(const sc_meta_blocks *bt, int32_t req) {
  return bt->table + (size_t)req * (size_t)bt->max_blocks;
}

/* Every request's table must hold valid blocks for its whole extent. */
static int check_tables(const sc_plan *plan, const sc_meta_blocks *bt, sc_diag *d) {
  const int32_t B = plan->cfg.block_size, N = plan->cfg.dcp;
  for (int32_t i = 0; i < plan->num_reqs; i++) {
    const int32_t need = sc_kv_blocks_needed(plan->reqs[i].extent, B, N);
    if (need > bt->max_blocks)
      return sc_fail(d, SC_EINVAL,
                     "request %d (extent %d) needs %d virtual blocks of %d tokens; the block "
                     "table has %d columns",
                     i, plan->reqs[i].extent, need, B * N, bt->max_blocks);
    const int32_t *row = bt_row(bt, i);
    for (int32_t v = 0; v < need; v++)
      if (row[v] < 0 || row[v] >= bt->num_blocks)
        return sc_fail(d, SC_EINVAL,
                       "request %d: virtual block %d is %d; it must be a block in [0, %d)", i,
                       v, row[v], bt->num_blocks);
  }
  return 0;
}

static int32_t slot_of(const sc_plan *plan, const sc_meta_blocks *bt, int32_t req, int64_t p,
                       int32_t dcp_rank) {
  const sc_plan_config *c = &plan->cfg;
  return (int32_t)sc_kv_slot(bt_row(bt, req), bt->max_blocks, p, c->block_size, c->dcp,
                             c->interleave, dcp_rank);
}

static int build_tokens(const sc_plan *plan, sc_meta *m) {
  const int32_t r = m->coords.pcp_rank;
  int32_t k = 0;
  for (int32_t o = 0; o < plan->num_ordered; o++) {
    const int32_t req = plan->order[o];
    const sc_plan_req *pr = &plan->reqs[req];
    sc_plan_row rows[2];
    const int n = sc_plan_req_rows(plan, req, r, rows);
    for (int i = 0; i < n; i++)
      for (int32_t t = 0; t < rows[i].len; t++, k++) {
        m->tok_global[k] = pr->start + rows[i].offset + t;
        m->tok_req[k] = req;
        m->tok_pos[k] = pr->extent - pr->q + rows[i].offset + t;
      }
  }
  for (; k < m->t_pad; k++) m->tok_global[k] = -1, m->tok_req[k] = -1, m->tok_pos[k] = 0;
  return 0;
}

static int build_kv_writes(const sc_plan *plan, const sc_meta_blocks *bt, sc_meta *m) {
  const int32_t P = plan->cfg.pcp, D = m->num_decode, me = m->coords.dcp_rank;
  const int64_t slots = sc_plan_gather_slots(plan);
  int rc = 0;
  int32_t *gather = alloc_i32((size_t)slots, &rc);
  uint8_t *mask = malloc((size_t)slots + 1);
  int32_t *req_of = alloc_i32((size_t)plan->num_tokens, &rc);
  if (rc || mask == NULL) {
    rc = SC_ENOMEM;
    goto out;
  }
  sc_plan_fill_gather(plan, gather, m->hidden_restore, mask);
  for (int32_t i = 0; i < plan->num_reqs; i++)
    for (int32_t t = 0; t < plan->reqs[i].q; t++) req_of[plan->reqs[i].start + t] = i;

  for (int32_t k = 0; k < D; k++)
    m->decode_slots[k] = slot_of(plan, bt, m->tok_req[k], m->tok_pos[k], me);

  for (int32_t r = 0; r < P; r++)
    for (int32_t k = 0; k < m->prefill_rows; k++) {
      const int64_t slot = (int64_t)r * m->t_pad + D + k;
      int32_t *out = &m->prefill_slots[(size_t)r * m->prefill_rows + k];
      *out = -1;
      if (!mask[slot]) continue; /* padding or a non-owner copy */
      const int32_t t = gather[slot], req = req_of[t];
      const sc_plan_req *pr = &plan->reqs[req];
      *out = slot_of(plan, bt, req, (int64_t)pr->extent - pr->q + (t - pr->start), me);
    }
out:
  free(gather);
  free(mask);
  free(req_of);
  return rc;
}

/* The cache key list's ranges: per request with cache-path rows, the positions this DCP
 * rank owns in [0, E), in the order their first rows come. */
static int build_cache_keys(const sc_plan *plan, sc_meta *m) {
  const sc_plan_config *c = &plan->cfg;
  const int32_t me = m->coords.dcp_rank;
  int rc = 0;
  int32_t *begin = alloc_i32((size_t)plan->num_reqs, &rc);
  int32_t *end = alloc_i32((size_t)plan->num_reqs, &rc);
  m->key_range_req = alloc_i32((size_t)plan->num_reqs, &rc);
  m->key_range_begin = alloc_i32((size_t)plan->num_reqs, &rc);
  m->key_range_end = alloc_i32((size_t)plan->num_reqs, &rc);
  if (rc) goto out;
  int64_t total = 0;
  for (int32_t i = 0; i < plan->num_reqs; i++) begin[i] = end[i] = -1;
  for (int32_t k = 0; k < m->cache_tok_end; k++) {
    const int32_t req = m->tok_req[k];
    if (begin[req] >= 0) continue;
    begin[req] = (int32_t)total;
    total += sc_dcp_local_len(plan->reqs[req].extent, me, c->dcp, c->interleave);
    end[req] = (int32_t)total;
    const int32_t r = m->num_key_ranges++;
    m->key_range_req[r] = req;
    m->key_range_begin[r] = begin[req];
    m->key_range_end[r] = end[req];
  }
  m->num_keys = (int32_t)total;
  /* A token's range ends after the last key it may see (its own position): the list
   * holds a request's positions in order, so the rest are all causally masked, and a
   * prompt's token scans only its prefix rather than the whole prompt's keys. */
  for (int32_t k = 0; k < m->cache_tok_end; k++) {
    const int32_t req = m->tok_req[k];
    const int64_t seen = sc_dcp_local_len((int64_t)m->tok_pos[k] + 1, me, c->dcp, c->interleave);
    m->tok_key_begin[k] = begin[req];
    m->tok_key_end[k] = begin[req] + seen < end[req] ? begin[req] + (int32_t)seen : end[req];
  }
out:
  free(begin);
  free(end);
  return rc;
}

static int build_chunks(const sc_plan *plan, const sc_meta_blocks *bt, sc_meta *m) {
  const sc_plan_config *c = &plan->cfg;
  const int32_t me = m->coords.dcp_rank;
  int rc = 0;
  m->num_chunks = plan->num_chunks;
  if ((m->chunks = calloc((size_t)plan->num_chunks + 1, sizeof *m->chunks)) == NULL)
    return SC_ENOMEM;
  for (int32_t ci = 0; ci < plan->num_chunks; ci++) {
    const sc_plan_chunk *pc = &plan->chunks[ci];
    sc_meta_chunk *mc = &m->chunks[ci];
    mc->shard_rows_total = pc->shard_rows_total;
    mc->extent_total = pc->extent_total;
    mc->tok_begin = mc->tok_end = -1;
    mc->shard_src = alloc_i32((size_t)pc->shard_rows_total, &rc);
    mc->deinterleave = alloc_i32((size_t)pc->extent_total, &rc);
    mc->key_pos = alloc_i32((size_t)pc->extent_total, &rc);
    if (rc) return rc;
    sc_plan_fill_deinterleave(plan, ci, mc->deinterleave);
    for (int32_t gi = pc->first_region; gi < pc->first_region + pc->num_regions; gi++) {
      const sc_plan_region *g = &plan->regions[gi];
      const int64_t len = sc_dcp_local_len(g->extent, me, c->dcp, c->interleave);
      for (int32_t j = 0; j < g->shard_rows; j++)
        mc->shard_src[g->ws_start + j] =
            j < len ? (int32_t)sc_kv_slot_local(bt_row(bt, g->req), bt->max_blocks, j,
                                                c->block_size)
                    : -1;
      for (int32_t p = 0; p < g->extent; p++) mc->key_pos[g->cu_start + p] = p;
    }
  }
  for (int32_t k = m->cache_tok_end; k < m->num_tokens; k++) {
    const sc_plan_req *pr = &plan->reqs[m->tok_req[k]];
    const sc_plan_region *g = &plan->regions[pr->region];
    sc_meta_chunk *mc = &m->chunks[g->chunk];
    if (mc->tok_begin < 0) mc->tok_begin = k;
    if (mc->tok_end >= 0 && mc->tok_end != k) return SC_EINVAL; /* rows not contiguous */
    mc->tok_end = k + 1;
    m->tok_ws_base[k] = g->ws_start;
    m->tok_key_begin[k] = g->cu_start; /* positions 0.. in order: up to its own */
    m->tok_key_end[k] = g->cu_start + (m->tok_pos[k] < g->extent ? m->tok_pos[k] + 1 : g->extent);
  }
  for (int32_t ci = 0; ci < m->num_chunks; ci++)
    if (m->chunks[ci].tok_begin < 0) m->chunks[ci].tok_begin = m->chunks[ci].tok_end = 0;
  return 0;
}

int sc_meta_build(const sc_plan *plan, int32_t global_rank, const sc_meta_blocks *bt,
                  sc_meta *m, sc_diag *d) {
  memset(m, 0, sizeof *m);
  if (global_rank < 0 || global_rank >= sc_plan_world_size(&plan->cfg))
    return sc_fail(d, SC_EINVAL, "rank %d is outside the world of %d ranks", global_rank,
                   sc_plan_world_size(&plan->cfg));
  int rc = check_tables(plan, bt, d);
  if (rc) return rc;
  const sc_plan_config *c = &plan->cfg;
  m->coords = sc_plan_rank_coords(c, global_rank);
  m->num_tokens = plan->rank_tokens[m->coords.pcp_rank];
  m->t_pad = plan->t_pad;
  m->num_decode = plan->num_decode_tokens;
  m->prefill_rows = plan->t_pad - plan->num_decode_tokens;
  m->num_prefill_src = c->pcp * m->prefill_rows;
  m->cache_tok_end = c->dcp == 1 ? m->num_tokens : m->num_decode;
  const size_t tp = (size_t)m->t_pad;
  m->tok_global = alloc_i32(tp, &rc);
  m->tok_req = alloc_i32(tp, &rc);
  m->tok_pos = alloc_i32(tp, &rc);
  m->decode_slots = alloc_i32((size_t)m->num_decode, &rc);
  m->prefill_slots = alloc_i32((size_t)m->num_prefill_src, &rc);
  m->tok_key_begin = alloc_i32(tp, &rc);
  m->tok_key_end = alloc_i32(tp, &rc);
  m->tok_ws_base = alloc_i32(tp, &rc);
  m->hidden_restore = alloc_i32((size_t)plan->num_tokens, &rc);
  m->last_token = alloc_i32((size_t)plan->num_reqs, &rc);
  if (rc) goto fail;
  for (size_t k = 0; k < tp; k++)
    m->tok_key_begin[k] = m->tok_key_end[k] = m->tok_ws_base[k] = 0;
  for (int32_t i = 0; i < plan->num_reqs; i++) {
    const sc_plan_req *pr = &plan->reqs[i];
    m->last_token[i] = pr->q > 0 ? pr->start + pr->q - 1 : -1;
  }
  if ((rc = build_tokens(plan, m)) || (rc = build_kv_writes(plan, bt, m)) ||
      (rc = build_cache_keys(plan, m)))
    goto fail;
  if (c->dcp > 1 && (rc = build_chunks(plan, bt, m))) goto fail;
  return 0;
fail:
  sc_meta_free(m);
  return sc_fail(d, rc, "rank %d: cannot derive the step inputs: %s", global_rank,
                 sc_strerror(rc));
}

void sc_meta_topk_to_workspace(const sc_plan *plan, int32_t region, const int32_t *pos,
                               int32_t n, int32_t *rows) {
  for (int32_t i = 0; i < n; i++) rows[i] = sc_plan_workspace_row(plan, region, pos[i]);
}

int sc_meta_dense_blocks(int32_t n, const int32_t *block_start, const int32_t *blocks,
                         int32_t **table, size_t *cap, int32_t *max_blocks) {
  int32_t mb = 1;
  for (int32_t i = 0; i < n; i++) {
    const int32_t nb = block_start[i + 1] - block_start[i];
    if (nb < 0 || block_start[i] < 0) return SC_EINVAL;
    if (nb > mb) mb = nb;
  }
  const size_t need = (size_t)n * (size_t)mb + 1;
  if (need > *cap) {
    int32_t *t = realloc(*table, need * sizeof *t);
    if (t == NULL) return SC_ENOMEM;
    *table = t;
    *cap = need;
  }
  for (int32_t i = 0; i < n; i++) {
    const int32_t nb = block_start[i + 1] - block_start[i];
    for (int32_t v = 0; v < mb; v++)
      (*table)[(size_t)i * mb + v] = v < nb ? blocks[block_start[i] + v] : -1;
  }
  *max_blocks = mb;
  return 0;
}

int sc_meta_build_csr(const sc_plan *plan, int32_t global_rank, const int32_t *block_start,
                      const int32_t *blocks, int32_t num_blocks, int32_t **table, size_t *cap,
                      int32_t *max_blocks, sc_meta *m, sc_diag *d) {
  sc_meta_free(m);
  const int rc =
      sc_meta_dense_blocks(plan->num_reqs, block_start, blocks, table, cap, max_blocks);
  if (rc) return sc_fail(d, rc, "the block tables of the step are malformed");
  const sc_meta_blocks mb = {.table = *table, .max_blocks = *max_blocks,
                             .num_blocks = num_blocks};
  return sc_meta_build(plan, global_rank, &mb, m, d);
}
