/* step_prof.c - per-stage sums of a step's marks (see step_prof.h). */
#include "model/step_prof.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static const char *const names[SC_STAGE_COUNT] = {"input", "dense",      "indexer",
                                                  "attention", "collectives", "head"};

const char *sc_stage_name(int stage) {
  return stage >= 0 && stage < SC_STAGE_COUNT ? names[stage] : "?";
}

static void mark(sc_step_prof *p, sc_stage label) {
  if (p->rc || p->n >= SC_KMARK_MAX) return; /* (out of marks: the last stretch goes on) */
  if (p->k->ops->mark == NULL) {
    p->rc = SC_ENOTSUP;
    return;
  }
  p->rc = p->k->ops->mark(p->k, p->n);
  if (p->rc == 0) p->label[p->n++] = (uint8_t)label;
}

void sc_step_prof_begin(sc_step_prof *p, sc_kernels *k) {
  p->k = k;
  p->n = 0;
  p->rc = 0;
  p->unmarked = 0;
  p->cur = SC_STAGE_INPUT;
  if (k) mark(p, SC_STAGE_INPUT);
}

void sc_step_prof_enter(sc_step_prof *p, sc_stage stage) {
  if (p->k == NULL || stage == p->cur) return;
  p->cur = stage;
  if (p->n == SC_KMARK_MAX - 1) { /* keep the last mark for the end */
    p->unmarked++;
    return;
  }
  mark(p, stage);
}

void sc_step_prof_end(sc_step_prof *p) {
  if (p->k == NULL) return;
  mark(p, p->cur); /* (enter left room for it) */
  if (p->unmarked > 0 && p->rc == 0 && !p->warned) {
    p->warned = true;
    SC_WARN("step_prof", "a step changed stages %d times after its %d timing marks ran out: "
            "the time from there on counts as %s (later such steps are not logged)",
            (int)p->unmarked, SC_KMARK_MAX, sc_stage_name(p->label[SC_KMARK_MAX - 2]));
  }
}

int sc_step_prof_read(const sc_step_prof *p, uint64_t ns[SC_STAGE_COUNT], uint64_t *span) {
  memset(ns, 0, sizeof(uint64_t) * SC_STAGE_COUNT);
  *span = 0;
  if (p->k == NULL || p->rc || p->n < 2) return p->rc ? p->rc : SC_ENOTSUP;
  uint64_t *t = malloc(sizeof *t * (size_t)p->n);
  if (t == NULL) return SC_ENOMEM;
  int rc = p->k->ops->marks_read(p->k, p->n, t);
  if (rc == 0) {
    for (int32_t i = 0; i + 1 < p->n; i++)
      ns[p->label[i]] += t[i + 1] > t[i] ? t[i + 1] - t[i] : 0;
    *span = t[p->n - 1];
  }
  free(t);
  return rc;
}
