#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int g_level = SC_LOG_WARN;
static sc_log_sink g_sink;
static void *g_sink_ud;

static const char *const k_names[] = {"error", "warn", "info", "debug", "trace"};

void sc_log_set_sink(sc_log_sink sink, void *ud) {
  g_sink = sink;
  g_sink_ud = ud;
}

void sc_log_set_level(sc_log_level level) {
  atomic_store_explicit(&g_level, (int)level, memory_order_relaxed);
}

sc_log_level sc_log_get_level(void) {
  return (sc_log_level)atomic_load_explicit(&g_level, memory_order_relaxed);
}

int sc_log_enabled(sc_log_level level) {
  return g_sink != NULL && (int)level <= atomic_load_explicit(&g_level, memory_order_relaxed);
}

int sc_log_level_parse(const char *name) {
  for (int i = 0; i < (int)(sizeof k_names / sizeof k_names[0]); i++)
    if (strcmp(name, k_names[i]) == 0) return i;
  return -1;
}

const char *sc_log_level_name(sc_log_level level) {
  return (unsigned)level < sizeof k_names / sizeof k_names[0] ? k_names[level] : "?";
}

void sc_log_write(sc_log_level level, const char *component, const char *fmt, ...) {
  sc_log_sink sink = g_sink;
  if (sink == NULL) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  sink(g_sink_ud, level, component, msg);
}

void sc_log_stderr_sink(void *ud, sc_log_level level, const char *component,
                        const char *msg) {
  (void)ud;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  /* One fprintf per line: stdio locks the stream, so lines of threads do not mix. */
  fprintf(stderr, "%5ld.%06ld %-5s %s: %s\n", (long)ts.tv_sec, ts.tv_nsec / 1000L,
          sc_log_level_name(level), component, msg);
}

int sc_log_limit_pass(sc_log_limit *l, unsigned long long now_ns, unsigned long long *held) {
  unsigned long long next = atomic_load_explicit(&l->next_ns, memory_order_relaxed);
  /* one thread wins the interval's line; the others count themselves as held back */
  if (now_ns < next || !atomic_compare_exchange_strong_explicit(
                           &l->next_ns, &next, now_ns + SC_LOG_LIMIT_INTERVAL_NS,
                           memory_order_relaxed, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&l->held, 1, memory_order_relaxed);
    return 0;
  }
  *held = atomic_exchange_explicit(&l->held, 0, memory_order_relaxed);
  return 1;
}
