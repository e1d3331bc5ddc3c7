/* backend_host.c - direct-exchange collectives over ZeroMQ ROUTER/DEALER sockets. */
#include "collectives/backend_host.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "base/clock.h"
#include "base/log.h"
#include "collectives/coll_reduce.h"


typedef struct header {
  uint64_t epoch;
  uint32_t group, seq;
} header;

/* A block that arrived before its collective was entered. */
typedef struct stashed {
  header h;
  int32_t src; /* global rank */
  zmq_msg_t msg;
  struct stashed *next;
} stashed;

typedef struct host_be {
  void *ctx;
  bool own_ctx;
  void *router;
  void **dealers;           /* [world]: NULL where the rank is not a group peer */
  void *wake_rx, *wake_tx;  /* inproc pair: abort() wakes a blocked poll */
  pthread_mutex_t wake_mu;
  _Atomic uint64_t aborted_through; /* steps up to this epoch are aborted (0: none) */
  int32_t world, rank;
  int32_t *members[SC_GROUP_COUNT]; /* group-rank order, global ranks */
  int32_t size[SC_GROUP_COUNT], me[SC_GROUP_COUNT];
  uint64_t epoch;
  uint32_t seq[SC_GROUP_COUNT];
  stashed *stash;
  uint8_t *scratch;         /* received blocks awaiting reduction */
  size_t scratch_cap;
  float *acc;
  size_t acc_cap;
  int64_t deadline_ms;
} host_be;

static const char *const k_wake_fmt = "inproc://sc-host-coll-wake-%p";

static int grow(void **buf, size_t *cap, size_t bytes) {
  if (bytes <= *cap) return 0;
  void *p = realloc(*buf, bytes);
  if (p == NULL) return SC_ENOMEM;
  *buf = p;
  *cap = bytes;
  return 0;
}

static int send_block(host_be *be, int32_t dst, sc_group g, const void *data, size_t bytes) {
  const header h = {.epoch = be->epoch, .group = (uint32_t)g, .seq = be->seq[g]};
  void *s = be->dealers[dst];
  if (zmq_send(s, &h, sizeof h, ZMQ_SNDMORE) < 0 || zmq_send(s, data, bytes, 0) < 0) {
    SC_ERROR("coll", "rank %d: send to rank %d failed: %s", be->rank, dst,
             zmq_strerror(zmq_errno()));
    return SC_EIO;
  }
  return 0;
}

/* Receives one message from the router into a new stash entry; returns it, or NULL
 * after logging when the message is malformed (dropped) or the receive failed. */
static stashed *read_message(host_be *be) {
  char ident[16];
  const int n = zmq_recv(be->router, ident, sizeof ident - 1, ZMQ_DONTWAIT);
  if (n < 0) return NULL;
  ident[n < (int)sizeof ident - 1 ? n : (int)sizeof ident - 1] = '\0';
  stashed *e = calloc(1, sizeof *e);
  int more = 0;
  size_t more_len = sizeof more;
  bool ok = e != NULL && ident[0] == 'r';
  if (ok) e->src = (int32_t)strtol(ident + 1, NULL, 10);
  zmq_getsockopt(be->router, ZMQ_RCVMORE, &more, &more_len);
  ok = ok && more && zmq_recv(be->router, &e->h, sizeof e->h, 0) == (int)sizeof e->h;
  zmq_getsockopt(be->router, ZMQ_RCVMORE, &more, &more_len);
  if (ok && more) {
    zmq_msg_init(&e->msg);
    ok = zmq_msg_recv(&e->msg, be->router, 0) >= 0;
    if (!ok) zmq_msg_close(&e->msg);
  } else {
    ok = false;
  }
  /* drain whatever is left of a malformed multipart message */
  for (zmq_getsockopt(be->router, ZMQ_RCVMORE, &more, &more_len); more;
       zmq_getsockopt(be->router, ZMQ_RCVMORE, &more, &more_len)) {
    zmq_msg_t junk;
    zmq_msg_init(&junk);
    zmq_msg_recv(&junk, be->router, 0);
    zmq_msg_close(&junk);
    ok = false;
  }
  if (!ok || e->src < 0 || e->src >= be->world) {
    SC_WARN("coll", "rank %d: dropped a malformed collective message", be->rank);
    free(e);
    return NULL;
  }
  return e;
}

static void drop(stashed *e) {
  zmq_msg_close(&e->msg);
  free(e);
}

/* Takes the block (current epoch, group g, its current seq) of global rank src. */
static stashed *take(host_be *be, sc_group g, int32_t src) {
  for (stashed **pp = &be->stash; *pp; pp = &(*pp)->next) {
    stashed *e = *pp;
    if (e->h.epoch == be->epoch && e->h.group == (uint32_t)g && e->h.seq == be->seq[g] &&
        e->src == src) {
      *pp = e->next;
      return e;
    }
  }
  return NULL;
}

/* Whether the step in flight was aborted (host_abort). be->epoch is this thread's. */
static bool aborted(const host_be *be) {
  const uint64_t through = atomic_load(&((host_be *)be)->aborted_through);
  return through != 0 && through >= be->epoch;
}

/* Waits for the block of src for the current collective of g (exactly `bytes` long)
 * and copies it to dst. */
static int recv_block(host_be *be, sc_group g, int32_t src, void *dst, size_t bytes,
                      uint64_t deadline_ns, sc_diag *d) {
  for (;;) {
    stashed *e = take(be, g, src);
    if (e != NULL) {
      const size_t got = zmq_msg_size(&e->msg);
      if (got == bytes) memcpy(dst, zmq_msg_data(&e->msg), bytes);
      drop(e);
      if (got != bytes) { /* the sender is the one out of step: name it */
        SC_ERROR("coll", "rank %d: rank %d sent %zu bytes for %s seq %u, expected %zu",
                 be->rank, src, got, sc_group_name(g), be->seq[g], bytes);
        return sc_fail(d, SC_EDESYNC,
                       "rank %d sent a %zu-byte block where this rank's plan has %zu (%s "
                       "group, its collective %u): rank %d is out of step", src, got, bytes,
                       sc_group_name(g), be->seq[g], src);
      }
      return 0;
    }
    if (aborted(be)) return SC_EABORTED; /* (the code says it all) */
    long timeout = -1;
    if (deadline_ns != 0) {
      const uint64_t now = sc_now_ns();
      if (now >= deadline_ns)
        return sc_fail(d, SC_ETIMEDOUT, "no block from rank %d within %lld ms (%s group)", src,
                       (long long)be->deadline_ms, sc_group_name(g));
      timeout = (long)((deadline_ns - now + 999999) / 1000000);
    }
    zmq_pollitem_t items[2] = {{.socket = be->router, .events = ZMQ_POLLIN},
                               {.socket = be->wake_rx, .events = ZMQ_POLLIN}};
    if (zmq_poll(items, 2, timeout) < 0) {
      if (zmq_errno() == EINTR) continue;
      return SC_EIO;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      char c;
      while (zmq_recv(be->wake_rx, &c, 1, ZMQ_DONTWAIT) >= 0) {
      }
    }
    /* Drain everything readable: ZeroMQ readiness is edge-like, so stop only when a
     * non-blocking receive finds nothing. */
    for (;;) {
      stashed *m = read_message(be);
      if (m == NULL) break;
      if (m->h.epoch < be->epoch) {
        drop(m); /* a block of an aborted earlier step */
        continue;
      }
      m->next = be->stash;
      be->stash = m;
    }
  }
}

static uint64_t deadline_of(const host_be *be) {
  return be->deadline_ms > 0 ? sc_now_ns() + (uint64_t)be->deadline_ms * 1000000ull : 0;
}

/* Sends `bytes` from send (+ k * stride for member k) to every other member. */
static int send_all(host_be *be, sc_group g, const uint8_t *send, size_t bytes,
                    size_t stride) {
  for (int32_t k = 0; k < be->size[g]; k++) {
    if (k == be->me[g]) continue;
    int rc = send_block(be, be->members[g][k], g, send + (size_t)k * stride, bytes);
    if (rc) return rc;
  }
  return 0;
}

static int host_all_gather(void *self, sc_group g, sc_dtype dt, const void *send, void *recv,
                           size_t count, sc_diag *d) {
  host_be *be = self;
  if (aborted(be)) return SC_EABORTED;
  const size_t bytes = count * sc_dtype_size(dt);
  const uint64_t dl = deadline_of(be);
  int rc = send_all(be, g, send, bytes, 0);
  uint8_t *out = recv;
  if (out + (size_t)be->me[g] * bytes != send) memmove(out + (size_t)be->me[g] * bytes, send, bytes);
  for (int32_t k = 0; k < be->size[g] && rc == 0; k++)
    if (k != be->me[g])
      rc = recv_block(be, g, be->members[g][k], out + (size_t)k * bytes, bytes, dl, d);
  be->seq[g]++;
  return rc;
}

/* Sums, in member order, `count` elements: this member's from `mine`, member k's from
 * scratch slot k (received). Writes the result to recv. */
static int reduce_into(host_be *be, sc_group g, sc_dtype dt, const void *mine, void *recv,
                       size_t count) {
  if (grow((void **)&be->acc, &be->acc_cap, count * sizeof(float))) return SC_ENOMEM;
  const size_t bytes = count * sc_dtype_size(dt);
  for (int32_t k = 0; k < be->size[g]; k++) {
    const void *src = k == be->me[g] ? mine : be->scratch + (size_t)k * bytes;
    sc_coll_accumulate(dt, be->acc, src, count, k == 0);
  }
  sc_coll_store(dt, be->acc, recv, count);
  return 0;
}

static int exchange_and_reduce(host_be *be, sc_group g, sc_dtype dt, const uint8_t *send,
                               void *recv, size_t count, size_t stride_bytes, sc_diag *d) {
  if (aborted(be)) return SC_EABORTED;
  if (dt != SC_DT_F32 && dt != SC_DT_BF16) return SC_ENOTSUP;
  const size_t bytes = count * sc_dtype_size(dt);
  const uint64_t dl = deadline_of(be);
  int rc = grow((void **)&be->scratch, &be->scratch_cap, (size_t)be->size[g] * bytes);
  if (rc == 0) rc = send_all(be, g, send, bytes, stride_bytes);
  for (int32_t k = 0; k < be->size[g] && rc == 0; k++)
    if (k != be->me[g])
      rc = recv_block(be, g, be->members[g][k], be->scratch + (size_t)k * bytes, bytes, dl, d);
  if (rc == 0) rc = reduce_into(be, g, dt, send + (size_t)be->me[g] * stride_bytes, recv, count);
  be->seq[g]++;
  return rc;
}

static int host_all_reduce(void *self, sc_group g, sc_dtype dt, const void *send, void *recv,
                           size_t count, sc_diag *d) {
  return exchange_and_reduce(self, g, dt, send, recv, count, 0, d);
}

static int host_reduce_scatter(void *self, sc_group g, sc_dtype dt, const void *send,
                               void *recv, size_t count, sc_diag *d) {
  host_be *be = self;
  if (count % (size_t)be->size[g] != 0) return SC_EINVAL;
  const size_t block = count / (size_t)be->size[g];
  return exchange_and_reduce(be, g, dt, send, recv, block, block * sc_dtype_size(dt), d);
}

static int host_run(void *self, sc_coll_op op, sc_group g, sc_dtype dt, const void *send,
                    void *recv, size_t count, sc_diag *d) {
  switch (op) {
  case SC_OP_ALL_GATHER: return host_all_gather(self, g, dt, send, recv, count, d);
  case SC_OP_ALL_REDUCE: return host_all_reduce(self, g, dt, send, recv, count, d);
  case SC_OP_REDUCE_SCATTER: return host_reduce_scatter(self, g, dt, send, recv, count, d);
  default: return SC_EINVAL;
  }
}

static void host_abort(void *self, uint64_t epoch) {
  host_be *be = self;
  /* raised to the highest step aborted, never lowered: the step in flight (be->epoch,
   * the executor's) is aborted once this reaches it, whenever the abort comes */
  const uint64_t through = epoch ? epoch : UINT64_MAX;
  uint64_t prev = atomic_load(&be->aborted_through);
  while (prev < through && !atomic_compare_exchange_weak(&be->aborted_through, &prev, through)) {
  }
  pthread_mutex_lock(&be->wake_mu);
  zmq_send(be->wake_tx, "x", 1, ZMQ_DONTWAIT);
  pthread_mutex_unlock(&be->wake_mu);
}

static void host_reset(void *self, uint64_t epoch);

static const sc_coll_ops k_host_ops = {
    .run = host_run,
    .abort = host_abort,
    .reset = host_reset,
};

static void destroy_be(host_be *be) {
  if (be == NULL) return;
  while (be->stash) {
    stashed *e = be->stash;
    be->stash = e->next;
    drop(e);
  }
  const int zero = 0;
  for (int32_t r = 0; be->dealers && r < be->world; r++)
    if (be->dealers[r]) {
      zmq_setsockopt(be->dealers[r], ZMQ_LINGER, &zero, sizeof zero);
      zmq_close(be->dealers[r]);
    }
  void *socks[] = {be->router, be->wake_rx, be->wake_tx};
  for (int i = 0; i < 3; i++)
    if (socks[i]) {
      zmq_setsockopt(socks[i], ZMQ_LINGER, &zero, sizeof zero);
      zmq_close(socks[i]);
    }
  if (be->own_ctx && be->ctx) zmq_ctx_term(be->ctx);
  for (int g = 0; g < SC_GROUP_COUNT; g++) free(be->members[g]);
  free(be->dealers);
  free(be->scratch);
  free(be->acc);
  pthread_mutex_destroy(&be->wake_mu);
  free(be);
}

int sc_host_comm_create(sc_comm *comm, const sc_plan_config *cfg,
                        const sc_host_comm_config *hc, sc_diag *d) {
  const int32_t world = sc_plan_world_size(cfg);
  if (hc->rank < 0 || hc->rank >= world || hc->endpoints == NULL)
    return sc_fail(d, SC_EINVAL, "host collectives: rank %d outside world of %d", hc->rank,
                   world);
  host_be *be = calloc(1, sizeof *be);
  if (be == NULL) return sc_fail(d, SC_ENOMEM, "host collectives: out of memory");
  pthread_mutex_init(&be->wake_mu, NULL);
  be->world = world;
  be->rank = hc->rank;
  be->deadline_ms = hc->deadline_ms;
  be->ctx = hc->zmq_context;
  if (be->ctx == NULL) {
    be->ctx = zmq_ctx_new();
    be->own_ctx = true;
  }
  int rc = SC_ENOMEM;
  be->dealers = calloc((size_t)world, sizeof *be->dealers);
  if (be->ctx == NULL || be->dealers == NULL) goto fail;
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    be->members[g] = malloc(sizeof(int32_t) * (size_t)world);
    if (be->members[g] == NULL) goto fail;
    be->size[g] = sc_comm_group_members(cfg, hc->rank, (sc_group)g, be->members[g]);
    for (int32_t k = 0; k < be->size[g]; k++)
      if (be->members[g][k] == hc->rank) be->me[g] = k;
  }

  const int zero = 0;
  be->router = zmq_socket(be->ctx, ZMQ_ROUTER);
  if (be->router == NULL) goto fail_zmq;
  zmq_setsockopt(be->router, ZMQ_RCVHWM, &zero, sizeof zero); /* never drop a block */
  if (zmq_bind(be->router, hc->endpoints[hc->rank]) != 0) {
    rc = sc_fail(d, SC_EIO, "host collectives: rank %d cannot bind %s: %s", hc->rank,
                 hc->endpoints[hc->rank], zmq_strerror(zmq_errno()));
    goto fail;
  }
  char ident[16];
  snprintf(ident, sizeof ident, "r%d", hc->rank);
  for (int g = 0; g < SC_GROUP_COUNT; g++)
    for (int32_t k = 0; k < be->size[g]; k++) {
      const int32_t peer = be->members[g][k];
      if (peer == hc->rank || be->dealers[peer] != NULL) continue;
      void *s = zmq_socket(be->ctx, ZMQ_DEALER);
      if (s == NULL) goto fail_zmq;
      be->dealers[peer] = s;
      zmq_setsockopt(s, ZMQ_ROUTING_ID, ident, strlen(ident));
      zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
      if (zmq_connect(s, hc->endpoints[peer]) != 0) {
        rc = sc_fail(d, SC_EIO, "host collectives: rank %d cannot connect to %s: %s",
                     hc->rank, hc->endpoints[peer], zmq_strerror(zmq_errno()));
        goto fail;
      }
    }
  char wake[64];
  snprintf(wake, sizeof wake, k_wake_fmt, (void *)be);
  be->wake_rx = zmq_socket(be->ctx, ZMQ_PAIR);
  be->wake_tx = zmq_socket(be->ctx, ZMQ_PAIR);
  if (be->wake_rx == NULL || be->wake_tx == NULL || zmq_bind(be->wake_rx, wake) != 0 ||
      zmq_connect(be->wake_tx, wake) != 0)
    goto fail_zmq;

  memset(comm, 0, sizeof *comm);
  sc_comm_init_groups(comm, cfg, hc->rank);
  comm->ops = &k_host_ops;
  comm->self = be;
  return 0;
fail_zmq:
  rc = sc_fail(d, SC_EIO, "host collectives: %s", zmq_strerror(zmq_errno()));
fail:
  destroy_be(be);
  return rc == SC_ENOMEM ? sc_fail(d, rc, "host collectives: out of memory") : rc;
}

void sc_host_comm_reset(sc_comm *comm, uint64_t epoch) { host_reset(comm->self, epoch); }

static void host_reset(void *self, uint64_t epoch) {
  host_be *be = self;
  be->epoch = epoch;
  memset(be->seq, 0, sizeof be->seq);
  for (stashed **pp = &be->stash; *pp;) {
    stashed *e = *pp;
    if (e->h.epoch < epoch) {
      *pp = e->next;
      drop(e);
    } else {
      pp = &e->next;
    }
  }
  /* drain a pending wake-up of an earlier abort (an abort of an earlier step does not
   * reach this one: aborted() compares epochs) */
  char c;
  while (zmq_recv(be->wake_rx, &c, 1, ZMQ_DONTWAIT) >= 0) {
  }
}

void sc_host_comm_destroy(sc_comm *comm) {
  if (comm->self == NULL) return;
  destroy_be(comm->self);
  comm->self = NULL;
  comm->ops = NULL;
}
