/* tokenizer_pipes.c - reading the four pipelines of tokenizer.json: normalizer,
 * pre_tokenizer, post_processor and decoder, each a type or a Sequence of them, checked
 * against what tokenizer.h supports. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_int.h"

/* {"String": s} or {"Regex": r} */
static int get_pattern(const json_t *obj, tk_pattern *p, const char *where, sc_diag *d) {
  const json_t *pat = json_object_get(obj, "pattern");
  const json_t *str = json_object_get(pat, "String"), *re = json_object_get(pat, "Regex");
  if (!json_is_object(pat) || json_object_size(pat) != 1 ||
      !(json_is_string(str) || json_is_string(re)))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.pattern must be {\"String\": ...} or "
                   "{\"Regex\": ...}", where);
  const json_t *v = str ? str : re;
  char what[TK_WHERE_MAX + 16];
  snprintf(what, sizeof what, "tokenizer.json: %s.pattern", where);
  return tk_pattern_init(p, re != NULL, json_string_value(v), json_string_length(v), what, d);
}

/* A JSON string holding exactly one character (Strip's content, Metaspace's replacement). */
static int get_char(const json_t *obj, const char *key, uint32_t *cp, const char *where,
                    sc_diag *d) {
  const char *s;
  size_t n;
  int rc = tk_json_string(obj, key, &s, &n, where, d);
  if (rc != 0) return rc;
  const size_t l = tk_utf8_len((const uint8_t *)s, n);
  if (l == 0 || l != n)
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.%s must be one character", where, key);
  *cp = tk_utf8_get((const uint8_t *)s, l);
  return 0;
}

/* ---- the pipelines' common frame ---------------------------------------------------- */

typedef int (*part_fn)(sc_tokenizer *t, const json_t *v, const char *type, const char *where,
                       void *ctx, sc_diag *d);

/* normalizer, pre_tokenizer, post_processor, decoder: null is nothing, a Sequence is its
 * items (under key), anything else goes to fn with its type. */
static int pipeline(sc_tokenizer *t, const json_t *v, const char *key, const char *where,
                    int depth, part_fn fn, void *ctx, sc_diag *d) {
  if (tk_json_null(v)) return 0;
  const char *type;
  int rc = tk_json_type(v, where, &type, d);
  if (rc != 0) return rc;
  if (depth > 8) return sc_fail(d, SC_EINVAL, "tokenizer.json: %s: nested too deep", where);
  if (strcmp(type, "Sequence") != 0) return fn(t, v, type, where, ctx, d);
  const json_t *list = json_object_get(v, key);
  if (!json_is_array(list))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.%s must be an array", where, key);
  for (size_t i = 0; i < json_array_size(list) && rc == 0; i++) {
    char sub[TK_WHERE_MAX];
    snprintf(sub, sizeof sub, "%s.%s[%zu]", where, key, i);
    rc = pipeline(t, json_array_get(list, i), key, sub, depth + 1, fn, ctx, d);
  }
  return rc;
}

/* ---- normalizer ---------------------------------------------------------------------- */

/* Whether a pipeline has room for one more stage (else the message, and SC_ENOTSUP). */
static int room(size_t n, tk_pattern *pat, const char *where, sc_diag *d) {
  if (n < SC_TOK_MAX_STAGES) return 0;
  tk_pattern_free(pat);
  return sc_fail(d, SC_ENOTSUP, "tokenizer.json: %s: more than %d stages", where,
                 SC_TOK_MAX_STAGES);
}

static int one_normalizer(sc_tokenizer *t, const json_t *n, const char *type, const char *where,
                          void *ctx, sc_diag *d) {
  int rc;
  tk_norm z = {0};
  const char *s;
  size_t len;
  if (strcmp(type, "Prepend") == 0) {
    z.kind = TK_NORM_PREPEND;
    if ((rc = tk_json_string(n, "prepend", &s, &len, where, d)) != 0) return rc;
    if (tk_arena_add(t, s, len, &z.str) != 0) return SC_ENOMEM;
    if ((rc = room(t->nnorm, &z.pat, where, d)) != 0) return rc;
    t->norm[t->nnorm++] = z;
    return 0;
  }
  if (strcmp(type, "Replace") == 0) {
    z.kind = TK_NORM_REPLACE;
    if ((rc = tk_json_string(n, "content", &s, &len, where, d)) != 0) return rc;
    if (tk_arena_add(t, s, len, &z.str) != 0) return SC_ENOMEM;
    if ((rc = get_pattern(n, &z.pat, where, d)) != 0 ||
        (rc = room(t->nnorm, &z.pat, where, d)) != 0)
      return rc;
    t->norm[t->nnorm++] = z;
    return 0;
  }
  return sc_fail(d, SC_ENOTSUP, "tokenizer.json: %s: normalizer type \"%s\" is not supported "
                 "(null, Sequence, Prepend, Replace are)", where, type);
}

/* ---- pre-tokenizer --------------------------------------------------------------------- */

#define GPT2_REGEX \
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static int one_pre(sc_tokenizer *t, const json_t *p, const char *type, const char *where,
                   void *ctx, sc_diag *d) {
  int rc;
  tk_pre z = {0};
  if (strcmp(type, "ByteLevel") == 0) {
    z.kind = TK_PRE_BYTELEVEL;
    if ((rc = tk_json_bool(p, "add_prefix_space", true, &z.add_prefix_space, where, d)) != 0 ||
        (rc = tk_json_bool(p, "use_regex", true, &z.use_regex, where, d)) != 0)
      return rc;
    if (z.use_regex && !t->has_gpt2) {
      rc = tk_pattern_init(&t->gpt2, true, GPT2_REGEX, strlen(GPT2_REGEX), "ByteLevel", d);
      if (rc != 0) return rc;
      t->has_gpt2 = true;
    }
    if ((rc = room(t->npre, &z.pat, where, d)) != 0) return rc;
    t->pre[t->npre++] = z;
    return 0;
  }
  if (strcmp(type, "Split") == 0) {
    z.kind = TK_PRE_SPLIT;
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    static const int kinds[] = {TK_SPLIT_ISOLATED, TK_SPLIT_REMOVED, TK_SPLIT_PREVIOUS,
                                TK_SPLIT_NEXT, TK_SPLIT_CONTIGUOUS};
    const char *b;
    size_t nb;
    if ((rc = tk_json_string(p, "behavior", &b, &nb, where, d)) != 0) return rc;
    z.behavior = -1;
    for (int i = 0; i < 5; i++)
      if (strcmp(b, names[i]) == 0) z.behavior = kinds[i];
    if (z.behavior < 0)
      return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.behavior \"%.40s\" is not a Split "
                     "behavior", where, b);
    if ((rc = tk_json_bool(p, "invert", false, &z.invert, where, d)) != 0) return rc;
    if ((rc = get_pattern(p, &z.pat, where, d)) != 0 ||
        (rc = room(t->npre, &z.pat, where, d)) != 0)
      return rc;
    t->pre[t->npre++] = z;
    return 0;
  }
  return sc_fail(d, SC_ENOTSUP, "tokenizer.json: %s: pre-tokenizer type \"%s\" is not supported "
                 "(null, Sequence, Split, ByteLevel are)", where, type);
}

/* ---- post-processor ------------------------------------------------------------------ */

/* A template piece: {"Sequence": {"id": "A"}} or {"SpecialToken": {"id": name}}. */
static int template_piece(sc_tokenizer *t, const json_t *pc, const json_t *specials,
                          tk_piece *out, const char *where, sc_diag *d) {
  const char *name = NULL;
  bool seq_b = false;
  if (json_is_object(json_object_get(pc, "Sequence"))) {
    const json_t *id = json_object_get(json_object_get(pc, "Sequence"), "id");
    if (!json_is_string(id))
      return sc_fail(d, SC_EINVAL, "tokenizer.json: %s: Sequence without id", where);
    seq_b = strcmp(json_string_value(id), "A") != 0;
    out->seq = true;
  } else if (json_is_object(json_object_get(pc, "SpecialToken"))) {
    const json_t *id = json_object_get(json_object_get(pc, "SpecialToken"), "id");
    if (!json_is_string(id))
      return sc_fail(d, SC_EINVAL, "tokenizer.json: %s: SpecialToken without id", where);
    name = json_string_value(id);
  } else {
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s: a template piece must be {\"Sequence\": ...} "
                   "or {\"SpecialToken\": ...}", where);
  }
  if (seq_b)
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s: the single template uses sequence B", where);
  if (out->seq) return 0;
  const json_t *sp = json_object_get(specials, name);
  const json_t *ids = json_object_get(sp, "ids");
  if (!json_is_array(ids))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s: special token \"%.60s\" is not in "
                   "special_tokens (with its ids)", where, name);
  out->off = t->ntmpl_ids;
  out->n = json_array_size(ids);
  int32_t *v = realloc(t->tmpl_ids, sizeof *v * (t->ntmpl_ids + out->n + 1));
  if (v == NULL) return SC_ENOMEM;
  t->tmpl_ids = v;
  for (size_t i = 0; i < out->n; i++) {
    const json_t *x = json_array_get(ids, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= SC_TOK_MAX_ID)
      return sc_fail(d, SC_ERANGE, "tokenizer.json: %s: special token \"%.60s\" has an id out "
                     "of range", where, name);
    t->tmpl_ids[t->ntmpl_ids++] = (int32_t)json_integer_value(x);
  }
  return 0;
}

static int one_post(sc_tokenizer *t, const json_t *p, const char *type, const char *where,
                    void *ctx, sc_diag *d) {
  int rc;
  if (strcmp(type, "ByteLevel") == 0) return 0; /* trims offsets: nothing for ids */
  if (strcmp(type, "TemplateProcessing") != 0)
    return sc_fail(d, SC_ENOTSUP, "tokenizer.json: %s: post-processor type \"%s\" is not "
                   "supported (null, TemplateProcessing, ByteLevel, Sequence are)", where, type);
  const json_t *single = json_object_get(p, "single");
  const json_t *specials = json_object_get(p, "special_tokens");
  if (!json_is_array(single))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.single must be an array", where);
  tk_template *v = realloc(t->tmpl, sizeof *v * (t->ntmpl + 1));
  if (v == NULL) return SC_ENOMEM;
  t->tmpl = v;
  tk_template *tp = &t->tmpl[t->ntmpl++];
  *tp = (tk_template){0};
  tp->piece = calloc(json_array_size(single) + 1, sizeof *tp->piece);
  if (tp->piece == NULL) return SC_ENOMEM;
  for (size_t i = 0; i < json_array_size(single); i++) {
    char sub[TK_WHERE_MAX];
    snprintf(sub, sizeof sub, "%s.single[%zu]", where, i);
    if ((rc = template_piece(t, json_array_get(single, i), specials, &tp->piece[i], sub, d)) != 0)
      return rc;
    tp->npiece++;
  }
  return 0;
}

/* ---- decoder ------------------------------------------------------------------------- */

static int add_dec(sc_tokenizer *t, tk_dec *z, bool *fused, const char *where, sc_diag *d) {
  const int rc = room(t->ndec, &z->pat, where, d);
  if (rc != 0) return rc;
  z->fused = *fused;
  const char *bad = NULL;
  if (*fused) { /* the text so far is one token: a stage must not look across pieces */
    if (z->kind == TK_DEC_BYTELEVEL) bad = "ByteLevel";
    else if (z->kind == TK_DEC_BYTEFALLBACK) bad = "ByteFallback";
    else if (z->kind == TK_DEC_REPLACE &&
             (z->pat.code != NULL ||
              tk_utf8_len((const uint8_t *)z->pat.lit, z->pat.nlit) != z->pat.nlit))
      bad = "Replace (with a pattern longer than one character)";
  }
  for (size_t i = 0; i < t->ndec && !bad; i++)
    if (z->kind == TK_DEC_BYTEFALLBACK && t->dec[i].kind == TK_DEC_BYTEFALLBACK)
      bad = "second ByteFallback";
  if (bad) {
    tk_pattern_free(&z->pat);
    return sc_fail(d, SC_ENOTSUP, "tokenizer.json: %s: a %s decoder (after ByteLevel or Fuse, "
                   "or twice) is not supported", where, bad);
  }
  if (z->kind == TK_DEC_BYTELEVEL || z->kind == TK_DEC_FUSE) *fused = true;
  t->dec[t->ndec++] = *z;
  return 0;
}

static int one_decoder(sc_tokenizer *t, const json_t *p, const char *type, const char *where,
                       void *ctx, sc_diag *d) {
  bool *fused = ctx;
  int rc;
  tk_dec z = {0};
  if (strcmp(type, "ByteLevel") == 0) {
    z.kind = TK_DEC_BYTELEVEL;
  } else if (strcmp(type, "ByteFallback") == 0) {
    z.kind = TK_DEC_BYTEFALLBACK;
  } else if (strcmp(type, "Fuse") == 0) {
    z.kind = TK_DEC_FUSE;
  } else if (strcmp(type, "Replace") == 0) {
    z.kind = TK_DEC_REPLACE;
    const char *s;
    size_t n;
    if ((rc = tk_json_string(p, "content", &s, &n, where, d)) != 0) return rc;
    if (tk_arena_add(t, s, n, &z.content) != 0) return SC_ENOMEM;
    if ((rc = get_pattern(p, &z.pat, where, d)) != 0) return rc;
  } else if (strcmp(type, "Strip") == 0) {
    z.kind = TK_DEC_STRIP;
    const json_t *start = json_object_get(p, "start"), *stop = json_object_get(p, "stop");
    if ((rc = get_char(p, "content", &z.ch, where, d)) != 0) return rc;
    if (!json_is_integer(start) || json_integer_value(start) < 0 || !json_is_integer(stop) ||
        json_integer_value(stop) < 0)
      return sc_fail(d, SC_EINVAL, "tokenizer.json: %s: start and stop must be integers >= 0",
                     where);
    if (json_integer_value(stop) != 0)
      return sc_fail(d, SC_ENOTSUP, "tokenizer.json: %s: Strip with stop > 0 is not supported",
                     where);
    z.start = (size_t)json_integer_value(start);
  } else if (strcmp(type, "Metaspace") == 0) {
    z.kind = TK_DEC_METASPACE;
    if ((rc = get_char(p, "replacement", &z.ch, where, d)) != 0) return rc;
    const json_t *scheme = json_object_get(p, "prepend_scheme");
    const char *sc = json_is_string(scheme) ? json_string_value(scheme) : "always";
    if (!tk_json_null(scheme) && !json_is_string(scheme))
      return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.prepend_scheme must be a string", where);
    if (strcmp(sc, "always") != 0 && strcmp(sc, "never") != 0 && strcmp(sc, "first") != 0)
      return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.prepend_scheme \"%.20s\" is not always, "
                     "never or first", where, sc);
    bool aps = true;
    if ((rc = tk_json_bool(p, "add_prefix_space", true, &aps, where, d)) != 0) return rc;
    if (!aps && strcmp(sc, "never") != 0)
      return sc_fail(d, SC_EINVAL, "tokenizer.json: %s: add_prefix_space does not match "
                     "prepend_scheme", where);
    z.prepend = strcmp(sc, "never") != 0;
  } else {
    return sc_fail(d, SC_ENOTSUP, "tokenizer.json: %s: decoder type \"%s\" is not supported "
                   "(null, ByteLevel, Sequence, ByteFallback, Fuse, Replace, Strip, Metaspace "
                   "are)", where, type);
  }
  return add_dec(t, &z, fused, where, d);
}

/* ---- entry points ------------------------------------------------------------------ */

int tk_load_normalizer(sc_tokenizer *t, const json_t *v, sc_diag *d) {
  return pipeline(t, v, "normalizers", "normalizer", 0, one_normalizer, NULL, d);
}

int tk_load_pre_tokenizer(sc_tokenizer *t, const json_t *v, sc_diag *d) {
  return pipeline(t, v, "pretokenizers", "pre_tokenizer", 0, one_pre, NULL, d);
}

int tk_load_post_processor(sc_tokenizer *t, const json_t *v, sc_diag *d) {
  return pipeline(t, v, "processors", "post_processor", 0, one_post, NULL, d);
}

int tk_load_decoder(sc_tokenizer *t, const json_t *v, sc_diag *d) {
  bool fused = false;
  t->has_decoder = !tk_json_null(v);
  return pipeline(t, v, "decoders", "decoder", 0, one_decoder, &fused, d);
}
