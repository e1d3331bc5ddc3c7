/* msg_random.c - random valid message bodies (see msg_random.h). */
#include "msg_random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "messages/schema_desc.h"
#include "tests/common/sc_test_rng.h"

uint64_t msg_rng_next(msg_rng *r) { return sc_test_rng_next(&r->s); }

static uint64_t below(msg_rng *r, uint64_t n) { return n ? msg_rng_next(r) % n : 0; }

/* A value of random magnitude, so that every msgpack integer width is exercised. */
static uint64_t random_bits(msg_rng *r) {
  const unsigned bits = (unsigned)below(r, 65);
  return bits == 64 ? msg_rng_next(r) : msg_rng_next(r) & ((1ull << bits) - 1);
}

static void random_scalar(msg_rng *r, int k, const sc_msg_field *f, void *at) {
  if (k == SC_FK_F32) {
    float v;
    do {
      uint32_t b = (uint32_t)msg_rng_next(r);
      memcpy(&v, &b, 4);
    } while (!isfinite(v));
    memcpy(at, &v, 4);
    return;
  }
  if (k == SC_FK_F64) {
    double v;
    do {
      uint64_t b = msg_rng_next(r);
      memcpy(&v, &b, 8);
    } while (!isfinite(v));
    memcpy(at, &v, 8);
    return;
  }
  if (k == SC_FK_BOOL) {
    *(bool *)at = msg_rng_next(r) & 1;
    return;
  }
  uint64_t v;
  if (f != NULL && f->has_range) {
    const uint64_t span = (uint64_t)f->hi - (uint64_t)f->lo;
    const uint64_t pick = below(r, 4);
    if (pick == 0) v = (uint64_t)f->lo;
    else if (pick == 1) v = (uint64_t)f->hi;
    else v = (uint64_t)f->lo + (span == UINT64_MAX ? random_bits(r) : random_bits(r) % (span + 1));
  } else {
    v = random_bits(r);
    if (sc_msg_kind_is_signed(k) && (msg_rng_next(r) & 1)) v = 0 - v;
  }
  sc_msg_store_int(k, at, v);
}

static int random_struct(msg_rng *r, const sc_msg_desc *desc, uint8_t *base,
                         const sc_msg_limits *lim) {
  for (uint32_t i = 0; i < desc->num_fields; i++) {
    const sc_msg_field *f = &desc->fields[i];
    uint8_t *at = base + f->offset;
    switch (f->kind) {
    case SC_FK_STR: {
      uint32_t len = (uint32_t)(below(r, 8) == 0 ? below(r, 400) : below(r, 24));
      if (len > lim->max_str) len = lim->max_str;
      char *s = malloc(len + 1);
      if (s == NULL) return SC_ENOMEM;
      /* Valid UTF-8: ASCII without NUL, and 2-, 3- and 4-byte characters. */
      static const char *const multi[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
      uint32_t k = 0;
      while (k < len) {
        const uint64_t pick = below(r, 8);
        const char *m = pick < 3 ? multi[pick] : NULL;
        if (m != NULL && k + strlen(m) <= len) {
          memcpy(s + k, m, strlen(m));
          k += (uint32_t)strlen(m);
        } else {
          s[k++] = (char)(1 + below(r, 127));
        }
      }
      s[len] = '\0';
      memcpy(at, &s, sizeof s);
      break;
    }
    case SC_FK_BIN: {
      sc_msg_bin *b = (sc_msg_bin *)at;
      uint32_t len = (uint32_t)(below(r, 8) == 0 ? below(r, 600) : below(r, 40));
      if (len > lim->max_bin) len = lim->max_bin;
      if (len) {
        if ((b->data = malloc(len)) == NULL) return SC_ENOMEM;
        for (uint32_t k = 0; k < len; k++) b->data[k] = (uint8_t)msg_rng_next(r);
      }
      b->len = len;
      break;
    }
    case SC_FK_ACTOR: {
      sc_actor_id *a = (sc_actor_id *)at;
      a->node = (uint16_t)random_bits(r);
      a->slot = (uint16_t)random_bits(r);
      a->gen = (uint32_t)random_bits(r);
      break;
    }
    case SC_FK_ARRAY:
    case SC_FK_SARRAY: {
      uint32_t n = (uint32_t)(f->kind == SC_FK_SARRAY ? below(r, 5)
                              : below(r, 16) == 0 ? below(r, 70) : below(r, 12));
      if (n > lim->max_array) n = lim->max_array;
      const size_t es = f->kind == SC_FK_ARRAY ? sc_msg_kind_size(f->elem) : f->sub->size;
      sc_msg_arr_any arr = {NULL, 0};
      if (n) {
        if ((arr.v = calloc(n, es)) == NULL) return SC_ENOMEM;
        arr.n = n;
      }
      memcpy(at, &arr, sizeof arr);
      for (uint32_t k = 0; k < n; k++) {
        uint8_t *el = (uint8_t *)arr.v + (size_t)k * es;
        if (f->kind == SC_FK_ARRAY) {
          random_scalar(r, f->elem, f, el);
        } else {
          int rc = random_struct(r, f->sub, el, lim);
          if (rc) return rc;
        }
      }
      break;
    }
    case SC_FK_STRUCT: {
      int rc = random_struct(r, f->sub, at, lim);
      if (rc) return rc;
      break;
    }
    default: random_scalar(r, f->kind, f, at); break;
    }
  }
  return 0;
}

static int tokens(msg_rng *r, sc_msg_arr_i32 *t, uint32_t n, const sc_msg_limits *lim) {
  free(t->v);
  t->v = NULL;
  t->n = 0;
  if (n == 0) return 0;
  if ((t->v = malloc(n * sizeof *t->v)) == NULL) return SC_ENOMEM;
  t->n = n;
  for (uint32_t i = 0; i < n; i++) t->v[i] = (int32_t)below(r, (uint64_t)lim->vocab_size);
  return 0;
}

int msg_random_body(msg_rng *r, int type, void *body, const sc_msg_limits *lim) {
  int rc = random_struct(r, sc_msg_desc_of(type), body, lim);
  if (rc) return rc;
  /* The rules that ranges cannot express (check.c). */
  switch (type) {
  case SC_MSG_CLIENT_SUBMIT: {
    sc_msg_client_submit *m = body;
    m->temperature = (float)below(r, 2000) / 1000.0f;
    m->max_tokens = 1 + (int32_t)below(r, (uint64_t)lim->max_new_tokens);
    const uint32_t cap = lim->max_prompt_len < 200 ? (uint32_t)lim->max_prompt_len : 200;
    return tokens(r, &m->prompt, 1 + (uint32_t)below(r, cap), lim);
  }
  case SC_MSG_CLIENT_TOKEN: {
    sc_msg_client_token *m = body;
    return tokens(r, &m->tokens, m->tokens.n, lim);
  }
  case SC_MSG_GLOBAL_BATCH: {
    sc_msg_global_batch *m = body;
    uint32_t total = 0;
    for (uint32_t i = 0; i < m->reqs.n; i++) {
      m->reqs.v[i].scheduled = (int32_t)below(r, 9);
      total += (uint32_t)m->reqs.v[i].scheduled;
    }
    return tokens(r, &m->tokens, total, lim);
  }
  default: return 0;
  }
}

void msg_random_envelope(msg_rng *r, int type, sc_envelope *env) {
  *env = (sc_envelope){.major = SC_MSG_MAJOR, .minor = SC_MSG_MINOR, .type = (uint16_t)type,
                       .step = random_bits(r), .seq = random_bits(r),
                       .trace_id = random_bits(r)};
  env->src = (sc_actor_id){(uint16_t)random_bits(r), (uint16_t)random_bits(r),
                           (uint32_t)random_bits(r)};
  env->dst = (sc_actor_id){(uint16_t)random_bits(r), (uint16_t)random_bits(r),
                           (uint32_t)random_bits(r)};
}
