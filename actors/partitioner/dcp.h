/* dcp.h - DCP ownership of KV positions (SPEC.md §4), as inline pure functions.
 *
 * Position p of a request lives on DCP rank owner(p) = (p / I) % N at local index
 * j(p) = (p / (N*I)) * I + p % I. All arguments are non-negative; n, il >= 1.
 * Any thread; also device code (SC_HOSTDEV: the CUDA top-K maps use them).
 */
#ifndef SC_DCP_H
#define SC_DCP_H

#include <stdint.h>

#include "actors/runtime/sc_hostdev.h"

SC_HOSTDEV int32_t sc_dcp_owner(int64_t p, int32_t n, int32_t il) {
  return (int32_t)((p / il) % n);
}

SC_HOSTDEV int64_t sc_dcp_local_index(int64_t p, int32_t n, int32_t il) {
  return (p / ((int64_t)n * il)) * il + p % il;
}

/* Tokens of a request of extent len held by DCP rank r. Rank 0 always holds the most,
 * so local_len(len, 0) is the per-rank upper bound. */
static inline int64_t sc_dcp_local_len(int64_t len, int32_t r, int32_t n, int32_t il) {
  int64_t span = (int64_t)n * il;
  int64_t rem = len % span - (int64_t)r * il;
  if (rem < 0) rem = 0;
  if (rem > il) rem = il;
  return (len / span) * il + rem;
}

/* Virtual KV blocks a request of extent len needs under DCP size n: a virtual block is
 * block_size slots on each of the n ranks. The scheduler reserves with it and the
 * metadata checks block tables with it, so the two cannot disagree. */
static inline int32_t sc_kv_blocks_needed(int64_t len, int32_t block_size, int32_t n) {
  const int64_t span = (int64_t)block_size * n;
  return (int32_t)((len + span - 1) / span);
}

#endif
