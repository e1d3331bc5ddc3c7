/* zmq_watch.h - drives one ZeroMQ socket from an actor's libuv loop.
 *
 * ZMQ_FD is edge-triggered and only means "look at ZMQ_EVENTS" (see the transport in
 * actors/runtime/sc_transport.c, which does the same for the node's own sockets). So the
 * watcher calls `service` on every poll wake-up and again from a uv_prepare before the
 * loop blocks while ZMQ_EVENTS still reports input; `service` drains at most a capped
 * number of messages and returns true when it stopped at the cap, in which case a
 * uv_idle keeps the loop spinning (zero-timeout polls) until the socket is drained. A
 * zmq_send on the same socket can consume the fd's edge; the prepare check covers that,
 * also for sends from letters that the actor loop's own prepare runs after this one
 * (its spin): the loop then takes one more turn without blocking (sc_loop.c,
 * on_prepare; tests/unit/test_zmq_watch.c).
 *
 * Ownership: the watcher borrows the socket. sc_zmq_watch_close stops polling at once
 * (the owner may close the socket right after) and frees the watcher once libuv has run
 * the handles' close callbacks, so it is safe from an actor's terminate, whose state
 * is freed before the loop runs again. Threads: the loop's thread only.
 */
#ifndef SC_ZMQ_WATCH_H
#define SC_ZMQ_WATCH_H

#include <stdbool.h>
#include <uv.h>

typedef bool (*sc_zmq_service_fn)(void *ud);

typedef struct sc_zmq_watch sc_zmq_watch;

/* Starts watching sock for input on loop. Returns 0, SC_ENOMEM or SC_ESYS. */
int sc_zmq_watch_start(uv_loop_t *loop, void *sock, sc_zmq_service_fn fn, void *ud,
                       sc_zmq_watch **out);
/* Stops watching; the watcher frees itself later (see above). NULL is a no-op. */
void sc_zmq_watch_close(sc_zmq_watch *w);

#endif
