/* step_local.h - one step as one rank's executor runs it: the plan, the inputs, the rank's
 * metadata and its dense block table, all owned by the bundle (DESIGN.md §3 step 4).
 *
 * The metadata actor fills a bundle from the step_plan and step_inputs messages of a step
 * (sc_step_local_finish derives the rest) and hands it to the executor of the same node
 * by address (a step_local message); the executor runs it and frees it.
 *
 * Ownership: the bundle owns every array; sc_step_local_free releases them and the
 * bundle. Threads: one at a time (built on the metadata actor's loop, then handed over).
 */
#ifndef SC_STEP_LOCAL_H
#define SC_STEP_LOCAL_H

#include <stdint.h>

#include "messages/messages.h"
#include "plan/metadata.h"

typedef struct sc_step_local {
  uint64_t step;
  sc_plan plan;
  int64_t *req_ids;            /* [plan.num_reqs] scheduler request ids */
  sc_msg_step_inputs in;       /* tokens, block tables (CSR), sampling: owned arrays */
  int32_t *block_table;        /* dense [num_reqs][max_blocks] */
  size_t block_table_cap;
  int32_t max_blocks;
  sc_meta meta;                /* this rank's metadata */
  struct sc_step_local *next;  /* the executor's queue of steps waiting for their turn */
} sc_step_local;

/* A zeroed bundle for `step`, or NULL. */
sc_step_local *sc_step_local_new(uint64_t step);
void sc_step_local_free(sc_step_local *sl);

/* With plan, req_ids and in filled: checks that the inputs match the plan and derives
 * the dense block table and rank's metadata. num_blocks bounds the block ids (the KV
 * pool of each rank). Returns 0, or SC_EPROTO / SC_EINVAL / SC_ENOMEM with d. */
int sc_step_local_finish(sc_step_local *sl, int32_t global_rank, int32_t num_blocks,
                         sc_diag *d);

#endif
