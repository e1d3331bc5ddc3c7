/* codec.c - the one generic msgpack encoder and decoder. Both walk the field
 * descriptors of schema_desc.c; nothing here knows a particular message type.
 *
 * Decoding order (messages.h): size limit (untrusted only), sc_msg_prewalk on the raw
 * bytes, the envelope, then one pass over the (now proven well-formed and bounded)
 * bytes that fills the body field by field with type, width, range and length checks,
 * and finally the type's own check function. Both passes read the bytes directly; no
 * object tree is built. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "messages/messages.h"
#include "messages/schema_desc.h"

/* ---- encoding ----
 * A direct msgpack writer into the caller's sc_buf: smallest encoding for every integer,
 * float32 for F32, str/bin/array headers by size. (msgpack-c's packer does the same
 * through a write callback per item, which cost 5x more on step plans.) */

typedef struct {
  sc_buf *b;
  bool oom;
} wr;

/* Room for n more bytes, or NULL (sticky oom). */
static inline uint8_t *room(wr *w, size_t n) {
  if (w->b->cap - w->b->len < n && (w->oom || sc_buf_reserve(w->b, n) != 0)) {
    w->oom = true;
    return NULL;
  }
  return w->b->data + w->b->len;
}

static inline void put_be(uint8_t *p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

/* A header byte and an n-byte big-endian value at p; returns the byte after them. */
static inline uint8_t *cur_tagged(uint8_t *p, uint8_t tag, uint64_t v, int n) {
  p[0] = tag;
  put_be(p + 1, v, n);
  return p + 1 + n;
}

/* A header byte followed by an n-byte big-endian value. */
static inline void put_tagged(wr *w, uint8_t tag, uint64_t v, int n) {
  uint8_t *p = room(w, 9);
  if (p != NULL) w->b->len += (size_t)(cur_tagged(p, tag, v, n) - p);
}

static inline void put_byte(wr *w, uint8_t v) {
  uint8_t *p = room(w, 1);
  if (p == NULL) return;
  *p = v;
  w->b->len++;
}

/* Writes v at p (room for 9 bytes); returns the byte after it. */
static inline uint8_t *cur_uint(uint8_t *p, uint64_t v) {
  if (v < 128) {
    *p = (uint8_t)v;
    return p + 1;
  }
  const int n = v <= UINT8_MAX ? 1 : v <= UINT16_MAX ? 2 : v <= UINT32_MAX ? 4 : 8;
  p[0] = (uint8_t)(n == 1 ? 0xcc : n == 2 ? 0xcd : n == 4 ? 0xce : 0xcf);
  put_be(p + 1, v, n);
  return p + 1 + n;
}

/* Writes v at p (room for 9 bytes); returns the byte after it. */
static inline uint8_t *cur_int(uint8_t *p, int64_t v) {
  if (v >= 0) return cur_uint(p, (uint64_t)v);
  if (v >= -32) {
    *p = (uint8_t)(int8_t)v;
    return p + 1;
  }
  if (v >= INT8_MIN) return cur_tagged(p, 0xd0, (uint64_t)v, 1);
  if (v >= INT16_MIN) return cur_tagged(p, 0xd1, (uint64_t)v, 2);
  if (v >= INT32_MIN) return cur_tagged(p, 0xd2, (uint64_t)v, 4);
  return cur_tagged(p, 0xd3, (uint64_t)v, 8);
}

static void put_array(wr *w, uint32_t n) {
  if (n < 16) put_byte(w, (uint8_t)(0x90 | n));
  else if (n <= UINT16_MAX) put_tagged(w, 0xdc, n, 2);
  else put_tagged(w, 0xdd, n, 4);
}

static void put_bytes(wr *w, const void *data, size_t n) {
  uint8_t *p = room(w, n);
  if (p == NULL || n == 0) return;
  memcpy(p, data, n);
  w->b->len += n;
}

static void put_str(wr *w, const char *s, uint32_t n) {
  if (n < 32) put_byte(w, (uint8_t)(0xa0 | n));
  else if (n <= UINT8_MAX) put_tagged(w, 0xd9, n, 1);
  else if (n <= UINT16_MAX) put_tagged(w, 0xda, n, 2);
  else put_tagged(w, 0xdb, n, 4);
  put_bytes(w, s, n);
}

static void put_bin(wr *w, const uint8_t *data, uint32_t n) {
  if (n <= UINT8_MAX) put_tagged(w, 0xc4, n, 1);
  else if (n <= UINT16_MAX) put_tagged(w, 0xc5, n, 2);
  else put_tagged(w, 0xc6, n, 4);
  put_bytes(w, data, n);
}

/* Writes [node, slot, gen] at p (room for ACTOR_MAX bytes: u16, u16, u32); returns the
 * byte after it. */
#define ACTOR_MAX (1 + 3 + 3 + 5)
static inline uint8_t *cur_actor(uint8_t *p, const sc_actor_id *a) {
  *p++ = 0x90 | 3;
  p = cur_uint(p, a->node);
  p = cur_uint(p, a->slot);
  return cur_uint(p, a->gen);
}

static void put_actor(wr *w, const sc_actor_id *a) {
  uint8_t *p = room(w, ACTOR_MAX);
  if (p != NULL) w->b->len += (size_t)(cur_actor(p, a) - p);
}

/* The envelope precedes every message sent, received or tapped, so it is written with one
 * room check and a local cursor: its largest encoding is an array header, five uints of
 * up to 9 bytes, two actor ids and the trace id. */
#define ENVELOPE_MAX (1 + 5 * 9 + 2 * ACTOR_MAX + 9)
static void put_envelope(wr *w, const sc_envelope *env) {
  uint8_t *const start = room(w, ENVELOPE_MAX);
  if (start == NULL) return;
  uint8_t *p = start;
  *p++ = 0x90 | 9;
  p = cur_uint(p, SC_MSG_MAJOR);
  p = cur_uint(p, SC_MSG_MINOR);
  p = cur_uint(p, env->type);
  p = cur_uint(p, env->step);
  p = cur_uint(p, env->seq);
  p = cur_actor(p, &env->src);
  p = cur_actor(p, &env->dst);
  p = cur_uint(p, env->trace_id);
  w->b->len += (size_t)(p - start);
}

/* Writes the scalar of kind k at at to p (room for 9 bytes); returns the byte after it. */
static inline uint8_t *cur_scalar(uint8_t *p, int k, const void *at) {
  switch (k) {
  case SC_FK_BOOL: *p = *(const bool *)at ? 0xc3 : 0xc2; return p + 1;
  case SC_FK_F32: {
    uint32_t bits;
    memcpy(&bits, at, 4);
    return cur_tagged(p, 0xca, bits, 4);
  }
  case SC_FK_F64: {
    uint64_t bits;
    memcpy(&bits, at, 8);
    return cur_tagged(p, 0xcb, bits, 8);
  }
  default:
    if (sc_msg_kind_is_signed(k)) return cur_int(p, (int64_t)sc_msg_load_int(k, at));
    return cur_uint(p, sc_msg_load_int(k, at));
  }
}

static void enc_scalar(wr *w, int k, const void *at) {
  uint8_t *p = room(w, 9);
  if (p != NULL) w->b->len += (size_t)(cur_scalar(p, k, at) - p);
}

/* Fields written with a cursor: a scalar takes at most 9 bytes, an actor id ACTOR_MAX. */
static inline bool field_is_fixed(int k) {
  return sc_msg_kind_is_scalar(k) || k == SC_FK_ACTOR;
}

static void enc_struct(wr *w, const sc_msg_desc *desc, const uint8_t *base);

static void enc_field(wr *w, const sc_msg_field *f, const uint8_t *base) {
  const uint8_t *at = base + f->offset;
  switch (f->kind) {
  case SC_FK_STR: {
    const char *s;
    memcpy(&s, at, sizeof s);
    const size_t len = s ? strlen(s) : 0;
    assert(len <= UINT32_MAX);
    put_str(w, s, (uint32_t)len);
    break;
  }
  case SC_FK_BIN: {
    const sc_msg_bin *b = (const sc_msg_bin *)at;
    assert(b->len == 0 || b->data != NULL);
    put_bin(w, b->data, b->len);
    break;
  }
  case SC_FK_ACTOR: put_actor(w, (const sc_actor_id *)at); break;
  case SC_FK_ARRAY: {
    sc_msg_arr_any arr;
    memcpy(&arr, at, sizeof arr);
    assert(arr.n == 0 || arr.v != NULL);
    const size_t es = sc_msg_kind_size(f->elem);
    put_array(w, arr.n);
    for (uint32_t i = 0; i < arr.n; i++)
      enc_scalar(w, f->elem, (const uint8_t *)arr.v + (size_t)i * es);
    break;
  }
  case SC_FK_STRUCT: enc_struct(w, f->sub, at); break;
  case SC_FK_SARRAY: {
    sc_msg_arr_any arr;
    memcpy(&arr, at, sizeof arr);
    assert(arr.n == 0 || arr.v != NULL);
    put_array(w, arr.n);
    for (uint32_t i = 0; i < arr.n; i++)
      enc_struct(w, f->sub, (const uint8_t *)arr.v + (size_t)i * f->sub->size);
    break;
  }
  default: enc_scalar(w, f->kind, at); break;
  }
}

/* Each run of scalar and actor-id fields is written with one room check and a cursor, as
 * the envelope is (a struct of scalars, such as a step plan's per-request entries, is one
 * run); strings, binaries, arrays and nested structs go through enc_field. */
static void enc_struct(wr *w, const sc_msg_desc *desc, const uint8_t *base) {
  put_array(w, desc->num_fields);
  uint32_t i = 0;
  while (i < desc->num_fields) {
    uint32_t end = i;
    while (end < desc->num_fields && field_is_fixed(desc->fields[end].kind)) end++;
    if (end > i) {
      uint8_t *const start = room(w, (size_t)(end - i) * ACTOR_MAX);
      if (start == NULL) return;
      uint8_t *p = start;
      for (; i < end; i++) {
        const sc_msg_field *f = &desc->fields[i];
        p = f->kind == SC_FK_ACTOR ? cur_actor(p, (const sc_actor_id *)(base + f->offset))
                                   : cur_scalar(p, f->kind, base + f->offset);
      }
      w->b->len += (size_t)(p - start);
    }
    if (i < desc->num_fields) enc_field(w, &desc->fields[i++], base);
  }
}

int sc_msg_encode(const sc_envelope *env, const void *body, sc_buf *out) {
  sc_buf_reset(out);
  return sc_msg_encode_append(env, body, out);
}

int sc_msg_encode_append(const sc_envelope *env, const void *body, sc_buf *out) {
  const sc_msg_desc *desc = sc_msg_desc_of(env->type);
  if (desc == NULL || body == NULL) return SC_EINVAL;
  const size_t start = out->len;
  wr w = {.b = out, .oom = false};
  put_envelope(&w, env);
  enc_struct(&w, desc, body);
  if (w.oom) {
    out->len = start;
    return SC_ENOMEM;
  }
  return 0;
}

/* ---- decoding ----
 * A reader over bytes that sc_msg_prewalk accepted: every header is complete and every
 * declared length lies within the input, so it reads without bounds checks of its own.
 * (It replaced msgpack-c's parser, which built an object tree in a zone first: on the
 * GPU host that parse was the largest part of a receiving loop's time per message,
 * bench/messages.md, fifth pass.) */

enum {
  V_NIL, V_BOOL, V_UINT, V_INT, V_F32, V_F64, V_STR, V_BIN, V_ARRAY, V_MAP, V_EXT
};

/* One value's header: scalars whole; str/bin their bytes; array/map their element count
 * (the elements follow in the input). */
typedef struct {
  int type;
  union {
    bool b;
    uint64_t u; /* V_UINT, and the count of V_ARRAY / V_MAP */
    int64_t i;  /* V_INT: always negative */
    double f;
    struct {
      const uint8_t *ptr;
      uint32_t size;
    } bytes;
  } via;
} val;

typedef struct {
  const uint8_t *p;
} cursor;

static inline uint64_t rd_be(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

static inline void rd_bytes(cursor *r, val *v, int type, int lenb) {
  v->type = type;
  v->via.bytes.size = (uint32_t)rd_be(r->p, lenb);
  v->via.bytes.ptr = r->p + lenb;
  r->p += (size_t)lenb + v->via.bytes.size; /* (in 32 bits a 4 GiB length would wrap) */
}

static inline void rd_signed(cursor *r, val *v, int64_t x, int n) {
  r->p += n;
  if (x >= 0) {
    v->type = V_UINT;
    v->via.u = (uint64_t)x;
  } else {
    v->type = V_INT;
    v->via.i = x;
  }
}

/* Reads the next value's header (see val) and moves past it. */
static void rd_val(cursor *r, val *v) {
  const uint8_t b = *r->p++;
  if (b <= 0x7f) {
    v->type = V_UINT;
    v->via.u = b;
    return;
  }
  if (b >= 0xe0) {
    v->type = V_INT;
    v->via.i = (int8_t)b;
    return;
  }
  if ((b & 0xf0) == 0x90 || (b & 0xf0) == 0x80) {
    v->type = (b & 0xf0) == 0x90 ? V_ARRAY : V_MAP;
    v->via.u = b & 0x0f;
    return;
  }
  if ((b & 0xe0) == 0xa0) {
    v->type = V_STR;
    v->via.bytes.size = b & 0x1f;
    v->via.bytes.ptr = r->p;
    r->p += v->via.bytes.size;
    return;
  }
  switch (b) {
  case 0xc0: v->type = V_NIL; return;
  case 0xc2: case 0xc3: v->type = V_BOOL; v->via.b = b == 0xc3; return;
  case 0xcc: v->type = V_UINT; v->via.u = r->p[0]; r->p += 1; return;
  case 0xcd: v->type = V_UINT; v->via.u = rd_be(r->p, 2); r->p += 2; return;
  case 0xce: v->type = V_UINT; v->via.u = rd_be(r->p, 4); r->p += 4; return;
  case 0xcf: v->type = V_UINT; v->via.u = rd_be(r->p, 8); r->p += 8; return;
  case 0xd0: rd_signed(r, v, (int8_t)r->p[0], 1); return;
  case 0xd1: rd_signed(r, v, (int16_t)rd_be(r->p, 2), 2); return;
  case 0xd2: rd_signed(r, v, (int32_t)rd_be(r->p, 4), 4); return;
  case 0xd3: rd_signed(r, v, (int64_t)rd_be(r->p, 8), 8); return;
  case 0xca: {
    const uint32_t bits = (uint32_t)rd_be(r->p, 4);
    float x;
    memcpy(&x, &bits, 4);
    v->type = V_F32;
    v->via.f = x;
    r->p += 4;
    return;
  }
  case 0xcb: {
    const uint64_t bits = rd_be(r->p, 8);
    v->type = V_F64;
    memcpy(&v->via.f, &bits, 8);
    r->p += 8;
    return;
  }
  case 0xd9: rd_bytes(r, v, V_STR, 1); return;
  case 0xda: rd_bytes(r, v, V_STR, 2); return;
  case 0xdb: rd_bytes(r, v, V_STR, 4); return;
  case 0xc4: rd_bytes(r, v, V_BIN, 1); return;
  case 0xc5: rd_bytes(r, v, V_BIN, 2); return;
  case 0xc6: rd_bytes(r, v, V_BIN, 4); return;
  case 0xdc: case 0xde: /* array16, map16 */
    v->type = b == 0xdc ? V_ARRAY : V_MAP;
    v->via.u = rd_be(r->p, 2);
    r->p += 2;
    return;
  case 0xdd: case 0xdf: /* array32, map32 */
    v->type = b == 0xdd ? V_ARRAY : V_MAP;
    v->via.u = rd_be(r->p, 4);
    r->p += 4;
    return;
  case 0xd4: r->p += 1 + 1; break; /* fixext: type byte + data */
  case 0xd5: r->p += 1 + 2; break;
  case 0xd6: r->p += 1 + 4; break;
  case 0xd7: r->p += 1 + 8; break;
  case 0xd8: r->p += 1 + 16; break;
  case 0xc7: r->p += 1 + 1 + r->p[0]; break; /* ext: length, type byte, data */
  case 0xc8: r->p += 2 + 1 + rd_be(r->p, 2); break;
  case 0xc9: r->p += 4 + 1 + rd_be(r->p, 4); break;
  default: break; /* 0xc1: the pre-walk refused it */
  }
  v->type = V_EXT;
}

/* Moves past the next value, whatever it holds (a newer sender's extra fields). */
static void skip_val(cursor *r) {
  uint64_t pending = 1;
  while (pending > 0) {
    pending--;
    val v;
    rd_val(r, &v);
    if (v.type == V_ARRAY) pending += v.via.u;
    else if (v.type == V_MAP) pending += 2 * v.via.u;
  }
}

typedef struct {
  const sc_msg_limits *lim; /* NULL on the trusted path */
  cursor r;                 /* the next value to read */
  const uint8_t *end;       /* one past the input's last byte */
  bool lenient;             /* sender has a newer minor: extra trailing fields allowed */
  sc_diag *d;
  int depth;
  struct {
    const char *name;
    int64_t index; /* array element, or -1 */
  } path[SC_MSG_MAX_DEPTH + 4];
} dctx;

static const char *obj_type_name(const val *o) {
  switch (o->type) {
  case V_NIL: return "nil";
  case V_BOOL: return "a boolean";
  case V_UINT:
  case V_INT: return "an integer";
  case V_F32:
  case V_F64: return "a float";
  case V_STR: return "a string";
  case V_BIN: return "binary data";
  case V_ARRAY: return "an array";
  case V_MAP: return "a map";
  case V_EXT: return "an ext value";
  }
  return "an unknown object";
}

/* Records "type.field[3].sub: reason" in the diag; returns code. */
static int dfail(dctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int dfail(dctx *c, int code, const char *fmt, ...) {
  if (c->d == NULL) return code;
  char reason[224], path[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  size_t len = 0;
  path[0] = '\0';
  for (int i = 0; i <= c->depth && len < sizeof path; i++) {
    int w = snprintf(path + len, sizeof path - len, "%s%s", i ? "." : "", c->path[i].name);
    if (w > 0) len += (size_t)w;
    if (c->path[i].index >= 0 && len < sizeof path) {
      w = snprintf(path + len, sizeof path - len, "[%lld]", (long long)c->path[i].index);
      if (w > 0) len += (size_t)w;
    }
  }
  return sc_fail(c->d, code, "%s: %s", path, reason);
}

static const int64_t k_smin[] = {[SC_FK_I8] = INT8_MIN, [SC_FK_I16] = INT16_MIN,
                                 [SC_FK_I32] = INT32_MIN, [SC_FK_I64] = INT64_MIN};
static const uint64_t k_max[] = {[SC_FK_U8] = UINT8_MAX,  [SC_FK_U16] = UINT16_MAX,
                                 [SC_FK_U32] = UINT32_MAX, [SC_FK_U64] = UINT64_MAX,
                                 [SC_FK_I8] = INT8_MAX,   [SC_FK_I16] = INT16_MAX,
                                 [SC_FK_I32] = INT32_MAX, [SC_FK_I64] = INT64_MAX};

/* One scalar of kind k from o into at; f supplies the declared range (may be NULL). */
static int dec_scalar(dctx *c, int k, const sc_msg_field *f, const val *o, void *at) {
  if (k == SC_FK_BOOL) {
    if (o->type != V_BOOL)
      return dfail(c, SC_EPROTO, "expected a boolean, got %s", obj_type_name(o));
    *(bool *)at = o->via.b;
    return 0;
  }
  if (k == SC_FK_F32 || k == SC_FK_F64) {
    double v;
    /* Clients may write floats as float32, float64 or (for whole numbers) integers. */
    if (o->type == V_F32 || o->type == V_F64)
      v = o->via.f;
    else if (o->type == V_UINT)
      v = (double)o->via.u;
    else if (o->type == V_INT)
      v = (double)o->via.i;
    else
      return dfail(c, SC_EPROTO, "expected a number, got %s", obj_type_name(o));
    if (k == SC_FK_F32) {
      float x = (float)v;
      memcpy(at, &x, 4);
    } else {
      memcpy(at, &v, 8);
    }
    return 0;
  }
  bool neg;
  uint64_t u;
  if (o->type == V_UINT) {
    neg = false;
    u = o->via.u;
  } else if (o->type == V_INT) {
    neg = true;
    u = (uint64_t)o->via.i;
  } else {
    return dfail(c, SC_EPROTO, "expected an integer, got %s", obj_type_name(o));
  }
  if (sc_msg_kind_is_signed(k)) {
    if ((!neg && u > k_max[k]) || (neg && (int64_t)u < k_smin[k]))
      return dfail(c, SC_ERANGE, "%s%llu does not fit %s", neg ? "-" : "",
                   neg ? 0ull - (unsigned long long)u : (unsigned long long)u,
                   sc_msg_kind_name(k));
  } else if (neg) {
    return dfail(c, SC_ERANGE, "negative value %lld for an unsigned %s field",
                 (long long)(int64_t)u, sc_msg_kind_name(k));
  } else if (u > k_max[k]) {
    return dfail(c, SC_ERANGE, "%llu does not fit %s", (unsigned long long)u,
                 sc_msg_kind_name(k));
  }
  if (f != NULL && f->has_range) {
    const bool below = sc_msg_kind_is_signed(k) ? (int64_t)u < f->lo
                                                : (f->lo > 0 && u < (uint64_t)f->lo);
    const bool above = sc_msg_kind_is_signed(k) ? (int64_t)u > f->hi
                                                : (f->hi < 0 || u > (uint64_t)f->hi);
    if (below || above) {
      if (sc_msg_kind_is_signed(k))
        return dfail(c, SC_ERANGE, "%lld is outside the allowed range [%lld, %lld]",
                     (long long)(int64_t)u, (long long)f->lo, (long long)f->hi);
      return dfail(c, SC_ERANGE, "%llu is outside the allowed range [%lld, %lld]",
                   (unsigned long long)u, (long long)f->lo, (long long)f->hi);
    }
  }
  sc_msg_store_int(k, at, u);
  return 0;
}

static int dec_struct(dctx *c, const sc_msg_desc *desc, const val *o, uint8_t *base);

/* Offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or len if all are. msgpack
 * strings are UTF-8 by definition, and taps render them into JSON. */
static size_t utf8_bad(const uint8_t *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    const uint8_t b = s[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    size_t n;
    uint32_t cp, min;
    if ((b & 0xe0) == 0xc0) n = 2, cp = b & 0x1f, min = 0x80;
    else if ((b & 0xf0) == 0xe0) n = 3, cp = b & 0x0f, min = 0x800;
    else if ((b & 0xf8) == 0xf0) n = 4, cp = b & 0x07, min = 0x10000;
    else return i;
    if (n > len - i) return i;
    for (size_t k = 1; k < n; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return i;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n;
  }
  return len;
}

static int check_count(dctx *c, uint32_t n, uint32_t limit, const char *what) {
  if (c->lim != NULL && n > limit)
    return dfail(c, SC_ETOOBIG, "%u %s exceed the limit of %u", n, what, limit);
  return 0;
}

/* Fills field f of base from o, the value just read for it (a container's elements are
 * read from c->r). */
static int dec_field(dctx *c, const sc_msg_field *f, const val *o, uint8_t *base) {
  uint8_t *at = base + f->offset;
  int rc;
  switch (f->kind) {
  case SC_FK_STR: {
    if (o->type != V_STR)
      return dfail(c, SC_EPROTO, "expected a string, got %s", obj_type_name(o));
    const uint32_t len = o->via.bytes.size;
    if ((rc = check_count(c, len, c->lim ? c->lim->max_str : 0, "string bytes"))) return rc;
    if (len && memchr(o->via.bytes.ptr, '\0', len) != NULL)
      return dfail(c, SC_EPROTO, "string contains a NUL byte");
    const size_t bad = utf8_bad(o->via.bytes.ptr, len);
    if (bad != len) return dfail(c, SC_EPROTO, "string is not valid UTF-8 (byte %zu)", bad);
    char *s = malloc((size_t)len + 1);
    if (s == NULL) return dfail(c, SC_ENOMEM, "out of memory");
    if (len) memcpy(s, o->via.bytes.ptr, len);
    s[len] = '\0';
    memcpy(at, &s, sizeof s);
    return 0;
  }
  case SC_FK_BIN: {
    if (o->type != V_BIN)
      return dfail(c, SC_EPROTO, "expected binary data, got %s", obj_type_name(o));
    const uint32_t len = o->via.bytes.size;
    if ((rc = check_count(c, len, c->lim ? c->lim->max_bin : 0, "binary bytes"))) return rc;
    sc_msg_bin *b = (sc_msg_bin *)at;
    if (len) {
      if ((b->data = malloc(len)) == NULL) return dfail(c, SC_ENOMEM, "out of memory");
      memcpy(b->data, o->via.bytes.ptr, len);
    }
    b->len = len;
    return 0;
  }
  case SC_FK_ACTOR: {
    if (o->type != V_ARRAY || o->via.u != 3)
      return dfail(c, SC_EPROTO, "expected an actor id [node, slot, gen], got %s",
                   obj_type_name(o));
    sc_actor_id *a = (sc_actor_id *)at;
    val e[3];
    for (int i = 0; i < 3; i++) rd_val(&c->r, &e[i]);
    if ((rc = dec_scalar(c, SC_FK_U16, NULL, &e[0], &a->node)) ||
        (rc = dec_scalar(c, SC_FK_U16, NULL, &e[1], &a->slot)) ||
        (rc = dec_scalar(c, SC_FK_U32, NULL, &e[2], &a->gen)))
      return rc;
    return 0;
  }
  case SC_FK_ARRAY:
  case SC_FK_SARRAY: {
    if (o->type != V_ARRAY)
      return dfail(c, SC_EPROTO, "expected an array, got %s", obj_type_name(o));
    const uint32_t n = (uint32_t)o->via.u; /* (a msgpack array holds at most 2^32 - 1) */
    if ((rc = check_count(c, n, c->lim ? c->lim->max_array : 0, "array elements"))) return rc;
    /* The pre-walk proved one byte per element; a struct element is an array header and
     * at least one byte per field, so an array of structs is bounded by that, not by one
     * byte per element (else 1 MiB of fixints asks for 1 Mi * sizeof the struct). */
    if (f->kind == SC_FK_SARRAY && n > 0) {
      const size_t min_el = 1 + (size_t)f->sub->num_fields;
      const size_t left = (size_t)(c->end - c->r.p);
      if (n > left / min_el)
        return dfail(c, SC_EPROTO,
                     "%u elements of %s need at least %zu bytes each but only %zu bytes "
                     "remain (truncated or forged length)",
                     n, f->sub->name, min_el, left);
    }
    const size_t es = f->kind == SC_FK_ARRAY ? sc_msg_kind_size(f->elem) : f->sub->size;
    sc_msg_arr_any arr = {NULL, 0};
    if (n) {
      /* Bounded: the pre-walk proved n <= bytes of input remaining. */
      if ((arr.v = calloc(n, es)) == NULL) return dfail(c, SC_ENOMEM, "out of memory");
      arr.n = n;
    }
    memcpy(at, &arr, sizeof arr); /* owned by the body from here on, even on failure */
    for (uint32_t i = 0; i < n; i++) {
      c->path[c->depth].index = i;
      uint8_t *el = (uint8_t *)arr.v + (size_t)i * es;
      val e;
      rd_val(&c->r, &e);
      rc = f->kind == SC_FK_ARRAY ? dec_scalar(c, f->elem, f, &e, el)
                                  : dec_struct(c, f->sub, &e, el);
      if (rc) return rc;
    }
    c->path[c->depth].index = -1;
    return 0;
  }
  case SC_FK_STRUCT: return dec_struct(c, f->sub, o, at);
  default: return dec_scalar(c, f->kind, f, o, at);
  }
}

/* Fills the struct at base from o (its array header, just read) and the fields that
 * follow; a newer sender's extra trailing fields are skipped. */
static int dec_struct(dctx *c, const sc_msg_desc *desc, const val *o, uint8_t *base) {
  if (o->type != V_ARRAY)
    return dfail(c, SC_EPROTO, "expected %s as an array of %u fields, got %s", desc->name,
                 desc->num_fields, obj_type_name(o));
  const uint64_t n = o->via.u;
  if (n < desc->num_fields || (n > desc->num_fields && !c->lenient))
    return dfail(c, SC_EPROTO, "%s has %llu fields, expected %u (schema %d.%d)", desc->name,
                 (unsigned long long)n, desc->num_fields, SC_MSG_MAJOR, SC_MSG_MINOR);
  if (c->depth + 1 >= (int)(sizeof c->path / sizeof c->path[0]))
    return dfail(c, SC_EPROTO, "nesting too deep");
  c->depth++;
  int rc = 0;
  for (uint32_t i = 0; i < desc->num_fields && rc == 0; i++) {
    c->path[c->depth].name = desc->fields[i].name;
    c->path[c->depth].index = -1;
    val fv;
    rd_val(&c->r, &fv);
    rc = dec_field(c, &desc->fields[i], &fv, base);
  }
  for (uint64_t i = desc->num_fields; i < n && rc == 0; i++) skip_val(&c->r);
  c->depth--;
  if (rc == 0 && desc->check != NULL) rc = desc->check(base, c->lim, c->d);
  return rc;
}

static int decode(const uint8_t *p, size_t n, const sc_msg_limits *lim, int max_depth,
                  sc_envelope *env, void **body, sc_diag *d) {
  *body = NULL;
  memset(env, 0, sizeof *env);
  int rc = sc_msg_prewalk(p, n, max_depth, d);
  if (rc != 0) return rc;
  size_t body_at = 0;
  uint64_t elements = 0;
  rc = sc_msg_peek_envelope_body(p, n, env, &body_at, &elements);
  if (rc == SC_EVERSION)
    return sc_fail(d, rc, "schema version %u.%u is not supported (this build speaks %d.x)",
                   env->major, env->minor, SC_MSG_MAJOR);
  if (rc != 0)
    return sc_fail(d, rc,
                   "not a sparsecp message: expected [major, minor, type, step, seq, src, "
                   "dst, trace_id, body]");
  const sc_msg_desc *desc = sc_msg_desc_of(env->type);
  if (desc == NULL)
    return sc_fail(d, SC_ENOTSUP,
                   "unknown message type id %u (this build knows %d types, schema %d.%d; is "
                   "the sender newer?)",
                   env->type, SC_MSG_COUNT, SC_MSG_MAJOR, SC_MSG_MINOR);
  /* the pre-walk proved the bytes well-formed; the envelope was read: on to the body */
  const bool lenient = env->minor > SC_MSG_MINOR;
  if (elements != 9 && !lenient)
    return sc_fail(d, SC_EPROTO, "message has %llu top-level elements, expected 9",
                   (unsigned long long)elements);
  cursor r = {p + body_at};
  val bv;
  rd_val(&r, &bv);
  void *b = sc_msg_body_new(env->type);
  if (b == NULL) return sc_fail(d, SC_ENOMEM, "out of memory");
  dctx c = {.lim = lim, .r = r, .end = p + n, .lenient = lenient, .d = d, .depth = 0};
  c.path[0].name = desc->name;
  c.path[0].index = -1;
  rc = dec_struct(&c, desc, &bv, b);
  if (rc != 0) {
    sc_msg_body_destroy(env->type, b);
    return rc;
  }
  *body = b;
  return 0;
}

int sc_msg_decode(const uint8_t *p, size_t n, sc_envelope *env, void **body, sc_diag *d) {
  return decode(p, n, NULL, SC_MSG_MAX_DEPTH, env, body, d);
}

void sc_msg_limits_default(sc_msg_limits *lim) {
  /* 1 MiB holds the longest allowed prompt (131072 ids of at most 5 bytes). */
  *lim = (sc_msg_limits){.max_bytes = 1u << 20,
                         .max_depth = 8,
                         .max_array = 1u << 20,
                         .max_str = 4096,
                         .max_bin = 256u << 10,
                         .vocab_size = SC_MSG_DEFAULT_VOCAB,
                         .max_prompt_len = 131072,
                         .max_new_tokens = 16384};
}

int sc_msg_decode_untrusted(const uint8_t *p, size_t n, const sc_msg_limits *lim,
                            sc_envelope *env, void **body, sc_diag *d) {
  sc_msg_limits def;
  memset(env, 0, sizeof *env);
  if (lim == NULL) {
    sc_msg_limits_default(&def);
    lim = &def;
  }
  *body = NULL;
  if (n > lim->max_bytes)
    return sc_fail(d, SC_ETOOBIG, "message of %zu bytes exceeds the limit of %zu bytes", n,
                   lim->max_bytes);
  return decode(p, n, lim, lim->max_depth, env, body, d);
}
