/* Unit tests of the messages module: random round trips of every type on both decode
 * paths, rejection of malformed, truncated, too deep, oversized and out-of-range input
 * (each with its code and message), JSON rendering, and the step plan conversion against
 * the real planner. The memory bound of the untrusted path is in test_messages_mem.c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "messages/messages.h"
#include "messages/schema_desc.h"
#include "model/model_defaults.h"
#include "msg_random.h"
#include "plan/plan_wire.h"

/* The step plan's two directions: the head ships a plan, a rank checks what it got. */
static int step_plan_from_plan(const sc_plan *plan, const int64_t *req_ids,
                               sc_msg_step_plan *m) {
  sc_plan_wire w;
  sc_plan_wire_of(plan, req_ids, &w);
  return sc_msg_step_plan_from_wire(&w, m);
}

static int step_plan_to_plan(const sc_msg_step_plan *m, sc_plan *plan, sc_diag *d) {
  sc_plan_wire w;
  sc_msg_step_plan_wire(m, &w);
  return sc_plan_from_wire(&w, plan, d);
}

static sc_msg_limits test_limits(void) {
  sc_msg_limits lim;
  sc_msg_limits_default(&lim);
  return lim;
}

/* ---- round trips ---- */

static void round_trips(int type, int cases) {
  const sc_msg_limits lim = test_limits();
  msg_rng r = {.s = 0x5eed0000u + (uint64_t)type};
  sc_buf buf, again;
  sc_buf_init(&buf);
  sc_buf_init(&again);
  for (int i = 0; i < cases; i++) {
    void *body = sc_msg_body_new(type);
    cr_assert_not_null(body);
    cr_assert_eq(msg_random_body(&r, type, body, &lim), 0);
    sc_envelope env, got;
    msg_random_envelope(&r, type, &env);
    cr_assert_eq(sc_msg_encode(&env, body, &buf), 0);

    void *out = NULL;
    sc_diag d = {0};
    int rc = sc_msg_decode(buf.data, buf.len, &got, &out, &d);
    cr_assert_eq(rc, 0, "%s case %d: trusted decode failed: %s", sc_msg_type_name(type), i,
                 sc_diag_message(&d));
    cr_assert(sc_msg_body_equal(type, body, out), "%s case %d: body differs",
              sc_msg_type_name(type), i);
    cr_assert(got.type == type && got.step == env.step && got.seq == env.seq &&
              got.trace_id == env.trace_id && got.src.node == env.src.node &&
              got.src.slot == env.src.slot && got.src.gen == env.src.gen &&
              got.dst.node == env.dst.node && got.dst.slot == env.dst.slot &&
              got.dst.gen == env.dst.gen && got.major == SC_MSG_MAJOR &&
              got.minor == SC_MSG_MINOR);
    /* Canonical: re-encoding the decoded body gives the same bytes. */
    cr_assert_eq(sc_msg_encode(&got, out, &again), 0);
    cr_assert(again.len == buf.len && memcmp(again.data, buf.data, buf.len) == 0);
    sc_msg_body_destroy(type, out);

    /* No valid message is rejected by the untrusted path. */
    rc = sc_msg_decode_untrusted(buf.data, buf.len, &lim, &got, &out, &d);
    cr_assert_eq(rc, 0, "%s case %d: untrusted decode rejected a valid message: %s",
                 sc_msg_type_name(type), i, sc_diag_message(&d));
    cr_assert(sc_msg_body_equal(type, body, out));
    sc_msg_body_destroy(type, out);

    sc_envelope peek;
    cr_assert_eq(sc_msg_peek_envelope(buf.data, buf.len, &peek), 0);
    cr_assert(peek.type == type && peek.seq == env.seq && peek.trace_id == env.trace_id);
    sc_msg_body_destroy(type, body);
  }
  sc_buf_free(&buf);
  sc_buf_free(&again);
}

Test(messages, every_type_round_trips_thousands_of_random_cases) {
  for (int t = 0; t < SC_MSG_COUNT; t++) round_trips(t, 3000);
}

Test(messages, type_names_are_unique_and_resolve) {
  for (int t = 0; t < SC_MSG_COUNT; t++) {
    cr_assert_not_null(sc_msg_type_name(t));
    cr_assert_eq(sc_msg_type_from_name(sc_msg_type_name(t)), t);
  }
  cr_assert_null(sc_msg_type_name(SC_MSG_COUNT));
  cr_assert_null(sc_msg_type_name(-1));
  cr_assert_null(sc_msg_body_new(SC_MSG_COUNT));
  cr_assert_str_eq(sc_msg_type_name(SC_MSG_PING), "ping");
  cr_assert_str_eq(sc_msg_type_name(SC_MSG_STEP_PLAN), "step_plan");
}

Test(messages, equality_agrees_with_the_canonical_encoding) {
  /* The encoder is deterministic, so two bodies are equal exactly when they encode to
   * the same bytes. Flip every bit-0 of every encoded message; wherever the result still
   * decodes as the same type, equality must agree with the bytes. */
  const sc_msg_limits lim = test_limits();
  msg_rng r = {.s = 77};
  sc_buf orig, re;
  sc_buf_init(&orig);
  sc_buf_init(&re);
  int compared = 0, differed = 0;
  for (int t = 0; t < SC_MSG_COUNT; t++) {
    void *a = sc_msg_body_new(t);
    cr_assert_eq(msg_random_body(&r, t, a, &lim), 0);
    sc_envelope env;
    msg_random_envelope(&r, t, &env);
    cr_assert_eq(sc_msg_encode(&env, a, &orig), 0);
    sc_buf flipped;
    sc_buf_init(&flipped);
    cr_assert_eq(sc_buf_append(&flipped, orig.data, orig.len), 0);
    for (size_t k = 0; k < flipped.len; k++) {
      flipped.data[k] ^= 0x01;
      sc_envelope e2;
      void *b = NULL;
      if (sc_msg_decode(flipped.data, flipped.len, &e2, &b, NULL) == 0 && e2.type == t) {
        cr_assert_eq(sc_msg_encode(&env, b, &re), 0);
        const bool same_bytes = re.len == orig.len && memcmp(re.data, orig.data, re.len) == 0;
        cr_assert_eq(sc_msg_body_equal(t, a, b), same_bytes, "%s: flip at byte %zu",
                     sc_msg_type_name(t), k);
        compared++;
        differed += !same_bytes;
      }
      sc_msg_body_destroy(e2.type, b);
      flipped.data[k] ^= 0x01;
    }
    sc_buf_free(&flipped);
    sc_msg_body_destroy(t, a);
  }
  cr_assert_gt(differed, 100, "only %d of %d decodable flips changed a body", differed,
               compared);
  sc_buf_free(&orig);
  sc_buf_free(&re);
}

/* ---- rejections ---- */

Test(messages, every_truncation_of_every_test_message_is_rejected) {
  const sc_msg_limits lim = test_limits();
  msg_rng r = {.s = 4242};
  sc_buf buf;
  sc_buf_init(&buf);
  for (int t = 0; t < SC_MSG_COUNT; t++) {
    for (int i = 0; i < 25; i++) {
      void *body = sc_msg_body_new(t);
      cr_assert_eq(msg_random_body(&r, t, body, &lim), 0);
      sc_envelope env;
      msg_random_envelope(&r, t, &env);
      cr_assert_eq(sc_msg_encode(&env, body, &buf), 0);
      for (size_t cut = 0; cut < buf.len; cut++) {
        sc_envelope got;
        void *out = (void *)1;
        sc_diag d = {0};
        int rc = sc_msg_decode_untrusted(buf.data, cut, &lim, &got, &out, &d);
        cr_assert_neq(rc, 0, "%s: prefix of %zu/%zu bytes accepted", sc_msg_type_name(t),
                      cut, buf.len);
        cr_assert_null(out);
        cr_assert_neq(d.msg[0], '\0');
        cr_assert_neq(sc_msg_decode(buf.data, cut, &got, &out, NULL), 0);
      }
      sc_msg_body_destroy(t, body);
    }
  }
  sc_buf_free(&buf);
}

Test(messages, forged_huge_array_is_rejected_by_the_prewalk) {
  static const uint8_t bomb[] = {0xdd, 0x04, 0x00, 0x00, 0x00};
  sc_envelope env;
  void *body = (void *)1;
  sc_diag d = {0};
  int rc = sc_msg_decode_untrusted(bomb, sizeof bomb, NULL, &env, &body, &d);
  cr_assert_eq(rc, SC_EPROTO);
  cr_assert_null(body);
  cr_assert(strstr(d.msg, "declares 67108864 elements") != NULL, "%s", d.msg);
  /* The same forgery inside a valid envelope, as a body string and as a body array. */
  static const uint8_t str_bomb[] = {0x99, 1, 0, 0, 0, 0, 0x93, 0, 0, 0, 0x93, 0, 0, 0, 0,
                                     0x93, 0, 0, 0xdb, 0x7f, 0xff, 0xff, 0xff};
  rc = sc_msg_decode_untrusted(str_bomb, sizeof str_bomb, NULL, &env, &body, &d);
  cr_assert_eq(rc, SC_EPROTO);
  cr_assert(strstr(d.msg, "declares 2147483647 bytes") != NULL, "%s", d.msg);
}

/* An array of structs whose elements are one byte each passes the pre-walk (one byte per
 * element); the decoder must not size it by the declared count (24-32 bytes per input
 * byte), and must still accept real arrays of structs. */
Test(messages, forged_struct_array_is_refused_before_it_is_sized) {
  enum { N = 4096 };
  static uint8_t p[32 + N];
  size_t k = 0;
  const uint8_t env0[] = {0x99, 1, 1, SC_MSG_GLOBAL_BATCH, 0, 0, 0x93, 0, 0, 0,
                          0x93, 0, 0, 0, 0, 0x92, 0xdc, N >> 8, N & 0xff};
  memcpy(p, env0, sizeof env0);
  k = sizeof env0;
  memset(p + k, 0, N);
  k += N;
  p[k++] = 0x90;
  sc_envelope env;
  void *body = (void *)1;
  sc_diag d = {0};
  int rc = sc_msg_decode_untrusted(p, k, NULL, &env, &body, &d);
  cr_assert_eq(rc, SC_EPROTO);
  cr_assert_null(body);
  cr_assert(strstr(d.msg, "global_batch.reqs: 4096 elements of batch_req need at least 5 bytes") !=
                NULL,
            "%s", d.msg);
  cr_assert_eq(sc_msg_decode(p, k, &env, &body, &d), SC_EPROTO);
  /* the tightest legal encoding still decodes: N reqs of [0, 0, 0, false] */
  sc_batch_req *reqs = calloc(N, sizeof *reqs);
  sc_msg_global_batch m = {.reqs = {reqs, N}};
  sc_envelope e = {.type = SC_MSG_GLOBAL_BATCH};
  sc_buf buf;
  sc_buf_init(&buf);
  cr_assert_eq(sc_msg_encode(&e, &m, &buf), 0);
  cr_assert_eq(sc_msg_decode_untrusted(buf.data, buf.len, NULL, &env, &body, &d), 0, "%s",
               d.msg);
  cr_assert(sc_msg_body_equal(SC_MSG_GLOBAL_BATCH, &m, body));
  sc_msg_body_destroy(SC_MSG_GLOBAL_BATCH, body);
  sc_buf_free(&buf);
  free(reqs);
}

static size_t nested(uint8_t *out, int levels) {
  size_t n = 0;
  for (int i = 0; i < levels; i++) out[n++] = 0x91;
  out[n++] = 0x00;
  return n;
}

Test(messages, nesting_one_past_the_limit_is_rejected) {
  sc_msg_limits lim = test_limits();
  uint8_t in[64];
  sc_diag d = {0};
  sc_envelope env;
  void *body;
  /* At the limit: the pre-walk passes, the schema check rejects it for another reason. */
  size_t n = nested(in, lim.max_depth);
  cr_assert_eq(sc_msg_prewalk(in, n, lim.max_depth, &d), 0);
  int rc = sc_msg_decode_untrusted(in, n, &lim, &env, &body, &d);
  cr_assert_neq(rc, 0);
  cr_assert(strstr(d.msg, "nesting") == NULL, "%s", d.msg);
  /* One past: rejected for depth. */
  n = nested(in, lim.max_depth + 1);
  rc = sc_msg_decode_untrusted(in, n, &lim, &env, &body, &d);
  cr_assert_eq(rc, SC_EPROTO);
  cr_assert(strstr(d.msg, "nesting deeper than the limit of 8") != NULL, "%s", d.msg);
  /* The trusted path has the hard bound of SC_MSG_MAX_DEPTH. */
  n = nested(in, SC_MSG_MAX_DEPTH + 1);
  cr_assert_eq(sc_msg_decode(in, n, &env, &body, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "nesting") != NULL, "%s", d.msg);
}

Test(messages, prewalk_rejects_trailing_and_reserved_bytes) {
  sc_diag d = {0};
  static const uint8_t two[] = {0x01, 0x02};
  cr_assert_eq(sc_msg_prewalk(two, 2, 8, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "trailing") != NULL, "%s", d.msg);
  static const uint8_t reserved[] = {0x91, 0xc1};
  cr_assert_eq(sc_msg_prewalk(reserved, 2, 8, &d), SC_EPROTO);
  cr_assert_eq(sc_msg_prewalk(NULL, 0, 8, &d), SC_EPROTO);
  static const uint8_t map[] = {0x81, 0x01, 0x02};
  cr_assert_eq(sc_msg_prewalk(map, 3, 8, &d), 0);
  static const uint8_t map_forged[] = {0x82, 0x01, 0x02, 0x03};
  cr_assert_eq(sc_msg_prewalk(map_forged, 4, 8, &d), SC_EPROTO);
}

/* A hand-built message: envelope fields given, then the body written by fn. */
typedef void (*body_fn)(msgpack_packer *pk);
static void build(msgpack_sbuffer *sb, unsigned major, unsigned minor, unsigned type,
                  unsigned top, body_fn fn) {
  msgpack_sbuffer_init(sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, top);
  msgpack_pack_uint32(&pk, major);
  msgpack_pack_uint32(&pk, minor);
  msgpack_pack_uint32(&pk, type);
  msgpack_pack_uint64(&pk, 7);
  msgpack_pack_uint64(&pk, 8);
  for (int i = 0; i < 2; i++) {
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint16(&pk, 1);
    msgpack_pack_uint16(&pk, 2);
    msgpack_pack_uint32(&pk, 3);
  }
  msgpack_pack_uint64(&pk, 9);
  fn(&pk);
  for (unsigned i = 9; i < top; i++) msgpack_pack_nil(&pk);
}

static int decode_sb(msgpack_sbuffer *sb, const sc_msg_limits *lim, sc_diag *d) {
  sc_envelope env;
  void *body = NULL;
  int rc = lim ? sc_msg_decode_untrusted((const uint8_t *)sb->data, sb->size, lim, &env,
                                         &body, d)
               : sc_msg_decode((const uint8_t *)sb->data, sb->size, &env, &body, d);
  if (rc == 0) sc_msg_body_destroy(env.type, body);
  else cr_assert_null(body);
  msgpack_sbuffer_destroy(sb);
  return rc;
}

static void ready_body(msgpack_packer *pk) { /* rank, incarnation */
  msgpack_pack_array(pk, 2);
  msgpack_pack_int32(pk, 3);
  msgpack_pack_uint64(pk, 77);
}
static void ready_extra_field(msgpack_packer *pk) {
  msgpack_pack_array(pk, 3);
  msgpack_pack_int32(pk, 3);
  msgpack_pack_uint64(pk, 77);
  msgpack_pack_str(pk, 3);
  msgpack_pack_str_body(pk, "new", 3);
}
static void ready_str(msgpack_packer *pk) {
  msgpack_pack_array(pk, 2);
  msgpack_pack_str(pk, 1);
  msgpack_pack_str_body(pk, "3", 1);
  msgpack_pack_uint64(pk, 77);
}
static void ready_negative(msgpack_packer *pk) {
  msgpack_pack_array(pk, 2);
  msgpack_pack_int32(pk, -1);
  msgpack_pack_uint64(pk, 77);
}
static void ready_as_map(msgpack_packer *pk) {
  msgpack_pack_map(pk, 1);
  msgpack_pack_int32(pk, 0);
  msgpack_pack_int32(pk, 3);
}
static void heartbeat_wide(msgpack_packer *pk) {
  msgpack_pack_array(pk, 2);
  msgpack_pack_int64(pk, 1ll << 40);
  msgpack_pack_uint64(pk, 5);
}

Test(messages, envelope_and_schema_errors_name_the_problem) {
  msgpack_sbuffer sb;
  sc_diag d = {0};
  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_NODE_READY, 9, ready_body);
  cr_assert_eq(decode_sb(&sb, NULL, &d), 0);

  build(&sb, SC_MSG_MAJOR + 1, 0, SC_MSG_NODE_READY, 9, ready_body);
  cr_assert_eq(decode_sb(&sb, NULL, &d), SC_EVERSION);
  cr_assert(strstr(d.msg, "schema version 2.0 is not supported") != NULL, "%s", d.msg);

  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_COUNT + 5, 9, ready_body);
  cr_assert_eq(decode_sb(&sb, NULL, &d), SC_ENOTSUP);
  cr_assert(strstr(d.msg, "unknown message type id") != NULL, "%s", d.msg);

  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_NODE_READY, 9, ready_extra_field);
  cr_assert_eq(decode_sb(&sb, NULL, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "node_ready has 3 fields, expected 2") != NULL, "%s", d.msg);
  /* ... but a newer minor version may append fields. */
  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR + 1, SC_MSG_NODE_READY, 10, ready_extra_field);
  cr_assert_eq(decode_sb(&sb, NULL, &d), 0, "%s", d.msg);

  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_NODE_READY, 10, ready_body);
  cr_assert_eq(decode_sb(&sb, NULL, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "10 top-level elements") != NULL, "%s", d.msg);

  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_NODE_READY, 9, ready_str);
  cr_assert_eq(decode_sb(&sb, NULL, &d), SC_EPROTO);
  cr_assert_str_eq(d.msg, "node_ready.rank: expected an integer, got a string");

  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_NODE_READY, 9, ready_negative);
  cr_assert_eq(decode_sb(&sb, NULL, &d), SC_ERANGE);
  cr_assert_str_eq(d.msg, "node_ready.rank: -1 is outside the allowed range [0, 2147483647]");

  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_NODE_READY, 9, ready_as_map);
  cr_assert_eq(decode_sb(&sb, NULL, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "got a map") != NULL, "%s", d.msg);

  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_NODE_HEARTBEAT, 9, heartbeat_wide);
  cr_assert_eq(decode_sb(&sb, NULL, &d), SC_ERANGE);
  cr_assert_str_eq(d.msg, "node_heartbeat.rank: 1099511627776 does not fit i32");
}

/* client_submit bodies with one thing wrong each. */
static int32_t g_tok = 5, g_ntok = 3, g_max_tokens = 16;
static float g_temp = 0.0f;
static int32_t g_top_k = 0;
static void submit_body(msgpack_packer *pk) {
  msgpack_pack_array(pk, 7);
  msgpack_pack_uint64(pk, 42);
  msgpack_pack_array(pk, (size_t)g_ntok);
  for (int i = 0; i < g_ntok; i++) msgpack_pack_int32(pk, i == g_ntok - 1 ? g_tok : 1);
  msgpack_pack_int32(pk, g_max_tokens);
  msgpack_pack_float(pk, g_temp);
  msgpack_pack_int32(pk, g_top_k);
  msgpack_pack_uint64(pk, 1);
  msgpack_pack_false(pk); /* ignore_eos (1.10) */
}

static int submit(const sc_msg_limits *lim, int32_t tok, int32_t ntok, int32_t max_tokens,
                  float temp, sc_diag *d) {
  g_tok = tok, g_ntok = ntok, g_max_tokens = max_tokens, g_temp = temp;
  msgpack_sbuffer sb;
  build(&sb, SC_MSG_MAJOR, SC_MSG_MINOR, SC_MSG_CLIENT_SUBMIT, 9, submit_body);
  return decode_sb(&sb, lim, d);
}

Test(messages, untrusted_submit_is_validated_against_the_limits) {
  sc_msg_limits lim = test_limits();
  lim.vocab_size = 1000;
  lim.max_prompt_len = 50;
  lim.max_new_tokens = 64;
  sc_diag d = {0};
  cr_assert_eq(submit(&lim, 999, 50, 64, 0.7f, &d), 0, "%s", d.msg);
  cr_assert_eq(submit(&lim, 1000, 3, 16, 0, &d), SC_EINVAL);
  cr_assert_str_eq(d.msg, "client_submit.prompt[2]: token id 1000 is not below the "
                          "vocabulary size 1000");
  cr_assert_eq(submit(&lim, -4, 3, 16, 0, &d), SC_ERANGE);
  cr_assert_str_eq(d.msg, "client_submit.prompt[2]: -4 is outside the allowed range [0, "
                          "2147483647]");
  cr_assert_eq(submit(&lim, 5, 0, 16, 0, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "the prompt is empty") != NULL, "%s", d.msg);
  cr_assert_eq(submit(&lim, 5, 51, 16, 0, &d), SC_ETOOBIG);
  cr_assert(strstr(d.msg, "51 tokens exceed the limit of 50") != NULL, "%s", d.msg);
  cr_assert_eq(submit(&lim, 5, 3, 65, 0, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "max_tokens: 65 exceeds the limit of 64") != NULL, "%s", d.msg);
  cr_assert_eq(submit(&lim, 5, 3, 0, 0, &d), SC_ERANGE);
  cr_assert_eq(submit(&lim, 5, 3, 16, -1.0f, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "temperature") != NULL, "%s", d.msg);
  g_top_k = 40; /* top-k sampling is not implemented: refused, not ignored */
  cr_assert_eq(submit(&lim, 5, 3, 16, 0, &d), SC_ERANGE);
  cr_assert(strstr(d.msg, "top_k") != NULL, "%s", d.msg);
  g_top_k = 0;
  /* The trusted path applies no limits, only the declared ranges. */
  cr_assert_eq(submit(NULL, 5000, 60, 100, 0, &d), 0, "%s", d.msg);
  /* Array and total size limits. */
  lim.max_array = 10;
  cr_assert_eq(submit(&lim, 5, 11, 16, 0, &d), SC_ETOOBIG);
  cr_assert_str_eq(d.msg, "client_submit.prompt: 11 array elements exceed the limit of 10");
  lim = test_limits();
  lim.max_bytes = 20;
  cr_assert_eq(submit(&lim, 5, 30, 16, 0, &d), SC_ETOOBIG);
  cr_assert(strstr(d.msg, "exceeds the limit of 20 bytes") != NULL, "%s", d.msg);
}

/* The gateway names the request in its error reply to a client message that does not
 * decode: the id comes from the raw bytes, only from a sound client_submit or
 * client_cancel. */
Test(messages, a_bad_client_message_still_names_its_request) {
  /* both bodies start with the request id (what the peek relies on) */
  const int client_types[] = {SC_MSG_CLIENT_SUBMIT, SC_MSG_CLIENT_CANCEL};
  for (int i = 0; i < 2; i++) {
    const sc_msg_desc *desc = sc_msg_desc_of(client_types[i]);
    cr_assert_str_eq(desc->fields[0].name, "request_id");
    cr_assert_eq(desc->fields[0].kind, SC_FK_U64);
  }
  sc_msg_limits lim = test_limits();
  sc_buf b;
  sc_buf_init(&b);
  int32_t prompt[4] = {1, 2, 3, 1 << 30}; /* past the vocabulary: does not validate */
  sc_msg_client_submit sub = {.request_id = 300000, .prompt = {prompt, 4}, .max_tokens = 2};
  sc_envelope env = {.type = SC_MSG_CLIENT_SUBMIT};
  cr_assert_eq(sc_msg_encode(&env, &sub, &b), 0);
  sc_envelope got;
  void *body = NULL;
  cr_assert_eq(sc_msg_decode_untrusted(b.data, b.len, &lim, &got, &body, NULL), SC_EINVAL);
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len, &lim), 300000);
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len, NULL), 300000);
  /* a client of another major version: it does not decode, but its request is named */
  cr_assert_eq(b.data[1], SC_MSG_MAJOR, "the major version is the envelope's 2nd byte");
  b.data[1] = SC_MSG_MAJOR + 1;
  cr_assert_eq(sc_msg_decode_untrusted(b.data, b.len, &lim, &got, &body, NULL), SC_EVERSION);
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len, &lim), 300000);
  b.data[1] = SC_MSG_MAJOR;
  /* cut short, or past the size limit: not sound, so no id */
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len - 1, &lim), 0);
  lim.max_bytes = b.len - 1;
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len, &lim), 0);
  lim = test_limits();
  /* a cancel */
  sc_msg_client_cancel can = {.request_id = 7};
  env.type = SC_MSG_CLIENT_CANCEL;
  cr_assert_eq(sc_msg_encode(&env, &can, &b), 0);
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len, &lim), 7);
  /* another type, although its first field is an unsigned integer too */
  sc_msg_ping ping = {.seq = 9};
  env.type = SC_MSG_PING;
  cr_assert_eq(sc_msg_encode(&env, &ping, &b), 0);
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len, &lim), 0);
  /* a submit whose body does not start with an unsigned integer: [..., [-1]] */
  env.type = SC_MSG_CLIENT_SUBMIT;
  cr_assert_eq(sc_msg_encode(&env, &sub, &b), 0);
  size_t body_at;
  uint64_t elements;
  cr_assert_eq(sc_msg_peek_envelope_body(b.data, b.len, &got, &body_at, &elements), 0);
  b.len = body_at;
  const uint8_t negative_first[] = {0x91, 0xff};
  cr_assert_eq(sc_buf_append(&b, negative_first, sizeof negative_first), 0);
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len, &lim), 0);
  b.len = body_at;
  const uint8_t empty_body[] = {0x90};
  cr_assert_eq(sc_buf_append(&b, empty_body, sizeof empty_body), 0);
  cr_assert_eq(sc_msg_peek_client_request_id(b.data, b.len, &lim), 0);
  /* garbage */
  const uint8_t garbage[] = {0x93, 0xc1, 0xff, 0x00, 0x12};
  cr_assert_eq(sc_msg_peek_client_request_id(garbage, sizeof garbage, &lim), 0);
  sc_buf_free(&b);
}

Test(messages, strings_are_bounded_and_nul_free) {
  sc_msg_limits lim = test_limits();
  lim.max_str = 8;
  sc_msg_error_reply m = {.code = SC_EINVAL, .message = "nine char"};
  sc_envelope env = {.type = SC_MSG_ERROR_REPLY};
  sc_buf buf;
  sc_buf_init(&buf);
  cr_assert_eq(sc_msg_encode(&env, &m, &buf), 0);
  void *body;
  sc_diag d = {0};
  cr_assert_eq(sc_msg_decode_untrusted(buf.data, buf.len, &lim, &env, &body, &d), SC_ETOOBIG);
  cr_assert_str_eq(d.msg, "error_reply.message: 9 string bytes exceed the limit of 8");
  /* A NUL inside a string (patched into the encoded bytes). */
  uint8_t *s = NULL;
  for (size_t k = 0; k + 4 <= buf.len && s == NULL; k++)
    if (memcmp(buf.data + k, "nine", 4) == 0) s = buf.data + k;
  cr_assert_not_null(s);
  s[1] = '\0';
  cr_assert_eq(sc_msg_decode(buf.data, buf.len, &env, &body, &d), SC_EPROTO);
  cr_assert_str_eq(d.msg, "error_reply.message: string contains a NUL byte");
  s[1] = 0xff;
  cr_assert_eq(sc_msg_decode(buf.data, buf.len, &env, &body, &d), SC_EPROTO);
  cr_assert_str_eq(d.msg, "error_reply.message: string is not valid UTF-8 (byte 1)");
  s[1] = 0xc0; /* overlong form */
  s[2] = 0x80;
  cr_assert_eq(sc_msg_decode(buf.data, buf.len, &env, &body, &d), SC_EPROTO);
  sc_buf_free(&buf);
}

Test(messages, global_batch_token_count_must_match) {
  sc_batch_req reqs[2] = {{.id = 1, .computed = 0, .scheduled = 3, .prefill = true},
                          {.id = 2, .computed = 9, .scheduled = 1, .prefill = false}};
  int32_t toks[4] = {1, 2, 3, 4};
  sc_msg_global_batch m = {.reqs = {reqs, 2}, .tokens = {toks, 3}};
  sc_envelope env = {.type = SC_MSG_GLOBAL_BATCH, .step = 12};
  sc_buf buf;
  sc_buf_init(&buf);
  cr_assert_eq(sc_msg_encode(&env, &m, &buf), 0);
  void *body;
  sc_diag d = {0};
  cr_assert_eq(sc_msg_decode(buf.data, buf.len, &env, &body, &d), SC_EINVAL);
  cr_assert(strstr(d.msg, "3 token ids for 4 scheduled tokens") != NULL, "%s", d.msg);
  m.tokens.n = 4;
  cr_assert_eq(sc_msg_encode(&env, &m, &buf), 0);
  cr_assert_eq(sc_msg_decode(buf.data, buf.len, &env, &body, &d), 0, "%s", d.msg);
  const sc_msg_global_batch *got = body;
  cr_assert(got->reqs.n == 2 && got->reqs.v[1].computed == 9 && !got->reqs.v[1].prefill &&
            got->reqs.v[0].prefill && got->tokens.v[3] == 4 && env.step == 12);
  sc_msg_body_destroy(SC_MSG_GLOBAL_BATCH, body);
  sc_buf_free(&buf);
}

/* ---- JSON ---- */

Test(messages, json_rendering_is_valid_and_complete) {
  uint8_t payload[3] = {0xde, 0xad, 0x01};
  sc_msg_ping ping = {.seq = 5, .sent_ns = 1234567890123ull, .payload = {payload, 3}};
  sc_envelope env = {.major = 1, .minor = 0, .type = SC_MSG_PING, .step = 3, .seq = 4,
                     .src = {1, 2, 3}, .dst = {4, 5, 6}, .trace_id = 99};
  sc_jsonw w;
  sc_jsonw_init(&w);
  cr_assert_eq(sc_msg_render_json(&env, &ping, &w), 0);
  json_error_t err;
  json_t *j = json_loads(sc_jsonw_str(&w), 0, &err);
  cr_assert_not_null(j, "%s: %s", sc_jsonw_str(&w), err.text);
  cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "ping");
  cr_assert_str_eq(json_string_value(json_object_get(j, "src")), "1.2.3");
  cr_assert_eq(json_integer_value(json_object_get(j, "trace_id")), 99);
  json_t *b = json_object_get(j, "body");
  cr_assert_eq(json_integer_value(json_object_get(b, "sent_ns")), 1234567890123ll);
  cr_assert_str_eq(json_string_value(json_object_get(json_object_get(b, "payload"), "hex")),
                   "dead01");
  json_decref(j);

  /* Every type renders as valid JSON with one key per declared field. */
  const sc_msg_limits lim = test_limits();
  msg_rng r = {.s = 5};
  for (int t = 0; t < SC_MSG_COUNT; t++) {
    void *body = sc_msg_body_new(t);
    cr_assert_eq(msg_random_body(&r, t, body, &lim), 0);
    sc_jsonw_reset(&w);
    cr_assert_eq(sc_msg_render_body_json(t, body, &w), 0);
    /* (u64 fields may exceed jansson's int64: numbers read as reals) */
    j = json_loads(sc_jsonw_str(&w), JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &err);
    cr_assert_not_null(j, "%s: %s", sc_msg_type_name(t), err.text);
    cr_assert_eq(json_object_size(j), sc_msg_desc_of(t)->num_fields);
    json_decref(j);
    sc_msg_body_destroy(t, body);
  }
  sc_jsonw_free(&w);
}

/* ---- step plans ---- */

static void make_plan(sc_plan *plan, int pcp, int decodes, int prefills, int prefill_len) {
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.pcp = cfg.dcp = pcp;
  cfg.layers = 61;
  sc_batch_req *reqs = calloc((size_t)(decodes + prefills), sizeof *reqs);
  for (int i = 0; i < decodes; i++)
    reqs[i] = (sc_batch_req){.id = i, .computed = 100 + 37 * i, .scheduled = 1};
  for (int i = 0; i < prefills; i++)
    reqs[decodes + i] = (sc_batch_req){.id = decodes + i, .computed = 11 * i,
                                       .scheduled = prefill_len + i, .prefill = true};
  sc_diag d = {0};
  cr_assert_eq(sc_plan_build(plan, &cfg, reqs, decodes + prefills, &d), 0, "%s", d.msg);
  free(reqs);
}

static void transport(const sc_plan *src, sc_plan *dst, int64_t *ids) {
  sc_msg_step_plan *m = sc_msg_body_new(SC_MSG_STEP_PLAN);
  cr_assert_eq(step_plan_from_plan(src, ids, m), 0);
  sc_envelope env = {.type = SC_MSG_STEP_PLAN, .step = 1};
  sc_buf buf;
  sc_buf_init(&buf);
  cr_assert_eq(sc_msg_encode(&env, m, &buf), 0);
  void *body;
  sc_diag d = {0};
  cr_assert_eq(sc_msg_decode(buf.data, buf.len, &env, &body, &d), 0, "%s", d.msg);
  cr_assert(sc_msg_body_equal(SC_MSG_STEP_PLAN, m, body));
  cr_assert_eq(step_plan_to_plan(body, dst, &d), 0, "%s", d.msg);
  const sc_msg_step_plan *got = body;
  for (int32_t i = 0; i < src->num_reqs; i++) cr_assert_eq(got->req_ids.v[i], ids ? ids[i] : 0);
  sc_msg_body_destroy(SC_MSG_STEP_PLAN, body);
  sc_msg_body_destroy(SC_MSG_STEP_PLAN, m);
  sc_buf_free(&buf);
}

static void assert_same_indices(const sc_plan *a, const sc_plan *b) {
  cr_assert_eq(a->fingerprint, b->fingerprint);
  cr_assert_eq(a->num_colls, b->num_colls);
  cr_assert_eq(a->t_pad, b->t_pad);
  const int64_t slots = sc_plan_gather_slots(a);
  cr_assert_eq(slots, sc_plan_gather_slots(b));
  int32_t *g[2], *h[2];
  uint8_t *k[2];
  const sc_plan *p[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    g[i] = calloc((size_t)slots, sizeof(int32_t));
    h[i] = calloc((size_t)a->num_tokens, sizeof(int32_t));
    k[i] = calloc((size_t)slots, 1);
    sc_plan_fill_gather(p[i], g[i], h[i], k[i]);
  }
  cr_assert(memcmp(g[0], g[1], (size_t)slots * 4) == 0);
  cr_assert(memcmp(h[0], h[1], (size_t)a->num_tokens * 4) == 0);
  cr_assert(memcmp(k[0], k[1], (size_t)slots) == 0);
  for (int i = 0; i < 2; i++) free(g[i]), free(h[i]), free(k[i]);
  cr_assert_eq(a->num_chunks, b->num_chunks);
  for (int32_t c = 0; c < a->num_chunks; c++) {
    const size_t n = (size_t)a->chunks[c].extent_total;
    int32_t *x = malloc(n * 4), *y = malloc(n * 4);
    sc_plan_fill_deinterleave(a, c, x);
    sc_plan_fill_deinterleave(b, c, y);
    cr_assert(memcmp(x, y, n * 4) == 0);
    free(x), free(y);
  }
}

Test(messages, step_plan_survives_the_wire_and_feeds_the_index_functions) {
  /* The worked example of SPEC.md §3 and the bench shape (256 decodes + 4 prefills). */
  sc_plan a, b;
  sc_plan_init(&a);
  sc_plan_init(&b);
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.pcp = cfg.dcp = 2;
  sc_batch_req ex[2] = {{.id = 10, .computed = 0, .scheduled = 11, .prefill = true},
                        {.id = 11, .computed = 6, .scheduled = 8, .prefill = true}};
  cr_assert_eq(sc_plan_build(&a, &cfg, ex, 2, NULL), 0);
  int64_t ids[2] = {10, 11};
  transport(&a, &b, ids);
  assert_same_indices(&a, &b);
  int32_t gather[20];
  sc_plan_fill_gather(&b, gather, NULL, NULL);
  static const int32_t want[20] = {0, 1, 2, 9, 10, 11, 12, 17, 18, 0,
                                   3, 4, 5, 6, 7, 8, 13, 14, 15, 16};
  cr_assert(memcmp(gather, want, sizeof want) == 0);

  make_plan(&a, 8, 256, 4, 8192);
  transport(&a, &b, NULL); /* b's arrays are reused and grown */
  assert_same_indices(&a, &b);
  sc_plan_free(&a);
  sc_plan_free(&b);
}

Test(messages, inconsistent_step_plans_are_refused) {
  sc_plan a, b;
  sc_plan_init(&a);
  sc_plan_init(&b);
  make_plan(&a, 4, 16, 3, 300);
  sc_msg_step_plan *m = sc_msg_body_new(SC_MSG_STEP_PLAN);
  cr_assert_eq(step_plan_from_plan(&a, NULL, m), 0);
  sc_diag d = {0};
  cr_assert_eq(step_plan_to_plan(m, &b, &d), 0, "%s", d.msg);

  m->colls.v[5].rows += 1; /* tampered collective */
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "fingerprint") != NULL, "%s", d.msg);
  cr_assert_eq(b.num_reqs, 0);
  m->colls.v[5].rows -= 1;

  int32_t saved = m->order.v[0];
  m->order.v[0] = 100000;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "step_plan.order[0]") != NULL, "%s", d.msg);
  m->order.v[0] = saved;

  m->rank_tokens.v[1] += 1;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "rank_tokens[1]") != NULL, "%s", d.msg);
  m->rank_tokens.v[1] -= 1;

  m->t_pad -= 1;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  m->t_pad += 1;

  m->regions.v[0].ws_start += 1000;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "regions[0]") != NULL, "%s", d.msg);
  m->regions.v[0].ws_start -= 1000;

  m->config.pcp = 3; /* breaks a rule of SPEC.md §1 */
  cr_assert_neq(step_plan_to_plan(m, &b, &d), 0);
  m->config.pcp = 4;

  m->reqs.v[17].cs += 1;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "reqs[17]") != NULL, "%s", d.msg);
  m->reqs.v[17].cs -= 1;

  /* regions: a prefill under DCP without one (the metadata read regions[-1]), two
   * prefills with each other's (each would attend over the other's context), a decode
   * with one */
  cr_assert_eq(m->reqs.v[16].region, 0);
  cr_assert_eq(m->reqs.v[17].region, 1);
  m->reqs.v[16].region = -1;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "reqs[16].region -1") != NULL, "%s", d.msg);
  m->reqs.v[16].region = 1;
  m->reqs.v[17].region = 0;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "its own region") != NULL, "%s", d.msg);
  m->reqs.v[16].region = 0;
  m->reqs.v[17].region = 1;
  m->reqs.v[0].region = 0;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "reqs[0].region") != NULL, "%s", d.msg);
  m->reqs.v[0].region = -1;

  /* row order: decodes first (the metadata takes the first rows for decode rows) */
  cr_assert(!(m->reqs.v[m->order.v[0]].flags & SC_REQ_PREFILL));
  cr_assert(m->reqs.v[m->order.v[16]].flags & SC_REQ_PREFILL);
  saved = m->order.v[0];
  m->order.v[0] = m->order.v[16];
  m->order.v[16] = saved;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert(strstr(d.msg, "a decode after a prefill") != NULL, "%s", d.msg);
  m->order.v[16] = m->order.v[0];
  m->order.v[0] = saved;

  cr_assert_eq(step_plan_to_plan(m, &b, &d), 0, "%s", d.msg);
  assert_same_indices(&a, &b);
  sc_msg_body_destroy(SC_MSG_STEP_PLAN, m);
  sc_plan_free(&a);
  sc_plan_free(&b);
}

Test(messages, chunk_listing_a_foreign_region_is_refused) {
  /* Three prefills in three chunks (the workspace holds one region at a time); then
   * chunk 0 claims region 1 as well. */
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.pcp = cfg.dcp = 2;
  cfg.max_gathered_rows = 1200;
  sc_batch_req reqs[3];
  for (int i = 0; i < 3; i++)
    reqs[i] = (sc_batch_req){.id = i, .computed = 0, .scheduled = 1000 + i, .prefill = true};
  sc_plan a, b;
  sc_plan_init(&a);
  sc_plan_init(&b);
  sc_diag d = {0};
  cr_assert_eq(sc_plan_build(&a, &cfg, reqs, 3, &d), 0, "%s", d.msg);
  cr_assert_eq(a.num_chunks, 3);
  sc_msg_step_plan *m = sc_msg_body_new(SC_MSG_STEP_PLAN);
  cr_assert_eq(step_plan_from_plan(&a, NULL, m), 0);
  cr_assert_eq(step_plan_to_plan(m, &b, &d), 0, "%s", d.msg);
  m->chunks.v[0].num_regions = 2;
  cr_assert_eq(step_plan_to_plan(m, &b, &d), SC_EPROTO);
  cr_assert_str_eq(d.msg, "step_plan.chunks[0] lists region 1 of chunk 1");
  sc_msg_body_destroy(SC_MSG_STEP_PLAN, m);
  sc_plan_free(&a);
  sc_plan_free(&b);
}
