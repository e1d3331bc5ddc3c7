/* kv_cache.h - the paged KV cache of one rank (SPEC.md §4).
 *
 * Storage: per layer, num_blocks * block_size rows ("slots") of width
 * kv_lora_rank + rope_dim + index_dim: the KV row [c_kv ; k_rope] with the indexer key
 * stored alongside, so one KV write and one gather move both. Rows are f32 (the CPU
 * reference) or bf16 (sc_kfmt), in kernel buffers.
 *
 * Addressing: block tables are identical on all DCP ranks. The scheduler allocates
 * *virtual* blocks of B*N token positions; position p of a request lies in virtual
 * block p / (B*N) and, on the DCP rank that owns it, in physical slot
 * table[p / (B*N)] * B + j(p) - (p / (B*N)) * B, where j(p) is its local index. A rank's
 * local index j maps to slot table[j / B] * B + j % B. Positions owned elsewhere have no
 * slot (-1). That arithmetic is plan/dcp.h's (sc_kv_slot, sc_kv_slot_local).
 *
 * Ownership: the cache owns its buffers (free with the context that allocated them).
 * One thread at a time (the rank's executor).
 */
#ifndef SC_KV_CACHE_H
#define SC_KV_CACHE_H

#include <stdint.h>

#include "base/error.h"
#include "kernels/kernels.h"
#include "plan/dcp.h"

typedef struct sc_kv_cache {
  int32_t layers, num_blocks, block_size;
  int32_t width; /* kv_width + index_dim */
  sc_kfmt fmt;
  void **data;   /* [layers] kernel buffers of num_blocks*block_size rows */
} sc_kv_cache;

int sc_kv_cache_create(sc_kernels *k, int32_t layers, int32_t num_blocks, int32_t block_size,
                       int32_t width, sc_kfmt fmt, sc_kv_cache *c, sc_diag *d);
void sc_kv_cache_free(sc_kernels *k, sc_kv_cache *c);

static inline int64_t sc_kv_cache_slots(const sc_kv_cache *c) {
  return (int64_t)c->num_blocks * c->block_size;
}
static inline sc_krows sc_kv_cache_rows(const sc_kv_cache *c, int32_t layer) {
  return (sc_krows){.data = c->data[layer], .fmt = c->fmt, .ld = c->width,
                    .rows = sc_kv_cache_slots(c)};
}

#endif
