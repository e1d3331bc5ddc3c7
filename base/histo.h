/* histo.h - latency histograms with fixed bucket bounds, as Prometheus reports them.
 *
 * One set of bounds (SC_HIST_SECONDS) for every latency the head reports (time to first
 * token, time per output token, step time): fixed, so that histograms kept by different
 * actors can travel as plain count arrays (messages/schema.def stats_report) and be
 * rendered with the same `le` labels. counts[i] counts observations <= bounds[i] and above
 * bounds[i-1]; counts[SC_HIST_N] those above the last bound (Prometheus' +Inf, which is
 * cumulative, is the total).
 *
 * Threads: none of its own; a histogram belongs to one thread.
 */
#ifndef SC_HISTO_H
#define SC_HISTO_H

#include <stdint.h>

#define SC_HIST_N 16
extern const double SC_HIST_SECONDS[SC_HIST_N];

typedef struct sc_histo {
  uint64_t counts[SC_HIST_N + 1];
  double sum; /* seconds */
} sc_histo;

void sc_histo_add(sc_histo *h, double seconds);
uint64_t sc_histo_total(const sc_histo *h);

#endif
