/* fuzz_messages.c - libFuzzer target over the untrusted decoder (and, on the same bytes,
 * the trusted decoder and the envelope peek).
 *
 * Beyond "no crash, no leak, no UB" (ASan, UBSan, LeakSanitizer), it checks properties
 * and aborts when one fails:
 *   - every rejection carries a negative code and a message;
 *   - an accepted message re-encodes and decodes (trusted) to an equal body, and that
 *     encoding is accepted by the untrusted decoder again (no valid message rejected);
 *   - rendering to JSON succeeds;
 *   - an accepted step plan either fails sc_plan_from_wire with a message or
 *     yields a plan whose index arrays can be filled (bounded sizes only).
 * Build: `make fuzz` (clang, build-fuzz/). Seeds: tests/fuzz/corpus/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "messages/messages.h"
#include "plan/plan_wire.h"

#define REQUIRE(cond)                                                              \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "fuzz_messages: property failed: %s (line %d)\n", #cond,     \
              __LINE__);                                                           \
      abort();                                                                     \
    }                                                                              \
  } while (0)

static void exercise_plan(const sc_msg_step_plan *m) {
  sc_plan plan;
  sc_plan_init(&plan);
  sc_diag d = {0};
  sc_plan_wire wire;
  sc_msg_step_plan_wire(m, &wire);
  const int rc = sc_plan_from_wire(&wire, &plan, &d);
  if (rc != 0) {
    REQUIRE(rc < 0 && d.msg[0] != '\0' && plan.num_reqs == 0);
  } else {
    const int64_t slots = sc_plan_gather_slots(&plan);
    if (slots <= (1 << 20) && plan.num_tokens <= (1 << 20)) {
      int32_t *g = malloc(sizeof *g * (size_t)(slots + 1));
      int32_t *h = malloc(sizeof *h * (size_t)(plan.num_tokens + 1));
      uint8_t *k = malloc((size_t)slots + 1);
      if (g && h && k) sc_plan_fill_gather(&plan, g, h, k);
      free(g), free(h), free(k);
    }
    for (int32_t c = 0; c < plan.num_chunks; c++) {
      if (plan.chunks[c].extent_total > (1 << 20)) continue;
      int32_t *o = malloc(sizeof *o * ((size_t)plan.chunks[c].extent_total + 1));
      if (o) sc_plan_fill_deinterleave(&plan, c, o);
      free(o);
    }
    for (int32_t r = 0; r < sc_plan_world_size(&plan.cfg); r++) {
      sc_rank_view v;
      sc_plan_rank_view(&plan, r, &v);
    }
  }
  sc_plan_free(&plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sc_msg_limits lim;
  sc_msg_limits_default(&lim);
  lim.max_bytes = 1 << 16;
  sc_envelope env, env2, peek;
  void *body = NULL, *body2 = NULL;
  sc_diag d = {0};
  (void)sc_msg_peek_envelope(data, size, &peek);

  int rc = sc_msg_decode(data, size, &env, &body, &d);
  if (rc != 0) REQUIRE(rc < 0 && body == NULL && d.msg[0] != '\0');
  sc_msg_body_destroy(env.type, body);
  body = NULL;

  d.msg[0] = '\0';
  rc = sc_msg_decode_untrusted(data, size, &lim, &env, &body, &d);
  if (rc != 0) {
    REQUIRE(rc < 0 && body == NULL && d.msg[0] != '\0');
    return 0;
  }
  sc_buf buf;
  sc_buf_init(&buf);
  REQUIRE(sc_msg_encode(&env, body, &buf) == 0);
  rc = sc_msg_decode(buf.data, buf.len, &env2, &body2, &d);
  REQUIRE(rc == 0);
  REQUIRE(env2.type == env.type && env2.step == env.step && env2.seq == env.seq &&
          env2.trace_id == env.trace_id);
  REQUIRE(sc_msg_body_equal(env.type, body, body2));
  sc_msg_body_destroy(env2.type, body2);
  body2 = NULL;
  rc = sc_msg_decode_untrusted(buf.data, buf.len, &lim, &env2, &body2, &d);
  REQUIRE(rc == 0);
  sc_msg_body_destroy(env2.type, body2);

  sc_jsonw w;
  sc_jsonw_init(&w);
  REQUIRE(sc_msg_render_json(&env, body, &w) == 0);
  sc_jsonw_free(&w);

  if (env.type == SC_MSG_STEP_PLAN) exercise_plan(body);
  sc_msg_body_destroy(env.type, body);
  sc_buf_free(&buf);
  return 0;
}
