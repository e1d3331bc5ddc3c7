/* backend_nccl.c - NCCL collectives with deadlines and abort (see backend_nccl.h). */
#include "collectives/backend_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/runtime/sc_log.h"
#include "actors/runtime/sc_time.h"

_Static_assert(sizeof(ncclUniqueId) == SC_NCCL_ID_BYTES, "ncclUniqueId size changed");

typedef struct nccl_rank {
  int device;
  cudaStream_t stream;
  int own_stream;
  ncclComm_t comm[SC_GROUP_COUNT];  /* DCP may alias PCP */
  int32_t size[SC_GROUP_COUNT];
  int64_t deadline_ms;
  atomic_int abort_req;            /* set by sc_nccl_abort, any thread */
  int dead;                        /* 0, or the code every call now fails with */
  cudaEvent_t ev_start, ev_end; /* around the last collective (its device time) */
  double last_s;
} nccl_rank;

static int nccl_err(ncclResult_t r, const char *what) {
  if (r == ncclSuccess || r == ncclInProgress) return 0;
  SC_ERROR("coll.nccl", "%s: %s", what, ncclGetErrorString(r));
  return r == ncclInvalidArgument || r == ncclInvalidUsage ? SC_EINVAL : SC_ESYS;
}

static int cuda_err(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 0;
  SC_ERROR("coll.nccl", "%s: %s", what, cudaGetErrorString(e));
  return e == cudaErrorMemoryAllocation ? SC_ENOMEM : SC_ESYS;
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

static void abort_all(nccl_rank *r, int code) {
  for (int g = 0; g < SC_GROUP_COUNT; g++)
    if (distinct(r, g)) (void)ncclCommAbort(r->comm[g]);
  for (int g = 0; g < SC_GROUP_COUNT; g++) r->comm[g] = NULL;
  if (!r->dead) r->dead = code;
}

static void pause_briefly(void) {
  const struct timespec ts = {0, 20000}; /* 20 us: polling cost stays negligible */
  nanosleep(&ts, NULL);
}

/* Waits until no communicator reports ncclInProgress (init or enqueue of a
 * non-blocking call), honouring the deadline and abort requests. */
static int wait_ready(nccl_rank *r, uint64_t until_ns, const char *what) {
  for (;;) {
    int busy = 0;
    for (int g = 0; g < SC_GROUP_COUNT; g++) {
      if (!distinct(r, g)) continue;
      ncclResult_t as = ncclSuccess;
      int rc = nccl_err(ncclCommGetAsyncError(r->comm[g], &as), "ncclCommGetAsyncError");
      if (rc == 0) rc = nccl_err(as, what);
      if (rc) {
        abort_all(r, SC_EABORTED);
        return rc;
      }
      busy |= as == ncclInProgress;
    }
    if (!busy) return 0;
    if (atomic_load(&r->abort_req)) {
      abort_all(r, SC_EABORTED);
      return SC_EABORTED;
    }
    if (until_ns && sc_now_ns() > until_ns) {
      SC_ERROR("coll.nccl", "%s: deadline passed, aborting the communicators", what);
      abort_all(r, SC_EABORTED);
      return SC_ETIMEDOUT;
    }
    pause_briefly();
  }
}

static uint64_t deadline_from_now(int64_t ms) {
  return ms > 0 ? sc_now_ns() + (uint64_t)ms * 1000000ull : 0;
}

static const sc_coll_ops k_nccl_ops; /* defined below its functions */

int sc_nccl_comm_init(const sc_plan_config *cfg, int32_t global_rank, int device,
                      const sc_nccl_id ids[SC_GROUP_COUNT], void *stream, int64_t deadline_ms,
                      sc_comm *comm) {
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
  memset(comm, 0, sizeof *comm);
  sc_comm_init_groups(comm, cfg, global_rank);
  r->device = device;
  r->deadline_ms = deadline_ms;
  atomic_init(&r->abort_req, 0);
  if ((rc = cuda_err(cudaSetDevice(device), "cudaSetDevice"))) goto fail;
  if (stream != NULL) {
    r->stream = (cudaStream_t)stream;
  } else {
    if ((rc = cuda_err(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking),
                       "stream create")))
      goto fail;
    r->own_stream = 1;
  }
  if ((rc = cuda_err(cudaEventCreate(&r->ev_start), "event create")) ||
      (rc = cuda_err(cudaEventCreate(&r->ev_end), "event create")))
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
  if (r->ev_start) (void)cudaEventDestroy(r->ev_start);
  if (r->ev_end) (void)cudaEventDestroy(r->ev_end);
  if (r->own_stream && r->stream) (void)cudaStreamDestroy(r->stream);
  free(r);
  memset(comm, 0, sizeof *comm);
  return rc;
}

void sc_nccl_comm_destroy(sc_comm *comm) {
  if (comm == NULL || comm->self == NULL) return;
  nccl_rank *r = comm->self;
  (void)cudaSetDevice(r->device);
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
  (void)cudaEventDestroy(r->ev_start);
  (void)cudaEventDestroy(r->ev_end);
  if (r->own_stream) (void)cudaStreamDestroy(r->stream);
  free(r);
  comm->self = NULL;
  comm->ops = NULL;
}

void *sc_nccl_comm_stream(const sc_comm *comm) {
  return comm && comm->self ? (void *)((nccl_rank *)comm->self)->stream : NULL;
}

void sc_nccl_abort(sc_comm *comm) {
  if (comm && comm->self) atomic_store(&((nccl_rank *)comm->self)->abort_req, 1);
}

static ncclDataType_t nccl_type(sc_dtype dt) {
  return dt == SC_DT_F32 ? ncclFloat32 : dt == SC_DT_BF16 ? ncclBfloat16 : ncclUint32;
}

static int nccl_run(void *self, sc_coll_op op, sc_group grp, sc_dtype dt, const void *send,
                    void *recv, size_t count) {
  nccl_rank *r = self;
  if ((unsigned)op >= SC_OP_COUNT || (unsigned)grp >= SC_GROUP_COUNT ||
      (unsigned)dt >= SC_DT_COUNT)
    return SC_EINVAL;
  if (op != SC_OP_ALL_GATHER && dt == SC_DT_W32) return SC_EINVAL;
  if (op == SC_OP_REDUCE_SCATTER && count % (size_t)r->size[grp] != 0) return SC_EINVAL;
  if (atomic_load(&r->abort_req) && !r->dead) abort_all(r, SC_EABORTED);
  if (r->dead) return SC_EABORTED;
  int rc;
  if ((rc = cuda_err(cudaSetDevice(r->device), "cudaSetDevice"))) return rc;
  const uint64_t until = deadline_from_now(r->deadline_ms);
  ncclComm_t c = r->comm[grp];
  const ncclDataType_t t = nccl_type(dt);
  ncclResult_t res;
  (void)cudaEventRecord(r->ev_start, r->stream);
  switch (op) {
  case SC_OP_ALL_GATHER:
    res = ncclAllGather(send, recv, count, t, c, r->stream);
    break;
  case SC_OP_ALL_REDUCE:
    res = ncclAllReduce(send, recv, count, t, ncclSum, c, r->stream);
    break;
  default:
    res = ncclReduceScatter(send, recv, count / (size_t)r->size[grp], t, ncclSum, c,
                            r->stream);
    break;
  }
  if ((rc = nccl_err(res, sc_coll_op_name(op)))) {
    abort_all(r, SC_EABORTED);
    return rc;
  }
  (void)cudaEventRecord(r->ev_end, r->stream);
  if ((rc = wait_ready(r, until, sc_coll_op_name(op)))) return rc;
  /* completion: the stream drains, unless NCCL reports an error, an abort is requested or
   * the deadline passes */
  for (;;) {
    const cudaError_t q = cudaStreamQuery(r->stream);
    if (q == cudaSuccess) {
      float ms = 0;
      r->last_s = cudaEventElapsedTime(&ms, r->ev_start, r->ev_end) == cudaSuccess ? ms * 1e-3 : -1;
      return 0;
    }
    if (q != cudaErrorNotReady) {
      rc = cuda_err(q, "collective stream");
      abort_all(r, SC_EABORTED);
      return rc;
    }
    ncclResult_t as = ncclSuccess;
    rc = nccl_err(ncclCommGetAsyncError(c, &as), "ncclCommGetAsyncError");
    if (rc == 0) rc = nccl_err(as, sc_coll_op_name(op));
    if (rc) {
      abort_all(r, SC_EABORTED);
      return rc;
    }
    if (atomic_load(&r->abort_req)) {
      abort_all(r, SC_EABORTED);
      return SC_EABORTED;
    }
    if (until && sc_now_ns() > until) {
      SC_ERROR("coll.nccl", "%s: deadline of %lld ms passed, aborting the communicators",
               sc_coll_op_name(op), (long long)r->deadline_ms);
      abort_all(r, SC_EABORTED);
      return SC_ETIMEDOUT;
    }
    pause_briefly();
  }
}

static void nccl_abort_op(void *self) { atomic_store(&((nccl_rank *)self)->abort_req, 1); }

/* A new step: forgets an abort request that no collective acted on. Communicators that
 * were aborted cannot be revived (NCCL needs fresh unique ids), so a dead comm stays
 * dead: the owner destroys it and initialises a new one through the control plane. */
static void nccl_reset_op(void *self, uint64_t epoch) {
  (void)epoch;
  nccl_rank *r = self;
  if (!r->dead) atomic_store(&r->abort_req, 0);
}

static double nccl_last_seconds(void *self) { return ((nccl_rank *)self)->last_s; }

static const sc_coll_ops k_nccl_ops = {
    .run = nccl_run,
    .abort = nccl_abort_op,
    .reset = nccl_reset_op,
    .last_seconds = nccl_last_seconds,
};
