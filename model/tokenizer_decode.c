/* tokenizer_decode.c - ids back to text. sc_tokenizer_decode follows HF's decoders
 * literally (a list of token strings through each decoder's decode_chain, then joined);
 * sc_detok produces the same text piece by piece, keeping back only what a later token
 * can still change. The two are written independently and tested against each other. */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_int.h"

static const char FFFD[] = "\xEF\xBF\xBD"; /* U+FFFD */

static int id_string(const sc_tokenizer *t, int32_t id, const char **s, size_t *n, sc_diag *d) {
  if (id < 0 || id >= t->vocab_size || t->dec_str[id].len == SIZE_MAX)
    return sc_fail(d, SC_ERANGE, "decode: token id %d is not in the vocabulary (size %d)", id,
                   t->vocab_size);
  *s = tk_str(t, t->dec_str[id]);
  *n = t->dec_str[id].len;
  return 0;
}

/* "<0xHH>" (HF: six bytes, "<0x", then u8::from_str_radix of two bytes, which takes a
 * '+' sign too, then ">"): 1 with the byte. */
static int fallback_byte(const char *s, size_t n, uint8_t *b) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return 0;
  unsigned v = 0;
  for (int i = s[3] == '+' ? 4 : 3; i < 5; i++) {
    const char c = s[i];
    const int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (x < 0) return 0;
    v = v * 16 + (unsigned)x;
  }
  *b = (uint8_t)v;
  return 1;
}

/* ByteLevel's bytes of one token: its characters' bytes, or the token's own UTF-8 when
 * one of them is outside the map. */
static int bytelevel_bytes(const sc_tokenizer *t, const char *s, size_t n, sc_tok_text *out) {
  const size_t mark = out->len;
  for (size_t i = 0; i < n;) {
    const size_t l = tk_utf8_len((const uint8_t *)s + i, n - i);
    const uint32_t cp = l ? tk_utf8_get((const uint8_t *)s + i, l) : 0xFFFFFFFF;
    if (cp >= 0x144 || t->bl_dec[cp] < 0) {
      out->len = mark;
      return tk_text_put(out, s, n);
    }
    const uint8_t b = (uint8_t)t->bl_dec[cp];
    if (tk_text_put(out, &b, 1) != 0) return SC_ENOMEM;
    i += l;
  }
  return 0;
}

/* Rust's String::from_utf8_lossy: one U+FFFD per maximal invalid subpart. */
static int lossy(const uint8_t *s, size_t n, sc_tok_text *out) {
  for (size_t i = 0; i < n;) {
    const size_t l = tk_utf8_len(s + i, n - i);
    if (l) {
      if (tk_text_put(out, s + i, l) != 0) return SC_ENOMEM;
      i += l;
      continue;
    }
    bool cut;
    i += tk_utf8_bad(s + i, n - i, &cut);
    if (tk_text_put(out, FFFD, 3) != 0) return SC_ENOMEM;
  }
  return 0;
}

/* Replace on one string: matches become the content. */
static int replace(const sc_tokenizer *t, const tk_dec *z, tk_matcher *m, const char *s,
                   size_t n, sc_tok_text *out, sc_diag *d) {
  tk_spans c = {0};
  int rc = tk_pattern_cover(&z->pat, m, s, n, &c, d);
  for (size_t k = 0; k < c.n && rc == 0; k++)
    rc = c.flag[k] ? tk_text_put(out, tk_str(t, z->content), z->content.len)
                   : tk_text_put(out, s + c.v[k].off, c.v[k].len);
  tk_spans_free(&c);
  return rc;
}

/* Metaspace on one string: the replacement becomes a space, or nothing in token 0. */
static int metaspace(const tk_dec *z, bool first, const char *s, size_t n, sc_tok_text *out) {
  for (size_t i = 0; i < n;) {
    const size_t l = tk_utf8_len((const uint8_t *)s + i, n - i);
    const size_t step = l ? l : 1;
    const uint32_t cp = l ? tk_utf8_get((const uint8_t *)s + i, l) : 0xFFFFFFFF;
    int rc = 0;
    if (cp != z->ch) rc = tk_text_put(out, s + i, step);
    else if (!(first && z->prepend)) rc = tk_text_put(out, " ", 1);
    if (rc != 0) return rc;
    i += step;
  }
  return 0;
}

/* Strip's leading part on one string: up to start copies of the character. */
static size_t strip_len(const tk_dec *z, const char *s, size_t n, size_t start) {
  size_t i = 0;
  for (size_t k = 0; k < start && i < n; k++) {
    const size_t l = tk_utf8_len((const uint8_t *)s + i, n - i);
    if (l == 0 || tk_utf8_get((const uint8_t *)s + i, l) != z->ch) break;
    i += l;
  }
  return i;
}

/* ---- the whole decode: HF's decode_chain, stage by stage --------------------------- */

typedef struct toks {
  sc_tok_text buf;
  tk_spans sp;
} toks;

static int toks_add(toks *x, const void *s, size_t n) {
  const size_t off = x->buf.len;
  if (tk_text_put(&x->buf, s, n) != 0) return SC_ENOMEM;
  return tk_spans_add(&x->sp, off, n, false);
}

static void toks_free(toks *x) {
  free(x->buf.data);
  tk_spans_free(&x->sp);
}

static int stage(const sc_tokenizer *t, const tk_dec *z, const toks *in, toks *out, sc_diag *d) {
  sc_tok_text tmp = {0};
  tk_matcher m = {0};
  int rc = 0;
  const size_t n = in->sp.n;
  if (z->kind == TK_DEC_BYTELEVEL || z->kind == TK_DEC_FUSE) {
    for (size_t i = 0; i < n && rc == 0; i++) {
      const char *s = in->buf.data + in->sp.v[i].off;
      rc = z->kind == TK_DEC_FUSE ? tk_text_put(&tmp, s, in->sp.v[i].len)
                                  : bytelevel_bytes(t, s, in->sp.v[i].len, &tmp);
    }
    if (rc == 0 && z->kind == TK_DEC_BYTELEVEL) {
      sc_tok_text u = {0};
      rc = lossy((const uint8_t *)tmp.data, tmp.len, &u);
      if (rc == 0) rc = toks_add(out, u.data, u.len);
      free(u.data);
    } else if (rc == 0) {
      rc = toks_add(out, tmp.data, tmp.len);
    }
  } else if (z->kind == TK_DEC_BYTEFALLBACK) {
    for (size_t i = 0; i <= n && rc == 0; i++) {
      const char *s = i < n ? in->buf.data + in->sp.v[i].off : NULL;
      const size_t l = i < n ? in->sp.v[i].len : 0;
      uint8_t b;
      if (i < n && fallback_byte(s, l, &b)) {
        rc = tk_text_put(&tmp, &b, 1);
        continue;
      }
      if (tmp.len > 0) { /* the run of byte tokens ends */
        if (tk_utf8_check((const uint8_t *)tmp.data, tmp.len) == tmp.len) {
          rc = toks_add(out, tmp.data, tmp.len);
        } else {
          for (size_t k = 0; k < tmp.len && rc == 0; k++) rc = toks_add(out, FFFD, 3);
        }
        tmp.len = 0;
      }
      if (i < n && rc == 0) rc = toks_add(out, s, l);
    }
  } else {
    for (size_t i = 0; i < n && rc == 0; i++) {
      const char *s = in->buf.data + in->sp.v[i].off;
      const size_t l = in->sp.v[i].len;
      tmp.len = 0;
      if (z->kind == TK_DEC_REPLACE) {
        rc = replace(t, z, &m, s, l, &tmp, d);
      } else if (z->kind == TK_DEC_METASPACE) {
        rc = metaspace(z, i == 0, s, l, &tmp);
      } else { /* Strip */
        const size_t cut = strip_len(z, s, l, z->start);
        rc = tk_text_put(&tmp, s + cut, l - cut);
      }
      if (rc == 0) rc = toks_add(out, tmp.data ? tmp.data : "", tmp.len);
    }
  }
  free(tmp.data);
  tk_matcher_free(&m);
  return rc;
}

int sc_tokenizer_decode(const sc_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                        char **text, size_t *len, sc_diag *d) {
  *text = NULL;
  *len = 0;
  toks a = {0}, b = {0};
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const char *s = NULL;
    size_t l = 0;
    rc = id_string(t, ids[i], &s, &l, d);
    if (rc == 0 && !(skip_special && t->special[ids[i]])) rc = toks_add(&a, s, l);
  }
  for (size_t k = 0; k < t->ndec && rc == 0; k++) {
    b.buf.len = 0;
    b.sp.n = 0;
    rc = stage(t, &t->dec[k], &a, &b, d);
    const toks x = a;
    a = b;
    b = x;
  }
  sc_tok_text out = {0};
  for (size_t i = 0; i < a.sp.n && rc == 0; i++) {
    if (!t->has_decoder && i > 0) rc = tk_text_put(&out, " ", 1);
    if (rc == 0) rc = tk_text_put(&out, a.buf.data + a.sp.v[i].off, a.sp.v[i].len);
  }
  if (rc == 0 && out.data == NULL) {
    out.data = calloc(1, 1);
    if (out.data == NULL) rc = SC_ENOMEM;
  }
  toks_free(&a);
  toks_free(&b);
  if (rc != 0) {
    free(out.data);
    return rc == SC_ENOMEM ? sc_fail(d, rc, "decode: out of memory") : rc;
  }
  *text = out.data;
  *len = out.len;
  return 0;
}

/* ---- the streamed decode ------------------------------------------------------------ */

#define STRIP_DONE 0x80000000u

void sc_detok_init(sc_detok *s, const sc_tokenizer *t, bool skip_special) {
  *s = (sc_detok){.t = t, .skip_special = skip_special};
}

void sc_detok_free(sc_detok *s) {
  free(s->group);
  s->group = NULL;
  s->ngroup = s->capgroup = 0;
}

/* Runs the piece p (a whole token for a stage before any fusing one, else a fragment of
 * the one fused token) through stages k.. and into out. */
static int run(sc_detok *s, size_t k, const char *p, size_t n, sc_tok_text *out, sc_diag *d);

/* ByteLevel's lossy UTF-8, streamed: complete characters and settled U+FFFD go on,
 * a sequence that the next bytes may still complete stays in s->utf8. */
static int utf8_feed(sc_detok *s, size_t k, const uint8_t *b, size_t n, bool end,
                     sc_tok_text *out, sc_diag *d) {
  sc_tok_text acc = {0};
  int rc = 0;
  size_t i = 0;
  while (rc == 0 && (s->nutf8 > 0 || i < n)) {
    uint8_t w[4];
    size_t m = s->nutf8;
    memcpy(w, s->utf8, m);
    while (m < 4 && i + (m - s->nutf8) < n) w[m] = b[i + (m - s->nutf8)], m++;
    const size_t from_b = m - s->nutf8; /* bytes of b in w */
    const size_t l = tk_utf8_len(w, m);
    if (l) {
      rc = tk_text_put(&acc, w, l);
      i += l - s->nutf8;
      s->nutf8 = 0;
      continue;
    }
    bool cut;
    const size_t bad = tk_utf8_bad(w, m, &cut);
    if (cut && !end) { /* wait for more bytes */
      memcpy(s->utf8, w, m);
      s->nutf8 = (uint8_t)m;
      i += from_b;
      break;
    }
    rc = tk_text_put(&acc, FFFD, 3);
    if (bad >= s->nutf8) {
      i += bad - s->nutf8;
      s->nutf8 = 0;
    } else { /* part of the held bytes stays held */
      memmove(s->utf8, s->utf8 + bad, s->nutf8 - bad);
      s->nutf8 = (uint8_t)(s->nutf8 - bad);
    }
  }
  if (rc == 0 && acc.len) rc = run(s, k + 1, acc.data, acc.len, out, d);
  free(acc.data);
  return rc;
}

static int group_flush(sc_detok *s, size_t k, sc_tok_text *out, sc_diag *d) {
  if (s->ngroup == 0) return 0;
  int rc = 0;
  if (tk_utf8_check(s->group, s->ngroup) == s->ngroup) {
    rc = run(s, k + 1, (const char *)s->group, s->ngroup, out, d);
  } else {
    for (size_t i = 0; i < s->ngroup && rc == 0; i++) rc = run(s, k + 1, FFFD, 3, out, d);
  }
  s->ngroup = 0;
  return rc;
}

static int run(sc_detok *s, size_t k, const char *p, size_t n, sc_tok_text *out, sc_diag *d) {
  const sc_tokenizer *t = s->t;
  if (k == t->ndec) return tk_text_put(out, p, n);
  const tk_dec *z = &t->dec[k];
  sc_tok_text tmp = {0};
  int rc = 0;
  switch (z->kind) {
    case TK_DEC_BYTELEVEL:
      rc = bytelevel_bytes(t, p, n, &tmp);
      if (rc == 0) rc = utf8_feed(s, k, (const uint8_t *)tmp.data, tmp.len, false, out, d);
      break;
    case TK_DEC_BYTEFALLBACK: {
      uint8_t b;
      if (fallback_byte(p, n, &b)) {
        uint8_t *v = tk_room(s->group, s->ngroup, &s->capgroup, 1, 16);
        if (v == NULL) return SC_ENOMEM;
        s->group = v;
        s->group[s->ngroup++] = b;
        return 0;
      }
      rc = group_flush(s, k, out, d);
      if (rc == 0) rc = run(s, k + 1, p, n, out, d);
      break;
    }
    case TK_DEC_FUSE:
      rc = run(s, k + 1, p, n, out, d);
      break;
    case TK_DEC_REPLACE: {
      tk_matcher m = {0};
      rc = replace(t, z, &m, p, n, &tmp, d);
      tk_matcher_free(&m);
      if (rc == 0) rc = run(s, k + 1, tmp.data ? tmp.data : "", tmp.len, out, d);
      break;
    }
    case TK_DEC_METASPACE: /* token 0: the first token here, or all of a fused one */
      rc = metaspace(z, z->fused || s->stage[k] == 0, p, n, &tmp);
      s->stage[k] = 1;
      if (rc == 0) rc = run(s, k + 1, tmp.data ? tmp.data : "", tmp.len, out, d);
      break;
    default: { /* Strip */
      size_t cut;
      if (!z->fused) {
        cut = strip_len(z, p, n, z->start);
      } else if (s->stage[k] & STRIP_DONE) {
        cut = 0;
      } else { /* the start of the whole text: continue where the last fragment stopped */
        const size_t left = z->start - s->stage[k];
        cut = strip_len(z, p, n, left);
        size_t chars = 0;
        for (size_t i = 0; i < cut; i += tk_utf8_len((const uint8_t *)p + i, cut - i)) chars++;
        s->stage[k] += (uint32_t)chars;
        if (cut < n || s->stage[k] >= z->start) s->stage[k] |= STRIP_DONE;
      }
      rc = run(s, k + 1, p + cut, n - cut, out, d);
      break;
    }
  }
  free(tmp.data);
  return rc;
}

int sc_detok_push(sc_detok *s, int32_t id, sc_tok_text *out, sc_diag *d) {
  if (s->failed) return sc_fail(d, SC_EINVAL, "decode: this stream already failed");
  const char *p = NULL;
  size_t n = 0;
  int rc = id_string(s->t, id, &p, &n, d);
  if (rc == 0 && !(s->skip_special && s->t->special[id])) {
    if (!s->t->has_decoder && s->ntokens > 0) rc = tk_text_put(out, " ", 1);
    if (rc == 0) rc = run(s, 0, p, n, out, d);
    s->ntokens++;
  }
  if (rc != 0) {
    s->failed = true;
    if (rc == SC_ENOMEM) sc_fail(d, rc, "decode: out of memory");
  }
  return rc;
}

int sc_detok_finish(sc_detok *s, sc_tok_text *out, sc_diag *d) {
  if (s->failed) return sc_fail(d, SC_EINVAL, "decode: this stream already failed");
  int rc = 0;
  for (size_t k = 0; k < s->t->ndec && rc == 0; k++) {
    if (s->t->dec[k].kind == TK_DEC_BYTELEVEL && s->nutf8 > 0)
      rc = utf8_feed(s, k, NULL, 0, true, out, d);
    else if (s->t->dec[k].kind == TK_DEC_BYTEFALLBACK)
      rc = group_flush(s, k, out, d);
  }
  if (rc == 0 && out->data == NULL) rc = tk_text_put(out, "", 0);
  if (rc != 0) {
    s->failed = true;
    if (rc == SC_ENOMEM) sc_fail(d, rc, "decode: out of memory");
  }
  return rc;
}
