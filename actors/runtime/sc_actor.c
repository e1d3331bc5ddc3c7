/* sc_actor.c - actors: their slots, spawn, stop and finalize, the actor-side API (sc_ctx:
 * send, request, reply, monitors, links), and the letters the runtime sends actors by
 * itself (DOWN, EXIT, NODE_DOWN, error replies).
 *
 * What an actor is and can do, apart from what carries its letters (sc_route.c) and what
 * runs them (sc_loop.c). Nothing here runs per letter received; the sends here call
 * sc__route in sc_route.c.
 */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "actors/runtime/sc_node_impl.h"

#define LOG "actor"

/* ---- letters the runtime sends actors ---- */

void sc__send_down(sc_node *n, sc_actor_id watcher, sc_actor_id who, int reason,
                   const char *why) {
  sc_msg_down *d = sc_msg_body_new(SC_MSG_DOWN);
  if (d == NULL) return;
  d->who = who;
  d->node = who.node;
  d->reason = reason > 0 ? SC_EINVAL : reason;
  d->message = strdup(why ? why : sc_strerror(reason));
  sc_envelope env = {.type = SC_MSG_DOWN, .src = who, .dst = watcher};
  if (sc__route(n, &env, d) != 0) sc_msg_body_destroy(SC_MSG_DOWN, d);
}

/* A runtime letter {who, reason} to a local slot (system types bypass the mailbox
 * bound). Returns sc__deliver_local's code; the letter is freed when it was not taken. */
int sc__send_sys(sc_node *n, int type, sc_actor_id who, sc_actor_id to, int reason) {
  sc_sys_watch *w = malloc(sizeof *w);
  if (w == NULL) return SC_ENOMEM;
  w->who = who;
  w->reason = reason;
  sc_envelope env = {.type = (uint16_t)type, .src = who, .dst = to};
  const int rc = sc__deliver_local(n, &env, w);
  if (rc != 0) free(w);
  return rc;
}

int sc__reply_error_to(sc_node *n, const sc_envelope *req, int code, const char *msg) {
  if (req == NULL || !(req->seq & SC_SEQ_REQUEST) || sc_actor_id_is_null(req->src))
    return SC_EINVAL;
  sc_msg_error_reply *e = sc_msg_body_new(SC_MSG_ERROR_REPLY);
  if (e == NULL) return SC_ENOMEM;
  e->code = code;
  e->message = strdup(msg ? msg : sc_strerror(code)); /* NULL on OOM: sent without */
  sc_envelope env = {.type = SC_MSG_ERROR_REPLY, .step = req->step,
                     .seq = (req->seq & SC_SEQ_ID_MASK) | SC_SEQ_REPLY, .src = req->dst,
                     .dst = req->src, .trace_id = req->trace_id};
  const int rc = sc__route(n, &env, e);
  if (rc != 0) sc_msg_body_destroy(SC_MSG_ERROR_REPLY, e);
  return rc;
}

/* ---- slots, spawn, stop ---- */

const char *sc__slot_name(sc_node *n, uint16_t slot) {
  if (slot >= SC_MAX_SLOTS) return NULL;
  sc_slot *s = &n->slots[slot];
  return atomic_load_explicit(&s->live, memory_order_acquire) ? s->name : NULL;
}

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
  *err = sc__loop_create(n, n->num_loops, &l);
  if (*err) return NULL;
  l->own = true;
  if (n->started && (*err = sc__loop_start(l)) != 0) {
    sc__loop_destroy(l);
    return NULL;
  }
  n->loops[n->num_loops++] = l;
  return l;
}

int sc__spawn_at(sc_node *n, const sc_actor_spec *spec, const char *name, const void *arg,
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
  rc = sc__slot_push(n, s, &env, start, true, NULL);
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
  return sc__spawn_at(n, spec, NULL, arg, arg_size, -1, out);
}

/* Runs on the loop thread: terminate, notify watchers, release the slot. */
void sc__actor_finalize(sc_loop *l, sc_actor *a) {
  sc_node *n = l->node;
  sc_slot *s = a->slot;
  const int reason = a->stop_reason;
  atomic_store_explicit(&s->live, 0, memory_order_release);
  if (a->spec->terminate) {
    sc_ctx c;
    sc__ctx_init(&c, l, a, NULL);
    a->spec->terminate(&c, a->state, reason);
  }
  while (a->pending) {
    sc_pending *p = a->pending;
    a->pending = p->next;
    sc__pending_free(p);
  }
  const bool notify = !atomic_load(&n->stopping);
  while (a->watchers) {
    sc_watch *w = a->watchers;
    a->watchers = w->next;
    if (notify) {
      if (!w->link)
        sc__send_down(n, w->who, a->id, reason, reason == 0 ? "stopped" : sc_strerror(reason));
      else if (reason != 0)
        sc__send_sys(n, SC_SYS_EXIT, a->id, w->who, reason);
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

void sc__broadcast_node_down(sc_node *n, int32_t rank) {
  const uint32_t used = atomic_load(&n->next_slot);
  for (uint32_t i = 0; i < used && i < SC_MAX_SLOTS; i++) {
    sc_slot *s = &n->slots[i];
    if (!atomic_load_explicit(&s->live, memory_order_acquire)) continue;
    const sc_actor_id to = {.node = (uint16_t)n->rank, .slot = (uint16_t)i,
                            .gen = atomic_load(&s->gen)};
    if (sc__send_sys(n, SC_SYS_NODE_DOWN, (sc_actor_id){.node = (uint16_t)rank}, to,
                     SC_EDOWN) == SC_ENOMEM)
      return;
  }
}

int sc_node_stop_actor(sc_node *n, sc_actor_id id, int reason) {
  return sc__send_sys(n, SC_SYS_EXIT, (sc_actor_id){0}, id, reason);
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
  return sc__route(ctx->node, &env, body);
}

int sc_send(sc_ctx *ctx, sc_actor_id dst, int type, void *body) {
  return sc_send_step(ctx, dst, type, ctx->env ? ctx->env->step : 0, body);
}

static void on_request_timeout(uv_timer_t *t) {
  sc_pending *p = t->data;
  sc_actor *a = p->owner;
  sc__pending_remove(a, p);
  sc_ctx c;
  sc_loop *l = a->slot->loop;
  sc__ctx_init(&c, l, a, NULL);
  p->cb(&c, p->ud, SC_ETIMEDOUT, NULL, NULL);
  sc__pending_free(p);
  if (a->stopping && a->slot->actor == a) sc__actor_finalize(l, a);
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
  const int rc = sc__route(ctx->node, &env, body);
  if (rc != 0) {
    if (p->timer) uv_close((uv_handle_t *)p->timer, sc__on_timer_closed);
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
  return sc__route(ctx->node, &env, body);
}

/* A handler only runs for letters whose dst is its actor's live id, so the reply's src
 * (req->dst) is ctx->actor->id, as sc_reply sends. */
int sc_reply_error(sc_ctx *ctx, int code, const char *message) {
  return sc__reply_error_to(ctx->node, ctx->env, code, message);
}

int sc_monitor(sc_ctx *ctx, sc_actor_id target) {
  sc_node *n = ctx->node;
  if (target.node != (uint16_t)n->rank) {
    if (target.node >= (uint32_t)n->cluster.num_nodes) return SC_EINVAL;
    sc_remote_watch *w = malloc(sizeof *w);
    if (w == NULL) return SC_ENOMEM;
    w->watcher = ctx->actor->id;
    w->who = target;
    /* Under the lock that sc__node_peer_is_down takes after it marks the node down: a
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
      sc__send_down(n, ctx->actor->id, target, SC_EDOWN, "node is down");
    }
    return 0;
  }
  const int rc = sc__send_sys(n, SC_SYS_MONITOR, ctx->actor->id, target, 0);
  if (rc == SC_ENOENT) sc__send_down(n, ctx->actor->id, target, SC_ENOENT, "no such actor");
  return rc == SC_ENOENT ? 0 : rc;
}

int sc_monitor_node(sc_ctx *ctx, int rank) {
  sc_node *n = ctx->node;
  if (rank < 0 || rank >= n->cluster.num_nodes || rank == n->rank) return SC_EINVAL;
  return sc_monitor(ctx, (sc_actor_id){.node = (uint16_t)rank, .slot = 0, .gen = 0}) ;
}

int sc_monitor_nodes(sc_ctx *ctx) {
  sc_node *n = ctx->node;
  int rc = SC_EFULL;
  pthread_mutex_lock(&n->mu);
  if (n->num_node_subs < SC_NODE_MAX_SUBSCRIBERS) {
    n->node_subs[n->num_node_subs++] = ctx->actor->id;
    rc = 0;
  }
  pthread_mutex_unlock(&n->mu);
  return rc;
}

int sc_link(sc_ctx *ctx, sc_actor_id target) {
  sc_node *n = ctx->node;
  if (target.node != (uint16_t)n->rank) return SC_ENOTSUP;
  sc_watch *mine = malloc(sizeof *mine);
  if (mine == NULL) return SC_ENOMEM;
  int rc = sc__send_sys(n, SC_SYS_LINK, ctx->actor->id, target, 0);
  /* a target already gone is one that stopped with SC_ENOENT just after the link, as
   * for sc_monitor: the EXIT comes as a letter (DOWN with trap_exit), not as an error */
  if (rc == SC_ENOENT) rc = sc__send_sys(n, SC_SYS_EXIT, target, ctx->actor->id, SC_ENOENT);
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

void sc_stop(sc_ctx *ctx, int reason) { sc__actor_stop_req(ctx->actor, reason); }
