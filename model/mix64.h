/* mix64.h - splitmix64's finaliser as a stateless hash: the synthetic weights and the
 * seeded sampler derive their numbers from it, so both stay reproducible from a seed
 * alone, on every rank and in every process. */
#ifndef SC_MIX64_H
#define SC_MIX64_H

#include <stdint.h>

static inline uint64_t sc_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

#endif
