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

#endif
