/* bench_codec.c - `sparsecp bench codec`: message encode and decode rates.
 *
 * Two messages: a small one (ping with a 32-byte payload, the shape of control traffic)
 * and the step plan the head sends every step, built by the real planner for 256 decodes
 * + 4 long prefills at P = N = 8 with the real model's 61 layers (so the collective plan
 * has its real length). Encoding reuses one output buffer (steady state); decoding
 * includes freeing the decoded body, since a receiver must do both. Results:
 * codec.encode, codec.decode (trusted path) and codec.decode.untrusted, in msg/s with a
 * bytes_per_s field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "messages/messages.h"
#include "model/model_defaults.h"
#include "plan/plan_wire.h"
#include "tools/bench.h"

typedef struct {
  sc_envelope env;
  const void *body;
  sc_buf buf;
  sc_msg_limits lim;
  int failures;
} codec_case;

static void run_encode(void *ctx) {
  codec_case *c = ctx;
  if (sc_msg_encode(&c->env, c->body, &c->buf) != 0) c->failures++;
}

static void run_decode(void *ctx) {
  codec_case *c = ctx;
  sc_envelope env;
  void *body;
  if (sc_msg_decode(c->buf.data, c->buf.len, &env, &body, NULL) != 0) c->failures++;
  else sc_msg_body_destroy(env.type, body);
}

static void run_decode_untrusted(void *ctx) {
  codec_case *c = ctx;
  sc_envelope env;
  void *body;
  if (sc_msg_decode_untrusted(c->buf.data, c->buf.len, &c->lim, &env, &body, NULL) != 0)
    c->failures++;
  else
    sc_msg_body_destroy(env.type, body);
}

static int measure(sc_bench *b, const char *message, const char *more_params, int type,
                   const void *body) {
  codec_case c = {.env = {.type = (uint16_t)type, .step = 1000, .seq = 7,
                          .src = {0, 3, 1}, .dst = {5, 4, 1}, .trace_id = 0xabcdef},
                  .body = body};
  sc_buf_init(&c.buf);
  sc_msg_limits_default(&c.lim);
  int rc = sc_msg_encode(&c.env, body, &c.buf);
  if (rc != 0) goto out;
  {
    /* Check the message really decodes on both paths before timing it. */
    sc_envelope env;
    void *out;
    sc_diag d = {0};
    if ((rc = sc_msg_decode_untrusted(c.buf.data, c.buf.len, &c.lim, &env, &out, &d)) != 0) {
      fprintf(stderr, "bench codec: %s does not decode: %s\n", message, sc_diag_message(&d));
      goto out;
    }
    sc_msg_body_destroy(env.type, out);
  }
  const size_t bytes = c.buf.len;
  const int runs = b->quick ? 3 : 11;
  const double min_s = b->quick ? 0.002 : 0.05;
  double samples[11];
  char params[256], extra[96];
  snprintf(params, sizeof params, "\"message\":\"%s\",\"bytes\":%zu%s%s", message, bytes,
           more_params ? "," : "", more_params ? more_params : "");
  static const struct {
    const char *name;
    void (*fn)(void *);
  } ops[] = {{"codec.encode", run_encode},
             {"codec.decode", run_decode},
             {"codec.decode.untrusted", run_decode_untrusted}};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    sc_bench_time(ops[k].fn, &c, runs, min_s, samples);
    for (int i = 0; i < runs; i++) samples[i] = 1.0 / samples[i];
    snprintf(extra, sizeof extra, "\"bytes_per_s\":%.0f",
             sc_bench_median(samples, runs) * (double)bytes);
    sc_bench_add(b, ops[k].name, params, "msg/s", samples, runs, extra);
  }
  if (c.failures != 0) {
    fprintf(stderr, "bench codec: %d failed operations on %s\n", c.failures, message);
    rc = SC_EPROTO;
  }
out:
  sc_buf_free(&c.buf);
  return rc;
}

static int bench_step_plan(sc_bench *b) {
  enum { P = 8, DECODES = 256, PREFILLS = 4, PREFILL_LEN = 32768 };
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.pcp = cfg.dcp = P;
  cfg.layers = 61;
  cfg.heads = 128;
  cfg.index_dim = 128;
  cfg.topk = 2048;
  cfg.hidden = 7168;
  sc_batch_req reqs[DECODES + PREFILLS];
  int64_t ids[DECODES + PREFILLS];
  unsigned seed = 12345;
  for (int i = 0; i < DECODES; i++) {
    seed = seed * 1103515245u + 12345u;
    reqs[i] = (sc_batch_req){.id = 1000 + i, .computed = 1024 + (int32_t)(seed >> 16) % 31744,
                             .scheduled = 1};
  }
  for (int i = 0; i < PREFILLS; i++)
    reqs[DECODES + i] = (sc_batch_req){.id = 5000 + i, .scheduled = PREFILL_LEN,
                                       .prefill = true};
  for (int i = 0; i < DECODES + PREFILLS; i++) ids[i] = reqs[i].id;
  sc_plan plan;
  sc_plan_init(&plan);
  sc_msg_step_plan *m = sc_msg_body_new(SC_MSG_STEP_PLAN);
  sc_diag d = {0};
  int rc = m ? sc_plan_build(&plan, &cfg, reqs, DECODES + PREFILLS, &d) : SC_ENOMEM;
  if (rc != 0) {
    fprintf(stderr, "bench codec: %s\n", sc_diag_message(&d));
    goto out;
  }
  sc_plan_wire wire;
  sc_plan_wire_of(&plan, ids, &wire);
  if ((rc = sc_msg_step_plan_from_wire(&wire, m)) != 0) goto out;
  char more[192];
  snprintf(more, sizeof more,
           "\"pcp\":%d,\"dcp\":%d,\"decodes\":%d,\"prefills\":%d,\"prefill_len\":%d,"
           "\"layers\":%d,\"collectives\":%d",
           P, P, DECODES, PREFILLS, PREFILL_LEN, cfg.layers, plan.num_colls);
  rc = measure(b, "step_plan", more, SC_MSG_STEP_PLAN, m);
out:
  sc_msg_body_destroy(SC_MSG_STEP_PLAN, m);
  sc_plan_free(&plan);
  return rc;
}

int sc_bench_codec(sc_bench *b) {
  uint8_t payload[32];
  for (int i = 0; i < 32; i++) payload[i] = (uint8_t)(i * 7);
  sc_msg_ping ping = {.seq = 123456, .sent_ns = 1764430000123456789ull,
                      .payload = {payload, sizeof payload}};
  int rc = measure(b, "ping", "\"payload\":32", SC_MSG_PING, &ping);
  if (rc == 0) rc = bench_step_plan(b);
  return rc;
}
