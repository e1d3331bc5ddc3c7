/* dcp.h - DCP ownership of KV positions and their cache slots (SPEC.md §4), as inline
 * pure functions.
 *
 * Position p of a request lives on DCP rank owner(p) = (p / I) % N at local index
 * j(p) = (p / (N*I)) * I + p % I. All arguments are non-negative; n, il >= 1. Block
 * tables hold virtual blocks of B*N positions (model/kv_cache.h): local index j lies in
 * slot table[j / B] * B + j % B.
 * Any thread; also device code (SC_HOSTDEV: the CUDA top-K maps use them).
 */
#ifndef SC_DCP_H
#define SC_DCP_H

#include <stdint.h>

#include "base/hostdev.h"

SC_HOSTDEV int32_t sc_dcp_owner(int64_t p, int32_t n, int32_t il) {
  return (int32_t)((p / il) % n);
}

SC_HOSTDEV int64_t sc_dcp_local_index(int64_t p, int32_t n, int32_t il) {
  return (p / ((int64_t)n * il)) * il + p % il;
}

/* The position of rank r's local index j: the inverse of sc_dcp_local_index. */
SC_HOSTDEV int64_t sc_dcp_position(int64_t j, int32_t n, int32_t il, int32_t r) {
  return (j / il) * n * (int64_t)il + (int64_t)r * il + j % il;
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

/* Slot of this rank's local index j of a request with block-table row bt ([nblocks]):
 * -1 when the block is missing. */
static inline int64_t sc_kv_slot_local(const int32_t *bt, int32_t nblocks, int64_t j,
                                       int32_t block_size) {
  const int64_t v = j / block_size;
  if (v >= nblocks || bt[v] < 0) return -1;
  return (int64_t)bt[v] * block_size + j % block_size;
}

/* Slot of position p on DCP rank r (SPEC.md §4), or -1 if r does not own p. */
static inline int64_t sc_kv_slot(const int32_t *bt, int32_t nblocks, int64_t p,
                                 int32_t block_size, int32_t n, int32_t il, int32_t r) {
  if (p < 0 || sc_dcp_owner(p, n, il) != r) return -1;
  return sc_kv_slot_local(bt, nblocks, sc_dcp_local_index(p, n, il), block_size);
}

#endif
