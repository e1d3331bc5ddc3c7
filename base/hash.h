/* hash.h - splitmix64's finaliser as a stateless hash: the synthetic weights and the
 * seeded sampler derive their numbers from it, so both stay reproducible from a seed
 * alone, on every rank and in every process. FNV-1a folds bytes (a tensor's name, a
 * client's identity) into a value for it. */
#ifndef SC_HASH_H
#define SC_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t sc_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

#define SC_FNV_OFFSET 0xcbf29ce484222325ull

/* FNV-1a over n bytes at p, continuing from h (SC_FNV_OFFSET to start). */
static inline uint64_t sc_fnv1a(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* The seed of a named tensor (synthetic and generated weights): a name's hash under seed. */
static inline uint64_t sc_hash_name(uint64_t seed, const char *name) {
  return sc_mix64(sc_fnv1a(SC_FNV_OFFSET ^ seed, name, strlen(name)));
}

/* Element i of the stream of a tensor seed, uniform in [-1, 1) (24 bits). */
static inline float sc_hash_pm1(uint64_t tensor_seed, int64_t i) {
  const uint64_t h = sc_mix64(tensor_seed ^ sc_mix64((uint64_t)i));
  return (float)((double)(h >> 40) * (1.0 / 8388608.0) - 1.0);
}

#endif
