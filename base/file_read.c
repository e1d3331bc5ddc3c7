/* file_read.c - reading a whole file into memory (see file_read.h). */
#include "base/file_read.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sc_file_read(const char *path, size_t limit, char **out, size_t *len, sc_diag *d) {
  assert(limit < SIZE_MAX / 2);
  *out = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    const int e = errno;
    return sc_fail(d, e == ENOENT || e == ENOTDIR ? SC_ENOENT : SC_EIO, "cannot open %s: %s",
                   path, strerror(e));
  }
  int rc = 0;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n == cap) {
      /* one byte past limit tells a file of exactly limit bytes from a longer one */
      if (cap > limit) break;
      size_t want = cap == 0 ? 4096 : 2 * cap;
      if (cap > limit / 2 || want > limit) want = limit + 1;
      char *p = realloc(buf, want + 1);
      if (p == NULL) {
        rc = sc_fail(d, SC_ENOMEM, "out of memory reading %s", path);
        goto out;
      }
      buf = p;
      cap = want;
    }
    const size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    rc = sc_fail(d, SC_EIO, "cannot read %s", path);
  } else if (n > limit) {
    rc = sc_fail(d, SC_ETOOBIG, "%s is larger than %zu bytes", path, limit);
  } else {
    buf[n] = '\0';
    *out = buf;
    *len = n;
    buf = NULL;
  }
out:
  free(buf);
  fclose(f);
  return rc;
}
