/* tokenizer.c - encode (HF's Tokenizer::encode for one sequence): added tokens split out
 * (added_vocabulary.rs), the normalizer, the pre-tokenizers (split.rs, byte_level.rs),
 * the BPE model per pre-token, then the post-processor; and the small queries. */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_int.h"

/* ---- the added-token trie -------------------------------------------------------- */

typedef struct edge_key {
  int32_t from;
  uint8_t byte;
} edge_key;

static uint64_t edge_hash(int32_t from, uint8_t byte) {
  uint64_t x = (uint64_t)(uint32_t)from << 8 | byte;
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}

static uint64_t edge_hash_of(const void *ctx, int32_t pos) {
  const tk_edge *e = &((const tk_trie *)ctx)->edge[pos];
  return edge_hash(e->from, e->byte);
}

static bool edge_eq(const void *ctx, int32_t pos, const void *key) {
  const tk_edge *e = &((const tk_trie *)ctx)->edge[pos];
  const edge_key *k = key;
  return e->from == k->from && e->byte == k->byte;
}

static int32_t trie_next(const tk_trie *tr, int32_t node, uint8_t byte) {
  const edge_key k = {node, byte};
  const int32_t pos = sc_index_find(&tr->index, edge_hash(node, byte), edge_eq, tr, &k);
  return pos < 0 ? -1 : tr->edge[pos].to;
}

static int trie_node(tk_trie *tr, int32_t *out) {
  int32_t *v = tk_room(tr->term, tr->nnode, &tr->capnode, sizeof *v, 64);
  if (v == NULL) return SC_ENOMEM;
  tr->term = v;
  tr->term[tr->nnode] = -1;
  *out = (int32_t)tr->nnode++;
  return 0;
}

int tk_trie_add(tk_trie *tr, const char *s, size_t n, int32_t added_index) {
  int32_t node = 0;
  if (tr->nnode == 0) {
    if (sc_index_init(&tr->index, 256) != 0 || trie_node(tr, &node) != 0) return SC_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    const uint8_t b = (uint8_t)s[i];
    int32_t next = trie_next(tr, node, b);
    if (next < 0) {
      tk_edge *v = tk_room(tr->edge, tr->nedge, &tr->capedge, sizeof *v, 64);
      if (v == NULL) return SC_ENOMEM;
      tr->edge = v;
      if (trie_node(tr, &next) != 0) return SC_ENOMEM;
      tr->edge[tr->nedge] = (tk_edge){node, next, b};
      if (sc_index_put(&tr->index, edge_hash(node, b), (int32_t)tr->nedge, edge_hash_of, tr) != 0)
        return SC_ENOMEM;
      tr->nedge++;
    }
    node = next;
  }
  if (tr->term[node] >= 0) return tr->term[node] + 1; /* two tokens, one string */
  tr->term[node] = added_index;
  tr->first[(uint8_t)s[0]] = true;
  return 0;
}

void tk_trie_free(tk_trie *tr) {
  free(tr->edge);
  free(tr->term);
  sc_index_free(&tr->index);
  *tr = (tk_trie){0};
}

/* ---- the per-call state ------------------------------------------------------------ */

typedef struct seg {
  size_t off, len;
  int32_t id; /* an added token, or -1 for text */
} seg;

typedef struct segs {
  seg *v;
  size_t n, cap;
} segs;

typedef struct enc {
  const sc_tokenizer *t;
  tk_matcher *m;        /* [nnorm + npre + 1]: normalizers, pre-tokenizers, gpt2 */
  pcre2_match_data *wmd; /* single_word's \w */
  tk_bpe_work w;
  int32_t *ids;
  size_t n, cap;
  sc_tok_text norm, tmp, buf[2];
  tk_spans sp[2], cover;
  sc_diag *d;
} enc;

static int seg_add(segs *s, size_t off, size_t len, int32_t id) {
  seg *v = tk_room(s->v, s->n, &s->cap, sizeof *v, 16);
  if (v == NULL) return SC_ENOMEM;
  s->v = v;
  s->v[s->n++] = (seg){off, len, id};
  return 0;
}

static int ids_add(enc *e, int32_t id) { return tk_ids_push(&e->ids, &e->n, &e->cap, id); }

/* ---- added tokens (added_vocabulary.rs find_matches) -------------------------------- */

/* Rust regex's \w (Alphabetic, M, Nd, Pc, Join_Control) on the code point at s[i..]. */
static bool word_at(enc *e, const char *s, size_t n, size_t i) {
  const size_t l = tk_utf8_len((const uint8_t *)s + i, n - i);
  if (l == 0 || e->t->word == NULL) return false;
  if (e->wmd == NULL && (e->wmd = pcre2_match_data_create(1, NULL)) == NULL) return false;
  return pcre2_match(e->t->word, (PCRE2_SPTR)s + i, l, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK,
                     e->wmd, NULL) >= 0;
}

static size_t prev_char(const char *s, size_t i) {
  do i--;
  while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80);
  return i;
}

static uint32_t cp_at(const char *s, size_t n, size_t i, size_t *len) {
  *len = tk_utf8_len((const uint8_t *)s + i, n - i);
  return *len ? tk_utf8_get((const uint8_t *)s + i, *len) : 0;
}

/* Leftmost-longest match of the trie at or after from: 1 with [*st, *en) and the added
 * token's index, 0 when none. */
static int trie_find(const tk_trie *tr, const char *s, size_t n, size_t from, size_t *st,
                     size_t *en, int32_t *which) {
  if (tr->nnode == 0) return 0;
  for (size_t p = from; p < n; p++) {
    if (!tr->first[(uint8_t)s[p]]) continue;
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t q = p; q < n; q++) {
      node = trie_next(tr, node, (uint8_t)s[q]);
      if (node < 0) break;
      if (tr->term[node] >= 0) {
        best = tr->term[node];
        best_end = q + 1;
      }
    }
    if (best >= 0) {
      *st = p;
      *en = best_end;
      *which = best;
      return 1;
    }
  }
  return 0;
}

static int split_added(enc *e, const tk_trie *tr, const char *s, size_t n, segs *out) {
  const sc_tokenizer *t = e->t;
  size_t start_offset = 0, from = 0, st, en;
  int32_t which;
  while (from < n && trie_find(tr, s, n, from, &st, &en, &which)) {
    from = en; /* the iterator resumes after the match, whatever happens to it below */
    const tk_added *a = &t->added[which];
    size_t start = st, stop = en;
    if (a->single_word) {
      const bool start_space = start == 0 || !word_at(e, s, n, prev_char(s, start));
      const bool stop_space = stop == n || !word_at(e, s, n, stop);
      if (!start_space || !stop_space) continue;
    }
    if (a->lstrip) {
      size_t ns = start, l;
      while (ns > 0) {
        const size_t p = prev_char(s, ns);
        if (!tk_is_space(cp_at(s, n, p, &l))) break;
        ns = p;
      }
      start = ns > start_offset ? ns : start_offset;
    }
    if (a->rstrip) {
      size_t l;
      while (stop < n && tk_is_space(cp_at(s, n, stop, &l))) stop += l;
    }
    if (start_offset < start && seg_add(out, start_offset, start - start_offset, -1) != 0)
      return SC_ENOMEM;
    if (seg_add(out, start, stop - start, a->id) != 0) return SC_ENOMEM;
    start_offset = stop;
  }
  if (start_offset != n && seg_add(out, start_offset, n - start_offset, -1) != 0)
    return SC_ENOMEM;
  return 0;
}

/* ---- normalizers ------------------------------------------------------------------- */

int tk_normalize(const sc_tokenizer *t, tk_matcher *m, const char *s, size_t n,
                 sc_tok_text *out, sc_tok_text *tmp, tk_spans *cover, sc_diag *d) {
  out->len = 0;
  if (tk_text_put(out, s, n) != 0) return SC_ENOMEM;
  for (size_t i = 0; i < t->nnorm; i++) {
    const tk_norm *z = &t->norm[i];
    tmp->len = 0;
    if (z->kind == TK_NORM_PREPEND) {
      if (out->len == 0) continue;
      if (tk_text_put(tmp, tk_str(t, z->str), z->str.len) != 0 ||
          tk_text_put(tmp, out->data, out->len) != 0)
        return SC_ENOMEM;
    } else {
      cover->n = 0;
      const int rc = tk_pattern_cover(&z->pat, &m[i], out->data, out->len, cover, d);
      if (rc != 0) return rc;
      for (size_t k = 0; k < cover->n; k++) {
        const bool hit = cover->flag[k];
        const char *p = hit ? tk_str(t, z->str) : out->data + cover->v[k].off;
        const size_t l = hit ? z->str.len : cover->v[k].len;
        if (l && tk_text_put(tmp, p, l) != 0) return SC_ENOMEM;
      }
    }
    const sc_tok_text x = *out;
    *out = *tmp;
    *tmp = x;
  }
  return 0;
}

/* ---- pre-tokenizers --------------------------------------------------------------- */

/* The GPT-2 byte <-> unicode map: printable Latin-1 bytes stand for themselves, the
 * others for U+0100 upwards in byte order. */
static bool printable(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

void tk_bytelevel_tables(sc_tokenizer *t) {
  unsigned k = 0;
  for (unsigned i = 0; i < 0x144; i++) t->bl_dec[i] = -1;
  for (unsigned b = 0; b < 256; b++) {
    const uint32_t cp = printable(b) ? b : 256 + k++;
    t->bl_enc[b][0] = (uint8_t)tk_utf8_put(cp, &t->bl_enc[b][1]);
    t->bl_dec[cp] = (int16_t)b;
  }
}

/* Grows the piece p to the end of v. */
static void extend(tk_span *p, tk_span v) { p->len = v.off + v.len - p->off; }

/* Split's behaviours (normalizer.rs NormalizedString::split) over a cover; keeps the
 * non-empty pieces, offsets shifted by base. */
static int behave(const tk_spans *c, int behavior, bool invert, size_t base, tk_spans *out) {
  const size_t first = out->n;
  int rc = 0;
  bool prev = false;
  for (size_t k = 0; k < c->n && rc == 0; k++) {
    const bool hit = c->flag[k] != invert;
    const tk_span v = c->v[k];
    switch (behavior) {
      case TK_SPLIT_ISOLATED: rc = tk_spans_add(out, v.off, v.len, false); break;
      case TK_SPLIT_REMOVED:
        if (!hit) rc = tk_spans_add(out, v.off, v.len, false);
        break;
      case TK_SPLIT_CONTIGUOUS:
        if (hit == prev && out->n > first) extend(&out->v[out->n - 1], v);
        else rc = tk_spans_add(out, v.off, v.len, false);
        break;
      case TK_SPLIT_PREVIOUS:
        if (hit && !prev && out->n > first) extend(&out->v[out->n - 1], v);
        else rc = tk_spans_add(out, v.off, v.len, false);
        break;
      default: break; /* TK_SPLIT_NEXT: below */
    }
    prev = hit;
  }
  if (behavior == TK_SPLIT_NEXT) { /* the same fold, from the right */
    prev = false;
    for (size_t k = c->n; k-- > 0 && rc == 0;) {
      const bool hit = c->flag[k] != invert;
      const tk_span v = c->v[k];
      if (hit && !prev && out->n > first) {
        tk_span *l = &out->v[out->n - 1];
        l->len = l->off + l->len - v.off;
        l->off = v.off;
      } else {
        rc = tk_spans_add(out, v.off, v.len, false);
      }
      prev = hit;
    }
    for (size_t i = first, j = out->n; i + 1 < j; i++, j--) { /* back into order */
      const tk_span x = out->v[i];
      out->v[i] = out->v[j - 1];
      out->v[j - 1] = x;
    }
  }
  size_t k = first; /* empty pieces are dropped (PreTokenizedString::split) */
  for (size_t i = first; i < out->n; i++) {
    if (out->v[i].len == 0) continue;
    out->v[k] = out->v[i];
    out->v[k].off += base;
    out->flag[k++] = 0;
  }
  out->n = k;
  return rc;
}

static int byte_level(enc *e, const tk_pre *p, const sc_tok_text *in, const tk_spans *pieces,
                      sc_tok_text *out, tk_spans *res) {
  const sc_tokenizer *t = e->t;
  for (size_t k = 0; k < pieces->n; k++) {
    const char *s = in->data + pieces->v[k].off;
    size_t n = pieces->v[k].len;
    e->tmp.len = 0;
    if (p->add_prefix_space && s[0] != ' ') {
      if (tk_text_put(&e->tmp, " ", 1) != 0 || tk_text_put(&e->tmp, s, n) != 0) return SC_ENOMEM;
      s = e->tmp.data;
      n = e->tmp.len;
    }
    e->cover.n = 0;
    if (p->use_regex) {
      tk_spans c = {0};
      int rc = tk_pattern_cover(&t->gpt2, &e->m[t->nnorm + t->npre], s, n, &c, e->d);
      if (rc == 0) rc = behave(&c, TK_SPLIT_ISOLATED, false, 0, &e->cover);
      tk_spans_free(&c);
      if (rc != 0) return rc;
    } else if (tk_spans_add(&e->cover, 0, n, false) != 0) {
      return SC_ENOMEM;
    }
    for (size_t j = 0; j < e->cover.n; j++) {
      const size_t off = out->len;
      for (size_t i = 0; i < e->cover.v[j].len; i++) {
        const uint8_t *u = t->bl_enc[(uint8_t)s[e->cover.v[j].off + i]];
        if (tk_text_put(out, u + 1, u[0]) != 0) return SC_ENOMEM;
      }
      if (tk_spans_add(res, off, out->len - off, false) != 0) return SC_ENOMEM;
    }
  }
  return 0;
}

/* Pre-tokenizes s[0..n) and runs the model on every pre-token. */
static int encode_piece(enc *e, const char *s, size_t n) {
  const sc_tokenizer *t = e->t;
  sc_tok_text *in = &e->buf[0], *out = &e->buf[1];
  tk_spans *pin = &e->sp[0], *pout = &e->sp[1];
  in->len = 0;
  pin->n = 0;
  if (tk_text_put(in, s, n) != 0 || tk_spans_add(pin, 0, n, false) != 0) return SC_ENOMEM;
  for (size_t i = 0; i < t->npre; i++) {
    const tk_pre *p = &t->pre[i];
    pout->n = 0;
    if (p->kind == TK_PRE_SPLIT) {
      for (size_t k = 0; k < pin->n; k++) {
        e->cover.n = 0;
        int rc = tk_pattern_cover(&p->pat, &e->m[t->nnorm + i], in->data + pin->v[k].off,
                                  pin->v[k].len, &e->cover, e->d);
        if (rc == 0) rc = behave(&e->cover, p->behavior, p->invert, pin->v[k].off, pout);
        if (rc != 0) return rc;
      }
    } else {
      out->len = 0;
      const int rc = byte_level(e, p, in, pin, out, pout);
      if (rc != 0) return rc;
      sc_tok_text x = *in;
      *in = *out;
      *out = x;
    }
    tk_spans y = *pin;
    *pin = *pout;
    *pout = y;
  }
  for (size_t k = 0; k < pin->n; k++) {
    const int rc = tk_bpe_encode(t, &e->w, in->data + pin->v[k].off, pin->v[k].len, &e->ids,
                                 &e->n, &e->cap, e->d);
    if (rc != 0) return rc;
  }
  return 0;
}

/* ---- encode ------------------------------------------------------------------------ */

static int encode_text(enc *e, const char *text, size_t len) {
  const sc_tokenizer *t = e->t;
  segs raw = {0}, norm = {0};
  int rc = split_added(e, &t->trie_raw, text, len, &raw);
  for (size_t i = 0; i < raw.n && rc == 0; i++) {
    if (raw.v[i].id >= 0) {
      rc = ids_add(e, raw.v[i].id);
      continue;
    }
    if (raw.v[i].len == 0) continue;
    rc = tk_normalize(t, e->m, text + raw.v[i].off, raw.v[i].len, &e->norm, &e->tmp, &e->cover,
                      e->d);
    norm.n = 0;
    if (rc == 0) rc = split_added(e, &t->trie_norm, e->norm.data, e->norm.len, &norm);
    for (size_t k = 0; k < norm.n && rc == 0; k++) {
      if (norm.v[k].id >= 0) rc = ids_add(e, norm.v[k].id);
      else if (norm.v[k].len > 0) rc = encode_piece(e, e->norm.data + norm.v[k].off, norm.v[k].len);
    }
  }
  free(raw.v);
  free(norm.v);
  return rc;
}

/* TemplateProcessing's single template, each template of the chain in turn. */
static int post_process(enc *e) {
  const sc_tokenizer *t = e->t;
  for (size_t i = 0; i < t->ntmpl; i++) {
    int32_t *seq = e->ids;
    const size_t nseq = e->n;
    e->ids = NULL;
    e->n = e->cap = 0;
    int rc = 0;
    for (size_t k = 0; k < t->tmpl[i].npiece && rc == 0; k++) {
      const tk_piece *p = &t->tmpl[i].piece[k];
      if (p->seq) {
        for (size_t j = 0; j < nseq && rc == 0; j++) rc = ids_add(e, seq[j]);
      } else {
        for (size_t j = 0; j < p->n && rc == 0; j++) rc = ids_add(e, t->tmpl_ids[p->off + j]);
      }
    }
    free(seq);
    if (rc != 0) return rc;
  }
  return 0;
}

int sc_tokenizer_encode(const sc_tokenizer *t, const char *text, size_t len, bool add_special,
                        int32_t **ids, size_t *n, sc_diag *d) {
  *ids = NULL;
  *n = 0;
  if (text == NULL && len > 0) return sc_fail(d, SC_EINVAL, "encode: text is NULL");
  if (len > SC_TOK_MAX_TEXT)
    return sc_fail(d, SC_ETOOBIG, "encode: the text has %zu bytes, more than the %zu allowed",
                   len, SC_TOK_MAX_TEXT);
  const size_t bad = len ? tk_utf8_check((const uint8_t *)text, len) : 0;
  if (bad < len)
    return sc_fail(d, SC_EINVAL, "encode: the text is not valid UTF-8 at byte %zu (0x%02X)",
                   bad, (unsigned)(uint8_t)text[bad]);
  enc e = {.t = t, .d = d};
  e.m = calloc(t->nnorm + t->npre + 1, sizeof *e.m);
  int rc = e.m ? 0 : SC_ENOMEM;
  if (rc == 0) rc = encode_text(&e, len ? text : "", len);
  if (rc == 0 && add_special) rc = post_process(&e);
  for (size_t i = 0; e.m && i < t->nnorm + t->npre + 1; i++) tk_matcher_free(&e.m[i]);
  free(e.m);
  if (e.wmd) pcre2_match_data_free(e.wmd);
  tk_bpe_work_free(&e.w);
  free(e.norm.data);
  free(e.tmp.data);
  free(e.buf[0].data);
  free(e.buf[1].data);
  tk_spans_free(&e.sp[0]);
  tk_spans_free(&e.sp[1]);
  tk_spans_free(&e.cover);
  if (rc != 0) {
    free(e.ids);
    return rc == SC_ENOMEM ? sc_fail(d, rc, "encode: out of memory") : rc;
  }
  if (e.n == 0) free(e.ids);
  *ids = e.n ? e.ids : NULL;
  *n = e.n;
  return 0;
}

/* ---- queries ----------------------------------------------------------------------- */

int32_t sc_tokenizer_vocab_size(const sc_tokenizer *t) { return t->vocab_size; }

int32_t sc_tokenizer_find(const sc_tokenizer *t, const char *token) {
  const size_t n = strlen(token);
  const int32_t id = tk_added_find(t, token, n);
  return id >= 0 ? id : tk_bpe_find(t, token, n);
}

const char *sc_tokenizer_token(const sc_tokenizer *t, int32_t id, size_t *len) {
  if (id < 0 || id >= t->vocab_size || t->dec_str[id].len == SIZE_MAX) return NULL;
  if (len) *len = t->dec_str[id].len;
  return tk_str(t, t->dec_str[id]);
}

bool sc_tokenizer_is_special(const sc_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->vocab_size && t->special[id];
}
