/* sc_actor.h - actors: spawn, send, request/reply, monitor/link, stop (DESIGN.md §3).
 *
 * An actor is a spec (name, state size, init, terminate, one handler per message type,
 * a fallback) plus private state, living on one loop thread of a node. It is addressed
 * by a value id (node, slot, generation), never by a pointer: ids can be copied to any
 * thread or process, and a stale id (the actor stopped, its slot was reused) is detected
 * by the generation and refused with SC_ENOENT.
 *
 * Messages in process are (sc_envelope, body pointer) pairs; bodies are the plain C
 * structs of messages/messages.h, allocated with sc_msg_body_new. They are encoded only
 * when they cross a process or when a tap subscriber wants them.
 *
 * Ownership: a send CONSUMES the body on success only (on error the caller still owns
 * it). A handler BORROWS env and body for the duration of the call; the runtime frees
 * the body after the handler returns, unless the handler took it with sc_take_body.
 *
 * Mailboxes are bounded (spec.mailbox_cap, default SC_MAILBOX_DEFAULT_CAP). The overflow
 * policy decides what a send to a full mailbox does:
 *   SC_OVERFLOW_REJECT  the send fails with SC_EFULL and the body stays with the sender
 *                       (back-pressure; default);
 *   SC_OVERFLOW_DROP    the send succeeds, the body is freed and counted as dropped
 *                       (for telemetry-like traffic where the newest may be lost).
 * Messages that arrive from another process at a full REJECT mailbox are dropped and
 * counted; if they were requests, the requester gets an error_reply with SC_EFULL.
 *
 * Requests: sc_request marks the envelope's seq with SC_SEQ_REQUEST; sc_reply answers
 * with the same id and SC_SEQ_REPLY. The reply (or an error_reply, or SC_ETIMEDOUT when
 * the deadline passes) is delivered to the callback, not to the handlers. A reply that
 * arrives after the timeout is dropped.
 *
 * Threads: functions taking sc_ctx run on the actor's own loop thread, inside a handler
 * or init/terminate. Functions taking sc_node may be called from any thread.
 */
#ifndef SC_ACTOR_H
#define SC_ACTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "messages/messages.h"

typedef struct sc_node sc_node;
typedef struct sc_ctx sc_ctx;
struct uv_loop_s;

#define SC_MAILBOX_DEFAULT_CAP 65536u
/* The largest spec.mailbox_cap (sc_spawn refuses more with SC_EINVAL): the runtime counts
 * what a mailbox holds as a signed 32-bit difference. */
#define SC_MAILBOX_MAX_CAP (1u << 30)
/* Bits of sc_envelope.seq used by request/reply; the low 62 bits are the request id. */
#define SC_SEQ_REQUEST (1ull << 62)
#define SC_SEQ_REPLY (1ull << 63)
#define SC_SEQ_ID_MASK (SC_SEQ_REQUEST - 1)

/* Loop placement in sc_actor_spec.loop. */
#define SC_LOOP_ANY (-1) /* round robin over the node's shared loop threads */
#define SC_LOOP_OWN (-2) /* a loop thread of its own (GPU actors: blocking CUDA calls) */

typedef enum sc_overflow { SC_OVERFLOW_REJECT = 0, SC_OVERFLOW_DROP = 1 } sc_overflow;

/* A handler returns 0 to continue or a negative SC_E* code to stop the actor with that
 * reason (monitors see it in their DOWN message). */
typedef int (*sc_handler_fn)(sc_ctx *ctx, const sc_envelope *env, const void *body);
/* init runs on the actor's loop thread before any message; arg is a private copy of the
 * spawn argument (freed after init). Non-zero stops the actor at once. */
typedef int (*sc_init_fn)(sc_ctx *ctx, void *state, const void *arg);
/* terminate runs on the loop thread when the actor stops (reason 0: normal) or the node
 * shuts down (SC_ECLOSED). It must free what init allocated; state itself is freed. */
typedef void (*sc_term_fn)(sc_ctx *ctx, void *state, int reason);

typedef struct sc_actor_spec {
  const char *name;        /* for logs and tap topics; copied (at most 31 bytes) */
  size_t state_size;       /* zeroed state handed to init and reachable via ctx */
  sc_init_fn init;         /* may be NULL */
  sc_term_fn terminate;    /* may be NULL */
  sc_handler_fn handlers[SC_MSG_COUNT]; /* by message type; NULL: fallback */
  sc_handler_fn fallback;  /* NULL: unhandled messages are dropped (logged at debug) */
  uint32_t mailbox_cap;    /* 0: SC_MAILBOX_DEFAULT_CAP */
  sc_overflow overflow;
  int loop;                /* loop index, SC_LOOP_ANY or SC_LOOP_OWN */
  bool trap_exit;          /* a linked actor's abnormal exit arrives as a DOWN message
                              instead of stopping this actor */
} sc_actor_spec;

static inline bool sc_actor_id_eq(sc_actor_id a, sc_actor_id b) {
  return a.node == b.node && a.slot == b.slot && a.gen == b.gen;
}
static inline bool sc_actor_id_is_null(sc_actor_id a) { return a.gen == 0; }

/* Starts an actor on node n (any thread). arg (arg_size bytes, may be NULL/0) is copied
 * and passed to init. *out receives the id at once; init runs asynchronously but before
 * any message the id can receive. Returns 0, SC_EINVAL, SC_EFULL (no slot) or
 * SC_ENOMEM. */
int sc_spawn(sc_node *n, const sc_actor_spec *spec, const void *arg, size_t arg_size,
             sc_actor_id *out);

/* Sends from outside any actor (any thread): env->dst decides local or remote delivery;
 * the caller fills env (type, dst, and optionally src/step/seq/trace_id; major/minor
 * are set here). Consumes body on success. Errors: SC_ENOENT (no such actor), SC_EFULL
 * (mailbox full under REJECT), SC_EDOWN (the node is down), SC_ECLOSED (stopping),
 * SC_EINVAL. */
int sc_node_send(sc_node *n, sc_envelope *env, void *body);

/* ---- inside an actor (its loop thread) ---- */

sc_actor_id sc_self(const sc_ctx *ctx);
void *sc_state(const sc_ctx *ctx);
sc_node *sc_ctx_node(const sc_ctx *ctx);
struct uv_loop_s *sc_ctx_uv_loop(const sc_ctx *ctx); /* for the actor's own uv timers */
/* The envelope of the message being handled (NULL in init/terminate). */
const sc_envelope *sc_ctx_env(const sc_ctx *ctx);
/* Takes ownership of the body of the message being handled, so the runtime does not free
 * it after the handler returns (no deep copy needed to keep it). The caller then owns a
 * heap body of type env->type as made by sc_msg_body_new (local senders) or
 * sc_msg_decode (remote ones), and must release it with sc_msg_body_destroy(type, body),
 * or move its fields out and free() the struct itself. The `body` argument of the
 * handler is this same pointer. Only inside a handler (spec.handlers or fallback) for a
 * message type below SC_MSG_COUNT; NULL elsewhere (init, terminate, reply callbacks) or
 * when the body was already taken. */
void *sc_take_body(sc_ctx *ctx);

/* Sends body (type) to dst; step and trace id are inherited from the message being
 * handled. Consumes body on success; errors as sc_node_send. */
int sc_send(sc_ctx *ctx, sc_actor_id dst, int type, void *body);
/* As sc_send with an explicit step number. */
int sc_send_step(sc_ctx *ctx, sc_actor_id dst, int type, uint64_t step, void *body);

/* Reply callback: rc is 0 with the reply's env/body (borrowed), SC_ETIMEDOUT or SC_EDOWN
 * (the peer's node went down while the request waited) with env/body NULL, or the code
 * of an error_reply (env/body = that error_reply). A request to a node already known
 * down fails at once (sc_request returns SC_EDOWN). */
typedef void (*sc_reply_fn)(sc_ctx *ctx, void *ud, int rc, const sc_envelope *env,
                            const void *body);
/* Sends a request; exactly one call of cb follows (unless this actor stops first).
 * timeout_ms <= 0 means no timeout. Consumes body on success. */
int sc_request(sc_ctx *ctx, sc_actor_id dst, int type, void *body, int64_t timeout_ms,
               sc_reply_fn cb, void *ud);
/* Answers the request being handled (its sender, its id). Consumes body on success. */
int sc_reply(sc_ctx *ctx, int type, void *body);
/* Answers the request being handled with error_reply {code, message}. */
int sc_reply_error(sc_ctx *ctx, int code, const char *message);

/* DOWN {who = target, node, reason, message} arrives when target stops (or at once with
 * SC_ENOENT if it is already gone). For a target on another node, DOWN arrives when that
 * node goes down (an actor stopping on another node is not reported). */
int sc_monitor(sc_ctx *ctx, sc_actor_id target);
/* DOWN {who = {node, 0, 0}, node, SC_EDOWN} when node `rank` disconnects or misses its
 * heartbeats. */
int sc_monitor_node(sc_ctx *ctx, int rank);
/* Every node's comings and goings, until this actor stops (as Erlang's monitor_nodes):
 * DOWN {who = {node, 0, 0}, node, reason} each time another node goes down, and
 * node_ready {rank, incarnation} each time one rejoins the running cluster as a new
 * process (docs/runtime.md, "Rejoining"). At most SC_NODE_MAX_SUBSCRIBERS actors of a
 * node subscribe (SC_EFULL past it). */
int sc_monitor_nodes(sc_ctx *ctx);
/* Bidirectional: when either stops with a non-zero reason the other stops with the same
 * reason, unless it has trap_exit (then it gets DOWN). A target that is gone already (or
 * stops before it takes the link) counts as one that stopped with SC_ENOENT. Local
 * actors only. */
int sc_link(sc_ctx *ctx, sc_actor_id target);
/* Stops this actor after the current handler returns. */
void sc_stop(sc_ctx *ctx, int reason);
/* Asks another actor (any node-local id) to stop with reason; asynchronous. */
int sc_node_stop_actor(sc_node *n, sc_actor_id id, int reason);

#endif
