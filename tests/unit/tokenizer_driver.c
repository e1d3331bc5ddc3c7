/* tokenizer_driver.c - a test-only program that lets tests/data/tokenizer/make_reference.py
 * (ctest tokenizer_hf) compare the C tokenizer with Hugging Face `tokenizers` live.
 *
 *     tokenizer_driver TOKENIZER.json  < requests.jsonl  > answers.jsonl
 *
 * One JSON object per line in, one out:
 *   {"text": s}          -> {"ids", "ids_special", "decode", "decode_skip", "stream_ok"}
 *                           (decodes of ids_special, as make_reference.py records them)
 *   {"ids": [...]}       -> {"decode", "decode_skip", "stream_ok"}
 *   {"split": re, "text": s} -> {"pieces": [...]}: s cut by the regex re the way a
 *                           Split pre-tokenizer with behavior Isolated cuts it
 * "nostream": true in a request leaves the streamed-decode check (O(n^2)) out.
 * Errors: {"error": message}. stream_ok is true when tok_stream_check holds for both
 * skip_special settings (tokenizer_check.h), else a string saying where it fails.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer.h"
#include "model/tokenizer_int.h"
#include "tokenizer_check.h"

static json_t *error(const char *msg) { return json_pack("{s:s}", "error", msg); }

static json_t *ids_json(const int32_t *ids, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
  return a;
}

static json_t *decodes(const sc_tokenizer *t, const int32_t *ids, size_t n, bool stream,
                       json_t *o) {
  for (int skip = 0; skip < 2; skip++) {
    char *text;
    size_t len;
    sc_diag d = {0};
    if (sc_tokenizer_decode(t, ids, n, skip, &text, &len, &d) != 0) {
      json_decref(o);
      return error(d.msg);
    }
    json_object_set_new(o, skip ? "decode_skip" : "decode", json_stringn(text, len));
    free(text);
  }
  if (!stream) return o;
  char why[512];
  const bool ok = tok_stream_check(t, ids, n, false, why, sizeof why) == 0 &&
                  tok_stream_check(t, ids, n, true, why, sizeof why) == 0;
  json_object_set_new(o, "stream_ok", ok ? json_true() : json_string(why));
  return o;
}

static json_t *split(const json_t *re, const json_t *text) {
  tk_pattern p;
  sc_diag d = {0};
  if (tk_pattern_init(&p, true, json_string_value(re), json_string_length(re), "split", &d) != 0)
    return error(d.msg);
  tk_matcher m = {0};
  tk_spans c = {0};
  const char *s = json_string_value(text);
  json_t *o;
  if (tk_pattern_cover(&p, &m, s, json_string_length(text), &c, &d) != 0) {
    o = error(d.msg);
  } else {
    json_t *a = json_array();
    for (size_t i = 0; i < c.n; i++)
      if (c.v[i].len) json_array_append_new(a, json_stringn(s + c.v[i].off, c.v[i].len));
    o = json_pack("{s:o}", "pieces", a);
  }
  tk_spans_free(&c);
  tk_matcher_free(&m);
  tk_pattern_free(&p);
  return o;
}

static json_t *answer(const sc_tokenizer *t, const json_t *req) {
  const json_t *text = json_object_get(req, "text"), *jids = json_object_get(req, "ids");
  const bool stream = !json_is_true(json_object_get(req, "nostream"));
  if (json_is_string(json_object_get(req, "split")) && json_is_string(text))
    return split(json_object_get(req, "split"), text);
  if (json_is_string(text)) {
    int32_t *ids = NULL, *ids_s = NULL;
    size_t n = 0, ns = 0;
    sc_diag d = {0};
    const char *s = json_string_value(text);
    const size_t len = json_string_length(text);
    if (sc_tokenizer_encode(t, s, len, false, &ids, &n, &d) != 0 ||
        sc_tokenizer_encode(t, s, len, true, &ids_s, &ns, &d) != 0) {
      free(ids);
      return error(d.msg);
    }
    json_t *o = json_pack("{s:o,s:o}", "ids", ids_json(ids, n), "ids_special", ids_json(ids_s, ns));
    o = decodes(t, ids_s, ns, stream, o);
    free(ids);
    free(ids_s);
    return o;
  }
  if (json_is_array(jids)) {
    const size_t n = json_array_size(jids);
    int32_t *ids = malloc(sizeof *ids * (n + 1));
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
    json_t *o = decodes(t, ids, n, stream, json_object());
    free(ids);
    return o;
  }
  return error("a request needs \"text\", \"ids\" or \"split\"");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TOKENIZER.json < requests.jsonl\n", argv[0]);
    return 2;
  }
  sc_tokenizer *t;
  sc_diag d = {0};
  if (sc_tokenizer_load(argv[1], &t, &d) != 0) {
    fprintf(stderr, "%s\n", d.msg);
    return 1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  while ((got = getline(&line, &cap, stdin)) > 0) {
    json_error_t jerr;
    json_t *req = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &jerr);
    json_t *o = req ? answer(t, req) : error(jerr.text);
    char *out = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (out == NULL) {
      json_decref(o);
      o = error("the answer is not valid UTF-8");
      out = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    }
    printf("%s\n", out);
    fflush(stdout);
    free(out);
    json_decref(o);
    json_decref(req);
  }
  free(line);
  sc_tokenizer_free(t);
  return 0;
}
