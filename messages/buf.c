/* buf.c - growable byte buffer (see buf.h). */
#include "messages/buf.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void sc_buf_init(sc_buf *b) { memset(b, 0, sizeof *b); }

void sc_buf_free(sc_buf *b) {
  free(b->data);
  sc_buf_init(b);
}

int sc_buf_reserve(sc_buf *b, size_t n) {
  if (n <= b->cap - b->len) return 0;
  if (n > SIZE_MAX / 2 - b->len) return SC_ENOMEM;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < n) cap *= 2;
  uint8_t *p = realloc(b->data, cap);
  if (p == NULL) return SC_ENOMEM;
  b->data = p;
  b->cap = cap;
  return 0;
}

void sc_buf_reset(sc_buf *b) { b->len = 0; }

int sc_buf_append(sc_buf *b, const void *p, size_t n) {
  int rc = sc_buf_reserve(b, n);
  if (rc != 0) return rc;
  if (n > 0) memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}
