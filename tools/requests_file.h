/* requests_file.h - the request files of `sparsecp run --requests FILE.jsonl`.
 *
 * One JSON object per line (blank lines and lines starting with # are skipped):
 *   {"prompt": [ids...]} or {"prompt_len": L}   the prompt (prompt_len: pseudo-random
 *                                                ids from the seed, below the vocabulary)
 *   "max_tokens": M                              required, >= 1
 *   "temperature": T, "seed": S                  optional (greedy, seed = line number)
 *   "ignore_eos": true                           optional: run to max_tokens past the
 *                                                model's end-of-sequence tokens
 *   "arrive_ms": A                               optional: submit A ms after the start
 *                                                (default 0: all at once)
 * Unknown keys are errors, so a typo cannot silently fall back to a default.
 * Pure parsing (text in, structs out). Ownership: the caller frees with
 * sc_requests_free. Any thread.
 */
#ifndef SC_REQUESTS_FILE_H
#define SC_REQUESTS_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct sc_run_request {
  int32_t *prompt;
  int32_t prompt_len;
  int32_t max_tokens;
  float temperature;
  uint64_t seed;
  int64_t arrive_ms;
  bool ignore_eos;
} sc_run_request;

typedef struct sc_requests {
  sc_run_request *v;
  int32_t n;
} sc_requests;

/* Parses JSONL text; vocab bounds the token ids. Errors name the line. */
int sc_requests_parse(const char *text, int32_t vocab, sc_requests *out, sc_diag *d);
/* K random requests: prompts of 1..max_prompt tokens (a third of them short: 1..8),
 * max_tokens in 1..max_new, from one seed. */
int sc_requests_random(int32_t k, int32_t max_prompt, int32_t max_new, int32_t vocab,
                       uint64_t seed, sc_requests *out);
void sc_requests_free(sc_requests *r);

/* The pseudo-random prompt of a seed: len ids below vocab (xorshift64 from
 * seed * golden ratio + 1). `prompt_len` lines, `submit --prompt-len` and bench e2e all
 * use it, so the same seed is the same prompt everywhere. */
void sc_requests_fill_prompt(int32_t *dst, int32_t len, int32_t vocab, uint64_t seed);

#endif
