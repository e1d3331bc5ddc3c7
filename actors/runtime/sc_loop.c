/* sc_loop.c - the loop threads, and the dispatch of letters to their actors (see
 * sc_node_impl.h for the scheduling protocol).
 *
 * A loop thread runs a libuv loop. Its async wake-up drains the run queue (drain_runq):
 * each scheduled slot gets a batch of letters (run_slot), and each letter goes to its
 * actor (dispatch, run_letter: init, a handler, a reply callback or a runtime letter);
 * before the loop blocks it spins, then lets the transport send (on_prepare). At stop it
 * finalizes its actors and closes its handles (loop_shutdown).
 *
 * Why together: this is the receiving side's per-letter path, so run_slot, dispatch,
 * run_letter and handle_reply stay static in one file and inline into each other. What
 * they share with sc_actor.c (sc__ctx_init, the pending
 * requests, sc__actor_stop_req) and with sc_route.c (sc__loop_wake, sc__body_release) is
 * static inline in sc_node_impl.h; what they call in sc_actor.c runs once per actor
 * (sc__actor_finalize) or for a letter no actor takes (sc__send_sys, sc__send_down,
 * sc__reply_error_to).
 */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "actors/runtime/sc_node_impl.h"
#include "base/clock.h"

#define LOG "actor" /* (the log's module name, as in sc_actor.c) */

/* ---- loops ---- */

static void on_wake(uv_async_t *h);
static void on_prepare(uv_prepare_t *h);
static void on_turn_again(uv_idle_t *h);

int sc__loop_create(sc_node *n, int index, sc_loop **out) {
  sc_loop *l = sc__calloc_lines(1, sizeof *l);
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
  uv_idle_init(&l->uv, &l->turn_again);
  l->turn_again.data = l;
  uv_unref((uv_handle_t *)&l->turn_again);
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

sc_loop *sc__loop_self(const sc_node *n) {
  return tl_loop != NULL && tl_loop->node == n ? tl_loop : NULL;
}

static void loop_main(void *arg) {
  sc_loop *l = arg;
  tl_loop = l;
  sc__thread_name("loop", l->node->rank, l->index);
  uv_run(&l->uv, UV_RUN_DEFAULT);
}

int sc__loop_start(sc_loop *l) {
  if (uv_thread_create(&l->thread, loop_main, l) != 0) return SC_ESYS;
  l->started = true;
  return 0;
}

/* ---- letters ---- */

/* Next to dispatch, which frees every letter it runs (sc_node.c's destroy frees what the
 * mailboxes still hold). */
void sc__letter_free(sc_letter *lt) {
  sc__body_release(lt->env.type, lt->body);
  free(lt);
}

/* ---- dispatch ---- */

/* A letter for an actor that is gone: free it (not tapped: no actor took it); a request
 * gets an error reply. A monitor or link that the actor never took is answered as if
 * it had been taken just before the actor stopped (sc_monitor and sc_link returned 0:
 * the watcher waits for this answer). */
static void reject_letter(sc_node *n, sc_letter *l, int code) {
  const sc_sys_watch *w = l->body;
  const bool notify = !atomic_load(&n->stopping);
  if (l->env.type == SC_SYS_MONITOR && notify)
    sc__send_down(n, w->who, l->env.dst, code, "no such actor");
  else if (l->env.type == SC_SYS_LINK && notify)
    (void)sc__send_sys(n, SC_SYS_EXIT, l->env.dst, w->who, code);
  else
    (void)sc__reply_error_to(n, &l->env, code, "the destination actor does not exist");
  sc__letter_free(l);
}

static void handle_reply(sc_loop *l, sc_actor *a, sc_letter *lt) {
  const uint64_t id = lt->env.seq & SC_SEQ_ID_MASK;
  sc_pending *p = a->pending;
  while (p && p->id != id) p = p->next;
  if (p == NULL) {
    atomic_fetch_add_explicit(&l->node->late_replies, 1, memory_order_relaxed);
    return;
  }
  sc__pending_remove(a, p);
  int rc = 0;
  if (lt->env.type == SC_MSG_ERROR_REPLY) rc = ((const sc_msg_error_reply *)lt->body)->code;
  if (rc >= 0 && lt->env.type == SC_MSG_ERROR_REPLY) rc = SC_EIO;
  sc_ctx c;
  sc__ctx_init(&c, l, a, &lt->env);
  p->cb(&c, p->ud, rc, &lt->env, lt->body);
  sc__pending_free(p);
}

/* The actor's first letter: runs its init. */
static void start_actor(sc_loop *l, sc_slot *s, const sc_letter *lt) {
  sc_actor *a = *(sc_actor **)lt->body;
  s->actor = a;
  if (a->spec->init) {
    sc_ctx c;
    sc__ctx_init(&c, l, a, NULL);
    const int rc = a->spec->init(&c, a->state, (char *)lt->body + sizeof(sc_actor *));
    if (rc != 0) {
      const int reason = rc < 0 ? rc : SC_EINVAL;
      sc__actor_stop_req(a, reason);
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
  if (tap) sc__tap_letter(n->tr, l, lt, tap->raw, tap->ns);
  sc_ctx c;
  sc__ctx_init(&c, l, a, &lt->env);
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
      sc__pending_free(p);
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
      sc__send_down(n, a->id, w->who, w->reason, "linked actor exited");
    } else {
      sc__actor_stop_req(a, w->reason);
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
    if (rc < 0) sc__actor_stop_req(a, rc);
  }
  sc__letter_free(lt);
}

static void dispatch(sc_loop *l, sc_slot *s, sc_letter *lt, const tap_note *tap) {
  const uint32_t gen = atomic_load_explicit(&s->gen, memory_order_acquire);
  if (lt->env.type == SC_SYS_START && lt->env.dst.gen == gen) {
    start_actor(l, s, lt);
    sc__letter_free(lt);
  } else if (s->actor == NULL || lt->env.dst.gen != gen || s->actor->stopping) {
    reject_letter(l->node, lt, SC_ENOENT);
    return;
  } else {
    run_letter(l, s, s->actor, lt, tap);
  }
  if (s->actor && s->actor->stopping) sc__actor_finalize(l, s->actor);
}

/* Decodes, in place, a letter that came from another node; false (letter freed and
 * counted; a request is answered with the error) when it does not decode. The received
 * bytes are freed, or, when keep is not NULL (a tapped letter: its record copies them),
 * left in *keep for the caller to free. */
static bool decode_received(sc_loop *l, sc_letter *lt, sc_raw_msg **keep) {
  sc_diag d = {0};
  void *body = NULL;
  sc_raw_msg *raw = lt->body;
  const int rc = sc__raw_decode(raw, &lt->env, &body, &d);
  lt->body = body;
  if (rc == 0 && keep != NULL) *keep = raw;
  else sc__raw_free(raw);
  if (rc == 0) return true;
  /* a rate some sender chooses: one line per interval for the whole process, with the
   * count held back (the io thread checked each letter's sender, which the line names) */
  static sc_log_limit undecodable_log;
  unsigned long long held = 0;
  if (sc_log_limit_pass(&undecodable_log, sc_now_ns(), &held))
    SC_WARN(LOG, "node %d: dropped an undecodable message from node %d: %s; %llu more "
                 "since the last such line",
            (int)l->node->rank, (int)lt->env.src.node, sc_diag_message(&d), held);
  atomic_fetch_add_explicit(&l->node->undeliverable, 1, memory_order_relaxed);
  (void)sc__reply_error_to(l->node, &lt->env, rc, "the message body does not decode");
  sc__letter_free(lt);
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
    if (tap.raw) sc__raw_free(tap.raw);
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

/* ---- the loop's turn ---- */

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
    sc__transport_loop_flush(l->node->tr, l);
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
  if (drain_runq(l)) sc__loop_wake(l); /* fairness: let timers and sockets run, then go on */
}

static bool runq_ready(void *l) { return sc_mpsc_maybe_nonempty(&((sc_loop *)l)->runq); }

/* Spins briefly while work keeps arriving (cluster spin_us), running it as it comes, for
 * at most SC_SPIN_MAX_NS in all. True when it ran letters. */
static bool loop_spin(sc_loop *l) {
  if (!l->hot || atomic_load_explicit(&l->stop, memory_order_acquire)) return false;
  l->hot = false;
  const uint64_t end = sc_now_ns() + SC_SPIN_MAX_NS;
  atomic_store_explicit(&l->wake_pending, 1, memory_order_release);
  while (sc__spin_until(l->node->spin_ns, end, &l->spin_off_until, runq_ready, l))
    drain_runq(l);
  sc_wake_clear(&l->wake_pending);
  /* a producer that saw wake_pending=1 did not signal: look once more */
  if (sc_mpsc_maybe_nonempty(&l->runq)) sc__loop_wake(l);
  return l->hot; /* (drain_runq sets it when it takes a slot) */
}

/* The extra turn's idle handle: an active idle handle makes that turn's poll return at
 * once; it is needed for one turn only. */
static void on_turn_again(uv_idle_t *h) { uv_idle_stop(h); }

/* Before blocking: send what timers and other handles' callbacks sent to other nodes
 * (actors' sends left after their batches), spin, then let the transport publish the
 * loop's tap records and retry what its DEALERs refused (a send may have consumed their
 * fds' edge). libuv runs prepare handles newest first, so this one, started with the
 * loop, runs after those of the loop's other handles (the gateway's socket watch,
 * zmq_watch.h), whose checks of their sockets are then already done for this turn. A
 * letter run in the spin may have sent on such a socket, and a zmq_send can consume
 * the fd edge that announced input: the loop would block with requests unread, for
 * good on a single node where nothing else wakes it (clients' requests stuck in the
 * gateway's ROUTER: 1 in a few hundred runs of the pipeline tests' stream on two cores;
 * tests/unit/test_zmq_watch.c builds that state on purpose). So after a spin that ran
 * letters the loop takes one more turn without blocking, and every prepare handle
 * looks again. */
static void on_prepare(uv_prepare_t *h) {
  sc_loop *l = h->data;
  sc__transport_loop_flush(l->node->tr, l);
  if (loop_spin(l)) {
    l->hot = false; /* no second spin: this one waited spin_us for letters or ran to its cap */
    uv_idle_start(&l->turn_again, on_turn_again);
  }
  if (sc__transport_loop_prepare(l->node->tr, l)) sc__loop_wake(l);
}

/* ---- stop ---- */

void sc__uv_close_any(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void loop_shutdown(sc_loop *l) {
  sc_node *n = l->node;
  for (uint32_t i = 0; i < SC_MAX_SLOTS && i < atomic_load(&n->next_slot); i++) {
    sc_slot *s = &n->slots[i];
    if (s->loop == l && s->actor) {
      sc__actor_stop_req(s->actor, SC_ECLOSED);
      s->actor->stop_reason = SC_ECLOSED;
      sc__actor_finalize(l, s->actor);
    }
  }
  sc__transport_loop_close(n->tr, l); /* after terminate handlers, which may still send */
  uv_walk(&l->uv, sc__uv_close_any, NULL);
}

void sc__loop_stop_join(sc_loop *l) {
  if (!l->started) return;
  atomic_store(&l->stop, 1);
  uv_async_send(&l->wake);
  uv_thread_join(&l->thread);
  l->started = false;
}

void sc__loop_destroy(sc_loop *l) {
  if (l == NULL) return;
  if (!uv_is_closing((uv_handle_t *)&l->wake)) {
    /* never started: run the loop once so the handle closes */
    uv_walk(&l->uv, sc__uv_close_any, NULL);
  }
  uv_run(&l->uv, UV_RUN_DEFAULT);
  uv_loop_close(&l->uv);
  free(l);
}
