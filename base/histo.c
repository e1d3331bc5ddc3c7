/* histo.c - see histo.h. */
#include "base/histo.h"

/* From a millisecond (a short decode step on the GPU) to two minutes (a long prompt's
 * first token under load), about three buckets per decade. */
const double SC_HIST_SECONDS[SC_HIST_N] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                           0.1,   0.25,   0.5,   1,    2.5,   5,
                                           10,    30,     60,    120};

void sc_histo_add(sc_histo *h, double seconds) {
  int i = 0;
  while (i < SC_HIST_N && seconds > SC_HIST_SECONDS[i]) i++;
  h->counts[i]++;
  h->sum += seconds;
}

uint64_t sc_histo_total(const sc_histo *h) {
  uint64_t n = 0;
  for (int i = 0; i <= SC_HIST_N; i++) n += h->counts[i];
  return n;
}
