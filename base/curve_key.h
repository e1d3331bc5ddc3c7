/* curve_key.h - CURVE keys: reading a secret key file, a file of public keys (an
 * allow-list), and Z85 text. Keys are Z85 text (40 characters, ZeroMQ's printable
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

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define SC_CURVE_Z85_LEN 40 /* characters of a key in Z85, without the NUL */

/* Overwrites secret material with zeros; unlike memset, never removed by the compiler as
 * a store to memory about to be freed or go out of scope. */
void sc_wipe(void *p, size_t n);

/* Reads a one-line secret (a key, an API key) from a file only this user can read:
 * trailing white space dropped, at most cap - 2 characters, no NUL. SC_EPERM when others
 * can read it or it is not this user's (as ssh refuses such keys), SC_EIO, or SC_EINVAL
 * (empty, too long, more than one line). text is wiped on failure. */
int sc_secret_read(const char *path, char *text, size_t cap, size_t *len, sc_diag *d);

/* Reads the secret key in path into secret (32 bytes) and, when public_z85 is not NULL,
 * writes the matching public key there (Z85, NUL-terminated). SC_EINVAL (not a key, said
 * in d), SC_EPERM (the file can be read by other users, or is not this user's), SC_EIO
 * (unreadable) or SC_ENOTSUP (this libzmq has no CURVE). */
int sc_curve_load_secret(const char *path, uint8_t secret[32],
                         char public_z85[SC_CURVE_Z85_LEN + 1], sc_diag *d);

/* Decodes a Z85 key (exactly 40 characters) into key (32 bytes). SC_EINVAL when it is
 * not one. */
int sc_curve_decode(const char *z85, uint8_t key[32], sc_diag *d);

/* Makes a new key pair and writes its secret half to a new file at path that only the
 * user may read (O_EXCL, mode 0600: an existing file is never replaced). public_key gets
 * the public half. SC_EIO (said in d) or SC_ENOTSUP (no CURVE in this libzmq). */
int sc_curve_new_key_file(const char *path, uint8_t public_key[32], sc_diag *d);

/* Socket options, set before bind or connect (ZeroMQ copies the keys). A CURVE server
 * with this secret key whose clients the ZAP handler vets in `domain` (zap.h; NULL: no
 * domain, and then ZeroMQ asks no handler); a CURVE client with its own key pair of the
 * server whose public key is `server`. SC_ENOTSUP when ZeroMQ refuses (no CURVE). */
int sc_curve_make_server(void *sock, const uint8_t secret[32], const char *domain);
int sc_curve_make_client(void *sock, const uint8_t public_key[32], const uint8_t secret[32],
                         const uint8_t server[32]);

/* Reads a list of public keys: one Z85 key per line; blank lines and lines starting with
 * '#' are skipped; anything else is refused with its line number (SC_EINVAL), so that a
 * damaged list never admits fewer or other keys than its author meant. *keys is malloc'd
 * (NULL when the file lists none); at most SC_CURVE_LIST_MAX keys. */
#define SC_CURVE_LIST_MAX 4096
int sc_curve_load_public_list(const char *path, uint8_t (**keys)[32], int32_t *num,
                              sc_diag *d);

#endif
