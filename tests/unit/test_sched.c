/* The scheduler core: budgets, chunked prefill, decode-first ordering, block
 * reservation and queueing, cancel and failure, and a random-stream simulation in which
 * no accepted request is lost. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "actors/scheduler/sched.h"
#include "tests/common/sc_test_rng.h"

static sc_sched_config small_cfg(void) {
  return (sc_sched_config){.token_budget = 16, .max_running = 4, .block_size = 4, .dcp = 2,
                           .num_blocks = 16, .max_model_len = 256};
}

static sc_sched *make(sc_sched_config c) {
  sc_sched *s = NULL;
  sc_diag d = {0};
  cr_assert_eq(sc_sched_create(&s, &c, &d), 0, "%s", d.msg);
  return s;
}

static void submit(sc_sched *s, int64_t id, int32_t len, int32_t max_new) {
  int32_t prompt[512];
  for (int32_t i = 0; i < len; i++) prompt[i] = (int32_t)(id * 1000 + i);
  const sc_sched_params p = {.max_new_tokens = max_new};
  sc_diag d = {0};
  cr_assert_eq(sc_sched_submit(s, id, prompt, len, &p, &d), 0, "%s", d.msg);
}

static bool is_eos_of(const sc_sched_config *c, int32_t token) {
  for (int k = 0; k < c->num_eos; k++)
    if (c->eos[k] == token) return true;
  return false;
}

Test(sched, chunked_prefill_then_decodes_first) {
  sc_sched *s = make(small_cfg());
  submit(s, 1, 20, 3); /* 20 tokens > budget 16: two chunks */
  sc_sched_step *st;
  sc_sched_event ev[8];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(st->num_reqs, 1);
  cr_assert(st->reqs[0].prefill && st->reqs[0].computed == 0 && st->reqs[0].scheduled == 16);
  cr_assert_eq(st->tokens[15], 1015);
  cr_assert_eq(st->sample[0], 0);
  cr_assert_eq(sc_sched_next(s, &st), SC_EAGAIN); /* previous step not advanced */
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){-1}, ev), 0);

  submit(s, 2, 3, 2);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  /* request 1 finishes its prompt (4 tokens) and request 2 is admitted */
  cr_assert_eq(st->num_reqs, 2);
  cr_assert(st->reqs[0].id == 1 && st->reqs[0].computed == 16 && st->reqs[0].scheduled == 4);
  cr_assert(st->reqs[1].id == 2 && st->reqs[1].scheduled == 3);
  cr_assert(st->sample[0] && st->sample[1]);
  /* extent 20 of request 1 spans ceil(20 / 8) = 3 virtual blocks */
  cr_assert_eq(st->block_start[1] - st->block_start[0], 3);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){77, 88}, ev), 2);
  cr_assert(ev[0].id == 1 && ev[0].token == 77 && ev[0].index == 0 && !ev[0].finished);
  cr_assert(ev[0].entry == 0 && ev[1].entry == 1 && ev[0].prompt_len == 20);

  submit(s, 3, 30, 1);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  /* decodes first (1 and 2, one token each, input = their last sampled token) */
  cr_assert(!st->reqs[0].prefill && st->reqs[0].id == 1 && st->reqs[0].computed == 20);
  cr_assert_eq(st->tokens[0], 77);
  cr_assert(!st->reqs[1].prefill && st->reqs[1].id == 2 && st->tokens[1] == 88);
  cr_assert(st->reqs[2].id == 3 && st->reqs[2].scheduled == 14); /* 16 - 2 decodes */
  cr_assert_eq(st->num_tokens, 16);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){78, 89, -1}, ev), 2);
  cr_assert(ev[1].id == 2 && ev[1].finished); /* max_new 2 reached */
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.running, 2);
  cr_assert_eq(stats.finished, 1);
  sc_sched_destroy(s);
}

Test(sched, admission_waits_for_blocks_in_order) {
  sc_sched_config c = small_cfg();
  c.num_blocks = 4; /* 32 tokens of cache */
  sc_sched *s = make(c);
  submit(s, 1, 10, 10); /* 20 tokens: 3 blocks */
  submit(s, 2, 6, 4);   /* 10 tokens: 2 blocks: must wait */
  submit(s, 3, 2, 1);   /* 1 block: would fit, but does not overtake 2 */
  sc_sched_step *st;
  sc_sched_event ev[8];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(st->num_reqs, 1);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.waiting, 2);
  cr_assert_eq(stats.free_blocks, 1);
  int32_t guard = 0;
  while (stats.waiting > 0 && guard++ < 100) {
    int32_t sampled[8] = {5, 5, 5, 5, 5, 5, 5, 5};
    sc_sched_advance(s, sampled, ev);
    cr_assert_eq(sc_sched_next(s, &st), 0);
    sc_sched_get_stats(s, &stats);
  }
  cr_assert_lt(guard, 100);
  cr_assert_eq(st->reqs[st->num_reqs - 1].id, 3); /* 2 was admitted before 3 */
  sc_sched_destroy(s);
}

Test(sched, rejections_name_the_limit) {
  sc_sched *s = make(small_cfg());
  sc_diag d = {0};
  const sc_sched_params p = {.max_new_tokens = 8};
  int32_t prompt[300] = {0};
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 0, &p, &d), SC_EINVAL);
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 250, &p, &d), SC_ETOOBIG);
  cr_assert_not_null(strstr(d.msg, "model length limit of 256"), "%s", d.msg);
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 130, &p, &d), SC_ETOOBIG); /* 18 blocks > 16 */
  cr_assert_not_null(strstr(d.msg, "the cache has 16"), "%s", d.msg);
  const sc_sched_params bad = {.max_new_tokens = 0};
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 4, &bad, &d), SC_EINVAL);
  const sc_sched_params hot = {.max_new_tokens = 1, .temperature = -1};
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 4, &hot, &d), SC_EINVAL);
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 4, &p, &d), 0);
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 4, &p, &d), SC_EINVAL); /* duplicate id */
  sc_sched_destroy(s);
}

/* The requests held at once reserve a bounded number of tokens (prompt + max_tokens
 * each): past it a submit is refused, and a request that ends makes room again. */
Test(sched, held_requests_are_bounded_in_tokens) {
  /* a cache of 2^15 blocks x 4 x 2 = 262144 tokens: the bound is 16 times that */
  sc_sched_config c = small_cfg();
  c.num_blocks = 1 << 15;
  c.max_model_len = 1 << 18;
  sc_sched *s = make(c);
  const int64_t bound = sc_sched_max_held_tokens(&c);
  cr_assert_eq(bound, 16 * (int64_t)(1 << 15) * 4 * 2);
  const int32_t extent = 1 << 18; /* each request reserves the whole model length */
  const int64_t fit = bound / extent;
  int32_t prompt[4] = {1, 2, 3, 4};
  sc_sched_params p = {.max_new_tokens = extent - 4};
  sc_diag d = {0};
  /* two clients, each within its share (half the bound), fill it together */
  for (int64_t id = 1; id <= fit; id++) {
    p.client = (uint64_t)(id % 2) + 1;
    cr_assert_eq(sc_sched_submit(s, id, prompt, 4, &p, &d), 0, "request %lld: %s",
                 (long long)id, d.msg);
  }
  p.client = 3; /* a third client: the cluster as a whole is full */
  cr_assert_eq(sc_sched_submit(s, fit + 1, prompt, 4, &p, &d), SC_EFULL);
  cr_assert_not_null(strstr(d.msg, "the cluster holds"), "%s", d.msg);
  cr_assert_eq(sc_sched_cancel(s, 1), 0);
  cr_assert_eq(sc_sched_submit(s, fit + 1, prompt, 4, &p, &d), 0, "%s", d.msg);
  sc_sched_destroy(s);
  /* a small cache still holds SC_SCHED_HELD_MIN tokens of requests */
  cr_assert_eq(sc_sched_max_held_tokens(&(sc_sched_config){.num_blocks = 1, .block_size = 1,
                                                            .dcp = 1}),
               SC_SCHED_HELD_MIN);
}

/* One client may hold half of the bound: a flood from it is refused at once while
 * another client is still taken; its share comes back as its requests end. */
Test(sched, one_client_holds_at_most_its_share) {
  sc_sched_config c = small_cfg();
  c.num_blocks = 1 << 15;
  c.max_model_len = 1 << 18;
  sc_sched *s = make(c);
  const int32_t extent = 1 << 18;
  const int64_t share = sc_sched_max_held_tokens(&c) / SC_SCHED_CLIENT_SHARE;
  int32_t prompt[4] = {1, 2, 3, 4};
  sc_sched_params p = {.max_new_tokens = extent - 4, .client = 7};
  sc_diag d = {0};
  int64_t id = 1;
  for (; id <= share / extent; id++)
    cr_assert_eq(sc_sched_submit(s, id, prompt, 4, &p, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_sched_submit(s, id, prompt, 4, &p, &d), SC_EFULL);
  cr_assert_not_null(strstr(d.msg, "this client holds"), "%s", d.msg);
  p.client = 8;
  cr_assert_eq(sc_sched_submit(s, id, prompt, 4, &p, &d), 0, "another client: %s", d.msg);
  p.client = 7;
  cr_assert_eq(sc_sched_cancel(s, 1), 0);
  cr_assert_eq(sc_sched_submit(s, id + 1, prompt, 4, &p, &d), 0, "%s", d.msg);
  sc_sched_destroy(s);
}

/* A client with one request is admitted before another client's queue: the waiting
 * request whose client runs the fewest goes first, arrival order among equals. */
Test(sched, admission_goes_to_the_client_that_runs_the_fewest) {
  sc_sched_config c = small_cfg(); /* max_running 4 */
  sc_sched *s = make(c);
  int32_t prompt[2] = {5, 6};
  sc_sched_params flood = {.max_new_tokens = 3, .client = 1}, other = flood;
  other.client = 2;
  sc_diag d = {0};
  for (int64_t id = 1; id <= 8; id++)
    cr_assert_eq(sc_sched_submit(s, id, prompt, 2, &flood, &d), 0, "%s", d.msg);
  sc_sched_step *st;
  sc_sched_event ev[16];
  cr_assert_eq(sc_sched_next(s, &st), 0); /* client 1 runs 1..4, 5..8 wait */
  cr_assert_eq(st->num_reqs, 4);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){1, 1, 1, 1}, ev), 4);
  cr_assert_eq(sc_sched_submit(s, 100, prompt, 2, &other, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_sched_cancel(s, 2), 0); /* a running slot frees */
  cr_assert_eq(sc_sched_next(s, &st), 0);
  bool admitted_100 = false, admitted_5 = false;
  for (int32_t i = 0; i < st->num_reqs; i++) {
    admitted_100 |= st->reqs[i].id == 100;
    admitted_5 |= st->reqs[i].id == 5;
  }
  cr_assert(admitted_100 && !admitted_5, "client 2's request goes before client 1's queue");
  sc_sched_destroy(s);
}

/* One client's running requests hold at most half the KV blocks, so another client's
 * request is admitted at the next step instead of waiting for one of them to end; a
 * client that holds none may still take more than half (one long request runs). */
Test(sched, one_client_leaves_half_the_cache_to_others) {
  sc_sched_config c = small_cfg(); /* 16 blocks of 8 tokens (block 4 x dcp 2) */
  c.max_running = 8;
  c.token_budget = 128; /* the budget admits all 8 at once: only the share holds back */
  sc_sched *s = make(c);
  int32_t prompt[96];
  for (int i = 0; i < 96; i++) prompt[i] = i + 1;
  sc_sched_params flood = {.max_new_tokens = 8, .client = 1}, other = flood;
  other.client = 2;
  sc_diag d = {0};
  for (int64_t id = 1; id <= 8; id++) /* 16 tokens each: 2 blocks */
    cr_assert_eq(sc_sched_submit(s, id, prompt, 8, &flood, &d), 0, "%s", d.msg);
  sc_sched_step *st;
  sc_sched_event ev[16];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(st->num_reqs, 4, "client 1 runs 4 requests (8 of 16 blocks), not 8");
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.free_blocks, 8);
  int32_t sampled[16] = {0};
  cr_assert_eq(sc_sched_advance(s, sampled, ev), 4);
  cr_assert_eq(sc_sched_submit(s, 100, prompt, 8, &other, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  bool admitted_100 = false;
  for (int32_t i = 0; i < st->num_reqs; i++) admitted_100 |= st->reqs[i].id == 100;
  cr_assert(admitted_100, "client 2's request waits although half the cache is free");
  cr_assert_eq(sc_sched_advance(s, sampled, ev), st->num_reqs);
  sc_sched_destroy(s);
  /* alone, one request as long as 12 of the 16 blocks still runs */
  s = make(c);
  cr_assert_eq(sc_sched_submit(s, 7, prompt, 90, &flood, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(st->num_reqs, 1);
  sc_sched_destroy(s);
}

/* A client over its share of the blocks does not hold up another client that runs as
 * many requests but holds fewer blocks, even when its request came first. */
Test(sched, a_client_over_its_share_does_not_block_others) {
  sc_sched_config c = small_cfg(); /* 16 blocks of 8 tokens */
  c.max_running = 16;
  c.token_budget = 256;
  sc_sched *s = make(c);
  int32_t prompt[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  sc_sched_params a = {.max_new_tokens = 8, .client = 1}, b = {.max_new_tokens = 4, .client = 2};
  sc_diag d = {0};
  for (int64_t id = 1; id <= 4; id++) /* A: 16 tokens, 2 blocks each */
    cr_assert_eq(sc_sched_submit(s, id, prompt, 8, &a, &d), 0, "%s", d.msg);
  for (int64_t id = 101; id <= 104; id++) /* B: 8 tokens, 1 block each */
    cr_assert_eq(sc_sched_submit(s, id, prompt, 4, &b, &d), 0, "%s", d.msg);
  cr_assert_eq(sc_sched_submit(s, 5, prompt, 8, &a, &d), 0, "%s", d.msg);   /* A over share */
  cr_assert_eq(sc_sched_submit(s, 105, prompt, 4, &b, &d), 0, "%s", d.msg); /* after it */
  sc_sched_step *st;
  cr_assert_eq(sc_sched_next(s, &st), 0);
  bool got5 = false, got105 = false;
  for (int32_t i = 0; i < st->num_reqs; i++) {
    got5 |= st->reqs[i].id == 5;
    got105 |= st->reqs[i].id == 105;
  }
  cr_assert(!got5, "client 1 runs more than half the blocks");
  cr_assert(got105, "client 2's request waits behind client 1's, which is over its share");
  sc_sched_destroy(s);
}

Test(sched, cancel_and_failed_steps_free_everything) {
  sc_sched *s = make(small_cfg());
  submit(s, 1, 5, 4);
  submit(s, 2, 5, 4);
  submit(s, 3, 5, 4);
  cr_assert_eq(sc_sched_cancel(s, 3), 0); /* waiting: removed now */
  cr_assert_eq(sc_sched_cancel(s, 3), SC_ENOENT);
  sc_sched_step *st;
  sc_sched_event ev[8];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(st->num_reqs, 2);
  cr_assert_eq(sc_sched_cancel(s, 2), 0); /* in flight: dropped at advance */
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){9, 9}, ev), 1);
  cr_assert_eq(ev[0].id, 1);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  int64_t failed[4];
  cr_assert_eq(sc_sched_fail_step(s, failed), 1);
  cr_assert_eq(failed[0], 1);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.running + stats.waiting, 0);
  cr_assert_eq(stats.free_blocks, 16);
  cr_assert_eq(stats.canceled, 2);
  cr_assert_eq(stats.failed, 1);
  cr_assert_eq(stats.steps, 1);
  cr_assert_eq(stats.steps_failed, 1);
  cr_assert_eq(stats.total_blocks, 16);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_null(st); /* idle */
  cr_assert_eq(sc_sched_fail_step(s, failed), SC_EINVAL); /* no step: nothing counted */

  /* shutting down: everything, in flight or not, is handed back for an error reply */
  submit(s, 4, 5, 4);
  submit(s, 5, 5, 4);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  submit(s, 6, 5, 4);
  int64_t all[8];
  cr_assert_eq(sc_sched_fail_all(s, all), 3);
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.running + stats.waiting, 0);
  cr_assert_eq(stats.free_blocks, 16);
  cr_assert_eq(stats.failed, 4);
  cr_assert_eq(stats.steps, 1);
  cr_assert_eq(stats.steps_failed, 2); /* the step in flight failed with the rest */
  cr_assert_eq(sc_sched_fail_all(s, all), 0);
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.steps_failed, 2); /* none in flight: no step failed */
  sc_sched_destroy(s);
}

/* The token a simulated model samples: a function of (request, output index) only, as
 * sparsecp's sampling is. */
static int32_t token_of(int64_t id, int32_t index) { return (int32_t)(id * 100 + index); }

/* Runs steps until idle or `steps` have run (-1: no limit), recording each request's
 * events in order (tokens[id][k]) and checking that every step's inputs are the
 * request's prompt followed by its earlier tokens, at the right positions. */
static int run_steps(sc_sched *s, int steps, int32_t tokens[][16], int32_t *count) {
  int ran = 0;
  sc_sched_step *st;
  sc_sched_event ev[8];
  while (steps < 0 || ran < steps) {
    cr_assert_eq(sc_sched_next(s, &st), 0);
    if (st == NULL) break;
    int32_t sampled[8];
    for (int32_t i = 0, at = 0; i < st->num_reqs; i++) {
      const sc_batch_req *b = &st->reqs[i];
      const int64_t id = b->id;
      for (int32_t k = 0; k < b->scheduled; k++) {
        const int32_t pos = b->computed + k;
        /* prompts are 20 tokens id * 1000 + pos, then the sampled ones */
        const int32_t want = pos < 20 ? (int32_t)(id * 1000 + pos) : tokens[id][pos - 20];
        cr_assert_eq(st->tokens[at + k], want, "request %lld position %d", (long long)id, pos);
      }
      at += b->scheduled;
      sampled[i] = st->sample[i] ? token_of(id, st->out_index[i]) : -1;
    }
    const int n = sc_sched_advance(s, sampled, ev);
    for (int k = 0; k < n; k++) {
      cr_assert_eq(ev[k].index, count[ev[k].id], "no token twice, none skipped");
      tokens[ev[k].id][count[ev[k].id]++] = ev[k].token;
    }
    ran++;
  }
  return ran;
}

/* A lost KV shard (issue 22): running requests go back to the queue, recompute their
 * prompt and tokens, and continue with exactly the tokens of an undisturbed run. */
Test(sched, requeued_requests_recompute_and_continue_identically) {
  int32_t want[4][16] = {{0}}, got[4][16] = {{0}};
  int32_t nwant[4] = {0}, ngot[4] = {0};
  sc_sched *s = make(small_cfg());
  for (int64_t id = 1; id <= 3; id++) submit(s, id, 20, 6);
  run_steps(s, -1, want, nwant);
  sc_sched_destroy(s);

  s = make(small_cfg());
  for (int64_t id = 1; id <= 3; id++) submit(s, id, 20, 6);
  run_steps(s, 5, got, ngot); /* 1 and 2 decoding, 3 waiting or in its prompt */
  sc_sched_step *st;
  cr_assert_eq(sc_sched_next(s, &st), 0); /* a step in flight when the rank dies */
  cr_assert_not_null(st);
  sc_sched_stats before;
  sc_sched_get_stats(s, &before);
  const int n = sc_sched_requeue_running(s);
  cr_assert_eq(n, before.running);
  sc_sched_stats after;
  sc_sched_get_stats(s, &after);
  cr_assert_eq(after.running, 0);
  cr_assert_eq(after.waiting, before.waiting + before.running);
  cr_assert_eq(after.free_blocks, after.total_blocks, "every block is free again");
  cr_assert_eq(after.steps_failed, 1);
  cr_assert_eq(after.requeued, (uint64_t)n);
  /* the first request back recomputes prompt + its tokens from position 0, sampling
   * only at the end, at the output index it had reached */
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert(st->reqs[0].id == 1 && st->reqs[0].prefill && st->reqs[0].computed == 0);
  cr_assert_eq(st->reqs[0].scheduled, 16); /* the budget: chunked like any prompt */
  cr_assert_eq(st->sample[0], 0);
  int32_t none[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  sc_sched_event ev[8];
  cr_assert_eq(sc_sched_advance(s, none, ev), 0);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert(st->reqs[0].id == 1 && st->reqs[0].computed == 16);
  cr_assert_eq(st->reqs[0].scheduled, 20 + ngot[1] - 16);
  cr_assert(st->reqs[0].prefill && st->sample[0]);
  cr_assert_eq(st->out_index[0], ngot[1]);
  sc_sched_requeue_running(s); /* and once more, from inside the replay */
  run_steps(s, -1, got, ngot);
  for (int64_t id = 1; id <= 3; id++) {
    cr_assert_eq(ngot[id], 6);
    cr_assert_eq(memcmp(got[id], want[id], sizeof want[id]), 0, "request %lld", (long long)id);
  }
  sc_sched_get_stats(s, &after);
  cr_assert_eq(after.finished, 3);
  cr_assert_eq(after.free_blocks, after.total_blocks);
  sc_sched_destroy(s);
}

/* A request canceled during the step that the requeue drops ends there. */
Test(sched, a_request_canceled_in_the_dropped_step_ends) {
  sc_sched *s = make(small_cfg());
  submit(s, 1, 5, 4);
  submit(s, 2, 5, 4);
  sc_sched_step *st;
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_cancel(s, 2), 0);
  cr_assert_eq(sc_sched_requeue_running(s), 1);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.waiting, 1);
  cr_assert_eq(stats.canceled, 1);
  cr_assert_eq(stats.free_blocks, stats.total_blocks);
  cr_assert_eq(sc_sched_requeue_running(s), 0); /* nothing running: nothing to do */
  sc_sched_destroy(s);
}

/* A step that failed with every rank's cache intact runs again: the same inputs, the
 * same tokens; a request fails only after max_failures + 1 failures in a row. */
Test(sched, a_retried_step_runs_the_same_work_and_fails_after_its_limit) {
  int32_t want[4][16] = {{0}}, got[4][16] = {{0}};
  int32_t nwant[4] = {0}, ngot[4] = {0};
  sc_sched *s = make(small_cfg());
  for (int64_t id = 1; id <= 2; id++) submit(s, id, 20, 6);
  run_steps(s, -1, want, nwant);
  sc_sched_destroy(s);

  s = make(small_cfg());
  for (int64_t id = 1; id <= 2; id++) submit(s, id, 20, 6);
  run_steps(s, 3, got, ngot);
  sc_sched_step *st;
  int64_t failed[8];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  const sc_batch_req first = st->reqs[0];
  cr_assert_eq(sc_sched_retry_step(s, 2, failed), 0); /* failure 1 of 3 allowed */
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert(st->reqs[0].id == first.id && st->reqs[0].computed == first.computed &&
                st->reqs[0].scheduled == first.scheduled,
            "the same work again");
  cr_assert_eq(sc_sched_retry_step(s, 2, failed), 0); /* 2 */
  run_steps(s, -1, got, ngot); /* a success resets the count */
  for (int64_t id = 1; id <= 2; id++)
    cr_assert_eq(memcmp(got[id], want[id], sizeof want[id]), 0, "request %lld", (long long)id);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.retried, 4);
  cr_assert_eq(stats.failed, 0);
  cr_assert_eq(stats.finished, 2);

  submit(s, 3, 5, 4);
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(sc_sched_next(s, &st), 0);
    cr_assert_eq(sc_sched_retry_step(s, 2, failed), k < 2 ? 0 : 1);
  }
  cr_assert_eq(failed[0], 3);
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.running + stats.waiting, 0);
  cr_assert_eq(stats.free_blocks, stats.total_blocks);
  cr_assert_eq(sc_sched_retry_step(s, 2, failed), SC_EINVAL); /* no step in flight */
  sc_sched_destroy(s);
}

/* Random streams: every accepted request produces exactly max_new tokens, each step
 * respects the budget and the running limit, inputs replay the prompt then the sampled
 * tokens, concurrently running requests never share a block, and all blocks return. */
Test(sched, random_streams_lose_nothing) {
  uint64_t rng = 7;
  for (int trial = 0; trial < 40; trial++) {
    sc_sched_config c = {.token_budget = 1 + (int)sc_test_rng_int(&rng, 0, INT32_MAX) % 40, .max_running = 1 + (int)sc_test_rng_int(&rng, 0, INT32_MAX) % 6,
                         .block_size = 1 + (int)sc_test_rng_int(&rng, 0, INT32_MAX) % 8, .dcp = 1 + (int)sc_test_rng_int(&rng, 0, INT32_MAX) % 4,
                         .num_blocks = 8 + (int)sc_test_rng_int(&rng, 0, INT32_MAX) % 40, .max_model_len = 200};
    sc_sched *s = make(c);
    enum { NREQ = 30 };
    int32_t want_new[NREQ], got[NREQ], plen[NREQ];
    int accepted = 0, submitted = 0;
    memset(got, 0, sizeof got);
    sc_sched_step *st;
    sc_sched_event ev[64];
    uint64_t steps = 0;
    for (int step = 0; step < 5000; step++) {
      if (submitted < NREQ && (int)sc_test_rng_int(&rng, 0, INT32_MAX) % 3 == 0) {
        const int id = submitted++;
        plen[id] = 1 + (int)sc_test_rng_int(&rng, 0, INT32_MAX) % 60;
        want_new[id] = 1 + (int)sc_test_rng_int(&rng, 0, INT32_MAX) % 10;
        int32_t prompt[64];
        for (int i = 0; i < plen[id]; i++) prompt[i] = id * 1000 + i;
        const sc_sched_params p = {.max_new_tokens = want_new[id]};
        if (sc_sched_submit(s, id, prompt, plen[id], &p, NULL) == 0) accepted++;
        else want_new[id] = -1;
      }
      cr_assert_eq(sc_sched_next(s, &st), 0);
      if (st == NULL) {
        if (submitted == NREQ) break;
        continue;
      }
      cr_assert_leq(st->num_tokens, c.token_budget);
      cr_assert_leq(st->num_reqs, c.max_running);
      int32_t sampled[64], off = 0;
      for (int32_t i = 0; i < st->num_reqs; i++) {
        const sc_batch_req *r = &st->reqs[i];
        const int id = (int)r->id;
        for (int32_t t = 0; t < r->scheduled; t++) {
          const int32_t pos = r->computed + t;
          const int32_t want = pos < plen[id] ? id * 1000 + pos : 500000 + id * 100 + (pos - plen[id]);
          cr_assert_eq(st->tokens[off + t], want, "request %d position %d", id, pos);
        }
        off += r->scheduled;
        sampled[i] = 500000 + id * 100 + got[id];
        for (int32_t j = 0; j < i; j++)
          for (int32_t a = st->block_start[i]; a < st->block_start[i + 1]; a++)
            for (int32_t b = st->block_start[j]; b < st->block_start[j + 1]; b++)
              cr_assert_neq(st->blocks[a], st->blocks[b], "block shared");
      }
      const int n = sc_sched_advance(s, sampled, ev);
      steps++;
      for (int k = 0; k < n; k++) {
        cr_assert_eq(ev[k].index, got[ev[k].id]);
        got[ev[k].id]++;
        cr_assert_eq(ev[k].finished, got[ev[k].id] == want_new[ev[k].id]);
      }
    }
    for (int id = 0; id < submitted; id++)
      if (want_new[id] > 0) cr_assert_eq(got[id], want_new[id], "trial %d request %d", trial, id);
    sc_sched_stats stats;
    sc_sched_get_stats(s, &stats);
    cr_assert_eq(stats.free_blocks, c.num_blocks);
    cr_assert_eq((int)stats.finished, accepted);
    cr_assert_eq(stats.steps, steps);
    cr_assert_eq(stats.steps_failed, 0);
    sc_sched_destroy(s);
  }
}

/* ---- steps planned ahead (sc_sched_next_ahead) ---- */

Test(sched, a_step_planned_ahead_takes_the_token_of_the_step_in_flight) {
  sc_sched *s = make(small_cfg());
  submit(s, 1, 3, 3);
  sc_sched_step *st, *ahead;
  sc_sched_event ev[8];
  cr_assert_eq(sc_sched_next_ahead(s, &st), SC_EAGAIN); /* nothing in flight */
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert(st->prev_step == 0 && st->prev_entry[0] == -1 && st->sample[0]);
  cr_assert_eq(sc_sched_next(s, &ahead), SC_EAGAIN);
  cr_assert_eq(sc_sched_next_ahead(s, &ahead), 0);
  cr_assert_not_null(ahead);
  cr_assert_eq(ahead->prev_step, st->step);
  cr_assert_eq(ahead->step, st->step + 1);
  cr_assert(ahead->num_reqs == 1 && !ahead->reqs[0].prefill && ahead->reqs[0].computed == 3);
  cr_assert(ahead->prev_entry[0] == 0 && ahead->tokens[0] == 0 && ahead->out_index[0] == 1);
  cr_assert_eq(sc_sched_in_flight(s), 2);
  cr_assert_eq(sc_sched_next_ahead(s, &ahead), SC_EAGAIN); /* two in flight */
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){77}, ev), 1);
  cr_assert(ev[0].token == 77 && ev[0].index == 0 && !ev[0].finished);
  /* the third token is the last: a step after the second plans it, none after that */
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0);
  cr_assert(st->reqs[0].computed == 4 && st->prev_entry[0] == 0 && st->out_index[0] == 2);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){78}, ev), 1);
  cr_assert_eq(sc_sched_next_ahead(s, &ahead), 0);
  cr_assert_null(ahead); /* the step in flight ends the request */
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){79}, ev), 1);
  cr_assert(ev[0].finished && ev[0].index == 2);
  /* a request that is not planned ahead takes its token from the step's input as ever */
  submit(s, 2, 2, 3);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){50}, ev), 1);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert(st->prev_entry[0] == -1 && st->tokens[0] == 50);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){51}, ev), 1);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.running == 1 && stats.steps == 5 && stats.finished == 1);
  sc_sched_destroy(s);
}

/* A request drawn at a temperature is planned ahead as a greedy one is: its token
 * travels on the device (draw_rows), named by prev_entry like the greedy choice. */
Test(sched, a_request_sampled_at_a_temperature_is_planned_ahead_too) {
  sc_sched *s = make(small_cfg());
  int32_t prompt[2] = {5, 6};
  const sc_sched_params hot = {.max_new_tokens = 4, .temperature = 0.8f, .seed = 1};
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 2, &hot, NULL), 0);
  submit(s, 2, 2, 4);
  sc_sched_step *st;
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(st->num_reqs, 2);
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0);
  cr_assert_eq(st->num_reqs, 2);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(st->prev_entry[i], st->reqs[i].id == 1 ? 0 : 1, "entry %d (request %lld)", i,
                 (long long)st->reqs[i].id);
  sc_sched_destroy(s);
}

Test(sched, two_failed_steps_in_flight_roll_back_to_before_the_first) {
  sc_sched *s = make(small_cfg());
  submit(s, 1, 3, 4);
  sc_sched_step *st;
  sc_sched_event ev[8];
  int64_t ids[8];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){70}, ev), 1);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0);
  submit(s, 2, 2, 1); /* waits: arrived after both were planned */
  cr_assert_eq(sc_sched_retry_step(s, 1, ids), 0);
  cr_assert_eq(sc_sched_in_flight(s), 0);
  cr_assert_eq(sc_sched_next(s, &st), 0); /* the first step's work again */
  cr_assert(st->reqs[0].id == 1 && st->reqs[0].computed == 3 && st->tokens[0] == 70);
  cr_assert(st->out_index[0] == 1 && st->prev_entry[0] == -1);
  cr_assert(st->num_reqs == 2 && st->reqs[1].id == 2);
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0);
  /* a second failure of both in a row is request 1's second: past the limit of 1 */
  cr_assert_eq(sc_sched_retry_step(s, 1, ids), 1);
  cr_assert_eq(ids[0], 1);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.steps_failed, 4);
  cr_assert_eq(stats.running, 1); /* request 2 ran once: its first failure */
  cr_assert_eq(sc_sched_requeue_running(s), 1);
  sc_sched_destroy(s);
}

Test(sched, a_request_canceled_with_two_steps_in_flight_ends_after_the_second) {
  sc_sched *s = make(small_cfg());
  submit(s, 1, 3, 5);
  sc_sched_step *st;
  sc_sched_event ev[8];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0);
  cr_assert_eq(sc_sched_cancel(s, 1), 0);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){1}, ev), 0);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert_eq(stats.running, 1); /* the second step still writes its cache */
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0);
  cr_assert_null(st); /* and it is not planned again */
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){2}, ev), 0);
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.running == 0 && stats.canceled == 1 && stats.free_blocks == 16);
  sc_sched_destroy(s);
}

/* A pipeline of steps planned ahead, as the scheduler actor runs it on one rank: every
 * token an entry reads, known or taken from the step before, is the one that request's
 * stream holds at that position; failures (both steps, retried), cancels and requests
 * ending at end-of-sequence tokens (which the step planned ahead does not know of) lose
 * and duplicate nothing, and every block comes back. */
Test(sched, random_streams_with_steps_planned_ahead_lose_nothing) {
  uint64_t rng = 11;
  int64_t taken_total = 0;
  uint64_t stopped_total = 0;
  for (int trial = 0; trial < 40; trial++) {
    sc_sched_config c = {.token_budget = 1 + (int)sc_test_rng_int(&rng, 1, 40),
                         .max_running = (int)sc_test_rng_int(&rng, 1, 6),
                         .block_size = (int)sc_test_rng_int(&rng, 1, 8),
                         .dcp = (int)sc_test_rng_int(&rng, 1, 4),
                         .num_blocks = (int)sc_test_rng_int(&rng, 8, 48), .max_model_len = 200};
    enum { NREQ = 30 };
    /* end-of-sequence tokens: some requests' k-th token (the stream's token of request id
     * at index k is 500000 + id * 100 + k) */
    c.num_eos = (int)sc_test_rng_int(&rng, 0, SC_SCHED_MAX_EOS);
    for (int k = 0; k < c.num_eos; k++)
      c.eos[k] = 500000 + (int)sc_test_rng_int(&rng, 0, NREQ - 1) * 100 +
                 (int)sc_test_rng_int(&rng, 0, 9);
    sc_sched *s = make(c);
    int32_t want_new[NREQ], got[NREQ], plen[NREQ], ends[NREQ];
    bool canceled[NREQ], ignore[NREQ];
    int accepted = 0, submitted = 0, n_canceled = 0;
    uint64_t n_stopped = 0;
    memset(got, 0, sizeof got);
    memset(canceled, 0, sizeof canceled);
    sc_sched_step *fl[2] = {NULL, NULL}; /* in flight, oldest first */
    int32_t sampled[2][64];
    sc_sched_event ev[64];
    int64_t ids[64];
    for (int round = 0; round < 20000; round++) {
      if (submitted < NREQ && sc_test_rng_int(&rng, 0, 2) == 0) {
        const int id = submitted++;
        plen[id] = (int)sc_test_rng_int(&rng, 1, 60);
        want_new[id] = (int)sc_test_rng_int(&rng, 1, 10);
        ignore[id] = sc_test_rng_int(&rng, 0, 3) == 0;
        ends[id] = want_new[id]; /* its output's length: up to its first eos, if heeded */
        for (int k = 0; k < c.num_eos && !ignore[id]; k++) {
          const int at = c.eos[k] - 500000 - id * 100;
          if (at >= 0 && at < 100 && at + 1 < ends[id]) ends[id] = at + 1;
        }
        int32_t prompt[64];
        for (int i = 0; i < plen[id]; i++) prompt[i] = id * 1000 + i;
        const sc_sched_params p = {.max_new_tokens = want_new[id], .ignore_eos = ignore[id]};
        if (sc_sched_submit(s, id, prompt, plen[id], &p, NULL) == 0) accepted++;
        else want_new[id] = -1;
      }
      const int nf = sc_sched_in_flight(s);
      cr_assert_eq(nf, (fl[0] != NULL) + (fl[1] != NULL));
      const int act = (int)sc_test_rng_int(&rng, 0, 19);
      if (nf > 0 && act == 0) { /* both fail, retried */
        cr_assert_eq(sc_sched_retry_step(s, 1000, ids), 0);
        fl[0] = fl[1] = NULL;
        continue;
      }
      if (act == 1 && submitted > 0) { /* a client cancels */
        const int id = (int)sc_test_rng_int(&rng, 0, submitted - 1);
        const bool ended = got[id] == ends[id];
        if (want_new[id] > 0 && !canceled[id] && sc_sched_cancel(s, id) == 0) {
          cr_assert(!ended, "request %d canceled after its last token", id);
          canceled[id] = true;
          n_canceled++;
        }
        continue;
      }
      if (nf < 2 && (nf == 0 || act < 12)) {
        sc_sched_step *st;
        cr_assert_eq(nf == 0 ? sc_sched_next(s, &st) : sc_sched_next_ahead(s, &st), 0);
        if (st != NULL) {
          cr_assert_leq(st->num_tokens, c.token_budget);
          cr_assert_eq(st->prev_step, nf ? fl[0]->step : 0);
          int32_t off = 0;
          for (int32_t i = 0; i < st->num_reqs; i++) {
            const sc_batch_req *r = &st->reqs[i];
            const int id = (int)r->id;
            for (int32_t t = 0; t < r->scheduled; t++) {
              const int32_t pos = r->computed + t;
              const bool taken = t == r->scheduled - 1 && st->prev_entry[i] >= 0;
              taken_total += taken;
              const int32_t tok = taken ? sampled[0][st->prev_entry[i]] : st->tokens[off + t];
              const int32_t want =
                  pos < plen[id] ? id * 1000 + pos : 500000 + id * 100 + (pos - plen[id]);
              cr_assert_eq(tok, want, "request %d position %d", id, pos);
            }
            if (st->prev_entry[i] >= 0)
              cr_assert_eq(fl[0]->reqs[st->prev_entry[i]].id, r->id);
            off += r->scheduled;
            sampled[nf][i] = st->sample[i] ? 500000 + id * 100 + st->out_index[i] : -1;
            for (int32_t j = 0; j < i; j++)
              for (int32_t a = st->block_start[i]; a < st->block_start[i + 1]; a++)
                for (int32_t b = st->block_start[j]; b < st->block_start[j + 1]; b++)
                  cr_assert_neq(st->blocks[a], st->blocks[b], "block shared");
          }
          fl[nf] = st;
          continue;
        }
        if (nf == 0) {
          if (submitted == NREQ) break;
          continue;
        }
      }
      if (nf == 0) continue;
      const int n = sc_sched_advance(s, sampled[0], ev);
      for (int k = 0; k < n; k++) {
        const int64_t id = ev[k].id;
        cr_assert_eq(ev[k].index, got[id]);
        got[id]++;
        cr_assert_leq(got[id], ends[id], "request %lld past its end", (long long)id);
        cr_assert_eq(ev[k].finished, got[id] == ends[id]);
        cr_assert_eq(ev[k].eos, got[id] == ends[id] && (ends[id] < want_new[id] ||
                                                       (!ignore[id] && is_eos_of(&c, ev[k].token))));
        n_stopped += ev[k].eos;
      }
      memcpy(sampled[0], sampled[1], sizeof sampled[0]);
      fl[0] = fl[1];
      fl[1] = NULL;
    }
    for (int id = 0; id < submitted; id++)
      if (want_new[id] > 0 && !canceled[id])
        cr_assert_eq(got[id], ends[id], "trial %d request %d", trial, id);
    sc_sched_stats stats;
    sc_sched_get_stats(s, &stats);
    cr_assert(stats.running == 0 && stats.waiting == 0, "trial %d", trial);
    cr_assert_eq(stats.free_blocks, c.num_blocks);
    cr_assert_eq((int)(stats.finished + stats.canceled), accepted);
    cr_assert_eq(stats.stopped, n_stopped);
    stopped_total += n_stopped;
    sc_sched_destroy(s);
  }
  cr_assert_gt(taken_total, 1000); /* (the streams did go through steps planned ahead) */
  cr_assert_gt(stopped_total, 20);  /* (and some ended at an end-of-sequence token) */
}

Test(sched, a_request_canceled_in_a_failed_step_ends_canceled_not_failed) {
  sc_sched *s = make(small_cfg());
  submit(s, 1, 3, 5);
  submit(s, 2, 3, 5);
  sc_sched_step *st;
  int64_t ids[8];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0);
  cr_assert_eq(sc_sched_cancel(s, 1), 0);
  cr_assert_eq(sc_sched_fail_step(s, ids), 1);
  cr_assert_eq(ids[0], 2);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.canceled == 1 && stats.failed == 1 && stats.running == 0);
  cr_assert_eq(stats.free_blocks, 16);
  sc_sched_destroy(s);
}

/* (the end-of-sequence cases: request 1's tokens are 70, 71, ...; 71 is an eos) */
static sc_sched *make_eos(void) {
  sc_sched_config c = small_cfg();
  c.eos[0] = 9, c.eos[1] = 71;
  c.num_eos = 2;
  return make(c);
}

Test(sched, a_request_ends_at_its_end_of_sequence_token) {
  sc_sched *s = make_eos();
  submit(s, 1, 3, 5);
  sc_sched_step *st;
  sc_sched_event ev[8];
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){70}, ev), 1);
  cr_assert(!ev[0].finished && !ev[0].eos);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){71}, ev), 1);
  cr_assert(ev[0].finished && ev[0].eos && ev[0].token == 71 && ev[0].index == 1);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.running == 0 && stats.finished == 1 && stats.stopped == 1);
  cr_assert_eq(stats.free_blocks, 16);
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_null(st);
  sc_sched_destroy(s);
}

Test(sched, a_request_that_ignores_eos_runs_to_its_length) {
  sc_sched *s = make_eos();
  int32_t prompt[3] = {1, 2, 3};
  const sc_sched_params p = {.max_new_tokens = 3, .ignore_eos = true};
  cr_assert_eq(sc_sched_submit(s, 1, prompt, 3, &p, NULL), 0);
  sc_sched_step *st;
  sc_sched_event ev[8];
  for (int32_t k = 0; k < 3; k++) {
    cr_assert_eq(sc_sched_next(s, &st), 0);
    cr_assert_eq(sc_sched_advance(s, (int32_t[]){71 - k}, ev), 1);
    cr_assert(ev[0].finished == (k == 2) && !ev[0].eos, "token %d", k);
  }
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.finished == 1 && stats.stopped == 0 && stats.running == 0);
  sc_sched_destroy(s);
}

/* Requests 1 and 2 in a step and in the one planned ahead of it; the first step
 * advances with `token` for request 1 (an eos) and 50 for request 2. */
static sc_sched *eos_in_flight(int32_t token, sc_sched_event ev[8]) {
  sc_sched *s = make_eos();
  submit(s, 1, 3, 5);
  submit(s, 2, 3, 5);
  sc_sched_step *st;
  cr_assert_eq(sc_sched_next(s, &st), 0);
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0);
  cr_assert_eq(st->num_reqs, 2);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){token, 50}, ev), 2);
  cr_assert(ev[0].id == 1 && ev[0].finished && ev[0].eos && ev[0].index == 0);
  cr_assert(ev[1].id == 2 && !ev[1].finished);
  return s;
}

/* The step planned ahead holds the request when its eos comes: the client hears the end
 * once (with that token), the step's token is dropped, and only then do its blocks come
 * back; a cancel in between finds nothing to cancel. */
Test(sched, an_eos_in_flight_drops_the_step_planned_ahead) {
  sc_sched_event ev[8];
  sc_sched *s = eos_in_flight(9, ev);
  cr_assert_eq(sc_sched_cancel(s, 1), SC_ENOENT);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.running == 2 && stats.finished == 1 && stats.stopped == 1);
  sc_sched_step *st;
  cr_assert_eq(sc_sched_next_ahead(s, &st), 0); /* request 2 only */
  cr_assert(st->num_reqs == 1 && st->reqs[0].id == 2);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){5, 51}, ev), 1);
  cr_assert(ev[0].id == 2 && ev[0].index == 1);
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.running == 1 && stats.finished == 1 && stats.canceled == 0);
  cr_assert_eq(sc_sched_advance(s, (int32_t[]){52}, ev), 1);
  sc_sched_destroy(s);
}

/* The step planned ahead fails after the eos: the ended request is not failed (its
 * client was told it finished), the other one is. */
Test(sched, a_failed_step_after_an_eos_leaves_the_request_finished) {
  sc_sched_event ev[8];
  sc_sched *s = eos_in_flight(71, ev);
  int64_t ids[8];
  cr_assert_eq(sc_sched_fail_step(s, ids), 1);
  cr_assert_eq(ids[0], 2);
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.finished == 1 && stats.failed == 1 && stats.canceled == 0);
  cr_assert(stats.running == 0 && stats.free_blocks == 16);
  sc_sched_destroy(s);
}

/* ... and when the step is requeued instead (a rank's recovery), the ended one just ends. */
Test(sched, a_requeue_after_an_eos_ends_the_request) {
  sc_sched_event ev[8];
  sc_sched *s = eos_in_flight(9, ev);
  cr_assert_eq(sc_sched_requeue_running(s), 1); /* request 2 only */
  sc_sched_stats stats;
  sc_sched_get_stats(s, &stats);
  cr_assert(stats.finished == 1 && stats.waiting == 1 && stats.running == 0);
  sc_sched_destroy(s);
}
