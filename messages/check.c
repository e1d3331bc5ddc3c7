/* check.c - the rules of message types that declarative field ranges cannot express,
 * named in schema.def. lim is NULL on the trusted path: then only the limit-independent
 * rules apply. Each rejection names the field and what to change. Pure functions. */
#include <math.h>

#include "messages/messages.h"
#include "messages/schema_desc.h"

static int check_tokens(const char *where, const sc_msg_arr_i32 *t, const sc_msg_limits *lim,
                        sc_diag *d) {
  if (lim == NULL) return 0;
  for (uint32_t i = 0; i < t->n; i++)
    if (t->v[i] >= lim->vocab_size)
      return sc_fail(d, SC_EINVAL, "%s[%u]: token id %d is not below the vocabulary size %d",
                     where, i, t->v[i], lim->vocab_size);
  return 0;
}

int sc_msg_check_client_submit(const void *body, const sc_msg_limits *lim, sc_diag *d) {
  const sc_msg_client_submit *m = body;
  if (!isfinite(m->temperature) || m->temperature < 0.0f)
    return sc_fail(d, SC_EINVAL,
                   "client_submit.temperature: %g is not allowed (use 0 for greedy or a "
                   "finite positive value)",
                   (double)m->temperature);
  if (lim == NULL) return 0;
  if (m->prompt.n == 0)
    return sc_fail(d, SC_EINVAL, "client_submit.prompt: the prompt is empty (send at least "
                                 "one token id)");
  if (m->prompt.n > (uint32_t)lim->max_prompt_len)
    return sc_fail(d, SC_ETOOBIG,
                   "client_submit.prompt: %u tokens exceed the limit of %d (shorten the "
                   "prompt)",
                   m->prompt.n, lim->max_prompt_len);
  if (m->max_tokens > lim->max_new_tokens)
    return sc_fail(d, SC_EINVAL,
                   "client_submit.max_tokens: %d exceeds the limit of %d new tokens",
                   m->max_tokens, lim->max_new_tokens);
  return check_tokens("client_submit.prompt", &m->prompt, lim, d);
}

int sc_msg_check_client_token(const void *body, const sc_msg_limits *lim, sc_diag *d) {
  const sc_msg_client_token *m = body;
  return check_tokens("client_token.tokens", &m->tokens, lim, d);
}

int sc_msg_check_global_batch(const void *body, const sc_msg_limits *lim, sc_diag *d) {
  const sc_msg_global_batch *m = body;
  int64_t total = 0;
  for (uint32_t i = 0; i < m->reqs.n; i++) total += m->reqs.v[i].scheduled;
  if (total != (int64_t)m->tokens.n)
    return sc_fail(d, SC_EINVAL,
                   "global_batch.tokens: %u token ids for %lld scheduled tokens (one id per "
                   "scheduled token, in batch order)",
                   m->tokens.n, (long long)total);
  return check_tokens("global_batch.tokens", &m->tokens, lim, d);
}
