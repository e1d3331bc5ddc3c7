/* sched.h - the scheduler core: continuous batching with chunked prefill and KV block
 * allocation (DESIGN.md §3 step 2). Pure logic, no I/O, no threads; the scheduler actor
 * and the threaded test harness both drive it.
 *
 * Each step, sc_sched_next() picks the global batch: running decodes first (one token
 * each), then running prefills continue their prompt in chunks, then waiting requests
 * are admitted in arrival order, all within a token budget and a running-request limit.
 * After the ranks ran the step, sc_sched_advance() takes the sampled tokens and reports
 * what to stream to clients.
 *
 * Steps planned ahead (issue 20, docs/pipeline.md "Overlapped steps"). While one step is
 * in flight, sc_sched_next_ahead() may build the next one as if the first had already
 * succeeded: each request of the first computed its tokens and sampled its token. The
 * tokens it samples are not known yet, so an entry whose input is one of them says so
 * (prev_entry: the entry of the step in flight that samples it), and whoever runs the
 * step takes it from that step's result on the device, greedy or drawn at a temperature
 * (the kernels' argmax_rows and draw_rows). A request that the step in flight ends (its
 * last token, a cancel) is not planned again. One that it ends at an end-of-sequence
 * token cannot be known ahead: the step after still computes a token for it, dropped
 * when that step advances (as for a cancel in flight), and the request's output ends
 * with the end-of-sequence token either way. Steps advance in order; when one fails,
 * every step in flight fails with it (the later one rests on the earlier one's tokens),
 * and sc_sched_fail_step, sc_sched_retry_step and sc_sched_requeue_running end them
 * all.
 *
 * KV blocks. Under DCP every rank holds 1/N of each block's tokens, so the scheduler
 * allocates *virtual* blocks of B*N tokens (SPEC.md §4) from one pool; the block tables
 * it emits are identical on all ranks. A request reserves the blocks for its whole
 * extent (prompt + max new tokens) when it is admitted. That is conservative, but it
 * means an admitted request can never run out of cache, so nothing is preempted and no
 * accepted request is lost: it waits in the queue until its blocks are free. A request
 * that could never fit (more blocks than the pool) is rejected at submission.
 *
 * Ownership: the scheduler owns the arrays of the sc_sched_step it returns; they stay
 * valid until that step is advanced or failed. Threads: one thread.
 */
#ifndef SC_SCHED_H
#define SC_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "plan/plan.h"

/* End-of-sequence tokens a scheduler knows at most (the model's eos_token_id: one id in
 * DeepSeek-V3.2's config, a list of three in GLM-5's generation_config). */
#define SC_SCHED_MAX_EOS 8

typedef struct sc_sched_config {
  int32_t token_budget;   /* max Σq per step (chunked prefill cuts prompts to fit) */
  int32_t max_running;    /* max requests admitted at once */
  int32_t block_size;     /* B, tokens per physical block */
  int32_t dcp;            /* N: a virtual block holds B*N tokens */
  int32_t num_blocks;     /* virtual blocks in the pool (= physical blocks per rank) */
  int32_t max_model_len;  /* prompt + max new tokens limit */
  /* A request that samples one of these ends with it (the token is its last output:
   * sc_sched_event.eos), unless it asked to ignore them. None: every request runs to
   * its max_new_tokens. */
  int32_t eos[SC_SCHED_MAX_EOS];
  int32_t num_eos;
} sc_sched_config;

/* Requests held at once (waiting or running) reserve at most this many tokens in all
 * (prompt + max_tokens each, the memory their token lists take): SC_SCHED_HELD_PER_CACHE
 * times what the KV cache holds, and at least SC_SCHED_HELD_MIN. A submit past it is
 * refused with SC_EFULL, so that no client can grow the head's memory without bound;
 * requests past what the cache holds only wait anyway. */
#define SC_SCHED_HELD_PER_CACHE 16
#define SC_SCHED_HELD_MIN (1 << 20)
int64_t sc_sched_max_held_tokens(const sc_sched_config *cfg);

/* Fair shares (issue 22): one client may hold at most 1/SC_SCHED_CLIENT_SHARE of that
 * bound (so a flood from one client leaves room for the others' requests: it is answered
 * SC_EFULL at once while they are still taken), and admission to a step goes to the
 * waiting request whose client runs the fewest requests and is within its share of the
 * blocks (below; arrival order among equals; looked for among the first 1024 waiting), so
 * a client with one request does not wait behind another's queue. A client's running
 * requests hold at most 1/SC_SCHED_CLIENT_SHARE
 * of the KV blocks (a client that holds none may take more, so one request as long as
 * the cache still runs), so the rest of the cache stays free for other clients' requests:
 * without that, one client's long requests filled the cache and another client's
 * request waited seconds for one of them to end (bench/fairness.md). A client is what
 * the gateway says it is (sc_sched_params.client: a ZeroMQ connection, an HTTP client's
 * address), so one that opens several connections has several shares. Running requests
 * are not preempted. */
#define SC_SCHED_CLIENT_SHARE 2

typedef struct sc_sched_params {
  int32_t max_new_tokens; /* >= 1 */
  float temperature;      /* 0 = greedy */
  uint64_t seed;          /* for temperature sampling */
  uint64_t client;        /* who asked (the fair shares above); 0: one anonymous client */
  bool ignore_eos;        /* run to max_new_tokens past end-of-sequence tokens */
} sc_sched_params;

/* One step's input for the planner and the executors. Entry i of every per-entry array
 * describes batch request i. */
typedef struct sc_sched_step {
  uint64_t step;
  int32_t num_reqs;
  sc_batch_req *reqs;     /* planner input; reqs[i].id is the request id */
  int32_t num_tokens;     /* Σq */
  int32_t *tokens;        /* input token ids, batch order, Σq of them */
  uint8_t *sample;        /* 1 if entry i produces a token this step */
  sc_sched_params *params;
  int32_t *out_index;     /* index of the token entry i produces (if it samples) */
  /* A step planned ahead: prev_step is the step in flight it follows (0: none), and
   * prev_entry[i] >= 0 says that entry i's last input token (0 in tokens) is the greedy
   * token entry prev_entry[i] of prev_step samples; -1: all of entry i's tokens are in
   * tokens. */
  uint64_t prev_step;
  int32_t *prev_entry;
  int32_t *block_start;   /* entry i's virtual blocks: blocks[block_start[i] .. [i+1]) */
  int32_t *blocks;
} sc_sched_step;

/* What sc_sched_advance() reports per sampled entry. */
typedef struct sc_sched_event {
  int64_t id;
  int32_t entry;          /* batch entry of the step that produced it */
  int32_t prompt_len;
  int32_t token;          /* the sampled token */
  int32_t index;          /* 0-based index of this token in the request's output */
  bool finished;          /* the request is complete: max_new_tokens reached, or eos */
  bool eos;               /* it ended at an end-of-sequence token (this one) */
} sc_sched_event;

/* The queue now and the totals since creation. Requests: admitted (waiting to running;
 * a requeued request is admitted again), finished (max_new_tokens reached, or an
 * end-of-sequence token; stopped counts the latter among them), canceled
 * (sc_sched_cancel) and failed (their step failed, or sc_sched_fail_all), requeued
 * (sc_sched_requeue_running, each time), retried (sc_sched_retry_step, each time).
 * Steps: every step sc_sched_next built ends once, as advanced (steps) or as failed
 * (steps_failed: sc_sched_fail_step, sc_sched_fail_all, sc_sched_requeue_running,
 * sc_sched_retry_step). */
typedef struct sc_sched_stats {
  int32_t waiting, running, free_blocks, total_blocks;
  uint64_t admitted, finished, canceled, failed, requeued, retried;
  uint64_t stopped;
  uint64_t steps, steps_failed;
} sc_sched_stats;

typedef struct sc_sched sc_sched;

int sc_sched_create(sc_sched **out, const sc_sched_config *cfg, sc_diag *d);
void sc_sched_destroy(sc_sched *s);

/* Queues a request (the prompt is copied). Fails with SC_EINVAL (bad lengths, duplicate
 * id) or SC_ETOOBIG (can never fit the cache or max_model_len), with a message. */
int sc_sched_submit(sc_sched *s, int64_t id, const int32_t *prompt, int32_t prompt_len,
                    const sc_sched_params *params, sc_diag *d);

/* Cancels a request. Waiting or running between steps: removed at once, blocks freed.
 * In a step in flight: removed when the last such step ends (its tokens are dropped).
 * Returns SC_ENOENT for an unknown id, and for one that has ended at an end-of-sequence
 * token while a step planned ahead still holds it (its last event said finished). */
int sc_sched_cancel(sc_sched *s, int64_t id);

/* Builds the next step. Returns 0 with *step NULL when nothing can run (idle).
 * SC_EAGAIN while a step is in flight (sc_sched_next_ahead plans past it). */
int sc_sched_next(sc_sched *s, sc_sched_step **step);

/* With exactly one step in flight: builds the step after it, as if it had succeeded (see
 * "Steps planned ahead" above). Returns 0 with *step NULL when nothing can run ahead,
 * SC_EAGAIN with no step or two in flight. */
int sc_sched_next_ahead(sc_sched *s, sc_sched_step **step);

/* Steps in flight: 0, 1, or 2 with one planned ahead. */
int32_t sc_sched_in_flight(const sc_sched *s);

/* Completes the oldest step in flight: sampled[i] is entry i's token (ignored unless
 * step->sample[i]). Writes one event per sampled, not canceled entry into events
 * (room for num_reqs) and returns how many, or a negative code. */
int sc_sched_advance(sc_sched *s, const int32_t *sampled, sc_sched_event *events);

/* The steps in flight failed (aborted on the ranks; with one planned ahead, both): their
 * requests are removed and their blocks freed; their ids are written to failed_ids (room
 * for the running requests), each once; returns how many. The caller sends each of
 * their clients an error. A request canceled during the steps ends as canceled, without
 * an id (its client was told already). Other requests continue. */
int sc_sched_fail_step(sc_sched *s, int64_t *failed_ids);

/* The steps in flight failed, but every rank still holds its KV cache (a refused
 * collective, a lost acknowledgement, a deadline): their requests run the same work again
 * in a later step, their tokens unchanged since sampling depends only on (seed, request
 * id, output index). A request whose steps failed more than max_failures times in a row
 * is removed (its id written to failed_ids, room for the running requests; the caller
 * sends its client an error), as is one canceled during the steps. Two steps in flight
 * that fail together count as one failure of a request they both hold. Returns how many
 * failed. */
int sc_sched_retry_step(sc_sched *s, int32_t max_failures, int64_t *failed_ids);

/* Removes every request (waiting and running; the step in flight, if any, is failed
 * first) and writes their ids into ids (room for waiting + running); returns how many.
 * Used when the cluster shuts down: each client gets an error. */
int sc_sched_fail_all(sc_sched *s, int64_t *ids);

/* A rank's KV shards were lost (its node died; issue 22): every running request goes
 * back to the front of the waiting queue, in admission order, ahead of those already
 * waiting, with its blocks freed. When admitted again it first recomputes its prompt and
 * every token it generated (one prefill of them, chunked as any), and its next token is
 * the one it was about to produce: since sampling depends only on (seed, request id,
 * output index) and the model's results not on how the context is chunked, the client
 * receives exactly the tokens of a run without the failure, none twice. The steps in
 * flight, if any, are dropped (counted in steps_failed; requests canceled during them end
 * now). Returns how many requests were requeued. */
int sc_sched_requeue_running(sc_sched *s);

void sc_sched_get_stats(const sc_sched *s, sc_sched_stats *st);

/* Virtual blocks a request of `tokens` total extent needs. */
int32_t sc_sched_blocks_for(const sc_sched_config *cfg, int64_t tokens);

#endif
