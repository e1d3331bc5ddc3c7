/* sc_wake.h - the coalesced wake-up between threads that queue work and the one thread
 * that consumes it and may block (an actor loop, the io thread, an actor's mailbox).
 *
 * A producer first publishes its work (pushes to a queue, counts a letter), then claims
 * the flag; only the one that turns it 0 -> 1 signals (uv_async_send, or scheduling the
 * slot). The consumer clears the flag and only then looks at its queues once more. This
 * is Dekker's pattern: each side writes one location and then reads the other's, so both
 * the store and the later loads need a full barrier between them. With release/acquire
 * only, a consumer's load may be satisfied before its clearing store is visible, while a
 * producer still reads the flag as 1 and skips the signal: the work is stranded and the
 * consumer blocks (seen as a hung actor ping-pong once in ~30 runs on two cores). */
#ifndef SC_WAKE_H
#define SC_WAKE_H

#include <stdatomic.h>
#include <stdbool.h>

/* Producer, after publishing its work: true when the caller must signal the consumer. */
static inline bool sc_wake_claim(_Atomic int *flag) {
  return atomic_exchange_explicit(flag, 1, memory_order_seq_cst) == 0;
}

/* Consumer, before it looks at its queues for the last time: every producer that
 * published before the claim it will make after this is seen by those loads. */
static inline void sc_wake_clear(_Atomic int *flag) {
  atomic_store_explicit(flag, 0, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
}

#endif
