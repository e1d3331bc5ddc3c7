/* step_plan.c - conversion between the planner's sc_plan and the step_plan message.
 *
 * to_plan is the receiving rank's gate: a plan that passes it is safe to hand to
 * sc_plan_fill_*, sc_plan_req_rows and sc_plan_rank_view (every index they follow is in
 * bounds and every row fits its rank's T_pad), and its fingerprint matches its
 * collective list. It does not re-derive the plan from a batch (the receiver has none);
 * equality of fingerprints across ranks is checked by the plan_ack exchange. */
#include <stdlib.h>
#include <string.h>

#include "actors/partitioner/dcp.h"
#include "messages/messages.h"

static int dup_array(void **dst, uint32_t *dst_n, const void *src, int32_t n, size_t es) {
  *dst = NULL;
  *dst_n = 0;
  if (n <= 0) return 0;
  if ((*dst = malloc((size_t)n * es)) == NULL) return SC_ENOMEM;
  memcpy(*dst, src, (size_t)n * es);
  *dst_n = (uint32_t)n;
  return 0;
}

int sc_msg_step_plan_from_plan(const sc_plan *plan, const int64_t *req_ids,
                               sc_msg_step_plan *m) {
  sc_msg_body_clear(SC_MSG_STEP_PLAN, m);
  m->config = plan->cfg;
  m->num_tokens = plan->num_tokens;
  m->num_decode_tokens = plan->num_decode_tokens;
  m->t_pad = plan->t_pad;
  m->fingerprint = plan->fingerprint;
  int rc;
  if ((rc = dup_array((void **)&m->reqs.v, &m->reqs.n, plan->reqs, plan->num_reqs,
                      sizeof *plan->reqs)) ||
      (rc = dup_array((void **)&m->order.v, &m->order.n, plan->order, plan->num_ordered,
                      sizeof *plan->order)) ||
      (rc = dup_array((void **)&m->rank_tokens.v, &m->rank_tokens.n, plan->rank_tokens,
                      plan->num_reqs > 0 ? plan->cfg.pcp : 0, sizeof *plan->rank_tokens)) ||
      (rc = dup_array((void **)&m->regions.v, &m->regions.n, plan->regions,
                      plan->num_regions, sizeof *plan->regions)) ||
      (rc = dup_array((void **)&m->chunks.v, &m->chunks.n, plan->chunks, plan->num_chunks,
                      sizeof *plan->chunks)) ||
      (rc = dup_array((void **)&m->colls.v, &m->colls.n, plan->colls, plan->num_colls,
                      sizeof *plan->colls)))
    goto fail;
  if (plan->num_reqs > 0) {
    m->req_ids.v = calloc((size_t)plan->num_reqs, sizeof *m->req_ids.v);
    if (m->req_ids.v == NULL) {
      rc = SC_ENOMEM;
      goto fail;
    }
    m->req_ids.n = (uint32_t)plan->num_reqs;
    if (req_ids != NULL)
      memcpy(m->req_ids.v, req_ids, (size_t)plan->num_reqs * sizeof *req_ids);
  }
  return 0;
fail:
  sc_msg_body_clear(SC_MSG_STEP_PLAN, m);
  return rc;
}

/* Everything the index functions rely on; see the file comment. */
static int check_plan(const sc_msg_step_plan *m, sc_diag *d) {
  const sc_plan_config *cfg = &m->config;
  int rc = sc_plan_config_validate(cfg, d);
  if (rc != 0) return rc;
  const uint32_t R = m->reqs.n, P = (uint32_t)cfg->pcp;
  if (R == 0) return sc_fail(d, SC_EPROTO, "step_plan: no requests");
  if (R > INT32_MAX / 2 || m->req_ids.n != R)
    return sc_fail(d, SC_EPROTO, "step_plan: %u request ids for %u requests", m->req_ids.n, R);
  if (m->rank_tokens.n != P)
    return sc_fail(d, SC_EPROTO, "step_plan.rank_tokens: %u entries, expected pcp = %u",
                   m->rank_tokens.n, P);
  if (m->colls.n > INT32_MAX || m->regions.n > INT32_MAX || m->chunks.n > INT32_MAX)
    return sc_fail(d, SC_EPROTO, "step_plan: too many entries");
  /* Requests: contiguous in batch order, consistent chunking. */
  int64_t start = 0, decode = 0;
  for (uint32_t i = 0; i < R; i++) {
    const sc_plan_req *r = &m->reqs.v[i];
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
    if (needs_region ? r->region < 0 || (uint32_t)r->region >= m->regions.n ||
                           m->regions.v[r->region].req != (int32_t)i
                     : r->region != -1)
      return sc_fail(d, SC_EPROTO, "step_plan.reqs[%u].region %d: %s", i, r->region,
                     needs_region ? "a prefill under DCP needs its own region"
                                  : "only prefills with rows under DCP have a region");
    if (!(r->flags & SC_REQ_PREFILL)) decode += r->q;
    start += r->q;
  }
  if (start != m->num_tokens || decode != m->num_decode_tokens)
    return sc_fail(d, SC_EPROTO, "step_plan: num_tokens %d / num_decode_tokens %d do not match "
                   "the requests (%lld / %lld)", m->num_tokens, m->num_decode_tokens,
                   (long long)start, (long long)decode);
  /* Row order: every request with q > 0 exactly once. */
  uint32_t with_rows = 0;
  for (uint32_t i = 0; i < R; i++) with_rows += m->reqs.v[i].q > 0;
  if (m->order.n != with_rows)
    return sc_fail(d, SC_EPROTO, "step_plan.order: %u entries for %u requests with rows",
                   m->order.n, with_rows);
  uint8_t *seen = calloc(R, 1);
  if (seen == NULL) return SC_ENOMEM;
  bool prefills = false; /* SPEC.md §3: decode rows first (the metadata counts on it) */
  for (uint32_t k = 0; k < m->order.n && rc == 0; k++) {
    const int32_t i = m->order.v[k];
    if ((uint32_t)i >= R || seen[i] || m->reqs.v[i].q == 0) {
      rc = sc_fail(d, SC_EPROTO, "step_plan.order[%u] = %d is not a new request with rows",
                   k, i);
    } else if (prefills && !(m->reqs.v[i].flags & SC_REQ_PREFILL)) {
      rc = sc_fail(d, SC_EPROTO, "step_plan.order[%u] = %d: a decode after a prefill", k, i);
    } else {
      seen[i] = 1;
      prefills |= (m->reqs.v[i].flags & SC_REQ_PREFILL) != 0;
    }
  }
  free(seen);
  if (rc != 0) return rc;
  /* Per-rank tokens recomputed from the rows; all within T_pad. */
  sc_plan view = {.cfg = *cfg, .reqs = m->reqs.v, .num_reqs = (int32_t)R};
  for (uint32_t r = 0; r < P; r++) {
    int64_t tokens = 0;
    for (uint32_t k = 0; k < m->order.n; k++) {
      sc_plan_row rows[2];
      const int nr = sc_plan_req_rows(&view, m->order.v[k], (int32_t)r, rows);
      for (int x = 0; x < nr; x++) tokens += rows[x].len;
    }
    if (tokens != m->rank_tokens.v[r] || tokens > m->t_pad)
      return sc_fail(d, SC_EPROTO, "step_plan.rank_tokens[%u] = %d, rows hold %lld tokens "
                     "(t_pad %d)", r, m->rank_tokens.v[r], (long long)tokens, m->t_pad);
  }
  if ((int64_t)P * m->t_pad > INT32_MAX)
    return sc_fail(d, SC_EPROTO, "step_plan.t_pad %d too large", m->t_pad);
  /* Chunks and regions. */
  for (uint32_t c = 0; c < m->chunks.n; c++) {
    const sc_plan_chunk *ch = &m->chunks.v[c];
    if ((int64_t)ch->first_region + ch->num_regions > (int64_t)m->regions.n)
      return sc_fail(d, SC_EPROTO, "step_plan.chunks[%u]: regions [%d, +%d) out of range", c,
                     ch->first_region, ch->num_regions);
    if ((int64_t)cfg->dcp * ch->shard_rows_total > INT32_MAX)
      return sc_fail(d, SC_EPROTO, "step_plan.chunks[%u]: workspace too large", c);
    /* The regions a chunk lists must say they belong to it: their offsets are checked
     * against their own chunk's totals below, and sc_plan_fill_deinterleave writes them
     * into a buffer sized by this chunk's extent_total. */
    for (int32_t g = ch->first_region; g < ch->first_region + ch->num_regions; g++)
      if (m->regions.v[g].chunk != (int32_t)c)
        return sc_fail(d, SC_EPROTO, "step_plan.chunks[%u] lists region %d of chunk %d", c, g,
                       m->regions.v[g].chunk);
  }
  for (uint32_t g = 0; g < m->regions.n; g++) {
    const sc_plan_region *rg = &m->regions.v[g];
    if ((uint32_t)rg->req >= R || (uint32_t)rg->chunk >= m->chunks.n)
      return sc_fail(d, SC_EPROTO, "step_plan.regions[%u]: request %d / chunk %d out of range",
                     g, rg->req, rg->chunk);
    const sc_plan_chunk *ch = &m->chunks.v[rg->chunk];
    if ((int32_t)g < ch->first_region || (int32_t)g >= ch->first_region + ch->num_regions ||
        rg->extent != m->reqs.v[rg->req].extent ||
        rg->shard_rows != sc_dcp_local_len(rg->extent, 0, cfg->dcp, cfg->interleave) ||
        (int64_t)rg->ws_start + rg->shard_rows > ch->shard_rows_total ||
        (int64_t)rg->cu_start + rg->extent > ch->extent_total)
      return sc_fail(d, SC_EPROTO, "step_plan.regions[%u] does not fit chunk %d", g, rg->chunk);
  }
  /* The collective plan: fingerprint over the entries, sequence numbers in order. */
  for (uint32_t k = 0; k < m->colls.n; k++)
    if (m->colls.v[k].seq != (int32_t)k)
      return sc_fail(d, SC_EPROTO, "step_plan.colls[%u].seq is %d", k, m->colls.v[k].seq);
  const uint64_t fp = sc_coll_fingerprint(m->colls.v, (int32_t)m->colls.n);
  if (fp != m->fingerprint)
    return sc_fail(d, SC_EPROTO, "step_plan.fingerprint %016llx does not match its %u "
                   "collectives (%016llx): corrupted or tampered plan",
                   (unsigned long long)m->fingerprint, m->colls.n, (unsigned long long)fp);
  return 0;
}

int sc_msg_step_plan_to_plan(const sc_msg_step_plan *m, sc_plan *plan, sc_diag *d) {
  plan->num_reqs = plan->num_ordered = plan->num_regions = plan->num_chunks = 0;
  plan->num_colls = 0;
  int rc = check_plan(m, d);
  if (rc != 0) return rc;
  /* (check_plan bounds every count to int32) */
  if ((rc = sc_plan_reserve(plan, (int32_t)m->reqs.n, (int32_t)m->order.n,
                            (int32_t)m->rank_tokens.n, (int32_t)m->regions.n,
                            (int32_t)m->chunks.n, (int32_t)m->colls.n)))
    return sc_fail(d, rc, "out of memory copying a step plan");
#define COPY(dst, src, n) \
  if ((n) > 0) memcpy((dst), (src), (size_t)(n) * sizeof *(dst))
  COPY(plan->reqs, m->reqs.v, m->reqs.n);
  COPY(plan->order, m->order.v, m->order.n);
  COPY(plan->rank_tokens, m->rank_tokens.v, m->rank_tokens.n);
  COPY(plan->regions, m->regions.v, m->regions.n);
  COPY(plan->chunks, m->chunks.v, m->chunks.n);
  COPY(plan->colls, m->colls.v, m->colls.n);
#undef COPY
  plan->cfg = m->config;
  plan->num_ordered = (int32_t)m->order.n;
  plan->num_tokens = m->num_tokens;
  plan->num_decode_tokens = m->num_decode_tokens;
  plan->t_pad = m->t_pad;
  plan->num_regions = (int32_t)m->regions.n;
  plan->num_chunks = (int32_t)m->chunks.n;
  plan->num_colls = (int32_t)m->colls.n;
  plan->fingerprint = m->fingerprint;
  plan->num_reqs = (int32_t)m->reqs.n; /* last: a failed copy leaves the plan empty */
  return 0;
}
