/* kv_cache.c - allocation of the paged KV cache (see kv_cache.h). */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>

static void free_layers(sc_kernels *k, int32_t layers, void **bufs) {
  if (bufs != NULL)
    for (int32_t l = 0; l < layers; l++)
      if (bufs[l]) k->ops->free(k, bufs[l]);
  free(bufs);
}

void sc_kv_cache_free(sc_kernels *k, sc_kv_cache *c) {
  free_layers(k, c->layers, c->data);
  free_layers(k, c->layers, c->index);
  memset(c, 0, sizeof *c);
}

/* bufs[l] = `bytes` zeroed bytes for every layer (bufs allocated here). Never-written
 * slots are never read, but zeros keep a stray read deterministic. */
static int alloc_layers(sc_kernels *k, int32_t layers, size_t bytes, void ***bufs,
                        const char *what, sc_diag *d) {
  if ((*bufs = calloc((size_t)layers, sizeof **bufs)) == NULL)
    return sc_fail(d, SC_ENOMEM, "out of memory");
  int rc;
  for (int32_t l = 0; l < layers; l++) {
    if ((rc = k->ops->alloc(k, bytes, &(*bufs)[l])))
      return sc_fail(d, rc, "kv cache: cannot allocate %zu bytes of %s for layer %d", bytes,
                     what, l);
    if ((rc = k->ops->memset(k, (*bufs)[l], 0, bytes)))
      return sc_fail(d, rc, "kv cache: cannot clear layer %d's %s", l, what);
  }
  return 0;
}

int sc_kv_cache_create(sc_kernels *k, int32_t layers, int32_t num_blocks, int32_t block_size,
                       int32_t width, int32_t index_dim, sc_kfmt fmt, sc_kfmt index_fmt,
                       sc_kv_cache *c, sc_diag *d) {
  memset(c, 0, sizeof *c);
  if (layers < 1 || num_blocks < 1 || block_size < 1 || width < 1)
    return sc_fail(d, SC_EINVAL,
                   "kv cache: layers (%d), blocks (%d), block size (%d) and width (%d) must "
                   "be >= 1",
                   layers, num_blocks, block_size, width);
  if (index_dim < 0 || index_dim >= width)
    return sc_fail(d, SC_EINVAL, "kv cache: index_dim %d must be in [0, width %d)", index_dim,
                   width);
  const bool fp8_rows = fmt == SC_KFMT_FP8_DS_MLA;
  if (sc_kfmt_size(fmt) == 0 && !fp8_rows)
    return sc_fail(d, SC_EINVAL, "kv cache: unknown row format %d", fmt);
  const bool apart = index_fmt == SC_KFMT_FP8_INDEX;
  if (fp8_rows && (!apart || width - index_dim != SC_KFP8_DS_MLA_NOPE + SC_KFP8_DS_MLA_ROPE))
    return sc_fail(d, SC_EINVAL, "kv cache: fp8_ds_mla rows hold 576 KV values (%d here) and "
                   "their index keys apart in fp8_index rows", width - index_dim);
  if (!apart && index_fmt != fmt)
    return sc_fail(d, SC_EINVAL, "kv cache: index keys in format %d: the KV rows' (%d) or "
                   "fp8_index", index_fmt, fmt);
  if (apart && index_dim < 1)
    return sc_fail(d, SC_EINVAL, "kv cache: fp8 index keys need an index_dim");
  const int64_t slots = (int64_t)num_blocks * block_size;
  if (slots > INT32_MAX)
    return sc_fail(d, SC_ERANGE, "kv cache: %lld slots do not fit 32-bit slot indices",
                   (long long)slots);
  c->layers = layers;
  c->num_blocks = num_blocks;
  c->block_size = block_size;
  c->width = width;
  c->index_dim = index_dim;
  c->fmt = fmt;
  c->index_fmt = index_fmt;
  const int64_t row_bytes = sc_kfmt_row_bytes(fmt, apart ? width - index_dim : width);
  int rc = alloc_layers(k, layers, (size_t)slots * (size_t)row_bytes, &c->data, "KV rows", d);
  if (rc == 0 && apart)
    rc = alloc_layers(k, layers, (size_t)slots * (size_t)SC_KFP8_INDEX_ROW_STEP(index_dim),
                      &c->index, "index keys", d);
  if (rc) sc_kv_cache_free(k, c);
  return rc;
}
