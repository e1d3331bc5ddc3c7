/* fault.h - fault injection: the table of faults a run can inject (`--inject
 * KIND:RANK:STEP`, or the cluster file's "inject" list; docs/pipeline.md) to test that
 * each ends the way it should, and the query the actors make of it (sc_fault_fires).
 *
 * Where each fires (the actor does the harm; the table only says when):
 *   desync      the executor's collective session (collectives/coll.h,
 *               sc_comm.inject_desync_step, set when the rank context is created: the
 *               collectives layer cannot ask this table): the step's first collective
 *               is requested with one row too many, as a buggy executor would; the
 *               refusal it causes is its log line
 *   kill        the executor, entering the step: its node process dies (SIGKILL)
 *   badack      the metadata actor: it acknowledges a wrong plan fingerprint
 *   noack       the metadata actor: its acknowledgement is lost
 *   devfault    the executor, after queueing the step: the device fails (a kernel
 *               faults; kernels.h inject_fault)
 *   nocomplete  the executor, at the step's end: its step_complete is lost
 *
 * Threads: the table is written once, at configuration, then only read (any thread).
 */
#ifndef SC_FAULT_H
#define SC_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef enum sc_fault {
  SC_FAULT_DESYNC,
  SC_FAULT_KILL,
  SC_FAULT_BADACK,
  SC_FAULT_NOACK,
  SC_FAULT_DEVFAULT,
  SC_FAULT_NOCOMPLETE,
  SC_FAULT_COUNT
} sc_fault;

/* One fault per kind at most: the rank and step it fires at (step 0: not injected). */
typedef struct sc_faults {
  struct {
    int32_t rank;
    uint64_t step;
  } at[SC_FAULT_COUNT];
} sc_faults;

/* Parses "KIND:RANK:STEP" (RANK below num_ranks, STEP >= 1) into the table. SC_EINVAL
 * with the reason in d, also for a fault that cannot fire there: nocomplete on rank 0
 * (which sends the result instead), desync in a one-rank cluster (no collectives). */
int sc_faults_parse(sc_faults *f, const char *spec, int32_t num_ranks, sc_diag *d);

/* Whether fault `kind` fires at (rank, step); when it does, logs it as an error naming the
 * rank, the step and what happens, so a run's log says which failure was on purpose. */
bool sc_fault_fires(const sc_faults *f, sc_fault kind, int32_t rank, uint64_t step);

#endif
