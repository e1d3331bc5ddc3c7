/* buf.h - a growable byte buffer, the output of the message encoder.
 *
 * Ownership: the buffer owns data; sc_buf_free releases it. Reusing one buffer for many
 * encodes (sc_msg_encode replaces the contents) makes steady-state encoding allocation
 * free. Threads: one thread at a time per buffer.
 */
#ifndef SC_BUF_H
#define SC_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct sc_buf {
  uint8_t *data;
  size_t len, cap;
} sc_buf;

void sc_buf_init(sc_buf *b);
void sc_buf_free(sc_buf *b);
/* Ensures room for n more bytes past len. Returns 0 or SC_ENOMEM (buffer unchanged). */
int sc_buf_reserve(sc_buf *b, size_t n);
/* Empties the buffer and keeps its memory. */
void sc_buf_reset(sc_buf *b);
/* Appends n bytes. Returns 0 or SC_ENOMEM. */
int sc_buf_append(sc_buf *b, const void *p, size_t n);

#endif
