#include "tools/requests_file.h"

#include <float.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

void sc_requests_fill_prompt(int32_t *dst, int32_t len, int32_t vocab, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int32_t i = 0; i < len; i++) dst[i] = (int32_t)(next(&x) % (uint64_t)vocab);
}

static int fill_random_prompt(sc_run_request *r, int32_t len, int32_t vocab, uint64_t seed) {
  r->prompt = malloc(sizeof *r->prompt * (size_t)len);
  if (r->prompt == NULL) return SC_ENOMEM;
  sc_requests_fill_prompt(r->prompt, len, vocab, seed);
  r->prompt_len = len;
  return 0;
}

static int parse_line(json_t *o, int32_t line, int32_t vocab, sc_run_request *r,
                      sc_diag *d) {
  /* first: the caller frees r->prompt whatever this returns */
  *r = (sc_run_request){.seed = (uint64_t)line};
  if (!json_is_object(o)) return sc_fail(d, SC_EINVAL, "line %d: not a JSON object", line);
  const char *key;
  json_t *v;
  int32_t prompt_len = 0;
  json_t *prompt = NULL;
  json_object_foreach(o, key, v) {
    if (strcmp(key, "prompt") == 0) {
      prompt = v;
    } else if (strcmp(key, "temperature") == 0) {
      /* (the request carries a float: 1e300 would go out as inf and be refused) */
      if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > FLT_MAX)
        return sc_fail(d, SC_EINVAL, "line %d: temperature must be a finite number >= 0",
                       line);
      r->temperature = (float)json_number_value(v);
    } else if (strcmp(key, "ignore_eos") == 0) {
      if (!json_is_boolean(v))
        return sc_fail(d, SC_EINVAL, "line %d: ignore_eos must be true or false", line);
      r->ignore_eos = json_is_true(v);
    } else if (!json_is_integer(v)) {
      return sc_fail(d, SC_EINVAL, "line %d: %s must be an integer", line, key);
    } else if (strcmp(key, "prompt_len") == 0) {
      if (json_integer_value(v) < 1 || json_integer_value(v) > (1 << 27))
        return sc_fail(d, SC_EINVAL, "line %d: prompt_len must be in [1, %d]", line, 1 << 27);
      prompt_len = (int32_t)json_integer_value(v);
    } else if (strcmp(key, "max_tokens") == 0) {
      if (json_integer_value(v) < 1 || json_integer_value(v) > (1 << 27))
        return sc_fail(d, SC_EINVAL, "line %d: max_tokens must be in [1, %d]", line, 1 << 27);
      r->max_tokens = (int32_t)json_integer_value(v);
    } else if (strcmp(key, "seed") == 0) {
      r->seed = (uint64_t)json_integer_value(v);
    } else if (strcmp(key, "arrive_ms") == 0) {
      if (json_integer_value(v) < 0)
        return sc_fail(d, SC_EINVAL, "line %d: arrive_ms must be >= 0", line);
      r->arrive_ms = json_integer_value(v);
    } else {
      return sc_fail(d, SC_EINVAL, "line %d: unknown key \"%s\"", line, key);
    }
  }
  if (r->max_tokens == 0) return sc_fail(d, SC_EINVAL, "line %d: max_tokens is missing", line);
  if ((prompt == NULL) == (prompt_len == 0))
    return sc_fail(d, SC_EINVAL, "line %d: give exactly one of prompt and prompt_len", line);
  if (prompt_len > 0) {
    if (fill_random_prompt(r, prompt_len, vocab, r->seed))
      return sc_fail(d, SC_ENOMEM, "line %d: out of memory", line);
    return 0;
  }
  const size_t n = json_array_size(prompt);
  if (!json_is_array(prompt) || n == 0)
    return sc_fail(d, SC_EINVAL, "line %d: prompt must be a non-empty array of token ids", line);
  r->prompt = malloc(sizeof *r->prompt * n);
  if (r->prompt == NULL) return sc_fail(d, SC_ENOMEM, "line %d: out of memory", line);
  r->prompt_len = (int32_t)n;
  for (size_t i = 0; i < n; i++) {
    json_t *t = json_array_get(prompt, i);
    if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= vocab)
      return sc_fail(d, SC_EINVAL, "line %d: prompt[%zu] is not a token id below %d", line, i,
                     vocab);
    r->prompt[i] = (int32_t)json_integer_value(t);
  }
  return 0;
}

int sc_requests_parse(const char *text, int32_t vocab, sc_requests *out, sc_diag *d) {
  memset(out, 0, sizeof *out);
  int rc = 0;
  int32_t cap = 0, line = 0;
  const char *p = text;
  while (*p) {
    const char *eol = strchr(p, '\n');
    const size_t len = eol ? (size_t)(eol - p) : strlen(p);
    line++;
    size_t skip = 0;
    while (skip < len && (p[skip] == ' ' || p[skip] == '\t' || p[skip] == '\r')) skip++;
    if (skip < len && p[skip] != '#') {
      json_error_t err;
      /* a key given twice is an error too: jansson would keep the last one silently */
      json_t *o = json_loadb(p, len, JSON_REJECT_DUPLICATES, &err);
      if (o == NULL) {
        rc = sc_fail(d, SC_EINVAL, "line %d: invalid JSON: %s", line, err.text);
        break;
      }
      if (out->n == cap) {
        cap = cap ? cap * 2 : 16;
        sc_run_request *nv = realloc(out->v, sizeof *nv * (size_t)cap);
        if (nv == NULL) {
          json_decref(o);
          rc = sc_fail(d, SC_ENOMEM, "out of memory");
          break;
        }
        out->v = nv;
      }
      rc = parse_line(o, line, vocab, &out->v[out->n], d);
      json_decref(o);
      out->n++; /* counted even on failure so sc_requests_free releases its prompt */
      if (rc) break;
    }
    p += len + (eol != NULL);
  }
  if (rc == 0 && out->n == 0) rc = sc_fail(d, SC_EINVAL, "the request file holds no request");
  if (rc) sc_requests_free(out);
  return rc;
}

int sc_requests_random(int32_t k, int32_t max_prompt, int32_t max_new, int32_t vocab,
                       uint64_t seed, sc_requests *out) {
  out->v = calloc((size_t)k, sizeof *out->v);
  out->n = 0;
  if (out->v == NULL) return SC_ENOMEM;
  uint64_t x = seed * 0x2545f4914f6cdd1dull + 7;
  for (int32_t i = 0; i < k; i++) {
    sc_run_request *r = &out->v[i];
    const bool short_prompt = next(&x) % 3 == 0;
    const int32_t len = 1 + (int32_t)(next(&x) % (uint64_t)(short_prompt ? 8 : max_prompt));
    r->max_tokens = 1 + (int32_t)(next(&x) % (uint64_t)max_new);
    r->seed = seed + (uint64_t)i;
    out->n++;
    if (fill_random_prompt(r, len, vocab, r->seed)) {
      sc_requests_free(out);
      return SC_ENOMEM;
    }
  }
  return 0;
}

void sc_requests_free(sc_requests *r) {
  for (int32_t i = 0; i < r->n; i++) free(r->v[i].prompt);
  free(r->v);
  memset(r, 0, sizeof *r);
}
