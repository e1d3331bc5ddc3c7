/* file_read.h - reading a whole (small) file into memory: config files, JSON indexes.
 *
 * Threads: any; no state. */
#ifndef SC_FILE_READ_H
#define SC_FILE_READ_H

#include <stddef.h>

#include "base/error.h"

/* Reads the file at path, at most limit bytes, into a malloc'd buffer with a NUL after
 * its last byte (*out; free() it) and its length (*len; the text may hold NUL bytes, so
 * parse it by length). Memory grows with the file, not with limit. Errors, each said in
 * d naming path: SC_ENOENT when path does not exist (ENOENT, ENOTDIR), SC_EIO when it
 * cannot be opened otherwise (permissions, too many open files, ...) or read (a folder),
 * SC_ETOOBIG above limit, SC_ENOMEM. On failure *out is NULL and *len 0. limit must be
 * below SIZE_MAX / 2. */
int sc_file_read(const char *path, size_t limit, char **out, size_t *len, sc_diag *d);

#endif
