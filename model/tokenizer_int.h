/* tokenizer_int.h - the inside of sc_tokenizer, shared by model/tokenizer*.c only (not an
 * API). tokenizer_load.c and tokenizer_pipes.c fill it from tokenizer.json;
 * tokenizer_text.c has the buffers and UTF-8; tokenizer_onig.c translates Oniguruma
 * patterns, tokenizer_regex.c runs them; tokenizer_bpe.c is the BPE model; tokenizer.c
 * encodes; tokenizer_decode.c decodes. Strings live in one arena (t->arena) and are
 * named by spans (offsets), so the arena may grow while loading.
 */
#ifndef SC_TOKENIZER_INT_H
#define SC_TOKENIZER_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/index.h"
#include "model/tokenizer.h"

/* A byte range of a buffer (the arena, or a piece buffer while encoding). */
typedef struct tk_span {
  size_t off, len;
} tk_span;

/* A growable array of spans; flag marks a regex match in a cover (tk_pattern_cover). */
typedef struct tk_spans {
  tk_span *v;
  uint8_t *flag;
  size_t n, cap;
} tk_spans;

/* An array of *cap elements of size bytes holding n, with room for one more: v itself,
 * or v grown by doubling (first elements to start with), or NULL when out of memory
 * (v is then unchanged). */
void *tk_room(void *v, size_t n, size_t *cap, size_t size, size_t first);
/* Appends id to the growable array *v of *n ids; 0 or SC_ENOMEM. */
int tk_ids_push(int32_t **v, size_t *n, size_t *cap, int32_t id);
/* A string key for the hash indexes. */
typedef struct tk_key {
  const char *s;
  size_t n;
} tk_key;

int tk_spans_add(tk_spans *s, size_t off, size_t len, bool flag);
void tk_spans_free(tk_spans *s);
/* Appends n bytes to b (growing it); 0 or SC_ENOMEM. */
int tk_text_put(sc_tok_text *b, const void *p, size_t n);

/* ---- UTF-8 ---------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..n) (1-4), or 0 when s does not start with
 * one: the rules of Unicode Table 3-7 (no overlongs, surrogates, or values > U+10FFFF). */
size_t tk_utf8_len(const uint8_t *s, size_t n);
/* The code point of the valid sequence at s (of length tk_utf8_len). */
uint32_t tk_utf8_get(const uint8_t *s, size_t len);
/* Writes cp as UTF-8 into out (4 bytes of room); returns the length. */
size_t tk_utf8_put(uint32_t cp, uint8_t *out);
/* Length of the maximal invalid subpart at s[0..n) when tk_utf8_len says 0 (>= 1), and
 * whether it is the valid start of a sequence cut short by the end of s. */
size_t tk_utf8_bad(const uint8_t *s, size_t n, bool *cut);
/* The offset of the first invalid byte of s[0..n), or n when all of it is valid. */
size_t tk_utf8_check(const uint8_t *s, size_t n);
/* Unicode White_Space (Oniguruma's \s and Rust regex's \s: the same 25 characters). */
bool tk_is_space(uint32_t cp);

/* ---- patterns (tokenizer_onig.c, tokenizer_regex.c) ------------------------------ */

/* A Split or Replace pattern: a literal string (HF escapes String patterns) or a
 * regex translated from Oniguruma and compiled by PCRE2. */
typedef struct tk_pattern {
  char *source;  /* as written, NUL-terminated, for messages */
  char *lit;     /* String pattern (code is NULL) */
  size_t nlit;
  pcre2_code *code;
} tk_pattern;

/* Compiles a pattern; what names its place in tokenizer.json for messages. SC_ENOTSUP
 * for an Oniguruma construct that is not translated, SC_EINVAL for a bad pattern; on
 * failure p holds nothing (tk_pattern_free is not needed). */
int tk_pattern_init(tk_pattern *p, bool regex, const char *src, size_t len, const char *what,
                    sc_diag *d);
void tk_pattern_free(tk_pattern *p);
/* Translates an Oniguruma pattern into PCRE2 syntax (out: NUL-terminated, malloc'd). */
int tk_onig_to_pcre2(const char *src, size_t len, char **out, sc_diag *d);

/* Per-call matching state (one per thread and pattern): PCRE2 match data. */
typedef struct tk_matcher {
  pcre2_match_data *md;
  pcre2_match_context *mc;
} tk_matcher;
void tk_matcher_free(tk_matcher *m);

/* HF's Pattern::find_matches: the cover of s[0..n) by matches (flag 1) and the text
 * between them (flag 0), in order, appended to out. Onig's find_iter rules: an empty
 * match right after the previous match is skipped by one character. */
int tk_pattern_cover(const tk_pattern *p, tk_matcher *m, const char *s, size_t n,
                     tk_spans *out, sc_diag *d);

/* ---- the BPE model (tokenizer_bpe.c) ---------------------------------------------- */

typedef struct tk_merge {
  int32_t a, b, id;
  uint32_t rank;
} tk_merge;

#define TK_SMALL_CHARS 0x800 /* one-character tokens below this have a direct table */

typedef struct tk_bpe {
  int32_t nids;        /* max id + 1 of the vocabulary */
  int32_t count;       /* entries in the vocabulary */
  tk_span *tok;        /* [nids] token strings in the arena; len SIZE_MAX: no token */
  sc_index vocab;      /* by string, positions are ids */
  tk_merge *merge;     /* [nmerge] */
  size_t nmerge, capmerge;
  sc_index pairs;      /* by (a, b), positions into merge */
  int32_t byte_id[256]; /* "<0xHH>" tokens (byte_fallback), -1 when absent */
  int32_t small[TK_SMALL_CHARS]; /* the token of each small code point alone, or -1 */
  int32_t unk;         /* -1: none; -2: unk_token names no token (an error when needed) */
  bool fuse_unk, byte_fallback, ignore_merges;
} tk_bpe;

struct sc_tokenizer; /* the arena holder */

/* The id of the string s[0..n) in the vocabulary, or -1. */
int32_t tk_bpe_find(const struct sc_tokenizer *t, const char *s, size_t n);
/* Adds the vocabulary entry id -> string (a span in the arena); SC_EINVAL when the id
 * already has a token (a string cannot come twice: the JSON reader refuses duplicate
 * keys). */
int tk_bpe_add_token(struct sc_tokenizer *t, int32_t id, tk_span s, sc_diag *d);
/* Adds merge number rank "a b"; SC_EINVAL naming the merge when a, b or a+b is not in
 * the vocabulary. A pair given twice keeps the later rank, as HF does. */
int tk_bpe_add_merge(struct sc_tokenizer *t, const char *a, size_t na, const char *b,
                     size_t nb, uint32_t rank, sc_diag *d);
/* Builds the small-character table once the vocabulary is complete. */
void tk_bpe_finish(struct sc_tokenizer *t);
void tk_bpe_free(tk_bpe *m);

/* Scratch of the merge loop, reused across pieces of one encode call. */
typedef struct tk_bpe_work {
  struct tk_sym *sym;
  size_t capsym;
  struct tk_cand *heap;
  size_t capheap;
} tk_bpe_work;
void tk_bpe_work_free(tk_bpe_work *w);

/* HF's BPE::tokenize of one pre-token s[0..n) (valid UTF-8): appends its ids to out. */
int tk_bpe_encode(const struct sc_tokenizer *t, tk_bpe_work *w, const char *s, size_t n,
                  int32_t **out, size_t *nout, size_t *capout, sc_diag *d);

/* ---- the rest of the tokenizer ---------------------------------------------------- */

enum { TK_NORM_PREPEND, TK_NORM_REPLACE };
typedef struct tk_norm {
  int kind;
  tk_span str;      /* Prepend: what; Replace: the content */
  tk_pattern pat;   /* Replace */
} tk_norm;

enum { TK_SPLIT_ISOLATED, TK_SPLIT_REMOVED, TK_SPLIT_PREVIOUS, TK_SPLIT_NEXT,
       TK_SPLIT_CONTIGUOUS };
enum { TK_PRE_SPLIT, TK_PRE_BYTELEVEL };
typedef struct tk_pre {
  int kind;
  tk_pattern pat;   /* Split */
  int behavior;
  bool invert;
  bool add_prefix_space, use_regex; /* ByteLevel */
} tk_pre;

typedef struct tk_added {
  tk_span content;  /* as written */
  tk_span norm;     /* matched against (the normalizer's output for normalized tokens) */
  int32_t id;
  bool single_word, lstrip, rstrip, normalized, special;
} tk_added;

typedef struct tk_name {
  tk_span content;
  int32_t id;
  bool special; /* added as special at least once (HF's special set only grows) */
} tk_name;

/* The id of an added token's content, or -1. */
int32_t tk_added_find(const struct sc_tokenizer *t, const char *s, size_t n);

/* A byte trie over added-token strings: edges (node, byte) -> node in a hash index. */
typedef struct tk_edge {
  int32_t from, to;
  uint8_t byte;
} tk_edge;
typedef struct tk_trie {
  tk_edge *edge;
  size_t nedge, capedge;
  sc_index index;
  int32_t *term;    /* [nnode] index into t->added of the token ending here, or -1 */
  size_t nnode, capnode;
  bool first[256];  /* bytes that start some token */
} tk_trie;

enum { TK_DEC_BYTELEVEL, TK_DEC_BYTEFALLBACK, TK_DEC_FUSE, TK_DEC_REPLACE, TK_DEC_STRIP,
       TK_DEC_METASPACE };
typedef struct tk_dec {
  int kind;
  tk_pattern pat;   /* Replace */
  tk_span content;  /* Replace */
  uint32_t ch;      /* Strip: the character; Metaspace: the replacement */
  size_t start;     /* Strip */
  bool prepend;     /* Metaspace: prepend_scheme is not "never" */
  bool fused;       /* a fusing stage (ByteLevel, Fuse) runs before this one */
} tk_dec;

/* One TemplateProcessing single template: pieces are the sequence (ids span empty and
 * seq true) or a special token's ids (a span of t->tmpl_ids). */
typedef struct tk_piece {
  bool seq;
  size_t off, n;
} tk_piece;
typedef struct tk_template {
  tk_piece *piece;
  size_t npiece;
} tk_template;

struct sc_tokenizer {
  sc_tok_text arena;
  tk_bpe bpe;
  tk_norm norm[SC_TOK_MAX_STAGES];
  size_t nnorm;
  tk_pre pre[SC_TOK_MAX_STAGES];
  size_t npre;
  tk_pattern gpt2;    /* ByteLevel's use_regex pattern (compiled when used) */
  bool has_gpt2;
  tk_added *added;    /* HF's added_tokens_map_r: one entry per id */
  size_t nadded, capadded;
  sc_index added_by_id; /* positions into added */
  tk_name *names;     /* HF's added_tokens_map: content -> id */
  size_t nnames, capnames;
  sc_index names_by_content; /* positions into names */
  tk_trie trie_raw;   /* normalized false */
  tk_trie trie_norm;  /* normalized true */
  pcre2_code *word;   /* Rust regex's \w, for single_word */
  tk_template *tmpl;
  size_t ntmpl;
  int32_t *tmpl_ids;
  size_t ntmpl_ids;
  bool has_decoder;
  tk_dec dec[SC_TOK_MAX_STAGES];
  size_t ndec;
  uint8_t bl_enc[256][3]; /* ByteLevel: byte -> its character, UTF-8 (length first) */
  int16_t bl_dec[0x144];  /* ByteLevel: character -> byte, or -1 */
  int32_t vocab_size;
  tk_span *dec_str;   /* [vocab_size] what decode sees for each id; len SIZE_MAX: none */
  uint8_t *special;   /* [vocab_size] 1: skipped by decode with skip_special */
};

static inline const char *tk_str(const struct sc_tokenizer *t, tk_span s) {
  return t->arena.data + s.off;
}

/* Runs the normalizer chain on s[0..n) into out (replacing its contents); m holds one
 * matcher per normalizer, tmp and cover are scratch. */
int tk_normalize(const struct sc_tokenizer *t, tk_matcher *m, const char *s, size_t n,
                 sc_tok_text *out, sc_tok_text *tmp, tk_spans *cover, sc_diag *d);
/* Adds an added token to a trie (index into t->added, string pattern): 0, SC_ENOMEM, or
 * 1 + the index of another token already there with the same string. */
int tk_trie_add(tk_trie *tr, const char *s, size_t n, int32_t added_index);
void tk_trie_free(tk_trie *tr);

/* ---- reading tokenizer.json (tokenizer_load.c, tokenizer_pipes.c) ---------------- */

#define TK_WHERE_MAX 96 /* a place in tokenizer.json, for messages */

/* Copies s[0..n) into the arena; 0 or SC_ENOMEM. */
int tk_arena_add(struct sc_tokenizer *t, const char *s, size_t n, tk_span *out);
/* JSON null, or absent. */
bool tk_json_null(const json_t *v);
/* obj must be an object with a "type" string (*type); where names obj. */
int tk_json_type(const json_t *obj, const char *where, const char **type, sc_diag *d);
/* obj[key] as a bool (dflt when null or absent) / as a string; where names obj. */
int tk_json_bool(const json_t *obj, const char *key, bool dflt, bool *out, const char *where,
                 sc_diag *d);
int tk_json_string(const json_t *obj, const char *key, const char **s, size_t *n,
                   const char *where, sc_diag *d);
/* The pipelines (null is none): fill t->norm, t->pre, t->tmpl, t->dec. */
int tk_load_normalizer(struct sc_tokenizer *t, const json_t *v, sc_diag *d);
int tk_load_pre_tokenizer(struct sc_tokenizer *t, const json_t *v, sc_diag *d);
int tk_load_post_processor(struct sc_tokenizer *t, const json_t *v, sc_diag *d);
int tk_load_decoder(struct sc_tokenizer *t, const json_t *v, sc_diag *d);

/* Fills bl_enc and bl_dec (the GPT-2 byte <-> unicode map). */
void tk_bytelevel_tables(struct sc_tokenizer *t);

/* A hash of n bytes, for the indexes. */
uint64_t tk_hash_bytes(const void *p, size_t n);

#endif
