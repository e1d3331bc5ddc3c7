/* tokenizer.h - text in, token ids out and back: the byte-level BPE tokenizer of a
 * Hugging Face `tokenizer.json`, as DeepSeek-V3/V3.2 (and GPT-2, Llama 3, Qwen 2 style
 * models) ship it, token-for-token equal to the `tokenizers` library (tested against
 * tokenizers 0.23 in tests/unit/test_tokenizer.c and the `tokenizer_hf` check).
 *
 * Encode: the text is cut at added tokens first (HF semantics: leftmost-longest match;
 * lstrip / rstrip eat the white space beside a token, single_word needs non-word
 * characters around it; tokens with normalized false are matched in the raw text, those
 * with normalized true in each remaining piece after the normalizer), then each remaining
 * piece goes through the normalizer, the pre-tokenizer and the BPE model, and with
 * add_special the post-processor adds its special tokens.
 *
 * Supported, by tokenizer.json "type":
 *   normalizer      null, Sequence, Prepend, Replace
 *   pre_tokenizer   null, Sequence, Split (pattern String or Regex; behavior Isolated,
 *                   Removed, MergedWithPrevious, MergedWithNext, Contiguous; invert),
 *                   ByteLevel (add_prefix_space, use_regex: the GPT-2 pattern)
 *   model           BPE: vocab, merges as "a b" strings or ["a", "b"] pairs,
 *                   byte_fallback, ignore_merges, unk_token, fuse_unk
 *   post_processor  null, TemplateProcessing (its single-sequence template), ByteLevel
 *                   (offsets only: nothing to do for ids), Sequence
 *   decoder         null (tokens joined by spaces), ByteLevel, Sequence, ByteFallback,
 *                   Fuse, Replace, Strip (stop 0), Metaspace
 * Refused at load with SC_ENOTSUP and a message naming the part: every other type (NFC
 * and the other Unicode normalizers, WordPiece/Unigram models, Metaspace and the other
 * pre-tokenizers, Roberta/Bert processors, the WordPiece/CTC/BPE decoders), BPE dropout,
 * continuing_subword_prefix and end_of_word_suffix, truncation and padding, Strip with
 * stop > 0, decoders after a fusing one (ByteLevel, Fuse) that could span token
 * boundaries (ByteLevel, ByteFallback, Replace with a pattern longer than one character),
 * and regex constructs listed below.
 *
 * Regexes: HF compiles Split and Replace patterns with Oniguruma. Here they are
 * translated into PCRE2 (Debian's libpcre2-8, compiled with PCRE2_UTF | PCRE2_UCP): a
 * backtracking engine with Oniguruma's leftmost-first alternation, lookaround and
 * Unicode properties, packaged everywhere; no C library with Oniguruma's own syntax is
 * packaged well enough to depend on. The translation rewrites what differs, each checked
 * against Oniguruma over every code point by the tokenizer_hf check: \s and \S (no
 * U+180E in Oniguruma), \w and \W (Alphabetic, marks, decimal digits, connectors, and
 * outside a class also ² ³ ¹ ¼ ½ ¾), \d \D, \h \H (hex digits in Oniguruma), \v (a
 * vertical tab), \uHHHH, . (anything but \n), {,n}, scripts (Script, not
 * Script_Extensions), and \S \W \H inside a class (lookaheads). It refuses, naming the
 * pattern: ^ and $ (line anchors in Oniguruma), \b \B \G \K \R \X \Q, back-references,
 * nested classes, class intersection (&&), POSIX brackets, inline options other than i,
 * {n}? and {n,m}+ (other meanings in Oniguruma), unknown properties, and under (?i) what
 * Oniguruma could match through a multi-character case fold (non-ASCII literals, "ss",
 * "st", "ff", "fi", "fl", properties, non-ASCII classes). Unicode versions: PCRE2 10.42
 * knows Unicode 14.0, the Oniguruma of tokenizers 0.23 Unicode 16.0; characters assigned
 * in between (about 10,000, mostly CJK extensions H and I) are unassigned (Cn) here and
 * can be pre-tokenized differently.
 *
 * Untrusted input: encode refuses text that is not valid UTF-8 (SC_EINVAL "the text is
 * not valid UTF-8 at byte N"; HF only takes Python str) and text over SC_TOK_MAX_TEXT
 * bytes (SC_ETOOBIG). The BPE merge loop keeps a heap of candidate merges (O(n log n) for
 * a pre-token of n characters), nothing recurses on the input, and a regex that exceeds
 * PCRE2's match or heap limits fails the call (SC_ETOOBIG naming the pattern) instead of
 * splitting differently. tokenizer.json is checked too: ids in [0, SC_TOK_MAX_ID), one
 * token per id, merges of vocabulary tokens whose concatenation is a token, template
 * special tokens with valid ids, no two added tokens matching the same string, at most
 * SC_TOK_MAX_STAGES normalizers, pre-tokenizers and decoders.
 *
 * Decode: ids are mapped to their token strings (added tokens first, as HF does) and
 * passed through the decoder. Unlike HF, which silently skips unknown ids, an id outside
 * the vocabulary is an error (SC_ERANGE naming it). With skip_special, tokens whose
 * string is the content of a special added token are left out. The ByteLevel decoder
 * turns invalid UTF-8 into U+FFFD exactly as Rust's String::from_utf8_lossy does (one
 * per maximal invalid subpart). A streamed decode (sc_detok) produces the same bytes
 * as the whole decode, piece by piece, holding back what the next token can still
 * change (an incomplete UTF-8 sequence, a run of byte-fallback tokens); every piece it
 * appends is whole UTF-8 characters.
 *
 * Ownership and threads: sc_tokenizer_load allocates the tokenizer, sc_tokenizer_free
 * releases it. After load the tokenizer is immutable: every function taking a const
 * sc_tokenizer may run on any thread, concurrently. Outputs are allocated with malloc
 * and belong to the caller (free()). An sc_detok belongs to one request: one thread at a
 * time; it borrows the tokenizer, which must outlive it.
 */
#ifndef SC_TOKENIZER_H
#define SC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define SC_TOK_MAX_ID (1 << 22)              /* ids must be below this (4 Mi) */
#define SC_TOK_MAX_TEXT ((size_t)256 << 20)  /* longest text encode takes, bytes */
#define SC_TOK_MAX_FILE ((size_t)512 << 20)  /* largest tokenizer.json, bytes */
#define SC_TOK_MAX_STAGES 16                 /* normalizers, pre-tokenizers, decoders each */

typedef struct sc_tokenizer sc_tokenizer;

/* Reads and checks a whole tokenizer.json (DeepSeek's size: well under a second).
 * SC_ENOENT / SC_EIO for the file, SC_EINVAL for malformed content, SC_ENOTSUP for a type
 * or option listed as refused above, SC_ERANGE for ids out of range, SC_ETOOBIG for a
 * file over SC_TOK_MAX_FILE; d names the file, field, token or merge. */
int sc_tokenizer_load(const char *path, sc_tokenizer **out, sc_diag *d);
/* The same from a JSON text in memory (borrowed for the call). */
int sc_tokenizer_load_json(const char *json, size_t len, sc_tokenizer **out, sc_diag *d);
void sc_tokenizer_free(sc_tokenizer *t);

/* Max id + 1, added tokens included. */
int32_t sc_tokenizer_vocab_size(const sc_tokenizer *t);
/* The id of a token string (added tokens first, then the model's vocabulary, as HF's
 * token_to_id), e.g. "<｜end▁of▁sentence｜>"; -1 if there is none. */
int32_t sc_tokenizer_find(const sc_tokenizer *t, const char *token);
/* The string of id as decode sees it (for an added token with normalized true, its
 * normalized form), with its length in *len; NULL for an id that has no token. Borrowed
 * from the tokenizer; not NUL-terminated (may hold NUL bytes). */
const char *sc_tokenizer_token(const sc_tokenizer *t, int32_t id, size_t *len);
/* Whether id is a special token (decode with skip_special leaves it out). */
bool sc_tokenizer_is_special(const sc_tokenizer *t, int32_t id);

/* Encodes len bytes of text (any bytes may be passed; invalid UTF-8 is refused). On
 * success *ids holds *n ids (malloc'd, the caller frees; NULL when *n is 0). add_special:
 * apply the post-processor (DeepSeek: the begin-of-sentence token first). On failure
 * *ids is NULL and *n 0. */
int sc_tokenizer_encode(const sc_tokenizer *t, const char *text, size_t len, bool add_special,
                        int32_t **ids, size_t *n, sc_diag *d);

/* Decodes n ids into *text (malloc'd, NUL-terminated, *len bytes without the NUL; the
 * text may hold NUL bytes). SC_ERANGE for an id without a token. */
int sc_tokenizer_decode(const sc_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                        char **text, size_t *len, sc_diag *d);

/* A growable byte buffer that a streamed decode appends to (the caller owns data:
 * free(buf.data); it may reset len to 0 between calls to reuse the memory). */
typedef struct sc_tok_text {
  char *data;
  size_t len, cap;
} sc_tok_text;

/* Streamed decode of one request. Fields are private. */
typedef struct sc_detok {
  const sc_tokenizer *t;
  bool skip_special;
  bool failed;          /* an error happened: push/finish refuse further work */
  uint64_t ntokens;     /* tokens that reached the decoder (no decoder: space-joined) */
  uint8_t utf8[4];      /* an incomplete UTF-8 sequence held back (ByteLevel) */
  uint8_t nutf8;
  uint32_t stage[SC_TOK_MAX_STAGES]; /* per decoder stage: what it has seen so far */
  uint8_t *group;       /* a run of byte-fallback tokens held back */
  size_t ngroup, capgroup;
} sc_detok;

/* Starts a streamed decode with t (borrowed). Cannot fail. */
void sc_detok_init(sc_detok *s, const sc_tokenizer *t, bool skip_special);
/* Feeds one id; appends to out what is now final (whole UTF-8 characters, possibly
 * nothing). SC_ERANGE for an id without a token, SC_ENOMEM; after a failure the stream
 * refuses everything (SC_EINVAL). */
int sc_detok_push(sc_detok *s, int32_t id, sc_tok_text *out, sc_diag *d);
/* Ends the stream: appends what was held back, as the whole decode would give it (an
 * incomplete UTF-8 sequence becomes U+FFFD). Then only sc_detok_free is left to call. */
int sc_detok_finish(sc_detok *s, sc_tok_text *out, sc_diag *d);
/* Releases what the stream holds (not out). Safe after init, push or finish. */
void sc_detok_free(sc_detok *s);

#endif
