/* curve_key.c - CURVE key files and Z85 keys (see curve_key.h). */
#include "base/curve_key.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

void sc_wipe(void *p, size_t n) { explicit_bzero(p, n); }

int sc_curve_make_server(void *sock, const uint8_t secret[32], const char *domain) {
  const int one = 1;
  return zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
                 zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, 32) != 0 ||
                 (domain && zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0)
             ? SC_ENOTSUP
             : 0;
}

int sc_curve_make_client(void *sock, const uint8_t public_key[32], const uint8_t secret[32],
                         const uint8_t server[32]) {
  return zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server, 32) != 0 ||
                 zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, public_key, 32) != 0 ||
                 zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, 32) != 0
             ? SC_ENOTSUP
             : 0;
}

int sc_curve_decode(const char *z85, uint8_t key[32], sc_diag *d) {
  if (strlen(z85) != SC_CURVE_Z85_LEN || zmq_z85_decode(key, z85) == NULL)
    return sc_fail(d, SC_EINVAL, "not a CURVE key: expected %d Z85 characters",
                   SC_CURVE_Z85_LEN);
  return 0;
}

int sc_secret_read(const char *path, char *text, size_t cap, size_t *len, sc_diag *d) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return sc_fail(d, SC_EIO, "cannot read key file %s: %s", path, strerror(errno));
  /* as ssh does with its keys: a secret others could read is no longer one */
  struct stat st;
  int rc = 0;
  if (fstat(fileno(f), &st) != 0)
    rc = sc_fail(d, SC_EIO, "cannot read key file %s: %s", path, strerror(errno));
  else if (st.st_uid != geteuid())
    rc = sc_fail(d, SC_EPERM, "key file %s belongs to uid %d, not to this user", path,
                 (int)st.st_uid);
  else if ((st.st_mode & 077) != 0)
    rc = sc_fail(d, SC_EPERM, "key file %s can be read by other users (mode %04o); chmod "
                              "600 it", path, (unsigned)(st.st_mode & 07777));
  if (rc != 0) {
    fclose(f);
    return rc;
  }
  setvbuf(f, NULL, _IONBF, 0); /* no stdio buffer left holding the key after fclose */
  const size_t n = fread(text, 1, cap - 1, f);
  int c;
  while ((c = fgetc(f)) != EOF && isspace(c)) {} /* trailing white space only */
  const bool more = c != EOF;
  const int read_errno = ferror(f) ? errno : 0;
  fclose(f);
  text[n] = '\0';
  if (read_errno != 0) {
    sc_wipe(text, cap);
    return sc_fail(d, SC_EIO, "cannot read key file %s: %s", path, strerror(read_errno));
  }
  size_t k = n;
  while (k > 0 && isspace((unsigned char)text[k - 1])) text[--k] = '\0';
  bool blank = false; /* (a key with white space inside is two words, or two lines) */
  for (size_t i = 0; i < k; i++) blank |= isspace((unsigned char)text[i]) != 0;
  if (more || k == 0 || k > cap - 2 || blank || strlen(text) != k) {
    sc_wipe(text, cap);
    return sc_fail(d, SC_EINVAL, "key file %s must hold one key of 1 to %zu characters, without white space", path,
                   cap - 2);
  }
  *len = k;
  return 0;
}

int sc_curve_load_secret(const char *path, uint8_t secret[32],
                         char public_z85[SC_CURVE_Z85_LEN + 1], sc_diag *d) {
  if (!zmq_has("curve"))
    return sc_fail(d, SC_ENOTSUP, "this libzmq was built without CURVE security");
  char text[SC_CURVE_Z85_LEN + 2];
  size_t len = 0;
  int rc = sc_secret_read(path, text, sizeof text, &len, d);
  if (rc == SC_EINVAL || (rc == 0 && len != SC_CURVE_Z85_LEN)) {
    sc_wipe(text, sizeof text);
    return sc_fail(d, SC_EINVAL,
                   "key file %s does not hold one CURVE secret key (%d Z85 characters, as "
                   "`sparsecp keygen` prints)", path, SC_CURVE_Z85_LEN);
  }
  if (rc != 0) return rc;
  sc_diag why = {0};
  rc = sc_curve_decode(text, secret, &why);
  if (rc != 0)
    rc = sc_fail(d, rc, "key file %s: %s", path, sc_diag_message(&why));
  else if (public_z85 != NULL && zmq_curve_public(public_z85, text) != 0)
    rc = sc_fail(d, SC_EINVAL, "key file %s: %s", path, zmq_strerror(zmq_errno()));
  sc_wipe(text, sizeof text);
  return rc;
}

int sc_curve_load_public_list(const char *path, uint8_t (**keys)[32], int32_t *num,
                              sc_diag *d) {
  *keys = NULL;
  *num = 0;
  FILE *f = fopen(path, "r");
  if (f == NULL) return sc_fail(d, SC_EIO, "cannot read key list %s: %s", path, strerror(errno));
  char line[256];
  int rc = 0;
  for (int lineno = 1; rc == 0 && fgets(line, sizeof line, f) != NULL; lineno++) {
    size_t len = strlen(line);
    const bool whole = len > 0 && (line[len - 1] == '\n' || feof(f));
    while (len > 0 && isspace((unsigned char)line[len - 1])) line[--len] = '\0';
    size_t at = 0;
    while (isspace((unsigned char)line[at])) at++;
    if (whole && (line[at] == '\0' || line[at] == '#')) continue;
    uint8_t key[32];
    sc_diag why = {0};
    if (!whole || sc_curve_decode(line + at, key, &why) != 0) {
      rc = sc_fail(d, SC_EINVAL, "key list %s, line %d: not a CURVE public key (%d Z85 "
                                 "characters, as `sparsecp keygen` prints)",
                   path, lineno, SC_CURVE_Z85_LEN);
      break;
    }
    if (*num == SC_CURVE_LIST_MAX) {
      rc = sc_fail(d, SC_EINVAL, "key list %s: more than %d keys", path, SC_CURVE_LIST_MAX);
      break;
    }
    uint8_t (*grown)[32] = realloc(*keys, sizeof **keys * (size_t)(*num + 1));
    if (grown == NULL) {
      rc = sc_fail(d, SC_ENOMEM, "out of memory");
      break;
    }
    *keys = grown;
    memcpy((*keys)[(*num)++], key, 32);
  }
  if (rc == 0 && ferror(f)) rc = sc_fail(d, SC_EIO, "cannot read key list %s", path);
  fclose(f);
  if (rc != 0) {
    free(*keys);
    *keys = NULL;
    *num = 0;
  }
  return rc;
}

int sc_curve_new_key_file(const char *path, uint8_t public_key[32], sc_diag *d) {
  char pub[SC_CURVE_Z85_LEN + 1], sec[SC_CURVE_Z85_LEN + 2];
  if (!zmq_has("curve") || zmq_curve_keypair(pub, sec) != 0)
    return sc_fail(d, SC_ENOTSUP, "this libzmq was built without CURVE security");
  strcat(sec, "\n");
  const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  bool ok = fd >= 0;
  if (ok && write(fd, sec, strlen(sec)) != (ssize_t)strlen(sec)) {
    if (errno == 0) errno = EIO; /* a short write sets none */
    ok = false;
  }
  if (ok && fsync(fd) != 0) ok = false;
  const int saved = errno;
  if (fd >= 0 && close(fd) != 0) ok = false;
  sc_wipe(sec, sizeof sec);
  if (!ok) {
    if (fd >= 0) unlink(path); /* (ours: O_EXCL made it) */
    return sc_fail(d, SC_EIO, "cannot write key file %s: %s", path, strerror(saved));
  }
  zmq_z85_decode(public_key, pub);
  return 0;
}
