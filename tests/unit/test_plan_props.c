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
