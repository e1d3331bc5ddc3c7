/* Request files of `sparsecp run`: the format, its errors, and the shipped example. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/requests_file.h"

Test(requests_file, parses_every_form) {
  const char *text = "# comment\n\n"
                     "{\"prompt\": [1, 2, 3], \"max_tokens\": 4}\n"
                     "{\"prompt_len\": 5, \"max_tokens\": 2, \"temperature\": 0.5, "
                     "\"seed\": 9, \"arrive_ms\": 30, \"ignore_eos\": true}\n";
  sc_requests r;
  sc_diag d = {0};
  cr_assert_eq(sc_requests_parse(text, 100, &r, &d), 0, "%s", d.msg);
  cr_assert_eq(r.n, 2);
  cr_assert_eq(r.v[0].prompt_len, 3);
  cr_assert_eq(r.v[0].prompt[2], 3);
  cr_assert_eq(r.v[1].prompt_len, 5);
  cr_assert_eq(r.v[1].seed, 9);
  cr_assert_eq(r.v[1].arrive_ms, 30);
  cr_assert_float_eq(r.v[1].temperature, 0.5f, 1e-6);
  cr_assert(r.v[1].ignore_eos && !r.v[0].ignore_eos);
  for (int i = 0; i < 5; i++) cr_assert(r.v[1].prompt[i] >= 0 && r.v[1].prompt[i] < 100);
  sc_requests_free(&r);
}

Test(requests_file, errors_name_the_line) {
  const struct {
    const char *text, *needle;
  } bad[] = {
      {"{\"prompt_len\": 3}\n", "line 1: max_tokens is missing"},
      {"\n{\"prompt_len\": 3, \"max_tokens\": 1, \"colour\": 1}", "line 2: unknown key"},
      {"{\"prompt\": [1, 200], \"max_tokens\": 1}", "prompt[1] is not a token id below 100"},
      {"{\"prompt\": [], \"max_tokens\": 1}", "non-empty"},
      {"{\"prompt\": [1], \"prompt_len\": 2, \"max_tokens\": 1}", "exactly one"},
      {"{\"prompt_len\": 3, \"max_tokens\": 0}", "max_tokens must be in [1, "},
      {"{\"prompt_len\": 3, \"max_tokens\": 999999999}", "max_tokens must be in [1, "},
      {"{\"prompt_len\": 3, \"max_tokens\": 1, \"max_tokens\": 2}", "line 1: invalid JSON"},
      {"{\"prompt_len\": 3, \"max_tokens\": 1, \"temperature\": 1e300}", "finite"},
      {"{\"prompt_len\": 3, \"max_tokens\": 1, \"ignore_eos\": 1}", "ignore_eos must be true"},
      {"[{\"prompt_len\": 3, \"max_tokens\": 1}]", "line 1: not a JSON object"},
      {"{not json}", "line 1: invalid JSON"},
      {"# only a comment\n", "holds no request"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sc_requests r;
    sc_diag d = {0};
    cr_assert_neq(sc_requests_parse(bad[i].text, 100, &r, &d), 0, "%s", bad[i].text);
    cr_assert_not_null(strstr(d.msg, bad[i].needle), "'%s': %s", bad[i].text, d.msg);
    cr_assert_eq(r.n, 0);
  }
}

Test(requests_file, shipped_example_and_random_streams) {
  FILE *f = fopen(SC_SOURCE_DIR "/examples/requests.jsonl", "rb");
  cr_assert_not_null(f);
  static char text[1 << 16];
  const size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  sc_requests r;
  sc_diag d = {0};
  cr_assert_eq(sc_requests_parse(text, 32768, &r, &d), 0, "%s", d.msg);
  int shorts = 0, longs = 0;
  for (int32_t i = 0; i < r.n; i++) {
    shorts += r.v[i].prompt_len <= 5;
    longs += r.v[i].prompt_len >= 256;
  }
  cr_assert_geq(shorts, 3);
  cr_assert_geq(longs, 2);
  sc_requests_free(&r);

  sc_requests a, b;
  cr_assert_eq(sc_requests_random(50, 64, 8, 1000, 3, &a), 0);
  cr_assert_eq(sc_requests_random(50, 64, 8, 1000, 3, &b), 0);
  for (int32_t i = 0; i < 50; i++) {
    cr_assert(a.v[i].prompt_len >= 1 && a.v[i].prompt_len <= 64);
    cr_assert(a.v[i].max_tokens >= 1 && a.v[i].max_tokens <= 8);
    cr_assert_eq(a.v[i].prompt_len, b.v[i].prompt_len); /* same seed, same stream */
    cr_assert_arr_eq(a.v[i].prompt, b.v[i].prompt, sizeof(int32_t) * (size_t)a.v[i].prompt_len);
  }
  sc_requests_free(&a);
  sc_requests_free(&b);
}

/* A line that is not an object (a file written as one JSON array) used to leave its slot
 * uninitialised, and the error path freed that slot's garbage prompt pointer. Dirty the
 * heap first so that the slot's memory is not zero by luck. */
Test(requests_file, not_an_object_after_a_dirty_heap) {
  for (int k = 0; k < 4; k++) {
    void *p = malloc(16 * sizeof(sc_run_request));
    cr_assert_not_null(p);
    memset(p, 0xab, 16 * sizeof(sc_run_request));
    free(p);
  }
  sc_requests r;
  sc_diag d = {0};
  cr_assert_eq(sc_requests_parse("[1]\n", 100, &r, &d), SC_EINVAL);
  cr_assert_not_null(strstr(d.msg, "not a JSON object"), "%s", d.msg);
  cr_assert_eq(r.n, 0);
}
