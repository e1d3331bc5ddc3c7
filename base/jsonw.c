#include "base/jsonw.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void sc_jsonw_init(sc_jsonw *w) {
  memset(w, 0, sizeof *w);
  w->first[0] = true;
}

void sc_jsonw_reset(sc_jsonw *w) {
  w->len = 0;
  w->depth = 0;
  w->oom = false;
  w->after_key = false;
  w->first[0] = true;
  if (w->buf) w->buf[0] = '\0';
}

void sc_jsonw_free(sc_jsonw *w) {
  free(w->buf);
  sc_jsonw_init(w);
}

int sc_jsonw_status(const sc_jsonw *w) { return w->oom ? SC_ENOMEM : 0; }

const char *sc_jsonw_str(sc_jsonw *w) { return w->buf ? w->buf : ""; }

static bool reserve(sc_jsonw *w, size_t extra) {
  if (w->oom) return false;
  if (w->len + extra + 1 <= w->cap) return true;
  size_t cap = w->cap ? w->cap : 256;
  while (cap < w->len + extra + 1) cap *= 2;
  char *nb = realloc(w->buf, cap);
  if (nb == NULL) {
    w->oom = true;
    return false;
  }
  w->buf = nb;
  w->cap = cap;
  return true;
}

static void put(sc_jsonw *w, const char *s, size_t n) {
  if (!reserve(w, n)) return;
  memcpy(w->buf + w->len, s, n);
  w->len += n;
  w->buf[w->len] = '\0';
}

/* Comma handling: every value or key calls this first. */
static void sep(sc_jsonw *w) {
  if (w->after_key) {
    w->after_key = false;
    return;
  }
  if (!w->first[w->depth]) put(w, ",", 1);
  w->first[w->depth] = false;
}

static void open(sc_jsonw *w, char c) {
  sep(w);
  put(w, &c, 1);
  assert(w->depth < SC_JSONW_MAX_DEPTH);
  w->depth++;
  w->first[w->depth] = true;
}

static void close_(sc_jsonw *w, char c) {
  assert(w->depth > 0);
  w->depth--;
  put(w, &c, 1);
}

void sc_jsonw_obj_begin(sc_jsonw *w) { open(w, '{'); }
void sc_jsonw_obj_end(sc_jsonw *w) { close_(w, '}'); }
void sc_jsonw_arr_begin(sc_jsonw *w) { open(w, '['); }
void sc_jsonw_arr_end(sc_jsonw *w) { close_(w, ']'); }

static void put_escaped(sc_jsonw *w, const char *s, size_t n) {
  put(w, "\"", 1);
  size_t run = 0; /* bytes that need no escaping are copied in runs */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') {
      run++;
      continue;
    }
    put(w, s + i - run, run);
    run = 0;
    char esc[8];
    switch (c) {
    case '"': put(w, "\\\"", 2); break;
    case '\\': put(w, "\\\\", 2); break;
    case '\n': put(w, "\\n", 2); break;
    case '\r': put(w, "\\r", 2); break;
    case '\t': put(w, "\\t", 2); break;
    default:
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(w, esc, 6);
    }
  }
  put(w, s + n - run, run);
  put(w, "\"", 1);
}

void sc_jsonw_key(sc_jsonw *w, const char *key) {
  sep(w);
  put_escaped(w, key, strlen(key));
  put(w, ":", 1);
  w->after_key = true;
}

void sc_jsonw_strn_val(sc_jsonw *w, const char *s, size_t n) {
  sep(w);
  put_escaped(w, s, n);
}

void sc_jsonw_str_val(sc_jsonw *w, const char *s) {
  if (s == NULL) {
    sc_jsonw_null(w);
    return;
  }
  sc_jsonw_strn_val(w, s, strlen(s));
}

void sc_jsonw_int(sc_jsonw *w, int64_t v) {
  char tmp[24];
  int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
  sep(w);
  put(w, tmp, (size_t)n);
}

void sc_jsonw_uint(sc_jsonw *w, uint64_t v) {
  char tmp[24];
  int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
  sep(w);
  put(w, tmp, (size_t)n);
}

void sc_jsonw_double(sc_jsonw *w, double v) {
  if (!isfinite(v)) {
    sc_jsonw_null(w);
    return;
  }
  char tmp[32];
  int n = snprintf(tmp, sizeof tmp, "%.9g", v);
  sep(w);
  put(w, tmp, (size_t)n);
}

void sc_jsonw_bool(sc_jsonw *w, bool v) {
  sep(w);
  if (v) put(w, "true", 4);
  else put(w, "false", 5);
}

void sc_jsonw_null(sc_jsonw *w) {
  sep(w);
  put(w, "null", 4);
}

void sc_jsonw_raw(sc_jsonw *w, const char *json, size_t n) {
  sep(w);
  put(w, json, n);
}

void sc_jsonw_kv_int(sc_jsonw *w, const char *key, int64_t v) {
  sc_jsonw_key(w, key);
  sc_jsonw_int(w, v);
}

void sc_jsonw_kv_str(sc_jsonw *w, const char *key, const char *s) {
  sc_jsonw_key(w, key);
  sc_jsonw_str_val(w, s);
}

void sc_jsonw_kv_double(sc_jsonw *w, const char *key, double v) {
  sc_jsonw_key(w, key);
  sc_jsonw_double(w, v);
}

void sc_jsonw_kv_bool(sc_jsonw *w, const char *key, bool v) {
  sc_jsonw_key(w, key);
  sc_jsonw_bool(w, v);
}

void sc_jsonw_int32_array(sc_jsonw *w, const int32_t *v, size_t n) {
  sc_jsonw_arr_begin(w);
  /* Fast path: format into the buffer directly; index arrays can be millions long. */
  if (n > 0 && reserve(w, n * 12)) {
    char *p = w->buf + w->len;
    for (size_t i = 0; i < n; i++) {
      if (i > 0) *p++ = ',';
      p += sprintf(p, "%d", v[i]);
    }
    w->len = (size_t)(p - w->buf);
    w->first[w->depth] = false;
  }
  sc_jsonw_arr_end(w);
}
