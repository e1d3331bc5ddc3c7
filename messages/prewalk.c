/* prewalk.c - the non-allocating structural check of raw msgpack bytes, and the
 * envelope peek. Every declared length is checked against the bytes that remain (an
 * element takes at least one byte): a parser that trusts declared sizes, as msgpack-c
 * does, reserves about 1.6 GB for the 5-byte `dd 04 00 00 00` (an array "of 67 million
 * elements"). After this pass the decoder in codec.c reads the bytes without bounds
 * checks of its own, and its allocations stay a small multiple of the input size. */
#include <string.h>

#include "messages/messages.h"
#include "messages/schema_desc.h"

static inline uint64_t be(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

/* Header of the object at p[0..n): its kind, the inline payload length (str/bin/ext
 * bytes, scalar bytes after the header) or container element count. */
enum { HK_SCALAR, HK_ARRAY, HK_MAP, HK_BYTES, HK_BAD };
typedef struct {
  int kind;
  size_t head;    /* header bytes */
  uint64_t count; /* HK_BYTES: payload bytes; HK_ARRAY/HK_MAP: elements; HK_SCALAR: payload */
} hdr;

/* Returns false when the header itself is truncated. */
static inline bool read_hdr(const uint8_t *p, size_t n, hdr *h) {
  if (n == 0) return false;
  const uint8_t b = p[0];
  h->kind = HK_SCALAR;
  h->head = 1;
  h->count = 0;
  if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) return true;
  if ((b & 0xf0) == 0x90) { h->kind = HK_ARRAY; h->count = b & 0x0f; return true; }
  if ((b & 0xf0) == 0x80) { h->kind = HK_MAP; h->count = b & 0x0f; return true; }
  if ((b & 0xe0) == 0xa0) { h->kind = HK_BYTES; h->count = b & 0x1f; return true; }
  int lenb = 0; /* bytes of the length field */
  switch (b) {
  case 0xc1: h->kind = HK_BAD; return true;
  case 0xcc: case 0xd0: h->count = 1; return true;
  case 0xcd: case 0xd1: h->count = 2; return true;
  case 0xca: case 0xce: case 0xd2: h->count = 4; return true;
  case 0xcb: case 0xcf: case 0xd3: h->count = 8; return true;
  case 0xd4: h->kind = HK_BYTES; h->count = 1 + 1; return true; /* fixext: type + data */
  case 0xd5: h->kind = HK_BYTES; h->count = 1 + 2; return true;
  case 0xd6: h->kind = HK_BYTES; h->count = 1 + 4; return true;
  case 0xd7: h->kind = HK_BYTES; h->count = 1 + 8; return true;
  case 0xd8: h->kind = HK_BYTES; h->count = 1 + 16; return true;
  case 0xc4: case 0xd9: h->kind = HK_BYTES; lenb = 1; break;
  case 0xc5: case 0xda: h->kind = HK_BYTES; lenb = 2; break;
  case 0xc6: case 0xdb: h->kind = HK_BYTES; lenb = 4; break;
  case 0xc7: h->kind = HK_BYTES; lenb = 1; break; /* ext: + type byte */
  case 0xc8: h->kind = HK_BYTES; lenb = 2; break;
  case 0xc9: h->kind = HK_BYTES; lenb = 4; break;
  case 0xdc: h->kind = HK_ARRAY; lenb = 2; break;
  case 0xdd: h->kind = HK_ARRAY; lenb = 4; break;
  case 0xde: h->kind = HK_MAP; lenb = 2; break;
  case 0xdf: h->kind = HK_MAP; lenb = 4; break;
  default: h->kind = HK_BAD; return true;
  }
  if (n < 1 + (size_t)lenb) return false;
  h->head = 1 + (size_t)lenb;
  h->count = be(p + 1, lenb);
  if (b >= 0xc7 && b <= 0xc9) h->count += 1; /* the ext type byte */
  return true;
}

static const char *kind_word(int kind) {
  return kind == HK_ARRAY ? "an array" : kind == HK_MAP ? "a map" : "a string/binary";
}

int sc_msg_prewalk(const uint8_t *p, size_t n, int max_depth, sc_diag *d) {
  if (max_depth < 1 || max_depth > SC_MSG_MAX_DEPTH) max_depth = SC_MSG_MAX_DEPTH;
  /* left[k]: objects still to read at depth k (depth 0 = the one top-level object). */
  uint64_t left[SC_MSG_MAX_DEPTH + 1];
  int depth = 0;
  size_t pos = 0;
  left[0] = 1;
  if (n == 0) return sc_fail(d, SC_EPROTO, "empty message");
  for (;;) {
    if (left[depth] == 0) {
      if (depth == 0) break;
      depth--;
      continue;
    }
    left[depth]--;
    /* Fast path: fixints (most bytes of a step plan) are one byte and need no header. */
    if (pos < n && (p[pos] < 0x80 || p[pos] >= 0xe0)) {
      pos++;
      continue;
    }
    hdr h;
    if (!read_hdr(p + pos, n - pos, &h))
      return sc_fail(d, SC_EPROTO, "message truncated at byte %zu of %zu (inside a header)",
                     pos, n);
    if (h.kind == HK_BAD)
      return sc_fail(d, SC_EPROTO, "byte %zu: 0x%02x is not a valid msgpack type", pos,
                     p[pos]);
    pos += h.head;
    const size_t rest = n - pos;
    switch (h.kind) {
    case HK_SCALAR:
      if (h.count > rest)
        return sc_fail(d, SC_EPROTO, "message truncated at byte %zu of %zu (inside a number)",
                       pos, n);
      pos += (size_t)h.count;
      break;
    case HK_BYTES:
      if (h.count > rest)
        return sc_fail(d, SC_EPROTO,
                       "byte %zu: %s declares %llu bytes but only %zu remain (truncated or "
                       "forged length)",
                       pos - h.head, kind_word(h.kind), (unsigned long long)h.count, rest);
      pos += (size_t)h.count;
      break;
    case HK_ARRAY:
    case HK_MAP: {
      const uint64_t elems = h.kind == HK_MAP ? 2 * h.count : h.count;
      if (elems > rest)
        return sc_fail(d, SC_EPROTO,
                       "byte %zu: %s declares %llu elements but only %zu bytes remain "
                       "(truncated or forged length)",
                       pos - h.head, kind_word(h.kind), (unsigned long long)h.count, rest);
      if (depth + 1 > max_depth)
        return sc_fail(d, SC_EPROTO, "byte %zu: nesting deeper than the limit of %d levels",
                       pos - h.head, max_depth);
      left[++depth] = elems;
      break;
    }
    }
  }
  if (pos != n)
    return sc_fail(d, SC_EPROTO, "%zu trailing bytes after the message (at byte %zu)",
                   n - pos, pos);
  return 0;
}

/* ---- the envelope peek: a minimal reader of unsigned integers and array headers ---- */

typedef struct {
  const uint8_t *p;
  size_t n, pos;
} rd;

static bool rd_uint(rd *r, uint64_t *v) {
  hdr h;
  if (!read_hdr(r->p + r->pos, r->n - r->pos, &h) || h.kind != HK_SCALAR) return false;
  const uint8_t b = r->p[r->pos];
  if (b <= 0x7f) {
    *v = b;
  } else if (b >= 0xcc && b <= 0xcf) {
    if (h.count > r->n - r->pos - 1) return false;
    *v = be(r->p + r->pos + 1, (int)h.count);
  } else {
    return false; /* negative, float, bool, nil */
  }
  r->pos += h.head + (size_t)h.count;
  return true;
}

static bool rd_array(rd *r, uint64_t *count) {
  hdr h;
  if (!read_hdr(r->p + r->pos, r->n - r->pos, &h) || h.kind != HK_ARRAY) return false;
  r->pos += h.head;
  *count = h.count;
  return true;
}

static bool rd_actor(rd *r, sc_actor_id *a) {
  uint64_t cnt, node, slot, gen;
  if (!rd_array(r, &cnt) || cnt != 3 || !rd_uint(r, &node) || !rd_uint(r, &slot) ||
      !rd_uint(r, &gen) || node > UINT16_MAX || slot > UINT16_MAX || gen > UINT32_MAX)
    return false;
  *a = (sc_actor_id){.node = (uint16_t)node, .slot = (uint16_t)slot, .gen = (uint32_t)gen};
  return true;
}

int sc_msg_peek_envelope(const uint8_t *p, size_t n, sc_envelope *env) {
  size_t body_at;
  uint64_t elements;
  return sc_msg_peek_envelope_body(p, n, env, &body_at, &elements);
}

/* Moves past k values of any kind (containers whole). The bytes passed the pre-walk, so
 * every header is whole and every length lies within them. */
static void rd_skip(rd *r, uint64_t k) {
  while (k > 0) {
    k--;
    hdr h;
    if (!read_hdr(r->p + r->pos, r->n - r->pos, &h)) return;
    r->pos += h.head;
    if (h.kind == HK_ARRAY) k += h.count;
    else if (h.kind == HK_MAP) k += 2 * h.count;
    else r->pos += (size_t)h.count;
  }
}

uint64_t sc_msg_peek_client_request_id(const uint8_t *p, size_t n, const sc_msg_limits *lim) {
  sc_msg_limits def;
  if (lim == NULL) {
    sc_msg_limits_default(&def);
    lim = &def;
  }
  if (n > lim->max_bytes || sc_msg_prewalk(p, n, lim->max_depth, NULL) != 0) return 0;
  /* by position only, whatever the envelope's other fields say (another major version,
   * a bad actor id): [major, minor, type, step, seq, src, dst, trace_id, body] */
  rd r = {p, n, 0};
  uint64_t elements, type, fields, id;
  if (!rd_array(&r, &elements) || elements < 9) return 0;
  rd_skip(&r, 2);
  if (!rd_uint(&r, &type) || (type != SC_MSG_CLIENT_SUBMIT && type != SC_MSG_CLIENT_CANCEL))
    return 0;
  rd_skip(&r, 5);
  /* the request id is the first field of both bodies (schema.def) */
  return rd_array(&r, &fields) && fields > 0 && rd_uint(&r, &id) ? id : 0;
}

int sc_msg_peek_envelope_body(const uint8_t *p, size_t n, sc_envelope *env, size_t *body_at,
                              uint64_t *elements) {
  rd r = {p, n, 0};
  uint64_t cnt, major, minor, type;
  memset(env, 0, sizeof *env);
  if (!rd_array(&r, &cnt) || cnt < 9 || !rd_uint(&r, &major) || !rd_uint(&r, &minor))
    return SC_EPROTO;
  if (major != SC_MSG_MAJOR || minor > UINT8_MAX) {
    env->major = (uint8_t)(major > UINT8_MAX ? UINT8_MAX : major);
    env->minor = (uint8_t)(minor > UINT8_MAX ? UINT8_MAX : minor);
    return SC_EVERSION;
  }
  if (!rd_uint(&r, &type) || type > UINT16_MAX || !rd_uint(&r, &env->step) ||
      !rd_uint(&r, &env->seq) || !rd_actor(&r, &env->src) || !rd_actor(&r, &env->dst) ||
      !rd_uint(&r, &env->trace_id))
    return SC_EPROTO;
  env->major = (uint8_t)major;
  env->minor = (uint8_t)minor;
  env->type = (uint16_t)type;
  *body_at = r.pos;
  *elements = cnt;
  return 0;
}
