/* render.c - JSON rendering of envelopes and bodies for taps and logs, driven by the
 * field descriptors. Field names become keys; nested structs become objects; binary
 * data is shown as its length and the hex of its first bytes (taps must stay cheap). */
#include <stdio.h>
#include <string.h>

#include "messages/messages.h"
#include "messages/schema_desc.h"

#define BIN_HEX_MAX 64

static void render_scalar(sc_jsonw *w, int k, const void *p) {
  if (k == SC_FK_BOOL) {
    sc_jsonw_bool(w, *(const bool *)p);
  } else if (k == SC_FK_F32) {
    float v;
    memcpy(&v, p, 4);
    sc_jsonw_double(w, v);
  } else if (k == SC_FK_F64) {
    double v;
    memcpy(&v, p, 8);
    sc_jsonw_double(w, v);
  } else if (sc_msg_kind_is_signed(k)) {
    sc_jsonw_int(w, (int64_t)sc_msg_load_int(k, p));
  } else {
    sc_jsonw_uint(w, sc_msg_load_int(k, p));
  }
}

static void render_actor(sc_jsonw *w, const sc_actor_id *a) {
  char s[40];
  snprintf(s, sizeof s, "%u.%u.%u", a->node, a->slot, a->gen);
  sc_jsonw_str_val(w, s);
}

static void render_struct(sc_jsonw *w, const sc_msg_desc *desc, const uint8_t *base) {
  sc_jsonw_obj_begin(w);
  for (uint32_t i = 0; i < desc->num_fields; i++) {
    const sc_msg_field *f = &desc->fields[i];
    const uint8_t *at = base + f->offset;
    sc_jsonw_key(w, f->name);
    switch (f->kind) {
    case SC_FK_STR: {
      const char *s;
      memcpy(&s, at, sizeof s);
      sc_jsonw_str_val(w, s ? s : "");
      break;
    }
    case SC_FK_BIN: {
      const sc_msg_bin *b = (const sc_msg_bin *)at;
      char hex[2 * BIN_HEX_MAX + 1];
      const uint32_t shown = b->len < BIN_HEX_MAX ? b->len : BIN_HEX_MAX;
      for (uint32_t k = 0; k < shown; k++) snprintf(hex + 2 * k, 3, "%02x", b->data[k]);
      hex[2 * shown] = '\0';
      sc_jsonw_obj_begin(w);
      sc_jsonw_kv_int(w, "len", b->len);
      sc_jsonw_kv_str(w, "hex", hex);
      sc_jsonw_obj_end(w);
      break;
    }
    case SC_FK_ACTOR: render_actor(w, (const sc_actor_id *)at); break;
    case SC_FK_ARRAY:
    case SC_FK_SARRAY: {
      sc_msg_arr_any arr;
      memcpy(&arr, at, sizeof arr);
      if (f->kind == SC_FK_ARRAY && f->elem == SC_FK_I32) {
        sc_jsonw_int32_array(w, arr.v, arr.n);
        break;
      }
      const size_t es = f->kind == SC_FK_ARRAY ? sc_msg_kind_size(f->elem) : f->sub->size;
      sc_jsonw_arr_begin(w);
      for (uint32_t k = 0; k < arr.n; k++) {
        const uint8_t *el = (const uint8_t *)arr.v + (size_t)k * es;
        if (f->kind == SC_FK_ARRAY)
          render_scalar(w, f->elem, el);
        else
          render_struct(w, f->sub, el);
      }
      sc_jsonw_arr_end(w);
      break;
    }
    case SC_FK_STRUCT: render_struct(w, f->sub, at); break;
    default: render_scalar(w, f->kind, at); break;
    }
  }
  sc_jsonw_obj_end(w);
}

int sc_msg_render_body_json(int type, const void *body, sc_jsonw *w) {
  const sc_msg_desc *desc = sc_msg_desc_of(type);
  if (desc == NULL || body == NULL) return SC_EINVAL;
  render_struct(w, desc, body);
  return sc_jsonw_status(w);
}

int sc_msg_render_json(const sc_envelope *env, const void *body, sc_jsonw *w) {
  const sc_msg_desc *desc = sc_msg_desc_of(env->type);
  if (desc == NULL || body == NULL) return SC_EINVAL;
  char version[16];
  snprintf(version, sizeof version, "%u.%u", env->major, env->minor);
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_str(w, "type", desc->name);
  sc_jsonw_kv_str(w, "version", version);
  sc_jsonw_key(w, "step");
  sc_jsonw_uint(w, env->step);
  sc_jsonw_key(w, "seq");
  sc_jsonw_uint(w, env->seq);
  sc_jsonw_key(w, "src");
  render_actor(w, &env->src);
  sc_jsonw_key(w, "dst");
  render_actor(w, &env->dst);
  sc_jsonw_key(w, "trace_id");
  sc_jsonw_uint(w, env->trace_id);
  sc_jsonw_key(w, "body");
  render_struct(w, desc, body);
  sc_jsonw_obj_end(w);
  return sc_jsonw_status(w);
}
