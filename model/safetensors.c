/* safetensors.c - the safetensors reader and writer (see safetensors.h). */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/bf16.h"

static const struct {
  const char *name;
  int dtype;
  size_t size;
} DTYPES[] = {{"F32", SC_ST_F32, 4}, {"BF16", SC_ST_BF16, 2}, {"F8_E4M3", SC_ST_F8_E4M3, 1}};

size_t sc_st_dtype_size(int dtype) {
  for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
    if (DTYPES[i].dtype == dtype) return DTYPES[i].size;
  return 0;
}

const char *sc_st_dtype_name(int dtype) {
  for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
    if (DTYPES[i].dtype == dtype) return DTYPES[i].name;
  return "?";
}

static void free_entries(sc_st_file *f) {
  for (int32_t i = 0; i < f->num; i++) free(f->t[i].name);
  free(f->t);
  f->t = NULL;
  f->num = 0;
}

static int parse_entry(const char *name, json_t *e, uint64_t data_size, sc_st_tensor *t,
                       sc_diag *d) {
  if (strlen(name) == 0 || strlen(name) > SC_ST_MAX_NAME)
    return sc_fail(d, SC_EINVAL, "safetensors: tensor name \"%.40s\" must have 1..%d bytes",
                   name, SC_ST_MAX_NAME);
  if (!json_is_object(e))
    return sc_fail(d, SC_EINVAL, "safetensors: tensor \"%s\": entry must be an object", name);
  const char *key;
  json_t *v;
  json_object_foreach(e, key, v) {
    if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
      return sc_fail(d, SC_EINVAL, "safetensors: tensor \"%s\": unknown field \"%s\"", name,
                     key);
  }
  json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
         *off = json_object_get(e, "data_offsets");
  if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off))
    return sc_fail(d, SC_EINVAL,
                   "safetensors: tensor \"%s\" needs \"dtype\" (string), \"shape\" and "
                   "\"data_offsets\" (arrays)",
                   name);
  const char *dts = json_string_value(dt);
  t->dtype = -1;
  for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
    if (!strcmp(dts, DTYPES[i].name)) t->dtype = DTYPES[i].dtype;
  if (t->dtype < 0)
    return sc_fail(d, SC_ENOTSUP,
                   "safetensors: tensor \"%s\" has dtype %.16s; supported are F32, BF16 and "
                   "F8_E4M3",
                   name, dts);
  const size_t esz = sc_st_dtype_size(t->dtype);
  const size_t nd = json_array_size(sh);
  if (nd > SC_ST_MAX_DIMS)
    return sc_fail(d, SC_EINVAL, "safetensors: tensor \"%s\" has %zu dimensions (at most %d)",
                   name, nd, SC_ST_MAX_DIMS);
  t->ndim = (int)nd;
  uint64_t numel = 1;
  for (size_t i = 0; i < nd; i++) {
    json_t *x = json_array_get(sh, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0)
      return sc_fail(d, SC_EINVAL, "safetensors: tensor \"%s\": shape[%zu] must be an integer >= 0",
                     name, i);
    t->shape[i] = json_integer_value(x);
    if (t->shape[i] != 0 && numel > (UINT64_MAX / 4) / (uint64_t)t->shape[i])
      return sc_fail(d, SC_EINVAL, "safetensors: tensor \"%s\": shape overflows", name);
    numel *= (uint64_t)t->shape[i];
  }
  if (json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
      !json_is_integer(json_array_get(off, 1)) || json_integer_value(json_array_get(off, 0)) < 0 ||
      json_integer_value(json_array_get(off, 1)) < 0)
    return sc_fail(d, SC_EINVAL,
                   "safetensors: tensor \"%s\": data_offsets must be two integers >= 0", name);
  t->begin = (uint64_t)json_integer_value(json_array_get(off, 0));
  t->end = (uint64_t)json_integer_value(json_array_get(off, 1));
  if (t->begin > t->end || t->end > data_size)
    return sc_fail(d, SC_EINVAL,
                   "safetensors: tensor \"%s\": data_offsets [%llu, %llu] lie outside the "
                   "data section of %llu bytes",
                   name, (unsigned long long)t->begin, (unsigned long long)t->end,
                   (unsigned long long)data_size);
  if (t->end - t->begin != numel * esz)
    return sc_fail(d, SC_EINVAL,
                   "safetensors: tensor \"%s\": shape needs %llu bytes but data_offsets "
                   "span %llu",
                   name, (unsigned long long)(numel * esz),
                   (unsigned long long)(t->end - t->begin));
  if ((t->name = strdup(name)) == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  return 0;
}

static int cmp_begin(const void *a, const void *b) {
  const sc_st_tensor *x = *(const sc_st_tensor *const *)a, *y = *(const sc_st_tensor *const *)b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int check_overlap(sc_st_file *f, sc_diag *d) {
  if (f->num < 2) return 0;
  int rc = 0;
  const sc_st_tensor **s = malloc((size_t)f->num * sizeof *s);
  if (s == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  for (int32_t i = 0; i < f->num; i++) s[i] = &f->t[i];
  qsort(s, (size_t)f->num, sizeof *s, cmp_begin);
  /* Sorted by start, a range overlaps an earlier one iff it starts before the furthest
   * end seen so far; empty tensors occupy nothing. */
  const sc_st_tensor *far = NULL;
  for (int32_t i = 0; i < f->num && rc == 0; i++) {
    if (s[i]->end == s[i]->begin) continue;
    if (far != NULL && s[i]->begin < far->end)
      rc = sc_fail(d, SC_EINVAL,
                   "safetensors: tensors \"%s\" and \"%s\" overlap (bytes %llu..%llu and "
                   "%llu..%llu)",
                   far->name, s[i]->name, (unsigned long long)far->begin,
                   (unsigned long long)far->end, (unsigned long long)s[i]->begin,
                   (unsigned long long)s[i]->end);
    if (far == NULL || s[i]->end > far->end) far = s[i];
  }
  free(s);
  return rc;
}

int sc_st_parse(const uint8_t *buf, size_t size, sc_st_file *f, sc_diag *d) {
  memset(f, 0, sizeof *f);
  if (size < 8)
    return sc_fail(d, SC_EINVAL, "safetensors: file of %zu bytes is shorter than the 8-byte "
                   "header length", size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
  if (n > SC_ST_MAX_HEADER)
    return sc_fail(d, SC_ETOOBIG, "safetensors: header of %llu bytes exceeds the limit of %u",
                   (unsigned long long)n, SC_ST_MAX_HEADER);
  if (n > size - 8)
    return sc_fail(d, SC_EINVAL,
                   "safetensors: header length %llu runs past the end of the file (%zu bytes)",
                   (unsigned long long)n, size);
  if (n < 2 || buf[8] != '{')
    return sc_fail(d, SC_EINVAL, "safetensors: the header must be a JSON object");
  json_error_t jerr;
  json_t *root = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return sc_fail(d, SC_EINVAL, "safetensors: header JSON invalid at column %d: %s",
                   jerr.column, jerr.text);
  int rc = 0;
  if (!json_is_object(root)) {
    rc = sc_fail(d, SC_EINVAL, "safetensors: the header must be a JSON object");
    goto out;
  }
  f->data = buf + 8 + n;
  f->data_size = size - 8 - n;
  f->t = calloc(json_object_size(root) + 1, sizeof *f->t);
  if (f->t == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto out;
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (!strcmp(key, "__metadata__")) {
      const char *mk;
      json_t *mv;
      if (!json_is_object(v)) {
        rc = sc_fail(d, SC_EINVAL, "safetensors: __metadata__ must be an object");
        goto out;
      }
      json_object_foreach(v, mk, mv) {
        if (!json_is_string(mv)) {
          rc = sc_fail(d, SC_EINVAL, "safetensors: __metadata__ value \"%.40s\" must be a string",
                       mk);
          goto out;
        }
      }
      continue;
    }
    if ((rc = parse_entry(key, v, f->data_size, &f->t[f->num], d))) goto out;
    f->num++;
  }
  rc = check_overlap(f, d);
out:
  json_decref(root);
  if (rc) free_entries(f);
  return rc;
}

int sc_st_open(const char *path, sc_st_file *f, sc_diag *d) {
  memset(f, 0, sizeof *f);
  int rc = 0;
  const int fd = open(path, O_RDONLY);
  if (fd < 0) {
    const int e = errno;
    return sc_fail(d, e == ENOENT || e == ENOTDIR ? SC_ENOENT : SC_EIO,
                   "safetensors: cannot open %s: %s", path, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    rc = sc_fail(d, SC_EIO, "safetensors: %s is not a regular file", path);
    goto out;
  }
  const size_t size = (size_t)st.st_size;
  uint8_t *map = NULL;
  if (size > 0) {
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      rc = sc_fail(d, SC_EIO, "safetensors: cannot map %s", path);
      goto out;
    }
  }
  static const uint8_t empty[1];
  if ((rc = sc_st_parse(map ? map : empty, size, f, d))) {
    if (map) munmap(map, size);
    goto out;
  }
  f->map = map;
  f->map_size = size;
out:
  close(fd);
  return rc;
}

void sc_st_close(sc_st_file *f) {
  free_entries(f);
  if (f->map) munmap(f->map, f->map_size);
  memset(f, 0, sizeof *f);
}

const sc_st_tensor *sc_st_find(const sc_st_file *f, const char *name) {
  for (int32_t i = 0; i < f->num; i++)
    if (!strcmp(f->t[i].name, name)) return &f->t[i];
  return NULL;
}

int sc_st_read_f32(const sc_st_file *f, const sc_st_tensor *t, int64_t row0, int64_t nrows,
                   int64_t col0, int64_t ncols, float *out) {
  const int64_t numel = sc_st_numel(t);
  const int64_t rows = t->ndim >= 2 ? t->shape[0] : 1;
  const int64_t cols = t->ndim >= 2 ? (rows ? numel / rows : 0) : numel;
  if (row0 < 0 || nrows < 0 || col0 < 0 || ncols < 0 || row0 > rows || nrows > rows - row0 ||
      col0 > cols || ncols > cols - col0)
    return SC_ERANGE;
  if (t->dtype == SC_ST_F8_E4M3) return SC_ENOTSUP;
  const uint8_t *base = f->data + t->begin;
  for (int64_t r = 0; r < nrows; r++) {
    const int64_t e0 = (row0 + r) * cols + col0;
    float *o = out + r * ncols;
    if (t->dtype == SC_ST_F32) {
      memcpy(o, base + e0 * 4, (size_t)ncols * 4); /* little-endian hosts only */
    } else {
      for (int64_t c = 0; c < ncols; c++) {
        const uint8_t *p = base + (e0 + c) * 2;
        o[c] = sc_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
      }
    }
  }
  return 0;
}

int sc_st_write(const char *path, const sc_st_out *t, int32_t num, sc_st_fill_fn fill,
                void *ud, sc_diag *d) {
  return sc_st_write_meta(path, t, num, fill, ud, NULL, d);
}

int sc_st_write_meta(const char *path, const sc_st_out *t, int32_t num, sc_st_fill_fn fill,
                     void *ud, const char *const *meta, sc_diag *d) {
  int rc = 0;
  json_t *root = json_object();
  char *hdr = NULL;
  void *buf = NULL;
  FILE *fp = NULL;
  if (root == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  if (meta != NULL && meta[0] != NULL) {
    json_t *m = json_object();
    for (int i = 0; m != NULL && meta[i] != NULL && meta[i + 1] != NULL; i += 2)
      if (json_object_set_new(m, meta[i], json_string(meta[i + 1])) != 0) {
        json_decref(m);
        m = NULL;
      }
    if (m == NULL || json_object_set_new(root, "__metadata__", m) != 0) {
      rc = sc_fail(d, SC_ENOMEM, "out of memory building the safetensors header");
      goto out;
    }
  }
  uint64_t off = 0, max_bytes = 0;
  for (int32_t i = 0; i < num; i++) {
    if (sc_st_dtype_size(t[i].dtype) == 0) {
      rc = sc_fail(d, SC_EINVAL, "tensor \"%s\": unknown safetensors dtype %d", t[i].name,
                   t[i].dtype);
      goto out;
    }
    uint64_t bytes = sc_st_dtype_size(t[i].dtype);
    for (int k = 0; k < t[i].ndim; k++) bytes *= (uint64_t)t[i].shape[k];
    json_t *sh = json_array();
    for (int k = 0; k < t[i].ndim; k++) json_array_append_new(sh, json_integer(t[i].shape[k]));
    json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", sc_st_dtype_name(t[i].dtype),
                          "shape", sh, "data_offsets", (json_int_t)off,
                          (json_int_t)(off + bytes));
    if (e == NULL || json_object_set_new(root, t[i].name, e) != 0) {
      rc = sc_fail(d, SC_ENOMEM, "out of memory building the safetensors header");
      goto out;
    }
    off += bytes;
    if (bytes > max_bytes) max_bytes = bytes;
  }
  hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (hdr == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory building the safetensors header");
    goto out;
  }
  const size_t hlen = strlen(hdr), padded = (hlen + 7) / 8 * 8;
  if ((buf = malloc(max_bytes > padded ? max_bytes : padded)) == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory writing %s", path);
    goto out;
  }
  if ((fp = fopen(path, "wb")) == NULL) {
    rc = sc_fail(d, SC_EIO, "cannot create %s", path);
    goto out;
  }
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
  memcpy(buf, hdr, hlen);
  memset((char *)buf + hlen, ' ', padded - hlen);
  if (fwrite(len8, 1, 8, fp) != 8 || fwrite(buf, 1, padded, fp) != padded) {
    rc = sc_fail(d, SC_EIO, "cannot write %s", path);
    goto out;
  }
  for (int32_t i = 0; i < num; i++) {
    json_t *e = json_object_get(root, t[i].name);
    const json_t *o = json_object_get(e, "data_offsets");
    const size_t bytes = (size_t)(json_integer_value(json_array_get(o, 1)) -
                                  json_integer_value(json_array_get(o, 0)));
    if ((rc = fill(ud, i, buf))) {
      sc_fail(d, rc, "cannot produce tensor \"%s\": %s", t[i].name, sc_strerror(rc));
      goto out;
    }
    if (fwrite(buf, 1, bytes, fp) != bytes) {
      rc = sc_fail(d, SC_EIO, "cannot write %s", path);
      goto out;
    }
  }
  if (fclose(fp) != 0) {
    fp = NULL;
    rc = sc_fail(d, SC_EIO, "cannot write %s", path);
    goto out;
  }
  fp = NULL;
out:
  if (fp) fclose(fp);
  free(buf);
  free(hdr);
  json_decref(root);
  return rc;
}
