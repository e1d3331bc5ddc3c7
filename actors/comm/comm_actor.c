/* comm_actor.c - the comm actor of every rank: it owns the rank's collective
 * communicator (created with the rank context; NCCL ids are exchanged here) and aborts it
 * when the scheduler aborts a step, so that no rank stays blocked in a collective whose
 * peers have given up (DESIGN.md §4). It meets the executor only at the step gate
 * (collectives/step_gate.h): it opens the gate once the communicators exist and aborts
 * steps through it. The step plan itself is verified and acknowledged by the metadata
 * actor, which hands that same plan to the executor.
 *
 * With NCCL it also watches the communicators. The executor queues each collective on
 * the backend's comm stream, ordered against its compute stream by CUDA events, and
 * never waits for one; a host function after each collective tells the backend, which
 * wakes this actor through uv_async_send when collectives become outstanding and when
 * the last one completes. While any is outstanding this actor runs sc_nccl_watch on a
 * timer: NCCL's asynchronous errors and each collective's deadline, with ncclCommAbort
 * when one fails (backend_nccl.h).
 *
 * The collectives themselves are entered by the executor's thread through the
 * plan-checked session (collectives/coll.h), which refuses any request that is not the
 * next planned entry before launching it: the order of a collective among the compute
 * work is only known there, and a message per collective would put a thread switch in
 * front of each of the hundreds a step runs. The comm actor has a loop thread of its own
 * (SC_LOOP_OWN): creating and aborting communicators block for as long as NCCL takes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>
#include <uv.h>

#include "actors/pipeline.h"
#include "actors/rank_ctx.h"
#include "base/clock.h"
#include "base/log.h"
#ifdef SC_HAVE_CUDA
#include "collectives/backend_nccl.h"
#endif

#define LOG "comm"

/* The NCCL watch's libuv handles. Heap-allocated: they are closed in comm_terminate and
 * freed by the last close callback, after the actor's state is gone. */
typedef struct nccl_watch {
  uv_async_t wake; /* sent by the backend, from any thread */
  uv_timer_t timer;
  sc_comm *comm;
  int open_handles;
} nccl_watch;

typedef struct comm_state {
  sc_rank_ctx *ctx;
  nccl_watch *watch;
  /* The generation of the communicators this rank has or is building: 0 at start-up,
   * then the scheduler's comm_rebuild numbers (docs/pipeline.md, "Recovery"). building:
   * the communicators of `generation` do not exist yet (their ids are being exchanged). */
  uint32_t generation;
  bool building;
  sc_actor_id scheduler; /* who asked for the rebuild (comm_ready goes there) */
  /* NCCL: the unique id of each of this rank's group instances, with the generation each
   * is for (an owner's id for a generation may arrive before this rank's comm_rebuild) */
  unsigned char ids[SC_GROUP_COUNT][128];
  uint32_t id_gen[SC_GROUP_COUNT];
  bool have_id[SC_GROUP_COUNT], need_id[SC_GROUP_COUNT];
} comm_state;

#ifdef SC_HAVE_CUDA
static void watch_run(nccl_watch *w);
static void on_watch_timer(uv_timer_t *t) { watch_run(t->data); }
static void on_watch_wake(uv_async_t *a) { watch_run(a->data); }
static void watch_poke(void *arg) { uv_async_send(&((nccl_watch *)arg)->wake); }

static void watch_run(nccl_watch *w) {
  const int64_t ms = sc_nccl_watch(w->comm);
  if (ms >= 0)
    uv_timer_start(&w->timer, on_watch_timer, (uint64_t)ms, 0);
  else
    uv_timer_stop(&w->timer);
}

static void watch_closed(uv_handle_t *h) {
  nccl_watch *w = h->data;
  if (--w->open_handles == 0) free(w);
}

/* On the actor's loop, once the communicators exist. */
static int watch_start(sc_ctx *c, comm_state *s) {
  nccl_watch *w = calloc(1, sizeof *w);
  if (w == NULL) return SC_ENOMEM;
  w->comm = &s->ctx->comm;
  if (uv_async_init(sc_ctx_uv_loop(c), &w->wake, on_watch_wake) != 0) {
    free(w);
    return SC_ESYS;
  }
  w->wake.data = w;
  w->open_handles = 1;
  if (uv_timer_init(sc_ctx_uv_loop(c), &w->timer) != 0) {
    uv_close((uv_handle_t *)&w->wake, watch_closed);
    return SC_ESYS;
  }
  w->timer.data = w;
  w->open_handles = 2;
  s->watch = w;
  sc_nccl_set_watch(w->comm, watch_poke, w);
  return 0;
}
#endif

static void watch_stop(comm_state *s) {
#ifdef SC_HAVE_CUDA
  nccl_watch *w = s->watch;
  if (w == NULL) return;
  s->watch = NULL;
  sc_nccl_set_watch(w->comm, NULL, NULL); /* no poke after this returns */
  uv_close((uv_handle_t *)&w->wake, watch_closed);
  uv_close((uv_handle_t *)&w->timer, watch_closed);
#else
  (void)s;
#endif
}

/* Tells the scheduler that this rank's collectives of generation gen are built (rc 0)
 * or why they are not. Start-up (generation 0) is reported through the gate only: the
 * executor's first step waits for it. */
static void report_ready(sc_ctx *c, comm_state *s, int rc, const char *why) {
  if (s->generation == 0) return;
  sc_msg_comm_ready *m = sc_msg_body_new(SC_MSG_COMM_READY);
  if (m == NULL) return;
  m->rank = s->ctx->rank;
  m->generation = s->generation;
  m->code = rc;
  m->message = strdup(rc ? why : "");
  if (sc_send(c, s->scheduler, SC_MSG_COMM_READY, m)) sc_msg_body_destroy(SC_MSG_COMM_READY, m);
}

/* Once every needed id of the generation being built is here, creates the
 * communicators (this blocks the loop until every member of every group has joined,
 * bounded by the collective deadline) and opens the gate. */
static void maybe_init_nccl(sc_ctx *c, comm_state *s) {
  if (!s->building) return;
  for (int g = 0; g < SC_GROUP_COUNT; g++)
    if (s->need_id[g] && (!s->have_id[g] || s->id_gen[g] != s->generation)) return;
  s->building = false;
  sc_diag d = {0};
  const bool ipc = s->ctx->cfg.ipc;
  int rc = ipc ? sc_rank_ctx_ipc_init(s->ctx, (const unsigned char(*)[128])s->ids, &d)
               : sc_rank_ctx_nccl_init(s->ctx, (const unsigned char(*)[128])s->ids, &d);
#ifdef SC_HAVE_CUDA
  /* (the IPC backend bounds its waits on the device: no watch) */
  if (rc == 0 && !ipc && (rc = watch_start(c, s)) != 0)
    sc_fail(&d, rc, "rank %d: cannot start the NCCL watch", s->ctx->rank);
#endif
  if (rc) SC_ERROR(LOG, "%s", d.msg);
  else SC_INFO(LOG, "rank %d: %s collectives of generation %u ready", s->ctx->rank,
               ipc ? "IPC" : "NCCL", (unsigned)s->generation);
  sc_step_gate_set_ready(&s->ctx->gate, rc ? rc : 1);
  report_ready(c, s, rc, d.msg);
}

/* Starts building generation s->generation: the owner (member 0) of each group instance
 * creates its id and sends it to the other members' comm actors (DESIGN.md §8: ids
 * travel over the control plane); the others wait for theirs. */
static int start_nccl(sc_ctx *c, comm_state *s) {
#ifdef SC_HAVE_CUDA
  const sc_plan_config *pc = &s->ctx->plan_cfg;
  const int32_t me = s->ctx->rank;
  s->building = true;
  const bool ipc = s->ctx->cfg.ipc;
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    /* IPC: a region only for a group of two or more (one alone copies) */
    s->need_id[g] = ipc ? sc_rank_ctx_ipc_needed(s->ctx, g) : sc_nccl_id_needed(pc, (sc_group)g);
    if (!s->need_id[g] || !sc_nccl_id_owner(pc, me, (sc_group)g)) continue;
    if (ipc) {
      sc_diag d = {0};
      const int rc = sc_rank_ctx_ipc_region(s->ctx, g, s->ids[g], &d);
      if (rc) {
        SC_ERROR(LOG, "%s", d.msg);
        return rc;
      }
    } else {
      sc_nccl_id id;
      if (sc_nccl_get_unique_id(&id)) return SC_ESYS;
      memcpy(s->ids[g], id.bytes, sizeof s->ids[g]);
    }
    s->have_id[g] = true;
    s->id_gen[g] = s->generation;
    int32_t members[SC_PLAN_MAX_PARALLEL];
    const int32_t n = sc_comm_group_members(pc, me, (sc_group)g, members);
    for (int32_t k = 0; k < n; k++) {
      if (members[k] == me) continue;
      char name[32];
      sc_actor_id dst;
      snprintf(name, sizeof name, "comm@%d", members[k]);
      int rc = sc_node_resolve(sc_ctx_node(c), name, &dst);
      sc_msg_nccl_id *m = rc ? NULL : sc_msg_body_new(SC_MSG_NCCL_ID);
      if (m == NULL) return rc ? rc : SC_ENOMEM;
      m->group = (uint8_t)g;
      m->owner = me;
      m->generation = s->generation;
      m->id.data = malloc(sizeof s->ids[g]);
      if (m->id.data == NULL) {
        sc_msg_body_destroy(SC_MSG_NCCL_ID, m);
        return SC_ENOMEM;
      }
      memcpy(m->id.data, s->ids[g], sizeof s->ids[g]);
      m->id.len = sizeof s->ids[g];
      /* A member whose new process just rejoined is still down on this node until its
       * node actor has seen the old process go (docs/runtime.md, "Rejoining"), which may
       * come after the comm_rebuild: retry for up to the collective deadline (this loop
       * blocks only the comm actor's own loop, as the creation below does). */
      const uint64_t until = sc_now_ns() + (uint64_t)s->ctx->cfg.deadline_ms * 1000000ull;
      while ((rc = sc_send(c, dst, SC_MSG_NCCL_ID, m)) == SC_EDOWN && sc_now_ns() < until) {
        const struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
      }
      if (rc) {
        sc_msg_body_destroy(SC_MSG_NCCL_ID, m);
        return rc;
      }
    }
  }
  maybe_init_nccl(c, s);
  return 0;
#else
  (void)c, (void)s;
  return SC_ENOTSUP;
#endif
}

/* An owner's id: kept for the generation it is for, unless that generation is over
 * here (a new process of a rank starts at generation 0 and sends ids nobody needs). Only
 * the group's owner's word counts: from another node it would put a stranger's
 * communicator in the rank's place. */
static int on_nccl_id(sc_ctx *c, const sc_envelope *env, const void *body) {
  comm_state *s = sc_state(c);
  const sc_msg_nccl_id *m = body;
  if (m->id.len != sizeof s->ids[0] || m->generation < s->generation ||
      (int32_t)env->src.node != m->owner)
    return 0;
  int32_t members[SC_PLAN_MAX_PARALLEL];
  if (sc_comm_group_members(&s->ctx->plan_cfg, s->ctx->rank, (sc_group)m->group, members) < 1 ||
      members[0] != m->owner)
    return 0; /* not the owner of this rank's instance of the group */
  memcpy(s->ids[m->group], m->id.data, sizeof s->ids[0]);
  s->have_id[m->group] = true;
  s->id_gen[m->group] = m->generation;
  maybe_init_nccl(c, s);
  return 0;
}

/* The scheduler asks for generation m->generation of the collectives (no step runs: it
 * aborted the last one). The executor is let out of that step first (sc_step_gate_close;
 * its collectives were aborted, so it leaves soon), then the NCCL communicators are
 * dropped and new ones built from fresh ids; the host backend's sockets reconnect by
 * themselves, so it only reopens the gate. The answer is comm_ready. */
static int on_comm_rebuild(sc_ctx *c, const sc_envelope *env, const void *body) {
  comm_state *s = sc_state(c);
  const sc_msg_comm_rebuild *m = body;
  if (env->src.node != 0 || m->generation <= s->generation) return 0; /* the head's only */
  s->generation = m->generation;
  s->scheduler = env->src;
  s->building = false;
  /* the aborted step's collectives return at once, but its compute runs on, which the
   * collective deadline does not bound: twice that */
  const int64_t close_ms = 2 * s->ctx->cfg.deadline_ms;
  int rc = sc_step_gate_close(&s->ctx->gate, close_ms);
  char why[160];
  if (rc) {
    snprintf(why, sizeof why, "rank %d: its executor did not leave the aborted step within "
             "%lld ms", s->ctx->rank, (long long)close_ms);
    SC_ERROR(LOG, "%s", why);
    report_ready(c, s, rc, why);
    return 0;
  }
  if (!s->ctx->cfg.nccl && !s->ctx->cfg.ipc) {
    sc_step_gate_set_ready(&s->ctx->gate, 1);
    report_ready(c, s, 0, NULL);
    return 0;
  }
  watch_stop(s);
  sc_rank_ctx_nccl_drop(s->ctx);
  sc_rank_ctx_ipc_drop(s->ctx);
  if ((rc = start_nccl(c, s)) != 0) {
    snprintf(why, sizeof why, "rank %d: cannot start the NCCL id exchange: %s", s->ctx->rank,
             sc_strerror(rc));
    SC_ERROR(LOG, "%s", why);
    s->building = false;
    sc_step_gate_set_ready(&s->ctx->gate, rc);
    report_ready(c, s, rc, why);
  }
  return 0;
}

/* The node stops (SIGTERM, the head lost, an orderly stop): nothing will run a collective
 * again, and the executor may be inside one that waits for a peer that is gone (the dead
 * head), which would hold the node's stop for the whole collective deadline: abort them
 * all. The node stops its loops in the order the actors were spawned, so this loop, an
 * own loop spawned before the executor's, gets here while the executor still waits. */
static void comm_terminate(sc_ctx *c, void *state, int reason) {
  (void)c, (void)reason;
  comm_state *s = state;
  if (s->ctx) sc_step_gate_abort_all(&s->ctx->gate);
  watch_stop(s);
}

static int comm_init(sc_ctx *c, void *state, const void *arg) {
  comm_state *s = state;
  s->ctx = *(sc_rank_ctx *const *)arg;
  int rc = 0;
  if (sc_step_gate_pending(&s->ctx->gate) && (rc = start_nccl(c, s))) {
    SC_ERROR(LOG, "rank %d: cannot start the NCCL id exchange: %s", s->ctx->rank, sc_strerror(rc));
    sc_step_gate_set_ready(&s->ctx->gate, rc);
  }
  return rc;
}

static int on_step_abort(sc_ctx *c, const sc_envelope *env, const void *body) {
  (void)env;
  comm_state *s = sc_state(c);
  const sc_msg_step_abort *a = body;
  if (sc_step_gate_abort(&s->ctx->gate, a->step))
    SC_INFO(LOG, "rank %d: aborted the collectives of step %llu", s->ctx->rank,
            (unsigned long long)a->step);
  return 0;
}

const sc_actor_spec sc_comm_spec = {
    .name = "comm",
    .state_size = sizeof(comm_state),
    .init = comm_init,
    .terminate = comm_terminate,
    .handlers = {[SC_MSG_STEP_ABORT] = on_step_abort,
                 [SC_MSG_NCCL_ID] = on_nccl_id,
                 [SC_MSG_COMM_REBUILD] = on_comm_rebuild},
    .loop = SC_LOOP_OWN,
};
