/* grow.h - a heap buffer grown to at least a size, its contents kept (realloc), and kept
 * at its largest: the scratch of a loop whose sizes vary from one pass to the next. */
#ifndef SC_GROW_H
#define SC_GROW_H

#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"

/* *buf holds at least `bytes` (*cap: what it holds); 0 or SC_ENOMEM (then *buf and *cap
 * are as they were). */
static inline int sc_grow(void **buf, size_t *cap, size_t bytes) {
  if (bytes <= *cap) return 0;
  void *p = realloc(*buf, bytes);
  if (p == NULL) return SC_ENOMEM;
  *buf = p;
  *cap = bytes;
  return 0;
}

/* The same counted in elements of sz bytes (*cap in elements; room for one at least);
 * SC_ENOMEM also when n * sz does not fit a size_t. */
static inline int sc_grow_n(void **buf, size_t *cap, size_t n, size_t sz) {
  if (n <= *cap) return 0;
  if (sz != 0 && n > SIZE_MAX / sz) return SC_ENOMEM;
  void *p = realloc(*buf, (n ? n : 1) * sz);
  if (p == NULL) return SC_ENOMEM;
  *buf = p;
  *cap = n;
  return 0;
}

#endif
