/* sc_tap_record.h - the records of a tap batch, the second frame of every tap message
 * (docs/runtime.md): each record is a 16-byte header (u64 wall-clock ns, i32 node, u32
 * length, host byte order, which is little-endian on every supported machine) followed
 * by the encoded message. The transport writes them and the tools read them here, so the
 * layout is stated once. Pure inline functions; any thread. */
#ifndef SC_TAP_RECORD_H
#define SC_TAP_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SC_TAP_RECORD_HEADER 16

typedef struct sc_tap_record {
  uint64_t ns;        /* when it left the receiving actor's mailbox (wall clock) */
  int32_t node;       /* the publishing node's rank */
  uint32_t len;       /* bytes of msg */
  const uint8_t *msg; /* the encoded message (borrowed from the batch) */
} sc_tap_record;

static inline void sc_tap_record_put_header(uint8_t hdr[SC_TAP_RECORD_HEADER], uint64_t ns,
                                            int32_t node, uint32_t len) {
  memcpy(hdr, &ns, 8);
  memcpy(hdr + 8, &node, 4);
  memcpy(hdr + 12, &len, 4);
}

/* Reads the record at *p (*left bytes remain) and moves past it. Returns 1 with *r
 * filled, 0 at the end of the batch, -1 when the record is truncated (a broken batch:
 * stop reading it). */
static inline int sc_tap_record_next(const uint8_t **p, size_t *left, sc_tap_record *r) {
  if (*left < SC_TAP_RECORD_HEADER) return 0;
  memcpy(&r->ns, *p, 8);
  memcpy(&r->node, *p + 8, 4);
  memcpy(&r->len, *p + 12, 4);
  if (r->len > *left - SC_TAP_RECORD_HEADER) return -1;
  r->msg = *p + SC_TAP_RECORD_HEADER;
  *p += SC_TAP_RECORD_HEADER + r->len;
  *left -= SC_TAP_RECORD_HEADER + r->len;
  return 1;
}

#endif
