/* zap.h - who may connect: ZeroMQ's authentication handler (ZAP, ZeroMQ RFC 27) for one
 * ZeroMQ context, admitting CURVE clients by public key.
 *
 * A CURVE server socket asks the handler of its context about every client that
 * completed the key exchange (ZMQ_ZAP_DOMAIN names the policy that applies). This handler
 * admits a client only when its long-term public key is on the domain's list, or when the
 * domain admits any key (a client endpoint without an allow-list), and tells ZeroMQ the
 * key's name: the domain's prefix and the key's place in its list (the cluster's nodes:
 * no prefix, so the name is the rank as decimal text). ZeroMQ
 * then attaches that name to every message from the connection as its "User-Id"
 * property, which no peer can choose: sc_zap_user_rank reads it, so a receiver learns
 * which node sent a message from the key it proved it holds, not from what the message
 * claims. A domain the handler does not know, and any mechanism other than CURVE, is
 * refused.
 *
 * Refusals are counted and logged at a bounded rate (one line per domain per interval,
 * with the count and the last refused key and address): an outsider's connection
 * attempts cannot fill the log.
 *
 * Start the handler before any socket of the context binds (libzmq admits every CURVE
 * client of a context that has no handler), stop it before zmq_ctx_term (its socket is
 * one of the context's).
 *
 * Ownership: the handler copies its domains. Threads: it answers on a thread of its own;
 * start, stop and stats from any one thread.
 */
#ifndef SC_ZAP_H
#define SC_ZAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define SC_ZAP_DOMAIN_MAX 32 /* a domain's name, and a name prefix, with its NUL */

/* The ZMQ_ZAP_DOMAIN values of sparsecp's sockets. */
#define SC_ZAP_DOMAIN_NODE "sc-node"     /* node and collective endpoints: the cluster's */
#define SC_ZAP_DOMAIN_CLIENT "sc-client" /* the head's client endpoint */
#define SC_ZAP_DOMAIN_TAP "sc-tap"       /* tap endpoints */

typedef struct sc_zap_domain {
  const char *domain;
  const uint8_t (*keys)[32];    /* CURVE public keys; borrowed by sc_zap_start, which
                                   copies them */
  int32_t num_keys;
  const char *name_prefix;      /* key k's User-Id is prefix + k (NULL: "", so k) */
  bool any_key;                 /* admit every CURVE client (User-Id "any"); keys unused */
} sc_zap_domain;

typedef struct sc_zap_stats {
  uint64_t admitted, refused;
} sc_zap_stats;

typedef struct sc_zap sc_zap;

/* Binds the handler in zctx and starts its thread. Errors: SC_EINVAL (a bad domain), SC_EIO
 * (the handler's endpoint is taken: another handler runs in this context), SC_ENOMEM. */
int sc_zap_start(void *zctx, const sc_zap_domain *domains, int32_t num_domains, sc_zap **out,
                 sc_diag *d);
/* Stops the thread and closes the handler's socket. NULL is fine. */
void sc_zap_stop(sc_zap *z);
void sc_zap_get_stats(sc_zap *z, sc_zap_stats *out);

/* Whether an endpoint is reachable only from this host (ipc://, inproc://). Every other
 * transport (tcp, and tipc, ws, pgm... where libzmq has them) reaches a network, so a
 * cluster must use CURVE there. */
bool sc_endpoint_is_local(const char *endpoint);

/* An ipc endpoint is as private as its folder: anyone who can open the folder can connect
 * (ipc endpoints of a cluster without keys have no CURVE). SC_EPERM with the reason when
 * endpoint is "ipc://PATH" and PATH's folder is not a folder of this user that no one
 * else may open (mode 0700 or stricter), or is an abstract "ipc://@name" (Linux gives
 * those no permissions at all); SC_EIO when the folder cannot be looked at; 0 for an
 * endpoint that is not ipc. */
int sc_ipc_check_private(const char *endpoint, sc_diag *d);

/* The rank named by a User-Id property (decimal text "0".."world-1", no sign, no leading
 * zero, nothing else), or -1: NULL (no ZAP handler named the peer), or anything else. */
int32_t sc_zap_user_rank(const char *user_id, int32_t world);

/* The rank a ZeroMQ routing id names: `prefix` then the rank spelled as for
 * sc_zap_user_rank, and when max_suffix > 0 optionally "." and a number below max_suffix
 * (a node's per-loop DEALERs: "n3.1"); -1 for anything else. A peer chooses its routing
 * id: only an ipc folder's permissions vouch for it. */
int32_t sc_zap_routing_rank(const void *id, size_t len, char prefix, int32_t world,
                            int32_t max_suffix);

#endif
