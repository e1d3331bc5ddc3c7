/* tokenizer_load.c - reading tokenizer.json (jansson) into an sc_tokenizer: the model,
 * the added tokens (HF's AddedVocabulary::add_tokens id rules) and the tables decode
 * uses; the four pipelines are tokenizer_pipes.c's. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/tokenizer_int.h"

/* ---- JSON helpers ---------------------------------------------------------------- */

int tk_arena_add(sc_tokenizer *t, const char *s, size_t n, tk_span *out) {
  const size_t off = t->arena.len;
  if (n > 0 && tk_text_put(&t->arena, s, n) != 0) return SC_ENOMEM;
  if (n == 0 && t->arena.data == NULL && tk_text_put(&t->arena, "", 1) != 0) return SC_ENOMEM;
  *out = (tk_span){off, n};
  return 0;
}

bool tk_json_null(const json_t *v) { return v == NULL || json_is_null(v); }

int tk_json_bool(const json_t *obj, const char *key, bool dflt, bool *out, const char *where,
                 sc_diag *d) {
  const json_t *v = json_object_get(obj, key);
  if (tk_json_null(v)) {
    *out = dflt;
    return 0;
  }
  if (!json_is_boolean(v))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.%s must be true or false", where, key);
  *out = json_is_true(v);
  return 0;
}

int tk_json_string(const json_t *obj, const char *key, const char **s, size_t *n,
                   const char *where, sc_diag *d) {
  const json_t *v = json_object_get(obj, key);
  if (!json_is_string(v))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s.%s must be a string", where, key);
  *s = json_string_value(v);
  *n = json_string_length(v);
  return 0;
}

static const char *type_of(const json_t *obj) {
  const json_t *v = json_object_get(obj, "type");
  return json_is_string(v) ? json_string_value(v) : NULL;
}

int tk_json_type(const json_t *obj, const char *where, const char **type, sc_diag *d) {
  if (!json_is_object(obj))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s must be an object or null", where);
  *type = type_of(obj);
  if (*type == NULL) return sc_fail(d, SC_EINVAL, "tokenizer.json: %s has no \"type\"", where);
  return 0;
}

/* ---- the model ----------------------------------------------------------------------- */

static int load_model(sc_tokenizer *t, const json_t *m, sc_diag *d) {
  const char *type;
  int rc = tk_json_type(m, "model", &type, d);
  if (rc != 0) return rc;
  if (strcmp(type, "BPE") != 0)
    return sc_fail(d, SC_ENOTSUP, "tokenizer.json: model.type \"%s\" is not supported (only BPE)",
                   type);
  const json_t *drop = json_object_get(m, "dropout");
  if (!tk_json_null(drop) && !(json_is_number(drop) && json_number_value(drop) == 0.0))
    return sc_fail(d, SC_ENOTSUP, "tokenizer.json: model.dropout must be null (BPE dropout is "
                   "random, not supported)");
  static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const json_t *v = json_object_get(m, affixes[i]);
    if (!tk_json_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
      return sc_fail(d, SC_ENOTSUP, "tokenizer.json: model.%s is not supported (it must be null)",
                     affixes[i]);
  }
  tk_bpe *b = &t->bpe;
  if ((rc = tk_json_bool(m, "fuse_unk", false, &b->fuse_unk, "model", d)) != 0 ||
      (rc = tk_json_bool(m, "byte_fallback", false, &b->byte_fallback, "model", d)) != 0 ||
      (rc = tk_json_bool(m, "ignore_merges", false, &b->ignore_merges, "model", d)) != 0)
    return rc;
  const json_t *vocab = json_object_get(m, "vocab"), *merges = json_object_get(m, "merges");
  if (!json_is_object(vocab) || !json_is_array(merges))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: model needs \"vocab\" (an object) and "
                   "\"merges\" (an array)");
  const char *key;
  const json_t *val;
  json_object_foreach((json_t *)vocab, key, val) {
    if (!json_is_integer(val) || json_integer_value(val) < 0 ||
        json_integer_value(val) >= SC_TOK_MAX_ID)
      return sc_fail(d, json_is_integer(val) ? SC_ERANGE : SC_EINVAL,
                     "tokenizer.json: model.vocab[\"%.60s\"] must be an integer id in [0, %d)",
                     key, SC_TOK_MAX_ID);
    tk_span s;
    if (tk_arena_add(t, key, strlen(key), &s) != 0) return SC_ENOMEM;
    if ((rc = tk_bpe_add_token(t, (int32_t)json_integer_value(val), s, d)) != 0) return rc;
  }
  if (b->vocab.slot == NULL &&
      (sc_index_init(&b->vocab, 16) != 0 || sc_index_init(&b->pairs, 16) != 0))
    return SC_ENOMEM;
  const size_t nm = json_array_size(merges);
  for (size_t i = 0; i < nm; i++) {
    const json_t *e = json_array_get(merges, i);
    const char *a, *bb;
    size_t na, nb;
    if (json_is_string(e)) { /* "a b": exactly one space */
      a = json_string_value(e);
      const size_t n = json_string_length(e);
      const char *sp = memchr(a, ' ', n);
      if (sp == NULL || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - a)) != NULL)
        return sc_fail(d, SC_EINVAL, "tokenizer.json: model.merges[%zu] \"%.60s\" must be two "
                       "tokens separated by one space", i, a);
      na = (size_t)(sp - a);
      bb = sp + 1;
      nb = n - na - 1;
    } else if (json_is_array(e) && json_array_size(e) == 2 &&
               json_is_string(json_array_get(e, 0)) && json_is_string(json_array_get(e, 1))) {
      a = json_string_value(json_array_get(e, 0));
      na = json_string_length(json_array_get(e, 0));
      bb = json_string_value(json_array_get(e, 1));
      nb = json_string_length(json_array_get(e, 1));
    } else {
      return sc_fail(d, SC_EINVAL, "tokenizer.json: model.merges[%zu] must be \"a b\" or "
                     "[\"a\", \"b\"]", i);
    }
    if (i > UINT32_MAX) return sc_fail(d, SC_ETOOBIG, "tokenizer.json: too many merges");
    if ((rc = tk_bpe_add_merge(t, a, na, bb, nb, (uint32_t)i, d)) != 0) return rc;
  }
  tk_bpe_finish(t);
  b->unk = -1;
  const json_t *unk = json_object_get(m, "unk_token");
  if (!tk_json_null(unk)) {
    if (!json_is_string(unk))
      return sc_fail(d, SC_EINVAL, "tokenizer.json: model.unk_token must be a string or null");
    b->unk = tk_bpe_find(t, json_string_value(unk), json_string_length(unk));
    if (b->unk < 0) b->unk = -2; /* HF fails only when an unknown character needs it */
  }
  return 0;
}

/* ---- added tokens -------------------------------------------------------------------- */

static uint64_t name_hash_of(const void *ctx, int32_t pos) {
  const sc_tokenizer *t = ctx;
  return tk_hash_bytes(tk_str(t, t->names[pos].content), t->names[pos].content.len);
}

static bool name_eq(const void *ctx, int32_t pos, const void *key) {
  const sc_tokenizer *t = ctx;
  const tk_key *k = key;
  const tk_span c = t->names[pos].content;
  return c.len == k->n && memcmp(tk_str(t, c), k->s, k->n) == 0;
}

static uint64_t id_hash(int32_t id) { return (uint64_t)(uint32_t)id * 0x9E3779B97F4A7C15ull; }

static uint64_t added_hash_of(const void *ctx, int32_t pos) {
  return id_hash(((const sc_tokenizer *)ctx)->added[pos].id);
}

static bool added_eq(const void *ctx, int32_t pos, const void *key) {
  return ((const sc_tokenizer *)ctx)->added[pos].id == *(const int32_t *)key;
}

static int32_t name_find(const sc_tokenizer *t, const char *s, size_t n) {
  if (t->names_by_content.slot == NULL) return -1;
  const tk_key k = {s, n};
  return sc_index_find(&t->names_by_content, tk_hash_bytes(s, n), name_eq, t, &k);
}

int32_t tk_added_find(const sc_tokenizer *t, const char *s, size_t n) {
  const int32_t pos = name_find(t, s, n);
  return pos < 0 ? -1 : t->names[pos].id;
}

static int32_t added_pos(const sc_tokenizer *t, int32_t id) {
  if (t->added_by_id.slot == NULL) return -1;
  return sc_index_find(&t->added_by_id, id_hash(id), added_eq, t, &id);
}

static bool same_flags(const tk_added *x, const tk_added *y) {
  return x->single_word == y->single_word && x->lstrip == y->lstrip && x->rstrip == y->rstrip &&
         x->normalized == y->normalized && x->special == y->special;
}

/* One entry of "added_tokens", as HF's add_tokens takes it. */
static int add_one(sc_tokenizer *t, const json_t *e, size_t i, int32_t *next_id, sc_diag *d) {
  char where[TK_WHERE_MAX];
  snprintf(where, sizeof where, "added_tokens[%zu]", i);
  if (!json_is_object(e))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: %s must be an object", where);
  const char *s;
  size_t n;
  int rc = tk_json_string(e, "content", &s, &n, where, d);
  if (rc != 0) return rc;
  tk_added a = {0};
  if ((rc = tk_json_bool(e, "special", false, &a.special, where, d)) != 0 ||
      (rc = tk_json_bool(e, "normalized", !a.special, &a.normalized, where, d)) != 0 ||
      (rc = tk_json_bool(e, "single_word", false, &a.single_word, where, d)) != 0 ||
      (rc = tk_json_bool(e, "lstrip", false, &a.lstrip, where, d)) != 0 ||
      (rc = tk_json_bool(e, "rstrip", false, &a.rstrip, where, d)) != 0)
    return rc;
  if (n == 0) return 0; /* HF ignores empty tokens */
  const int32_t known = name_find(t, s, n);
  if (known >= 0) { /* the same content with the same flags again: nothing to do */
    const int32_t p = added_pos(t, t->names[known].id);
    if (p >= 0 && same_flags(&t->added[p], &a) && t->added[p].content.len == n &&
        memcmp(tk_str(t, t->added[p].content), s, n) == 0)
      return 0;
  }
  int32_t id = known >= 0 ? t->names[known].id : tk_bpe_find(t, s, n);
  if (id < 0) {
    if (*next_id >= SC_TOK_MAX_ID)
      return sc_fail(d, SC_ERANGE, "tokenizer.json: %s: id %d is out of range", where, *next_id);
    id = (*next_id)++;
  }
  const json_t *jid = json_object_get(e, "id");
  if (json_is_integer(jid) && json_integer_value(jid) != id)
    SC_WARN("tokenizer", "tokenizer.json: added token \"%.60s\" was expected to have id %lld "
            "but was given id %d (as HF does)", s, (long long)json_integer_value(jid), id);
  if (tk_arena_add(t, s, n, &a.content) != 0) return SC_ENOMEM;
  a.norm = a.content;
  a.id = id;
  if (a.normalized && t->nnorm > 0) {
    sc_tok_text out = {0}, tmp = {0};
    tk_spans cover = {0};
    tk_matcher *m = calloc(t->nnorm, sizeof *m);
    rc = m ? tk_normalize(t, m, s, n, &out, &tmp, &cover, d) : SC_ENOMEM;
    if (rc == 0 && (out.len != n || memcmp(out.data, s, n) != 0))
      rc = tk_arena_add(t, out.data ? out.data : "", out.len, &a.norm);
    for (size_t k = 0; m && k < t->nnorm; k++) tk_matcher_free(&m[k]);
    free(m);
    free(out.data);
    free(tmp.data);
    tk_spans_free(&cover);
    if (rc != 0) return rc;
    if (a.norm.len == 0)
      return sc_fail(d, SC_EINVAL, "tokenizer.json: %s \"%.60s\" normalizes to nothing", where, s);
  }
  /* content -> id */
  if (known >= 0) {
    t->names[known].id = id;
    t->names[known].special = t->names[known].special || a.special;
  } else {
    tk_name *v = tk_room(t->names, t->nnames, &t->capnames, sizeof *v, 64);
    if (v == NULL) return SC_ENOMEM;
    t->names = v;
    t->names[t->nnames] = (tk_name){a.content, id, a.special};
    if (sc_index_put(&t->names_by_content, tk_hash_bytes(s, n), (int32_t)t->nnames,
                     name_hash_of, t) != 0)
      return SC_ENOMEM;
    t->nnames++;
  }
  /* id -> token: a later token for the same id replaces the earlier one */
  const int32_t p = added_pos(t, id);
  if (p >= 0) {
    t->added[p] = a;
    return 0;
  }
  tk_added *v = tk_room(t->added, t->nadded, &t->capadded, sizeof *v, 64);
  if (v == NULL) return SC_ENOMEM;
  t->added = v;
  t->added[t->nadded] = a;
  if (sc_index_put(&t->added_by_id, id_hash(id), (int32_t)t->nadded, added_hash_of, t) != 0)
    return SC_ENOMEM;
  t->nadded++;
  return 0;
}

static int clip(tk_span s) { return (int)(s.len > 40 ? 40 : s.len); }

static int load_added(sc_tokenizer *t, const json_t *list, sc_diag *d) {
  if (sc_index_init(&t->names_by_content, 64) != 0 || sc_index_init(&t->added_by_id, 64) != 0)
    return SC_ENOMEM;
  if (tk_json_null(list)) return 0;
  if (!json_is_array(list))
    return sc_fail(d, SC_EINVAL, "tokenizer.json: added_tokens must be an array");
  int32_t next_id = t->bpe.count; /* HF: the vocabulary's size (its number of entries) */
  for (size_t i = 0; i < json_array_size(list); i++) {
    const int rc = add_one(t, json_array_get(list, i), i, &next_id, d);
    if (rc != 0) return rc;
  }
  bool single_word = false;
  for (size_t i = 0; i < t->nadded; i++) {
    const tk_added *a = &t->added[i];
    tk_trie *tr = a->normalized ? &t->trie_norm : &t->trie_raw;
    const int rc = tk_trie_add(tr, tk_str(t, a->norm), a->norm.len, (int32_t)i);
    if (rc < 0) return rc;
    if (rc > 0) { /* HF keeps one of them, in hash order: refuse rather than guess */
      const tk_added *b = &t->added[rc - 1];
      return sc_fail(d, SC_EINVAL, "tokenizer.json: added tokens \"%.*s\" and \"%.*s\" both "
                     "match \"%.*s\" after the normalizer", clip(b->content), tk_str(t, b->content),
                     clip(a->content), tk_str(t, a->content), clip(a->norm), tk_str(t, a->norm));
    }
    single_word = single_word || a->single_word;
  }
  if (single_word) { /* Rust regex's \w, which HF's single_word checks use */
    int err;
    PCRE2_SIZE off;
    t->word = pcre2_compile((PCRE2_SPTR) "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]",
                            PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (t->word == NULL) return sc_fail(d, SC_ENOTSUP, "single_word needs PCRE2 10.40 or later");
  }
  return 0;
}

/* ---- the decode tables ----------------------------------------------------------------- */

static int finish(sc_tokenizer *t, sc_diag *d) {
  int32_t size = t->bpe.nids;
  for (size_t i = 0; i < t->nadded; i++)
    if (t->added[i].id + 1 > size) size = t->added[i].id + 1;
  t->vocab_size = size;
  t->dec_str = malloc(sizeof *t->dec_str * (size_t)(size ? size : 1));
  t->special = calloc((size_t)(size ? size : 1), 1);
  if (t->dec_str == NULL || t->special == NULL) return SC_ENOMEM;
  for (int32_t i = 0; i < size; i++)
    t->dec_str[i] = i < t->bpe.nids ? t->bpe.tok[i] : (tk_span){0, SIZE_MAX};
  for (size_t i = 0; i < t->nadded; i++) t->dec_str[t->added[i].id] = t->added[i].norm;
  /* HF skips a token when its string is the content of a token once added as special */
  for (int32_t i = 0; i < size; i++) {
    if (t->dec_str[i].len == SIZE_MAX) continue;
    const int32_t pos = name_find(t, tk_str(t, t->dec_str[i]), t->dec_str[i].len);
    t->special[i] = pos >= 0 && t->names[pos].special;
  }
  int rc = 0;
  for (size_t i = 0; i < t->ntmpl && rc == 0; i++)
    for (size_t k = 0; k < t->tmpl[i].npiece; k++) {
      const tk_piece *p = &t->tmpl[i].piece[k];
      for (size_t j = 0; !p->seq && j < p->n; j++)
        if (t->tmpl_ids[p->off + j] >= size)
          return sc_fail(d, SC_ERANGE, "tokenizer.json: post_processor: special token id %d is "
                         "not in the vocabulary", t->tmpl_ids[p->off + j]);
    }
  return rc;
}

/* ---- entry points ------------------------------------------------------------------------ */

int sc_tokenizer_load_json(const char *json, size_t len, sc_tokenizer **out, sc_diag *d) {
  *out = NULL;
  if (len > SC_TOK_MAX_FILE)
    return sc_fail(d, SC_ETOOBIG, "tokenizer.json has %zu bytes, more than the %zu allowed", len,
                   SC_TOK_MAX_FILE);
  json_error_t jerr;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
  if (root == NULL)
    return sc_fail(d, SC_EINVAL, "tokenizer.json: invalid JSON at line %d column %d: %s",
                   jerr.line, jerr.column, jerr.text);
  sc_tokenizer *t = calloc(1, sizeof *t);
  int rc = t ? 0 : SC_ENOMEM;
  if (t) tk_bytelevel_tables(t);
  const json_t *version = json_object_get(root, "version");
  if (rc == 0 && !json_is_object(root))
    rc = sc_fail(d, SC_EINVAL, "tokenizer.json must hold a JSON object");
  else if (rc == 0 && !tk_json_null(version) &&
           !(json_is_string(version) && strcmp(json_string_value(version), "1.0") == 0))
    rc = sc_fail(d, SC_ENOTSUP, "tokenizer.json: version must be \"1.0\"");
  else if (rc == 0 && !tk_json_null(json_object_get(root, "truncation")))
    rc = sc_fail(d, SC_ENOTSUP, "tokenizer.json: truncation must be null (not supported)");
  else if (rc == 0 && !tk_json_null(json_object_get(root, "padding")))
    rc = sc_fail(d, SC_ENOTSUP, "tokenizer.json: padding must be null (not supported)");
  if (rc == 0) rc = load_model(t, json_object_get(root, "model"), d);
  if (rc == 0) rc = tk_load_normalizer(t, json_object_get(root, "normalizer"), d);
  if (rc == 0) rc = load_added(t, json_object_get(root, "added_tokens"), d);
  if (rc == 0) rc = tk_load_pre_tokenizer(t, json_object_get(root, "pre_tokenizer"), d);
  if (rc == 0) rc = tk_load_post_processor(t, json_object_get(root, "post_processor"), d);
  if (rc == 0) rc = tk_load_decoder(t, json_object_get(root, "decoder"), d);
  if (rc == 0) rc = finish(t, d);
  json_decref(root);
  if (rc != 0) {
    sc_tokenizer_free(t);
    return rc == SC_ENOMEM ? sc_fail(d, rc, "tokenizer.json: out of memory") : rc;
  }
  *out = t;
  return 0;
}

int sc_tokenizer_load(const char *path, sc_tokenizer **out, sc_diag *d) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (f == NULL) return sc_fail(d, SC_ENOENT, "cannot open tokenizer %s", path);
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int rc = 0;
  while (rc == 0) {
    if (len == cap) {
      if (cap > SC_TOK_MAX_FILE) {
        rc = sc_fail(d, SC_ETOOBIG, "tokenizer %s is larger than %zu bytes", path, SC_TOK_MAX_FILE);
        break;
      }
      cap = cap ? 2 * cap : (size_t)1 << 16;
      char *v = realloc(buf, cap);
      if (v == NULL) {
        rc = sc_fail(d, SC_ENOMEM, "tokenizer %s: out of memory", path);
        break;
      }
      buf = v;
    }
    const size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) rc = sc_fail(d, SC_EIO, "cannot read tokenizer %s", path);
      break;
    }
  }
  fclose(f);
  if (rc == 0) {
    rc = sc_tokenizer_load_json(buf, len, out, d);
    if (rc != 0 && d && strncmp(d->msg, "tokenizer.json", 14) == 0) {
      char msg[sizeof d->msg];
      snprintf(msg, sizeof msg, "%s%s", path, d->msg + 14);
      snprintf(d->msg, sizeof d->msg, "%s", msg);
    }
  }
  free(buf);
  return rc;
}

void sc_tokenizer_free(sc_tokenizer *t) {
  if (t == NULL) return;
  tk_bpe_free(&t->bpe);
  for (size_t i = 0; i < t->nnorm; i++) tk_pattern_free(&t->norm[i].pat);
  for (size_t i = 0; i < t->npre; i++) tk_pattern_free(&t->pre[i].pat);
  tk_pattern_free(&t->gpt2);
  free(t->added);
  sc_index_free(&t->added_by_id);
  free(t->names);
  sc_index_free(&t->names_by_content);
  tk_trie_free(&t->trie_raw);
  tk_trie_free(&t->trie_norm);
  if (t->word) pcre2_code_free(t->word);
  for (size_t i = 0; i < t->ntmpl; i++) free(t->tmpl[i].piece);
  free(t->tmpl);
  free(t->tmpl_ids);
  for (size_t i = 0; i < t->ndec; i++) tk_pattern_free(&t->dec[i].pat);
  free(t->dec_str);
  free(t->special);
  free(t->arena.data);
  free(t);
}
