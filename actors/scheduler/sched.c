/* sched.c - continuous batching, chunked prefill and virtual KV block allocation. */
#include "actors/scheduler/sched.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/index.h"
#include "plan/dcp.h"

enum { SLOT_FREE = 0, SLOT_WAITING, SLOT_RUNNING };

typedef struct req {
  int64_t id;
  int32_t *tokens;     /* prompt, then generated tokens */
  int32_t cap_tokens;
  int32_t prompt_len, generated, computed;
  /* tokens to compute before the request samples: the prompt, or after a requeue
   * (sc_sched_requeue_running) the prompt and every token generated so far */
  int32_t prefill_len;
  int32_t failures;    /* steps of it that failed in a row (sc_sched_retry_step) */
  /* The steps in flight that hold it (at most two: one planned ahead, sc_sched_next_ahead)
   * and what they add once advanced: computed and generated stay what the advanced
   * steps made, so that a failure only has to forget these. */
  int32_t flights;
  int32_t ahead_q;     /* tokens of it those steps compute */
  int32_t ahead_gen;   /* tokens they sample (0 or 1) */
  int32_t last_entry;  /* its entry in the newest step in flight that holds it */
  bool seen;           /* (fail_flights: counted once however many steps held it) */
  sc_sched_params params;
  int32_t *blocks;     /* reserved virtual blocks (whole extent) */
  int32_t num_blocks;
  uint8_t state;
  bool canceled;       /* canceled while in the step in flight */
  bool ended;          /* ended at an end-of-sequence token while a step planned ahead
                          held it: that step's token is dropped, then it is released */
} req_t;

/* Whether a step still holding request r drops what it adds: r's client was told it
 * ended (a cancel, or its end-of-sequence token). */
static bool gone(const req_t *r) { return r->canceled || r->ended; }

/* What one client holds (sc_sched.h: fair shares). An entry lives while the client holds
 * a request. */
typedef struct client_acct {
  uint64_t client;
  int64_t held;        /* tokens of its requests (prompt + max_tokens each) */
  int32_t requests;    /* waiting or running; 0: the entry is free */
  int32_t running;
  int32_t blocks;      /* KV blocks its running requests hold */
  int32_t next_free;   /* free entries: the next free one, -1 at the end */
} client_acct;

/* A step in flight and the buffers it reuses. */
typedef struct flight {
  sc_sched_step step;
  int32_t *step_slot;              /* slot of each entry */
  int32_t cap_entries, cap_tokens, cap_blocks;
} flight;

struct sc_sched {
  sc_sched_config cfg;
  client_acct *clients;
  int32_t num_clients, cap_clients, free_client;
  sc_index by_client;
  req_t *slots;
  int32_t num_slots;
  int32_t *waiting, num_waiting;   /* FIFO of slot indices */
  int32_t *running, num_running;   /* admission order */
  int32_t *free_blocks, num_free;  /* stack of free virtual block ids */
  /* tokens reserved by the requests held (prompt + max_tokens each), and their bound */
  int64_t held_tokens, max_held_tokens;

  /* the steps in flight, oldest first from fl[head], each with its reusable buffers */
  flight fl[2];
  int32_t head, num_flight;
  uint64_t last_step;
  sc_sched_stats stats;
};

int32_t sc_sched_blocks_for(const sc_sched_config *cfg, int64_t tokens) {
  return sc_kv_blocks_needed(tokens, cfg->block_size, cfg->dcp);
}

int64_t sc_sched_max_held_tokens(const sc_sched_config *cfg) {
  const int64_t cache = (int64_t)cfg->num_blocks * cfg->block_size * cfg->dcp;
  const int64_t bound = SC_SCHED_HELD_PER_CACHE * cache;
  return bound > SC_SCHED_HELD_MIN ? bound : SC_SCHED_HELD_MIN;
}

int sc_sched_create(sc_sched **out, const sc_sched_config *cfg, sc_diag *d) {
  *out = NULL;
  if (cfg->token_budget < 1 || cfg->max_running < 1 || cfg->block_size < 1 || cfg->dcp < 1 ||
      cfg->num_blocks < 1 || cfg->max_model_len < 2)
    return sc_fail(d, SC_EINVAL,
                   "scheduler: token_budget, max_running, block_size, dcp and num_blocks must "
                   "be >= 1 and max_model_len >= 2");
  if (cfg->num_eos < 0 || cfg->num_eos > SC_SCHED_MAX_EOS)
    return sc_fail(d, SC_EINVAL, "scheduler: %d end-of-sequence tokens (at most %d)",
                   cfg->num_eos, SC_SCHED_MAX_EOS);
  sc_sched *s = calloc(1, sizeof *s);
  if (s == NULL) return sc_fail(d, SC_ENOMEM, "scheduler: out of memory");
  s->cfg = *cfg;
  s->free_client = -1;
  s->free_blocks = malloc(sizeof *s->free_blocks * (size_t)cfg->num_blocks);
  if (s->free_blocks == NULL || sc_index_init(&s->by_client, 16) != 0) {
    free(s->free_blocks);
    free(s);
    return sc_fail(d, SC_ENOMEM, "scheduler: out of memory");
  }
  /* Pop order hands out low block ids first (readable block tables in logs). */
  for (int32_t b = 0; b < cfg->num_blocks; b++) s->free_blocks[b] = cfg->num_blocks - 1 - b;
  s->num_free = cfg->num_blocks;
  s->max_held_tokens = sc_sched_max_held_tokens(cfg);
  *out = s;
  return 0;
}

/* ---- clients ---- */

static uint64_t client_hash(uint64_t client) { return sc_mix64(client); }
static uint64_t acct_hash(const void *s, int32_t pos) {
  return client_hash(((const sc_sched *)s)->clients[pos].client);
}
static bool acct_is(const void *s, int32_t pos, const void *client) {
  return ((const sc_sched *)s)->clients[pos].client == *(const uint64_t *)client;
}

static client_acct *acct_find(const sc_sched *s, uint64_t client) {
  const int32_t pos = sc_index_find(&s->by_client, client_hash(client), acct_is, s, &client);
  return pos >= 0 ? &s->clients[pos] : NULL;
}

/* The client's entry, made when it has none; NULL when out of memory. */
static client_acct *acct_get(sc_sched *s, uint64_t client) {
  client_acct *a = acct_find(s, client);
  if (a) return a;
  int32_t pos = s->free_client;
  if (pos >= 0) {
    s->free_client = s->clients[pos].next_free;
  } else {
    if (s->num_clients == s->cap_clients) {
      const int32_t cap = s->cap_clients ? 2 * s->cap_clients : 16;
      client_acct *c = realloc(s->clients, sizeof *c * (size_t)cap);
      if (c == NULL) return NULL;
      s->clients = c;
      s->cap_clients = cap;
    }
    pos = s->num_clients++;
  }
  s->clients[pos] = (client_acct){.client = client, .next_free = -1};
  if (sc_index_put(&s->by_client, client_hash(client), pos, acct_hash, s) != 0) {
    s->clients[pos].next_free = s->free_client;
    s->free_client = pos;
    return NULL;
  }
  return &s->clients[pos];
}

/* The entry of a client that holds nothing any more goes. */
static void acct_drop_if_idle(sc_sched *s, client_acct *a) {
  if (a->requests > 0) return;
  const int32_t pos = (int32_t)(a - s->clients);
  sc_index_del(&s->by_client, client_hash(a->client), pos, acct_hash, s);
  a->next_free = s->free_client;
  s->free_client = pos;
}

/* A request of the client is no longer held. */
static void acct_release(sc_sched *s, const req_t *r) {
  client_acct *a = acct_find(s, r->params.client);
  if (a == NULL) return;
  a->held -= r->cap_tokens;
  a->requests--;
  a->running -= r->state == SLOT_RUNNING;
  a->blocks -= r->state == SLOT_RUNNING ? r->num_blocks : 0;
  acct_drop_if_idle(s, a);
}

/* The request's blocks back to the pool (in reverse, so that the pool hands them out in
 * the order they were taken). */
static void return_blocks(sc_sched *s, req_t *r) {
  for (int32_t b = r->num_blocks - 1; b >= 0; b--) s->free_blocks[s->num_free++] = r->blocks[b];
  r->num_blocks = 0;
}

static void release(sc_sched *s, int32_t slot) {
  req_t *r = &s->slots[slot];
  acct_release(s, r);
  s->held_tokens -= r->cap_tokens;
  return_blocks(s, r);
  free(r->tokens);
  free(r->blocks);
  memset(r, 0, sizeof *r);
}

void sc_sched_destroy(sc_sched *s) {
  if (s == NULL) return;
  for (int32_t i = 0; i < s->num_slots; i++)
    if (s->slots[i].state != SLOT_FREE) release(s, i);
  free(s->slots);
  free(s->waiting);
  free(s->running);
  free(s->free_blocks);
  free(s->clients);
  sc_index_free(&s->by_client);
  for (int k = 0; k < 2; k++) {
    flight *f = &s->fl[k];
    free(f->step.reqs);
    free(f->step.tokens);
    free(f->step.sample);
    free(f->step.params);
    free(f->step.out_index);
    free(f->step.prev_entry);
    free(f->step.block_start);
    free(f->step.blocks);
    free(f->step_slot);
  }
  free(s);
}

static int32_t find(const sc_sched *s, int64_t id) {
  for (int32_t i = 0; i < s->num_slots; i++)
    if (s->slots[i].state != SLOT_FREE && s->slots[i].id == id) return i;
  return -1;
}

static void remove_index(int32_t *arr, int32_t *n, int32_t value) {
  for (int32_t i = 0; i < *n; i++)
    if (arr[i] == value) {
      memmove(arr + i, arr + i + 1, sizeof *arr * (size_t)(*n - i - 1));
      (*n)--;
      return;
    }
}

/* The refusals do not name id: in a cluster it is the gateway's internal id, which the
 * client never saw (the error reply carries the client's own). */
int sc_sched_submit(sc_sched *s, int64_t id, const int32_t *prompt, int32_t prompt_len,
                    const sc_sched_params *p, sc_diag *d) {
  if (prompt_len < 1 || prompt == NULL)
    return sc_fail(d, SC_EINVAL, "the prompt is empty");
  if (p->max_new_tokens < 1)
    return sc_fail(d, SC_EINVAL, "max_tokens must be >= 1");
  if (!(p->temperature >= 0.0f) || !isfinite(p->temperature))
    return sc_fail(d, SC_EINVAL, "temperature must be finite and >= 0");
  const int64_t extent = (int64_t)prompt_len + p->max_new_tokens;
  if (extent > s->cfg.max_model_len)
    return sc_fail(d, SC_ETOOBIG,
                   "prompt of %d tokens + max_tokens %d exceeds the model length limit of %d",
                   prompt_len, p->max_new_tokens, s->cfg.max_model_len);
  const int32_t need = sc_sched_blocks_for(&s->cfg, extent);
  if (need > s->cfg.num_blocks)
    return sc_fail(d, SC_ETOOBIG,
                   "the request needs %d KV blocks of %d tokens; the cache has %d", need,
                   s->cfg.block_size * s->cfg.dcp, s->cfg.num_blocks);
  if (find(s, id) >= 0)
    return sc_fail(d, SC_EINVAL, "request %lld: the id is already in use", (long long)id);
  if (s->held_tokens + extent > s->max_held_tokens)
    return sc_fail(d, SC_EFULL,
                   "the cluster holds requests of %lld tokens already (prompt + max_tokens "
                   "each; at most %lld): try again when some have finished",
                   (long long)s->held_tokens, (long long)s->max_held_tokens);
  const client_acct *known = acct_find(s, p->client);
  const int64_t mine = known ? known->held : 0;
  const int64_t share = s->max_held_tokens / SC_SCHED_CLIENT_SHARE;
  if (mine + extent > share)
    return sc_fail(d, SC_EFULL,
                   "this client holds requests of %lld tokens already (prompt + max_tokens "
                   "each; one client at most %lld, so that others are served too): try "
                   "again when some have finished",
                   (long long)mine, (long long)share);

  int32_t slot = -1;
  for (int32_t i = 0; i < s->num_slots && slot < 0; i++)
    if (s->slots[i].state == SLOT_FREE) slot = i;
  if (slot < 0) {
    const int32_t n = s->num_slots ? 2 * s->num_slots : 16;
    req_t *ns = realloc(s->slots, sizeof *ns * (size_t)n);
    int32_t *nw = realloc(s->waiting, sizeof *nw * (size_t)n);
    if (ns) s->slots = ns;
    if (nw) s->waiting = nw;
    int32_t *nr = ns && nw ? realloc(s->running, sizeof *nr * (size_t)n) : NULL;
    if (nr == NULL) return sc_fail(d, SC_ENOMEM, "scheduler: out of memory");
    s->running = nr;
    memset(s->slots + s->num_slots, 0, sizeof *ns * (size_t)(n - s->num_slots));
    slot = s->num_slots;
    s->num_slots = n;
  }
  req_t *r = &s->slots[slot];
  client_acct *acct = acct_get(s, p->client);
  r->tokens = acct ? malloc(sizeof *r->tokens * (size_t)extent) : NULL;
  r->blocks = r->tokens ? malloc(sizeof *r->blocks * (size_t)need) : NULL;
  if (r->tokens == NULL || r->blocks == NULL) {
    if (acct) acct_drop_if_idle(s, acct); /* (made for this request only) */
    free(r->tokens);
    free(r->blocks);
    memset(r, 0, sizeof *r);
    return sc_fail(d, SC_ENOMEM, "scheduler: out of memory for request %lld", (long long)id);
  }
  memcpy(r->tokens, prompt, sizeof *prompt * (size_t)prompt_len);
  r->cap_tokens = (int32_t)extent;
  s->held_tokens += extent;
  r->id = id;
  r->prompt_len = prompt_len;
  r->prefill_len = prompt_len;
  r->params = *p;
  r->state = SLOT_WAITING;
  acct->held += extent;
  acct->requests++;
  s->waiting[s->num_waiting++] = slot;
  return 0;
}

int sc_sched_cancel(sc_sched *s, int64_t id) {
  const int32_t slot = find(s, id);
  if (slot < 0 || s->slots[slot].ended) return SC_ENOENT;
  if (s->slots[slot].flights > 0) {
    s->slots[slot].canceled = true; /* removed when its last step in flight ends */
    return 0;
  }
  if (s->slots[slot].state == SLOT_WAITING) remove_index(s->waiting, &s->num_waiting, slot);
  else remove_index(s->running, &s->num_running, slot);
  release(s, slot);
  s->stats.canceled++;
  return 0;
}

/* How far into the waiting queue admission looks for the client that runs the fewest:
 * bounded, so that a flood of tiny requests cannot make each admission walk a queue of
 * hundreds of thousands (beyond it, arrival order decides). */
#define FAIR_SCAN 1024

/* Whether client a (NULL: untracked) would go past its share of the KV blocks by taking
 * `need` more (a client that holds none may take more: one long request still runs). */
static bool over_share(const sc_sched *s, const client_acct *a, int32_t need) {
  return a && a->blocks > 0 && a->blocks + need > s->cfg.num_blocks / SC_SCHED_CLIENT_SHARE;
}

/* The position in waiting of the next request to admit: the first whose client runs the
 * fewest requests and is within its share of the blocks, among the first FAIR_SCAN;
 * stops at a client that runs none. -1: every client looked at is over its share. */
static int32_t next_fair(const sc_sched *s) {
  int32_t best = -1, best_running = INT32_MAX;
  const int32_t n = s->num_waiting < FAIR_SCAN ? s->num_waiting : FAIR_SCAN;
  for (int32_t k = 0; k < n && best_running > 0; k++) {
    const req_t *r = &s->slots[s->waiting[k]];
    const client_acct *a = acct_find(s, r->params.client);
    const int32_t running = a ? a->running : 0;
    if (running < best_running &&
        !over_share(s, a, sc_sched_blocks_for(&s->cfg, r->cap_tokens))) {
      best = k;
      best_running = running;
    }
  }
  return best;
}

static int reserve_step(flight *f, int32_t entries, int32_t tokens, int32_t blocks) {
#define RESERVE(ptr, cap, n)                                        \
  if ((n) > (cap)) {                                                \
    void *p_ = realloc((ptr), sizeof *(ptr) * (size_t)(n));         \
    if (p_ == NULL) return SC_ENOMEM;                               \
    (ptr) = p_;                                                     \
  }
  /* the per-entry arrays share one capacity; block_start needs one more slot */
  RESERVE(f->step.reqs, f->cap_entries, entries + 1);
  RESERVE(f->step.sample, f->cap_entries, entries + 1);
  RESERVE(f->step.params, f->cap_entries, entries + 1);
  RESERVE(f->step.out_index, f->cap_entries, entries + 1);
  RESERVE(f->step.prev_entry, f->cap_entries, entries + 1);
  RESERVE(f->step_slot, f->cap_entries, entries + 1);
  RESERVE(f->step.block_start, f->cap_entries, entries + 1);
  if (entries + 1 > f->cap_entries) f->cap_entries = entries + 1;
  RESERVE(f->step.tokens, f->cap_tokens, tokens);
  if (tokens > f->cap_tokens) f->cap_tokens = tokens;
  RESERVE(f->step.blocks, f->cap_blocks, blocks);
  if (blocks > f->cap_blocks) f->cap_blocks = blocks;
#undef RESERVE
  return 0;
}

/* Where request r stands once the steps in flight that hold it are advanced. */
static int32_t eff_computed(const req_t *r) { return r->computed + r->ahead_q; }
static int32_t eff_generated(const req_t *r) { return r->generated + r->ahead_gen; }

/* Appends one batch entry for request `slot` scheduling q tokens. A token that the step
 * in flight samples (planned ahead: at most one, the entry's last) is not known yet: its
 * place holds 0 and prev_entry names the entry of that step which samples it. */
static void add_entry(sc_sched *s, flight *f, int32_t slot, int32_t q) {
  req_t *r = &s->slots[slot];
  sc_sched_step *st = &f->step;
  const int32_t i = st->num_reqs++;
  const int32_t c = eff_computed(r);
  const bool prefill = c < r->prefill_len;
  st->reqs[i] = (sc_batch_req){.id = r->id, .computed = c, .scheduled = q, .prefill = prefill};
  /* tokens past prompt + generated are sampled by a step in flight */
  const int32_t known = r->prompt_len + r->generated;
  const int32_t n_known = c + q <= known ? q : known - c;
  memcpy(st->tokens + st->num_tokens, r->tokens + c, sizeof(int32_t) * (size_t)n_known);
  st->prev_entry[i] = -1;
  if (n_known < q) { /* (n_known == q - 1: see sc_sched_next_ahead) */
    st->tokens[st->num_tokens + q - 1] = 0;
    st->prev_entry[i] = r->last_entry;
  }
  st->num_tokens += q;
  st->sample[i] = (uint8_t)(c + q >= r->prefill_len);
  st->params[i] = r->params;
  st->out_index[i] = eff_generated(r);
  const int32_t nb = sc_sched_blocks_for(&s->cfg, (int64_t)c + q);
  memcpy(st->blocks + st->block_start[i], r->blocks, sizeof(int32_t) * (size_t)nb);
  st->block_start[i + 1] = st->block_start[i] + nb;
  f->step_slot[i] = slot;
  r->flights++;
  r->ahead_q += q;
  r->ahead_gen += st->sample[i];
  r->last_entry = i;
}

/* Whether running request r takes part in a step planned ahead (sc_sched_next_ahead):
 * not when the step in flight ends it (its last token, or a cancel). A token drawn at a
 * temperature travels on the device as the greedy choice does (draw_rows). */
static bool joins_ahead(const req_t *r) {
  return !gone(r) && eff_generated(r) < r->params.max_new_tokens;
}

/* Builds a step into f: decodes, running prefills, admissions (sc_sched_next). ahead: a
 * step is in flight and this one follows it (sc_sched_next_ahead). */
static int build_step(sc_sched *s, flight *f, bool ahead, sc_sched_step **out) {
  /* Worst case sizes: every running and admissible request scheduled. */
  int32_t max_entries = s->num_running + s->num_waiting;
  int64_t max_blocks = 0;
  for (int32_t i = 0; i < s->num_running; i++) max_blocks += s->slots[s->running[i]].num_blocks;
  max_blocks += s->cfg.num_blocks; /* admissions cannot take more than the pool */
  int rc = reserve_step(f, max_entries, s->cfg.token_budget, (int32_t)max_blocks);
  if (rc) return rc;

  sc_sched_step *st = &f->step;
  st->num_reqs = 0;
  st->num_tokens = 0;
  st->block_start[0] = 0;
  int32_t budget = s->cfg.token_budget;
  /* 1. decodes: one token each; they are latency-critical, so they go first */
  for (int32_t k = 0; k < s->num_running && budget > 0; k++) {
    const req_t *r = &s->slots[s->running[k]];
    if (eff_computed(r) >= r->prefill_len && (!ahead || joins_ahead(r))) {
      add_entry(s, f, s->running[k], 1);
      budget--;
    }
  }
  /* 2. running prefills continue their prompt, cut to the budget (chunked prefill) */
  for (int32_t k = 0; k < s->num_running && budget > 0; k++) {
    const req_t *r = &s->slots[s->running[k]];
    if (eff_computed(r) < r->prefill_len && !gone(r)) {
      const int32_t left = r->prefill_len - eff_computed(r);
      const int32_t q = left < budget ? left : budget;
      add_entry(s, f, s->running[k], q);
      budget -= q;
    }
  }
  /* 3. admissions: the waiting request whose client runs the fewest (arrival order among
   *    equals); it waits for blocks rather than being overtaken, so a long prompt cannot
   *    starve */
  while (s->num_waiting > 0 && s->num_running < s->cfg.max_running && budget > 0) {
    const int32_t k = next_fair(s);
    if (k < 0) break; /* every waiting client holds its share: they wait for their own */
    const int32_t slot = s->waiting[k];
    req_t *r = &s->slots[slot];
    const int32_t need = sc_sched_blocks_for(&s->cfg, r->cap_tokens);
    if (need > s->num_free) break;
    client_acct *a = acct_find(s, r->params.client);
    for (int32_t b = 0; b < need; b++) r->blocks[b] = s->free_blocks[--s->num_free];
    r->num_blocks = need;
    r->state = SLOT_RUNNING;
    if (a) {
      a->running++;
      a->blocks += need;
    }
    remove_index(s->waiting, &s->num_waiting, slot);
    s->running[s->num_running++] = slot;
    s->stats.admitted++;
    const int32_t q = r->prefill_len < budget ? r->prefill_len : budget;
    add_entry(s, f, slot, q);
    budget -= q;
  }
  if (st->num_reqs == 0) return 0;
  st->prev_step = ahead ? s->fl[s->head].step.step : 0;
  st->step = ++s->last_step;
  s->num_flight++;
  *out = st;
  return 0;
}

int sc_sched_next(sc_sched *s, sc_sched_step **out) {
  *out = NULL;
  if (s->num_flight > 0) return SC_EAGAIN;
  return build_step(s, &s->fl[s->head], false, out);
}

int sc_sched_next_ahead(sc_sched *s, sc_sched_step **out) {
  *out = NULL;
  if (s->num_flight != 1) return SC_EAGAIN;
  return build_step(s, &s->fl[s->head ^ 1], true, out);
}

int32_t sc_sched_in_flight(const sc_sched *s) { return s->num_flight; }

static bool is_eos(const sc_sched_config *cfg, int32_t token) {
  for (int32_t k = 0; k < cfg->num_eos; k++)
    if (cfg->eos[k] == token) return true;
  return false;
}

static void finish(sc_sched *s, int32_t slot) {
  remove_index(s->running, &s->num_running, slot);
  release(s, slot);
}

int sc_sched_advance(sc_sched *s, const int32_t *sampled, sc_sched_event *events) {
  if (s->num_flight == 0) return SC_EINVAL;
  flight *f = &s->fl[s->head];
  int n = 0;
  for (int32_t i = 0; i < f->step.num_reqs; i++) {
    const int32_t slot = f->step_slot[i];
    req_t *r = &s->slots[slot];
    const int32_t q = f->step.reqs[i].scheduled;
    r->computed += q;
    r->ahead_q -= q;
    r->ahead_gen -= f->step.sample[i];
    r->flights--;
    r->failures = 0;
    if (gone(r)) {
      if (r->flights == 0) { /* (else the step after this one ends it) */
        s->stats.canceled += r->canceled; /* (an ended one was counted finished) */
        finish(s, slot);
      }
      continue;
    }
    if (!f->step.sample[i]) continue;
    r->tokens[r->prompt_len + r->generated] = sampled[i];
    r->generated++;
    const bool eos = !r->params.ignore_eos && is_eos(&s->cfg, sampled[i]);
    const bool done = eos || r->generated >= r->params.max_new_tokens;
    events[n++] = (sc_sched_event){.id = r->id, .entry = i, .prompt_len = r->prompt_len,
                                   .token = sampled[i], .index = r->generated - 1,
                                   .finished = done, .eos = eos};
    if (done) {
      s->stats.finished++;
      s->stats.stopped += eos;
      /* the step planned ahead holds it only when it ended at an end-of-sequence token
       * (a last token by count never joins one: joins_ahead) */
      if (r->flights > 0) r->ended = true;
      else finish(s, slot);
    }
  }
  s->head ^= 1;
  s->num_flight--;
  s->stats.steps++;
  return n;
}

/* Every step in flight failed: each one's requests forget what it would have added (the
 * newest first), and `each` runs once per request they held, in the order of the oldest
 * step's entries, then the newer one's; it may finish the request. Returns the sum of
 * what `each` returned. */
static int fail_flights(sc_sched *s, int (*each)(sc_sched *s, int32_t slot, void *arg),
                        void *arg) {
  for (int32_t k = s->num_flight - 1; k >= 0; k--) {
    const flight *f = &s->fl[(s->head + k) & 1];
    for (int32_t i = 0; i < f->step.num_reqs; i++) {
      req_t *r = &s->slots[f->step_slot[i]];
      r->ahead_q -= f->step.reqs[i].scheduled;
      r->ahead_gen -= f->step.sample[i];
      r->flights--;
      r->seen = false;
    }
  }
  int n = 0;
  for (int32_t k = 0; k < s->num_flight; k++) {
    const flight *f = &s->fl[(s->head + k) & 1];
    for (int32_t i = 0; i < f->step.num_reqs; i++) {
      const int32_t slot = f->step_slot[i];
      req_t *r = &s->slots[slot];
      if (r->state == SLOT_FREE || r->seen) continue; /* (ended, or counted already) */
      r->seen = true;
      n += each(s, slot, arg);
    }
  }
  s->stats.steps_failed += (uint64_t)s->num_flight;
  s->num_flight = 0;
  return n;
}

/* (fail_flights' callbacks: arg is an id_sink, whose ids is the next free place) */
typedef struct id_sink {
  int64_t *ids;
  int32_t max_failures;
} id_sink;

/* The request fails: its id to the sink; one canceled during the steps ends canceled,
 * one that ended at its end-of-sequence token stays finished (either way its client was
 * told it ended: no error on top). */
static int fail_into(sc_sched *s, int32_t slot, void *arg) {
  id_sink *sink = arg;
  const req_t *r = &s->slots[slot];
  const bool told = gone(r);
  if (!told) *sink->ids++ = r->id;
  s->stats.canceled += r->canceled;
  s->stats.failed += !told;
  finish(s, slot);
  return !told;
}

int sc_sched_fail_step(sc_sched *s, int64_t *failed_ids) {
  if (s->num_flight == 0) return SC_EINVAL;
  id_sink sink = {.ids = failed_ids};
  return fail_flights(s, fail_into, &sink);
}

/* The request runs the same work again, unless it has ended or failed too often. */
static int retry_one(sc_sched *s, int32_t slot, void *arg) {
  req_t *r = &s->slots[slot];
  if (!gone(r) && ++r->failures <= ((id_sink *)arg)->max_failures) {
    s->stats.retried++; /* stays running: computed unchanged, the same work next step */
    return 0;
  }
  return fail_into(s, slot, arg);
}

int sc_sched_retry_step(sc_sched *s, int32_t max_failures, int64_t *failed_ids) {
  if (s->num_flight == 0) return SC_EINVAL;
  id_sink sink = {.ids = failed_ids, .max_failures = max_failures};
  return fail_flights(s, retry_one, &sink);
}

int sc_sched_fail_all(sc_sched *s, int64_t *ids) {
  int n = s->num_flight ? sc_sched_fail_step(s, ids) : 0;
  while (s->num_running > 0) {
    ids[n++] = s->slots[s->running[0]].id;
    finish(s, s->running[0]);
    s->stats.failed++;
  }
  while (s->num_waiting > 0) {
    const int32_t slot = s->waiting[0];
    ids[n++] = s->slots[slot].id;
    remove_index(s->waiting, &s->num_waiting, slot);
    release(s, slot);
    s->stats.failed++;
  }
  return n;
}

/* (requeue: the steps' tokens never come; a request canceled meanwhile, or ended at its
 * end-of-sequence token, ends now) */
static int end_if_gone(sc_sched *s, int32_t slot, void *arg) {
  (void)arg;
  if (gone(&s->slots[slot])) {
    s->stats.canceled += s->slots[slot].canceled;
    finish(s, slot);
  }
  return 0;
}

int sc_sched_requeue_running(sc_sched *s) {
  if (s->num_flight > 0) (void)fail_flights(s, end_if_gone, NULL);
  const int32_t m = s->num_running;
  /* (waiting and running share the slot capacity, so both fit in waiting) */
  memmove(s->waiting + m, s->waiting, sizeof *s->waiting * (size_t)s->num_waiting);
  for (int32_t k = 0; k < m; k++) {
    const int32_t slot = s->running[k];
    req_t *r = &s->slots[slot];
    client_acct *a = acct_find(s, r->params.client);
    if (a) {
      a->running--;
      a->blocks -= r->num_blocks;
    }
    return_blocks(s, r);
    r->state = SLOT_WAITING;
    r->computed = 0;
    r->prefill_len = r->prompt_len + r->generated;
    s->waiting[k] = slot;
  }
  s->num_waiting += m;
  s->num_running = 0;
  s->stats.requeued += (uint64_t)m;
  return m;
}

void sc_sched_get_stats(const sc_sched *s, sc_sched_stats *st) {
  *st = s->stats;
  st->waiting = s->num_waiting;
  st->running = s->num_running;
  st->free_blocks = s->num_free;
  st->total_blocks = s->cfg.num_blocks;
}
