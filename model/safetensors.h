/* safetensors.h - reading and writing the safetensors format (the real one used by
 * Hugging Face checkpoints): an 8-byte little-endian header length N, N bytes of JSON
 * header {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {string: string}} (possibly padded with spaces), then the raw tensor
 * bytes, offsets relative to the end of the header.
 *
 * The reader trusts nothing: header length within SC_ST_MAX_HEADER and the file, a JSON
 * object of well-formed entries, dtype F32, BF16 or F8_E4M3, shape elements times element size
 * equal to the byte range, ranges inside the data section and not overlapping, names
 * unique and at most SC_ST_MAX_NAME bytes. Every rejection is SC_EINVAL (SC_ENOTSUP for
 * another dtype, SC_ETOOBIG for a header over the limit, SC_EIO for file errors) with a
 * message naming the tensor and the rule.
 *
 * Ownership: sc_st_file owns its parsed entries and, after sc_st_open, the file mapping;
 * sc_st_parse borrows the caller's buffer for the file's lifetime. One thread at a time
 * per sc_st_file; const functions may run concurrently.
 */
#ifndef SC_SAFETENSORS_H
#define SC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "plan/coll_types.h"

#define SC_ST_MAX_HEADER (100u << 20) /* the limit of the reference implementation */
#define SC_ST_MAX_NAME 255
#define SC_ST_MAX_DIMS 8

/* Element types of safetensors files. F32 and BF16 have the values of SC_DT_F32 and
 * SC_DT_BF16 (plan/coll_types.h), so callers that pass those keep working; F8_E4M3 (the
 * e4m3fn format of fp8 checkpoints, model/fp8_block.h) has its own value because it is
 * no element type of a collective (coll_types.h's values are part of the plan's wire
 * format and fingerprint, and the backends accept every value below SC_DT_COUNT). */
typedef enum sc_st_dtype {
  SC_ST_F32 = SC_DT_F32,
  SC_ST_BF16 = SC_DT_BF16,
  SC_ST_F8_E4M3 = 16,
} sc_st_dtype;

/* Bytes per element (0 for an unknown value) and the safetensors name ("F32", "BF16",
 * "F8_E4M3"; "?" for an unknown value). */
size_t sc_st_dtype_size(int dtype);
const char *sc_st_dtype_name(int dtype);

typedef struct sc_st_tensor {
  char *name;
  int dtype; /* sc_st_dtype */
  int ndim;
  int64_t shape[SC_ST_MAX_DIMS];
  uint64_t begin, end; /* byte range within the data section */
} sc_st_tensor;

typedef struct sc_st_file {
  uint8_t *map;    /* the mapped file (sc_st_open) or NULL */
  size_t map_size;
  const uint8_t *data; /* start of the data section */
  uint64_t data_size;
  int32_t num;
  sc_st_tensor *t; /* [num] in header order */
} sc_st_file;

/* Parses a whole file image held in memory (borrowed). */
int sc_st_parse(const uint8_t *buf, size_t size, sc_st_file *f, sc_diag *d);
/* Maps and parses a file: SC_ENOENT when path does not exist, SC_EIO when it cannot be
 * opened otherwise (permissions, ...), is not a regular file or cannot be mapped. */
int sc_st_open(const char *path, sc_st_file *f, sc_diag *d);
void sc_st_close(sc_st_file *f);

const sc_st_tensor *sc_st_find(const sc_st_file *f, const char *name);

static inline int64_t sc_st_numel(const sc_st_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* Reads rows [row0, row0+nrows) x columns [col0, col0+ncols) of the tensor viewed as a
 * matrix (ndim >= 2: [shape[0], numel / shape[0]]; ndim 1: one row of shape[0]; ndim 0:
 * 1 x 1) into out (f32, row-major, ncols wide), converting BF16. SC_ERANGE when the
 * block lies outside the tensor; SC_ENOTSUP for F8_E4M3, whose values mean nothing
 * without their block scales (model/fp8_block.h dequantizes them). */
int sc_st_read_f32(const sc_st_file *f, const sc_st_tensor *t, int64_t row0, int64_t nrows,
                   int64_t col0, int64_t ncols, float *out);

/* One tensor to write: the caller's fill callback produces its bytes (already in dtype,
 * little-endian) into dst, numel * element size bytes. */
typedef struct sc_st_out {
  const char *name;
  int dtype; /* sc_st_dtype */
  int ndim;
  int64_t shape[SC_ST_MAX_DIMS];
} sc_st_out;

typedef int (*sc_st_fill_fn)(void *ud, int32_t index, void *dst);

/* Writes a safetensors file of the given tensors in order (header keys sorted by
 * offset, as the reference writer does; the header is padded to 8 bytes). */
int sc_st_write(const char *path, const sc_st_out *t, int32_t num, sc_st_fill_fn fill,
                void *ud, sc_diag *d);
/* The same with a "__metadata__" object first in the header: meta holds key, value, key,
 * value, ... and a NULL (e.g. {"format", "pt", NULL}, what torch's save_file writes). */
int sc_st_write_meta(const char *path, const sc_st_out *t, int32_t num, sc_st_fill_fn fill,
                     void *ud, const char *const *meta, sc_diag *d);

#endif
