/* sc_cluster.h - the cluster file: which ranks exist, where they listen, and the
 * parallel configuration (docs/cluster-file.md).
 *
 *   {"pcp": 2, "dcp": 2, "tp": 1,
 *    "heartbeat_ms": 200, "heartbeat_timeout_ms": 1000, "loops": 1,
 *    "listen": "tcp://0.0.0.0:5555",                       (optional, head's clients)
 *    "listen_key_file": "/etc/sparsecp/server.key",        (optional: CURVE on listen)
 *    "client_keys_file": "clients.pub",   (optional: the clients served, by public key)
 *    "tap_keys_file": "taps.pub",         (the tap subscribers admitted over tcp)
 *    "http": "127.0.0.1:8000",            (optional: the head's HTTP server, docs/http.md)
 *    "http_api_key_file": "api.key",      (optional: the Bearer key HTTP clients need)
 *    "http_timeout_s": 30,                (an idle HTTP connection is closed after this)
 *    "nodes": [{"rank": 0, "endpoint": "tcp://10.0.0.1:5555", "tap": "tcp://...",
 *               "public_key": "<Z85>", "key_file": "node-0.key"}, ...]}
 *
 * Rank 0 is the head. Ranks must be 0..n-1, each once. Either every node has a
 * "public_key" (CURVE between nodes) or none has; a node or tap endpoint on tcp needs the
 * keys (`sparsecp keygen --cluster FILE` writes them), and a tap on tcp also needs
 * tap_keys_file. sc_cluster_load makes the key files' paths (key_file, client_keys_file,
 * tap_keys_file, http_api_key_file) relative to the caller's directory; the others are kept as written, and
 * sc_cluster_resolve_path reads them from the
 * cluster file's folder. Pure parsing; no sockets.
 * Ownership: sc_cluster owns its strings; free with sc_cluster_free. Any thread.
 */
#ifndef SC_CLUSTER_H
#define SC_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define SC_CLUSTER_MAX_NODES 256
#define SC_ENDPOINT_MAX 256
#define SC_PATH_MAX 512

typedef struct sc_cluster_node {
  int32_t rank;
  char endpoint[SC_ENDPOINT_MAX]; /* ROUTER bind address of the node */
  char tap[SC_ENDPOINT_MAX];      /* XPUB bind address; "" = no tap */
  bool has_key;                   /* public_key is set ("public_key" in the file) */
  uint8_t public_key[32];         /* the node's CURVE public key */
  char key_file[SC_PATH_MAX];     /* its secret key file, read by that node only ("" =
                                     none; in the file: relative to its folder) */
} sc_cluster_node;

/* spin_us: a round trip between two nodes takes 50-90 us on the H200 host, so a loop
 * that spins for less blocks before the answer comes and pays a wake-up on each side
 * (ipc round trip p50 81-87 us with 50, 47-54 us with 200; bench/messages.md). */
#define SC_SPIN_US_DEFAULT 200
#define SC_SPIN_US_MAX 100000

typedef struct sc_cluster {
  int32_t pcp, dcp, tp;              /* the parallel layout; a pipeline needs pcp * tp nodes */
  int32_t heartbeat_ms;              /* ZeroMQ heartbeat interval (default 200) */
  int32_t heartbeat_timeout_ms;      /* peer declared DOWN after this (default 1000) */
  int32_t loops;                     /* actor loop threads per node (default 1) */
  int32_t spin_us;                   /* busy loops poll this long before blocking
                                        (SC_SPIN_US_DEFAULT; 0 = never spin) */
  char listen[SC_ENDPOINT_MAX];      /* the head's client endpoint ("" = none) */
  char listen_key_file[SC_PATH_MAX]; /* its CURVE secret key file ("" = plain) */
  char client_keys_file[SC_PATH_MAX]; /* public keys of the clients served ("" = any key
                                         holding the server key; needs listen_key_file) */
  char tap_keys_file[SC_PATH_MAX];   /* public keys of the tap subscribers admitted on tcp */
  char http[SC_ENDPOINT_MAX];        /* the head's HTTP address HOST:PORT ("" = none) */
  char http_api_key_file[SC_PATH_MAX]; /* the API key HTTP clients send ("" = none) */
  int32_t http_timeout_s;            /* idle HTTP connections are closed (default 30) */
  bool plaintext_tcp;                /* "plaintext_tcp": tcp without keys allowed (only to
                                        measure what CURVE costs: anyone who reaches an
                                        endpoint can then forge into the cluster) */
  bool curve;                        /* every node has a public key: the node and
                                        collective endpoints use CURVE (required when any
                                        of them is on tcp) */
  int32_t num_nodes;
  sc_cluster_node *nodes;            /* indexed by rank */
} sc_cluster;

/* A node's CURVE identity: its key pair. */
typedef struct sc_node_key {
  uint8_t public_key[32], secret_key[32];
} sc_node_key;

/* Reads node rank's secret key from its key_file and checks that it belongs to the
 * public key the cluster file lists for it. SC_EINVAL (no key_file, a mismatch: said in
 * d), SC_EIO, SC_ENOTSUP (no CURVE in this libzmq). */
int sc_cluster_load_node_key(const sc_cluster *c, int32_t rank, sc_node_key *out, sc_diag *d);

/* Parses JSON text. Errors: SC_EINVAL with a sentence in d. */
int sc_cluster_parse(const char *json, sc_cluster *out, sc_diag *d);
int sc_cluster_load(const char *path, sc_cluster *out, sc_diag *d);
/* path as written in the cluster file at cluster_path (relative to its folder) into out;
 * SC_EINVAL naming `what` when it does not fit. */
int sc_cluster_resolve_path(const char *cluster_path, const char *what, const char *path,
                            char *out, size_t cap, sc_diag *d);
/* Writes the cluster as JSON (the format above) into a malloc'd string. */
int sc_cluster_to_json(const sc_cluster *c, char **out);
/* A local cluster of n nodes: ipc endpoints under dir ("ipc://DIR/node-R",
 * "ipc://DIR/tap-R") or, when dir is NULL, tcp loopback with free ports, without keys
 * (plaintext_tcp: add keys and clear it for anything but tests and benchmarks). */
int sc_cluster_local(int32_t n, const char *dir, sc_cluster *out, sc_diag *d);
void sc_cluster_free(sc_cluster *c);

#endif
