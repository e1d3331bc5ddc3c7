/* step_prof.h - where a step's time goes: the forward pass labels stretches of its queued
 * work with stages (dense layers, indexer and top-K, attention, collectives, ...), and
 * once the step's work has finished the time between its kernel-context marks (CUDA
 * events on the compute stream; host clocks on the CPU backend) is summed per stage.
 *
 * The time of a stretch is the stream's: a collective's stretch includes the wait for
 * its peers, and a stretch may include moments when the device waited for the host to
 * queue more work. Marks cost a little host time each (an event record on CUDA), so a
 * profile is taken only when asked for (pipeline "profile", `run --profile`).
 *
 * Ownership: plain struct of the caller. Threads: the thread driving the kernel context.
 */
#ifndef SC_STEP_PROF_H
#define SC_STEP_PROF_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "kernels/kernels.h"

typedef enum sc_stage {
  SC_STAGE_INPUT = 0, /* index uploads and the embedding */
  SC_STAGE_DENSE,     /* norms, projections, rotary, KV writes, o_proj, MLP */
  SC_STAGE_INDEXER,   /* lightning indexer, top-K selection and merge, position maps */
  SC_STAGE_ATTENTION, /* sparse MLA attention and the LSE merge of DCP shards */
  SC_STAGE_COLL,      /* planned collectives, as the compute stream waits for them */
  SC_STAGE_HEAD,      /* final norm, LM head and the logits' download */
  SC_STAGE_COUNT
} sc_stage;

/* What the device ran of a profiled step (the kernels op busy_read, sc_kbusy), as the
 * step's report carries it (step_result.device_ns): the time some kernel, copy or set
 * ran, the first one's start to the last one's end, how many ran, and (schema 1.7) how
 * long the device sat idle before the first, since the last op of the step before. */
enum {
  SC_DEVICE_BUSY_NS = 0,
  SC_DEVICE_SPAN_NS,
  SC_DEVICE_OPS,
  SC_DEVICE_IDLE_BEFORE_NS,
  SC_DEVICE_COUNT
};

/* Stage names as reports print them ("input", "dense", ...). */
const char *sc_stage_name(int stage);

typedef struct sc_step_prof {
  sc_kernels *k;       /* NULL: profiling off, enter does nothing */
  int32_t n;           /* marks recorded */
  int rc;              /* the first mark that failed (the profile is then dropped) */
  sc_stage cur;
  int32_t unmarked;    /* stage changes after the marks ran out (counted in the last) */
  bool warned;         /* unmarked changes were logged once (kept across steps) */
  uint8_t label[SC_KMARK_MAX]; /* the stage of the stretch after mark i */
} sc_step_prof;

/* Starts a step's profile on k (NULL: off). */
void sc_step_prof_begin(sc_step_prof *p, sc_kernels *k);
/* The work queued from here on belongs to `stage` (no mark when it already does). Once
 * the marks run out, the last stretch takes the rest of the step (the total stays
 * right, the split does not): such changes are counted in `unmarked`, and the end of the
 * first profile that has any logs a warning (a long prefill of a deep model). */
void sc_step_prof_enter(sc_step_prof *p, sc_stage stage);
/* The stage the work queued now belongs to (to return to after a collective). */
static inline sc_stage sc_step_prof_stage(const sc_step_prof *p) { return p->cur; }
/* Ends the profile with a last mark. */
void sc_step_prof_end(sc_step_prof *p);

/* Once the step's work has finished: ns[stage] = the time of its stretches, *span =
 * first mark to last. SC_ENOTSUP when the profile was off or a mark failed. */
int sc_step_prof_read(const sc_step_prof *p, uint64_t ns[SC_STAGE_COUNT], uint64_t *span);

#endif
