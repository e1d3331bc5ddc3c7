/* curve_key.h - CURVE keys for the client endpoint: reading a secret key file and making
 * key pairs (`sparsecp keygen`). Keys are Z85 text (40 characters, ZeroMQ's printable
 * form of a 32-byte key), as zmq_curve_keypair writes them.
 *
 * A secret key file holds the 40 characters, optionally followed by white space (a
 * newline); anything else is refused, so a truncated paste or keygen's whole output is
 * caught at start-up rather than as clients that cannot connect. A public key in its
 * place cannot be told apart (any 32 bytes are a secret key): the public key derived
 * from it, which launch prints and the gateway logs, is then not the one clients were
 * given. Any thread. */
#ifndef SC_CURVE_KEY_H
#define SC_CURVE_KEY_H

#include <stdint.h>

#include "base/error.h"

#define SC_CURVE_Z85_LEN 40 /* characters of a key in Z85, without the NUL */

/* Reads the secret key in path into secret (32 bytes) and, when public_z85 is not NULL,
 * writes the matching public key there (Z85, NUL-terminated). SC_EINVAL (not a key, said
 * in d), SC_EIO (unreadable) or SC_ENOTSUP (this libzmq has no CURVE). */
int sc_curve_load_secret(const char *path, uint8_t secret[32],
                         char public_z85[SC_CURVE_Z85_LEN + 1], sc_diag *d);

/* Decodes a Z85 key (exactly 40 characters) into key (32 bytes). SC_EINVAL when it is
 * not one. */
int sc_curve_decode(const char *z85, uint8_t key[32], sc_diag *d);

#endif
