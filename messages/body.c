/* body.c - allocation, deep free and deep equality of message bodies, all driven by the
 * field descriptors (schema_desc.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "messages/messages.h"
#include "messages/schema_desc.h"

const char *sc_msg_type_name(int type) {
  const sc_msg_desc *desc = sc_msg_desc_of(type);
  return desc ? desc->name : NULL;
}

int sc_msg_type_from_name(const char *name) {
  for (int t = 0; t < SC_MSG_COUNT; t++)
    if (strcmp(sc_msg_desc_of(t)->name, name) == 0) return t;
  return -1;
}

bool sc_msg_in_process_only(int type) {
  switch (type) {
#define SC_IN_PROCESS(NAME) case SC_MSG_##NAME:
#include "messages/schema.def"
    return true;
  default:
    return false;
  }
}

void *sc_msg_body_new(int type) {
  const sc_msg_desc *desc = sc_msg_desc_of(type);
  return desc ? calloc(1, desc->size) : NULL;
}

static void clear_struct(const sc_msg_desc *desc, uint8_t *base) {
  for (uint32_t i = 0; i < desc->num_fields; i++) {
    const sc_msg_field *f = &desc->fields[i];
    uint8_t *at = base + f->offset;
    switch (f->kind) {
    case SC_FK_STR: {
      char *s;
      memcpy(&s, at, sizeof s);
      free(s);
      break;
    }
    case SC_FK_BIN: free(((sc_msg_bin *)at)->data); break;
    case SC_FK_ARRAY: {
      sc_msg_arr_any arr;
      memcpy(&arr, at, sizeof arr);
      free(arr.v);
      break;
    }
    case SC_FK_STRUCT: clear_struct(f->sub, at); break;
    case SC_FK_SARRAY: {
      sc_msg_arr_any arr;
      memcpy(&arr, at, sizeof arr);
      for (uint32_t k = 0; k < arr.n && arr.v != NULL; k++)
        clear_struct(f->sub, (uint8_t *)arr.v + (size_t)k * f->sub->size);
      free(arr.v);
      break;
    }
    default: break;
    }
  }
  memset(base, 0, desc->size);
}

void sc_msg_body_clear(int type, void *body) {
  const sc_msg_desc *desc = sc_msg_desc_of(type);
  if (desc != NULL && body != NULL) clear_struct(desc, body);
}

void sc_msg_body_destroy(int type, void *body) {
  if (body == NULL) return;
  sc_msg_body_clear(type, body);
  free(body);
}

static bool scalar_equal(int k, const void *a, const void *b) {
  if (k == SC_FK_F32) {
    float x, y;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    return (isnan(x) && isnan(y)) || memcmp(&x, &y, 4) == 0;
  }
  if (k == SC_FK_F64) {
    double x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return (isnan(x) && isnan(y)) || memcmp(&x, &y, 8) == 0;
  }
  return sc_msg_load_int(k, a) == sc_msg_load_int(k, b);
}

static bool struct_equal(const sc_msg_desc *desc, const uint8_t *a, const uint8_t *b) {
  for (uint32_t i = 0; i < desc->num_fields; i++) {
    const sc_msg_field *f = &desc->fields[i];
    const uint8_t *x = a + f->offset, *y = b + f->offset;
    switch (f->kind) {
    case SC_FK_STR: {
      const char *s, *t;
      memcpy(&s, x, sizeof s);
      memcpy(&t, y, sizeof t);
      if (strcmp(s ? s : "", t ? t : "") != 0) return false;
      break;
    }
    case SC_FK_BIN: {
      const sc_msg_bin *s = (const sc_msg_bin *)x, *t = (const sc_msg_bin *)y;
      if (s->len != t->len || (s->len && memcmp(s->data, t->data, s->len) != 0)) return false;
      break;
    }
    case SC_FK_ACTOR: {
      const sc_actor_id *s = (const sc_actor_id *)x, *t = (const sc_actor_id *)y;
      if (s->node != t->node || s->slot != t->slot || s->gen != t->gen) return false;
      break;
    }
    case SC_FK_ARRAY:
    case SC_FK_SARRAY: {
      sc_msg_arr_any s, t;
      memcpy(&s, x, sizeof s);
      memcpy(&t, y, sizeof t);
      if (s.n != t.n) return false;
      const size_t es = f->kind == SC_FK_ARRAY ? sc_msg_kind_size(f->elem) : f->sub->size;
      for (uint32_t k = 0; k < s.n; k++) {
        const uint8_t *ex = (const uint8_t *)s.v + (size_t)k * es;
        const uint8_t *ey = (const uint8_t *)t.v + (size_t)k * es;
        if (f->kind == SC_FK_ARRAY ? !scalar_equal(f->elem, ex, ey)
                                   : !struct_equal(f->sub, ex, ey))
          return false;
      }
      break;
    }
    case SC_FK_STRUCT:
      if (!struct_equal(f->sub, x, y)) return false;
      break;
    default:
      if (!scalar_equal(f->kind, x, y)) return false;
      break;
    }
  }
  return true;
}

bool sc_msg_body_equal(int type, const void *a, const void *b) {
  const sc_msg_desc *desc = sc_msg_desc_of(type);
  if (desc == NULL || a == NULL || b == NULL) return a == b;
  return struct_equal(desc, a, b);
}
