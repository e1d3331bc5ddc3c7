/* tokenizer_check.c - see tokenizer_check.h. */
#include "tokenizer_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether s[0..n) is whole UTF-8 characters (strict: no overlongs, no surrogates). */
static bool whole_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    const unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    unsigned lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (len > 1 && (s[i + 1] < lo || s[i + 1] > hi)) return false;
    for (size_t k = 2; k < len; k++)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
    i += len;
  }
  return true;
}

static int prefix(const sc_tokenizer *t, const int32_t *ids, size_t k, bool skip, char *why,
                  size_t cap) {
  sc_detok s;
  sc_detok_init(&s, t, skip);
  sc_tok_text out = {0};
  sc_diag d = {0};
  int rc = 0;
  for (size_t i = 0; i < k && rc == 0; i++) {
    const size_t before = out.len;
    if (sc_detok_push(&s, ids[i], &out, &d) != 0) {
      snprintf(why, cap, "prefix %zu, push %zu: %s", k, i, d.msg);
      rc = -1;
    } else if (!whole_utf8((const unsigned char *)out.data + before, out.len - before)) {
      snprintf(why, cap, "prefix %zu: push %zu appended a cut UTF-8 sequence", k, i);
      rc = -1;
    }
  }
  char *whole = NULL;
  size_t wlen = 0;
  if (rc == 0 && (sc_detok_finish(&s, &out, &d) != 0 ||
                  sc_tokenizer_decode(t, ids, k, skip, &whole, &wlen, &d) != 0)) {
    snprintf(why, cap, "prefix %zu: %s", k, d.msg);
    rc = -1;
  }
  if (rc == 0 && (wlen != out.len || (wlen > 0 && memcmp(whole, out.data, wlen) != 0))) {
    snprintf(why, cap, "prefix %zu (skip_special %d): streamed \"%.*s\", whole \"%.*s\"", k, skip,
             (int)(out.len > 120 ? 120 : out.len), out.data, (int)(wlen > 120 ? 120 : wlen), whole);
    rc = -1;
  }
  free(whole);
  free(out.data);
  sc_detok_free(&s);
  return rc;
}

int tok_stream_check(const sc_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                     char *why, size_t cap) {
  for (size_t k = 0; k <= n; k++)
    if (prefix(t, ids, k, skip_special, why, cap) != 0) return -1;
  return 0;
}
