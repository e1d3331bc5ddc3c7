/* The worked examples of SPEC.md §3-5, number for number, the replication sets it
 * gives, and the JSON contract of `sparsecp plan --json` (DESIGN.md §7). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "model/model_defaults.h"
#include "plan/dcp.h"
#include "plan/plan.h"
#include "plan/plan_json.h"

static sc_plan_config cfg_pn(int p, int n) {
  sc_plan_config c;
  sc_model_plan_config_default(&c);
  c.pcp = p;
  c.dcp = n;
  cr_assert_eq(sc_plan_config_validate(&c, NULL), 0);
  return c;
}

/* SPEC.md §3: P = 2, N = 2, I = 1, A: c=0 q=11, B: c=6 q=8, both prefill. */
static void build_example(sc_plan *plan) {
  const sc_plan_config c = cfg_pn(2, 2);
  const sc_batch_req reqs[] = {{.id = 0, .computed = 0, .scheduled = 11, .prefill = true},
                               {.id = 1, .computed = 6, .scheduled = 8, .prefill = true}};
  sc_diag d = {0};
  sc_plan_init(plan);
  cr_assert_eq(sc_plan_build(plan, &c, reqs, 2, &d), 0, "%s", d.msg);
}

static void assert_rows(const sc_plan *plan, int rank, const int (*want)[3], int n) {
  int got = 0;
  for (int k = 0; k < plan->num_ordered; k++) {
    sc_plan_row rows[2];
    const int nr = sc_plan_req_rows(plan, plan->order[k], rank, rows);
    for (int i = 0; i < nr; i++, got++) {
      cr_assert_lt(got, n);
      cr_assert_eq(rows[i].req, want[got][0]);
      cr_assert_eq(rows[i].offset, want[got][1]);
      cr_assert_eq(rows[i].offset + rows[i].len, want[got][2]);
      cr_assert(rows[i].split);
    }
  }
  cr_assert_eq(got, n);
}

Test(plan_spec, section3_rank_layout_and_index_arrays) {
  sc_plan plan;
  build_example(&plan);
  const int r0[][3] = {{0, 0, 3}, {0, 9, 11}, {1, 0, 2}, {1, 6, 8}};
  const int r1[][3] = {{0, 3, 6}, {0, 6, 9}, {1, 2, 4}, {1, 4, 6}};
  assert_rows(&plan, 0, r0, 4);
  assert_rows(&plan, 1, r1, 4);
  cr_assert_eq(plan.rank_tokens[0], 9);
  cr_assert_eq(plan.rank_tokens[1], 10);
  cr_assert_eq(plan.t_pad, 10);
  cr_assert_eq(plan.num_tokens, 19);
  cr_assert_eq(plan.num_decode_tokens, 0);

  const int32_t want_gather[] = {0, 1, 2, 9, 10, 11, 12, 17, 18, 0,
                                 3, 4, 5, 6, 7, 8, 13, 14, 15, 16};
  const int32_t want_restore[] = {0, 1, 2, 10, 11, 12, 13, 14, 15, 3,
                                  4, 5, 6, 16, 17, 18, 19, 7, 8};
  int32_t gather[20], restore[19];
  uint8_t mask[20];
  cr_assert_eq(sc_plan_gather_slots(&plan), 20);
  sc_plan_fill_gather(&plan, gather, restore, mask);
  cr_assert_arr_eq(gather, want_gather, sizeof want_gather);
  cr_assert_arr_eq(restore, want_restore, sizeof want_restore);
  for (int s = 0; s < 20; s++) cr_assert_eq(mask[s], s != 9, "slot %d", s);
  sc_plan_free(&plan);
}

Test(plan_spec, section5_chunk_plan_and_deinterleave) {
  sc_plan plan;
  build_example(&plan);
  cr_assert_eq(plan.num_chunks, 1);
  cr_assert_eq(plan.num_regions, 2);
  cr_assert_eq(plan.regions[0].shard_rows, 6);
  cr_assert_eq(plan.regions[1].shard_rows, 7);
  cr_assert_eq(plan.regions[0].ws_start, 0);
  cr_assert_eq(plan.regions[1].ws_start, 6);
  cr_assert_eq(plan.chunks[0].shard_rows_total, 13);
  cr_assert_eq(plan.chunks[0].extent_total, 25);
  const int32_t want[] = {0, 13, 1, 14, 2,  15, 3,  16, 4,  17, 5,  6, 19,
                          7, 20, 8, 21, 9,  22, 10, 23, 11, 24, 12, 25};
  int32_t deint[25];
  sc_plan_fill_deinterleave(&plan, 0, deint);
  cr_assert_arr_eq(deint, want, sizeof want);
  /* "token B@9: owner 1, j = 4, row 13 + 6 + 4 = 23" */
  cr_assert_eq(sc_plan_workspace_row(&plan, 1, 9), 23);
  cr_assert_eq(sc_plan_workspace_row(&plan, 1, -1), -1);
  sc_plan_free(&plan);
}

Test(plan_spec, section6_collectives_of_the_example) {
  sc_plan plan;
  build_example(&plan);
  /* One layer: prefill_kv over PCP (T_pad - D = 10 rows of 512+64+64), one context_kv
   * chunk over DCP (13 rows), then the per-step hidden_restore (10 rows of hidden). */
  cr_assert_eq(plan.num_colls, 3);
  const sc_coll *c = plan.colls;
  cr_assert(c[0].purpose == SC_PURPOSE_PREFILL_KV && c[0].group == SC_GROUP_PCP &&
            c[0].op == SC_OP_ALL_GATHER && c[0].rows == 10 && c[0].width == 640 &&
            c[0].layer == 0);
  cr_assert(c[1].purpose == SC_PURPOSE_CONTEXT_KV && c[1].group == SC_GROUP_DCP &&
            c[1].rows == 13 && c[1].width == 640 && c[1].chunk == 0);
  cr_assert(c[2].purpose == SC_PURPOSE_HIDDEN_RESTORE && c[2].layer == -1 &&
            c[2].rows == 10 && c[2].width == plan.cfg.hidden);
  cr_assert_eq(plan.fingerprint, sc_coll_fingerprint(plan.colls, plan.num_colls));
  sc_plan_free(&plan);
}

/* sc_plan_purpose_totals(plan) against want[purpose] = {entries, block bytes}. */
static void assert_purpose_totals(const sc_plan *plan, const uint64_t (*want)[2]) {
  uint64_t colls[SC_PURPOSE_COUNT], bytes[SC_PURPOSE_COUNT];
  sc_plan_purpose_totals(plan, colls, bytes);
  for (int k = 0; k < SC_PURPOSE_COUNT; k++) {
    cr_assert_eq(colls[k], want[k][0], "%s", sc_coll_purpose_name(k));
    cr_assert_eq(bytes[k], want[k][1], "%s", sc_coll_purpose_name(k));
  }
}

/* sc_plan_purpose_totals against a hand count: the §3 example (f32, one layer) and a
 * P1 x N2 x T2 step of two decodes over two layers in bf16, whose decode_out is a
 * reduce_scatter (each member's block is 1/N of the buffer) and whose candidates and LSE
 * keep their own element types. */
Test(plan_spec, purpose_totals_count_entries_and_block_bytes) {
  sc_plan plan;
  build_example(&plan);
  const uint64_t example[SC_PURPOSE_COUNT][2] = {
      [SC_PURPOSE_PREFILL_KV] = {1, 10 * 640 * 4},
      [SC_PURPOSE_CONTEXT_KV] = {1, 13 * 640 * 4},
      [SC_PURPOSE_HIDDEN_RESTORE] = {1, 10 * 512 * 4}};
  assert_purpose_totals(&plan, example);

  sc_plan_config c;
  sc_model_plan_config_default(&c);
  c.dcp = c.tp = 2; /* with pcp 1, dcp divides tp */
  c.layers = 2;
  c.dtype = SC_DT_BF16;
  cr_assert_eq(sc_plan_config_validate(&c, NULL), 0);
  const sc_batch_req decodes[] = {{.id = 0, .computed = 30, .scheduled = 1},
                                  {.id = 1, .computed = 7, .scheduled = 1}};
  sc_diag d = {0};
  cr_assert_eq(sc_plan_build(&plan, &c, decodes, 2, &d), 0, "%s", d.msg);
  /* two layers of: D = T_pad = 2 rows, 8 / T = 4 heads here, 4 x N = 8 in attention;
   * decode_q 4 x 576 (bf16), candidates 2 x topk 64 words, LSE 8 (f32), decode_out
   * 8 x 512 (bf16) scattered over N = 2, attn_out and mlp_out hidden 512 (bf16) */
  const uint64_t decode[SC_PURPOSE_COUNT][2] = {
      [SC_PURPOSE_DECODE_Q] = {2, 2 * (2 * 2304 * 2)},
      [SC_PURPOSE_TOPK_CANDIDATES] = {2, 2 * (2 * 128 * 4)},
      [SC_PURPOSE_DECODE_LSE] = {2, 2 * (2 * 8 * 4)},
      [SC_PURPOSE_DECODE_OUT] = {2, 2 * (2 * 4096 * 2 / 2)},
      [SC_PURPOSE_ATTN_OUT] = {2, 2 * (2 * 512 * 2)},
      [SC_PURPOSE_MLP_OUT] = {2, 2 * (2 * 512 * 2)}};
  assert_purpose_totals(&plan, decode);
  sc_plan_free(&plan);
}

Test(plan_spec, section4_local_lengths) {
  /* L = 10, N = 4, I = 1 gives 3, 3, 2, 2 */
  const int64_t want[] = {3, 3, 2, 2};
  for (int r = 0; r < 4; r++) cr_assert_eq(sc_dcp_local_len(10, r, 4, 1), want[r]);
  /* and the ownership that produces them, position by position */
  for (int r = 0; r < 4; r++) {
    int64_t count = 0;
    for (int p = 0; p < 10; p++) count += sc_dcp_owner(p, 4, 1) == r;
    cr_assert_eq(count, want[r]);
  }
}

Test(plan_spec, section3_replication_set_p2_n2) {
  /* With P = 2, N = 2 a fresh prefill of q in {1,2,3,5,6,9} is replicated and q in
   * {4,7,8} is split. */
  const sc_plan_config c = cfg_pn(2, 2);
  sc_plan plan;
  sc_plan_init(&plan);
  for (int q = 1; q <= 9; q++) {
    const sc_batch_req r = {.scheduled = q, .prefill = true};
    cr_assert_eq(sc_plan_build(&plan, &c, &r, 1, NULL), 0);
    const bool split = plan.reqs[0].flags & SC_REQ_SPLIT;
    const bool want_split = q == 4 || q == 7 || q == 8;
    cr_assert_eq(split, want_split, "q = %d", q);
  }
  /* Without DCP nothing forces replication: every prefill of P = 2 is split. */
  const sc_plan_config c1 = cfg_pn(2, 1);
  for (int q = 1; q <= 9; q++) {
    const sc_batch_req r = {.scheduled = q, .prefill = true};
    cr_assert_eq(sc_plan_build(&plan, &c1, &r, 1, NULL), 0);
    cr_assert(plan.reqs[0].flags & SC_REQ_SPLIT, "q = %d", q);
  }
  sc_plan_free(&plan);
}

Test(plan_spec, decodes_are_replicated_and_first) {
  const sc_plan_config c = cfg_pn(2, 2);
  const sc_batch_req reqs[] = {{.computed = 0, .scheduled = 8, .prefill = true},
                               {.computed = 30, .scheduled = 1, .prefill = false}};
  sc_plan plan;
  sc_plan_init(&plan);
  cr_assert_eq(sc_plan_build(&plan, &c, reqs, 2, NULL), 0);
  cr_assert_eq(plan.num_decode_tokens, 1);
  cr_assert_eq(plan.order[0], 1);
  cr_assert_eq(plan.order[1], 0);
  for (int r = 0; r < 2; r++) {
    sc_plan_row rows[2];
    cr_assert_eq(sc_plan_req_rows(&plan, 1, r, rows), 1);
    cr_assert(!rows[0].split);
  }
  sc_plan_free(&plan);
}

Test(plan_spec, json_contract_keys_and_values) {
  sc_plan plan;
  build_example(&plan);
  sc_jsonw w;
  sc_jsonw_init(&w);
  cr_assert_eq(sc_plan_render_json(&plan, &w), 0);
  json_error_t err;
  json_t *root = json_loads(sc_jsonw_str(&w), 0, &err);
  cr_assert_not_null(root, "%s", err.text);
  const char *keys[] = {"ranks",        "t_pad",   "num_decode_tokens", "padded_gather_idx",
                        "hidden_restore_idx", "kv_write_mask", "extents",
                        "dcp_local_seq_lens", "chunks", "collectives", "fingerprint"};
  cr_assert_eq(json_object_size(root), sizeof keys / sizeof keys[0]);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    cr_assert_not_null(json_object_get(root, keys[i]), "missing %s", keys[i]);
  cr_assert_eq(json_integer_value(json_object_get(root, "t_pad")), 10);
  json_t *ranks = json_object_get(root, "ranks");
  cr_assert_eq(json_array_size(ranks), 2);
  json_t *row = json_array_get(json_object_get(json_array_get(ranks, 0), "rows"), 1);
  cr_assert_eq(json_integer_value(json_object_get(row, "offset")), 9);
  cr_assert_eq(json_integer_value(json_object_get(row, "len")), 2);
  cr_assert(json_is_true(json_object_get(row, "split")));
  json_t *lens = json_object_get(root, "dcp_local_seq_lens");
  cr_assert_eq(json_integer_value(json_array_get(json_array_get(lens, 1), 0)), 7);
  json_t *chunk = json_array_get(json_object_get(root, "chunks"), 0);
  cr_assert_eq(json_integer_value(json_object_get(chunk, "shard_rows_total")), 13);
  cr_assert_eq(json_integer_value(json_array_get(json_object_get(chunk, "deinterleave_idx"), 1)),
               13);
  json_t *coll = json_array_get(json_object_get(root, "collectives"), 2);
  cr_assert_eq(json_integer_value(json_object_get(coll, "layer")), -1);
  cr_assert_str_eq(json_string_value(json_object_get(coll, "purpose")), "hidden_restore");
  char hex[17];
  sc_plan_fingerprint_hex(plan.fingerprint, hex);
  cr_assert_str_eq(json_string_value(json_object_get(root, "fingerprint")), hex);
  json_decref(root);
  sc_jsonw_free(&w);
  sc_plan_free(&plan);
}

Test(plan_spec, input_parse_defaults_and_errors) {
  sc_plan_config cfg;
  sc_batch_req *reqs = NULL;
  int32_t n = 0;
  sc_diag d = {0};
  const char *ok = "{\"config\": {\"pcp\": 2, \"dcp\": 2}, \"requests\": ["
                   "{\"computed\": 3, \"scheduled\": 1, \"prefill\": false},"
                   "{\"scheduled\": 5, \"prefill\": true, \"id\": 77}]}";
  sc_model_plan_config_default(&cfg);
  cr_assert_eq(sc_plan_input_parse(ok, strlen(ok), &cfg, &reqs, &n, &d), 0, "%s", d.msg);
  cr_assert_eq(n, 2);
  cr_assert_eq(cfg.tp, 1);
  cr_assert_eq(cfg.block_size, 64);
  cr_assert_eq(cfg.layers, 1);
  cr_assert_eq(reqs[0].computed, 3);
  cr_assert_eq(reqs[1].computed, 0);
  cr_assert_eq(reqs[1].id, 77);
  free(reqs);

  const struct {
    const char *text, *needle;
  } bad[] = {
      {"{", "invalid JSON"},
      {"[]", "must be an object"},
      {"{\"requests\": []}", "empty batch"},
      {"{\"config\": {\"pcp\": 3, \"dcp\": 2}, \"requests\": [{\"scheduled\": 1, "
       "\"prefill\": true}]}",
       "dcp must be 1 or equal to pcp"},
      {"{\"config\": {\"pcq\": 2}, \"requests\": []}", "unknown key \"pcq\""},
      {"{\"requests\": [{\"scheduled\": -1, \"prefill\": true}]}", "out of range"},
      {"{\"requests\": [{\"scheduled\": 1}]}", "\"prefill\" is missing"},
      {"{\"requests\": [{\"scheduled\": 1, \"prefill\": 1}]}", "true or false"},
      {"{\"config\": {\"layers\": \"two\"}, \"requests\": []}", "must be an integer"},
      {"{\"requests\": [], \"extra\": 1}", "unknown top-level key"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&d, 0, sizeof d);
    sc_model_plan_config_default(&cfg);
    cr_assert_neq(sc_plan_input_parse(bad[i].text, strlen(bad[i].text), &cfg, &reqs, &n, &d),
                  0, "accepted: %s", bad[i].text);
    cr_assert_not_null(strstr(d.msg, bad[i].needle), "'%s' -> '%s'", bad[i].text, d.msg);
    cr_assert_null(reqs);
  }
}

Test(plan_spec, empty_and_invalid_batches_are_rejected) {
  const sc_plan_config c = cfg_pn(2, 2);
  sc_plan plan;
  sc_plan_init(&plan);
  sc_diag d = {0};
  cr_assert_eq(sc_plan_build(&plan, &c, NULL, 0, &d), SC_EINVAL);
  const sc_batch_req zero = {.computed = 5, .scheduled = 0, .prefill = true};
  cr_assert_eq(sc_plan_build(&plan, &c, &zero, 1, &d), SC_EINVAL);
  cr_assert_not_null(strstr(d.msg, "empty batch"));
  const sc_batch_req none = {.computed = 0, .scheduled = 0, .prefill = false};
  cr_assert_eq(sc_plan_build(&plan, &c, &none, 1, &d), SC_EINVAL);
  cr_assert_not_null(strstr(d.msg, "extent"));
  const sc_batch_req neg = {.computed = -1, .scheduled = 2, .prefill = true};
  cr_assert_eq(sc_plan_build(&plan, &c, &neg, 1, &d), SC_EINVAL);
  cr_assert_eq(plan.num_reqs, 0);
  sc_plan_free(&plan);
}

Test(plan_spec, oversize_request_is_rejected_with_the_numbers) {
  sc_plan_config c = cfg_pn(2, 2);
  c.max_gathered_rows = 20; /* 10 rows per DCP rank */
  cr_assert_eq(sc_plan_config_validate(&c, NULL), 0);
  sc_plan plan;
  sc_plan_init(&plan);
  sc_diag d = {0};
  const sc_batch_req fits = {.computed = 12, .scheduled = 8, .prefill = true}; /* S = 10 */
  cr_assert_eq(sc_plan_build(&plan, &c, &fits, 1, &d), 0, "%s", d.msg);
  const sc_batch_req big = {.computed = 13, .scheduled = 8, .prefill = true}; /* S = 11 */
  cr_assert_eq(sc_plan_build(&plan, &c, &big, 1, &d), SC_ERANGE);
  cr_assert_not_null(strstr(d.msg, "request 0 needs 11 rows per rank; the workspace holds 10"),
                     "%s", d.msg);
  sc_plan_free(&plan);
}
