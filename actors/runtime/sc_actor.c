/* sc_actor.c - actor slots, mailboxes, loop threads and dispatch (see sc_node_impl.h for
 * the scheduling protocol). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "actors/runtime/sc_node_impl.h"
#include "base/clock.h"
#include "actors/runtime/sc_wake.h"

#define LOG "actor"

static void loop_wake(sc_loop *l) {
  /* Coalesce: only the idle->pending transition costs a uv_async_send (a syscall). */
  if (sc_wake_claim(&l->wake_pending)) uv_async_send(&l->wake);
}

/* After the sender counted its letter (a seq_cst RMW on s->enq, the first half of the
 * handshake in sc_wake.h). While the receiver is busy the slot stays scheduled, and the
 * plain seq_cst load leaves the flag's cache line shared instead of taking it over with
 * an exchange for every message. */
static void slot_schedule(sc_slot *s) {
  if (atomic_load_explicit(&s->scheduled, memory_order_seq_cst)) return;
  if (sc_wake_claim(&s->scheduled)) {
    sc_mpsc_push(&s->loop->runq, &s->run_link);
    loop_wake(s->loop);
  }
}

void sc_letter_body_free(int type, void *body) {
  if (body == NULL) return;
  if (type >= SC_SYS_BASE)
    free(body);
  else
    sc_msg_body_destroy(type, body);
}

/* Frees what a letter's body field holds: a body of type, or a received message not
 * decoded yet (SC_LETTER_RAW). */
static void body_release(int type, void *bits) {
  const uintptr_t b = (uintptr_t)bits;
  if (b & SC_LETTER_RAW)
    sc_raw_free((sc_raw_msg *)(b & ~SC_LETTER_BITS));
  else
    sc_letter_body_free(type, (void *)(b & ~SC_LETTER_BITS));
}

void sc_letter_free(sc_letter *lt) {
  body_release(lt->env.type, lt->body);
  free(lt);
}

/* Pushes a letter into a live slot. force: system letters ignore the capacity. tap: the
 * transport whose subscribers get a copy when a subscriber is attached now (the receiving
 * loop records it just before the handler runs). */
static int slot_push(sc_node *n, sc_slot *s, const sc_envelope *env, void *body,
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
      body_release(env->type, body);
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
  if (tap != NULL && sc_tap_wanted(tap)) l->body = (void *)((uintptr_t)body | SC_LETTER_TAPPED);
  sc_mpsc_push(&s->mbox, &l->link);
  slot_schedule(s);
  return 0;
}

/* System letters skip the mailbox bound and are never tapped. */
static int deliver(sc_node *n, const sc_envelope *env, void *body, bool tapped) {
  if (env->dst.slot >= SC_MAX_SLOTS || env->dst.node != (uint16_t)n->rank) return SC_ENOENT;
  if (atomic_load_explicit(&n->stopping, memory_order_acquire)) return SC_ECLOSED;
  const bool sys = env->type >= SC_SYS_BASE;
  return slot_push(n, &n->slots[env->dst.slot], env, body, sys, tapped && !sys ? n->tr : NULL);
}

int sc_deliver_local(sc_node *n, const sc_envelope *env, void *body) {
  return deliver(n, env, body, false);
}

int sc_deliver_local_tapped(sc_node *n, const sc_envelope *env, void *body) {
  return deliver(n, env, body, true);
}

int sc_deliver_raw(sc_node *n, const sc_envelope *env, sc_raw_msg *raw) {
  return deliver(n, env, (void *)((uintptr_t)raw | SC_LETTER_RAW), true);
}

const char *sc_slot_name(sc_node *n, uint16_t slot) {
  if (slot >= SC_MAX_SLOTS) return NULL;
  sc_slot *s = &n->slots[slot];
  return atomic_load_explicit(&s->live, memory_order_acquire) ? s->name : NULL;
}

/* ---- loops ---- */

static void on_wake(uv_async_t *h);
static void on_prepare(uv_prepare_t *h);

int sc_loop_create(sc_node *n, int index, sc_loop **out) {
  sc_loop *l = sc_calloc_lines(1, sizeof *l);
  if (l == NULL) return SC_ENOMEM;
  int rc = uv_loop_init(&l->uv);
  if (rc != 0) goto fail_free;
  rc = uv_async_init(&l->uv, &l->wake, on_wake);
  if (rc != 0) goto fail_loop;
  l->wake.data = l;
  uv_prepare_init(&l->uv, &l->prep);
  l->prep.data = l;
  uv_prepare_start(&l->prep, on_prepare);
  uv_unref((uv_handle_t *)&l->prep);
  sc_mpsc_init(&l->runq);
  l->node = n;
  l->index = index;
  *out = l;
  return 0;
fail_loop:
  uv_loop_close(&l->uv);
fail_free:
  free(l);
  return SC_ESYS;
}

/* The loop of the calling thread: sends from it take the loop's own DEALERs. */
static _Thread_local sc_loop *tl_loop;

sc_loop *sc_loop_self(const sc_node *n) {
  return tl_loop != NULL && tl_loop->node == n ? tl_loop : NULL;
}

static void loop_main(void *arg) {
  sc_loop *l = arg;
  tl_loop = l;
  sc_thread_name("loop", l->node->rank, l->index);
  uv_run(&l->uv, UV_RUN_DEFAULT);
}

int sc_loop_start(sc_loop *l) {
  if (uv_thread_create(&l->thread, loop_main, l) != 0) return SC_ESYS;
  l->started = true;
  return 0;
}

/* ---- dispatch ---- */

static void actor_finalize(sc_loop *l, sc_actor *a);

static void ctx_init(sc_ctx *c, sc_loop *l, sc_actor *a, const sc_envelope *env) {
  c->node = l->node;
  c->actor = a;
  c->loop = l;
  c->env = env;
  c->letter = NULL;
}

void sc_send_down(sc_node *n, sc_actor_id watcher, sc_actor_id who, int reason,
                      const char *why) {
  sc_msg_down *d = sc_msg_body_new(SC_MSG_DOWN);
  if (d == NULL) return;
  d->who = who;
  d->node = who.node;
  d->reason = reason > 0 ? SC_EINVAL : reason;
  d->message = strdup(why ? why : sc_strerror(reason));
  sc_envelope env = {.type = SC_MSG_DOWN, .src = who, .dst = watcher};
  if (sc_route(n, &env, d) != 0) sc_msg_body_destroy(SC_MSG_DOWN, d);
}

/* A runtime letter {who, reason} to a local slot (system types bypass the mailbox
 * bound). Returns sc_deliver_local's code; the letter is freed when it was not taken. */
static int send_sys(sc_node *n, int type, sc_actor_id who, sc_actor_id to, int reason) {
  sc_sys_watch *w = malloc(sizeof *w);
  if (w == NULL) return SC_ENOMEM;
  w->who = who;
  w->reason = reason;
  sc_envelope env = {.type = (uint16_t)type, .src = who, .dst = to};
  const int rc = sc_deliver_local(n, &env, w);
  if (rc != 0) free(w);
  return rc;
}

int sc_reply_error_to(sc_node *n, const sc_envelope *req, int code, const char *msg) {
  if (req == NULL || !(req->seq & SC_SEQ_REQUEST) || sc_actor_id_is_null(req->src))
    return SC_EINVAL;
  sc_msg_error_reply *e = sc_msg_body_new(SC_MSG_ERROR_REPLY);
  if (e == NULL) return SC_ENOMEM;
  e->code = code;
  e->message = strdup(msg ? msg : sc_strerror(code)); /* NULL on OOM: sent without */
  sc_envelope env = {.type = SC_MSG_ERROR_REPLY, .step = req->step,
                     .seq = (req->seq & SC_SEQ_ID_MASK) | SC_SEQ_REPLY, .src = req->dst,
                     .dst = req->src, .trace_id = req->trace_id};
  const int rc = sc_route(n, &env, e);
  if (rc != 0) sc_msg_body_destroy(SC_MSG_ERROR_REPLY, e);
  return rc;
}

/* A letter for an actor that is gone: free it (not tapped: no actor took it); a request
 * gets an error reply. A monitor or link that the actor never took is answered as if
 * it had been taken just before the actor stopped (sc_monitor and sc_link returned 0:
 * the watcher waits for this answer). */
static void reject_letter(sc_node *n, sc_letter *l, int code) {
  const sc_sys_watch *w = l->body;
  const bool notify = !atomic_load(&n->stopping);
  if (l->env.type == SC_SYS_MONITOR && notify)
    sc_send_down(n, w->who, l->env.dst, code, "no such actor");
  else if (l->env.type == SC_SYS_LINK && notify)
    (void)send_sys(n, SC_SYS_EXIT, l->env.dst, w->who, code);
  else
    (void)sc_reply_error_to(n, &l->env, code, "the destination actor does not exist");
  sc_letter_free(l);
}

static void actor_stop_req(sc_actor *a, int reason) {
  if (!a->stopping) {
    a->stopping = true;
    a->stop_reason = reason;
  }
}

static void pending_remove(sc_actor *a, sc_pending *p) {
  for (sc_pending **pp = &a->pending; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
}

static void on_timer_closed(uv_handle_t *h) { free(h); }

static void pending_free(sc_pending *p) {
  if (p->timer) {
    uv_timer_stop(p->timer);
    uv_close((uv_handle_t *)p->timer, on_timer_closed);
  }
  free(p);
}

static void handle_reply(sc_loop *l, sc_actor *a, sc_letter *lt) {
  const uint64_t id = lt->env.seq & SC_SEQ_ID_MASK;
  sc_pending *p = a->pending;
  while (p && p->id != id) p = p->next;
  if (p == NULL) {
    atomic_fetch_add_explicit(&l->node->late_replies, 1, memory_order_relaxed);
    return;
  }
  pending_remove(a, p);
  int rc = 0;
  if (lt->env.type == SC_MSG_ERROR_REPLY) rc = ((const sc_msg_error_reply *)lt->body)->code;
  if (rc >= 0 && lt->env.type == SC_MSG_ERROR_REPLY) rc = SC_EIO;
  sc_ctx c;
  ctx_init(&c, l, a, &lt->env);
  p->cb(&c, p->ud, rc, &lt->env, lt->body);
  pending_free(p);
}

/* The actor's first letter: runs its init. */
static void start_actor(sc_loop *l, sc_slot *s, const sc_letter *lt) {
  sc_actor *a = *(sc_actor **)lt->body;
  s->actor = a;
  if (a->spec->init) {
    sc_ctx c;
    ctx_init(&c, l, a, NULL);
    const int rc = a->spec->init(&c, a->state, (char *)lt->body + sizeof(sc_actor *));
    if (rc != 0) {
      const int reason = rc < 0 ? rc : SC_EINVAL;
      actor_stop_req(a, reason);
      /* The node actor (slot 0) and the startup actors (slots 1..num_startup, generation
       * 1: a slot that a stopped startup actor left goes to ordinary actors) are what
       * the node is for (the gateway that binds the clients' endpoint, say): a node
       * without one of them stops, as a node that cannot bind its own endpoint does,
       * instead of running on without it. */
      if (s->index <= (uint32_t)l->node->num_startup && a->id.gen == 1) {
        SC_ERROR(LOG, "node %d: %s could not start (%s): stopping the node", l->node->rank,
                 s->name, sc_strerror(reason));
        sc_node_request_stop(l->node, reason);
      }
    }
  }
}

/* What a tapped letter's record needs: when the letter was taken from the mailbox (the
 * record's time) and, for a letter from another node, its bytes as received. */
typedef struct tap_note {
  uint64_t ns;
  sc_raw_msg *raw;
} tap_note;

/* Runs a letter for its live actor a (a handler, a reply callback or a runtime letter),
 * then frees it; a tapped one (tap not NULL) is recorded for the tap first. */
static void run_letter(sc_loop *l, sc_slot *s, sc_actor *a, sc_letter *lt,
                       const tap_note *tap) {
  sc_node *n = l->node;
  const int type = lt->env.type;
  /* before the handler, which may take the body */
  if (tap) sc_tap_letter(n->tr, l, lt, tap->raw, tap->ns);
  sc_ctx c;
  ctx_init(&c, l, a, &lt->env);
  switch (type) {
  case SC_SYS_MONITOR:
  case SC_SYS_LINK: {
    sc_watch *w = malloc(sizeof *w);
    if (w) {
      w->who = ((sc_sys_watch *)lt->body)->who;
      w->link = type == SC_SYS_LINK;
      w->next = a->watchers;
      a->watchers = w;
    }
    break;
  }
  case SC_SYS_NODE_DOWN: {
    /* fail the requests that wait for an answer from the dead node, at once */
    const uint16_t rank = ((sc_sys_watch *)lt->body)->who.node;
    for (sc_pending **pp = &a->pending; *pp;) {
      sc_pending *p = *pp;
      if (p->dst.node != rank) {
        pp = &p->next;
        continue;
      }
      *pp = p->next;
      p->cb(&c, p->ud, SC_EDOWN, NULL, NULL);
      pending_free(p);
    }
    break;
  }
  case SC_SYS_EXIT: {
    const sc_sys_watch *w = lt->body;
    bool linked = false;
    for (sc_watch **pp = &a->watchers; *pp; pp = &(*pp)->next)
      if ((*pp)->link && sc_actor_id_eq((*pp)->who, w->who)) {
        sc_watch *dead = *pp;
        *pp = dead->next;
        free(dead);
        linked = true;
        break;
      }
    if (linked && a->spec->trap_exit) {
      sc_send_down(n, a->id, w->who, w->reason, "linked actor exited");
    } else {
      actor_stop_req(a, w->reason);
    }
    break;
  }
  default:
    if (lt->env.seq & SC_SEQ_REPLY) {
      handle_reply(l, a, lt);
      break;
    }
    sc_handler_fn h = type < SC_MSG_COUNT ? a->spec->handlers[type] : NULL;
    if (h == NULL) h = a->spec->fallback;
    if (h == NULL) {
      SC_DEBUG(LOG, "%s: no handler for %s", s->name, sc_msg_type_name(type));
      break;
    }
    if (type < SC_MSG_COUNT) c.letter = lt; /* sc_take_body may claim its body */
    const int rc = h(&c, &lt->env, lt->body);
    if (rc < 0) actor_stop_req(a, rc);
  }
  sc_letter_free(lt);
}

static void dispatch(sc_loop *l, sc_slot *s, sc_letter *lt, const tap_note *tap) {
  const uint32_t gen = atomic_load_explicit(&s->gen, memory_order_acquire);
  if (lt->env.type == SC_SYS_START && lt->env.dst.gen == gen) {
    start_actor(l, s, lt);
    sc_letter_free(lt);
  } else if (s->actor == NULL || lt->env.dst.gen != gen || s->actor->stopping) {
    reject_letter(l->node, lt, SC_ENOENT);
    return;
  } else {
    run_letter(l, s, s->actor, lt, tap);
  }
  if (s->actor && s->actor->stopping) actor_finalize(l, s->actor);
}

/* Decodes, in place, a letter that came from another node; false (letter freed and
 * counted; a request is answered with the error) when it does not decode. The received
 * bytes are freed, or, when keep is not NULL (a tapped letter: its record copies them),
 * left in *keep for the caller to free. */
static bool decode_received(sc_loop *l, sc_letter *lt, sc_raw_msg **keep) {
  sc_diag d = {0};
  void *body = NULL;
  sc_raw_msg *raw = lt->body;
  const int rc = sc_raw_decode(raw, &lt->env, &body, &d);
  lt->body = body;
  if (rc == 0 && keep != NULL) *keep = raw;
  else sc_raw_free(raw);
  if (rc == 0) return true;
  SC_WARN(LOG, "node %d: dropped an undecodable message: %s", (int)l->node->rank,
          sc_diag_message(&d));
  atomic_fetch_add_explicit(&l->node->undeliverable, 1, memory_order_relaxed);
  (void)sc_reply_error_to(l->node, &lt->env, rc, "the message body does not decode");
  sc_letter_free(lt);
  return false;
}

/* Takes up to a batch of letters, then runs them. Each letter and its body were written
 * on the senders' cores, and the mailbox is a linked list, so finding letters is a chain
 * of cache misses; fetching each body (prefetch) while the next letter is found overlaps
 * the two kinds. deq, a line every sender reads, changes once per batch, and
 * the tapped letters of a batch share one clock read (the time they left the mailbox). */
static void run_slot(sc_loop *l, sc_slot *s) {
  sc_letter *batch[SC_ACTOR_BATCH];
  uintptr_t tapped = 0;
  int k = 0;
  for (; k < SC_ACTOR_BATCH; k++) {
    sc_mpsc_node *nd = sc_mpsc_pop(&s->mbox);
    if (nd == NULL) break;
    batch[k] = SC_CONTAINER_OF(nd, sc_letter, link);
    tapped |= (uintptr_t)batch[k]->body;
    __builtin_prefetch((void *)((uintptr_t)batch[k]->body & ~SC_LETTER_BITS));
  }
  /* only this loop writes deq */
  const uint32_t deq = atomic_load_explicit(&s->deq, memory_order_relaxed) + (uint32_t)k;
  if (k > 0) atomic_store_explicit(&s->deq, deq, memory_order_release);
  const uint64_t taken_ns = tapped & SC_LETTER_TAPPED ? sc_wall_ns() : 0;
  for (int i = 0; i < k; i++) {
    sc_letter *lt = batch[i];
    const uintptr_t bits = (uintptr_t)lt->body;
    const bool marked = (bits & SC_LETTER_TAPPED) != 0;
    tap_note tap = {taken_ns, NULL};
    lt->body = (void *)(bits & ~SC_LETTER_BITS);
    if ((bits & SC_LETTER_RAW) &&
        !decode_received(l, lt, marked ? &tap.raw : NULL))
      continue;
    dispatch(l, s, lt, marked ? &tap : NULL);
    if (tap.raw) sc_raw_free(tap.raw);
  }
  if (k == SC_ACTOR_BATCH) { /* likely more: stay scheduled, run again after the others */
    sc_mpsc_push(&l->runq, &s->run_link);
    return;
  }
  sc_wake_clear(&s->scheduled);
  /* A producer that found scheduled=1 before the clear relies on this re-check. */
  if (atomic_load_explicit(&s->enq, memory_order_seq_cst) != deq && sc_wake_claim(&s->scheduled)) {
    /* Nothing to take although letters are counted: a sender was preempted between
     * counting its letter and linking it in. Give it the CPU rather than spinning on the
     * slot until it is rescheduled (on an oversubscribed machine it may be waiting for
     * this very core). */
    if (k == 0) sched_yield();
    sc_mpsc_push(&l->runq, &s->run_link);
  }
}

static void loop_shutdown(sc_loop *l);

/* Runs queued actors; true when the turn cap was hit (more work may be queued). After
 * each actor's batch, what it sent to other nodes leaves (a pack per peer): a reply waits
 * for its own actor's batch at most, never for the other actors of the turn. */
static bool drain_runq(sc_loop *l) {
  for (int turn = 0; turn < SC_LOOP_TURNS; turn++) {
    sc_mpsc_node *nd = sc_mpsc_pop(&l->runq);
    if (nd == NULL) return false;
    l->hot = true;
    run_slot(l, SC_CONTAINER_OF(nd, sc_slot, run_link));
    sc_transport_loop_flush(l->node->tr, l);
  }
  return true;
}

static void on_wake(uv_async_t *h) {
  sc_loop *l = h->data;
  sc_wake_clear(&l->wake_pending);
  if (atomic_load_explicit(&l->stop, memory_order_acquire)) {
    loop_shutdown(l);
    return;
  }
  if (drain_runq(l)) loop_wake(l); /* fairness: let timers and sockets run, then go on */
}

static bool runq_ready(void *l) { return sc_mpsc_maybe_nonempty(&((sc_loop *)l)->runq); }

/* Spins briefly while work keeps arriving (cluster spin_us), running it as it comes, for
 * at most SC_SPIN_MAX_NS in all. */
static void loop_spin(sc_loop *l) {
  if (!l->hot || atomic_load_explicit(&l->stop, memory_order_acquire)) return;
  l->hot = false;
  const uint64_t end = sc_now_ns() + SC_SPIN_MAX_NS;
  atomic_store_explicit(&l->wake_pending, 1, memory_order_release);
  while (sc_spin_until(l->node->spin_ns, end, &l->spin_off_until, runq_ready, l))
    drain_runq(l);
  sc_wake_clear(&l->wake_pending);
  /* a producer that saw wake_pending=1 did not signal: look once more */
  if (sc_mpsc_maybe_nonempty(&l->runq)) loop_wake(l);
}

/* Before blocking: send what timers and other handles' callbacks sent to other nodes
 * (actors' sends left after their batches), spin, then let the transport publish the
 * loop's tap records and retry what its DEALERs refused (a send may have consumed their
 * fds' edge). libuv runs prepare handles newest first, so this one, started with the
 * loop, runs after those of the loop's other handles (the gateway's). */
static void on_prepare(uv_prepare_t *h) {
  sc_loop *l = h->data;
  sc_transport_loop_flush(l->node->tr, l);
  loop_spin(l);
  if (sc_transport_loop_prepare(l->node->tr, l)) loop_wake(l);
}

/* ---- spawn / stop ---- */

static sc_loop *pick_loop(sc_node *n, const sc_actor_spec *spec, int *err) {
  *err = 0;
  if (spec->loop >= 0) return n->loops[spec->loop % n->num_shared_loops];
  if (spec->loop == SC_LOOP_ANY) {
    const uint32_t k = atomic_fetch_add_explicit(&n->rr, 1, memory_order_relaxed);
    return n->loops[k % (uint32_t)n->num_shared_loops];
  }
  /* SC_LOOP_OWN: a dedicated thread (created under n->mu by the caller) */
  if (n->num_loops >= SC_MAX_LOOPS) {
    *err = SC_EFULL;
    return NULL;
  }
  sc_loop *l = NULL;
  *err = sc_loop_create(n, n->num_loops, &l);
  if (*err) return NULL;
  l->own = true;
  if (n->started && (*err = sc_loop_start(l)) != 0) {
    sc_loop_destroy(l);
    return NULL;
  }
  n->loops[n->num_loops++] = l;
  return l;
}

int sc_spawn_at(sc_node *n, const sc_actor_spec *spec, const char *name, const void *arg,
                size_t arg_size, int slot_index, sc_actor_id *out) {
  if (spec == NULL || out == NULL || (arg_size && arg == NULL)) return SC_EINVAL;
  if (spec->mailbox_cap > SC_MAILBOX_MAX_CAP) return SC_EINVAL;
  if (atomic_load(&n->stopping)) return SC_ECLOSED;
  int rc = 0;
  sc_actor *a = calloc(1, sizeof *a);
  void *state = spec->state_size ? calloc(1, spec->state_size) : NULL;
  char *start = malloc(sizeof(sc_actor *) + (arg_size ? arg_size : 1));
  if (a == NULL || start == NULL || (spec->state_size && state == NULL)) {
    rc = SC_ENOMEM;
    goto fail;
  }
  pthread_mutex_lock(&n->mu);
  sc_slot *s = NULL;
  if (slot_index >= 0) {
    s = &n->slots[slot_index];
    if (s->loop == NULL) {
      sc_loop *l = pick_loop(n, spec, &rc);
      if (l == NULL) goto fail_unlock;
      s->loop = l;
    } else if (atomic_load(&s->live)) {
      rc = SC_EINVAL;
      goto fail_unlock;
    }
  } else {
    sc_loop *l = pick_loop(n, spec, &rc);
    if (l == NULL) goto fail_unlock;
    if (l->free_slots) {
      s = l->free_slots;
      l->free_slots = s->free_next;
    } else {
      const uint32_t idx = atomic_fetch_add(&n->next_slot, 1);
      if (idx >= SC_MAX_SLOTS) {
        rc = SC_EFULL;
        goto fail_unlock;
      }
      s = &n->slots[idx];
      s->loop = l;
    }
  }
  pthread_mutex_unlock(&n->mu);

  const uint32_t gen = atomic_load(&s->gen) + 1;
  s->cap = spec->mailbox_cap ? spec->mailbox_cap : SC_MAILBOX_DEFAULT_CAP;
  s->overflow = spec->overflow;
  snprintf(s->name, sizeof s->name, "%s", name ? name : (spec->name ? spec->name : "actor"));
  a->spec = spec;
  a->slot = s;
  a->state = state;
  a->id = (sc_actor_id){.node = (uint16_t)n->rank, .slot = s->index, .gen = gen};
  memcpy(start, &a, sizeof a);
  if (arg_size) memcpy(start + sizeof a, arg, arg_size);
  atomic_store(&s->gen, gen);
  /* Live before START is queued: the slot's loop may run START, and even finalize the
   * actor, before this thread gets further, and a live flag set after that would
   * revive a dead slot. The price is a window of a few instructions in which a sender
   * that guessed the id could queue a letter ahead of START, which dispatch then
   * rejects. Ids are not guessable except the startup actors' (fixed), and those are
   * spawned before the node says hello, so no peer sends to them yet. */
  atomic_store(&s->live, 1);
  sc_envelope env = {.type = SC_SYS_START, .src = a->id, .dst = a->id};
  rc = slot_push(n, s, &env, start, true, NULL);
  if (rc != 0) { /* only ENOMEM: undo */
    atomic_store(&s->live, 0);
    pthread_mutex_lock(&n->mu);
    s->free_next = s->loop->free_slots;
    s->loop->free_slots = s;
    pthread_mutex_unlock(&n->mu);
    goto fail;
  }
  *out = a->id;
  return 0;
fail_unlock:
  pthread_mutex_unlock(&n->mu);
fail:
  free(a);
  free(state);
  free(start);
  return rc;
}

int sc_spawn(sc_node *n, const sc_actor_spec *spec, const void *arg, size_t arg_size,
             sc_actor_id *out) {
  return sc_spawn_at(n, spec, NULL, arg, arg_size, -1, out);
}

/* Runs on the loop thread: terminate, notify watchers, release the slot. */
static void actor_finalize(sc_loop *l, sc_actor *a) {
  sc_node *n = l->node;
  sc_slot *s = a->slot;
  const int reason = a->stop_reason;
  atomic_store_explicit(&s->live, 0, memory_order_release);
  if (a->spec->terminate) {
    sc_ctx c;
    ctx_init(&c, l, a, NULL);
    a->spec->terminate(&c, a->state, reason);
  }
  while (a->pending) {
    sc_pending *p = a->pending;
    a->pending = p->next;
    pending_free(p);
  }
  const bool notify = !atomic_load(&n->stopping);
  while (a->watchers) {
    sc_watch *w = a->watchers;
    a->watchers = w->next;
    if (notify) {
      if (!w->link)
        sc_send_down(n, w->who, a->id, reason, reason == 0 ? "stopped" : sc_strerror(reason));
      else if (reason != 0)
        send_sys(n, SC_SYS_EXIT, a->id, w->who, reason);
    }
    free(w);
  }
  SC_DEBUG(LOG, "%s (%u.%u.%u) stopped: %d", s->name, a->id.node, a->id.slot, a->id.gen,
           reason);
  s->actor = NULL;
  free(a->state);
  free(a);
  pthread_mutex_lock(&n->mu);
  s->free_next = l->free_slots;
  l->free_slots = s;
  pthread_mutex_unlock(&n->mu);
}

void sc_uv_close_any(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void loop_shutdown(sc_loop *l) {
  sc_node *n = l->node;
  for (uint32_t i = 0; i < SC_MAX_SLOTS && i < atomic_load(&n->next_slot); i++) {
    sc_slot *s = &n->slots[i];
    if (s->loop == l && s->actor) {
      actor_stop_req(s->actor, SC_ECLOSED);
      s->actor->stop_reason = SC_ECLOSED;
      actor_finalize(l, s->actor);
    }
  }
  sc_transport_loop_close(n->tr, l); /* after terminate handlers, which may still send */
  uv_walk(&l->uv, sc_uv_close_any, NULL);
}

void sc_loop_stop_join(sc_loop *l) {
  if (!l->started) return;
  atomic_store(&l->stop, 1);
  uv_async_send(&l->wake);
  uv_thread_join(&l->thread);
  l->started = false;
}

void sc_loop_destroy(sc_loop *l) {
  if (l == NULL) return;
  if (!uv_is_closing((uv_handle_t *)&l->wake)) {
    /* never started: run the loop once so the handle closes */
    uv_walk(&l->uv, sc_uv_close_any, NULL);
  }
  uv_run(&l->uv, UV_RUN_DEFAULT);
  uv_loop_close(&l->uv);
  free(l);
}

/* ---- the actor-side API ---- */

sc_actor_id sc_self(const sc_ctx *ctx) { return ctx->actor->id; }
void *sc_state(const sc_ctx *ctx) { return ctx->actor->state; }
sc_node *sc_ctx_node(const sc_ctx *ctx) { return ctx->node; }
struct uv_loop_s *sc_ctx_uv_loop(const sc_ctx *ctx) { return &ctx->loop->uv; }
const sc_envelope *sc_ctx_env(const sc_ctx *ctx) { return ctx->env; }

void *sc_take_body(sc_ctx *ctx) {
  sc_letter *lt = ctx->letter;
  if (lt == NULL || lt->body == NULL) return NULL;
  void *b = lt->body;
  lt->body = NULL; /* dispatch frees NULL: nothing */
  return b;
}

int sc_send_step(sc_ctx *ctx, sc_actor_id dst, int type, uint64_t step, void *body) {
  if (type < 0 || type >= SC_MSG_COUNT) return SC_EINVAL;
  sc_envelope env = {.type = (uint16_t)type, .step = step, .src = ctx->actor->id,
                     .dst = dst, .trace_id = ctx->env ? ctx->env->trace_id : 0};
  return sc_route(ctx->node, &env, body);
}

int sc_send(sc_ctx *ctx, sc_actor_id dst, int type, void *body) {
  return sc_send_step(ctx, dst, type, ctx->env ? ctx->env->step : 0, body);
}

static void on_request_timeout(uv_timer_t *t) {
  sc_pending *p = t->data;
  sc_actor *a = p->owner;
  pending_remove(a, p);
  sc_ctx c;
  sc_loop *l = a->slot->loop;
  ctx_init(&c, l, a, NULL);
  p->cb(&c, p->ud, SC_ETIMEDOUT, NULL, NULL);
  pending_free(p);
  if (a->stopping && a->slot->actor == a) actor_finalize(l, a);
}

int sc_request(sc_ctx *ctx, sc_actor_id dst, int type, void *body, int64_t timeout_ms,
               sc_reply_fn cb, void *ud) {
  if (cb == NULL || type < 0 || type >= SC_MSG_COUNT) return SC_EINVAL;
  sc_actor *a = ctx->actor;
  sc_pending *p = calloc(1, sizeof *p);
  if (p == NULL) return SC_ENOMEM;
  if (timeout_ms > 0) {
    p->timer = malloc(sizeof *p->timer);
    if (p->timer == NULL) {
      free(p);
      return SC_ENOMEM;
    }
    uv_timer_init(&ctx->loop->uv, p->timer);
    p->timer->data = p;
  }
  p->id = (++a->next_req) & SC_SEQ_ID_MASK;
  p->dst = dst;
  p->cb = cb;
  p->ud = ud;
  p->owner = a;
  sc_envelope env = {.type = (uint16_t)type, .step = ctx->env ? ctx->env->step : 0,
                     .seq = p->id | SC_SEQ_REQUEST, .src = a->id, .dst = dst,
                     .trace_id = ctx->env ? ctx->env->trace_id : 0};
  const int rc = sc_route(ctx->node, &env, body);
  if (rc != 0) {
    if (p->timer) uv_close((uv_handle_t *)p->timer, on_timer_closed);
    free(p);
    return rc;
  }
  if (p->timer) uv_timer_start(p->timer, on_request_timeout, (uint64_t)timeout_ms, 0);
  p->next = a->pending;
  a->pending = p;
  return 0;
}

int sc_reply(sc_ctx *ctx, int type, void *body) {
  const sc_envelope *req = ctx->env;
  if (req == NULL || !(req->seq & SC_SEQ_REQUEST) || type < 0 || type >= SC_MSG_COUNT)
    return SC_EINVAL;
  sc_envelope env = {.type = (uint16_t)type, .step = req->step,
                     .seq = (req->seq & SC_SEQ_ID_MASK) | SC_SEQ_REPLY,
                     .src = ctx->actor->id, .dst = req->src, .trace_id = req->trace_id};
  return sc_route(ctx->node, &env, body);
}

/* A handler only runs for letters whose dst is its actor's live id, so the reply's src
 * (req->dst) is ctx->actor->id, as sc_reply sends. */
int sc_reply_error(sc_ctx *ctx, int code, const char *message) {
  return sc_reply_error_to(ctx->node, ctx->env, code, message);
}

int sc_monitor(sc_ctx *ctx, sc_actor_id target) {
  sc_node *n = ctx->node;
  if (target.node != (uint16_t)n->rank) {
    if (target.node >= (uint32_t)n->cluster.num_nodes) return SC_EINVAL;
    sc_remote_watch *w = malloc(sizeof *w);
    if (w == NULL) return SC_ENOMEM;
    w->watcher = ctx->actor->id;
    w->who = target;
    /* Under the lock that sc_node_peer_is_down takes after it marks the node down: a
     * watch added here while the node is up is still on the list when it looks, and
     * one for a node already down is answered here instead, so DOWN goes exactly once. */
    pthread_mutex_lock(&n->mu);
    const bool down = sc_node_peer_down(n, target.node);
    if (!down) {
      w->next = n->remote_watches;
      n->remote_watches = w;
    }
    pthread_mutex_unlock(&n->mu);
    if (down) {
      free(w);
      sc_send_down(n, ctx->actor->id, target, SC_EDOWN, "node is down");
    }
    return 0;
  }
  const int rc = send_sys(n, SC_SYS_MONITOR, ctx->actor->id, target, 0);
  if (rc == SC_ENOENT) sc_send_down(n, ctx->actor->id, target, SC_ENOENT, "no such actor");
  return rc == SC_ENOENT ? 0 : rc;
}

int sc_monitor_node(sc_ctx *ctx, int rank) {
  sc_node *n = ctx->node;
  if (rank < 0 || rank >= n->cluster.num_nodes || rank == n->rank) return SC_EINVAL;
  return sc_monitor(ctx, (sc_actor_id){.node = (uint16_t)rank, .slot = 0, .gen = 0}) ;
}

int sc_link(sc_ctx *ctx, sc_actor_id target) {
  sc_node *n = ctx->node;
  if (target.node != (uint16_t)n->rank) return SC_ENOTSUP;
  sc_watch *mine = malloc(sizeof *mine);
  if (mine == NULL) return SC_ENOMEM;
  int rc = send_sys(n, SC_SYS_LINK, ctx->actor->id, target, 0);
  /* a target already gone is one that stopped with SC_ENOENT just after the link, as
   * for sc_monitor: the EXIT comes as a letter (DOWN with trap_exit), not as an error */
  if (rc == SC_ENOENT) rc = send_sys(n, SC_SYS_EXIT, target, ctx->actor->id, SC_ENOENT);
  if (rc != 0) {
    free(mine);
    return rc;
  }
  mine->who = target;
  mine->link = true;
  mine->next = ctx->actor->watchers;
  ctx->actor->watchers = mine;
  return 0;
}

void sc_stop(sc_ctx *ctx, int reason) { actor_stop_req(ctx->actor, reason); }

void sc_broadcast_node_down(sc_node *n, int32_t rank) {
  const uint32_t used = atomic_load(&n->next_slot);
  for (uint32_t i = 0; i < used && i < SC_MAX_SLOTS; i++) {
    sc_slot *s = &n->slots[i];
    if (!atomic_load_explicit(&s->live, memory_order_acquire)) continue;
    const sc_actor_id to = {.node = (uint16_t)n->rank, .slot = (uint16_t)i,
                            .gen = atomic_load(&s->gen)};
    if (send_sys(n, SC_SYS_NODE_DOWN, (sc_actor_id){.node = (uint16_t)rank}, to, SC_EDOWN) ==
        SC_ENOMEM)
      return;
  }
}

int sc_node_stop_actor(sc_node *n, sc_actor_id id, int reason) {
  return send_sys(n, SC_SYS_EXIT, (sc_actor_id){0}, id, reason);
}
