/* plan_wire.c - the receiving rank's gate for a shipped plan (plan_wire.h).
 *
 * A plan that passes sc_plan_from_wire is safe to hand to sc_plan_fill_*,
 * sc_plan_req_rows and sc_plan_rank_view (every index they follow is in bounds and every
 * row fits its rank's T_pad), and its fingerprint matches its collective list. It does
 * not re-derive the plan from a batch (the receiver has none); equality of fingerprints
 * across ranks is checked by the plan_ack exchange. The messages name the step_plan
 * message's fields, since that is what a peer sent. */
#include "plan/plan_wire.h"

#include <stdlib.h>
#include <string.h>

#include "plan/dcp.h"

void sc_plan_wire_of(const sc_plan *plan, const int64_t *req_ids, sc_plan_wire *w) {
  const uint32_t reqs = plan->num_reqs > 0 ? (uint32_t)plan->num_reqs : 0;
  *w = (sc_plan_wire){
      .config = plan->cfg,
      .req_ids = req_ids, .num_req_ids = reqs,
      .reqs = plan->reqs, .num_reqs = reqs,
      .order = plan->order, .num_order = (uint32_t)plan->num_ordered,
      .num_tokens = plan->num_tokens, .num_decode_tokens = plan->num_decode_tokens,
      .t_pad = plan->t_pad,
      .rank_tokens = plan->rank_tokens, .num_rank_tokens = reqs > 0 ? (uint32_t)plan->cfg.pcp : 0,
      .regions = plan->regions, .num_regions = (uint32_t)plan->num_regions,
      .chunks = plan->chunks, .num_chunks = (uint32_t)plan->num_chunks,
      .colls = plan->colls, .num_colls = (uint32_t)plan->num_colls,
      .fingerprint = plan->fingerprint};
}

/* Everything the index functions rely on; see the file comment. */
static int check_plan(const sc_plan_wire *w, sc_diag *d) {
  const sc_plan_config *cfg = &w->config;
  int rc = sc_plan_config_validate(cfg, d);
  if (rc != 0) return rc;
  const uint32_t R = w->num_reqs, P = (uint32_t)cfg->pcp;
  if (R == 0) return sc_fail(d, SC_EPROTO, "step_plan: no requests");
  if (R > INT32_MAX / 2 || w->num_req_ids != R)
    return sc_fail(d, SC_EPROTO, "step_plan: %u request ids for %u requests", w->num_req_ids, R);
  if (w->num_rank_tokens != P)
    return sc_fail(d, SC_EPROTO, "step_plan.rank_tokens: %u entries, expected pcp = %u",
                   w->num_rank_tokens, P);
  if (w->num_colls > INT32_MAX || w->num_regions > INT32_MAX || w->num_chunks > INT32_MAX)
    return sc_fail(d, SC_EPROTO, "step_plan: too many entries");
  /* Requests: contiguous in batch order, consistent chunking. */
  int64_t start = 0, decode = 0;
  for (uint32_t i = 0; i < R; i++) {
    const sc_plan_req *r = &w->reqs[i];
    if (r->start != start || r->extent < r->q)
      return sc_fail(d, SC_EPROTO, "step_plan.reqs[%u]: start %d / extent %d inconsistent "
                     "(expected start %lld, extent >= q = %d)", i, r->start, r->extent,
                     (long long)start, r->q);
    if (r->flags & SC_REQ_SPLIT) {
      const int64_t C = 2 * (int64_t)P;
      /* cs must be exactly ceil(q / C): then every chunk offset stays below q. */
      if (!(r->flags & SC_REQ_PREFILL) || P < 2 || r->q < 1 ||
          r->cs != (int32_t)(((int64_t)r->q + C - 1) / C))
        return sc_fail(d, SC_EPROTO, "step_plan.reqs[%u]: split with chunk size %d for q = %d "
                       "at pcp %u is inconsistent", i, r->cs, r->q, P);
    }
    /* Under DCP exactly the prefill requests with rows have a region, and it names them
     * back (the metadata looks a prefill row's region up by its request, and a region
     * names the request whose cache it gathers: a region borrowed from another request
     * would attend over the wrong context without any error); without DCP none has. */
    const bool needs_region = cfg->dcp > 1 && (r->flags & SC_REQ_PREFILL) && r->q > 0;
    if (needs_region ? r->region < 0 || (uint32_t)r->region >= w->num_regions ||
                           w->regions[r->region].req != (int32_t)i
                     : r->region != -1)
      return sc_fail(d, SC_EPROTO, "step_plan.reqs[%u].region %d: %s", i, r->region,
                     needs_region ? "a prefill under DCP needs its own region"
                                  : "only prefills with rows under DCP have a region");
    if (!(r->flags & SC_REQ_PREFILL)) decode += r->q;
    start += r->q;
  }
  if (start != w->num_tokens || decode != w->num_decode_tokens)
    return sc_fail(d, SC_EPROTO, "step_plan: num_tokens %d / num_decode_tokens %d do not match "
                   "the requests (%lld / %lld)", w->num_tokens, w->num_decode_tokens,
                   (long long)start, (long long)decode);
  /* Row order: every request with q > 0 exactly once. */
  uint32_t with_rows = 0;
  for (uint32_t i = 0; i < R; i++) with_rows += w->reqs[i].q > 0;
  if (w->num_order != with_rows)
    return sc_fail(d, SC_EPROTO, "step_plan.order: %u entries for %u requests with rows",
                   w->num_order, with_rows);
  uint8_t *seen = calloc(R, 1);
  if (seen == NULL) return SC_ENOMEM;
  bool prefills = false; /* SPEC.md §3: decode rows first (the metadata counts on it) */
  for (uint32_t k = 0; k < w->num_order && rc == 0; k++) {
    const int32_t i = w->order[k];
    if ((uint32_t)i >= R || seen[i] || w->reqs[i].q == 0) {
      rc = sc_fail(d, SC_EPROTO, "step_plan.order[%u] = %d is not a new request with rows",
                   k, i);
    } else if (prefills && !(w->reqs[i].flags & SC_REQ_PREFILL)) {
      rc = sc_fail(d, SC_EPROTO, "step_plan.order[%u] = %d: a decode after a prefill", k, i);
    } else {
      seen[i] = 1;
      prefills |= (w->reqs[i].flags & SC_REQ_PREFILL) != 0;
    }
  }
  free(seen);
  if (rc != 0) return rc;
  /* Per-rank tokens recomputed from the rows; all within T_pad. (The view only reads the
   * requests: sc_plan_req_rows takes a const plan.) */
  const sc_plan view = {.cfg = *cfg, .reqs = (sc_plan_req *)w->reqs, .num_reqs = (int32_t)R};
  for (uint32_t r = 0; r < P; r++) {
    int64_t tokens = 0;
    for (uint32_t k = 0; k < w->num_order; k++) {
      sc_plan_row rows[2];
      const int nr = sc_plan_req_rows(&view, w->order[k], (int32_t)r, rows);
      for (int x = 0; x < nr; x++) tokens += rows[x].len;
    }
    if (tokens != w->rank_tokens[r] || tokens > w->t_pad)
      return sc_fail(d, SC_EPROTO, "step_plan.rank_tokens[%u] = %d, rows hold %lld tokens "
                     "(t_pad %d)", r, w->rank_tokens[r], (long long)tokens, w->t_pad);
  }
  if ((int64_t)P * w->t_pad > INT32_MAX)
    return sc_fail(d, SC_EPROTO, "step_plan.t_pad %d too large", w->t_pad);
  /* Chunks and regions. */
  for (uint32_t c = 0; c < w->num_chunks; c++) {
    const sc_plan_chunk *ch = &w->chunks[c];
    if ((int64_t)ch->first_region + ch->num_regions > (int64_t)w->num_regions)
      return sc_fail(d, SC_EPROTO, "step_plan.chunks[%u]: regions [%d, +%d) out of range", c,
                     ch->first_region, ch->num_regions);
    if ((int64_t)cfg->dcp * ch->shard_rows_total > INT32_MAX)
      return sc_fail(d, SC_EPROTO, "step_plan.chunks[%u]: workspace too large", c);
    /* The regions a chunk lists must say they belong to it: their offsets are checked
     * against their own chunk's totals below, and sc_plan_fill_deinterleave writes them
     * into a buffer sized by this chunk's extent_total. */
    for (int32_t g = ch->first_region; g < ch->first_region + ch->num_regions; g++)
      if (w->regions[g].chunk != (int32_t)c)
        return sc_fail(d, SC_EPROTO, "step_plan.chunks[%u] lists region %d of chunk %d", c, g,
                       w->regions[g].chunk);
  }
  for (uint32_t g = 0; g < w->num_regions; g++) {
    const sc_plan_region *rg = &w->regions[g];
    if ((uint32_t)rg->req >= R || (uint32_t)rg->chunk >= w->num_chunks)
      return sc_fail(d, SC_EPROTO, "step_plan.regions[%u]: request %d / chunk %d out of range",
                     g, rg->req, rg->chunk);
    const sc_plan_chunk *ch = &w->chunks[rg->chunk];
    if ((int32_t)g < ch->first_region || (int32_t)g >= ch->first_region + ch->num_regions ||
        rg->extent != w->reqs[rg->req].extent ||
        rg->shard_rows != sc_dcp_local_len(rg->extent, 0, cfg->dcp, cfg->interleave) ||
        (int64_t)rg->ws_start + rg->shard_rows > ch->shard_rows_total ||
        (int64_t)rg->cu_start + rg->extent > ch->extent_total)
      return sc_fail(d, SC_EPROTO, "step_plan.regions[%u] does not fit chunk %d", g, rg->chunk);
  }
  /* The collective plan: fingerprint over the entries, sequence numbers in order. */
  for (uint32_t k = 0; k < w->num_colls; k++)
    if (w->colls[k].seq != (int32_t)k)
      return sc_fail(d, SC_EPROTO, "step_plan.colls[%u].seq is %d", k, w->colls[k].seq);
  const uint64_t fp = sc_coll_fingerprint(w->colls, (int32_t)w->num_colls);
  if (fp != w->fingerprint)
    return sc_fail(d, SC_EPROTO, "step_plan.fingerprint %016llx does not match its %u "
                   "collectives (%016llx): corrupted or tampered plan",
                   (unsigned long long)w->fingerprint, w->num_colls, (unsigned long long)fp);
  return 0;
}

int sc_plan_from_wire(const sc_plan_wire *w, sc_plan *plan, sc_diag *d) {
  plan->num_reqs = plan->num_ordered = plan->num_regions = plan->num_chunks = 0;
  plan->num_colls = 0;
  int rc = check_plan(w, d);
  if (rc != 0) return rc;
  /* (check_plan bounds every count to int32) */
  if ((rc = sc_plan_reserve(plan, (int32_t)w->num_reqs, (int32_t)w->num_order,
                            (int32_t)w->num_rank_tokens, (int32_t)w->num_regions,
                            (int32_t)w->num_chunks, (int32_t)w->num_colls)))
    return sc_fail(d, rc, "out of memory copying a step plan");
#define COPY(dst, src, n) \
  if ((n) > 0) memcpy((dst), (src), (size_t)(n) * sizeof *(dst))
  COPY(plan->reqs, w->reqs, w->num_reqs);
  COPY(plan->order, w->order, w->num_order);
  COPY(plan->rank_tokens, w->rank_tokens, w->num_rank_tokens);
  COPY(plan->regions, w->regions, w->num_regions);
  COPY(plan->chunks, w->chunks, w->num_chunks);
  COPY(plan->colls, w->colls, w->num_colls);
#undef COPY
  plan->cfg = w->config;
  plan->num_ordered = (int32_t)w->num_order;
  plan->num_tokens = w->num_tokens;
  plan->num_decode_tokens = w->num_decode_tokens;
  plan->t_pad = w->t_pad;
  plan->num_regions = (int32_t)w->num_regions;
  plan->num_chunks = (int32_t)w->num_chunks;
  plan->num_colls = (int32_t)w->num_colls;
  plan->fingerprint = w->fingerprint;
  plan->num_reqs = (int32_t)w->num_reqs; /* last: a failed copy leaves the plan empty */
  return 0;
}
