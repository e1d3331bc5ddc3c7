#include "actors/step_local.h"

#include <stdlib.h>

sc_step_local *sc_step_local_new(uint64_t step) {
  sc_step_local *sl = calloc(1, sizeof *sl);
  if (sl == NULL) return NULL;
  sl->step = step;
  sc_plan_init(&sl->plan);
  return sl;
}

void sc_step_local_free(sc_step_local *sl) {
  if (sl == NULL) return;
  sc_plan_free(&sl->plan);
  free(sl->req_ids);
  sc_msg_body_clear(SC_MSG_STEP_INPUTS, &sl->in);
  free(sl->block_table);
  sc_meta_free(&sl->meta);
  free(sl);
}

int sc_step_local_finish(sc_step_local *sl, int32_t global_rank, int32_t num_blocks,
                         sc_diag *d) {
  const sc_plan *p = &sl->plan;
  const uint32_t n = (uint32_t)p->num_reqs;
  const sc_msg_step_inputs *in = &sl->in;
  if (in->sample.n != n || in->block_start.n != n + 1 || in->tokens.n != (uint32_t)p->num_tokens ||
      in->temperature.n != n || in->seed.n != n || in->out_index.n != n ||
      in->block_start.v[n] != (int32_t)in->blocks.n)
    return sc_fail(d, SC_EPROTO, "step %llu: the step inputs do not match the step plan",
                   (unsigned long long)sl->step);
  /* a step planned ahead follows the step before it (the scheduler numbers them in
   * order), and what it takes from that step is its entries' last tokens */
  if (in->prev_step != 0 && (in->prev_step != sl->step - 1 || in->prev_entry.n != n))
    return sc_fail(d, SC_EPROTO, "step %llu: it follows step %llu with %u entries named; it can "
                   "only follow the step before, naming one for each of its %u",
                   (unsigned long long)sl->step, (unsigned long long)in->prev_step,
                   in->prev_entry.n, n);
  if (in->prev_step == 0 && in->prev_entry.n != 0)
    return sc_fail(d, SC_EPROTO, "step %llu: entries to take from no step",
                   (unsigned long long)sl->step);
  return sc_meta_build_csr(p, global_rank, in->block_start.v, in->blocks.v, num_blocks,
                           &sl->block_table, &sl->block_table_cap, &sl->max_blocks, &sl->meta,
                           d);
}
