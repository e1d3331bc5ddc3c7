/* backend_host.c - direct-exchange collectives over ZeroMQ ROUTER/DEALER sockets; what
 * a rank lets in is backend_host_inbox.c's. */
#include "collectives/backend_host.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "base/clock.h"
#include "base/curve_key.h"
#include "base/grow.h"
#include "base/log.h"
#include "base/zap.h"
#include "collectives/backend_host_inbox.h"
#include "collectives/coll_reduce.h"

typedef struct host_be {
  void *ctx;
  bool own_ctx;
  sc_zap *zap;              /* the private context's ZAP handler (CURVE), or NULL */
  void *router;
  void **dealers;           /* [world]: NULL where the rank is not a group peer */
  void *wake_rx, *wake_tx;  /* inproc pair: abort() wakes a blocked poll */
  pthread_mutex_t wake_mu;
  _Atomic uint64_t aborted_through; /* steps up to this epoch are aborted (0: none) */
  int32_t world, rank;
  int32_t *members[SC_GROUP_COUNT]; /* group-rank order, global ranks */
  int32_t size[SC_GROUP_COUNT], me[SC_GROUP_COUNT];
  sc_host_inbox in;         /* held blocks, and the step and collectives reached */
  uint8_t *scratch;         /* received blocks awaiting reduction */
  size_t scratch_cap;
  float *acc;
  size_t acc_cap;
  int64_t deadline_ms;
} host_be;

static const char *const k_wake_fmt = "inproc://sc-host-coll-wake-%p";

static int send_block(host_be *be, int32_t dst, sc_group g, const void *data, size_t bytes) {
  const sc_inbox_header h = {.epoch = be->in.epoch, .group = (uint32_t)g,
                             .seq = be->in.seq[g]};
  void *s = be->dealers[dst];
  if (zmq_send(s, &h, sizeof h, ZMQ_SNDMORE) < 0 || zmq_send(s, data, bytes, 0) < 0) {
    SC_ERROR("coll", "rank %d: send to rank %d failed: %s", be->rank, dst,
             zmq_strerror(zmq_errno()));
    return SC_EIO;
  }
  return 0;
}

/* Reads one message from the router, if one is waiting, and offers it to the inbox
 * (which holds or frees it). Returns false when none was. */
static bool receive_one(host_be *be) {
  zmq_msg_t f[3], junk; /* identity, header, payload; anything after them is junk */
  int32_t n = 0;
  for (bool more = true; more; n++) {
    zmq_msg_t *m = n < 3 ? &f[n] : &junk;
    zmq_msg_init(m);
    /* (the frames of a message arrive together: only the first can be missing) */
    if (zmq_msg_recv(m, be->router, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(m);
      for (int32_t i = 0; i < n && i < 3; i++) zmq_msg_close(&f[i]);
      return false;
    }
    more = zmq_msg_more(m);
    if (m == &junk) zmq_msg_close(&junk);
  }
  sc_inbox_offer(&be->in, f, n);
  return true;
}

/* Whether the step in flight was aborted (host_abort). be->in.epoch is this thread's. */
static bool aborted(const host_be *be) {
  const uint64_t through = atomic_load(&((host_be *)be)->aborted_through);
  return through != 0 && through >= be->in.epoch;
}

/* Waits for the block of src for the current collective of g (exactly `bytes` long)
 * and copies it to dst. */
static int recv_block(host_be *be, sc_group g, int32_t src, void *dst, size_t bytes,
                      uint64_t deadline_ns, sc_diag *d) {
  for (;;) {
    sc_inbox_block *e = sc_inbox_take(&be->in, g, src);
    if (e != NULL) {
      const size_t got = zmq_msg_size(&e->payload);
      if (got == bytes) memcpy(dst, zmq_msg_data(&e->payload), bytes);
      sc_inbox_drop(e);
      /* the sender is the one out of step: name it (with the plan, the inbox refused
       * such a block already; without, this is where the size is checked) */
      if (got != bytes) {
        SC_ERROR("coll", "rank %d: rank %d sent %zu bytes for %s seq %u, expected %zu",
                 be->rank, src, got, sc_group_name(g), be->in.seq[g], bytes);
        return sc_fail(d, SC_EDESYNC,
                       "rank %d sent a %zu-byte block where this rank's plan has %zu (%s "
                       "group, its collective %u): rank %d is out of step", src, got, bytes,
                       sc_group_name(g), be->in.seq[g], src);
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
    /* Drain what is readable, at most a bounded batch per pass (zmq_poll reports a
     * socket that still holds messages at once): a peer that keeps the socket full must
     * not keep this loop from its deadline and abort checks. */
    for (int k = 0; k < 4096 && receive_one(be); k++) {
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
  sc_inbox_advance(&be->in, g);
  return rc;
}

/* Sums, in member order, `count` elements: this member's from `mine`, member k's from
 * scratch slot k (received). Writes the result to recv. */
static int reduce_into(host_be *be, sc_group g, sc_dtype dt, const void *mine, void *recv,
                       size_t count) {
  if (sc_grow((void **)&be->acc, &be->acc_cap, count * sizeof(float))) return SC_ENOMEM;
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
  int rc = sc_grow((void **)&be->scratch, &be->scratch_cap, (size_t)be->size[g] * bytes);
  if (rc == 0) rc = send_all(be, g, send, bytes, stride_bytes);
  for (int32_t k = 0; k < be->size[g] && rc == 0; k++)
    if (k != be->me[g])
      rc = recv_block(be, g, be->members[g][k], be->scratch + (size_t)k * bytes, bytes, dl, d);
  if (rc == 0) rc = reduce_into(be, g, dt, send + (size_t)be->me[g] * stride_bytes, recv, count);
  sc_inbox_advance(&be->in, g);
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

static int host_run(void *self, int32_t seq, sc_coll_op op, sc_group g, sc_dtype dt,
                    const void *send, void *recv, size_t count, sc_diag *d) {
  (void)seq; /* (it finishes each collective before returning: nothing to report later) */
  switch (op) {
  case SC_OP_ALL_GATHER: return host_all_gather(self, g, dt, send, recv, count, d);
  case SC_OP_ALL_REDUCE: return host_all_reduce(self, g, dt, send, recv, count, d);
  case SC_OP_REDUCE_SCATTER: return host_reduce_scatter(self, g, dt, send, recv, count, d);
  default: return SC_EINVAL;
  }
}

static void host_abort(void *self, uint64_t epoch) {
  host_be *be = self;
  /* raised to the highest step aborted, never lowered: the step in flight (be->in.epoch,
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

static void host_expect(void *self, uint64_t epoch, const sc_coll *plan, int32_t num) {
  host_be *be = self;
  sc_inbox_expect(&be->in, epoch, plan, num);
}

static const sc_coll_ops k_host_ops = {
    .run = host_run,
    .abort = host_abort,
    .reset = host_reset,
    .expect = host_expect,
};

static void destroy_be(host_be *be) {
  if (be == NULL) return;
  sc_inbox_free(&be->in);
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
  sc_zap_stop(be->zap); /* (its socket is one of the context's) */
  if (be->own_ctx && be->ctx) zmq_ctx_term(be->ctx);
  for (int g = 0; g < SC_GROUP_COUNT; g++) free(be->members[g]);
  free(be->dealers);
  free(be->scratch);
  free(be->acc);
  pthread_mutex_destroy(&be->wake_mu);
  free(be);
}

/* The ZAP handler of a private context (backend_host.h): admits the rank keys, each
 * named by its rank. */
static int start_zap(host_be *be, const sc_host_comm_config *hc, sc_diag *d) {
  const sc_zap_domain node = {.domain = SC_ZAP_DOMAIN_NODE, .keys = hc->rank_keys,
                              .num_keys = be->world};
  return sc_zap_start(be->ctx, &node, 1, &be->zap, d);
}

/* CURVE options: the ROUTER (server_key NULL) is a server of the node domain, a DEALER a
 * client of its peer's rank key. -1 when ZeroMQ refuses (no CURVE in this libzmq). */
static int set_curve(void *s, const sc_host_comm_config *hc, const uint8_t *server_key) {
  return server_key == NULL
             ? sc_curve_make_server(s, hc->secret_key, SC_ZAP_DOMAIN_NODE)
             : sc_curve_make_client(s, hc->public_key, hc->secret_key, server_key);
}

static int bind_router(host_be *be, const sc_host_comm_config *hc, sc_diag *d) {
  be->router = zmq_socket(be->ctx, ZMQ_ROUTER);
  if (be->router == NULL || (be->in.curve && set_curve(be->router, hc, NULL) != 0))
    return sc_fail(d, SC_EIO, "host collectives: %s", zmq_strerror(zmq_errno()));
  /* What ZeroMQ queues before the backend reads it (it reads only inside a collective)
   * is bounded per connection: at most SC_HOST_RCVHWM blocks (past it ZeroMQ stops
   * reading that peer's connection, so TCP holds the sender back: nothing is dropped),
   * each no larger than a plan can make (a larger message ends the connection before it
   * is buffered). An honest peer is never more than 3 blocks per group ahead
   * (backend_host.h), so it never meets either limit. */
  const int rcvhwm = SC_HOST_RCVHWM, handshake_ms = 5000; /* a stranger's is not held long */
  zmq_setsockopt(be->router, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
  zmq_setsockopt(be->router, ZMQ_HANDSHAKE_IVL, &handshake_ms, sizeof handshake_ms);
  /* A restarted peer connects with the routing id of the process it replaces; while this
   * socket has not noticed the old connection's end, ZeroMQ would refuse the new one and
   * drop what it sends (its blocks never came, seen as flaky timeouts after a rejoin).
   * The new connection takes the id over. (Who may send what is the inbox's to check,
   * from the id or, with CURVE, the key the peer proved it holds.) */
  const int handover = 1;
  zmq_setsockopt(be->router, ZMQ_ROUTER_HANDOVER, &handover, sizeof handover);
  if (hc->max_block_bytes > 0 && hc->max_block_bytes < (size_t)INT64_MAX - 64) {
    const int64_t max = (int64_t)hc->max_block_bytes + 64; /* + the header */
    zmq_setsockopt(be->router, ZMQ_MAXMSGSIZE, &max, sizeof max);
  }
  const int rc = sc_ipc_check_private(hc->endpoints[hc->rank], d);
  if (rc != 0) return rc;
  if (zmq_bind(be->router, hc->endpoints[hc->rank]) != 0)
    return sc_fail(d, SC_EIO, "host collectives: rank %d cannot bind %s: %s", hc->rank,
                   hc->endpoints[hc->rank], zmq_strerror(zmq_errno()));
  return 0;
}

/* One DEALER to each rank that shares a group with this one. */
static int connect_peers(host_be *be, const sc_host_comm_config *hc, sc_diag *d) {
  const int zero = 0;
  char ident[16];
  snprintf(ident, sizeof ident, "r%d", hc->rank);
  for (int g = 0; g < SC_GROUP_COUNT; g++)
    for (int32_t k = 0; k < be->size[g]; k++) {
      const int32_t peer = be->members[g][k];
      if (peer == hc->rank || be->dealers[peer] != NULL) continue;
      void *s = zmq_socket(be->ctx, ZMQ_DEALER);
      if (s == NULL) return sc_fail(d, SC_EIO, "host collectives: %s", zmq_strerror(zmq_errno()));
      be->dealers[peer] = s;
      zmq_setsockopt(s, ZMQ_ROUTING_ID, ident, strlen(ident));
      zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
      if ((be->in.curve && set_curve(s, hc, hc->rank_keys[peer]) != 0) ||
          zmq_connect(s, hc->endpoints[peer]) != 0)
        return sc_fail(d, SC_EIO, "host collectives: rank %d cannot connect to %s: %s",
                       hc->rank, hc->endpoints[peer], zmq_strerror(zmq_errno()));
    }
  return 0;
}

int sc_host_comm_create(sc_comm *comm, const sc_plan_config *cfg,
                        const sc_host_comm_config *hc, sc_diag *d) {
  const int32_t world = sc_plan_world_size(cfg);
  if (hc->rank < 0 || hc->rank >= world || hc->endpoints == NULL)
    return sc_fail(d, SC_EINVAL, "host collectives: rank %d outside world of %d", hc->rank,
                   world);
  const int keys = (hc->public_key != NULL) + (hc->secret_key != NULL) + (hc->rank_keys != NULL);
  if (keys != 0 && keys != 3)
    return sc_fail(d, SC_EINVAL, "host collectives: CURVE needs this rank's key pair and "
                   "every rank's public key (%d of the three given)", keys);
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
    /* ZeroMQ encrypts and decrypts CURVE traffic on its I/O threads, one connection on
     * one thread: with a single thread the blocks to and from every peer of a step wait
     * for each other there (megabytes per prefill step) */
    if (be->ctx != NULL && hc->rank_keys != NULL)
      zmq_ctx_set(be->ctx, ZMQ_IO_THREADS, SC_HOST_CURVE_IO_THREADS);
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
  if ((rc = sc_inbox_init(&be->in, world, hc->rank, keys == 3, hc->max_block_bytes,
                          be->members, be->size)))
    goto fail;
  /* the handler before the bind: ZeroMQ admits every CURVE client of a context without */
  if ((keys == 3 && be->own_ctx && (rc = start_zap(be, hc, d))) ||
      (rc = bind_router(be, hc, d)) || (rc = connect_peers(be, hc, d)))
    goto fail;
  char wake[64];
  snprintf(wake, sizeof wake, k_wake_fmt, (void *)be);
  be->wake_rx = zmq_socket(be->ctx, ZMQ_PAIR);
  be->wake_tx = zmq_socket(be->ctx, ZMQ_PAIR);
  if (be->wake_rx == NULL || be->wake_tx == NULL || zmq_bind(be->wake_rx, wake) != 0 ||
      zmq_connect(be->wake_tx, wake) != 0) {
    rc = sc_fail(d, SC_EIO, "host collectives: %s", zmq_strerror(zmq_errno()));
    goto fail;
  }

  memset(comm, 0, sizeof *comm);
  sc_comm_init_groups(comm, cfg, hc->rank);
  comm->ops = &k_host_ops;
  comm->self = be;
  return 0;
fail:
  destroy_be(be);
  return rc == SC_ENOMEM ? sc_fail(d, rc, "host collectives: out of memory") : rc;
}

void sc_host_comm_reset(sc_comm *comm, uint64_t epoch) { host_reset(comm->self, epoch); }

static void host_reset(void *self, uint64_t epoch) {
  host_be *be = self;
  sc_inbox_reset(&be->in, epoch);
  /* drain a pending wake-up of an earlier abort (an abort of an earlier step does not
   * reach this one: aborted() compares epochs) */
  char c;
  while (zmq_recv(be->wake_rx, &c, 1, ZMQ_DONTWAIT) >= 0) {
  }
}

void sc_host_comm_get_stats(const sc_comm *comm, sc_host_comm_stats *out) {
  assert(comm->ops == &k_host_ops); /* (not through a staged wrapper) */
  const host_be *be = comm->self;
  sc_inbox_stats(&be->in, out);
}

void sc_host_comm_destroy(sc_comm *comm) {
  if (comm->self == NULL) return;
  destroy_be(comm->self);
  comm->self = NULL;
  comm->ops = NULL;
}
