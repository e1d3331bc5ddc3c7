/* sc_mpsc.h - an intrusive, lock-free multi-producer single-consumer queue.
 *
 * Dmitry Vyukov's non-intrusive-stub design: producers do one atomic exchange and one
 * store (wait-free); the consumer never blocks and never allocates. Nodes are embedded
 * in the caller's items (sc_mpsc_node as a member), so a push never fails.
 *
 * sc_mpsc_pop may return NULL while the queue is not empty: a producer has exchanged the
 * tail but not yet linked its node. Callers treat NULL as "nothing now" and rely on the
 * producer's wake-up, which it issues after its push completes (see sc_loop).
 *
 * Threads: sc_mpsc_push from any thread; sc_mpsc_pop and sc_mpsc_init from the one
 * consumer thread only. Memory of pushed nodes is owned by the queue until popped.
 */
#ifndef SC_MPSC_H
#define SC_MPSC_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct sc_mpsc_node {
  _Atomic(struct sc_mpsc_node *) next;
} sc_mpsc_node;

typedef struct sc_mpsc {
  _Alignas(64) _Atomic(sc_mpsc_node *) tail; /* producers exchange here */
  _Alignas(64) sc_mpsc_node *head;           /* consumer only */
  sc_mpsc_node stub;
} sc_mpsc;

static inline void sc_mpsc_init(sc_mpsc *q) {
  atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
  q->head = &q->stub;
  atomic_store_explicit(&q->tail, &q->stub, memory_order_release);
}

static inline void sc_mpsc_push(sc_mpsc *q, sc_mpsc_node *n) {
  atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
  sc_mpsc_node *prev = atomic_exchange_explicit(&q->tail, n, memory_order_acq_rel);
  atomic_store_explicit(&prev->next, n, memory_order_release);
}

static inline sc_mpsc_node *sc_mpsc_pop(sc_mpsc *q) {
  sc_mpsc_node *head = q->head;
  sc_mpsc_node *next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (head == &q->stub) {
    if (next == NULL) return NULL;
    q->head = next;
    head = next;
    next = atomic_load_explicit(&next->next, memory_order_acquire);
  }
  if (next != NULL) {
    q->head = next;
    return head;
  }
  /* head is the last linked node; if a producer is mid-push, wait for its wake-up */
  if (atomic_load_explicit(&q->tail, memory_order_acquire) != head) return NULL;
  sc_mpsc_push(q, &q->stub);
  next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (next != NULL) {
    q->head = next;
    return head;
  }
  return NULL;
}

/* True when an item may be waiting (consumer thread only; a push in progress counts). */
static inline int sc_mpsc_maybe_nonempty(sc_mpsc *q) {
  return q->head != &q->stub ||
         atomic_load_explicit(&q->tail, memory_order_acquire) != &q->stub;
}

/* Containing struct of an embedded node. */
#define SC_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
