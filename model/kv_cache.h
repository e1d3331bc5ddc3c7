/* kv_cache.h - the paged KV cache of one rank (SPEC.md §4).
 *
 * Storage: per layer, num_blocks * block_size rows ("slots"): the KV row [c_kv ; k_rope]
 * (kv_lora_rank + rope_dim values) and the indexer key (index_dim values). By default the
 * key is stored in the KV row after its values, in its format (f32 for the CPU reference,
 * or bf16), so one KV write and one gather move both. With fp8 index keys (index_fmt
 * SC_KFMT_FP8_INDEX, DeepSeek-V3.2's: e4m3 values and a power-of-two scale a key,
 * kernels.h) the keys live apart, in rows of their own (SC_KFP8_INDEX_ROW_STEP apart: 144
 * bytes at index_dim 128, of which a decode step's indexer reads 132 where it reads 256
 * of a bf16 key), and every reader sees the same quantized key (a DCP prefill copies the
 * rows into its workspace). KV rows in fp8_ds_mla (DeepSeek-V3.2's KV cache: 656 bytes a
 * row where bf16 takes 1152, kernels.h) hold only the 576 KV values, so their keys live
 * apart, always in fp8_index rows.
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

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "kernels/kernels.h"
#include "plan/dcp.h"

typedef struct sc_kv_cache {
  int32_t layers, num_blocks, block_size;
  int32_t width;     /* kv_width + index_dim: a token's values in a layer */
  int32_t index_dim; /* the last index_dim of them: its indexer key */
  sc_kfmt fmt;       /* the KV values' format: f32, bf16 or fp8_ds_mla */
  sc_kfmt index_fmt; /* the keys': fmt (in data's rows) or SC_KFMT_FP8_INDEX (in index) */
  void **data;       /* [layers] kernel buffers of num_blocks*block_size rows */
  void **index;      /* [layers] fp8_index key rows; NULL when the keys are in data */
} sc_kv_cache;

/* index_fmt: fmt, or SC_KFMT_FP8_INDEX for keys apart (the only choice of fp8_ds_mla
 * rows, whose width - index_dim must be their 576). */
int sc_kv_cache_create(sc_kernels *k, int32_t layers, int32_t num_blocks, int32_t block_size,
                       int32_t width, int32_t index_dim, sc_kfmt fmt, sc_kfmt index_fmt,
                       sc_kv_cache *c, sc_diag *d);
void sc_kv_cache_free(sc_kernels *k, sc_kv_cache *c);

static inline int64_t sc_kv_cache_slots(const sc_kv_cache *c) {
  return (int64_t)c->num_blocks * c->block_size;
}
/* Whether the keys are in rows of their own (index), not in the KV rows. */
static inline bool sc_kv_cache_keys_apart(const sc_kv_cache *c) { return c->index != NULL; }
/* A layer's rows in data: the KV values, then the key's unless they are apart. */
static inline sc_krows sc_kv_cache_rows(const sc_kv_cache *c, int32_t layer) {
  const int64_t values = sc_kv_cache_keys_apart(c) ? c->width - c->index_dim : c->width;
  const int64_t ld = sc_kfmt_bytes(c->fmt) ? sc_kfmt_row_bytes(c->fmt, values) : values;
  return (sc_krows){.data = c->data[layer], .fmt = c->fmt, .ld = ld,
                    .rows = sc_kv_cache_slots(c)};
}
/* A layer's indexer keys: the last index_dim values of its rows, or its key rows. */
static inline sc_krows sc_kv_cache_keys(const sc_kv_cache *c, int32_t layer) {
  if (!sc_kv_cache_keys_apart(c))
    return sc_krows_col(sc_kv_cache_rows(c, layer), c->width - c->index_dim);
  return (sc_krows){.data = c->index[layer], .fmt = SC_KFMT_FP8_INDEX,
                    .ld = SC_KFP8_INDEX_ROW_STEP(c->index_dim), .rows = sc_kv_cache_slots(c)};
}

#endif
