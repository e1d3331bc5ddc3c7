/* test_tokenizer.c - the byte-level BPE tokenizer (model/tokenizer.h) token for token
 * against Hugging Face `tokenizers`: tests/data/tokenizer/reference.jsonl holds HF's ids
 * and decodes for a DeepSeek-V3-configured tokenizer and a Llama-style byte-fallback one
 * (make_reference.py made them; ctest tokenizer_hf compares live when tokenizers is
 * installed). Then the streamed decode, the errors, long inputs and the small queries. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/tokenizer.h"
#include "tokenizer_check.h"

#define DATA SC_TOKENIZER_DATA
#define BOS "<｜begin▁of▁sentence｜>"

static sc_tokenizer *load(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", DATA, name);
  sc_tokenizer *t = NULL;
  sc_diag d = {0};
  const int rc = sc_tokenizer_load(path, &t, &d);
  cr_assert_eq(rc, 0, "load %s: %s", path, d.msg);
  return t;
}

static int32_t *ids_of(const json_t *a, size_t *n) {
  *n = json_array_size(a);
  int32_t *v = malloc(sizeof *v * (*n + 1));
  for (size_t i = 0; i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, i));
  return v;
}

static void expect_ids(const int32_t *got, size_t ngot, const json_t *want, const char *what,
                       size_t line) {
  size_t n;
  int32_t *w = ids_of(want, &n);
  size_t k = 0;
  while (k < n && k < ngot && got[k] == w[k]) k++;
  cr_expect(k == n && k == ngot, "reference line %zu: %s: %zu ids against HF's %zu, first "
            "difference at %zu (C %d, HF %d)", line, what, ngot, n, k, k < ngot ? got[k] : -1,
            k < n ? w[k] : -1);
  free(w);
}

static void expect_decode(const sc_tokenizer *t, const int32_t *ids, size_t n, bool skip,
                          const json_t *want, size_t line) {
  char *text = NULL;
  size_t len = 0;
  sc_diag d = {0};
  cr_assert_eq(sc_tokenizer_decode(t, ids, n, skip, &text, &len, &d), 0, "line %zu: %s", line,
               d.msg);
  cr_expect(len == json_string_length(want) && memcmp(text, json_string_value(want), len) == 0,
            "reference line %zu: decode (skip_special %d) \"%s\" against HF's \"%s\"", line, skip,
            text, json_string_value(want));
  free(text);
  char why[512];
  cr_expect_eq(tok_stream_check(t, ids, n, skip, why, sizeof why), 0, "reference line %zu: %s",
               line, why);
}

Test(tokenizer, matches_hf_reference, .timeout = 120) {
  sc_tokenizer *ds = load("tokenizer.json"), *bf = load("tokenizer_bytefallback.json");
  FILE *f = fopen(DATA "/reference.jsonl", "rb");
  cr_assert_not_null(f);
  char *line = NULL;
  size_t cap = 0, lines = 0, texts = 0;
  ssize_t got;
  while ((got = getline(&line, &cap, f)) > 0) {
    lines++;
    json_error_t jerr;
    json_t *r = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &jerr);
    cr_assert_not_null(r, "reference line %zu: %s", lines, jerr.text);
    const char *name = json_string_value(json_object_get(r, "tokenizer"));
    const sc_tokenizer *t = strcmp(name, "tokenizer.json") == 0 ? ds : bf;
    const json_t *text = json_object_get(r, "text");
    int32_t *ids = NULL;
    size_t n = 0;
    if (text) {
      texts++;
      sc_diag d = {0};
      int32_t *plain = NULL;
      size_t np = 0;
      cr_assert_eq(sc_tokenizer_encode(t, json_string_value(text), json_string_length(text),
                                       false, &plain, &np, &d), 0, "line %zu: %s", lines, d.msg);
      expect_ids(plain, np, json_object_get(r, "ids"), "ids", lines);
      free(plain);
      cr_assert_eq(sc_tokenizer_encode(t, json_string_value(text), json_string_length(text),
                                       true, &ids, &n, &d), 0, "line %zu: %s", lines, d.msg);
      expect_ids(ids, n, json_object_get(r, "ids_special"), "ids_special", lines);
    } else {
      ids = ids_of(json_object_get(r, "ids"), &n);
    }
    expect_decode(t, ids, n, false, json_object_get(r, "decode"), lines);
    expect_decode(t, ids, n, true, json_object_get(r, "decode_skip"), lines);
    free(ids);
    json_decref(r);
  }
  free(line);
  fclose(f);
  cr_expect_gt(texts, 400, "reference.jsonl has %zu texts", texts);
  cr_expect_gt(lines, texts + 100);
  sc_tokenizer_free(ds);
  sc_tokenizer_free(bf);
}

Test(tokenizer, queries) {
  sc_tokenizer *t = load("tokenizer.json");
  cr_expect_eq(sc_tokenizer_find(t, BOS), 0);
  cr_expect_eq(sc_tokenizer_find(t, "<｜end▁of▁sentence｜>"), 1);
  const int32_t user = sc_tokenizer_find(t, "<｜User｜>");
  cr_expect_gt(user, 2);
  cr_expect_eq(sc_tokenizer_find(t, "<｜no▁such▁token｜>"), -1);
  cr_expect_eq(sc_tokenizer_find(t, "!"), 3); /* the first byte-level character */
  cr_expect(sc_tokenizer_is_special(t, 0));
  cr_expect(!sc_tokenizer_is_special(t, user)); /* DeepSeek's <｜User｜> is not special */
  cr_expect(sc_tokenizer_is_special(t, sc_tokenizer_find(t, "<|EOT|>")));
  int32_t max = 0;
  const char *names[] = {"<｜tool▁sep｜>", "<think>", "</think>"};
  for (int i = 0; i < 3; i++)
    if (sc_tokenizer_find(t, names[i]) > max) max = sc_tokenizer_find(t, names[i]);
  cr_expect_eq(sc_tokenizer_vocab_size(t), max + 1);
  size_t len = 0;
  const char *s = sc_tokenizer_token(t, 0, &len);
  cr_expect(s && len == strlen(BOS) && memcmp(s, BOS, len) == 0);
  cr_expect_null(sc_tokenizer_token(t, -1, &len));
  cr_expect_null(sc_tokenizer_token(t, sc_tokenizer_vocab_size(t), &len));
  cr_expect(!sc_tokenizer_is_special(t, -1));
  sc_tokenizer_free(t);
}

/* A 4-byte character spread over four byte-level tokens comes out whole, at the end. */
Test(tokenizer, stream_holds_back_cut_characters) {
  sc_tokenizer *t = load("tokenizer.json");
  const char *crab = "\xF0\x9F\xA6\x80"; /* U+1F980, not a token of this vocabulary */
  int32_t *ids;
  size_t n;
  sc_diag d = {0};
  cr_assert_eq(sc_tokenizer_encode(t, crab, 4, false, &ids, &n, &d), 0, "%s", d.msg);
  cr_assert_gt(n, 1, "the test needs a character split over tokens");
  sc_detok s;
  sc_detok_init(&s, t, false);
  sc_tok_text out = {0};
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(sc_detok_push(&s, ids[i], &out, &d), 0, "%s", d.msg);
    cr_expect_eq(out.len, i + 1 < n ? 0u : 4u, "after %zu of %zu tokens: %zu bytes", i + 1, n,
                 out.len);
  }
  cr_assert_eq(sc_detok_finish(&s, &out, &d), 0);
  cr_expect(out.len == 4 && memcmp(out.data, crab, 4) == 0);
  /* cut short: what is held back becomes one U+FFFD, as HF's decode gives it */
  sc_detok_init(&s, t, false);
  out.len = 0;
  for (size_t i = 0; i + 1 < n; i++) cr_assert_eq(sc_detok_push(&s, ids[i], &out, &d), 0);
  cr_assert_eq(sc_detok_finish(&s, &out, &d), 0);
  cr_expect(out.len == 3 && memcmp(out.data, "\xEF\xBF\xBD", 3) == 0, "%zu bytes", out.len);
  sc_detok_free(&s);
  free(out.data);
  free(ids);
  sc_tokenizer_free(t);
}

/* ---- errors ------------------------------------------------------------------------ */

static const char *MINI =
    "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 5, \"content\": \"<eos>\", "
    "\"special\": true, \"normalized\": false}], \"normalizer\": %s, \"pre_tokenizer\": %s, "
    "\"post_processor\": null, \"decoder\": %s, \"truncation\": %s, \"model\": {\"type\": "
    "\"%s\", \"dropout\": %s, \"unk_token\": %s, \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, "
    "\"c\": 3, %s}, \"merges\": [\"a b\", %s]}}";

typedef struct mini {
  const char *normalizer, *pre, *decoder, *truncation, *type, *dropout, *unk, *vocab, *merge;
} mini;

static int load_mini(mini m, sc_tokenizer **t, sc_diag *d) {
  char json[4096];
  snprintf(json, sizeof json, MINI, m.normalizer ? m.normalizer : "null",
           m.pre ? m.pre : "null", m.decoder ? m.decoder : "null",
           m.truncation ? m.truncation : "null", m.type ? m.type : "BPE",
           m.dropout ? m.dropout : "null", m.unk ? m.unk : "null",
           m.vocab ? m.vocab : "\"abc\": 4", m.merge ? m.merge : "\"ab c\"");
  return sc_tokenizer_load_json(json, strlen(json), t, d);
}

static void refused(mini m, int code, const char *needle) {
  sc_tokenizer *t = NULL;
  sc_diag d = {0};
  const int rc = load_mini(m, &t, &d);
  cr_expect_eq(rc, code, "expected %s, got %d (%s)", sc_errname(code), rc, d.msg);
  cr_expect_null(t);
  cr_expect(strstr(d.msg, needle) != NULL, "message \"%s\" should name \"%s\"", d.msg, needle);
  sc_tokenizer_free(t);
}

Test(tokenizer, mini_loads) {
  sc_tokenizer *t = NULL;
  sc_diag d = {0};
  cr_assert_eq(load_mini((mini){0}, &t, &d), 0, "%s", d.msg);
  int32_t *ids;
  size_t n;
  cr_assert_eq(sc_tokenizer_encode(t, "abcab<eos>", 10, true, &ids, &n, &d), 0, "%s", d.msg);
  cr_expect(n == 3 && ids[0] == 4 && ids[1] == 2 && ids[2] == 5, "%zu ids", n);
  free(ids);
  /* no unk_token: a character outside the vocabulary is dropped, as HF does */
  cr_assert_eq(sc_tokenizer_encode(t, "xax", 3, false, &ids, &n, &d), 0);
  cr_expect(n == 1 && ids[0] == 0);
  free(ids);
  cr_assert_eq(sc_tokenizer_encode(t, "", 0, true, &ids, &n, &d), 0);
  cr_expect(n == 0 && ids == NULL);
  char *text;
  size_t len;
  const int32_t seq[] = {4, 5, 0};
  cr_assert_eq(sc_tokenizer_decode(t, seq, 3, false, &text, &len, &d), 0);
  cr_expect_str_eq(text, "abc <eos> a"); /* no decoder: tokens joined by spaces */
  free(text);
  cr_assert_eq(sc_tokenizer_decode(t, seq, 3, true, &text, &len, &d), 0);
  cr_expect_str_eq(text, "abc a");
  free(text);
  sc_tokenizer_free(t);
}

Test(tokenizer, refuses_bad_files) {
  sc_tokenizer *t = NULL;
  sc_diag d = {0};
  cr_expect_eq(sc_tokenizer_load(DATA "/no-such-tokenizer.json", &t, &d), SC_ENOENT);
  cr_expect(strstr(d.msg, "no-such-tokenizer.json") != NULL, "%s", d.msg);
  cr_expect_eq(sc_tokenizer_load_json("{\"model\": ", 10, &t, &d), SC_EINVAL);
  cr_expect(strstr(d.msg, "invalid JSON") != NULL, "%s", d.msg);
  cr_expect_eq(sc_tokenizer_load_json("[1, 2]", 6, &t, &d), SC_EINVAL);
  cr_expect_eq(sc_tokenizer_load_json("{}", 2, &t, &d), SC_EINVAL);
#define SPLIT(re) "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"" re "\"}, " \
                  "\"behavior\": \"Isolated\", \"invert\": false}"
  static const struct {
    mini m;
    int code;
    const char *needle;
  } cases[] = {
      {{.type = "WordPiece"}, SC_ENOTSUP, "WordPiece"},
      {{.type = "Unigram"}, SC_ENOTSUP, "Unigram"},
      {{.merge = "\"a q\""}, SC_EINVAL, "model.merges[1] \"a q\""},
      {{.merge = "\"c c\""}, SC_EINVAL, "the merged token"},
      {{.merge = "\"abc\""}, SC_EINVAL, "model.merges[1]"},
      {{.merge = "[\"a\"]"}, SC_EINVAL, "model.merges[1]"},
      {{.vocab = "\"d\": 3"}, SC_EINVAL, "id 3 is given to two tokens"},
      {{.vocab = "\"d\": -1"}, SC_ERANGE, "model.vocab[\"d\"]"},
      {{.vocab = "\"d\": 99999999"}, SC_ERANGE, "model.vocab[\"d\"]"},
      {{.vocab = "\"d\": \"x\""}, SC_EINVAL, "model.vocab[\"d\"]"},
      {{.dropout = "0.1"}, SC_ENOTSUP, "dropout"},
      {{.truncation = "{\"max_length\": 8}"}, SC_ENOTSUP, "truncation"},
      {{.normalizer = "{\"type\": \"NFC\"}"}, SC_ENOTSUP, "\"NFC\""},
      {{.normalizer = "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Lowercase\"}]}"},
       SC_ENOTSUP, "normalizer.normalizers[0]"},
      {{.pre = "{\"type\": \"Metaspace\", \"replacement\": \"_\"}"}, SC_ENOTSUP, "Metaspace"},
      {{.pre = SPLIT("^a")}, SC_ENOTSUP, "regex \"^a\""},
      {{.pre = SPLIT("(?i:stra\\u00dfe)")}, SC_ENOTSUP, "(?i)"},
      {{.pre = SPLIT("a{2}?")}, SC_ENOTSUP, "{n}?"},
      {{.pre = SPLIT("(a")}, SC_ENOTSUP, "unterminated group"},
      {{.pre = SPLIT("\\\\bword")}, SC_ENOTSUP, "this escape"},
      {{.pre = SPLIT("[a[b]]")}, SC_ENOTSUP, "nested class"},
      {{.pre = SPLIT("\\\\p{Foo}")}, SC_ENOTSUP, "property"},
      {{.pre = "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": "
               "\"Sideways\", \"invert\": false}"},
       SC_EINVAL, "Sideways"},
      {{.decoder = "{\"type\": \"WordPiece\"}"}, SC_ENOTSUP, "WordPiece"},
      {{.decoder = "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"ByteLevel\"}, "
                   "{\"type\": \"ByteFallback\"}]}"},
       SC_ENOTSUP, "decoder.decoders[1]"},
      {{.decoder = "{\"type\": \"Strip\", \"content\": \" \", \"start\": 0, \"stop\": 1}"},
       SC_ENOTSUP, "stop > 0"},
  };
#undef SPLIT
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    refused(cases[i].m, cases[i].code, cases[i].needle);
}

Test(tokenizer, refuses_odd_added_tokens_and_templates) {
  /* two normalized tokens that the normalizer makes equal: HF keeps one at random */
  const char *collide =
      "{\"added_tokens\": [{\"id\": 3, \"content\": \"x1\", \"normalized\": true}, {\"id\": 4, "
      "\"content\": \"x2\", \"normalized\": true}], \"normalizer\": {\"type\": \"Replace\", "
      "\"pattern\": {\"Regex\": \"[0-9]\"}, \"content\": \"#\"}, \"model\": {\"type\": \"BPE\", "
      "\"vocab\": {\"a\": 0, \"x\": 1, \"#\": 2}, \"merges\": []}}";
  sc_tokenizer *t = NULL;
  sc_diag d = {0};
  cr_expect_eq(sc_tokenizer_load_json(collide, strlen(collide), &t, &d), SC_EINVAL);
  cr_expect(strstr(d.msg, "both match \"x#\"") != NULL, "%s", d.msg);
  const char *tmpl =
      "{\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
      "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
      "\"special_tokens\": {}}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
      "\"merges\": []}}";
  cr_expect_eq(sc_tokenizer_load_json(tmpl, strlen(tmpl), &t, &d), SC_EINVAL);
  cr_expect(strstr(d.msg, "\"<s>\" is not in special_tokens") != NULL, "%s", d.msg);
  /* unk_token naming no token: an error only when a character needs it (as HF) */
  const char *unk = "{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": "
                    "{\"a\": 0}, \"merges\": []}}";
  cr_assert_eq(sc_tokenizer_load_json(unk, strlen(unk), &t, &d), 0, "%s", d.msg);
  int32_t *ids;
  size_t n;
  cr_expect_eq(sc_tokenizer_encode(t, "aa", 2, false, &ids, &n, &d), 0);
  free(ids);
  cr_expect_eq(sc_tokenizer_encode(t, "ab", 2, false, &ids, &n, &d), SC_EINVAL);
  cr_expect(strstr(d.msg, "unk_token") != NULL, "%s", d.msg);
  cr_expect_null(ids);
  sc_tokenizer_free(t);
}

Test(tokenizer, refuses_invalid_utf8_and_unknown_ids) {
  sc_tokenizer *t = load("tokenizer.json");
  static const struct {
    const char *s;
    size_t n, at;
  } bad[] = {
      {"abc\xff", 4, 3},
      {"\xe4\xbd", 2, 0},          /* cut short */
      {"ok \xc0\xaf", 5, 3},       /* overlong */
      {"\xed\xa0\x80", 3, 0},      /* surrogate */
      {"\xf4\x90\x80\x80", 4, 0}, /* above U+10FFFF */
      {"a\x80", 2, 1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int32_t *ids = (int32_t *)1;
    size_t n = 7;
    sc_diag d = {0};
    cr_expect_eq(sc_tokenizer_encode(t, bad[i].s, bad[i].n, false, &ids, &n, &d), SC_EINVAL);
    char at[64];
    snprintf(at, sizeof at, "not valid UTF-8 at byte %zu", bad[i].at);
    cr_expect(strstr(d.msg, at) != NULL, "case %zu: %s", i, d.msg);
    cr_expect(ids == NULL && n == 0);
  }
  int32_t *ids;
  size_t n;
  sc_diag d = {0};
  cr_expect_eq(sc_tokenizer_encode(t, "a\0b", 3, false, &ids, &n, &d), 0); /* NUL is text */
  char *text;
  size_t len;
  cr_assert_eq(sc_tokenizer_decode(t, ids, n, false, &text, &len, &d), 0);
  cr_expect(len == 3 && memcmp(text, "a\0b", 3) == 0);
  free(text);
  free(ids);
  const int32_t size = sc_tokenizer_vocab_size(t);
  const int32_t out_of_range[][2] = {{5, size}, {5, -1}, {INT32_MAX, 5}};
  for (int i = 0; i < 3; i++) {
    cr_expect_eq(sc_tokenizer_decode(t, out_of_range[i], 2, false, &text, &len, &d), SC_ERANGE);
    cr_expect(strstr(d.msg, "not in the vocabulary") != NULL, "%s", d.msg);
    cr_expect_null(text);
  }
  sc_detok s;
  sc_detok_init(&s, t, false);
  sc_tok_text out = {0};
  cr_expect_eq(sc_detok_push(&s, 5, &out, &d), 0);
  cr_expect_eq(sc_detok_push(&s, size, &out, &d), SC_ERANGE);
  cr_expect_eq(sc_detok_push(&s, 5, &out, &d), SC_EINVAL); /* a failed stream stays failed */
  cr_expect_eq(sc_detok_finish(&s, &out, &d), SC_EINVAL);
  sc_detok_free(&s);
  free(out.data);
  sc_tokenizer_free(t);
}

/* Damaged files: every load either succeeds or fails with a message, and what loads
 * encodes and decodes without harm (ASan and UBSan builds run this too). */
static const char RICH[] =
    "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 0, \"content\": \"<s>\", "
    "\"special\": true, \"normalized\": false, \"lstrip\": true}, {\"id\": 9, \"content\": "
    "\"ab\", \"single_word\": true, \"rstrip\": true}], \"normalizer\": {\"type\": "
    "\"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"_\"}, {\"type\": "
    "\"Replace\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"content\": \"_\"}]}, "
    "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
    "\"pattern\": {\"Regex\": \"[^\\\\S\\\\r]+|\\\\p{N}{1,3}\"}, \"behavior\": "
    "\"MergedWithNext\", \"invert\": false}, {\"type\": \"ByteLevel\", "
    "\"add_prefix_space\": true, \"use_regex\": true}]}, \"post_processor\": {\"type\": "
    "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}, "
    "{\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"ids\": [0]}}}, "
    "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", "
    "\"pattern\": {\"String\": \"_\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, "
    "{\"type\": \"ByteLevel\"}, {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, "
    "\"stop\": 0}]}, \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, "
    "\"unk_token\": \"<s>\", \"fuse_unk\": true, \"vocab\": {\"<s>\": 0, \"a\": 1, "
    "\"b\": 2, \"ab\": 3, \"\\u0120\": 4, \"<0x41>\": 5, \"_\": 6, \"\\u0120a\": 7, "
    "\"1\": 8}, \"merges\": [\"a b\", [\"\\u0120\", \"a\"]]}}";

static const char JSONCH[] = "0123456789[]{}\\\",:-.eE"; /* bytes that JSON cares about */

Test(tokenizer, survives_damaged_files, .timeout = 60) {
  sc_tokenizer *t = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_tokenizer_load_json(RICH, sizeof RICH - 1, &t, &d), 0, "%s", d.msg);
  sc_tokenizer_free(t);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  char buf[sizeof RICH + 8];
  int loaded = 0;
  for (int it = 0; it < 4000; it++) {
    size_t n = sizeof RICH - 1;
    memcpy(buf, RICH, n);
    for (int k = 0; k < 1 + it % 3; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const size_t at = (size_t)(x >> 8) % n;
      switch (x & 3) {
        case 0: buf[at] = (char)(x >> 40); break;                      /* any byte */
        case 1: buf[at] = JSONCH[(x >> 40) % (sizeof JSONCH - 1)]; break; /* JSON's */
        case 2: memmove(buf + at, buf + at + 1, n - at - 1), n--; break; /* delete */
        default: memmove(buf + at + 1, buf + at, n - at), buf[at] = buf[(x >> 33) % n], n++;
      }
    }
    d = (sc_diag){0};
    const int rc = sc_tokenizer_load_json(buf, n, &t, &d);
    if (rc != 0) {
      cr_assert(rc < 0 && d.msg[0] != '\0' && t == NULL, "iteration %d: rc %d", it, rc);
      continue;
    }
    loaded++;
    int32_t *ids;
    size_t nid;
    const char *sample = "ab <s> a1 b\xc3\xa9 22\xf0\x9f\x98\x80";
    if (sc_tokenizer_encode(t, sample, strlen(sample), true, &ids, &nid, &d) == 0) {
      char *text;
      size_t len;
      if (sc_tokenizer_decode(t, ids, nid, false, &text, &len, &d) == 0) free(text);
      char why[256];
      (void)tok_stream_check(t, ids, nid, true, why, sizeof why);
      free(ids);
    }
    sc_tokenizer_free(t);
  }
  cr_log_info("%d of 4000 damaged files loaded", loaded);
  cr_expect_gt(loaded, 100);
}

/* ---- long inputs ------------------------------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void round_trip(const sc_tokenizer *t, const char *s, size_t n, const char *what) {
  int32_t *ids;
  size_t nid;
  char *text;
  size_t len;
  sc_diag d = {0};
  const double t0 = now();
  cr_assert_eq(sc_tokenizer_encode(t, s, n, false, &ids, &nid, &d), 0, "%s: %s", what, d.msg);
  const double t1 = now();
  cr_assert_eq(sc_tokenizer_decode(t, ids, nid, false, &text, &len, &d), 0, "%s: %s", what, d.msg);
  cr_expect(len == n && memcmp(text, s, n) == 0, "%s: decode(encode(text)) differs", what);
  cr_expect_lt(t1 - t0, 5.0, "%s: %zu bytes took %.2f s to encode", what, n, t1 - t0);
  cr_log_info("%s: %zu bytes -> %zu ids in %.3f s", what, n, nid, t1 - t0);
  free(ids);
  free(text);
}

static char *repeat(const char *unit, size_t times, size_t *n) {
  const size_t u = strlen(unit);
  char *s = malloc(u * times + 1);
  for (size_t i = 0; i < times; i++) memcpy(s + i * u, unit, u);
  s[u * times] = '\0';
  *n = u * times;
  return s;
}

Test(tokenizer, long_inputs_finish_quickly, .timeout = 60) {
  sc_tokenizer *ds = load("tokenizer.json"), *bf = load("tokenizer_bytefallback.json");
  static const struct {
    const char *unit;
    size_t times;
  } cases[] = {
      {"a", 1 << 20},       /* one pre-token of a million symbols */
      {"漢", 200000},       /* a CJK run: one pre-token */
      {"abcdefgh", 25000},  /* 200k letters without a space */
      {"1", 300000},        /* split in threes */
      {" ", 100000},        /* white space runs try every regex alternative */
      {"!", 200000},        {"a\u0301", 100000}, /* letters with marks */
      {"😀", 50000},        {"é", 200000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n;
    char *s = repeat(cases[i].unit, cases[i].times, &n);
    char what[64];
    snprintf(what, sizeof what, "%zu x \"%s\"", cases[i].times, cases[i].unit);
    round_trip(ds, s, n, what);
    round_trip(bf, s, n, what);
    free(s);
  }
  size_t n;
  char *s = repeat(" ", 100000, &n); /* spaces then a letter: \s+(?!\S) backtracks once */
  s[n - 1] = 'x';
  round_trip(ds, s, n, "100k spaces then x");
  free(s);
  sc_tokenizer_free(ds);
  sc_tokenizer_free(bf);
}

/* ---- threads ------------------------------------------------------------------------ */

typedef struct job {
  const sc_tokenizer *t;
  const char *text;
  int32_t *ids;
  size_t n;
  int rc;
} job;

static void *encode_job(void *arg) {
  job *j = arg;
  for (int k = 0; k < 20 && j->rc == 0; k++) {
    free(j->ids);
    j->rc = sc_tokenizer_encode(j->t, j->text, strlen(j->text), true, &j->ids, &j->n, NULL);
  }
  return NULL;
}

Test(tokenizer, encodes_from_many_threads) {
  sc_tokenizer *t = load("tokenizer.json");
  const char *text = "中文和English混合的句子，数字2024年12月26日 <｜User｜>hi 😀 ok";
  job jobs[6];
  pthread_t th[6];
  for (int i = 0; i < 6; i++) {
    jobs[i] = (job){.t = t, .text = text};
    pthread_create(&th[i], NULL, encode_job, &jobs[i]);
  }
  for (int i = 0; i < 6; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 6; i++) {
    cr_expect_eq(jobs[i].rc, 0);
    cr_expect(jobs[i].n == jobs[0].n &&
              memcmp(jobs[i].ids, jobs[0].ids, jobs[0].n * sizeof *jobs[0].ids) == 0);
  }
  for (int i = 0; i < 6; i++) free(jobs[i].ids);
  sc_tokenizer_free(t);
}
