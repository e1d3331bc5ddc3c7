#include "tools/tap_steps.h"

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "actors/runtime/sc_tap_record.h"
#include "base/clock.h"

struct sc_tap_steps {
  void *zctx, *sub;
  zmq_msg_t batch; /* the tap message being read (records of one batch) */
  const uint8_t *p;
  size_t left;
  bool have;
};

int sc_tap_steps_open(const char *endpoint, sc_tap_steps **out) {
  *out = NULL;
  sc_tap_steps *t = calloc(1, sizeof *t);
  if (t == NULL) return SC_ENOMEM;
  static const char topic[] = "0/scheduler/step_result";
  const int zero = 0;
  t->zctx = zmq_ctx_new();
  t->sub = t->zctx ? zmq_socket(t->zctx, ZMQ_SUB) : NULL;
  if (t->sub == NULL || zmq_setsockopt(t->sub, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_setsockopt(t->sub, ZMQ_SUBSCRIBE, topic, sizeof topic - 1) != 0 ||
      zmq_connect(t->sub, endpoint) != 0) {
    sc_tap_steps_close(t);
    return SC_EIO;
  }
  *out = t;
  return 0;
}

/* The next tap message's record batch into t (a topic frame, then the batch); false when
 * none came within ms. */
static bool next_batch(sc_tap_steps *t, int ms) {
  if (t->have) zmq_msg_close(&t->batch);
  t->have = false;
  zmq_pollitem_t it = {.socket = t->sub, .events = ZMQ_POLLIN};
  if (zmq_poll(&it, 1, ms) <= 0) return false;
  zmq_msg_t topic;
  zmq_msg_init(&topic);
  const bool more = zmq_msg_recv(&topic, t->sub, 0) >= 0 && zmq_msg_more(&topic);
  zmq_msg_close(&topic);
  if (!more) return true; /* (a message without a batch: nothing in it) */
  zmq_msg_init(&t->batch);
  if (zmq_msg_recv(&t->batch, t->sub, 0) < 0) {
    zmq_msg_close(&t->batch);
    return true;
  }
  t->have = true;
  t->p = zmq_msg_data(&t->batch);
  t->left = zmq_msg_size(&t->batch);
  return true;
}

int sc_tap_steps_next(sc_tap_steps *t, int ms, sc_msg_step_result **r) {
  *r = NULL;
  const uint64_t until = sc_now_ns() + (uint64_t)ms * 1000000ull;
  for (;;) {
    sc_tap_record rec;
    if (t->have && sc_tap_record_next(&t->p, &t->left, &rec) == 1) {
      sc_envelope env;
      void *body = NULL;
      if (sc_msg_decode(rec.msg, rec.len, &env, &body, NULL) != 0) return SC_EPROTO;
      if (env.type == SC_MSG_STEP_RESULT) {
        *r = body;
        return 0;
      }
      sc_msg_body_destroy(env.type, body);
      continue;
    }
    const uint64_t now = sc_now_ns();
    if (now >= until || !next_batch(t, (int)((until - now) / 1000000ull))) return SC_ETIMEDOUT;
  }
}

int sc_tap_steps_drain(sc_tap_steps *t, int ms) {
  int n = 0;
  sc_msg_step_result *r;
  while (sc_tap_steps_next(t, ms, &r) != SC_ETIMEDOUT) {
    if (r) sc_msg_body_destroy(SC_MSG_STEP_RESULT, r);
    n++;
  }
  return n;
}

void sc_tap_steps_close(sc_tap_steps *t) {
  if (t == NULL) return;
  if (t->have) zmq_msg_close(&t->batch);
  if (t->sub) zmq_close(t->sub);
  if (t->zctx) zmq_ctx_term(t->zctx);
  free(t);
}
