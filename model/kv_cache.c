/* kv_cache.c - allocation of the paged KV cache (see kv_cache.h). */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>

void sc_kv_cache_free(sc_kernels *k, sc_kv_cache *c) {
  if (c->data != NULL)
    for (int32_t l = 0; l < c->layers; l++)
      if (c->data[l]) k->ops->free(k, c->data[l]);
  free(c->data);
  memset(c, 0, sizeof *c);
}

int sc_kv_cache_create(sc_kernels *k, int32_t layers, int32_t num_blocks, int32_t block_size,
                       int32_t width, sc_kfmt fmt, sc_kv_cache *c, sc_diag *d) {
  memset(c, 0, sizeof *c);
  if (layers < 1 || num_blocks < 1 || block_size < 1 || width < 1)
    return sc_fail(d, SC_EINVAL,
                   "kv cache: layers (%d), blocks (%d), block size (%d) and width (%d) must "
                   "be >= 1",
                   layers, num_blocks, block_size, width);
  if (sc_kfmt_size(fmt) == 0) return sc_fail(d, SC_EINVAL, "kv cache: unknown row format %d", fmt);
  const int64_t slots = (int64_t)num_blocks * block_size;
  if (slots > INT32_MAX)
    return sc_fail(d, SC_ERANGE, "kv cache: %lld slots do not fit 32-bit slot indices",
                   (long long)slots);
  c->layers = layers;
  c->num_blocks = num_blocks;
  c->block_size = block_size;
  c->width = width;
  c->fmt = fmt;
  int rc = 0;
  if ((c->data = calloc((size_t)layers, sizeof *c->data)) == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto fail;
  }
  const size_t bytes = (size_t)slots * (size_t)width * sc_kfmt_size(fmt);
  for (int32_t l = 0; l < layers; l++) {
    if ((rc = k->ops->alloc(k, bytes, &c->data[l]))) {
      sc_fail(d, rc, "kv cache: cannot allocate %zu bytes for layer %d", bytes, l);
      goto fail;
    }
    /* Never-written slots are never read, but zeros keep a stray read deterministic. */
    if ((rc = k->ops->memset(k, c->data[l], 0, bytes))) goto fail;
  }
  return 0;
fail:
  sc_kv_cache_free(k, c);
  return rc;
}
