/* client.h - the C client API of a sparsecp cluster (DESIGN.md §1: clients inject
 * requests and receive tokens as a stream).
 *
 * A client is one ZeroMQ DEALER socket connected to the gateway's ROUTER (the endpoint
 * given to `sparsecp launch --listen` or `sparsecp run`). It speaks the client messages of
 * messages/schema.def: client_submit / client_cancel out, client_token / client_done /
 * client_error in. Request ids are chosen here and echoed by the gateway in every reply,
 * so one client can have many requests in flight. They are random 64-bit numbers
 * (getrandom), never 0 (the gateway refuses 0: its errors about a message whose request
 * it cannot read carry it) and never one the client has in flight: an id names its
 * request in every reply and cancel, and says nothing that could be guessed from another
 * (not another client's ids, nor how many requests this one made, nor when).
 *
 * Events are read with sc_client_next(), which blocks up to a timeout. Tokens arrive in
 * order per request; a request ends with exactly one done or error event.
 *
 * Ownership: an event's arrays and strings belong to the client and stay valid until the
 * next sc_client_next() or sc_client_close(). Threads: one client per thread.
 */
#ifndef SC_CLIENT_H
#define SC_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct sc_client sc_client;

typedef struct sc_client_request {
  const int32_t *prompt; /* token ids */
  int32_t prompt_len;
  int32_t max_tokens;
  float temperature;     /* 0: greedy */
  int32_t top_k;         /* must be 0 (all): top-k sampling is not implemented */
  uint64_t seed;
  bool ignore_eos;       /* run to max_tokens past the model's end-of-sequence tokens */
} sc_client_request;

typedef enum sc_client_event_kind {
  SC_CLIENT_TOKENS = 1, /* tokens[0..n) are generated tokens index .. index+n-1 */
  SC_CLIENT_DONE = 2,   /* finished: num_tokens generated, finish_reason */
  SC_CLIENT_ERROR = 3,  /* failed: code (SC_E*) and message */
} sc_client_event_kind;

typedef struct sc_client_event {
  sc_client_event_kind kind;
  uint64_t request_id;
  int32_t index;
  const int32_t *tokens;
  const float *margins;  /* [n] top-2 logit margin of each token, or NULL */
  int32_t n;
  int32_t num_tokens, prompt_tokens;
  const char *finish_reason;
  int32_t code;
  const char *message;
} sc_client_event;

/* Connects (asynchronously: the first submit waits for the connection). */
int sc_client_connect(sc_client **out, const char *endpoint, sc_diag *d);

/* How to connect to a gateway whose client endpoint uses CURVE (the cluster file's
 * listen_key_file). */
typedef struct sc_client_opts {
  const char *server_key;       /* the gateway's public key in Z85 (`sparsecp keygen`, or
                                   launch's "launched" line); NULL: a plain endpoint */
  const uint8_t *client_secret; /* with server_key: this client's own CURVE secret key (32
                                   bytes; sc_curve_load_secret reads a key file), which a
                                   gateway with client_keys_file admits when its public
                                   half is on the list. NULL: a key pair made for this
                                   connection, which only a gateway without a list serves */
} sc_client_opts;

/* As sc_client_connect, with o (NULL: plain). SC_EINVAL for a string that is not a key,
 * or a client key without a server key. A wrong server key, or a client key the gateway
 * does not list, is not an error here: the handshake fails and no answer ever comes
 * (sc_client_next times out). */
int sc_client_connect_opts(sc_client **out, const char *endpoint, const sc_client_opts *o,
                           sc_diag *d);
/* sc_client_connect_opts with server_key alone. */
int sc_client_connect_key(sc_client **out, const char *endpoint, const char *server_key,
                          sc_diag *d);
void sc_client_close(sc_client *c);

/* Sends a request; *request_id receives its id (random, see above). It may wait for a
 * connection to take it, at most 10 s. Errors: SC_EINVAL (empty prompt, max_tokens < 1),
 * SC_ETOOBIG (the encoded request is larger than the gateway accepts: max_bytes of
 * sc_msg_limits_default), SC_EDOWN (the connection to the server is lost: see
 * sc_client_next), SC_ETIMEDOUT (no connection took it within 10 s: none came up, the
 * server refused this client's handshake, or its send queue stayed full), SC_ESYS (no random numbers: getrandom
 * failed), SC_EIO. */
int sc_client_submit(sc_client *c, const sc_client_request *req, uint64_t *request_id);
int sc_client_cancel(sc_client *c, uint64_t request_id);

/* Waits up to timeout_ms (< 0: forever) for the next event. Returns 0 with *ev filled,
 * SC_ETIMEDOUT when nothing came, SC_EPROTO for an undecodable reply (skipped), SC_EIO.
 * When the connection to the server is lost (its process died: at once; its host or the
 * network: by heartbeats, 500 ms apart, 1.5 s timeout), every request in flight ends
 * with an error event of code SC_EDOWN, as no answer can come for it; the client
 * reconnects by itself if the server comes back. */
int sc_client_next(sc_client *c, int timeout_ms, sc_client_event *ev);

/* Sends raw bytes as one message (tests of the gateway's untrusted input path). */
int sc_client_send_raw(sc_client *c, const void *data, size_t len);

#endif
