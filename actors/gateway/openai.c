/* openai.c - see openai.h. */
#include "actors/gateway/openai.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static int bad(sc_openai_error *err, int status, const char *param, const char *fmt, ...) {
  err->status = status;
  snprintf(err->param, sizeof err->param, "%s", param);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return status == 413 ? SC_ETOOBIG : SC_EINVAL;
}

/* A token id list: every element an integer in [0, INT32_MAX] (the gateway then checks
 * them against the vocabulary, as for any client). */
static int read_ids(json_t *arr, sc_openai_request *r, sc_openai_error *err) {
  const size_t n = json_array_size(arr);
  if (n == 0) return bad(err, 400, "prompt", "prompt is empty");
  r->ids = malloc(sizeof *r->ids * n);
  if (r->ids == NULL) return bad(err, 503, "prompt", "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_t *v = json_array_get(arr, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
      return bad(err, 400, "prompt", "prompt[%zu]: a token id must be an integer >= 0", i);
    r->ids[i] = (int32_t)json_integer_value(v);
  }
  r->num_ids = n;
  return 0;
}

/* prompt: a string, an array of token ids, or a batch of one of either (the API takes
 * batches; sparsecp serves one prompt per request). */
static int read_prompt(json_t *p, sc_openai_request *r, sc_openai_error *err) {
  if (json_is_array(p) && json_array_size(p) == 1 &&
      (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
    p = json_array_get(p, 0);
  else if (json_is_array(p) && json_array_size(p) > 1 && !json_is_integer(json_array_get(p, 0)))
    return bad(err, 400, "prompt", "one prompt per request (send the others separately)");
  if (json_is_string(p)) {
    r->text_len = json_string_length(p);
    if (r->text_len == 0) return bad(err, 400, "prompt", "prompt is empty");
    r->text = malloc(r->text_len + 1);
    if (r->text == NULL) return bad(err, 503, "prompt", "out of memory");
    memcpy(r->text, json_string_value(p), r->text_len + 1);
    return 0;
  }
  if (json_is_array(p)) return read_ids(p, r, err);
  return bad(err, 400, "prompt", "prompt must be a string or an array of token ids");
}

static int read_stop(json_t *s, sc_openai_request *r, sc_openai_error *err) {
  const bool many = json_is_array(s);
  const size_t n = many ? json_array_size(s) : 1;
  if (n > SC_OPENAI_MAX_STOP)
    return bad(err, 400, "stop", "at most %d stop strings", SC_OPENAI_MAX_STOP);
  for (size_t i = 0; i < n; i++) {
    json_t *v = many ? json_array_get(s, i) : s;
    if (!json_is_string(v))
      return bad(err, 400, "stop", "stop must be a string or an array of strings");
    const size_t len = json_string_length(v);
    if (len == 0 || len > SC_OPENAI_MAX_STOP_LEN || strlen(json_string_value(v)) != len)
      return bad(err, 400, "stop", "a stop string must have 1 to %d bytes (no NUL)",
                 SC_OPENAI_MAX_STOP_LEN);
    if ((r->stop[r->num_stop] = strdup(json_string_value(v))) == NULL)
      return bad(err, 503, "stop", "out of memory");
    r->num_stop++;
  }
  return 0;
}

/* A field that the API has and sparsecp does not implement is accepted only at the value
 * that means "off"; anything else is refused by name rather than ignored. */
static int check_off(json_t *root, sc_openai_error *err) {
  static const struct {
    const char *key;
    double off;      /* the numeric value that means "off" */
    bool bool_off;   /* a boolean field: false is off */
  } fields[] = {{"n", 1, false},        {"best_of", 1, false},       {"top_p", 1, false},
                {"presence_penalty", 0, false}, {"frequency_penalty", 0, false},
                {"echo", 0, true}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    json_t *v = json_object_get(root, fields[i].key);
    if (v == NULL || json_is_null(v)) continue;
    const bool off = fields[i].bool_off ? json_is_false(v)
                                        : json_is_number(v) && json_number_value(v) == fields[i].off;
    if (!off)
      return bad(err, 400, fields[i].key, "%s is not supported (only %s)", fields[i].key,
                 fields[i].bool_off ? "false" : fields[i].off == 1 ? "1" : "0");
  }
  static const char *const absent[] = {"logprobs", "suffix", "logit_bias"};
  for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
    json_t *v = json_object_get(root, absent[i]);
    if (v && !json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0))
      return bad(err, 400, absent[i], "%s is not supported", absent[i]);
  }
  return 0;
}

static int read_numbers(json_t *root, sc_openai_request *r, sc_openai_error *err) {
  json_t *v = json_object_get(root, "max_tokens");
  if (v && !json_is_null(v)) {
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
      return bad(err, 400, "max_tokens", "max_tokens must be an integer >= 1");
    r->max_tokens = (int32_t)json_integer_value(v);
  }
  v = json_object_get(root, "temperature");
  if (v && !json_is_null(v)) {
    if (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > 2)
      return bad(err, 400, "temperature", "temperature must be a number from 0 to 2");
    r->temperature = (float)json_number_value(v);
  }
  v = json_object_get(root, "seed");
  if (v && !json_is_null(v)) {
    if (!json_is_integer(v))
      return bad(err, 400, "seed", "seed must be an integer");
    /* (a negative seed is a seed too: its two's complement is used) */
    r->seed = (uint64_t)json_integer_value(v);
    r->has_seed = true;
  }
  return 0;
}

static int read_flags(json_t *root, sc_openai_request *r, sc_openai_error *err) {
  json_t *v = json_object_get(root, "stream");
  if (v && !json_is_null(v)) {
    if (!json_is_boolean(v)) return bad(err, 400, "stream", "stream must be true or false");
    r->stream = json_is_true(v);
  }
  v = json_object_get(root, "stream_options");
  if (v && !json_is_null(v)) {
    json_t *u = json_is_object(v) ? json_object_get(v, "include_usage") : NULL;
    if (!json_is_object(v) || (u && !json_is_boolean(u)))
      return bad(err, 400, "stream_options", "stream_options must be {\"include_usage\": bool}");
    if (!r->stream) return bad(err, 400, "stream_options", "stream_options needs stream: true");
    r->include_usage = u && json_is_true(u);
  }
  v = json_object_get(root, "ignore_eos"); /* (vLLM's extension of the API) */
  if (v && !json_is_null(v)) {
    if (!json_is_boolean(v)) return bad(err, 400, "ignore_eos", "ignore_eos must be true or false");
    r->ignore_eos = json_is_true(v);
  }
  return 0;
}

int sc_openai_parse_completion(const char *body, size_t len, sc_openai_request *out,
                               sc_openai_error *err) {
  *out = (sc_openai_request){.max_tokens = 16, .temperature = 1.0f};
  *err = (sc_openai_error){0};
  json_error_t jerr;
  json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return bad(err, 400, "", "the body is not JSON: %s (at byte %d)", jerr.text, jerr.position);
  int rc = 0;
  json_t *v;
  if (!json_is_object(root)) {
    rc = bad(err, 400, "", "the body must be a JSON object");
  } else if ((v = json_object_get(root, "model")) && !json_is_null(v) && !json_is_string(v)) {
    rc = bad(err, 400, "model", "model must be a string");
  } else if (v && json_is_string(v) && (out->model = strdup(json_string_value(v))) == NULL) {
    rc = bad(err, 503, "model", "out of memory");
  } else if ((v = json_object_get(root, "prompt")) == NULL || json_is_null(v)) {
    rc = bad(err, 400, "prompt", "prompt is required");
  } else if ((rc = read_prompt(v, out, err)) == 0 && (rc = check_off(root, err)) == 0 &&
             (rc = read_numbers(root, out, err)) == 0 && (rc = read_flags(root, out, err)) == 0) {
    v = json_object_get(root, "stop");
    if (v && !json_is_null(v)) rc = read_stop(v, out, err);
  }
  json_decref(root);
  return rc;
}

void sc_openai_request_free(sc_openai_request *r) {
  free(r->model);
  free(r->text);
  free(r->ids);
  for (int i = 0; i < r->num_stop; i++) free(r->stop[i]);
  *r = (sc_openai_request){0};
}

int sc_openai_status_of(int code) {
  switch (code) {
  case SC_EINVAL: case SC_ERANGE: case SC_EPROTO: case SC_ENOTSUP: return 400;
  case SC_ETOOBIG: return 413;
  case SC_EFULL: case SC_EAGAIN: return 429;
  case SC_ECLOSED: case SC_EDOWN: case SC_ENOMEM: return 503;
  case SC_EPERM: return 403;
  default: return 500;
  }
}

/* The API's error types by status. */
static const char *error_type(int status) {
  switch (status) {
  case 401: return "authentication_error";
  case 403: return "permission_error";
  case 404: return "not_found_error";
  case 429: return "rate_limit_error";
  case 503: return "service_unavailable";
  default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

void sc_openai_error_json(sc_jsonw *w, int status, const char *param, const char *message) {
  sc_jsonw_obj_begin(w);
  sc_jsonw_key(w, "error");
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_str(w, "message", message);
  sc_jsonw_kv_str(w, "type", error_type(status));
  sc_jsonw_key(w, "param");
  if (param && param[0]) sc_jsonw_str_val(w, param);
  else sc_jsonw_null(w);
  sc_jsonw_kv_int(w, "code", status);
  sc_jsonw_obj_end(w);
  sc_jsonw_obj_end(w);
}

static void head_json(sc_jsonw *w, const sc_openai_head *h) {
  sc_jsonw_kv_str(w, "id", h->id);
  sc_jsonw_kv_str(w, "object", "text_completion");
  sc_jsonw_kv_int(w, "created", h->created);
  sc_jsonw_kv_str(w, "model", h->model);
}

static void choice_json(sc_jsonw *w, const sc_openai_choice *c) {
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_int(w, "index", 0);
  sc_jsonw_key(w, "text");
  sc_jsonw_strn_val(w, c->text ? c->text : "", c->text ? c->text_len : 0);
  sc_jsonw_key(w, "logprobs");
  sc_jsonw_null(w);
  sc_jsonw_key(w, "finish_reason");
  if (c->finish_reason) sc_jsonw_str_val(w, c->finish_reason);
  else sc_jsonw_null(w);
  sc_jsonw_key(w, "token_ids");
  sc_jsonw_int32_array(w, c->ids, c->num_ids);
  sc_jsonw_obj_end(w);
}

static void usage_json(sc_jsonw *w, int32_t prompt_tokens, int32_t completion_tokens) {
  sc_jsonw_key(w, "usage");
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_int(w, "prompt_tokens", prompt_tokens);
  sc_jsonw_kv_int(w, "completion_tokens", completion_tokens);
  sc_jsonw_kv_int(w, "total_tokens", (int64_t)prompt_tokens + completion_tokens);
  sc_jsonw_obj_end(w);
}

void sc_openai_completion_json(sc_jsonw *w, const sc_openai_head *h, const sc_openai_choice *c,
                               int32_t prompt_tokens, int32_t completion_tokens) {
  sc_jsonw_obj_begin(w);
  head_json(w, h);
  sc_jsonw_key(w, "choices");
  sc_jsonw_arr_begin(w);
  choice_json(w, c);
  sc_jsonw_arr_end(w);
  usage_json(w, prompt_tokens, completion_tokens);
  sc_jsonw_obj_end(w);
}

void sc_openai_chunk_json(sc_jsonw *w, const sc_openai_head *h, const sc_openai_choice *c,
                          int32_t prompt_tokens, int32_t completion_tokens) {
  sc_jsonw_obj_begin(w);
  head_json(w, h);
  sc_jsonw_key(w, "choices");
  sc_jsonw_arr_begin(w);
  if (c) choice_json(w, c);
  sc_jsonw_arr_end(w);
  if (c == NULL) usage_json(w, prompt_tokens, completion_tokens);
  sc_jsonw_obj_end(w);
}

void sc_openai_models_json(sc_jsonw *w, const char *model, int64_t created) {
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_str(w, "object", "list");
  sc_jsonw_key(w, "data");
  sc_jsonw_arr_begin(w);
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_str(w, "id", model);
  sc_jsonw_kv_str(w, "object", "model");
  sc_jsonw_kv_int(w, "created", created);
  sc_jsonw_kv_str(w, "owned_by", "sparsecp");
  sc_jsonw_obj_end(w);
  sc_jsonw_arr_end(w);
  sc_jsonw_obj_end(w);
}

int sc_openai_health_json(sc_jsonw *w, const sc_msg_stats_report *r) {
  const char *state = r == NULL     ? "the scheduler does not answer"
                      : r->stopping ? "stopping"
                      : !r->ready   ? "starting"
                                    : "ok";
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_str(w, "status", state);
  sc_jsonw_obj_end(w);
  return r && r->ready && !r->stopping ? 200 : 503;
}
