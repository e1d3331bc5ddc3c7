/* make_seeds.c - writes the fuzzer's seed corpus (tests/fuzz/corpus/): random valid
 * messages of every type, real step plans from the planner, and the known-hostile
 * inputs (the 5-byte array bomb, nesting past the limit, a forged string length).
 * Usage: fuzz_seeds DIR. Rerun after schema changes and commit the files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/msg_random.h"
#include "messages/messages.h"
#include "model/model_defaults.h"
#include "plan/plan_wire.h"

static int write_file(const char *dir, const char *name, const uint8_t *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL) return -1;
  const size_t w = fwrite(p, 1, n, f);
  return fclose(f) == 0 && w == n ? 0 : -1;
}

static int plan_seed(const char *dir, const char *name, int pcp, int decodes, int prefills,
                     int len, sc_buf *buf) {
  sc_plan_config cfg;
  sc_model_plan_config_default(&cfg);
  cfg.pcp = cfg.dcp = pcp;
  sc_batch_req reqs[64];
  int n = 0;
  for (int i = 0; i < decodes; i++)
    reqs[n++] = (sc_batch_req){.id = i, .computed = 50 + 13 * i, .scheduled = 1};
  for (int i = 0; i < prefills; i++)
    reqs[n++] = (sc_batch_req){.id = n, .computed = 3 * i, .scheduled = len + i, .prefill = true};
  sc_plan plan;
  sc_plan_init(&plan);
  int rc = sc_plan_build(&plan, &cfg, reqs, n, NULL);
  sc_msg_step_plan *m = sc_msg_body_new(SC_MSG_STEP_PLAN);
  sc_plan_wire wire;
  sc_plan_wire_of(&plan, NULL, &wire);
  if (rc == 0 && m != NULL) rc = sc_msg_step_plan_from_wire(&wire, m);
  sc_envelope env = {.type = SC_MSG_STEP_PLAN, .step = 3};
  if (rc == 0) rc = sc_msg_encode(&env, m, buf);
  if (rc == 0) rc = write_file(dir, name, buf->data, buf->len);
  sc_msg_body_destroy(SC_MSG_STEP_PLAN, m);
  sc_plan_free(&plan);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  const char *dir = argv[1];
  sc_msg_limits lim;
  sc_msg_limits_default(&lim);
  lim.max_str = 64; /* small seeds mutate faster */
  lim.max_bin = 64;
  lim.max_array = 16;
  lim.max_prompt_len = 32;
  msg_rng r = {.s = 2026};
  sc_buf buf;
  sc_buf_init(&buf);
  for (int t = 0; t < SC_MSG_COUNT; t++)
    for (int i = 0; i < 3; i++) {
      void *body = sc_msg_body_new(t);
      sc_envelope env;
      msg_random_envelope(&r, t, &env);
      if (body == NULL || msg_random_body(&r, t, body, &lim) != 0 ||
          sc_msg_encode(&env, body, &buf) != 0)
        return 1;
      char name[96];
      snprintf(name, sizeof name, "%s-%d.bin", sc_msg_type_name(t), i);
      if (write_file(dir, name, buf.data, buf.len) != 0) return 1;
      sc_msg_body_destroy(t, body);
    }
  if (plan_seed(dir, "step_plan-spec-example.bin", 2, 0, 2, 9, &buf) ||
      plan_seed(dir, "step_plan-mixed-p4.bin", 4, 6, 2, 40, &buf) ||
      plan_seed(dir, "step_plan-decode-p2.bin", 2, 8, 0, 0, &buf))
    return 1;
  static const uint8_t bomb[] = {0xdd, 0x04, 0x00, 0x00, 0x00};
  uint8_t deep[12];
  memset(deep, 0x91, sizeof deep);
  deep[11] = 0x00;
  static const uint8_t str_bomb[] = {0x99, 1, 0, 0, 0, 0, 0x93, 0, 0, 0, 0x93, 0, 0, 0, 0,
                                     0x93, 0, 0, 0xdb, 0x7f, 0xff, 0xff, 0xff};
  if (write_file(dir, "hostile-array-bomb.bin", bomb, sizeof bomb) ||
      write_file(dir, "hostile-deep.bin", deep, sizeof deep) ||
      write_file(dir, "hostile-str-length.bin", str_bomb, sizeof str_bomb))
    return 1;
  sc_buf_free(&buf);
  return 0;
}
