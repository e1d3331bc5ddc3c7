/* tokenizer_regex.c - the patterns of Split and Replace: compiled by PCRE2 (after
 * tokenizer_onig.c's translation) and run with Oniguruma's find_iter rules. */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_int.h"

/* ---- compiled patterns ------------------------------------------------------------ */

static int pattern_init(tk_pattern *p, bool regex, const char *src, size_t len, const char *what,
                        sc_diag *d) {
  p->source = malloc(len + 1);
  if (p->source == NULL) return SC_ENOMEM;
  memcpy(p->source, src, len);
  p->source[len] = '\0';
  if (!regex) {
    if (len == 0) return sc_fail(d, SC_EINVAL, "%s: an empty String pattern", what);
    p->lit = p->source;
    p->nlit = len;
    return 0;
  }
  char *pat = NULL;
  sc_diag inner = {0};
  int rc = tk_onig_to_pcre2(src, len, &pat, &inner);
  if (rc != 0)
    return rc == SC_ENOMEM ? rc : sc_fail(d, rc, "%s: %s", what, sc_diag_message(&inner));
  int err = 0;
  PCRE2_SIZE off = 0;
  p->code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &err, &off, NULL);
  if (p->code == NULL) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(err, msg, sizeof msg);
    rc = sc_fail(d, SC_EINVAL, "%s: regex \"%.120s\" does not compile (PCRE2: %s, as \"%.120s\")",
                 what, p->source, (const char *)msg, pat);
  } else {
    (void)pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE); /* the interpreter when it fails */
  }
  free(pat);
  return rc;
}

int tk_pattern_init(tk_pattern *p, bool regex, const char *src, size_t len, const char *what,
                    sc_diag *d) {
  *p = (tk_pattern){0};
  const int rc = pattern_init(p, regex, src, len, what, d);
  if (rc != 0) tk_pattern_free(p);
  return rc;
}

void tk_pattern_free(tk_pattern *p) {
  if (p->code) pcre2_code_free(p->code);
  free(p->source);
  *p = (tk_pattern){0};
}

void tk_matcher_free(tk_matcher *m) {
  if (m->md) pcre2_match_data_free(m->md);
  if (m->mc) pcre2_match_context_free(m->mc);
  *m = (tk_matcher){0};
}

#define TK_HEAP_LIMIT_KIB (512u * 1024u) /* PCRE2's backtracking memory per match */

/* One search from offset from: 1 with the match in *st, *en; 0 for no match. */
static int search(const tk_pattern *p, tk_matcher *m, const char *s, size_t n, size_t from,
                  size_t *st, size_t *en, sc_diag *d) {
  if (m->md == NULL) {
    m->md = pcre2_match_data_create(1, NULL);
    m->mc = pcre2_match_context_create(NULL);
    if (m->md == NULL || m->mc == NULL) return SC_ENOMEM;
    pcre2_set_heap_limit(m->mc, TK_HEAP_LIMIT_KIB);
  }
  int rc = pcre2_match(p->code, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, m->md, m->mc);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter keeps its frames on the heap */
    rc = pcre2_match(p->code, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                     m->md, m->mc);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(rc, msg, sizeof msg);
    const int code = rc == PCRE2_ERROR_NOMEMORY ? SC_ENOMEM : SC_ETOOBIG;
    return sc_fail(d, code, "regex \"%.120s\" gave up on a %zu-byte piece of the text (PCRE2: %s)",
                   p->source, n, (const char *)msg);
  }
  const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
  *st = ov[0];
  *en = ov[1];
  return 1;
}

/* The first occurrence of lit[0..m) in s[0..n), or NULL (memmem is not POSIX). */
static const char *find_lit(const char *s, size_t n, const char *lit, size_t m) {
  for (const char *p = s; (size_t)(s + n - p) >= m;) {
    p = memchr(p, lit[0], (size_t)(s + n - p) - m + 1);
    if (p == NULL) return NULL;
    if (memcmp(p, lit, m) == 0) return p;
    p++;
  }
  return NULL;
}

int tk_pattern_cover(const tk_pattern *p, tk_matcher *m, const char *s, size_t n,
                     tk_spans *out, sc_diag *d) {
  if (n == 0) return tk_spans_add(out, 0, 0, false);
  size_t prev = 0;
  int rc = 0;
  if (p->code == NULL) { /* a literal: non-overlapping, left to right */
    size_t i = 0;
    while (rc == 0 && i + p->nlit <= n) {
      const char *hit = find_lit(s + i, n - i, p->lit, p->nlit);
      if (hit == NULL) break;
      const size_t st = (size_t)(hit - s);
      if (st > prev) rc = tk_spans_add(out, prev, st - prev, false);
      if (rc == 0) rc = tk_spans_add(out, st, p->nlit, true);
      prev = i = st + p->nlit;
    }
  } else { /* Oniguruma's FindMatches */
    size_t last_end = 0, last_match_end = 0;
    bool any = false;
    while (rc == 0 && last_end <= n) {
      size_t st = 0, en = 0;
      const int r = search(p, m, s, n, last_end, &st, &en, d);
      if (r < 0) return r;
      if (r == 0) break;
      if (st == en && any && last_match_end == en) { /* skip one character */
        const size_t l =
            last_end < n ? tk_utf8_len((const uint8_t *)s + last_end, n - last_end) : 0;
        last_end += l ? l : 1;
        continue;
      }
      last_end = last_match_end = en;
      any = true;
      if (st != prev) rc = tk_spans_add(out, prev, st - prev, false);
      if (rc == 0) rc = tk_spans_add(out, st, en - st, true);
      prev = en;
    }
  }
  if (rc == 0 && prev != n) rc = tk_spans_add(out, prev, n - prev, false);
  return rc;
}
