/* Unit tests of the base library: error codes, diagnostics, the JSON writer, the log. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "actors/runtime/sc_error.h"
#include "actors/runtime/sc_jsonw.h"
#include "actors/runtime/sc_log.h"

Test(error, every_code_has_a_distinct_name_and_text) {
  const int codes[] = {
#define CODE(name, val, desc) SC_##name,
      SC_ERRNO_MAP(CODE)
#undef CODE
  };
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    cr_assert(codes[i] < 0);
    cr_assert_str_neq(sc_strerror(codes[i]), "unknown error");
    for (size_t j = 0; j < i; j++) cr_assert_str_neq(sc_errname(codes[i]), sc_errname(codes[j]));
  }
  cr_assert_str_eq(sc_strerror(0), "success");
  cr_assert_str_eq(sc_strerror(-9999), "unknown error");
}

Test(error, fail_formats_and_returns_code) {
  sc_diag d = {0};
  cr_assert_eq(sc_fail(&d, SC_EINVAL, "pcp = %d", 3), SC_EINVAL);
  cr_assert_eq(d.code, SC_EINVAL);
  cr_assert_str_eq(sc_diag_message(&d), "pcp = 3");
  cr_assert_eq(sc_fail(NULL, SC_ERANGE, "ignored"), SC_ERANGE);
  sc_diag empty = {.code = SC_ETIMEDOUT};
  cr_assert_str_eq(sc_diag_message(&empty), "timed out");
}

Test(jsonw, nested_values_get_commas_and_escapes) {
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_jsonw_obj_begin(&w);
  sc_jsonw_kv_int(&w, "a", -5);
  sc_jsonw_key(&w, "b");
  sc_jsonw_arr_begin(&w);
  sc_jsonw_bool(&w, true);
  sc_jsonw_null(&w);
  sc_jsonw_str_val(&w, "q\"\\\n\x01");
  sc_jsonw_arr_end(&w);
  sc_jsonw_kv_double(&w, "c", 1.5);
  sc_jsonw_kv_double(&w, "nan", 0.0 / 0.0);
  const int32_t v[] = {1, -2, 3};
  sc_jsonw_key(&w, "v");
  sc_jsonw_int32_array(&w, v, 3);
  sc_jsonw_key(&w, "e");
  sc_jsonw_int32_array(&w, v, 0);
  sc_jsonw_obj_end(&w);
  cr_assert_eq(sc_jsonw_status(&w), 0);
  cr_assert_str_eq(sc_jsonw_str(&w),
                   "{\"a\":-5,\"b\":[true,null,\"q\\\"\\\\\\n\\u0001\"],\"c\":1.5,"
                   "\"nan\":null,\"v\":[1,-2,3],\"e\":[]}");
  sc_jsonw_reset(&w);
  sc_jsonw_int(&w, 7);
  cr_assert_str_eq(sc_jsonw_str(&w), "7");
  sc_jsonw_free(&w);
}

static int g_calls;
static char g_last[128];
static void capture(void *ud, sc_log_level level, const char *component, const char *msg) {
  (void)ud;
  g_calls++;
  snprintf(g_last, sizeof g_last, "%d %s %s", (int)level, component, msg);
}

Test(log, level_filters_and_sink_receives) {
  g_calls = 0;
  sc_log_set_sink(capture, NULL);
  sc_log_set_level(SC_LOG_INFO);
  SC_DEBUG("t", "hidden %d", 1);
  cr_assert_eq(g_calls, 0);
  SC_INFO("t", "shown %d", 2);
  cr_assert_eq(g_calls, 1);
  cr_assert_str_eq(g_last, "2 t shown 2");
  cr_assert_eq(sc_log_level_parse("trace"), SC_LOG_TRACE);
  cr_assert_eq(sc_log_level_parse("loud"), -1);
  sc_log_set_sink(NULL, NULL);
  SC_ERROR("t", "dropped");
  cr_assert_eq(g_calls, 1);
}
