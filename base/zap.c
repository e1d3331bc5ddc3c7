/* zap.c - the ZAP handler of one ZeroMQ context (see zap.h; ZeroMQ RFC 27).
 *
 * A request is [version "1.0"][request id][domain][address][routing id][mechanism]
 * [credentials...]; for CURVE the one credential is the client's 32-byte public key.
 * The reply is [version][request id][status "200" or "400"][status text][user id]
 * [metadata]. The handler is a REP socket at the well-known inproc endpoint, served by a
 * thread that also listens on a PAIR for its stop.
 */
#include "base/zap.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "base/clock.h"
#include "base/log.h"

#define LOG "auth"
#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_FRAMES_MAX 8 /* RFC 27 requests have 7 (CURVE) */

typedef struct zap_domain {
  char name[SC_ZAP_DOMAIN_MAX];
  char prefix[SC_ZAP_DOMAIN_MAX];
  bool any_key;
  int32_t num_keys;
  uint8_t (*keys)[32];
  sc_log_limit refused_log;
} zap_domain;

struct sc_zap {
  void *zctx;
  void *rep, *stop_rx, *stop_tx;
  pthread_t thread;
  bool started;
  int32_t num_domains;
  zap_domain *domains;
  _Atomic uint64_t admitted, refused;
  sc_log_limit unknown_log; /* requests for a domain not listed */
};

int32_t sc_zap_user_rank(const char *user_id, int32_t world) {
  if (user_id == NULL || user_id[0] < '0' || user_id[0] > '9') return -1;
  if (user_id[0] == '0' && user_id[1] != '\0') return -1; /* one spelling per rank */
  int64_t v = 0;
  for (const char *p = user_id; *p; p++) {
    if (*p < '0' || *p > '9' || v >= world) return -1;
    v = v * 10 + (*p - '0');
  }
  return v < world ? (int32_t)v : -1;
}

bool sc_endpoint_is_local(const char *endpoint) {
  return strncmp(endpoint, "ipc://", 6) == 0 || strncmp(endpoint, "inproc://", 9) == 0;
}

int sc_ipc_check_private(const char *endpoint, sc_diag *d) {
  if (strncmp(endpoint, "ipc://", 6) != 0) return 0;
  const char *path = endpoint + 6;
  if (path[0] == '@')
    return sc_fail(d, SC_EPERM, "%s: an abstract ipc name can be reached by every user of "
                                "the host; use a path in a folder of mode 0700", endpoint);
  char dir[4096];
  const char *slash = strrchr(path, '/');
  const size_t len = slash == NULL ? 1 : slash == path ? 1 : (size_t)(slash - path);
  if (len >= sizeof dir) return sc_fail(d, SC_EIO, "%s: the path is too long", endpoint);
  memcpy(dir, slash == NULL ? "." : path, len);
  dir[len] = '\0';
  struct stat st;
  if (stat(dir, &st) != 0)
    return sc_fail(d, SC_EIO, "%s: cannot look at its folder %s: %s", endpoint, dir,
                   strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
    return sc_fail(d, SC_EPERM,
                   "%s: its folder %s can be opened by other users (mode %04o, owner %d): "
                   "anyone who can would reach the socket; use a folder of this user with "
                   "mode 0700 (mkdir -m 700)",
                   endpoint, dir, (unsigned)(st.st_mode & 07777), (int)st.st_uid);
  return 0;
}

int32_t sc_zap_routing_rank(const void *id, size_t len, char prefix, int32_t world,
                            int32_t max_suffix) {
  char text[32];
  if (len < 2 || len >= sizeof text || ((const char *)id)[0] != prefix) return -1;
  memcpy(text, (const char *)id + 1, len - 1);
  text[len - 1] = '\0';
  if (memchr(text, '\0', len - 1) != NULL) return -1;
  char *dot = strchr(text, '.');
  if (dot != NULL) {
    if (max_suffix <= 0 || sc_zap_user_rank(dot + 1, max_suffix) < 0) return -1;
    *dot = '\0';
  }
  return sc_zap_user_rank(text, world);
}

static const zap_domain *find_domain(const sc_zap *z, const char *name) {
  for (int32_t i = 0; i < z->num_domains; i++)
    if (strcmp(z->domains[i].name, name) == 0) return &z->domains[i];
  return NULL;
}

/* The name a key is admitted under in dom, or NULL. */
/* Whether dom admits key; its User-Id goes to user. */
static bool admit(const zap_domain *dom, const uint8_t key[32], char *user, size_t cap) {
  if (dom->any_key) {
    snprintf(user, cap, "any");
    return true;
  }
  for (int32_t i = 0; i < dom->num_keys; i++)
    if (memcmp(dom->keys[i], key, 32) == 0) {
      snprintf(user, cap, "%s%d", dom->prefix, (int)i);
      return true;
    }
  return false;
}

/* a frame of a request as a NUL-terminated string (cut to fit) */
static void frame_text(zmq_msg_t *f, char *out, size_t cap) {
  size_t n = zmq_msg_size(f);
  if (n >= cap) n = cap - 1;
  memcpy(out, zmq_msg_data(f), n);
  out[n] = '\0';
  for (size_t i = 0; i < n; i++) /* the log shows it: printable only */
    if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e) out[i] = '?';
}

static void log_refusal(sc_zap *z, zap_domain *dom, const char *domain, const char *address,
                        const char *mechanism, const uint8_t *key) {
  sc_log_limit *lim = dom ? &dom->refused_log : &z->unknown_log;
  unsigned long long held = 0;
  if (!sc_log_limit_pass(lim, sc_now_ns(), &held)) return;
  char z85[41] = "-";
  if (key) zmq_z85_encode(z85, key, 32);
  SC_WARN(LOG,
          "refused a %s connection from %s to domain \"%s\" (key %s): %s; %llu more refused "
          "in this domain since the last such line",
          mechanism, address, domain, z85,
          dom == NULL ? "not a domain of this process"
                      : key == NULL ? "only CURVE is accepted" : "the key is not listed",
          held);
}

/* Answers one request; returns -1 when the socket failed (the thread then stops). */
static int serve_one(sc_zap *z) {
  zmq_msg_t f[ZAP_FRAMES_MAX];
  int kept = 0, n = 0; /* frames kept, frames received (an overlong request is refused) */
  for (bool more = true; more; n++) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    int got;
    while ((got = zmq_msg_recv(&m, z->rep, 0)) < 0 && zmq_errno() == EINTR) {
    }
    if (got < 0) {
      zmq_msg_close(&m);
      for (int i = 0; i < kept; i++) zmq_msg_close(&f[i]);
      return -1;
    }
    more = zmq_msg_more(&m);
    if (kept < ZAP_FRAMES_MAX) {
      zmq_msg_init(&f[kept]);
      zmq_msg_move(&f[kept++], &m);
    }
    zmq_msg_close(&m);
  }
  char version[8] = "", domain[SC_ZAP_DOMAIN_MAX + 8] = "", address[64] = "?",
       mechanism[16] = "?";
  const uint8_t *key = NULL;
  if (kept >= 6) {
    frame_text(&f[0], version, sizeof version);
    frame_text(&f[2], domain, sizeof domain);
    frame_text(&f[3], address, sizeof address);
    frame_text(&f[5], mechanism, sizeof mechanism);
    if (strcmp(mechanism, "CURVE") == 0 && n == 7 && zmq_msg_size(&f[6]) == 32)
      key = zmq_msg_data(&f[6]);
  }
  zap_domain *dom = (zap_domain *)find_domain(z, domain);
  char user_id[2 * SC_ZAP_DOMAIN_MAX];
  const char *user = dom && key && strcmp(version, "1.0") == 0 &&
                             admit(dom, key, user_id, sizeof user_id)
                         ? user_id
                         : NULL;
  if (user)
    atomic_fetch_add_explicit(&z->admitted, 1, memory_order_relaxed);
  else {
    atomic_fetch_add_explicit(&z->refused, 1, memory_order_relaxed);
    log_refusal(z, dom, domain, address, mechanism, key);
  }
  /* reply: the request id is echoed; a request too short to have one gets an empty one */
  int rc = zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE) < 0;
  if (kept >= 2)
    rc |= zmq_send(z->rep, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE) < 0;
  else
    rc |= zmq_send(z->rep, "", 0, ZMQ_SNDMORE) < 0;
  rc |= zmq_send(z->rep, user ? "200" : "400", 3, ZMQ_SNDMORE) < 0;
  const char *text = user ? "OK" : "not admitted";
  rc |= zmq_send(z->rep, text, strlen(text), ZMQ_SNDMORE) < 0;
  rc |= zmq_send(z->rep, user ? user : "", user ? strlen(user) : 0, ZMQ_SNDMORE) < 0;
  rc |= zmq_send(z->rep, "", 0, 0) < 0;
  for (int i = 0; i < kept; i++) zmq_msg_close(&f[i]);
  return rc ? -1 : 0;
}

static void *zap_main(void *arg) {
  sc_zap *z = arg;
  for (;;) {
    zmq_pollitem_t items[2] = {{.socket = z->rep, .events = ZMQ_POLLIN},
                               {.socket = z->stop_rx, .events = ZMQ_POLLIN}};
    if (zmq_poll(items, 2, -1) < 0) {
      if (zmq_errno() == EINTR) continue;
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) return NULL;
    if ((items[0].revents & ZMQ_POLLIN) && serve_one(z) != 0) break;
  }
  /* fails closed (handshakes then wait for an answer that never comes), but say why */
  SC_ERROR(LOG, "the authentication handler stopped: %s; no new connection will be "
                "admitted", zmq_strerror(zmq_errno()));
  return NULL;
}

static void close_sock(void **s) {
  if (*s == NULL) return;
  const int zero = 0;
  zmq_setsockopt(*s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(*s);
  *s = NULL;
}

static void free_zap(sc_zap *z) {
  close_sock(&z->rep);
  close_sock(&z->stop_rx);
  close_sock(&z->stop_tx);
  for (int32_t i = 0; z->domains && i < z->num_domains; i++) {
    free(z->domains[i].keys); /* public keys: nothing secret to wipe */
  }
  free(z->domains);
  free(z);
}

static int copy_domains(sc_zap *z, const sc_zap_domain *domains, int32_t n, sc_diag *d) {
  z->domains = calloc((size_t)(n > 0 ? n : 1), sizeof *z->domains);
  if (z->domains == NULL) return sc_fail(d, SC_ENOMEM, "auth: out of memory");
  z->num_domains = n;
  for (int32_t i = 0; i < n; i++) {
    const sc_zap_domain *s = &domains[i];
    zap_domain *t = &z->domains[i];
    const char *prefix = s->name_prefix ? s->name_prefix : "";
    if (s->domain == NULL || s->domain[0] == '\0' || strlen(s->domain) >= SC_ZAP_DOMAIN_MAX ||
        strlen(prefix) >= SC_ZAP_DOMAIN_MAX || s->num_keys < 0 ||
        (s->num_keys > 0 && s->keys == NULL))
      return sc_fail(d, SC_EINVAL, "auth: domain %d is not valid", (int)i);
    snprintf(t->name, sizeof t->name, "%s", s->domain);
    snprintf(t->prefix, sizeof t->prefix, "%s", prefix);
    t->any_key = s->any_key;
    t->num_keys = s->num_keys;
    if (s->num_keys == 0) continue;
    t->keys = malloc(sizeof *t->keys * (size_t)s->num_keys);
    if (t->keys == NULL) return sc_fail(d, SC_ENOMEM, "auth: out of memory");
    memcpy(t->keys, s->keys, sizeof *t->keys * (size_t)s->num_keys);
  }
  return 0;
}

int sc_zap_start(void *zctx, const sc_zap_domain *domains, int32_t num_domains, sc_zap **out,
                 sc_diag *d) {
  *out = NULL;
  sc_zap *z = calloc(1, sizeof *z);
  if (z == NULL) return sc_fail(d, SC_ENOMEM, "auth: out of memory");
  z->zctx = zctx;
  int rc = copy_domains(z, domains, num_domains, d);
  if (rc != 0) {
    free_zap(z);
    return rc;
  }
  z->rep = zmq_socket(zctx, ZMQ_REP);
  z->stop_rx = zmq_socket(zctx, ZMQ_PAIR);
  z->stop_tx = zmq_socket(zctx, ZMQ_PAIR);
  char stop[64];
  snprintf(stop, sizeof stop, "inproc://sc-zap-stop-%p", (void *)z);
  if (z->rep == NULL || z->stop_rx == NULL || z->stop_tx == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "auth: %s", zmq_strerror(zmq_errno()));
  } else if (zmq_bind(z->rep, ZAP_ENDPOINT) != 0) {
    rc = sc_fail(d, SC_EIO, "auth: cannot bind %s: %s (a second handler in one context?)",
                 ZAP_ENDPOINT, zmq_strerror(zmq_errno()));
  } else if (zmq_bind(z->stop_rx, stop) != 0 || zmq_connect(z->stop_tx, stop) != 0) {
    rc = sc_fail(d, SC_EIO, "auth: %s", zmq_strerror(zmq_errno()));
  } else if (pthread_create(&z->thread, NULL, zap_main, z) != 0) {
    rc = sc_fail(d, SC_ESYS, "auth: cannot start its thread");
  }
  if (rc != 0) {
    free_zap(z);
    return rc;
  }
  z->started = true;
  *out = z;
  return 0;
}

void sc_zap_stop(sc_zap *z) {
  if (z == NULL) return;
  if (z->started) {
    zmq_send(z->stop_tx, "x", 1, 0);
    pthread_join(z->thread, NULL);
  }
  free_zap(z);
}

void sc_zap_get_stats(sc_zap *z, sc_zap_stats *out) {
  out->admitted = z ? atomic_load(&z->admitted) : 0;
  out->refused = z ? atomic_load(&z->refused) : 0;
}
