/* sc_cluster.h - the cluster file: which ranks exist, where they listen, and the
 * parallel configuration (docs/cluster-file.md).
 *
 *   {"pcp": 2, "dcp": 2, "tp": 1,
 *    "heartbeat_ms": 200, "heartbeat_timeout_ms": 1000, "loops": 1,
 *    "listen": "tcp://0.0.0.0:5555",                       (optional, head's clients)
 *    "listen_key_file": "/etc/sparsecp/server.key",        (optional: CURVE on listen)
 *    "nodes": [{"rank": 0, "endpoint": "ipc:///tmp/sc/0", "tap": "ipc:///tmp/sc/0.tap"},
 *              ...]}
 *
 * Rank 0 is the head. Ranks must be 0..n-1, each once. Pure parsing; no sockets.
 * Ownership: sc_cluster owns its strings; free with sc_cluster_free. Any thread.
 */
#ifndef SC_CLUSTER_H
#define SC_CLUSTER_H

#include <stdint.h>

#include "base/error.h"

#define SC_CLUSTER_MAX_NODES 256
#define SC_ENDPOINT_MAX 256
#define SC_PATH_MAX 512

typedef struct sc_cluster_node {
  int32_t rank;
  char endpoint[SC_ENDPOINT_MAX]; /* ROUTER bind address of the node */
  char tap[SC_ENDPOINT_MAX];      /* XPUB bind address; "" = no tap */
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
  int32_t num_nodes;
  sc_cluster_node *nodes;            /* indexed by rank */
} sc_cluster;

/* Parses JSON text. Errors: SC_EINVAL with a sentence in d. */
int sc_cluster_parse(const char *json, sc_cluster *out, sc_diag *d);
int sc_cluster_load(const char *path, sc_cluster *out, sc_diag *d);
/* Writes the cluster as JSON (the format above) into a malloc'd string. */
int sc_cluster_to_json(const sc_cluster *c, char **out);
/* A local cluster of n nodes: ipc endpoints under dir ("ipc://DIR/node-R",
 * "ipc://DIR/tap-R") or, when dir is NULL, tcp loopback with free ports. */
int sc_cluster_local(int32_t n, const char *dir, sc_cluster *out, sc_diag *d);
void sc_cluster_free(sc_cluster *c);

#endif
