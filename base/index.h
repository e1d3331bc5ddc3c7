/* index.h - a hash index over the caller's array: an open-addressing table (linear
 * probing, kept at most half full) of int32 positions into that array. The caller owns
 * the keys: it hashes them, says how to hash the key at a position (for growing and for
 * deleting), and compares keys itself (sc_index_find's eq). Deleting shifts the entries
 * after it back instead of leaving tombstones, so lookups stay short under churn (the
 * gateway adds and removes a route per request for as long as it runs).
 *
 * Ownership: the table is the index's (sc_index_free). Threads: one at a time. */
#ifndef SC_INDEX_H
#define SC_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sc_index {
  int32_t *slot; /* positions, -1: empty */
  size_t mask;   /* slots - 1 (a power of two) */
  size_t used;
} sc_index;

/* The hash of the key at position pos of the caller's array. */
typedef uint64_t (*sc_index_hash_fn)(const void *ctx, int32_t pos);
/* Whether the key at pos is key. */
typedef bool (*sc_index_eq_fn)(const void *ctx, int32_t pos, const void *key);

/* An empty index with room for expect positions before it grows. 0 or SC_ENOMEM. */
int sc_index_init(sc_index *x, size_t expect);
void sc_index_free(sc_index *x);
/* Adds pos under hash h (pos must not be in the index yet); grows by rehashing every
 * position with hash_of. 0 or SC_ENOMEM (the index is unchanged). */
int sc_index_put(sc_index *x, uint64_t h, int32_t pos, sc_index_hash_fn hash_of,
                 const void *ctx);
/* The position whose key is key (hash h), or -1. */
int32_t sc_index_find(const sc_index *x, uint64_t h, sc_index_eq_fn eq, const void *ctx,
                      const void *key);
/* Removes pos (added under hash h); nothing when it is not there. */
void sc_index_del(sc_index *x, uint64_t h, int32_t pos, sc_index_hash_fn hash_of,
                  const void *ctx);

#endif
