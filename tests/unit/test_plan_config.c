/* Configuration rules of SPEC.md §1: every valid combination is accepted, every invalid
 * one is rejected with a message that names the rule. */
#include <criterion/criterion.h>
#include <string.h>

#include "model/model_defaults.h"
#include "plan/plan.h"

static sc_plan_config make(int p, int n, int t) {
  sc_plan_config c;
  sc_model_plan_config_default(&c);
  c.pcp = p;
  c.dcp = n;
  c.tp = t;
  return c;
}

static void expect_reject(sc_plan_config c, int code, const char *needle) {
  sc_diag d = {0};
  const int rc = sc_plan_config_validate(&c, &d);
  cr_assert_eq(rc, code, "pcp %d dcp %d tp %d: got %d (%s)", c.pcp, c.dcp, c.tp, rc, d.msg);
  cr_assert_not_null(strstr(d.msg, needle), "message '%s' does not mention '%s'", d.msg,
                     needle);
}

Test(plan_config, valid_combinations_are_accepted) {
  for (int p = 1; p <= 8; p *= 2)
    for (int t = 1; t <= 4; t *= 2)
      for (int n = 1; n <= 8; n++) {
        const bool valid = p > 1 ? (n == 1 || n == p) : (t % n == 0);
        sc_plan_config c = make(p, n, t);
        const int rc = sc_plan_config_validate(&c, NULL);
        cr_assert_eq(rc == 0, valid, "pcp %d dcp %d tp %d", p, n, t);
      }
}

Test(plan_config, world_and_group_coordinates) {
  const sc_plan_config c = make(2, 2, 2);
  cr_assert_eq(sc_plan_world_size(&c), 4);
  const sc_rank_coords r3 = sc_plan_rank_coords(&c, 3);
  cr_assert_eq(r3.pcp_rank, 1);
  cr_assert_eq(r3.tp_rank, 1);
  cr_assert_eq(r3.dcp_rank, 1); /* N = P: the DCP group is the PCP group */
  const sc_plan_config c1 = make(1, 2, 4);
  const sc_rank_coords q = sc_plan_rank_coords(&c1, 3);
  cr_assert_eq(q.tp_rank, 3);
  cr_assert_eq(q.dcp_rank, 1); /* runs of N TP ranks: tp_rank mod N */
}

Test(plan_config, each_rule_is_named) {
  expect_reject(make(3, 2, 1), SC_EINVAL, "dcp must be 1 or equal to pcp");
  expect_reject(make(2, 4, 2), SC_ENOTSUP, "not supported yet");
  expect_reject(make(1, 3, 4), SC_EINVAL, "dcp must divide tp");
  expect_reject(make(1, 2, 1), SC_EINVAL, "dcp must divide tp");
  expect_reject(make(0, 1, 1), SC_EINVAL, "pcp = 0 is out of range");
  expect_reject(make(1, 0, 1), SC_EINVAL, "dcp = 0");
  expect_reject(make(1, 1, -2), SC_EINVAL, "tp = -2");

  sc_plan_config c = make(2, 2, 1);
  c.interleave = 3;
  c.block_size = 64;
  expect_reject(c, SC_EINVAL, "interleave = 3 does not divide block_size = 64");
  c = make(2, 2, 1);
  c.interleave = 128;
  expect_reject(c, SC_EINVAL, "does not divide block_size");
  c = make(1, 1, 4);
  c.heads = 6;
  expect_reject(c, SC_EINVAL, "heads = 6 is not divisible by tp = 4");
  c = make(4, 4, 1);
  c.max_gathered_rows = 3;
  expect_reject(c, SC_EINVAL, "max_gathered_rows = 3 is smaller than dcp = 4");
  /* extents and workspace rows are int32: 2^31 rows would overflow them */
  c.max_gathered_rows = (int64_t)1 << 31;
  expect_reject(c, SC_EINVAL, "max_gathered_rows");
  c.max_gathered_rows = INT32_MAX;
  cr_assert_eq(sc_plan_config_validate(&c, NULL), 0);
  c = make(1, 1, 1);
  c.pad_multiple = 0;
  expect_reject(c, SC_EINVAL, "pad_multiple");
  c = make(1, 1, 1);
  c.layers = 0;
  expect_reject(c, SC_EINVAL, "layers");
  c = make(1, 1, 1);
  c.topk = 0;
  expect_reject(c, SC_EINVAL, "topk");
  c = make(1, 1, 1);
  c.dtype = SC_DT_W32;
  expect_reject(c, SC_EINVAL, "dtype");
  c = make(64, 1, 32);
  expect_reject(c, SC_EINVAL, "world size");
}
