/* step_plan.c - the step_plan message and the planner's wire form of a plan
 * (plan/plan_types.h, sc_plan_wire): copying a plan into a message to send, and viewing a
 * received message as a plan to check. The check itself is the planner's
 * (plan/plan_wire.h, sc_plan_from_wire); nothing here looks at what the arrays hold. */
#include <stdlib.h>
#include <string.h>

#include "messages/messages.h"

static int dup_array(void **dst, uint32_t *dst_n, const void *src, uint32_t n, size_t es) {
  *dst = NULL;
  *dst_n = 0;
  if (n == 0) return 0;
  if ((*dst = malloc((size_t)n * es)) == NULL) return SC_ENOMEM;
  memcpy(*dst, src, (size_t)n * es);
  *dst_n = n;
  return 0;
}

int sc_msg_step_plan_from_wire(const sc_plan_wire *w, sc_msg_step_plan *m) {
  sc_msg_body_clear(SC_MSG_STEP_PLAN, m);
  m->config = w->config;
  m->num_tokens = w->num_tokens;
  m->num_decode_tokens = w->num_decode_tokens;
  m->t_pad = w->t_pad;
  m->fingerprint = w->fingerprint;
  int rc;
  if ((rc = dup_array((void **)&m->reqs.v, &m->reqs.n, w->reqs, w->num_reqs,
                      sizeof *w->reqs)) ||
      (rc = dup_array((void **)&m->order.v, &m->order.n, w->order, w->num_order,
                      sizeof *w->order)) ||
      (rc = dup_array((void **)&m->rank_tokens.v, &m->rank_tokens.n, w->rank_tokens,
                      w->num_rank_tokens, sizeof *w->rank_tokens)) ||
      (rc = dup_array((void **)&m->regions.v, &m->regions.n, w->regions, w->num_regions,
                      sizeof *w->regions)) ||
      (rc = dup_array((void **)&m->chunks.v, &m->chunks.n, w->chunks, w->num_chunks,
                      sizeof *w->chunks)) ||
      (rc = dup_array((void **)&m->colls.v, &m->colls.n, w->colls, w->num_colls,
                      sizeof *w->colls)))
    goto fail;
  if (w->num_req_ids > 0) {
    m->req_ids.v = calloc(w->num_req_ids, sizeof *m->req_ids.v);
    if (m->req_ids.v == NULL) {
      rc = SC_ENOMEM;
      goto fail;
    }
    m->req_ids.n = w->num_req_ids;
    if (w->req_ids != NULL)
      memcpy(m->req_ids.v, w->req_ids, (size_t)w->num_req_ids * sizeof *w->req_ids);
  }
  return 0;
fail:
  sc_msg_body_clear(SC_MSG_STEP_PLAN, m);
  return rc;
}

void sc_msg_step_plan_wire(const sc_msg_step_plan *m, sc_plan_wire *w) {
  *w = (sc_plan_wire){
      .config = m->config,
      .req_ids = m->req_ids.v, .num_req_ids = m->req_ids.n,
      .reqs = m->reqs.v, .num_reqs = m->reqs.n,
      .order = m->order.v, .num_order = m->order.n,
      .num_tokens = m->num_tokens, .num_decode_tokens = m->num_decode_tokens,
      .t_pad = m->t_pad,
      .rank_tokens = m->rank_tokens.v, .num_rank_tokens = m->rank_tokens.n,
      .regions = m->regions.v, .num_regions = m->regions.n,
      .chunks = m->chunks.v, .num_chunks = m->chunks.n,
      .colls = m->colls.v, .num_colls = m->colls.n,
      .fingerprint = m->fingerprint};
}
