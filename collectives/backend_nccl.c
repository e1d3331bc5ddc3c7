/* backend_nccl.c - NCCL collectives with deadlines and abort (see backend_nccl.h). */
#include "collectives/backend_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "kernels/cuda/kernels_cuda.h"

_Static_assert(sizeof(ncclUniqueId) == SC_NCCL_ID_BYTES, "ncclUniqueId size changed");

/* One queued collective: its device time is read from these events once it is done;
 * started_ns is when the watch first saw its start event complete (0 before). */
typedef struct nccl_call {
  cudaEvent_t start, end;
  uint64_t started_ns;
} nccl_call;

typedef struct nccl_rank {
  int device;
  cudaStream_t compute; /* the engine's stream: each collective sits at its place in it */
  cudaStream_t stream;  /* the comm stream, the backend's own */
  cudaEvent_t ready;    /* compute -> comm: the collective's inputs are written */
  ncclComm_t comm[SC_GROUP_COUNT];  /* DCP may alias PCP */
  int32_t size[SC_GROUP_COUNT];
  int64_t deadline_ms;
  /* mu serialises every NCCL call on the communicators: the executor's enqueues against
   * aborts from the comm actor (deadline, step abort) and the watch. */
  pthread_mutex_t mu;
  atomic_int abort_req; /* any thread; acted on under mu */
  _Atomic uint64_t epoch; /* the step in flight (reset) */
  int dead;             /* 0, or the code every call now fails with (under mu) */
  int32_t dead_call;    /* the collective outstanding when the comms died */
  nccl_call *calls;     /* collectives queued since reset (under mu) */
  int32_t cap_calls;
  atomic_int queued, done; /* done: counted by a host function after each collective */
  pthread_mutex_t watch_mu; /* the watcher may leave while host functions still run */
  void (*watch_fn)(void *);
  void *watch_arg;
} nccl_rank;

static int nccl_err(ncclResult_t r, const char *what) {
  if (r == ncclSuccess || r == ncclInProgress) return 0;
  SC_ERROR("coll.nccl", "%s: %s", what, ncclGetErrorString(r));
  return r == ncclInvalidArgument || r == ncclInvalidUsage ? SC_EINVAL : SC_ESYS;
}

/* A failed device (a sticky error: the rank's context is unusable) is SC_EDEVICE, as the
 * kernels report it: the scheduler then awaits a new process of the rank (a rebuild
 * that fails on it must not end the cluster). */
static int cuda_err(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 0;
  SC_ERROR("coll.nccl", "%s: %s", what, cudaGetErrorString(e));
  return sc_cuda_status((int)e);
}

int sc_nccl_get_unique_id(sc_nccl_id *out) {
  ncclUniqueId id;
  const int rc = nccl_err(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (rc == 0) memcpy(out->bytes, &id, sizeof id);
  return rc;
}

bool sc_nccl_id_needed(const sc_plan_config *cfg, sc_group group) {
  return !(group == SC_GROUP_DCP && cfg->pcp > 1);
}

bool sc_nccl_id_owner(const sc_plan_config *cfg, int32_t global_rank, sc_group group) {
  if (!sc_nccl_id_needed(cfg, group)) return false;
  const sc_rank_coords c = sc_plan_rank_coords(cfg, global_rank);
  return (group == SC_GROUP_TP ? c.tp_rank : group == SC_GROUP_PCP ? c.pcp_rank : c.dcp_rank) ==
         0;
}

/* Distinct communicators of a rank (DCP may alias PCP). */
static int distinct(const nccl_rank *r, int g) {
  for (int i = 0; i < g; i++)
    if (r->comm[i] == r->comm[g]) return 0;
  return r->comm[g] != NULL;
}

typedef struct abort_job {
  ncclComm_t comm;
  int device;
} abort_job;

static void *abort_one(void *p) {
  const abort_job *j = p;
  (void)cudaSetDevice(j->device);
  (void)ncclCommAbort(j->comm);
  return NULL;
}

/* Under mu. ncclCommAbort makes the collectives in flight return on the device, so both
 * streams drain; but it also waits for the work queued on the stream ahead of its own
 * kernels. Every communicator queues on the one comm stream, so aborting them one after
 * another could wait for a kernel of one not aborted yet (a TP all-reduce queued behind a
 * stuck PCP gather never starts, and the TP abort waits for it). So the distinct
 * communicators are aborted at the same time, each on a thread of its own. */
static void abort_all(nccl_rank *r, int code) {
  if (!r->dead) {
    /* before the abort: the collectives it ends count as done */
    r->dead = code;
    r->dead_call = atomic_load(&r->done);
  }
  abort_job jobs[SC_GROUP_COUNT];
  pthread_t threads[SC_GROUP_COUNT] = {0}; /* read only where started[i] (for gcc -O3) */
  bool started[SC_GROUP_COUNT] = {false};
  int n = 0;
  for (int g = 0; g < SC_GROUP_COUNT; g++)
    if (distinct(r, g)) jobs[n++] = (abort_job){r->comm[g], r->device};
  for (int i = 0; n > 1 && i < n; i++)
    started[i] = pthread_create(&threads[i], NULL, abort_one, &jobs[i]) == 0;
  for (int i = 0; i < n; i++)
    if (!started[i]) abort_one(&jobs[i]); /* one comm, or no thread: abort here */
  for (int i = 0; i < n; i++)
    if (started[i]) pthread_join(threads[i], NULL);
  for (int g = 0; g < SC_GROUP_COUNT; g++) r->comm[g] = NULL;
}

static void pause_briefly(void) {
  const struct timespec ts = {0, 20000}; /* 20 us: polling cost stays negligible */
  nanosleep(&ts, NULL);
}

/* Under mu. The first asynchronous error of any communicator: 0, or a code once the
 * comms were aborted because of it. *busy: some call is still being enqueued. */
static int check_async(nccl_rank *r, const char *what, int *busy) {
  *busy = 0;
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    if (!distinct(r, g)) continue;
    ncclResult_t as = ncclSuccess;
    int rc = nccl_err(ncclCommGetAsyncError(r->comm[g], &as), "ncclCommGetAsyncError");
    if (rc == 0) rc = nccl_err(as, what);
    if (rc) {
      abort_all(r, SC_EABORTED);
      return rc;
    }
    *busy |= as == ncclInProgress;
  }
  return 0;
}

/* Under mu. Waits until no communicator reports ncclInProgress (init, or the enqueue of
 * a non-blocking call; not the collective's completion), honouring the deadline and
 * abort requests. */
static int wait_ready(nccl_rank *r, uint64_t until_ns, const char *what) {
  for (;;) {
    int busy;
    const int rc = check_async(r, what, &busy);
    if (rc) return rc;
    if (!busy) return 0;
    if (atomic_load(&r->abort_req)) {
      abort_all(r, SC_EABORTED);
      return SC_EABORTED;
    }
    if (until_ns && sc_now_ns() > until_ns) {
      SC_ERROR("coll.nccl", "%s: deadline passed, aborting the communicators", what);
      abort_all(r, SC_ETIMEDOUT);
      return SC_ETIMEDOUT;
    }
    pause_briefly();
  }
}

static uint64_t deadline_from_now(int64_t ms) {
  return ms > 0 ? sc_now_ns() + (uint64_t)ms * 1000000ull : 0;
}

static void poke_watcher(nccl_rank *r) {
  pthread_mutex_lock(&r->watch_mu);
  if (r->watch_fn) r->watch_fn(r->watch_arg);
  pthread_mutex_unlock(&r->watch_mu);
}

/* Host function after each collective on the comm stream (driver thread, no CUDA). */
static void CUDART_CB call_done(void *p) {
  nccl_rank *r = p;
  if (atomic_fetch_add(&r->done, 1) + 1 == atomic_load(&r->queued)) poke_watcher(r);
}

static const sc_coll_ops k_nccl_ops; /* defined below its functions */

static void free_rank(nccl_rank *r) {
  for (int32_t i = 0; i < r->cap_calls; i++) {
    (void)cudaEventDestroy(r->calls[i].start);
    (void)cudaEventDestroy(r->calls[i].end);
  }
  free(r->calls);
  if (r->ready) (void)cudaEventDestroy(r->ready);
  if (r->stream) (void)cudaStreamDestroy(r->stream);
  pthread_mutex_destroy(&r->mu);
  pthread_mutex_destroy(&r->watch_mu);
  free(r);
}

int sc_nccl_comm_create(sc_comm *comm, const sc_plan_config *cfg, int32_t global_rank,
                        int device, const sc_nccl_id ids[SC_GROUP_COUNT],
                        void *compute_stream, int64_t deadline_ms) {
  int rc, ndev = 0;
  if (cfg == NULL || ids == NULL || comm == NULL || global_rank < 0 ||
      global_rank >= sc_plan_world_size(cfg) || device < 0)
    return SC_EINVAL;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || device >= ndev) {
    (void)cudaGetLastError();
    return SC_ENOTSUP;
  }
  nccl_rank *r = calloc(1, sizeof *r);
  if (r == NULL) return SC_ENOMEM;
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->watch_mu, NULL);
  memset(comm, 0, sizeof *comm);
  sc_comm_init_groups(comm, cfg, global_rank);
  r->device = device;
  r->deadline_ms = deadline_ms;
  r->compute = (cudaStream_t)compute_stream;
  atomic_init(&r->abort_req, 0);
  atomic_init(&r->queued, 0);
  atomic_init(&r->done, 0);
  if ((rc = cuda_err(cudaSetDevice(device), "cudaSetDevice")) ||
      (rc = cuda_err(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking),
                     "comm stream create")) ||
      (rc = cuda_err(cudaEventCreateWithFlags(&r->ready, cudaEventDisableTiming),
                     "event create")))
    goto fail;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  if ((rc = nccl_err(ncclGroupStart(), "ncclGroupStart"))) goto fail;
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    r->size[g] = comm->group_size[g];
    if (!sc_nccl_id_needed(cfg, (sc_group)g)) continue;
    ncclUniqueId id;
    memcpy(&id, ids[g].bytes, sizeof id);
    rc = nccl_err(ncclCommInitRankConfig(&r->comm[g], comm->group_size[g], id,
                                         comm->group_rank[g], &config),
                  "ncclCommInitRankConfig");
    if (rc) break;
  }
  const int grc = nccl_err(ncclGroupEnd(), "ncclGroupEnd");
  if (!rc) rc = grc;
  if (cfg->pcp > 1) r->comm[SC_GROUP_DCP] = r->comm[SC_GROUP_PCP];
  if (rc) {
    abort_all(r, SC_EABORTED);
    goto fail;
  }
  if ((rc = wait_ready(r, deadline_from_now(deadline_ms), "communicator init"))) goto fail;
  comm->ops = &k_nccl_ops;
  comm->self = r;
  return 0;
fail:
  free_rank(r);
  memset(comm, 0, sizeof *comm);
  return rc;
}

void sc_nccl_comm_destroy(sc_comm *comm) {
  if (comm == NULL || comm->self == NULL) return;
  nccl_rank *r = comm->self;
  sc_nccl_set_watch(comm, NULL, NULL);
  (void)cudaSetDevice(r->device);
  pthread_mutex_lock(&r->mu);
  if (!r->dead) {
    /* orderly: let queued work finish, then free; a failure falls back to abort */
    int ok = cudaStreamSynchronize(r->stream) == cudaSuccess;
    for (int g = 0; ok && g < SC_GROUP_COUNT; g++)
      if (distinct(r, g) && nccl_err(ncclCommFinalize(r->comm[g]), "ncclCommFinalize") != 0)
        ok = 0;
    if (ok && wait_ready(r, deadline_from_now(r->deadline_ms), "finalize") == 0) {
      for (int g = 0; g < SC_GROUP_COUNT; g++)
        if (distinct(r, g)) (void)ncclCommDestroy(r->comm[g]);
      memset(r->comm, 0, sizeof r->comm);
    }
  }
  abort_all(r, SC_EABORTED); /* no-op when already destroyed */
  pthread_mutex_unlock(&r->mu);
  (void)cudaStreamSynchronize(r->stream); /* host functions that still hold r */
  free_rank(r);
  comm->self = NULL;
  comm->ops = NULL;
}

void *sc_nccl_comm_stream(const sc_comm *comm) {
  return comm && comm->self ? (void *)((nccl_rank *)comm->self)->stream : NULL;
}

static ncclDataType_t nccl_type(sc_dtype dt) {
  return dt == SC_DT_F32 ? ncclFloat32 : dt == SC_DT_BF16 ? ncclBfloat16 : ncclUint32;
}

/* Under mu: an event pair for collective i. */
static int ensure_call(nccl_rank *r, int32_t i) {
  if (i < r->cap_calls) return 0;
  const int32_t cap = r->cap_calls ? 2 * r->cap_calls : 64;
  nccl_call *c = realloc(r->calls, (size_t)cap * sizeof *c);
  if (c == NULL) return SC_ENOMEM;
  r->calls = c;
  for (int32_t k = r->cap_calls; k < cap; k++) {
    int rc;
    c[k] = (nccl_call){0};
    if ((rc = cuda_err(cudaEventCreate(&c[k].start), "event create")) ||
        (rc = cuda_err(cudaEventCreate(&c[k].end), "event create"))) {
      if (c[k].start) (void)cudaEventDestroy(c[k].start);
      return rc;
    }
    r->cap_calls = k + 1;
  }
  return 0;
}

static ncclResult_t enqueue_op(nccl_rank *r, sc_coll_op op, sc_group grp, sc_dtype dt,
                               const void *send, void *recv, size_t count) {
  ncclComm_t c = r->comm[grp];
  const ncclDataType_t t = nccl_type(dt);
  switch (op) {
  case SC_OP_ALL_GATHER:
    return ncclAllGather(send, recv, count, t, c, r->stream);
  case SC_OP_ALL_REDUCE:
    return ncclAllReduce(send, recv, count, t, ncclSum, c, r->stream);
  default:
    return ncclReduceScatter(send, recv, count / (size_t)r->size[grp], t, ncclSum, c,
                             r->stream);
  }
}

/* Under mu: queues collective i behind the compute work queued so far, and the compute
 * work queued later behind it:
 *   compute: ... --record ready-->                    --wait end--> ...
 *   comm:             --wait ready--> start  op  end  done() */
static int enqueue(nccl_rank *r, int32_t i, sc_coll_op op, sc_group grp, sc_dtype dt,
                   const void *send, void *recv, size_t count, bool *launched) {
  int rc;
  nccl_call *k = &r->calls[i];
  *launched = false;
  if ((rc = cuda_err(cudaSetDevice(r->device), "cudaSetDevice")) ||
      (rc = cuda_err(cudaEventRecord(r->ready, r->compute), "ready event")) ||
      (rc = cuda_err(cudaStreamWaitEvent(r->stream, r->ready, 0), "comm waits compute")) ||
      (rc = cuda_err(cudaEventRecord(k->start, r->stream), "start event")))
    return rc;
  if ((rc = nccl_err(enqueue_op(r, op, grp, dt, send, recv, count), sc_coll_op_name(op)))) {
    abort_all(r, SC_EABORTED);
    return rc;
  }
  if ((rc = wait_ready(r, deadline_from_now(r->deadline_ms), sc_coll_op_name(op)))) return rc;
  k->started_ns = 0; /* (set by the watch once the comm stream reaches it) */
  if ((rc = cuda_err(cudaEventRecord(k->end, r->stream), "end event")) ||
      (rc = cuda_err(cudaLaunchHostFunc(r->stream, call_done, r), "completion callback")))
    return rc;
  *launched = true;
  return cuda_err(cudaStreamWaitEvent(r->compute, k->end, 0), "compute waits comm");
}

static int nccl_run(void *self, int32_t seq, sc_coll_op op, sc_group grp, sc_dtype dt,
                    const void *send, void *recv, size_t count, sc_diag *d) {
  (void)d, (void)seq; /* (it only queues: failures on the device come back through finish,
                       * which names the failing call by its own count) */
  nccl_rank *r = self;
  if ((unsigned)op >= SC_OP_COUNT || (unsigned)grp >= SC_GROUP_COUNT ||
      (unsigned)dt >= SC_DT_COUNT)
    return SC_EINVAL;
  if (op != SC_OP_ALL_GATHER && dt == SC_DT_W32) return SC_EINVAL;
  if (op == SC_OP_REDUCE_SCATTER && count % (size_t)r->size[grp] != 0) return SC_EINVAL;
  pthread_mutex_lock(&r->mu);
  if (atomic_load(&r->abort_req) && !r->dead) abort_all(r, SC_EABORTED);
  int rc = r->dead ? SC_EABORTED : 0;
  const int32_t i = atomic_load(&r->queued);
  bool launched = false;
  if (rc == 0) rc = ensure_call(r, i);
  if (rc == 0) rc = enqueue(r, i, op, grp, dt, send, recv, count, &launched);
  /* counted whenever its host function was queued, even if a later step of the enqueue
   * failed: that function will count it done, and reset waits for it */
  const bool was_idle = launched && atomic_load(&r->done) == i;
  if (launched) atomic_store(&r->queued, i + 1);
  pthread_mutex_unlock(&r->mu);
  if (was_idle) poke_watcher(r); /* work outstanding: the watch starts its clock */
  return rc;
}

/* Any thread. Raises the flag first: a thread holding mu in an enqueue that waits for
 * NCCL (wait_ready) sees it and aborts, so taking mu here never waits long; then aborts
 * unless that already happened. Every holder of mu is bounded (an enqueue by the flag
 * and its deadline, the watch and finish by NCCL calls that return, reset by a stream
 * whose step has completed). */
static void nccl_abort_op(void *self, uint64_t epoch) {
  nccl_rank *r = self;
  /* An abort of a step that ended is ignored: the step in flight is a later one. Read
   * before mu, since the request must reach a thread that holds mu in wait_ready; a reset
   * between this check and the request can still let it abort the next step, which
   * costs nothing more: after any aborted step the scheduler has every rank build new
   * communicators before the next one runs (comm_rebuild). */
  if (epoch != 0 && epoch < atomic_load(&r->epoch)) return;
  atomic_store(&r->abort_req, 1);
  pthread_mutex_lock(&r->mu);
  if (!r->dead) abort_all(r, SC_EABORTED);
  pthread_mutex_unlock(&r->mu);
}

void sc_nccl_abort(sc_comm *comm) {
  if (comm && comm->self) nccl_abort_op(comm->self, 0);
}

/* A new step: forgets an abort request that no collective acted on, and the previous
 * step's calls. Communicators that were aborted cannot be revived (NCCL needs fresh
 * unique ids), so a dead comm stays dead: the owner destroys it and initialises a new
 * one through the control plane. */
static void nccl_reset_op(void *self, uint64_t epoch) {
  nccl_rank *r = self;
  pthread_mutex_lock(&r->mu);
  atomic_store(&r->epoch, epoch);
  /* the compute stream has passed every collective, but the host functions behind them
   * may still be on their way; wait so they count the old step, not the new one */
  if (atomic_load(&r->done) != atomic_load(&r->queued)) (void)cudaStreamSynchronize(r->stream);
  if (!r->dead) atomic_store(&r->abort_req, 0);
  atomic_store(&r->queued, 0);
  atomic_store(&r->done, 0);
  pthread_mutex_unlock(&r->mu);
}

static int nccl_finish(void *self, uint64_t epoch, double *seconds, int32_t n, int32_t *failed) {
  (void)epoch; /* (the step reset last: NCCL's steps do not overlap) */
  nccl_rank *r = self;
  pthread_mutex_lock(&r->mu);
  int busy = 0, rc = r->dead;
  if (rc == 0) rc = check_async(r, "collective", &busy);
  if (rc) {
    *failed = r->dead_call;
  } else {
    for (int32_t i = 0; i < n && i < atomic_load(&r->queued); i++) {
      float ms = 0;
      seconds[i] = cudaEventElapsedTime(&ms, r->calls[i].start, r->calls[i].end) == cudaSuccess
                       ? ms * 1e-3
                       : 0.0;
    }
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}

void sc_nccl_set_watch(sc_comm *comm, void (*fn)(void *arg), void *arg) {
  if (comm == NULL || comm->self == NULL || comm->ops != &k_nccl_ops) return;
  nccl_rank *r = comm->self;
  pthread_mutex_lock(&r->watch_mu);
  r->watch_fn = fn;
  r->watch_arg = arg;
  pthread_mutex_unlock(&r->watch_mu);
}

int64_t sc_nccl_watch(sc_comm *comm) {
  if (comm == NULL || comm->self == NULL || comm->ops != &k_nccl_ops) return -1;
  nccl_rank *r = comm->self;
  pthread_mutex_lock(&r->mu);
  int64_t next_ms = -1;
  const int32_t done = atomic_load(&r->done), queued = atomic_load(&r->queued);
  int busy;
  if (r->dead || done >= queued) {
    /* nothing outstanding */
  } else if (atomic_load(&r->abort_req)) {
    abort_all(r, SC_EABORTED);
  } else if (check_async(r, "collective", &busy) == 0) {
    /* The oldest outstanding collective's clock starts when the comm stream reaches it
     * (its start event: the compute before it and its predecessors are done), as the
     * watch first sees it. The deadline then bounds the collective, its wait for the
     * peers included, and not the compute queued ahead of it: a long prompt's layer can
     * take longer than any deadline meant for a collective (the clock used to start when
     * the collective was queued or its predecessor finished). */
    nccl_call *k = &r->calls[done];
    const uint64_t now = sc_now_ns();
    if (k->started_ns == 0 && cudaSetDevice(r->device) == cudaSuccess &&
        cudaEventQuery(k->start) == cudaSuccess)
      k->started_ns = now;
    const uint64_t t0 = k->started_ns;
    const uint64_t limit = r->deadline_ms > 0 ? (uint64_t)r->deadline_ms * 1000000ull : 0;
    if (limit && t0 && now - t0 > limit) {
      SC_ERROR("coll.nccl", "collective %d of the step: deadline of %lld ms passed, aborting "
               "the communicators", done, (long long)r->deadline_ms);
      abort_all(r, SC_ETIMEDOUT);
    } else {
      /* polls for asynchronous errors (a peer's network failure) while work is out */
      next_ms = SC_NCCL_WATCH_POLL_MS;
      if (limit && t0) {
        const int64_t left = (int64_t)((t0 + limit - now) / 1000000ull) + 1;
        if (left < next_ms) next_ms = left;
      }
    }
  }
  pthread_mutex_unlock(&r->mu);
  return next_ms;
}

static const sc_coll_ops k_nccl_ops = {
    .run = nccl_run,
    .abort = nccl_abort_op,
    .reset = nccl_reset_op,
    .finish = nccl_finish,
};
