/* Unit tests of the base library: error codes, diagnostics, the JSON writer, the log, the
 * hash index. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/index.h"
#include "base/jsonw.h"
#include "base/log.h"
#include "tests/common/sc_test_rng.h"

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

/* ---- sc_index against a brute-force search, under random churn ---- */

enum { IDX_N = 600 };
typedef struct idx_keys {
  uint64_t key[IDX_N];
  bool in[IDX_N];
  uint64_t homes; /* hash = key % homes: few distinct hashes make long, wrapping chains */
} idx_keys;

static uint64_t idx_hash(const void *ctx, int32_t pos) {
  const idx_keys *k = ctx;
  return k->key[pos] % k->homes;
}
static bool idx_eq(const void *ctx, int32_t pos, const void *key) {
  return ((const idx_keys *)ctx)->key[pos] == *(const uint64_t *)key;
}

/* n keys, each added or removed at random 20 000 times; after many steps every key must
 * be found exactly when it is in. */
static void index_churn(int32_t n, uint64_t homes, uint64_t seed) {
  idx_keys k = {.homes = homes};
  sc_index x;
  cr_assert_eq(sc_index_init(&x, 4), 0); /* starts small: grows on the way */
  for (int32_t i = 0; i < n; i++) k.key[i] = (uint64_t)i * 1000003u; /* distinct */
  for (int step = 0; step < 20000; step++) {
    const int32_t pos = (int32_t)sc_test_rng_int(&seed, 0, n - 1);
    if (k.in[pos]) {
      sc_index_del(&x, idx_hash(&k, pos), pos, idx_hash, &k);
      k.in[pos] = false;
    } else {
      cr_assert_eq(sc_index_put(&x, idx_hash(&k, pos), pos, idx_hash, &k), 0);
      k.in[pos] = true;
    }
    if (n > 64 && step % 97 != 0 && step < 19900) continue;
    for (int32_t q = 0; q < n; q++) {
      const int32_t got = sc_index_find(&x, idx_hash(&k, q), idx_eq, &k, &k.key[q]);
      cr_assert_eq(got, k.in[q] ? q : -1, "n %d homes %llu step %d key %d: got %d", n,
                   (unsigned long long)homes, step, q, got);
    }
  }
  size_t in = 0;
  for (int32_t q = 0; q < n; q++) in += k.in[q];
  cr_assert_eq(x.used, in);
  cr_assert_leq(2 * x.used, x.mask + 1, "more than half full");
  sc_index_free(&x);
}

Test(index, finds_what_brute_force_finds_under_churn) {
  index_churn(IDX_N, UINT64_MAX, 7); /* every key its own hash */
  /* 24 keys in a 64-slot table over a few hashes: long chains, some wrapping past the
   * table's end, where deletion's shift has its special case */
  for (uint64_t homes = 1; homes <= 24; homes++) index_churn(24, homes, 11 + homes);
}
