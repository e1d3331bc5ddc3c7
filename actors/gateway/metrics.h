/* metrics.h - the head's numbers in the Prometheus text format (GET /metrics,
 * docs/http.md): the gateway's own counters (requests by outcome, tokens, time to first
 * token and per output token, as its clients saw them) and the scheduler's report
 * (queue, running requests, KV blocks, steps, planned collectives by purpose).
 *
 * Pure: rendering only; the counters are kept by gateway_actor.c.
 * Threads: any; no shared state.
 */
#ifndef SC_GW_METRICS_H
#define SC_GW_METRICS_H

#include <stdint.h>

#include "base/histo.h"
#include "messages/buf.h"
#include "messages/messages.h"

/* How a request that reached the gateway ended. */
typedef enum sc_gw_outcome {
  SC_GW_LENGTH = 0,   /* finished: max_tokens reached */
  SC_GW_STOP,         /* finished: a stop string (HTTP front) */
  SC_GW_CANCELED,     /* canceled by its client, or its client went away */
  SC_GW_REJECTED,     /* refused before its first token: bad input, too large, queue full,
                         stopping */
  SC_GW_FAILED,       /* failed after it was admitted (a step failed, the cluster ended) */
  SC_GW_OUTCOME_COUNT
} sc_gw_outcome;

const char *sc_gw_outcome_name(int outcome);

typedef struct sc_gw_counters {
  uint64_t requests[SC_GW_OUTCOME_COUNT];
  uint64_t prompt_tokens;      /* of the requests passed to the scheduler */
  uint64_t generation_tokens;  /* delivered to clients */
  sc_histo ttft;               /* submit to first token, per request */
  sc_histo tpot;               /* between consecutive tokens of a request */
} sc_gw_counters;

/* Appends the exposition (text format 0.0.4) of g and, unless NULL, r. Returns 0 or
 * SC_ENOMEM. */
int sc_gw_metrics_render(sc_buf *out, const sc_gw_counters *g, const sc_msg_stats_report *r);

#endif
