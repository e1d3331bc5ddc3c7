/* openai.h - the OpenAI completions API as the head serves it (docs/http.md): a request
 * body read and checked into what the gateway submits, and the JSON of responses, stream
 * chunks, model lists and errors.
 *
 * Pure: no sockets, no actors, no clocks (http_front.c is the shell that owns the HTTP
 * connections; the gateway validates the submit like any client's). What the API has and
 * sparsecp cannot do is refused with a 400 that names the field (n > 1, best_of, echo,
 * logprobs, penalties, top_p other than 1, suffix, logit_bias), never silently ignored;
 * fields that do not change the result (user, stream_options without usage) are accepted.
 *
 * Ownership: a parsed request owns its strings and arrays (sc_openai_request_free).
 * Threads: any; no shared state.
 */
#ifndef SC_OPENAI_H
#define SC_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/jsonw.h"
#include "messages/messages.h"

#define SC_OPENAI_MAX_STOP 4   /* as the OpenAI API allows */
#define SC_OPENAI_MAX_STOP_LEN 256

typedef struct sc_openai_request {
  char *model;            /* NULL: not given */
  char *text;             /* a text prompt (NUL-terminated, text_len bytes), or NULL */
  size_t text_len;
  int32_t *ids;           /* a prompt of token ids, or NULL */
  size_t num_ids;
  int32_t max_tokens;     /* default 16, as the API */
  float temperature;      /* default 1, as the API */
  uint64_t seed;
  bool has_seed;
  bool stream;
  bool include_usage;     /* stream_options.include_usage */
  bool ignore_eos;        /* vLLM's extension: run to max_tokens past end-of-sequence */
  char *stop[SC_OPENAI_MAX_STOP];
  int num_stop;
} sc_openai_request;

/* Why a request cannot be served: an HTTP status, the field at fault (or "") and a
 * sentence for the client. */
typedef struct sc_openai_error {
  int status;
  char param[32];
  char message[256];
} sc_openai_error;

/* Reads a POST /v1/completions body. Returns 0, or an SC_E* code with *err filled (400
 * for bad JSON and bad fields). out is zeroed first and owns what it holds either way. */
int sc_openai_parse_completion(const char *body, size_t len, sc_openai_request *out,
                               sc_openai_error *err);
void sc_openai_request_free(sc_openai_request *r);

/* The HTTP status for an SC_E* code of the cluster's client_error (400 bad input, 413 too
 * large, 429 queue full, 503 stopping or gone, 500 otherwise). */
int sc_openai_status_of(int code);

/* {"error": {"message", "type", "param", "code"}} as the API writes errors. */
void sc_openai_error_json(sc_jsonw *w, int status, const char *param, const char *message);

/* One completion choice's content: the text (when there is a tokenizer) and the token
 * ids; finish_reason NULL while streaming. token_ids is sparsecp's addition (vLLM's name):
 * without a tokenizer it is the only output. */
typedef struct sc_openai_choice {
  const char *text;
  size_t text_len;
  const int32_t *ids;
  size_t num_ids;
  const char *finish_reason;
} sc_openai_choice;

/* What every response and chunk of one request repeats. */
typedef struct sc_openai_head {
  const char *id;         /* "cmpl-..." */
  int64_t created;        /* Unix seconds */
  const char *model;
} sc_openai_head;

/* The whole response of a request that did not stream. */
void sc_openai_completion_json(sc_jsonw *w, const sc_openai_head *h, const sc_openai_choice *c,
                               int32_t prompt_tokens, int32_t completion_tokens);
/* One streamed chunk (choice c), or with c NULL the usage-only chunk that
 * stream_options.include_usage asks for at the end. */
void sc_openai_chunk_json(sc_jsonw *w, const sc_openai_head *h, const sc_openai_choice *c,
                          int32_t prompt_tokens, int32_t completion_tokens);
/* GET /health from the scheduler's report (NULL: it did not answer): 200 and "ok" once
 * every node joined and while not stopping; else 503 and "starting", "stopping" or "the
 * scheduler does not answer". Returns the status and writes {"status": state}. */
int sc_openai_health_json(sc_jsonw *w, const sc_msg_stats_report *r);

/* GET /v1/models: the one model this cluster serves. */
void sc_openai_models_json(sc_jsonw *w, const char *model, int64_t created);

#endif
