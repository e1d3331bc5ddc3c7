/* tokenizer_bpe.c - the BPE model of tokenizer.json: vocabulary and merge tables, and
 * HF's merge loop (models/bpe/word.rs): a min-heap of candidate merges ordered by
 * (rank, position), each popped candidate checked against the pair it now stands for,
 * so a word of n characters costs O(n log n). */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "model/tokenizer_int.h"

typedef struct tk_sym {
  int32_t id, prev, next;
  bool dead;
} tk_sym;

typedef struct tk_cand {
  uint32_t rank, pos;
  int32_t id;
} tk_cand;

static uint64_t vocab_hash_of(const void *ctx, int32_t pos) {
  const sc_tokenizer *t = ctx;
  return tk_hash_bytes(tk_str(t, t->bpe.tok[pos]), t->bpe.tok[pos].len);
}

static bool vocab_eq(const void *ctx, int32_t pos, const void *key) {
  const sc_tokenizer *t = ctx;
  const tk_key *k = key;
  return t->bpe.tok[pos].len == k->n && memcmp(tk_str(t, t->bpe.tok[pos]), k->s, k->n) == 0;
}

static uint64_t pair_hash(int32_t a, int32_t b) {
  return sc_mix64((uint64_t)(uint32_t)a << 32 | (uint32_t)b);
}

static uint64_t pair_hash_of(const void *ctx, int32_t pos) {
  const tk_merge *m = &((const sc_tokenizer *)ctx)->bpe.merge[pos];
  return pair_hash(m->a, m->b);
}

static bool pair_eq(const void *ctx, int32_t pos, const void *key) {
  const tk_merge *m = &((const sc_tokenizer *)ctx)->bpe.merge[pos];
  const int32_t *k = key;
  return m->a == k[0] && m->b == k[1];
}

int32_t tk_bpe_find(const sc_tokenizer *t, const char *s, size_t n) {
  if (t->bpe.vocab.slot == NULL) return -1;
  const tk_key k = {s, n};
  return sc_index_find(&t->bpe.vocab, tk_hash_bytes(s, n), vocab_eq, t, &k);
}

static const tk_merge *pair_find(const sc_tokenizer *t, int32_t a, int32_t b) {
  const int32_t k[2] = {a, b};
  const int32_t pos = sc_index_find(&t->bpe.pairs, pair_hash(a, b), pair_eq, t, k);
  return pos < 0 ? NULL : &t->bpe.merge[pos];
}

int tk_bpe_add_token(sc_tokenizer *t, int32_t id, tk_span s, sc_diag *d) {
  tk_bpe *m = &t->bpe;
  if (m->vocab.slot == NULL && sc_index_init(&m->vocab, 1024) != 0) return SC_ENOMEM;
  if (m->pairs.slot == NULL && sc_index_init(&m->pairs, 1024) != 0) return SC_ENOMEM;
  if (id >= m->nids) {
    int32_t cap = m->nids ? m->nids : 256;
    while (cap <= id) cap *= 2;
    tk_span *v = realloc(m->tok, sizeof *v * (size_t)cap);
    if (v == NULL) return SC_ENOMEM;
    for (int32_t i = m->nids; i < cap; i++) v[i] = (tk_span){0, SIZE_MAX};
    m->tok = v;
    m->nids = cap; /* trimmed to max id + 1 by tk_bpe_finish */
  }
  if (m->tok[id].len != SIZE_MAX)
    return sc_fail(d, SC_EINVAL,
                   "model.vocab: id %d is given to two tokens, \"%.*s\" and \"%.*s\"", id,
                   (int)(m->tok[id].len > 60 ? 60 : m->tok[id].len), tk_str(t, m->tok[id]),
                   (int)(s.len > 60 ? 60 : s.len), tk_str(t, s));
  m->tok[id] = s;
  m->count++;
  return sc_index_put(&m->vocab, tk_hash_bytes(tk_str(t, s), s.len), id, vocab_hash_of, t);
}

int tk_bpe_add_merge(sc_tokenizer *t, const char *a, size_t na, const char *b, size_t nb,
                     uint32_t rank, sc_diag *d) {
  tk_bpe *m = &t->bpe;
  const int32_t ia = tk_bpe_find(t, a, na), ib = tk_bpe_find(t, b, nb);
  char stack[256];
  char *ab = na + nb <= sizeof stack ? stack : malloc(na + nb);
  if (ab == NULL) return SC_ENOMEM;
  memcpy(ab, a, na);
  memcpy(ab + na, b, nb);
  const int32_t iab = tk_bpe_find(t, ab, na + nb);
  if (ab != stack) free(ab);
  if (ia < 0 || ib < 0 || iab < 0) {
    const char *what = ia < 0   ? "its first token"
                       : ib < 0 ? "its second token"
                                : "the merged token";
    return sc_fail(d, SC_EINVAL,
                   "model.merges[%u] \"%.*s %.*s\": %s is not in the vocabulary", rank,
                   (int)(na > 60 ? 60 : na), a, (int)(nb > 60 ? 60 : nb), b, what);
  }
  const int32_t key[2] = {ia, ib};
  const int32_t pos = sc_index_find(&m->pairs, pair_hash(ia, ib), pair_eq, t, key);
  if (pos >= 0) { /* a pair given twice: the later one wins (a HashMap collect) */
    m->merge[pos].rank = rank;
    m->merge[pos].id = iab;
    return 0;
  }
  if (m->nmerge >= (size_t)INT32_MAX)
    return sc_fail(d, SC_ETOOBIG, "model.merges: too many merges");
  tk_merge *v = tk_room(m->merge, m->nmerge, &m->capmerge, sizeof *v, 256);
  if (v == NULL) return SC_ENOMEM;
  m->merge = v;
  m->merge[m->nmerge] = (tk_merge){ia, ib, iab, rank};
  const int rc = sc_index_put(&m->pairs, pair_hash(ia, ib), (int32_t)m->nmerge, pair_hash_of, t);
  if (rc != 0) return rc;
  m->nmerge++;
  return 0;
}

void tk_bpe_finish(sc_tokenizer *t) {
  tk_bpe *m = &t->bpe;
  while (m->nids > 0 && m->tok[m->nids - 1].len == SIZE_MAX) m->nids--;
  for (uint32_t cp = 0; cp < TK_SMALL_CHARS; cp++) {
    uint8_t u[4];
    const size_t l = tk_utf8_put(cp, u);
    m->small[cp] = (cp >= 0xD800 && cp < 0xE000) ? -1 : tk_bpe_find(t, (const char *)u, l);
  }
  for (int b = 0; b < 256; b++) {
    static const char hex[] = "0123456789ABCDEF";
    const char s[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'}; /* Rust's {:#04X} */
    m->byte_id[b] = tk_bpe_find(t, s, 6);
  }
}

void tk_bpe_free(tk_bpe *m) {
  free(m->tok);
  free(m->merge);
  sc_index_free(&m->vocab);
  sc_index_free(&m->pairs);
  *m = (tk_bpe){0};
}

void tk_bpe_work_free(tk_bpe_work *w) {
  free(w->sym);
  free(w->heap);
  *w = (tk_bpe_work){0};
}

/* ---- the merge loop ----------------------------------------------------------------- */

static bool before(const tk_cand *x, const tk_cand *y) {
  return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static void heap_push(tk_cand *h, size_t *n, tk_cand c) {
  size_t i = (*n)++;
  while (i > 0) {
    const size_t p = (i - 1) / 2;
    if (!before(&c, &h[p])) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = c;
}

static tk_cand heap_pop(tk_cand *h, size_t *n) {
  const tk_cand top = h[0];
  const tk_cand last = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && before(&h[c + 1], &h[c])) c++;
    if (!before(&h[c], &last)) break;
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) h[i] = last;
  return top;
}

static int sym_add(tk_bpe_work *w, size_t *n, int32_t id) {
  tk_sym *v = tk_room(w->sym, *n, &w->capsym, sizeof *v, 256);
  if (v == NULL) return SC_ENOMEM;
  w->sym = v;
  const int32_t i = (int32_t)*n;
  if (i > 0) w->sym[i - 1].next = i;
  w->sym[(*n)++] = (tk_sym){id, i - 1, -1, false};
  return 0;
}

/* HF's BPE::merge_word: characters to symbols (the vocabulary, else byte fallback,
 * else unk, else the character is dropped, as HF does). */
static int symbols(const sc_tokenizer *t, tk_bpe_work *w, const char *s, size_t n,
                   size_t *nsym, sc_diag *d) {
  const tk_bpe *m = &t->bpe;
  int32_t unk = -1; /* a pending unk symbol */
  int rc = 0;
  *nsym = 0;
  for (size_t i = 0; i < n && rc == 0;) {
    const uint8_t *u = (const uint8_t *)s + i;
    const size_t l = tk_utf8_len(u, n - i);
    if (l == 0) return sc_fail(d, SC_EINVAL, "a pre-token is not valid UTF-8"); /* cannot happen */
    const uint32_t cp = tk_utf8_get(u, l);
    const int32_t id = cp < TK_SMALL_CHARS ? m->small[cp] : tk_bpe_find(t, s + i, l);
    i += l;
    if (id >= 0) {
      if (unk >= 0) rc = sym_add(w, nsym, unk);
      unk = -1;
      if (rc == 0) rc = sym_add(w, nsym, id);
      continue;
    }
    if (m->byte_fallback) {
      bool all = true;
      for (size_t k = 0; k < l; k++) all = all && m->byte_id[u[k]] >= 0;
      if (all) { /* (HF adds these before a pending unk) */
        for (size_t k = 0; k < l && rc == 0; k++) rc = sym_add(w, nsym, m->byte_id[u[k]]);
        continue;
      }
    }
    if (m->unk == -2) return sc_fail(d, SC_EINVAL, "model.unk_token is not in the vocabulary");
    if (m->unk >= 0) {
      if (unk >= 0 && !m->fuse_unk) rc = sym_add(w, nsym, unk);
      unk = m->unk;
    }
  }
  if (rc == 0 && unk >= 0) rc = sym_add(w, nsym, unk);
  return rc;
}

int tk_bpe_encode(const sc_tokenizer *t, tk_bpe_work *w, const char *s, size_t n,
                  int32_t **out, size_t *nout, size_t *capout, sc_diag *d) {
  if (n == 0) return 0;
  if (t->bpe.ignore_merges) {
    const int32_t id = tk_bpe_find(t, s, n);
    if (id >= 0) return tk_ids_push(out, nout, capout, id);
  }
  size_t nsym = 0;
  int rc = symbols(t, w, s, n, &nsym, d);
  if (rc != 0) return rc;
  if (nsym > 1) {
    if (w->capheap < 3 * nsym) { /* initial pairs + two per merge */
      tk_cand *h = realloc(w->heap, sizeof *h * 3 * nsym);
      if (h == NULL) return SC_ENOMEM;
      w->heap = h;
      w->capheap = 3 * nsym;
    }
    tk_sym *y = w->sym;
    tk_cand *h = w->heap;
    size_t nh = 0;
    for (size_t i = 0; i + 1 < nsym; i++) {
      const tk_merge *mg = pair_find(t, y[i].id, y[i + 1].id);
      if (mg) heap_push(h, &nh, (tk_cand){mg->rank, (uint32_t)i, mg->id});
    }
    while (nh > 0) {
      const tk_cand top = heap_pop(h, &nh);
      tk_sym *cur = &y[top.pos];
      if (cur->dead || cur->next < 0) continue;
      tk_sym *right = &y[cur->next];
      const tk_merge *mg = pair_find(t, cur->id, right->id);
      if (mg == NULL || mg->id != top.id) continue; /* stale */
      cur->id = top.id;
      cur->next = right->next;
      right->dead = true;
      if (cur->next >= 0) y[cur->next].prev = (int32_t)top.pos;
      if (cur->prev >= 0) {
        const tk_merge *p = pair_find(t, y[cur->prev].id, cur->id);
        if (p) heap_push(h, &nh, (tk_cand){p->rank, (uint32_t)cur->prev, p->id});
      }
      if (cur->next >= 0) {
        const tk_merge *q = pair_find(t, cur->id, y[cur->next].id);
        if (q) heap_push(h, &nh, (tk_cand){q->rank, top.pos, q->id});
      }
    }
  }
  for (size_t i = 0; i < nsym && rc == 0; i++)
    if (!w->sym[i].dead) rc = tk_ids_push(out, nout, capout, w->sym[i].id);
  return rc;
}
