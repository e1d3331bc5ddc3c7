/* sc_pack.h - the frames nodes send each other (docs/runtime.md, "Between nodes"): every
 * message on a node's ROUTER is a pack of one or more letters, each a 4-byte length (host
 * byte order, which is little-endian on every supported machine) followed by one encoded
 * message (messages.h). A loop gathers what an actor's batch of letters sends to one peer
 * into one pack, so ZeroMQ's per-message cost is paid per pack; the receiving io thread
 * splits it.
 * The transport writes and reads them here, and tests that speak to a node's ROUTER
 * build them here, so the layout is stated once. Pure inline functions; any thread. */
#ifndef SC_PACK_H
#define SC_PACK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "messages/messages.h"

#define SC_PACK_LETTER_HEADER 4

/* Appends one letter (env, body encoded) to the pack in b. Returns 0, or with b as it
 * was the encoder's error or SC_ETOOBIG (a letter of 4 GiB or more). */
static inline int sc_pack_append(sc_buf *b, const sc_envelope *env, const void *body) {
  const size_t at = b->len;
  int rc = sc_buf_reserve(b, SC_PACK_LETTER_HEADER);
  if (rc != 0) return rc;
  b->len += SC_PACK_LETTER_HEADER;
  if ((rc = sc_msg_encode_append(env, body, b)) != 0) {
    b->len = at;
    return rc;
  }
  const size_t n = b->len - at - SC_PACK_LETTER_HEADER;
  if (n > UINT32_MAX) {
    b->len = at;
    return SC_ETOOBIG;
  }
  const uint32_t len = (uint32_t)n;
  memcpy(b->data + at, &len, SC_PACK_LETTER_HEADER);
  return 0;
}

/* Reads the letter at *p (*left bytes remain) and moves past it: *msg and *len are its
 * encoded message, borrowed from the pack. Returns 1, 0 at the end of the pack, or -1
 * when the rest is not a letter (cut short, or a zero length): stop reading the pack. */
static inline int sc_pack_next(const uint8_t **p, size_t *left, const uint8_t **msg,
                               size_t *len) {
  if (*left == 0) return 0;
  if (*left < SC_PACK_LETTER_HEADER) return -1;
  uint32_t n;
  memcpy(&n, *p, SC_PACK_LETTER_HEADER);
  if (n == 0 || n > *left - SC_PACK_LETTER_HEADER) return -1;
  *msg = *p + SC_PACK_LETTER_HEADER;
  *len = n;
  *p += SC_PACK_LETTER_HEADER + n;
  *left -= SC_PACK_LETTER_HEADER + n;
  return 1;
}

#endif
