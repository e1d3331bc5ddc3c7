/* codec.c - the one generic msgpack encoder and decoder. Both walk the field
 * descriptors of schema_desc.c; nothing here knows a particular message type.
 *
 * Decoding order (messages.h): size limit (untrusted only), sc_msg_prewalk on the raw
 * bytes, the envelope, then msgpack-c parses the (now proven well-formed and bounded)
 * bytes into an object tree from which the body is filled field by field with type,
 * width, range and length checks, and finally the type's own check function. */
#include <assert.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "messages/messages.h"
#include "messages/schema_desc.h"
#include "model/model_defaults.h" /* header-only constants: the default vocabulary */

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

/* A header byte followed by an n-byte big-endian value. */
static inline void put_tagged(wr *w, uint8_t tag, uint64_t v, int n) {
  uint8_t *p = room(w, 9);
  if (p == NULL) return;
  p[0] = tag;
  put_be(p + 1, v, n);
  w->b->len += 1 + (size_t)n;
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

static void put_uint(wr *w, uint64_t v) {
  uint8_t *p = room(w, 9);
  if (p != NULL) w->b->len += (size_t)(cur_uint(p, v) - p);
}

static void put_int(wr *w, int64_t v) {
  if (v >= 0) put_uint(w, (uint64_t)v);
  else if (v >= -32) put_byte(w, (uint8_t)(int8_t)v);
  else if (v >= INT8_MIN) put_tagged(w, 0xd0, (uint64_t)v, 1);
  else if (v >= INT16_MIN) put_tagged(w, 0xd1, (uint64_t)v, 2);
  else if (v >= INT32_MIN) put_tagged(w, 0xd2, (uint64_t)v, 4);
  else put_tagged(w, 0xd3, (uint64_t)v, 8);
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

static void enc_scalar(wr *w, int k, const void *p) {
  switch (k) {
  case SC_FK_BOOL: put_byte(w, *(const bool *)p ? 0xc3 : 0xc2); break;
  case SC_FK_F32: {
    uint32_t bits;
    memcpy(&bits, p, 4);
    put_tagged(w, 0xca, bits, 4);
    break;
  }
  case SC_FK_F64: {
    uint64_t bits;
    memcpy(&bits, p, 8);
    put_tagged(w, 0xcb, bits, 8);
    break;
  }
  default:
    if (sc_msg_kind_is_signed(k)) put_int(w, (int64_t)sc_msg_load_int(k, p));
    else put_uint(w, sc_msg_load_int(k, p));
    break;
  }
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

static void enc_struct(wr *w, const sc_msg_desc *desc, const uint8_t *base) {
  put_array(w, desc->num_fields);
  for (uint32_t i = 0; i < desc->num_fields; i++) enc_field(w, &desc->fields[i], base);
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

/* ---- decoding ---- */

typedef struct {
  const sc_msg_limits *lim; /* NULL on the trusted path */
  bool lenient;             /* sender has a newer minor: extra trailing fields allowed */
  sc_diag *d;
  int depth;
  struct {
    const char *name;
    int64_t index; /* array element, or -1 */
  } path[SC_MSG_MAX_DEPTH + 4];
} dctx;

static const char *obj_type_name(const msgpack_object *o) {
  switch (o->type) {
  case MSGPACK_OBJECT_NIL: return "nil";
  case MSGPACK_OBJECT_BOOLEAN: return "a boolean";
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "an integer";
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64: return "a float";
  case MSGPACK_OBJECT_STR: return "a string";
  case MSGPACK_OBJECT_BIN: return "binary data";
  case MSGPACK_OBJECT_ARRAY: return "an array";
  case MSGPACK_OBJECT_MAP: return "a map";
  case MSGPACK_OBJECT_EXT: return "an ext value";
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
static int dec_scalar(dctx *c, int k, const sc_msg_field *f, const msgpack_object *o,
                      void *at) {
  if (k == SC_FK_BOOL) {
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
      return dfail(c, SC_EPROTO, "expected a boolean, got %s", obj_type_name(o));
    *(bool *)at = o->via.boolean;
    return 0;
  }
  if (k == SC_FK_F32 || k == SC_FK_F64) {
    double v;
    /* Clients may write floats as float32, float64 or (for whole numbers) integers. */
    if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
      v = o->via.f64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
      v = (double)o->via.u64;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
      v = (double)o->via.i64;
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
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    neg = false;
    u = o->via.u64;
  } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    neg = o->via.i64 < 0; /* msgpack-c may hand a non-negative value here */
    u = (uint64_t)o->via.i64;
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

static int dec_struct(dctx *c, const sc_msg_desc *desc, const msgpack_object *o,
                      uint8_t *base);

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

static int dec_field(dctx *c, const sc_msg_field *f, const msgpack_object *o,
                     uint8_t *base) {
  uint8_t *at = base + f->offset;
  int rc;
  switch (f->kind) {
  case SC_FK_STR: {
    if (o->type != MSGPACK_OBJECT_STR)
      return dfail(c, SC_EPROTO, "expected a string, got %s", obj_type_name(o));
    const uint32_t len = o->via.str.size;
    if ((rc = check_count(c, len, c->lim ? c->lim->max_str : 0, "string bytes"))) return rc;
    if (len && memchr(o->via.str.ptr, '\0', len) != NULL)
      return dfail(c, SC_EPROTO, "string contains a NUL byte");
    const size_t bad = utf8_bad((const uint8_t *)o->via.str.ptr, len);
    if (bad != len) return dfail(c, SC_EPROTO, "string is not valid UTF-8 (byte %zu)", bad);
    char *s = malloc((size_t)len + 1);
    if (s == NULL) return dfail(c, SC_ENOMEM, "out of memory");
    if (len) memcpy(s, o->via.str.ptr, len);
    s[len] = '\0';
    memcpy(at, &s, sizeof s);
    return 0;
  }
  case SC_FK_BIN: {
    if (o->type != MSGPACK_OBJECT_BIN)
      return dfail(c, SC_EPROTO, "expected binary data, got %s", obj_type_name(o));
    const uint32_t len = o->via.bin.size;
    if ((rc = check_count(c, len, c->lim ? c->lim->max_bin : 0, "binary bytes"))) return rc;
    sc_msg_bin *b = (sc_msg_bin *)at;
    if (len) {
      if ((b->data = malloc(len)) == NULL) return dfail(c, SC_ENOMEM, "out of memory");
      memcpy(b->data, o->via.bin.ptr, len);
    }
    b->len = len;
    return 0;
  }
  case SC_FK_ACTOR: {
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 3)
      return dfail(c, SC_EPROTO, "expected an actor id [node, slot, gen], got %s",
                   obj_type_name(o));
    sc_actor_id *a = (sc_actor_id *)at;
    const msgpack_object *e = o->via.array.ptr;
    if ((rc = dec_scalar(c, SC_FK_U16, NULL, &e[0], &a->node)) ||
        (rc = dec_scalar(c, SC_FK_U16, NULL, &e[1], &a->slot)) ||
        (rc = dec_scalar(c, SC_FK_U32, NULL, &e[2], &a->gen)))
      return rc;
    return 0;
  }
  case SC_FK_ARRAY:
  case SC_FK_SARRAY: {
    if (o->type != MSGPACK_OBJECT_ARRAY)
      return dfail(c, SC_EPROTO, "expected an array, got %s", obj_type_name(o));
    const uint32_t n = o->via.array.size;
    if ((rc = check_count(c, n, c->lim ? c->lim->max_array : 0, "array elements"))) return rc;
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
      rc = f->kind == SC_FK_ARRAY ? dec_scalar(c, f->elem, f, &o->via.array.ptr[i], el)
                                  : dec_struct(c, f->sub, &o->via.array.ptr[i], el);
      if (rc) return rc;
    }
    c->path[c->depth].index = -1;
    return 0;
  }
  case SC_FK_STRUCT: return dec_struct(c, f->sub, o, at);
  default: return dec_scalar(c, f->kind, f, o, at);
  }
}

static int dec_struct(dctx *c, const sc_msg_desc *desc, const msgpack_object *o,
                      uint8_t *base) {
  if (o->type != MSGPACK_OBJECT_ARRAY)
    return dfail(c, SC_EPROTO, "expected %s as an array of %u fields, got %s", desc->name,
                 desc->num_fields, obj_type_name(o));
  const uint32_t n = o->via.array.size;
  if (n < desc->num_fields || (n > desc->num_fields && !c->lenient))
    return dfail(c, SC_EPROTO, "%s has %u fields, expected %u (schema %d.%d)", desc->name,
                 n, desc->num_fields, SC_MSG_MAJOR, SC_MSG_MINOR);
  if (c->depth + 1 >= (int)(sizeof c->path / sizeof c->path[0]))
    return dfail(c, SC_EPROTO, "nesting too deep");
  c->depth++;
  int rc = 0;
  for (uint32_t i = 0; i < desc->num_fields && rc == 0; i++) {
    c->path[c->depth].name = desc->fields[i].name;
    c->path[c->depth].index = -1;
    rc = dec_field(c, &desc->fields[i], &o->via.array.ptr[i], base);
  }
  c->depth--;
  if (rc == 0 && desc->check != NULL) rc = desc->check(base, c->lim, c->d);
  return rc;
}

static int decode(const uint8_t *p, size_t n, const sc_msg_limits *lim, int max_depth,
                  sc_envelope *env, void **body, sc_diag *d) {
  *body = NULL;
  memset(env, 0, sizeof *env);
  size_t objects = 0;
  int rc = sc_msg_prewalk_count(p, n, max_depth, &objects, d);
  if (rc != 0) return rc;
  rc = sc_msg_peek_envelope(p, n, env);
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
  /* One zone chunk that holds the whole object tree (counted by the pre-walk, so
   * proportional to the input): msgpack-c's default 8 KiB chunks cost a malloc per chunk
   * and round big ones up to powers of two. msgpack_unpack (unlike msgpack_unpack_next,
   * which replaces the zone it is given) parses into the caller's zone. */
  void *b = NULL;
  size_t off = 0;
  msgpack_object root;
  msgpack_zone *zone = msgpack_zone_new(objects * sizeof(msgpack_object) + 256);
  if (zone == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory while parsing a %zu-byte message", n);
    goto out;
  }
  const msgpack_unpack_return ur = msgpack_unpack((const char *)p, n, &off, zone, &root);
  if (ur == MSGPACK_UNPACK_NOMEM_ERROR) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory while parsing a %zu-byte message", n);
    goto out;
  }
  if (ur != MSGPACK_UNPACK_SUCCESS || off != n) {
    rc = sc_fail(d, SC_EPROTO, "malformed msgpack (parser status %d)", (int)ur);
    goto out;
  }
  const msgpack_object *top = &root;
  const bool lenient = env->minor > SC_MSG_MINOR;
  if (top->via.array.size != 9 && !lenient) {
    rc = sc_fail(d, SC_EPROTO, "message has %u top-level elements, expected 9",
                 top->via.array.size);
    goto out;
  }
  if ((b = sc_msg_body_new(env->type)) == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory");
    goto out;
  }
  dctx c = {.lim = lim, .lenient = lenient, .d = d, .depth = 0};
  c.path[0].name = desc->name;
  c.path[0].index = -1;
  rc = dec_struct(&c, desc, &top->via.array.ptr[8], b);
  if (rc == 0) {
    *body = b;
    b = NULL;
  }
out:
  sc_msg_body_destroy(env->type, b);
  if (zone != NULL) msgpack_zone_free(zone);
  return rc;
}

int sc_msg_decode(const uint8_t *p, size_t n, sc_envelope *env, void **body, sc_diag *d) {
  return decode(p, n, NULL, SC_MSG_MAX_DEPTH, env, body, d);
}

void sc_msg_limits_default(sc_msg_limits *lim) {
  /* 1 MiB holds the longest allowed prompt (131072 ids of at most 5 bytes) and bounds
   * msgpack-c's object tree (24 bytes per object, at most one object per input byte, in
   * one zone chunk sized by the pre-walk) to 24 MiB per message. */
  *lim = (sc_msg_limits){.max_bytes = 1u << 20,
                         .max_depth = 8,
                         .max_array = 1u << 20,
                         .max_str = 4096,
                         .max_bin = 256u << 10,
                         .vocab_size = SC_MODEL_DEFAULT_VOCAB,
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
