/* fault.c - the fault table (fault.h). */
#include "actors/fault.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

static const struct {
  const char *name;
  const char *what; /* for the log line when it fires */
} k_faults[SC_FAULT_COUNT] = {
    [SC_FAULT_DESYNC] = {"desync", "a collective of the wrong shape is requested"},
    [SC_FAULT_KILL] = {"kill", "the node dies"},
    [SC_FAULT_BADACK] = {"badack", "the plan is acknowledged with a wrong fingerprint"},
    [SC_FAULT_NOACK] = {"noack", "the plan's acknowledgement is lost"},
    [SC_FAULT_DEVFAULT] = {"devfault", "the device fails"},
    [SC_FAULT_NOCOMPLETE] = {"nocomplete", "the step's completion is lost"},
};

#define SC_FAULT_KINDS "desync, kill, badack, noack, devfault or nocomplete"

int sc_faults_parse(sc_faults *f, const char *spec, int32_t num_ranks, sc_diag *d) {
  char kind[16];
  int rank = -1;
  unsigned long long step = 0;
  int used = 0;
  if (sscanf(spec, "%15[a-z]:%d:%llu%n", kind, &rank, &step, &used) != 3 ||
      spec[used] != '\0' || rank < 0 || rank >= num_ranks || step < 1)
    return sc_fail(d, SC_EINVAL,
                   "--inject '%s': expected KIND:RANK:STEP with KIND one of " SC_FAULT_KINDS
                   ", RANK in [0, %d] and STEP >= 1",
                   spec, num_ranks - 1);
  for (int k = 0; k < SC_FAULT_COUNT; k++) {
    if (strcmp(kind, k_faults[k].name) != 0) continue;
    /* a fault that cannot fire is refused: a test using it would pass without it */
    if (k == SC_FAULT_NOCOMPLETE && rank == 0)
      return sc_fail(d, SC_EINVAL,
                     "--inject '%s': rank 0 sends the step's result, never a step_complete "
                     "(nocomplete fires on ranks 1 to %d)", spec, num_ranks - 1);
    if (k == SC_FAULT_DESYNC && num_ranks == 1)
      return sc_fail(d, SC_EINVAL,
                     "--inject '%s': a one-rank cluster runs no collectives to desync", spec);
    f->at[k].rank = rank;
    f->at[k].step = step;
    return 0;
  }
  return sc_fail(d, SC_EINVAL, "--inject '%s': the fault is " SC_FAULT_KINDS, spec);
}

bool sc_fault_fires(const sc_faults *f, sc_fault kind, int32_t rank, uint64_t step) {
  if (f->at[kind].step == 0 || f->at[kind].step != step || f->at[kind].rank != rank)
    return false;
  SC_ERROR("fault", "rank %d: injected fault %s at step %llu: %s", rank, k_faults[kind].name,
           (unsigned long long)step, k_faults[kind].what);
  return true;
}
