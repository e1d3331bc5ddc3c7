/* backend_ipc.c - the host side of the device collectives between ranks that share a GPU
 * (backend_ipc.h): the regions, the comm's vtable, rounds of a
 * collective sized to the region's blocks. */
#include "collectives/backend_ipc.h"

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "collectives/backend_ipc_dev.h"
#include "collectives/backend_nccl.h" /* sc_nccl_id_needed: which groups have an instance */
#include "kernels/cuda/kernels_cuda.h"

/* What an id carries: the handle, then the region's geometry. */
typedef struct ipc_id_layout {
  cudaIpcMemHandle_t handle;
  int32_t members;
  int32_t lse_round; /* the decode LSE merge in one round (lse_reduce): member 0's choice,
                      * so that every member runs the same rounds */
  uint64_t block_bytes;
} ipc_id_layout;
_Static_assert(sizeof(ipc_id_layout) <= SC_IPC_ID_BYTES, "an IPC id outgrew its bytes");

typedef struct ipc_group {
  unsigned char *region; /* mapped (NULL: a group of one, or DCP aliasing PCP) */
  int32_t members, me;
  uint64_t block_bytes;
  uint64_t *seq;         /* device word: the group's rounds so far */
  bool lse_round;        /* the region's id offers lse_reduce */
  bool owned;            /* member 0's own allocation (sc_ipc_region_destroy frees it) */
} ipc_group;

/* The device times of one collective: events around its rounds (not while the stream is
 * captured into a graph: a replayed step's collectives are not timed). */
typedef struct ipc_timing {
  cudaEvent_t start, end;
  uint64_t epoch; /* the step whose collective they timed (0: none) */
} ipc_timing;

/* Steps with collectives, as the device counts them (sc_ipc_step_begin) and the host
 * learns them (expect): which step a failure record's step_no is. Two steps are queued
 * at most (overlapped steps), so a few entries are plenty. */
#define IPC_STEPS_KEPT 8
typedef struct ipc_step {
  uint64_t no, epoch;
} ipc_step;

typedef struct ipc_rank {
  cudaStream_t stream;   /* the compute stream: rounds sit at their place in it */
  ipc_group g[SC_GROUP_COUNT];
  int *status;           /* device: 0 or the code the comm died with */
  uint64_t *steps_dev;   /* device: steps with collectives so far (sc_ipc_step_begin) */
  sc_ipc_failure *failure_host; /* pinned, mapped: the device's record of the failure */
  sc_ipc_failure *failure_dev;
  int *abort_host;       /* pinned, mapped: written by abort (any thread) */
  int *abort_dev;
  int64_t deadline_ms;
  _Atomic uint64_t epoch; /* the step of the last reset */
  _Atomic uint64_t finished; /* the step of the last finish (an abort of it is stale) */
  ipc_timing *timing[2]; /* [n_timing[p]] by plan position, for steps of parity p (two
                          * steps are in flight at most) */
  int32_t n_timing[2];
  uint64_t steps_no;     /* steps with collectives planned so far (expect) */
  ipc_step steps[IPC_STEPS_KEPT]; /* the last of them, by no % IPC_STEPS_KEPT */
  int dead;              /* the code, once finish or reset has seen it */
} ipc_rank;

static int cuda_err(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 0;
  SC_ERROR("coll.ipc", "%s: %s", what, cudaGetErrorString(e));
  return sc_cuda_status((int)e);
}

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

int sc_ipc_region_create(int32_t members, size_t block_bytes, sc_ipc_id *id, void **owned) {
  if (members < 2 || members > SC_IPC_MEMBERS_MAX || block_bytes == 0 || id == NULL ||
      owned == NULL)
    return SC_EINVAL;
  /* SPARSECP_IPC_LSE_ROUND=1 merges the decode attention's LSE in one round (off by
   * default until it has run on a GPU: written in session 58, when no device came; its
   * measurement is staged in bench/results/s58-2026-12-08/run1.sh). Read here, by member
   * 0 alone, and carried by the id, since members that disagreed would pair one member's
   * fused round with another's gather and corrupt both. */
  const char *fuse = getenv("SPARSECP_IPC_LSE_ROUND");
  ipc_id_layout l = {.members = members, .block_bytes = round_up(block_bytes, 256),
                     .lse_round = fuse != NULL && strcmp(fuse, "1") == 0};
  const size_t bytes = SC_IPC_DATA_AT + 2 * (size_t)members * l.block_bytes;
  void *p = NULL;
  int rc = cuda_err(cudaMalloc(&p, bytes), "ipc region");
  if (rc == 0) rc = cuda_err(cudaMemset(p, 0, bytes), "ipc region clear");
  /* (cleared before its handle leaves: a peer's kernels are ordered with nothing here) */
  if (rc == 0) rc = cuda_err(cudaDeviceSynchronize(), "ipc region clear");
  if (rc == 0) rc = cuda_err(cudaIpcGetMemHandle(&l.handle, p), "ipc handle");
  if (rc) {
    if (p) (void)cudaFree(p);
    return rc;
  }
  memset(id->bytes, 0, sizeof id->bytes);
  memcpy(id->bytes, &l, sizeof l);
  *owned = p;
  return 0;
}

void sc_ipc_region_destroy(void *owned) {
  if (owned) (void)cudaFree(owned);
}

_Static_assert(SC_IPC_NOTE_AT + SC_IPC_NOTE_BYTES <= SC_IPC_DATA_AT, "the note overlaps the slots");

int sc_ipc_region_note_write(void *owned, const void *note, size_t n) {
  if (owned == NULL || (note == NULL && n > 0) || n > SC_IPC_NOTE_BYTES) return SC_EINVAL;
  /* (synchronous: the note is in the region before its id can leave this process) */
  return cuda_err(cudaMemcpy((unsigned char *)owned + SC_IPC_NOTE_AT, note, n,
                             cudaMemcpyHostToDevice),
                  "ipc region note");
}

static const sc_coll_ops k_ipc_ops;

int sc_ipc_comm_note_read(const sc_comm *comm, int group, void *note, size_t n) {
  if (comm == NULL || comm->ops != &k_ipc_ops || group < 0 || group >= SC_GROUP_COUNT ||
      n > SC_IPC_NOTE_BYTES)
    return SC_EINVAL;
  const ipc_rank *r = comm->self;
  const unsigned char *region = r->g[group].region;
  if (group == SC_GROUP_DCP && region == NULL) region = r->g[SC_GROUP_PCP].region;
  if (region == NULL) return SC_ENOENT;
  return cuda_err(cudaMemcpy(note, region + SC_IPC_NOTE_AT, n, cudaMemcpyDeviceToHost),
                  "ipc region note");
}

static void free_rank(ipc_rank *r) {
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    const ipc_group *x = &r->g[g];
    if (x->region && !x->owned && !(g == SC_GROUP_DCP && x->region == r->g[SC_GROUP_PCP].region))
      (void)cudaIpcCloseMemHandle(x->region);
  }
  for (int p = 0; p < 2; p++) {
    for (int32_t i = 0; i < r->n_timing[p]; i++) {
      (void)cudaEventDestroy(r->timing[p][i].start);
      (void)cudaEventDestroy(r->timing[p][i].end);
    }
    free(r->timing[p]);
  }
  if (r->status) (void)cudaFree(r->status); /* status, steps and the seqs: one allocation */
  if (r->failure_host) (void)cudaFreeHost(r->failure_host);
  if (r->abort_host) (void)cudaFreeHost(r->abort_host);
  free(r);
}

/* A pinned host word the device reads or writes through its mapping. */
static int mapped(size_t bytes, void **host, void **dev, const char *what) {
  int rc = cuda_err(cudaHostAlloc(host, bytes, cudaHostAllocMapped), what);
  if (rc == 0) rc = cuda_err(cudaHostGetDevicePointer(dev, *host, 0), what);
  if (rc == 0) memset(*host, 0, bytes);
  return rc;
}

int sc_ipc_comm_create(sc_comm *comm, const sc_plan_config *cfg, int32_t global_rank,
                       const sc_ipc_id ids[SC_GROUP_COUNT], void *const owned[SC_GROUP_COUNT],
                       void *compute_stream, int64_t deadline_ms) {
  if (cfg == NULL || ids == NULL || comm == NULL || global_rank < 0 ||
      global_rank >= sc_plan_world_size(cfg))
    return SC_EINVAL;
  ipc_rank *r = calloc(1, sizeof *r);
  if (r == NULL) return SC_ENOMEM;
  memset(comm, 0, sizeof *comm);
  sc_comm_init_groups(comm, cfg, global_rank);
  r->stream = (cudaStream_t)compute_stream;
  r->deadline_ms = deadline_ms;
  /* status (at 0), the step count (at 8) and a seq per group (from 64): one device
   * allocation, zeroed */
  void *words = NULL;
  int rc = cuda_err(cudaMalloc(&words, 64 + 8 * SC_GROUP_COUNT), "ipc words");
  if (rc == 0) rc = cuda_err(cudaMemset(words, 0, 64 + 8 * SC_GROUP_COUNT), "ipc words clear");
  /* (the compute stream need not wait for the default one: cleared before it is used) */
  if (rc == 0) rc = cuda_err(cudaDeviceSynchronize(), "ipc words clear");
  if (rc) goto fail;
  r->status = words;
  r->steps_dev = (uint64_t *)((char *)words + 8);
  if ((rc = mapped(sizeof(sc_ipc_failure), (void **)&r->failure_host, (void **)&r->failure_dev,
                   "ipc failure record")) ||
      (rc = mapped(sizeof(int), (void **)&r->abort_host, (void **)&r->abort_dev,
                   "ipc abort word")))
    goto fail;
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    ipc_group *x = &r->g[g];
    x->members = comm->group_size[g];
    x->me = comm->group_rank[g];
    x->seq = (uint64_t *)((char *)words + 64 + 8 * g);
    if (x->members < 2 || !sc_nccl_id_needed(cfg, (sc_group)g)) continue;
    ipc_id_layout l;
    memcpy(&l, ids[g].bytes, sizeof l);
    if (l.members != x->members) {
      rc = SC_EINVAL;
      goto fail;
    }
    x->block_bytes = l.block_bytes;
    x->lse_round = l.lse_round != 0;
    if (owned != NULL && owned[g] != NULL) { /* member 0: its own allocation */
      x->region = owned[g];
      x->owned = true;
      continue;
    }
    void *p = NULL;
    if ((rc = cuda_err(cudaIpcOpenMemHandle(&p, l.handle, cudaIpcMemLazyEnablePeerAccess),
                       "ipc open")))
      goto fail;
    x->region = p;
  }
  if (cfg->pcp > 1 && cfg->dcp > 1) r->g[SC_GROUP_DCP] = r->g[SC_GROUP_PCP]; /* one group */
  comm->ops = &k_ipc_ops;
  comm->self = r;
  return 0;
fail:
  free_rank(r);
  memset(comm, 0, sizeof *comm);
  return rc;
}

void sc_ipc_comm_destroy(sc_comm *comm) {
  if (comm == NULL || comm->ops != &k_ipc_ops) return;
  (void)cudaStreamSynchronize(((ipc_rank *)comm->self)->stream);
  free_rank(comm->self);
  comm->self = NULL;
  comm->ops = NULL;
}

static void raise_abort(ipc_rank *r) {
  atomic_thread_fence(memory_order_seq_cst);
  *(volatile int *)r->abort_host = 1;
}

void sc_ipc_abort(sc_comm *comm) {
  if (comm == NULL || comm->ops != &k_ipc_ops) return;
  raise_abort(comm->self);
}

static size_t dt_size(sc_dtype dt) { return dt == SC_DT_BF16 ? 2 : 4; }

/* A group of one: the collective is a copy (or nothing, in place). */
static int solo(const ipc_rank *r, const void *send, void *recv, size_t bytes) {
  if (send == recv || bytes == 0) return 0;
  return cuda_err(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, r->stream),
                  "ipc solo copy");
}

/* Events for the collective at plan position seq of a step of parity p, created on
 * first use. */
static ipc_timing *timing_of(ipc_rank *r, int p, int32_t seq) {
  if (seq < 0) return NULL;
  if (seq >= r->n_timing[p]) {
    int32_t n = r->n_timing[p] ? r->n_timing[p] : 8;
    while (n <= seq) n *= 2;
    ipc_timing *t = realloc(r->timing[p], (size_t)n * sizeof *t);
    if (t == NULL) return NULL;
    r->timing[p] = t;
    for (; r->n_timing[p] < n; r->n_timing[p]++) {
      ipc_timing *x = &t[r->n_timing[p]];
      x->epoch = 0;
      if (cudaEventCreate(&x->start) != cudaSuccess) return NULL;
      if (cudaEventCreate(&x->end) != cudaSuccess) {
        (void)cudaEventDestroy(x->start);
        return NULL;
      }
    }
  }
  return &r->timing[p][seq];
}

/* What every collective starts with: the events that time it (unless captured into a
 * graph: a recording holds no events of a step; *t NULL then) and, at plan position 0,
 * the device's count of the step. */
static int begin_collective(ipc_rank *r, int32_t seq, ipc_timing **t, sc_diag *d) {
  enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  int rc = cuda_err(cudaStreamIsCapturing(r->stream, &cap), "ipc capture status");
  if (rc) return sc_fail(d, rc, "ipc collective: cannot query the stream");
  const uint64_t epoch = atomic_load(&r->epoch);
  *t = cap == cudaStreamCaptureStatusNone ? timing_of(r, (int)(epoch & 1), seq) : NULL;
  if (*t && cudaEventRecord((*t)->start, r->stream) != cudaSuccess) *t = NULL;
  const sc_ipc_dev step_dv = {.steps = r->steps_dev};
  if (seq == 0 && (rc = sc_ipc_step_begin(&step_dv, r->stream)) != 0)
    return sc_fail(d, rc, "ipc collective: cannot count the step");
  return 0;
}

static void end_collective(ipc_rank *r, ipc_timing *t) {
  if (t && cudaEventRecord(t->end, r->stream) == cudaSuccess) t->epoch = atomic_load(&r->epoch);
}

/* Group x's view of the region for the device, the collective at plan position seq. */
static sc_ipc_dev dev_of(const ipc_rank *r, const ipc_group *x, int32_t seq) {
  return (sc_ipc_dev){.region = x->region, .members = x->members, .me = x->me,
                      .block_bytes = x->block_bytes, .seq = x->seq, .steps = r->steps_dev,
                      .status = r->status, .failure = r->failure_dev,
                      .abort_word = r->abort_dev,
                      .timeout_ns = r->deadline_ms > 0 ? (uint64_t)r->deadline_ms * 1000000u : 0,
                      .call = seq};
}

/* The collective in rounds of at most a block a member: every member cuts it alike (the
 * sizes are the plan's), so the rounds match. */
static int ipc_run(void *self, int32_t seq, sc_coll_op op, sc_group grp, sc_dtype dt,
                   const void *send, void *recv, size_t count, sc_diag *d) {
  ipc_rank *r = self;
  if (r->dead) return r->dead;
  if ((unsigned)grp >= SC_GROUP_COUNT || (op != SC_OP_ALL_GATHER && dt == SC_DT_W32))
    return sc_fail(d, SC_EINVAL, "ipc collective: bad group or type");
  const ipc_group *x = &r->g[grp];
  const size_t es = dt_size(dt), bytes = count * es;
  ipc_timing *t = NULL;
  int rc = begin_collective(r, seq, &t, d);
  if (rc) return rc;
  if (x->members < 2) {
    rc = solo(r, send, recv, bytes);
  } else if (x->region == NULL) {
    return sc_fail(d, SC_EINVAL, "ipc collective: group not mapped");
  } else {
    const sc_ipc_dev dv = dev_of(r, x, seq);
    const unsigned char *s = send;
    unsigned char *o = recv;
    if (op == SC_OP_ALL_GATHER || op == SC_OP_ALL_REDUCE) {
      const uint64_t piece = x->block_bytes / es * es; /* whole elements a round */
      for (uint64_t at = 0; at < bytes && rc == 0; at += piece) {
        const uint64_t n = bytes - at < piece ? bytes - at : piece;
        rc = sc_ipc_round(&dv, op, dt, s + at, 0, 1, n, o + at, bytes, r->stream);
      }
    } else { /* reduce_scatter: block b of the send goes to member b */
      if (count % (size_t)x->members != 0) return sc_fail(d, SC_EINVAL, "reduce_scatter: uneven");
      const uint64_t part = bytes / (uint64_t)x->members;
      const uint64_t piece = x->block_bytes / (uint64_t)x->members / es * es;
      for (uint64_t at = 0; at < part && rc == 0; at += piece) {
        const uint64_t n = part - at < piece ? part - at : piece;
        rc = sc_ipc_round(&dv, op, dt, s + at, part, x->members, n, o + at, 0, r->stream);
      }
    }
  }
  if (rc) return sc_fail(d, rc, "ipc collective: launch failed");
  end_collective(r, t);
  return 0;
}

/* One round holds both (sc_ipc_lse_round): the region offers it, the group has members
 * to merge, and the LSE and the parts fit a block. A pure function of the plan's shapes
 * and the region's id, so every member answers alike. */
static bool ipc_lse_fits(void *self, sc_group grp, sc_coll_op op, size_t n_rows, size_t width) {
  const ipc_rank *r = self;
  if ((unsigned)grp >= SC_GROUP_COUNT) return false;
  const ipc_group *x = &r->g[grp];
  return x->lse_round && x->region != NULL &&
         sc_ipc_lse_shape_fits(x->members, x->block_bytes, op, n_rows, width);
}

static int ipc_lse_reduce(void *self, int32_t seq, sc_coll_op op, sc_group grp, const float *lse,
                          const float *part, float *recv, size_t n_rows, size_t width,
                          sc_diag *d) {
  ipc_rank *r = self;
  if (r->dead) return r->dead;
  if (!ipc_lse_fits(self, grp, op, n_rows, width))
    return sc_fail(d, SC_EINVAL, "ipc LSE round: not offered for this shape");
  ipc_timing *t = NULL;
  int rc = begin_collective(r, seq, &t, d);
  if (rc) return rc;
  const sc_ipc_dev dv = dev_of(r, &r->g[grp], seq);
  if ((rc = sc_ipc_lse_round(&dv, op, lse, part, n_rows, width, recv, r->stream)) != 0)
    return sc_fail(d, rc, "ipc LSE round: launch failed");
  end_collective(r, t);
  return 0;
}

/* An abort of a step that has finished is ignored, as NCCL's backend ignores an abort of
 * an earlier step (coll.h); one of the step in flight, or of the next, kills the comm
 * (its peers' counters would no longer match this rank's). */
static void ipc_abort_op(void *self, uint64_t epoch) {
  ipc_rank *r = self;
  if (epoch != 0 && epoch <= atomic_load(&r->finished)) return;
  raise_abort(r);
}

/* A new step. An abort that no wait acted on is forgotten (the stream has passed the
 * rounds queued so far: wait for it, then read the failure record); one that killed a
 * wait leaves the comm dead: the peers' counters no longer match this rank's, so only a
 * new comm over a new region goes on (the scheduler rebuilds every rank's after a
 * failed step, as for NCCL). */
static void ipc_reset_op(void *self, uint64_t epoch) {
  ipc_rank *r = self;
  atomic_store(&r->epoch, epoch);
  if (*(volatile int *)r->abort_host == 0 || r->dead) return;
  (void)cudaStreamSynchronize(r->stream);
  const int code = ((volatile sc_ipc_failure *)r->failure_host)->code;
  if (code != 0) r->dead = code;
  else *(volatile int *)r->abort_host = 0;
}

/* The plan of step `epoch`: a step with collectives is counted as the device will count
 * it (its first collective begins with sc_ipc_step_begin). */
static void ipc_expect(void *self, uint64_t epoch, const sc_coll *plan, int32_t num) {
  (void)plan;
  ipc_rank *r = self;
  if (num <= 0) return;
  r->steps_no++;
  r->steps[r->steps_no % IPC_STEPS_KEPT] = (ipc_step){.no = r->steps_no, .epoch = epoch};
}

/* The step of the device's step count `no` (0: not known, taken as the step asking). */
static uint64_t epoch_of(const ipc_rank *r, uint64_t no) {
  const ipc_step *x = &r->steps[no % IPC_STEPS_KEPT];
  return no != 0 && x->no == no ? x->epoch : 0;
}

/* Step `epoch`'s work has completed (coll.h): the host-mapped record says whether a wait
 * failed, in which step and collective; the events give each timed collective's device
 * time. A failure in a later step (queued after this one) leaves this one's result
 * alone: its collectives had completed. */
static int ipc_finish(void *self, uint64_t epoch, double *seconds, int32_t n, int32_t *failed) {
  ipc_rank *r = self;
  atomic_store(&r->finished, epoch);
  const volatile sc_ipc_failure *f = r->failure_host;
  const int code = f->code;
  if (code != 0) {
    if (r->dead == 0) r->dead = code;
    const uint64_t when = epoch_of(r, f->step_no);
    if (when == 0 || when <= epoch) {
      *failed = f->call;
      return code;
    }
  }
  const int p = (int)(epoch & 1);
  for (int32_t i = 0; i < n; i++) {
    float ms = 0.0f;
    const ipc_timing *t = i < r->n_timing[p] ? &r->timing[p][i] : NULL;
    seconds[i] = t && t->epoch == epoch &&
                         cudaEventElapsedTime(&ms, t->start, t->end) == cudaSuccess
                     ? ms * 1e-3
                     : 0.0;
  }
  return 0;
}

static const sc_coll_ops k_ipc_ops = {
    .run = ipc_run,
    .abort = ipc_abort_op,
    .reset = ipc_reset_op,
    .finish = ipc_finish,
    .expect = ipc_expect,
    .lse_fits = ipc_lse_fits,
    .lse_reduce = ipc_lse_reduce,
    .recordable = true,
    .overlaps = true,
};
