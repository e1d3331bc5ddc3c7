/* sc_route.c - a letter's way from its sender into a mailbox: routing next to delivery,
 * so that a send reads top to bottom in one file.
 *
 * Every send comes to sc__route (sc_send, sc_request and sc_reply from sc_actor.c,
 * sc_node_send from any thread, the runtime's own letters), which either hands it to the
 * transport (another node: sc__transport_send, sc_outbound.c) or delivers it here:
 * deliver checks the address, sc__slot_push reserves mailbox capacity and pushes the
 * letter, and on the slot's idle->scheduled transition slot_schedule queues the slot on
 * its loop's run queue and wakes the loop. Two more ways in end in the same push: the io
 * thread's, with the letters other nodes sent (sc__deliver_raw), and spawn's, with an
 * actor's START letter for the slot it chose (sc__slot_push).
 *
 * A local send is the runtime's hottest path. Its steps are all in this file, their
 * helpers static here or static inline in sc_node_impl.h (sc__loop_wake, which sc_loop.c
 * uses too, and sc__body_release); it calls into other files only for a tap
 * (sc__tap_wanted) and for another node (sc__transport_send).
 */
#include <stdlib.h>

#include "actors/runtime/sc_node_impl.h"

static int deliver(sc_node *n, const sc_envelope *env, void *body, bool tapped);
static void slot_schedule(sc_slot *s);

int sc_node_send(sc_node *n, sc_envelope *env, void *body) {
  if (n == NULL || env == NULL || env->type >= SC_MSG_COUNT) return SC_EINVAL;
  return sc__route(n, env, body);
}

int sc__route(sc_node *n, sc_envelope *env, void *body) {
  env->major = SC_MSG_MAJOR;
  env->minor = SC_MSG_MINOR;
  if (env->dst.node == (uint16_t)n->rank) return deliver(n, env, body, true);
  if (env->dst.node >= (uint32_t)n->cluster.num_nodes || env->type >= SC_MSG_COUNT)
    return SC_EINVAL;
  if (atomic_load_explicit(&n->peer_down[env->dst.node], memory_order_acquire))
    return SC_EDOWN;
  if (n->tr == NULL) return SC_ECLOSED;
  return sc__transport_send(n->tr, env, body);
}

int sc__deliver_local(sc_node *n, const sc_envelope *env, void *body) {
  return deliver(n, env, body, false);
}

int sc__deliver_raw(sc_node *n, const sc_envelope *env, sc_raw_msg *raw) {
  return deliver(n, env, (void *)((uintptr_t)raw | SC_LETTER_RAW), true);
}

/* System letters skip the mailbox bound and are never tapped. */
static int deliver(sc_node *n, const sc_envelope *env, void *body, bool tapped) {
  if (env->dst.slot >= SC_MAX_SLOTS || env->dst.node != (uint16_t)n->rank) return SC_ENOENT;
  if (atomic_load_explicit(&n->stopping, memory_order_acquire)) return SC_ECLOSED;
  const bool sys = env->type >= SC_SYS_BASE;
  return sc__slot_push(n, &n->slots[env->dst.slot], env, body, sys,
                       tapped && !sys ? n->tr : NULL);
}

/* (the receiving loop records a tapped letter just before its handler runs) */
int sc__slot_push(sc_node *n, sc_slot *s, const sc_envelope *env, void *body,
                  bool force, sc_transport *tap) {
  if (!atomic_load_explicit(&s->live, memory_order_acquire) ||
      atomic_load_explicit(&s->gen, memory_order_acquire) != env->dst.gen)
    return SC_ENOENT;
  /* seq_cst: the slot's scheduled flag is a Dekker handshake with this count (sc_wake.h).
   * Letters held or reserved before ours: enq before our increment, less deq. Signed: a
   * sender that was preempted between the two may find deq past that value (letters other
   * senders counted after it were taken since), which means room. */
  const uint32_t enq = atomic_fetch_add_explicit(&s->enq, 1, memory_order_seq_cst);
  const int32_t held = (int32_t)(enq - atomic_load_explicit(&s->deq, memory_order_acquire));
  if (!force && held >= 0 && (uint32_t)held >= s->cap) {
    atomic_fetch_sub_explicit(&s->enq, 1, memory_order_acq_rel);
    if (s->overflow == SC_OVERFLOW_DROP) {
      atomic_fetch_add_explicit(&n->mailbox_dropped, 1, memory_order_relaxed);
      sc__body_release(env->type, body);
      return 0;
    }
    return SC_EFULL;
  }
  sc_letter *l = malloc(sizeof *l);
  if (l == NULL) {
    atomic_fetch_sub_explicit(&s->enq, 1, memory_order_acq_rel);
    return SC_ENOMEM;
  }
  l->env = *env;
  l->body = body;
  if (tap != NULL && sc__tap_wanted(tap))
    l->body = (void *)((uintptr_t)body | SC_LETTER_TAPPED);
  sc_mpsc_push(&s->mbox, &l->link);
  slot_schedule(s);
  return 0;
}

/* After the sender counted its letter (a seq_cst RMW on s->enq, the first half of the
 * handshake in sc_wake.h). While the receiver is busy the slot stays scheduled, and the
 * plain seq_cst load leaves the flag's cache line shared instead of taking it over with
 * an exchange for every message. */
static void slot_schedule(sc_slot *s) {
  if (atomic_load_explicit(&s->scheduled, memory_order_seq_cst)) return;
  if (sc_wake_claim(&s->scheduled)) {
    sc_mpsc_push(&s->loop->runq, &s->run_link);
    sc__loop_wake(s->loop);
  }
}
