/* sc_cluster.c - cluster file parsing and generation (see sc_cluster.h). */
#include "actors/runtime/sc_cluster.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "base/curve_key.h"
#include "base/zap.h"

static int get_int(json_t *root, const char *key, int32_t def, int32_t lo, int32_t hi,
                   int32_t *out, sc_diag *d) {
  json_t *v = json_object_get(root, key);
  if (v == NULL) {
    *out = def;
    return 0;
  }
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return sc_fail(d, SC_EINVAL, "cluster: \"%s\" must be an integer in [%d, %d]", key, lo,
                   hi);
  *out = (int32_t)json_integer_value(v);
  return 0;
}

/* Fills out from a parsed document and releases it; root NULL: err says why the text
 * was not JSON. */
/* Every endpoint a node binds (its endpoint and its tap) is its own: two nodes on one
 * ipc path both "bind" (the second takes the socket file over) and then never hear from
 * each other, which would surface only as a cluster that is never ready. */
static int check_unique_endpoints(const sc_cluster *c, sc_diag *d) {
  const int32_t n = c->num_nodes;
  for (int32_t i = 0; i < 2 * n; i++) {
    const char *a = i < n ? c->nodes[i].endpoint : c->nodes[i - n].tap;
    for (int32_t j = i + 1; a[0] && j < 2 * n; j++) {
      const char *b = j < n ? c->nodes[j].endpoint : c->nodes[j - n].tap;
      if (strcmp(a, b) == 0)
        return sc_fail(d, SC_EINVAL, "cluster: %s is both node %d's %s and node %d's %s", a,
                       (int)(i < n ? i : i - n), i < n ? "endpoint" : "tap",
                       (int)(j < n ? j : j - n), j < n ? "endpoint" : "tap");
    }
  }
  return 0;
}

/* a configured endpoint that reaches a network ("" is no endpoint) */
static bool is_network(const char *endpoint) {
  return endpoint[0] != '\0' && !sc_endpoint_is_local(endpoint);
}

/* An optional string member that must be a path (non-empty, shorter than SC_PATH_MAX). */
static int get_path(json_t *obj, const char *key, const char *where, char out[SC_PATH_MAX],
                    sc_diag *d) {
  json_t *v = json_object_get(obj, key);
  if (v == NULL) return 0;
  if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= SC_PATH_MAX)
    return sc_fail(d, SC_EINVAL, "cluster: %s\"%s\" must be a file path shorter than %d bytes",
                   where, key, SC_PATH_MAX);
  snprintf(out, SC_PATH_MAX, "%s", json_string_value(v));
  return 0;
}

/* A node's "public_key" and "key_file". */
static int parse_node_key(json_t *nd, size_t i, sc_cluster_node *cn, sc_diag *d) {
  json_t *k = json_object_get(nd, "public_key");
  if (k) {
    sc_diag why = {0};
    if (!json_is_string(k) || sc_curve_decode(json_string_value(k), cn->public_key, &why) != 0)
      return sc_fail(d, SC_EINVAL, "cluster: nodes[%zu].public_key: not a CURVE public key "
                                   "(%d Z85 characters)", i, SC_CURVE_Z85_LEN);
    cn->has_key = true;
  }
  char where[48];
  snprintf(where, sizeof where, "nodes[%zu].", i);
  return get_path(nd, "key_file", where, cn->key_file, d);
}

/* Who may talk to whom: keys on every node or on none; tcp only with them (a plaintext
 * node endpoint on a network lets anyone forge letters into the cluster), a tcp tap
 * only with a list of its subscribers, a client list only on a CURVE client endpoint. */
static int check_security(sc_cluster *c, sc_diag *d) {
  int32_t keyed = 0;
  for (int32_t r = 0; r < c->num_nodes; r++) keyed += c->nodes[r].has_key;
  if (keyed != 0 && keyed != c->num_nodes)
    return sc_fail(d, SC_EINVAL, "cluster: %d of %d nodes have a \"public_key\": every node "
                                 "needs one (or none does)", (int)keyed, (int)c->num_nodes);
  c->curve = keyed == c->num_nodes;
  for (int32_t r = 0; r < c->num_nodes; r++) {
    const sc_cluster_node *n = &c->nodes[r];
    if (!c->curve && !c->plaintext_tcp && (is_network(n->endpoint) || is_network(n->tap)))
      return sc_fail(d, SC_EINVAL, "cluster: node %d is on tcp without CURVE keys; `sparsecp "
                                   "keygen --cluster FILE` writes a key pair for every node",
                     (int)r);
    if (is_network(n->tap) && c->curve && c->tap_keys_file[0] == '\0')
      return sc_fail(d, SC_EINVAL, "cluster: node %d's tap is on tcp: \"tap_keys_file\" must "
                                   "list the subscribers' public keys", (int)r);
    for (int32_t q = 0; c->curve && q < r; q++)
      if (memcmp(c->nodes[q].public_key, n->public_key, 32) == 0)
        return sc_fail(d, SC_EINVAL, "cluster: nodes %d and %d have the same public key",
                       (int)q, (int)r);
  }
  if (c->client_keys_file[0] && c->listen_key_file[0] == '\0')
    return sc_fail(d, SC_EINVAL, "cluster: \"client_keys_file\" needs \"listen_key_file\" "
                                 "(clients are told apart by their CURVE keys)");
  return 0;
}

static int parse_root(json_t *root, const json_error_t *err, sc_cluster *out, sc_diag *d) {
  memset(out, 0, sizeof *out);
  if (root == NULL)
    return sc_fail(d, SC_EINVAL, "cluster: invalid JSON at line %d: %s", err->line, err->text);
  int rc = 0;
  if (!json_is_object(root)) {
    rc = sc_fail(d, SC_EINVAL, "cluster: the top level must be an object");
    goto done;
  }
  if ((rc = get_int(root, "pcp", 1, 1, 1024, &out->pcp, d)) ||
      (rc = get_int(root, "dcp", 1, 1, 1024, &out->dcp, d)) ||
      (rc = get_int(root, "tp", 1, 1, 1024, &out->tp, d)) ||
      (rc = get_int(root, "heartbeat_ms", 200, 10, 600000, &out->heartbeat_ms, d)) ||
      (rc = get_int(root, "heartbeat_timeout_ms", 1000, 20, 3600000,
                    &out->heartbeat_timeout_ms, d)) ||
      (rc = get_int(root, "loops", 1, 1, 32, &out->loops, d)) ||
      (rc = get_int(root, "spin_us", SC_SPIN_US_DEFAULT, 0, SC_SPIN_US_MAX, &out->spin_us, d)))
    goto done;
  json_t *plain = json_object_get(root, "plaintext_tcp");
  if (plain && !json_is_boolean(plain)) {
    rc = sc_fail(d, SC_EINVAL, "cluster: \"plaintext_tcp\" must be true or false");
    goto done;
  }
  out->plaintext_tcp = plain && json_is_true(plain);
  json_t *listen = json_object_get(root, "listen");
  if (listen && (!json_is_string(listen) || json_string_length(listen) >= SC_ENDPOINT_MAX)) {
    rc = sc_fail(d, SC_EINVAL, "cluster: \"listen\" must be an endpoint string");
    goto done;
  }
  if (listen) snprintf(out->listen, sizeof out->listen, "%s", json_string_value(listen));
  json_t *key = json_object_get(root, "listen_key_file");
  if (key && (!json_is_string(key) || json_string_length(key) == 0 ||
              json_string_length(key) >= SC_PATH_MAX || out->listen[0] == '\0')) {
    rc = sc_fail(d, SC_EINVAL, "cluster: \"listen_key_file\" must be a file path (and needs "
                               "\"listen\")");
    goto done;
  }
  if (key)
    snprintf(out->listen_key_file, sizeof out->listen_key_file, "%s", json_string_value(key));
  if ((rc = get_path(root, "client_keys_file", "", out->client_keys_file, d)) ||
      (rc = get_path(root, "tap_keys_file", "", out->tap_keys_file, d)) ||
      (rc = get_path(root, "http_api_key_file", "", out->http_api_key_file, d)) ||
      (rc = get_int(root, "http_timeout_s", 30, 1, 3600, &out->http_timeout_s, d)))
    goto done;
  json_t *http = json_object_get(root, "http");
  if (http && (!json_is_string(http) || json_string_length(http) == 0 ||
               json_string_length(http) >= SC_ENDPOINT_MAX)) {
    rc = sc_fail(d, SC_EINVAL, "cluster: \"http\" must be an address HOST:PORT");
    goto done;
  }
  if (http) snprintf(out->http, sizeof out->http, "%s", json_string_value(http));
  if (out->http_api_key_file[0] && !http) {
    rc = sc_fail(d, SC_EINVAL, "cluster: \"http_api_key_file\" needs \"http\"");
    goto done;
  }
  json_t *nodes = json_object_get(root, "nodes");
  if (!json_is_array(nodes) || json_array_size(nodes) == 0 ||
      json_array_size(nodes) > SC_CLUSTER_MAX_NODES) {
    rc = sc_fail(d, SC_EINVAL, "cluster: \"nodes\" must be a list of 1..%d nodes",
                 SC_CLUSTER_MAX_NODES);
    goto done;
  }
  out->num_nodes = (int32_t)json_array_size(nodes);
  out->nodes = calloc((size_t)out->num_nodes, sizeof *out->nodes);
  if (out->nodes == NULL) {
    rc = SC_ENOMEM;
    goto done;
  }
  for (int32_t i = 0; i < out->num_nodes; i++) out->nodes[i].rank = -1;
  for (size_t i = 0; i < json_array_size(nodes); i++) {
    json_t *nd = json_array_get(nodes, i);
    json_t *r = json_object_get(nd, "rank"), *e = json_object_get(nd, "endpoint"),
           *t = json_object_get(nd, "tap");
    if (!json_is_integer(r) || json_integer_value(r) < 0 ||
        json_integer_value(r) >= out->num_nodes) {
      rc = sc_fail(d, SC_EINVAL, "cluster: nodes[%zu].rank must be in [0, %d]", i,
                   (int)out->num_nodes - 1);
      goto done;
    }
    const int32_t rank = (int32_t)json_integer_value(r);
    sc_cluster_node *cn = &out->nodes[rank];
    if (cn->rank >= 0) {
      rc = sc_fail(d, SC_EINVAL, "cluster: rank %d is listed twice", (int)rank);
      goto done;
    }
    if (!json_is_string(e) || json_string_length(e) == 0 ||
        json_string_length(e) >= SC_ENDPOINT_MAX || (t && !json_is_string(t)) ||
        (t && json_string_length(t) >= SC_ENDPOINT_MAX)) {
      rc = sc_fail(d, SC_EINVAL,
                   "cluster: nodes[%zu] needs \"endpoint\" (and optional \"tap\") strings "
                   "shorter than %d bytes", i, SC_ENDPOINT_MAX);
      goto done;
    }
    cn->rank = rank;
    snprintf(cn->endpoint, sizeof cn->endpoint, "%s", json_string_value(e));
    snprintf(cn->tap, sizeof cn->tap, "%s", t ? json_string_value(t) : "");
    if ((rc = parse_node_key(nd, i, cn, d)) != 0) goto done;
  }
  if ((rc = check_unique_endpoints(out, d)) != 0 || (rc = check_security(out, d)) != 0)
    goto done;
  if (out->heartbeat_timeout_ms <= out->heartbeat_ms) {
    rc = sc_fail(d, SC_EINVAL, "cluster: heartbeat_timeout_ms (%d) must exceed heartbeat_ms (%d)",
                 (int)out->heartbeat_timeout_ms, (int)out->heartbeat_ms);
    goto done;
  }
done:
  json_decref(root);
  if (rc != 0) sc_cluster_free(out);
  return rc;
}

int sc_cluster_parse(const char *text, sc_cluster *out, sc_diag *d) {
  json_error_t err;
  return parse_root(json_loads(text, 0, &err), &err, out, d);
}

int sc_cluster_resolve_path(const char *cluster_path, const char *what, const char *path,
                            char *out, size_t cap, sc_diag *d) {
  const char *slash = strrchr(cluster_path, '/');
  const int n = path[0] == '/' || slash == NULL
                    ? snprintf(out, cap, "%s", path)
                    : snprintf(out, cap, "%.*s/%s", (int)(slash - cluster_path), cluster_path,
                               path);
  if (n < 0 || (size_t)n >= cap)
    return sc_fail(d, SC_EINVAL, "%s: the path is longer than %zu bytes", what, cap - 1);
  return 0;
}

/* The key files are read by the runtime, which does not know where the cluster file was:
 * their paths are made relative to the caller's directory here, once. */
static int resolve_key_paths(const char *cluster_path, sc_cluster *c, sc_diag *d) {
  char tmp[SC_PATH_MAX];
  char *paths[3] = {c->client_keys_file, c->tap_keys_file, c->http_api_key_file};
  for (int i = 0; i < 3 + c->num_nodes; i++) {
    char *p = i < 3 ? paths[i] : c->nodes[i - 3].key_file;
    if (p[0] == '\0') continue;
    const int rc = sc_cluster_resolve_path(cluster_path, "cluster: a key file", p, tmp,
                                           sizeof tmp, d);
    if (rc != 0) return rc;
    memcpy(p, tmp, SC_PATH_MAX);
  }
  return 0;
}

int sc_cluster_load(const char *path, sc_cluster *out, sc_diag *d) {
  if (access(path, R_OK) != 0) {
    memset(out, 0, sizeof *out);
    return sc_fail(d, SC_EIO, "cannot open cluster file %s", path);
  }
  json_error_t err;
  int rc = parse_root(json_load_file(path, 0, &err), &err, out, d);
  if (rc == 0) rc = resolve_key_paths(path, out, d);
  if (rc != 0) sc_cluster_free(out);
  return rc;
}

int sc_cluster_to_json(const sc_cluster *c, char **out) {
  json_t *root = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "pcp", c->pcp, "dcp",
                           c->dcp, "tp", c->tp, "heartbeat_ms", c->heartbeat_ms,
                           "heartbeat_timeout_ms", c->heartbeat_timeout_ms, "loops", c->loops,
                           "spin_us", c->spin_us);
  json_t *nodes = json_array();
  if (root == NULL || nodes == NULL) {
    json_decref(root);
    json_decref(nodes);
    return SC_ENOMEM;
  }
  for (int32_t i = 0; i < c->num_nodes; i++) {
    const sc_cluster_node *n = &c->nodes[i];
    json_t *nd = json_pack("{s:i, s:s, s:s}", "rank", n->rank, "endpoint", n->endpoint, "tap",
                           n->tap);
    if (nd && n->has_key) {
      char z85[SC_CURVE_Z85_LEN + 1];
      zmq_z85_encode(z85, n->public_key, 32);
      json_object_set_new(nd, "public_key", json_string(z85));
    }
    if (nd && n->key_file[0]) json_object_set_new(nd, "key_file", json_string(n->key_file));
    json_array_append_new(nodes, nd);
  }
  if (c->listen[0]) json_object_set_new(root, "listen", json_string(c->listen));
  if (c->listen_key_file[0])
    json_object_set_new(root, "listen_key_file", json_string(c->listen_key_file));
  if (c->client_keys_file[0])
    json_object_set_new(root, "client_keys_file", json_string(c->client_keys_file));
  if (c->tap_keys_file[0])
    json_object_set_new(root, "tap_keys_file", json_string(c->tap_keys_file));
  if (c->http[0]) json_object_set_new(root, "http", json_string(c->http));
  if (c->http_api_key_file[0])
    json_object_set_new(root, "http_api_key_file", json_string(c->http_api_key_file));
  if (c->http_timeout_s && c->http_timeout_s != 30)
    json_object_set_new(root, "http_timeout_s", json_integer(c->http_timeout_s));
  if (c->plaintext_tcp) json_object_set_new(root, "plaintext_tcp", json_true());
  json_object_set_new(root, "nodes", nodes);
  *out = json_dumps(root, JSON_INDENT(2));
  json_decref(root);
  return *out ? 0 : SC_ENOMEM;
}

/* A free loopback port: bind port 0 and read it back. The socket stays open until every
 * port of the cluster is chosen (closing it earlier could hand the same port out twice);
 * another process may still take it before the node binds, which is why tests prefer
 * ipc. Returns the port, or -1 (then *fd is -1). */
static int free_port(int *fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  if (*fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (bind(*fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(*fd, (struct sockaddr *)&a, &len) == 0)
    return ntohs(a.sin_port);
  close(*fd);
  *fd = -1;
  return -1;
}

int sc_cluster_local(int32_t n, const char *dir, sc_cluster *out, sc_diag *d) {
  memset(out, 0, sizeof *out);
  if (n < 1 || n > SC_CLUSTER_MAX_NODES)
    return sc_fail(d, SC_EINVAL, "a cluster has 1..%d nodes", SC_CLUSTER_MAX_NODES);
  out->pcp = n;
  out->dcp = out->tp = 1;
  out->heartbeat_ms = 200;
  out->heartbeat_timeout_ms = 1000;
  out->loops = 1;
  out->spin_us = SC_SPIN_US_DEFAULT;
  out->plaintext_tcp = dir == NULL; /* no keys here: tests and benchmarks on loopback */
  out->num_nodes = n;
  out->nodes = calloc((size_t)n, sizeof *out->nodes);
  if (out->nodes == NULL) return SC_ENOMEM;
  int *fds = dir ? NULL : malloc(sizeof(int) * 2 * (size_t)n);
  if (dir == NULL && fds == NULL) {
    sc_cluster_free(out);
    return SC_ENOMEM;
  }
  int nfds = 0, rc = 0;
  for (int32_t r = 0; r < n && rc == 0; r++) {
    sc_cluster_node *cn = &out->nodes[r];
    cn->rank = r;
    if (dir) {
      snprintf(cn->endpoint, sizeof cn->endpoint, "ipc://%s/node-%d", dir, (int)r);
      snprintf(cn->tap, sizeof cn->tap, "ipc://%s/tap-%d", dir, (int)r);
    } else {
      const int p1 = free_port(&fds[nfds]);
      if (p1 >= 0) nfds++;
      const int p2 = p1 < 0 ? -1 : free_port(&fds[nfds]);
      if (p2 >= 0) nfds++;
      if (p1 < 0 || p2 < 0) {
        rc = sc_fail(d, SC_ESYS, "no free loopback port");
        break;
      }
      snprintf(cn->endpoint, sizeof cn->endpoint, "tcp://127.0.0.1:%d", p1);
      snprintf(cn->tap, sizeof cn->tap, "tcp://127.0.0.1:%d", p2);
    }
  }
  for (int i = 0; i < nfds; i++) close(fds[i]);
  free(fds);
  if (rc != 0) sc_cluster_free(out);
  return rc;
}

void sc_cluster_free(sc_cluster *c) {
  if (c == NULL) return;
  free(c->nodes);
  c->nodes = NULL;
  c->num_nodes = 0;
}

int sc_cluster_load_node_key(const sc_cluster *c, int32_t rank, sc_node_key *out, sc_diag *d) {
  memset(out, 0, sizeof *out);
  const sc_cluster_node *n = &c->nodes[rank];
  if (n->key_file[0] == '\0')
    return sc_fail(d, SC_EINVAL, "cluster: node %d has a public key but no \"key_file\" with "
                                 "its secret key", (int)rank);
  char pub[SC_CURVE_Z85_LEN + 1];
  int rc = sc_curve_load_secret(n->key_file, out->secret_key, pub, d);
  if (rc == 0) rc = sc_curve_decode(pub, out->public_key, d);
  if (rc == 0 && memcmp(out->public_key, n->public_key, 32) != 0)
    rc = sc_fail(d, SC_EINVAL, "cluster: the key in %s is not node %d's (its public key is "
                               "not the one the cluster file lists)", n->key_file, (int)rank);
  if (rc != 0) memset(out, 0, sizeof *out);
  return rc;
}
