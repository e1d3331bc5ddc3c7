/* jsonw.h - a small streaming JSON writer into a growable buffer.
 *
 * Used wherever sparsecp emits JSON (plan --json, bench --json, tap rendering). It
 * inserts commas itself, escapes strings, and never allocates per value beyond buffer
 * growth, so it can render hot-path messages for taps. Containers nest up to
 * SC_JSONW_MAX_DEPTH; deeper nesting is a programmer error (assert).
 *
 * Ownership: the writer owns its buffer; sc_jsonw_take() hands it to the caller.
 * Threads: one writer per thread.
 */
#ifndef SC_JSONW_H
#define SC_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SC_JSONW_MAX_DEPTH 32

typedef struct sc_jsonw {
  char *buf;
  size_t len, cap;
  int depth;
  bool oom;                            /* sticky: a failed growth poisons the writer */
  bool first[SC_JSONW_MAX_DEPTH + 1];  /* no value written yet at this depth */
  bool after_key;                      /* a key was written; the value needs no comma */
} sc_jsonw;

void sc_jsonw_init(sc_jsonw *w);
void sc_jsonw_reset(sc_jsonw *w); /* empties the buffer, keeps its memory */
void sc_jsonw_free(sc_jsonw *w);
/* Returns 0, or SC_ENOMEM if any write failed since the last reset. */
int sc_jsonw_status(const sc_jsonw *w);
/* NUL-terminated contents (valid until the next write). */
const char *sc_jsonw_str(sc_jsonw *w);

void sc_jsonw_obj_begin(sc_jsonw *w);
void sc_jsonw_obj_end(sc_jsonw *w);
void sc_jsonw_arr_begin(sc_jsonw *w);
void sc_jsonw_arr_end(sc_jsonw *w);
void sc_jsonw_key(sc_jsonw *w, const char *key);
void sc_jsonw_str_val(sc_jsonw *w, const char *s);
void sc_jsonw_strn_val(sc_jsonw *w, const char *s, size_t n);
void sc_jsonw_int(sc_jsonw *w, int64_t v);
void sc_jsonw_uint(sc_jsonw *w, uint64_t v);
/* Non-finite doubles are written as null (JSON has no NaN or Infinity). */
void sc_jsonw_double(sc_jsonw *w, double v);
void sc_jsonw_bool(sc_jsonw *w, bool v);
void sc_jsonw_null(sc_jsonw *w);
/* Inserts already-valid JSON text as one value. */
void sc_jsonw_raw(sc_jsonw *w, const char *json, size_t n);

/* key + value shorthands for objects */
void sc_jsonw_kv_int(sc_jsonw *w, const char *key, int64_t v);
void sc_jsonw_kv_str(sc_jsonw *w, const char *key, const char *s);
void sc_jsonw_kv_double(sc_jsonw *w, const char *key, double v);
void sc_jsonw_kv_bool(sc_jsonw *w, const char *key, bool v);
/* An array of int32 values, written compactly. */
void sc_jsonw_int32_array(sc_jsonw *w, const int32_t *v, size_t n);

#endif
