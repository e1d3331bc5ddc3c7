/* metrics.c - see metrics.h. Names follow Prometheus' conventions: a sparsecp_ prefix,
 * base units (seconds, bytes), _total on counters. */
#include "actors/gateway/metrics.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/error.h"
#include "model/step_prof.h"
#include "plan/coll_types.h"

static const char *const k_outcomes[SC_GW_OUTCOME_COUNT] = {"length", "stop", "canceled",
                                                            "rejected", "failed"};

const char *sc_gw_outcome_name(int outcome) {
  return outcome >= 0 && outcome < SC_GW_OUTCOME_COUNT ? k_outcomes[outcome] : "?";
}

typedef struct out {
  sc_buf *b;
  int rc;
} out;

static void put(out *o, const char *fmt, ...) {
  if (o->rc) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof line) {
    o->rc = SC_ERANGE; /* (every line here is short: a programming error) */
    return;
  }
  o->rc = sc_buf_append(o->b, line, (size_t)n);
}

static void header(out *o, const char *name, const char *type, const char *help) {
  put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(out *o, const char *name, const char *type, const char *help, double v) {
  header(o, name, type, help);
  put(o, "%s %.17g\n", name, v);
}

/* Prometheus buckets are cumulative; sc_histo's are not (counts[SC_HIST_N] is +Inf). */
static void histogram(out *o, const char *name, const char *help, const uint64_t *counts,
                      double sum) {
  header(o, name, "histogram", help);
  uint64_t acc = 0;
  for (int i = 0; i < SC_HIST_N; i++) {
    acc += counts[i];
    put(o, "%s_bucket{le=\"%g\"} %llu\n", name, SC_HIST_SECONDS[i], (unsigned long long)acc);
  }
  acc += counts[SC_HIST_N];
  put(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)acc);
  put(o, "%s_sum %.17g\n%s_count %llu\n", name, sum, name, (unsigned long long)acc);
}

static void gateway_part(out *o, const sc_gw_counters *g) {
  header(o, "sparsecp_requests_total", "counter",
         "Requests that reached the gateway, by how they ended.");
  for (int i = 0; i < SC_GW_OUTCOME_COUNT; i++)
    put(o, "sparsecp_requests_total{outcome=\"%s\"} %llu\n", k_outcomes[i],
        (unsigned long long)g->requests[i]);
  scalar(o, "sparsecp_prompt_tokens_total", "counter",
         "Prompt tokens of the requests passed to the scheduler.", (double)g->prompt_tokens);
  scalar(o, "sparsecp_generation_tokens_total", "counter",
         "Generated tokens delivered to clients.", (double)g->generation_tokens);
  histogram(o, "sparsecp_time_to_first_token_seconds",
            "From a request's arrival at the gateway to its first token.", g->ttft.counts,
            g->ttft.sum);
  histogram(o, "sparsecp_time_per_output_token_seconds",
            "Between consecutive tokens of one request, at the gateway.", g->tpot.counts,
            g->tpot.sum);
}

static void scheduler_part(out *o, const sc_msg_stats_report *r) {
  scalar(o, "sparsecp_ready", "gauge",
         "1 when every node joined and the cluster is not stopping.",
         r->ready && !r->stopping ? 1 : 0);
  scalar(o, "sparsecp_requests_waiting", "gauge", "Requests queued at the scheduler.",
         r->waiting);
  scalar(o, "sparsecp_requests_running", "gauge", "Requests admitted to steps.", r->running);
  scalar(o, "sparsecp_kv_blocks_total", "gauge", "Virtual KV blocks of the pool.",
         r->blocks_total);
  scalar(o, "sparsecp_kv_blocks_in_use", "gauge", "Virtual KV blocks held by requests.",
         (double)(r->blocks_total - r->blocks_free));
  header(o, "sparsecp_scheduler_requests_total", "counter",
         "Requests the scheduler admitted, and how those it held ended.");
  put(o, "sparsecp_scheduler_requests_total{event=\"admitted\"} %llu\n",
      (unsigned long long)r->admitted);
  put(o, "sparsecp_scheduler_requests_total{event=\"finished\"} %llu\n",
      (unsigned long long)r->finished);
  put(o, "sparsecp_scheduler_requests_total{event=\"canceled\"} %llu\n",
      (unsigned long long)r->canceled);
  put(o, "sparsecp_scheduler_requests_total{event=\"failed\"} %llu\n",
      (unsigned long long)r->failed);
  scalar(o, "sparsecp_steps_total", "counter", "Steps finished on every rank.",
         (double)r->steps);
  scalar(o, "sparsecp_step_aborts_total", "counter", "Steps aborted (any cause).",
         (double)r->steps_failed);
  scalar(o, "sparsecp_desyncs_refused_total", "counter",
         "Steps refused because a rank's collectives did not match the plan.",
         (double)r->desyncs);
  if (r->step_buckets.n == SC_HIST_N + 1)
    histogram(o, "sparsecp_step_seconds", "From a step's start to its result.",
              r->step_buckets.v, r->step_seconds_sum);
  const uint32_t np = r->purpose_colls.n < r->purpose_bytes.n ? r->purpose_colls.n
                                                                : r->purpose_bytes.n;
  header(o, "sparsecp_planned_collectives_total", "counter",
         "Collectives in the plans of started steps, by purpose.");
  for (uint32_t i = 0; i < np && i < SC_PURPOSE_COUNT; i++)
    put(o, "sparsecp_planned_collectives_total{purpose=\"%s\"} %llu\n",
        sc_coll_purpose_name((int)i), (unsigned long long)r->purpose_colls.v[i]);
  header(o, "sparsecp_planned_collective_bytes_total", "counter",
         "Bytes of one rank's blocks in those collectives, by purpose.");
  for (uint32_t i = 0; i < np && i < SC_PURPOSE_COUNT; i++)
    put(o, "sparsecp_planned_collective_bytes_total{purpose=\"%s\"} %llu\n",
        sc_coll_purpose_name((int)i), (unsigned long long)r->purpose_bytes.v[i]);
  header(o, "sparsecp_step_stage_seconds_total", "counter",
         "Time of rank 0's steps by stage, when the pipeline profiles steps (\"profile\").");
  for (uint32_t i = 0; i < r->stage_ns.n && i < SC_STAGE_COUNT; i++)
    put(o, "sparsecp_step_stage_seconds_total{stage=\"%s\"} %.9f\n", sc_stage_name((int)i),
        (double)r->stage_ns.v[i] * 1e-9);
  if (r->device_ns.n == SC_DEVICE_COUNT + 1) { /* (0 until a step is measured: see steps) */
    header(o, "sparsecp_step_device_busy_seconds_total", "counter",
           "Time rank 0's device ran the profiled steps' kernels, copies and sets.");
    put(o, "sparsecp_step_device_busy_seconds_total %.9f\n",
        (double)r->device_ns.v[SC_DEVICE_BUSY_NS] * 1e-9);
    header(o, "sparsecp_step_device_span_seconds_total", "counter",
           "Their first start to last end, summed over those steps.");
    put(o, "sparsecp_step_device_span_seconds_total %.9f\n",
        (double)r->device_ns.v[SC_DEVICE_SPAN_NS] * 1e-9);
    header(o, "sparsecp_step_device_ops_total", "counter",
           "Kernels, copies and sets rank 0's device ran in those steps.");
    put(o, "sparsecp_step_device_ops_total %llu\n",
        (unsigned long long)r->device_ns.v[SC_DEVICE_OPS]);
    header(o, "sparsecp_step_device_idle_before_seconds_total", "counter",
           "Time rank 0's device sat idle before those steps' first op, since the step "
           "before's last.");
    put(o, "sparsecp_step_device_idle_before_seconds_total %.9f\n",
        (double)r->device_ns.v[SC_DEVICE_IDLE_BEFORE_NS] * 1e-9);
    header(o, "sparsecp_step_device_steps_total", "counter",
           "Profiled steps whose device activity was measured.");
    put(o, "sparsecp_step_device_steps_total %llu\n",
        (unsigned long long)r->device_ns.v[SC_DEVICE_COUNT]);
  }
}

int sc_gw_metrics_render(sc_buf *b, const sc_gw_counters *g, const sc_msg_stats_report *r) {
  out o = {.b = b};
  gateway_part(&o, g);
  if (r) scheduler_part(&o, r);
  return o.rc;
}
