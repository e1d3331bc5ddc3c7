/* Property tests of the planner over thousands of random batches, for every valid
 * (P, N, T) with P in {1,2,4,8}, T in {1,2}, I in {1,2,4} and pad_multiple in {1,8}
 * (SPEC.md §1, §3-6). The properties themselves are checked by plan_check.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_defaults.h"
#include "plan/plan.h"
#include "plan_check.h"
#include "tests/common/sc_test_rng.h"

#define BATCHES_PER_CONFIG 120
#define MAX_REQS 24

/* [lo, hi], inclusive */
static int32_t uniform(uint64_t *r, int32_t lo, int32_t hi) {
  return (int32_t)sc_test_rng_int(r, lo, hi);
}

/* A mix of decodes, fresh prefills, chunked prefills with context, short prefills of
 * 1..2P+1 tokens, and zero-token entries; at least one token overall. */
static int32_t random_batch(uint64_t *r, int32_t P, sc_batch_req *out) {
  const int32_t n = uniform(r, 1, MAX_REQS);
  int64_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    sc_batch_req *q = &out[i];
    *q = (sc_batch_req){.id = i};
    switch (uniform(r, 0, 5)) {
    case 0: /* decode */
      q->computed = uniform(r, 1, 400);
      q->scheduled = uniform(r, 0, 9) == 0 ? 2 : 1;
      break;
    case 1: /* fresh prefill */
      q->scheduled = uniform(r, 1, 300);
      q->prefill = true;
      break;
    case 2: /* chunked prefill with context */
      q->computed = uniform(r, 1, 500);
      q->scheduled = uniform(r, 1, 120);
      q->prefill = true;
      break;
    case 3: case 4: /* short prefill: the replication boundary */
      q->computed = uniform(r, 0, 1) ? 0 : uniform(r, 1, 40);
      q->scheduled = uniform(r, 1, 2 * P + 1);
      q->prefill = true;
      break;
    default: /* zero-token entry (waiting request) */
      q->computed = uniform(r, 1, 100);
      q->scheduled = 0;
      q->prefill = uniform(r, 0, 1);
      break;
    }
    total += q->scheduled;
  }
  if (total == 0) out[0] = (sc_batch_req){.id = 0, .scheduled = uniform(r, 1, 5), .prefill = true};
  return n;
}

typedef struct {
  int32_t p, n, t;
} pnt_t;

static int valid_configs(pnt_t *out) {
  int k = 0;
  for (int32_t p = 1; p <= 8; p *= 2)
    for (int32_t t = 1; t <= 2; t++)
      for (int32_t n = 1; n <= 8; n++) {
        sc_plan_config c;
        sc_model_plan_config_default(&c);
        c.pcp = p, c.dcp = n, c.tp = t;
        if (sc_plan_config_validate(&c, NULL) == 0) out[k++] = (pnt_t){p, n, t};
      }
  return k;
}

Test(plan_props, every_property_holds_on_random_batches) {
  pnt_t cfgs[64];
  const int ncfg = valid_configs(cfgs);
  cr_assert_eq(ncfg, 15, "valid (P, N, T) combinations: %d", ncfg);
  sc_batch_req reqs[MAX_REQS];
  sc_plan plan;
  sc_plan_init(&plan);
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  long checked = 0;
  for (int ci = 0; ci < ncfg; ci++)
    for (int32_t il = 1; il <= 4; il *= 2)
      for (int32_t pad = 1; pad <= 8; pad += 7) {
        sc_plan_config c;
        sc_model_plan_config_default(&c);
        c.pcp = cfgs[ci].p, c.dcp = cfgs[ci].n, c.tp = cfgs[ci].t;
        c.interleave = il;
        c.pad_multiple = pad;
        c.layers = 2;
        /* a small workspace so that batches span several chunks */
        c.max_gathered_rows = (int64_t)c.dcp * uniform(&rng, 300, 900);
        cr_assert_eq(sc_plan_config_validate(&c, NULL), 0);
        for (int b = 0; b < BATCHES_PER_CONFIG; b++) {
          const int32_t n = random_batch(&rng, c.pcp, reqs);
          sc_diag d = {0};
          const int rc = sc_plan_build(&plan, &c, reqs, n, &d);
          if (rc == SC_ERANGE) continue; /* oversize request: covered separately */
          cr_assert_eq(rc, 0, "P%d N%d T%d I%d: %s", c.pcp, c.dcp, c.tp, il, d.msg);
          char why[512];
          cr_assert_eq(sc_check_plan(&plan, reqs, n, why, sizeof why), 0,
                       "P%d N%d T%d I%d pad%d batch %d: %s", c.pcp, c.dcp, c.tp, il, pad, b,
                       why);
          checked++;
        }
      }
  cr_assert_gt(checked, 10000, "only %ld batches checked", checked);
  sc_plan_free(&plan);
}

/* Every rank plans the step itself, with its own plan object that earlier planned other
 * batches (buffer reuse must not leak state): all ranks get the same collective plan
 * and fingerprint, and the rank coordinates do not enter it. */
Test(plan_props, every_rank_computes_the_same_collective_plan) {
  pnt_t cfgs[64];
  const int ncfg = valid_configs(cfgs);
  sc_batch_req reqs[MAX_REQS];
  uint64_t rng = 12345;
  for (int ci = 0; ci < ncfg; ci++) {
    sc_plan_config c;
    sc_model_plan_config_default(&c);
    c.pcp = cfgs[ci].p, c.dcp = cfgs[ci].n, c.tp = cfgs[ci].t;
    c.interleave = 2;
    c.layers = 3;
    c.max_gathered_rows = (int64_t)c.dcp * 400;
    const int32_t W = sc_plan_world_size(&c);
    sc_plan plans[16];
    for (int32_t g = 0; g < W; g++) sc_plan_init(&plans[g]);
    for (int b = 0; b < 100; b++) {
      const int32_t n = random_batch(&rng, c.pcp, reqs);
      for (int32_t g = 0; g < W; g++) {
        /* rank g first plans an unrelated batch of its own, then the shared one */
        sc_batch_req other[MAX_REQS];
        const int32_t no = random_batch(&rng, c.pcp, other);
        sc_plan_build(&plans[g], &c, other, no, NULL);
        sc_plan_build(&plans[g], &c, reqs, n, NULL);
      }
      if (plans[0].num_reqs == 0) continue; /* rejected (oversize) on every rank alike */
      for (int32_t g = 1; g < W; g++) {
        cr_assert_eq(plans[g].num_colls, plans[0].num_colls);
        cr_assert_eq(plans[g].fingerprint, plans[0].fingerprint);
        cr_assert_arr_eq(plans[g].colls, plans[0].colls,
                         sizeof(sc_coll) * (size_t)plans[0].num_colls);
        /* the session check accepts every planned entry of another rank's plan */
        for (int32_t k = 0; k < plans[0].num_colls; k++)
          cr_assert(sc_coll_matches(&plans[0].colls[k], &plans[g].colls[k]));
      }
    }
    for (int32_t g = 0; g < W; g++) sc_plan_free(&plans[g]);
  }
}

Test(plan_props, fingerprint_separates_different_plans) {
  sc_plan_config c;
  sc_model_plan_config_default(&c);
  c.pcp = c.dcp = 2;
  sc_plan a, b;
  sc_plan_init(&a);
  sc_plan_init(&b);
  const sc_batch_req r1 = {.scheduled = 16, .prefill = true};
  const sc_batch_req r2 = {.scheduled = 18, .prefill = true}; /* T_pad 8 -> 9 */
  cr_assert_eq(sc_plan_build(&a, &c, &r1, 1, NULL), 0);
  cr_assert_eq(sc_plan_build(&b, &c, &r2, 1, NULL), 0);
  cr_assert_neq(a.fingerprint, b.fingerprint);
  /* one field of one entry changes the fingerprint */
  sc_coll copy[8];
  memcpy(copy, a.colls, sizeof(sc_coll) * (size_t)a.num_colls);
  copy[0].width++;
  cr_assert_neq(sc_coll_fingerprint(copy, a.num_colls), a.fingerprint);
  sc_plan_free(&a);
  sc_plan_free(&b);
}

static size_t largest_block(const sc_plan *plan) {
  size_t m = 0;
  for (int32_t k = 0; k < plan->num_colls; k++) {
    const sc_coll *c = &plan->colls[k];
    const size_t b = sc_coll_block_bytes(c, sc_plan_group_size(&plan->cfg, c->group));
    if (b > m) m = b;
  }
  return m;
}

/* Model shapes under which each term of sc_plan_max_block_bytes is the largest in some
 * configuration: the embedded model (context_kv, attn_out), and with a small workspace
 * hidden, topk_candidates, decode_q/decode_out, decode_lse and prefill_kv. */
typedef struct shape {
  int32_t heads, kv_lora_rank, rope_dim, index_dim, topk, hidden;
  int64_t rows_per_dcp_rank; /* max_gathered_rows / (dcp * interleave) */
} shape;

static const shape k_shapes[] = {
    {8, 512, 64, 64, 64, 512, 200},   {8, 16, 8, 8, 4, 4096, 25}, {8, 4, 0, 1, 4096, 8, 25},
    {64, 512, 0, 1, 1, 8, 25},        {64, 1, 0, 1, 1, 8, 25},    {2, 4, 4, 4096, 1, 8, 25}};

/* sc_plan_max_block_bytes: no block of a plan is larger than the bound for the step's
 * own token count, over random batches; and the extreme steps of S tokens (S decodes,
 * S one-token prefills, one prefill whose context fills the workspace) reach exactly
 * the bound for S in every configuration and shape, so no term of it is larger than
 * the largest block of its purpose. */
Test(plan_props, no_block_exceeds_max_block_bytes_and_extreme_steps_reach_it) {
  pnt_t cfgs[64];
  const int ncfg = valid_configs(cfgs);
  enum { S = 45 }; /* not a multiple of pad_multiple 8: T_pad rounds up */
  sc_batch_req reqs[S > MAX_REQS ? S : MAX_REQS];
  sc_plan plan;
  sc_plan_init(&plan);
  uint64_t rng = 777;
  long checked = 0;
  for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++)
    for (int ci = 0; ci < ncfg; ci++)
      for (int v = 0; v < 4; v++) {
        const shape *sh = &k_shapes[si];
        sc_plan_config c;
        sc_model_plan_config_default(&c);
        c.pcp = cfgs[ci].p, c.dcp = cfgs[ci].n, c.tp = cfgs[ci].t;
        c.heads = sh->heads, c.kv_lora_rank = sh->kv_lora_rank, c.rope_dim = sh->rope_dim;
        c.index_dim = sh->index_dim, c.topk = sh->topk, c.hidden = sh->hidden;
        c.interleave = 2;
        c.max_gathered_rows = (int64_t)c.dcp * c.interleave * sh->rows_per_dcp_rank;
        c.pad_multiple = v & 1 ? 8 : 1;
        c.dtype = v & 2 ? SC_DT_BF16 : SC_DT_F32;
        cr_assert_eq(sc_plan_config_validate(&c, NULL), 0);
        for (int b = 0; b < 20; b++) {
          const int32_t n = random_batch(&rng, c.pcp, reqs);
          if (sc_plan_build(&plan, &c, reqs, n, NULL) != 0) continue; /* oversize */
          const size_t bound = sc_plan_max_block_bytes(&c, plan.num_tokens);
          cr_assert_leq(largest_block(&plan), bound, "shape %zu P%d N%d T%d v%d batch %d", si,
                        c.pcp, c.dcp, c.tp, v, b);
          checked++;
        }
        const size_t bound = sc_plan_max_block_bytes(&c, S);
        size_t reached = 0;
        for (int e = 0; e < 3; e++) {
          int32_t n = S;
          for (int32_t i = 0; i < S; i++)
            reqs[i] = e == 0 ? (sc_batch_req){.id = i, .computed = 30, .scheduled = 1}
                             : (sc_batch_req){.id = i, .scheduled = 1, .prefill = true};
          if (e == 2) {
            n = 1;
            reqs[0] = (sc_batch_req){.computed = (int32_t)c.max_gathered_rows - S,
                                     .scheduled = S, .prefill = true};
          }
          sc_diag d = {0};
          cr_assert_eq(sc_plan_build(&plan, &c, reqs, n, &d), 0, "%s", d.msg);
          const size_t m = largest_block(&plan);
          cr_assert_leq(m, bound);
          if (m > reached) reached = m;
        }
        cr_assert_eq(reached, bound, "shape %zu P%d N%d T%d v%d: %zu of %zu", si, c.pcp, c.dcp,
                     c.tp, v, reached, bound);
      }
  cr_assert_gt(checked, 3000, "only %ld random batches checked", checked);
  cr_assert_eq(sc_plan_max_block_bytes(&plan.cfg, 0), 0);
  sc_plan_free(&plan);
}
