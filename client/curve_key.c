/* curve_key.c - CURVE key files and Z85 keys (see curve_key.h). */
#include "client/curve_key.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

int sc_curve_decode(const char *z85, uint8_t key[32], sc_diag *d) {
  if (strlen(z85) != SC_CURVE_Z85_LEN || zmq_z85_decode(key, z85) == NULL)
    return sc_fail(d, SC_EINVAL, "not a CURVE key: expected %d Z85 characters",
                   SC_CURVE_Z85_LEN);
  return 0;
}

int sc_curve_load_secret(const char *path, uint8_t secret[32],
                         char public_z85[SC_CURVE_Z85_LEN + 1], sc_diag *d) {
  if (!zmq_has("curve"))
    return sc_fail(d, SC_ENOTSUP, "this libzmq was built without CURVE security");
  FILE *f = fopen(path, "r");
  if (f == NULL) return sc_fail(d, SC_EIO, "cannot read key file %s: %s", path, strerror(errno));
  setvbuf(f, NULL, _IONBF, 0); /* no stdio buffer left holding the key after fclose */
  char text[SC_CURVE_Z85_LEN + 2];
  const size_t n = fread(text, 1, sizeof text - 1, f);
  int c;
  while ((c = fgetc(f)) != EOF && isspace(c)) {} /* trailing white space only */
  const bool more = c != EOF;
  const int read_errno = ferror(f) ? errno : 0;
  fclose(f);
  if (read_errno != 0)
    return sc_fail(d, SC_EIO, "cannot read key file %s: %s", path, strerror(read_errno));
  text[n] = '\0';
  size_t len = n;
  while (len > 0 && isspace((unsigned char)text[len - 1])) text[--len] = '\0';
  if (more || len != SC_CURVE_Z85_LEN) {
    memset(text, 0, sizeof text);
    return sc_fail(d, SC_EINVAL,
                   "key file %s does not hold one CURVE secret key (%d Z85 characters, as "
                   "`sparsecp keygen` prints)", path, SC_CURVE_Z85_LEN);
  }
  sc_diag why = {0};
  int rc = sc_curve_decode(text, secret, &why);
  if (rc != 0)
    rc = sc_fail(d, rc, "key file %s: %s", path, sc_diag_message(&why));
  else if (public_z85 != NULL && zmq_curve_public(public_z85, text) != 0)
    rc = sc_fail(d, SC_EINVAL, "key file %s: %s", path, zmq_strerror(zmq_errno()));
  memset(text, 0, sizeof text);
  return rc;
}
