/* Unit tests of the base library: error codes, diagnostics, the JSON writer, the log, the
 * hash index, reading a whole file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "base/curve_key.h"
#include "base/error.h"
#include "base/file_read.h"
#include "base/grow.h"
#include "base/index.h"
#include "base/inet_addr.h"
#include "base/jsonw.h"
#include "base/log.h"
#include "base/zap.h"
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

Test(grow, keeps_contents_grows_only_and_refuses_an_overflowing_count) {
  void *buf = NULL;
  size_t cap = 0;
  cr_assert_eq(sc_grow(&buf, &cap, 16), 0);
  cr_assert_eq(cap, 16);
  memcpy(buf, "0123456789abcdef", 16);
  cr_assert_eq(sc_grow(&buf, &cap, 8), 0, "smaller: nothing to do");
  cr_assert_eq(cap, 16);
  cr_assert_eq(sc_grow(&buf, &cap, 4096), 0);
  cr_assert_eq(cap, 4096);
  cr_assert(memcmp(buf, "0123456789abcdef", 16) == 0, "contents kept");
  size_t n = 4096 / sizeof(int64_t);
  cr_assert_eq(sc_grow_n(&buf, &n, 1000, sizeof(int64_t)), 0);
  cr_assert_eq(n, 1000);
  cr_assert(memcmp(buf, "0123456789abcdef", 16) == 0, "contents kept");
  void *was = buf;
  cr_assert_eq(sc_grow_n(&buf, &n, SIZE_MAX / 4, 8), SC_ENOMEM, "n * sz overflows");
  cr_assert(buf == was && n == 1000, "left as it was");
  void *none = NULL;
  size_t c0 = 0;
  cr_assert_eq(sc_grow_n(&none, &c0, 0, 8), 0, "nothing asked, nothing to do");
  cr_assert_null(none);
  free(buf);
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

/* ---- ZeroMQ security helpers (base/zap.h, base/curve_key.h) ---- */

Test(zap, user_rank_accepts_one_spelling_per_rank) {
  cr_assert_eq(sc_zap_user_rank("0", 4), 0);
  cr_assert_eq(sc_zap_user_rank("3", 4), 3);
  cr_assert_eq(sc_zap_user_rank("4", 4), -1);
  cr_assert_eq(sc_zap_user_rank("01", 4), -1); /* "r01" passed as rank 1 once */
  cr_assert_eq(sc_zap_user_rank("-0", 4), -1);
  cr_assert_eq(sc_zap_user_rank("1x", 4), -1);
  cr_assert_eq(sc_zap_user_rank("", 4), -1);
  cr_assert_eq(sc_zap_user_rank(NULL, 4), -1);
  cr_assert_eq(sc_zap_user_rank("99999999999999999999", 256), -1);
  cr_assert_eq(sc_zap_user_rank("255", 256), 255);
}

Test(zap, routing_ids_name_a_rank_and_optionally_a_loop) {
  cr_assert_eq(sc_zap_routing_rank("n3", 2, 'n', 4, 0), 3);
  cr_assert_eq(sc_zap_routing_rank("n3.1", 4, 'n', 4, 64), 3);
  cr_assert_eq(sc_zap_routing_rank("n3.1", 4, 'n', 4, 0), -1); /* no suffix allowed */
  cr_assert_eq(sc_zap_routing_rank("n3.64", 5, 'n', 4, 64), -1);
  cr_assert_eq(sc_zap_routing_rank("n3.", 3, 'n', 4, 64), -1);
  cr_assert_eq(sc_zap_routing_rank("r01", 3, 'r', 4, 0), -1);
  cr_assert_eq(sc_zap_routing_rank("r1", 2, 'n', 4, 0), -1);
  cr_assert_eq(sc_zap_routing_rank("r1\0x", 4, 'r', 4, 0), -1);
  cr_assert_eq(sc_zap_routing_rank("r", 1, 'r', 4, 0), -1);
}

Test(zap, ipc_endpoints_need_a_private_folder) {
  sc_diag d = {0};
  char dir[] = "/tmp/sc-ipc-XXXXXX", ep[64];
  cr_assert_not_null(mkdtemp(dir)); /* mkdtemp makes it 0700 */
  snprintf(ep, sizeof ep, "ipc://%s/node", dir);
  cr_assert_eq(sc_ipc_check_private(ep, &d), 0, "%s", sc_diag_message(&d));
  cr_assert_eq(chmod(dir, 0750), 0);
  cr_assert_eq(sc_ipc_check_private(ep, &d), SC_EPERM);
  cr_assert(strstr(d.msg, "0750"), "%s", d.msg);
  cr_assert_eq(sc_ipc_check_private("ipc:///tmp/node", &d), SC_EPERM); /* sticky 1777 */
  cr_assert_eq(sc_ipc_check_private("ipc://@abstract", &d), SC_EPERM);
  cr_assert_eq(sc_ipc_check_private("ipc:///no/such/folder/x", &d), SC_EIO);
  cr_assert_eq(sc_ipc_check_private("tcp://127.0.0.1:1", &d), 0);
  rmdir(dir);
}

Test(curve_key, public_key_lists_are_read_strictly) {
  char dir[] = "/tmp/sc-keys-XXXXXX", path[64];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/list", dir);
  char pub[41], sec[41], pub2[41];
  cr_assert_eq(zmq_curve_keypair(pub, sec), 0);
  cr_assert_eq(zmq_curve_keypair(pub2, sec), 0);
  FILE *f = fopen(path, "w");
  fprintf(f, "# clients\n%s\n\n   %s  \n", pub, pub2);
  fclose(f);
  uint8_t (*keys)[32] = NULL;
  int32_t n = 0;
  sc_diag d = {0};
  cr_assert_eq(sc_curve_load_public_list(path, &keys, &n, &d), 0, "%s", sc_diag_message(&d));
  cr_assert_eq(n, 2);
  uint8_t want[32];
  zmq_z85_decode(want, pub2);
  cr_assert_eq(memcmp(keys[1], want, 32), 0);
  free(keys);
  f = fopen(path, "w"); /* a truncated paste is refused, naming its line */
  fprintf(f, "%s\n%.39s\n", pub, pub2);
  fclose(f);
  cr_assert_eq(sc_curve_load_public_list(path, &keys, &n, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "line 2"), "%s", d.msg);
  cr_assert_null(keys);
  cr_assert_eq(n, 0);
  unlink(path);
  /* a new key file: private, never replacing an existing one, and readable back */
  uint8_t pk[32], sk[32];
  char back[41];
  cr_assert_eq(sc_curve_new_key_file(path, pk, &d), 0, "%s", sc_diag_message(&d));
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0600);
  cr_assert_eq(sc_curve_new_key_file(path, pk, &d), SC_EIO);
  cr_assert_eq(sc_curve_load_secret(path, sk, back, &d), 0);
  zmq_z85_decode(want, back);
  cr_assert_eq(memcmp(want, pk, 32), 0);
  unlink(path);
  rmdir(dir);
}

Test(log, limiter_passes_one_event_per_interval_and_counts_the_rest) {
  sc_log_limit l = {0};
  unsigned long long held = 99;
  const unsigned long long t0 = 1000000000ull;
  cr_assert(sc_log_limit_pass(&l, t0, &held));
  cr_assert_eq(held, 0);
  for (int i = 0; i < 1000; i++) cr_assert_not(sc_log_limit_pass(&l, t0 + 1000 + i, &held));
  cr_assert_not(sc_log_limit_pass(&l, t0 + SC_LOG_LIMIT_INTERVAL_NS - 1, &held));
  cr_assert(sc_log_limit_pass(&l, t0 + SC_LOG_LIMIT_INTERVAL_NS, &held));
  cr_assert_eq(held, 1001);
}

/* HOST:PORT of plain sockets: numeric hosts only, IPv6 in brackets, written back alike. */
Test(inet_addr, parse_and_format) {
  struct sockaddr_storage ss;
  socklen_t len = 0;
  sc_diag d = {0};
  char out[64];
  cr_assert_eq(sc_inet_addr_parse("127.0.0.1:8000", &ss, &len, &d), 0, "%s", d.msg);
  cr_expect_eq(sc_inet_addr_port(&ss), 8000u);
  sc_inet_addr_format(&ss, out, sizeof out);
  cr_expect_str_eq(out, "127.0.0.1:8000");
  cr_assert_eq(sc_inet_addr_parse("[::1]:0", &ss, &len, &d), 0, "%s", d.msg);
  cr_expect_eq(ss.ss_family, AF_INET6);
  sc_inet_addr_format(&ss, out, sizeof out);
  cr_expect_str_eq(out, "[::1]:0");
  static const char *const bad[] = {"", "8000", ":8000", "127.0.0.1:", "127.0.0.1:x",
                                    "127.0.0.1:65536", "localhost:80", "[::1:0", "::1:80",
                                    "[]:80", "1.2.3.4.5:1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(sc_inet_addr_parse(bad[i], &ss, &len, &d), SC_EINVAL, "%s accepted", bad[i]);
}

/* A whole file up to a limit: exactly the limit fits, one byte more does not; the text
 * keeps its NUL bytes and gets one after it; a missing path is SC_ENOENT, a path that
 * exists but cannot be opened (a symbolic link to itself) or read (a folder) SC_EIO. */
Test(file_read, limits_and_errors) {
  char dir[] = "/tmp/sc_file_read_XXXXXX";
  cr_assert(mkdtemp(dir) != NULL);
  char path[128], loop[128];
  snprintf(path, sizeof path, "%s/f", dir);
  snprintf(loop, sizeof loop, "%s/loop", dir);
  enum { N = 10000 }; /* past the first buffer, so the buffer grows */
  FILE *f = fopen(path, "wb");
  cr_assert(f != NULL);
  for (int i = 0; i < N; i++) fputc(i % 7 == 0 ? 0 : 'a' + i % 26, f);
  fclose(f);
  char *buf = NULL;
  size_t len = 1;
  sc_diag d = {0};
  cr_assert_eq(sc_file_read(path, N, &buf, &len, &d), 0, "%s", d.msg);
  cr_assert_eq(len, N);
  cr_assert_eq(buf[0], 0);
  cr_assert_eq(buf[1], 'b');
  cr_assert_eq(buf[N], 0);
  free(buf);
  cr_assert_eq(sc_file_read(path, N - 1, &buf, &len, &d), SC_ETOOBIG);
  cr_assert(buf == NULL && len == 0);
  cr_assert(strstr(d.msg, path), "%s", d.msg);
  cr_assert_eq(sc_file_read(path, 5, &buf, &len, &d), SC_ETOOBIG);
  cr_assert(truncate(path, 0) == 0);
  cr_assert_eq(sc_file_read(path, 0, &buf, &len, &d), 0, "%s", d.msg);
  cr_assert(len == 0 && buf != NULL && buf[0] == 0);
  free(buf);
  cr_assert_eq(sc_file_read(loop, 100, &buf, &len, &d), SC_ENOENT);
  cr_assert(strstr(d.msg, loop), "%s", d.msg);
  snprintf(path, sizeof path, "%s/f/x", dir); /* a file is no folder: ENOTDIR */
  cr_assert_eq(sc_file_read(path, 100, &buf, &len, &d), SC_ENOENT);
  cr_assert_eq(symlink(loop, loop), 0);
  cr_assert_eq(sc_file_read(loop, 100, &buf, &len, &d), SC_EIO, "%s", d.msg);
  cr_assert_eq(sc_file_read(dir, 100, &buf, &len, &d), SC_EIO);
  cr_assert(buf == NULL && len == 0);
  unlink(loop);
  snprintf(path, sizeof path, "%s/f", dir);
  unlink(path);
  rmdir(dir);
}
