/* tokenizer_text.c - what the tokenizer's files share: growable buffers and arrays, a
 * string hash, and strict UTF-8 (Unicode Table 3-7). */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_int.h"

/* ---- small buffers -------------------------------------------------------------- */

int tk_text_put(sc_tok_text *b, const void *p, size_t n) {
  if (n == 0) return 0;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1) cap *= 2;
    char *q = realloc(b->data, cap);
    if (q == NULL) return SC_ENOMEM;
    b->data = q;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

void *tk_room(void *v, size_t n, size_t *cap, size_t size, size_t first) {
  if (n < *cap) return v;
  size_t c = *cap ? 2 * *cap : first;
  while (c <= n) c *= 2;
  void *q = realloc(v, c * size);
  if (q) *cap = c;
  return q;
}

int tk_ids_push(int32_t **v, size_t *n, size_t *cap, int32_t id) {
  int32_t *a = tk_room(*v, *n, cap, sizeof *a, 64);
  if (a == NULL) return SC_ENOMEM;
  *v = a;
  a[(*n)++] = id;
  return 0;
}

int tk_spans_add(tk_spans *s, size_t off, size_t len, bool flag) {
  if (s->n == s->cap) {
    size_t fcap = s->cap;
    uint8_t *f = tk_room(s->flag, s->n, &fcap, 1, 16);
    if (f == NULL) return SC_ENOMEM;
    s->flag = f;
    tk_span *v = tk_room(s->v, s->n, &s->cap, sizeof *v, 16);
    if (v == NULL) return SC_ENOMEM;
    s->v = v;
  }
  s->v[s->n] = (tk_span){off, len};
  s->flag[s->n++] = flag;
  return 0;
}

void tk_spans_free(tk_spans *s) {
  free(s->v);
  free(s->flag);
  *s = (tk_spans){0};
}

uint64_t tk_hash_bytes(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

/* ---- UTF-8 ---------------------------------------------------------------------- */

/* A lead byte's sequence length and the range of the byte after it (Table 3-7); 0 for
 * a byte that cannot start a sequence of two or more. */
static size_t lead(uint8_t c, uint8_t *lo, uint8_t *hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) {
    if (c == 0xE0) *lo = 0xA0;
    if (c == 0xED) *hi = 0x9F;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (c == 0xF0) *lo = 0x90;
    if (c == 0xF4) *hi = 0x8F;
    return 4;
  }
  return 0;
}

size_t tk_utf8_len(const uint8_t *s, size_t n) {
  if (n == 0) return 0;
  if (s[0] < 0x80) return 1;
  uint8_t lo, hi;
  const size_t len = lead(s[0], &lo, &hi);
  if (len == 0 || n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

uint32_t tk_utf8_get(const uint8_t *s, size_t len) {
  switch (len) {
    case 1: return s[0];
    case 2: return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    case 3: return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    default:
      return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
             (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
  }
}

size_t tk_utf8_put(uint32_t cp, uint8_t *o) {
  if (cp < 0x80) {
    o[0] = (uint8_t)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (uint8_t)(0xC0 | cp >> 6);
    o[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (uint8_t)(0xE0 | cp >> 12);
    o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (uint8_t)(0xF0 | cp >> 18);
  o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

size_t tk_utf8_bad(const uint8_t *s, size_t n, bool *cut) {
  uint8_t lo, hi;
  const size_t width = lead(s[0], &lo, &hi);
  *cut = false;
  if (width == 0) return 1;
  size_t k = 1;
  if (k < n && s[1] >= lo && s[1] <= hi) {
    k = 2;
    while (k < width && k < n && s[k] >= 0x80 && s[k] <= 0xBF) k++;
  }
  *cut = k == n && k < width;
  return k;
}

size_t tk_utf8_check(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      i++;
      continue;
    }
    const size_t l = tk_utf8_len(s + i, n - i);
    if (l == 0) return i;
    i += l;
  }
  return n;
}

bool tk_is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

