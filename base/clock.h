/* clock.h - monotonic and wall clocks. Any thread. */
#ifndef SC_CLOCK_H
#define SC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double sc_now_s(void) { return (double)sc_now_ns() * 1e-9; }

/* Wall-clock time (CLOCK_REALTIME): what tap records are stamped with, comparable across
 * processes and hosts. */
static inline uint64_t sc_wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The time `ms` milliseconds from now on `clock`, as pthread_cond_timedwait takes it (the
 * clock must be the one the condition variable waits on: CLOCK_REALTIME by default). */
static inline struct timespec sc_time_after_ms(clockid_t clock, int64_t ms) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

#endif
