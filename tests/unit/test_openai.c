/* The HTTP front's pure parts: the OpenAI completions request as read and refused
 * (actors/gateway/openai.c), its JSON, and the Prometheus exposition (metrics.c). The
 * front itself runs against real clusters in tests/cli/http_api.py. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "actors/gateway/metrics.h"
#include "actors/gateway/openai.h"
#include "base/error.h"
#include "model/step_prof.h"
#include "plan/coll_types.h"

static int parse(const char *body, sc_openai_request *r, sc_openai_error *e) {
  return sc_openai_parse_completion(body, strlen(body), r, e);
}

Test(openai, defaults_and_prompt_forms) {
  sc_openai_request r;
  sc_openai_error e;
  cr_assert_eq(parse("{\"prompt\": [5, 6, 7]}", &r, &e), 0, "%s", e.message);
  cr_expect_eq(r.num_ids, 3);
  cr_expect_eq(r.ids[2], 7);
  cr_expect_null(r.text);
  cr_expect_eq(r.max_tokens, 16, "the API's default");
  cr_expect_float_eq(r.temperature, 1.0f, 1e-6, "the API's default");
  cr_expect_not(r.stream);
  cr_expect_not(r.has_seed);
  cr_expect_not(r.ignore_eos);
  sc_openai_request_free(&r);
  cr_assert_eq(parse("{\"prompt\": [5], \"ignore_eos\": true}", &r, &e), 0, "%s", e.message);
  cr_expect(r.ignore_eos);
  sc_openai_request_free(&r);

  cr_assert_eq(parse("{\"prompt\": \"h\\u00e9llo\", \"max_tokens\": 3, \"temperature\": 0,"
                     " \"seed\": -1, \"stream\": true, \"stream_options\": {\"include_usage\":"
                     " true}, \"stop\": [\"a\", \"bc\"], \"model\": \"m\", \"user\": \"u\","
                     " \"n\": 1, \"echo\": false, \"logprobs\": null}", &r, &e), 0,
            "%s", e.message);
  cr_expect_str_eq(r.text, "h\xc3\xa9llo");
  cr_expect_eq(r.text_len, 6);
  cr_expect_eq(r.max_tokens, 3);
  cr_expect_float_eq(r.temperature, 0.0f, 1e-9);
  cr_expect(r.has_seed && r.seed == UINT64_MAX);
  cr_expect(r.stream && r.include_usage);
  cr_expect_eq(r.num_stop, 2);
  cr_expect_str_eq(r.stop[1], "bc");
  cr_expect_str_eq(r.model, "m");
  sc_openai_request_free(&r);

  /* a batch of one prompt is that prompt */
  cr_assert_eq(parse("{\"prompt\": [[1, 2]], \"stop\": \"x\"}", &r, &e), 0, "%s", e.message);
  cr_expect_eq(r.num_ids, 2);
  cr_expect_eq(r.num_stop, 1);
  sc_openai_request_free(&r);
  cr_assert_eq(parse("{\"prompt\": [\"one\"]}", &r, &e), 0, "%s", e.message);
  cr_expect_str_eq(r.text, "one");
  sc_openai_request_free(&r);
}

Test(openai, refusals_name_the_field) {
  static const struct {
    const char *body;
    int status;
    const char *param;
  } cases[] = {
      {"", 400, ""},
      {"{", 400, ""},
      {"{\"prompt\": [1], \"prompt\": [2]}", 400, ""}, /* duplicate keys */
      {"[]", 400, ""},
      {"{}", 400, "prompt"},
      {"{\"prompt\": null}", 400, "prompt"},
      {"{\"prompt\": \"\"}", 400, "prompt"},
      {"{\"prompt\": \"a\\u0000b\"}", 400, ""}, /* NUL: refused by the JSON reader */
      {"{\"prompt\": [1, 2147483648]}", 400, "prompt"},
      {"{\"prompt\": [1, true]}", 400, "prompt"},
      {"{\"prompt\": [\"a\", \"b\"]}", 400, "prompt"},
      {"{\"prompt\": {\"a\": 1}}", 400, "prompt"},
      {"{\"prompt\": [1], \"max_tokens\": -1}", 400, "max_tokens"},
      {"{\"prompt\": [1], \"max_tokens\": 1.5}", 400, "max_tokens"},
      {"{\"prompt\": [1], \"temperature\": -0.1}", 400, "temperature"},
      {"{\"prompt\": [1], \"temperature\": 2.5}", 400, "temperature"},
      {"{\"prompt\": [1], \"seed\": 1.5}", 400, "seed"},
      {"{\"prompt\": [1], \"stream\": 1}", 400, "stream"},
      {"{\"prompt\": [1], \"stream_options\": {\"include_usage\": true}}", 400, "stream_options"},
      {"{\"prompt\": [1], \"n\": 2}", 400, "n"},
      {"{\"prompt\": [1], \"best_of\": 3}", 400, "best_of"},
      {"{\"prompt\": [1], \"top_p\": 0.5}", 400, "top_p"},
      {"{\"prompt\": [1], \"echo\": true}", 400, "echo"},
      {"{\"prompt\": [1], \"presence_penalty\": 1}", 400, "presence_penalty"},
      {"{\"prompt\": [1], \"logprobs\": 1}", 400, "logprobs"},
      {"{\"prompt\": [1], \"logit_bias\": {\"5\": 1}}", 400, "logit_bias"},
      {"{\"prompt\": [1], \"suffix\": \"x\"}", 400, "suffix"},
      {"{\"prompt\": [1], \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", 400, "stop"},
      {"{\"prompt\": [1], \"stop\": [\"\"]}", 400, "stop"},
      {"{\"prompt\": [1], \"stop\": 5}", 400, "stop"},
      {"{\"prompt\": [1], \"model\": 5}", 400, "model"},
      {"{\"prompt\": [1], \"ignore_eos\": 1}", 400, "ignore_eos"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sc_openai_request r;
    sc_openai_error e;
    const int rc = parse(cases[i].body, &r, &e);
    cr_expect_neq(rc, 0, "%s was accepted", cases[i].body);
    cr_expect_eq(e.status, cases[i].status, "%s: status %d", cases[i].body, e.status);
    cr_expect_str_eq(e.param, cases[i].param, "%s: param %s", cases[i].body, e.param);
    cr_expect_neq(e.message[0], '\0', "%s: no message", cases[i].body);
    sc_openai_request_free(&r);
  }
}

Test(openai, statuses_of_cluster_errors) {
  cr_expect_eq(sc_openai_status_of(SC_EINVAL), 400);
  cr_expect_eq(sc_openai_status_of(SC_ETOOBIG), 413);
  cr_expect_eq(sc_openai_status_of(SC_EFULL), 429);
  cr_expect_eq(sc_openai_status_of(SC_ECLOSED), 503);
  cr_expect_eq(sc_openai_status_of(SC_EABORTED), 500);
}

/* The JSON the API's clients read: parsed back, field by field. */
Test(openai, response_and_chunk_json) {
  const sc_openai_head h = {.id = "cmpl-1", .created = 42, .model = "m"};
  const int32_t ids[] = {7, 8};
  const sc_openai_choice c = {.text = "a\"b\n", .text_len = 4, .ids = ids, .num_ids = 2,
                              .finish_reason = "length"};
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_openai_completion_json(&w, &h, &c, 3, 2);
  json_error_t err;
  json_t *j = json_loads(sc_jsonw_str(&w), 0, &err);
  cr_assert_not_null(j, "%s: %s", sc_jsonw_str(&w), err.text);
  cr_expect_str_eq(json_string_value(json_object_get(j, "object")), "text_completion");
  json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
  cr_expect_str_eq(json_string_value(json_object_get(ch, "text")), "a\"b\n");
  cr_expect_str_eq(json_string_value(json_object_get(ch, "finish_reason")), "length");
  cr_expect_eq(json_integer_value(json_array_get(json_object_get(ch, "token_ids"), 1)), 8);
  cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")), 5);
  json_decref(j);

  sc_jsonw_reset(&w);
  const sc_openai_choice mid = {.text = "x", .text_len = 1, .ids = ids, .num_ids = 1};
  sc_openai_chunk_json(&w, &h, &mid, 0, 0);
  j = json_loads(sc_jsonw_str(&w), 0, &err);
  cr_assert_not_null(j);
  ch = json_array_get(json_object_get(j, "choices"), 0);
  cr_expect(json_is_null(json_object_get(ch, "finish_reason")));
  cr_expect_null(json_object_get(j, "usage"), "usage only in the last chunk");
  json_decref(j);

  sc_jsonw_reset(&w);
  sc_openai_error_json(&w, 429, "", "full");
  j = json_loads(sc_jsonw_str(&w), 0, &err);
  cr_assert_not_null(j);
  json_t *e = json_object_get(j, "error");
  cr_expect_str_eq(json_string_value(json_object_get(e, "type")), "rate_limit_error");
  cr_expect(json_is_null(json_object_get(e, "param")));
  cr_expect_eq(json_integer_value(json_object_get(e, "code")), 429);
  json_decref(j);
  sc_jsonw_free(&w);
}

Test(openai, health_follows_the_scheduler) {
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_msg_stats_report r = {.ready = true};
  cr_expect_eq(sc_openai_health_json(&w, &r), 200);
  cr_expect_str_eq(sc_jsonw_str(&w), "{\"status\":\"ok\"}");
  r.ready = false; /* a node has not joined yet */
  sc_jsonw_reset(&w);
  cr_expect_eq(sc_openai_health_json(&w, &r), 503);
  cr_expect_str_eq(sc_jsonw_str(&w), "{\"status\":\"starting\"}");
  r = (sc_msg_stats_report){.ready = true, .stopping = true};
  sc_jsonw_reset(&w);
  cr_expect_eq(sc_openai_health_json(&w, &r), 503);
  cr_expect_str_eq(sc_jsonw_str(&w), "{\"status\":\"stopping\"}");
  sc_jsonw_reset(&w);
  cr_expect_eq(sc_openai_health_json(&w, NULL), 503, "no answer from the scheduler");
  sc_jsonw_free(&w);
}

/* The exposition: cumulative buckets, sums and counts, labels; every line a comment or a
 * sample with a value. (tests/cli/http_api.py parses a live one with prometheus_client.) */
Test(metrics, exposition) {
  sc_gw_counters g = {0};
  g.requests[SC_GW_LENGTH] = 3;
  g.requests[SC_GW_CANCELED] = 1;
  g.generation_tokens = 12;
  sc_histo_add(&g.ttft, 0.0005);
  sc_histo_add(&g.ttft, 0.2);
  sc_histo_add(&g.ttft, 1000);
  uint64_t buckets[SC_HIST_N + 1] = {0}, colls[SC_PURPOSE_COUNT] = {0},
           bytes[SC_PURPOSE_COUNT] = {0};
  buckets[2] = 4;
  colls[SC_PURPOSE_ATTN_OUT] = 6;
  bytes[SC_PURPOSE_ATTN_OUT] = 600;
  sc_msg_stats_report r = {.ready = true, .waiting = 2, .running = 1, .blocks_total = 10,
                           .blocks_free = 7, .steps = 4, .step_seconds_sum = 0.01};
  r.step_buckets.v = buckets;
  r.step_buckets.n = SC_HIST_N + 1;
  r.purpose_colls.v = colls;
  r.purpose_colls.n = SC_PURPOSE_COUNT;
  r.purpose_bytes.v = bytes;
  r.purpose_bytes.n = SC_PURPOSE_COUNT;
  uint64_t stages[SC_STAGE_COUNT] = {0};
  stages[SC_STAGE_INDEXER] = 1500000000;
  r.stage_ns.v = stages;
  r.stage_ns.n = SC_STAGE_COUNT;
  uint64_t device[SC_DEVICE_COUNT + 1] = {0};
  device[SC_DEVICE_BUSY_NS] = 900000000;
  device[SC_DEVICE_SPAN_NS] = 1200000000;
  device[SC_DEVICE_OPS] = 5000;
  device[SC_DEVICE_IDLE_BEFORE_NS] = 250000000;
  device[SC_DEVICE_COUNT] = 4;
  r.device_ns.v = device;
  r.device_ns.n = SC_DEVICE_COUNT + 1;
  sc_buf b;
  sc_buf_init(&b);
  cr_assert_eq(sc_gw_metrics_render(&b, &g, &r), 0);
  sc_buf_append(&b, "", 1);
  const char *t = (const char *)b.data;
  cr_expect(strstr(t, "sparsecp_requests_total{outcome=\"length\"} 3\n"), "%s", t);
  cr_expect(strstr(t, "sparsecp_generation_tokens_total 12\n"));
  cr_expect(strstr(t, "sparsecp_time_to_first_token_seconds_bucket{le=\"0.001\"} 1\n"));
  cr_expect(strstr(t, "sparsecp_time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n"));
  cr_expect(strstr(t, "sparsecp_time_to_first_token_seconds_bucket{le=\"120\"} 2\n"));
  cr_expect(strstr(t, "sparsecp_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n"));
  cr_expect(strstr(t, "sparsecp_time_to_first_token_seconds_count 3\n"));
  cr_expect(strstr(t, "sparsecp_kv_blocks_in_use 3\n"));
  cr_expect(strstr(t, "sparsecp_step_seconds_bucket{le=\"0.005\"} 4\n"));
  cr_expect(strstr(t, "sparsecp_step_seconds_count 4\n"));
  char line[160];
  snprintf(line, sizeof line, "sparsecp_planned_collective_bytes_total{purpose=\"%s\"} 600\n",
           sc_coll_purpose_name(SC_PURPOSE_ATTN_OUT));
  cr_expect(strstr(t, line), "%s missing", line);
  cr_expect(strstr(t, "sparsecp_step_stage_seconds_total{stage=\"indexer\"} 1.500000000\n"), "%s", t);
  cr_expect(strstr(t, "sparsecp_step_stage_seconds_total{stage=\"dense\"} 0.000000000\n"), "%s", t);
  cr_expect(strstr(t, "sparsecp_step_device_busy_seconds_total 0.900000000\n"), "%s", t);
  cr_expect(strstr(t, "sparsecp_step_device_span_seconds_total 1.200000000\n"), "%s", t);
  cr_expect(strstr(t, "sparsecp_step_device_ops_total 5000\n"), "%s", t);
  cr_expect(strstr(t, "sparsecp_step_device_idle_before_seconds_total 0.250000000\n"), "%s", t);
  cr_expect(strstr(t, "sparsecp_step_device_steps_total 4\n"), "%s", t);
  /* every line: "# HELP/TYPE ..." or "name[{labels}] value" */
  for (const char *p = t; *p;) {
    const char *nl = strchr(p, '\n');
    cr_assert_not_null(nl, "unterminated line");
    if (*p != '#') {
      const char *sp = memchr(p, ' ', (size_t)(nl - p));
      cr_assert_not_null(sp, "a sample without a value: %.*s", (int)(nl - p), p);
      char *end = NULL;
      strtod(sp + 1, &end);
      cr_expect_eq(end, nl, "bad value: %.*s", (int)(nl - p), p);
    }
    p = nl + 1;
  }
  sc_buf_free(&b);

  /* without the scheduler's report: the gateway's part only */
  sc_buf_init(&b);
  cr_assert_eq(sc_gw_metrics_render(&b, &g, NULL), 0);
  sc_buf_append(&b, "", 1);
  cr_expect_null(strstr((const char *)b.data, "sparsecp_steps_total"));
  sc_buf_free(&b);
}
