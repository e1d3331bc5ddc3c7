/* rank_ctx.c - a rank's context: backend and engine choice (rank_ctx.h). */
#include "actors/rank_ctx.h"

#include <stdlib.h>
#include <string.h>

#include "base/curve_key.h"
#include "base/log.h"
#include "collectives/backend_host.h"
#include "collectives/backend_staged.h"
#ifdef SC_HAVE_CUDA
#include "collectives/backend_ipc.h"
#include "collectives/backend_nccl.h"
#include "kernels/cuda/kernels_cuda.h"
#endif

#ifdef SC_HAVE_CUDA
/* The NCCL backend fills (and its destroy clears) the whole comm; what belongs to the rank
 * rather than to the communicators is put back: the desync injection, the last failure's
 * record and the per-purpose statistics, which outlive a rebuild. */
static void keep_rank_fields(sc_comm *c, const sc_comm *kept) {
  c->inject_desync_step = kept->inject_desync_step;
  c->last_failure = kept->last_failure;
  memcpy(c->stats, kept->stats, sizeof kept->stats);
}
#endif

int sc_rank_ctx_nccl_init(sc_rank_ctx *x, const unsigned char ids[SC_GROUP_COUNT][128],
                          sc_diag *d) {
#ifdef SC_HAVE_CUDA
  sc_nccl_id nid[SC_GROUP_COUNT];
  for (int g = 0; g < SC_GROUP_COUNT; g++) memcpy(nid[g].bytes, ids[g], SC_NCCL_ID_BYTES);
  void *stream = sc_kernels_cuda_stream(sc_engine_kernels(x->engine));
  const sc_comm kept = x->comm; /* the rank's fields survive the backend's fill */
  /* every process sees its one GPU as device 0 (CUDA_VISIBLE_DEVICES, docs/pipeline.md) */
  const int rc = sc_nccl_comm_create(&x->comm, &x->plan_cfg, x->rank, 0, nid, stream,
                                     x->cfg.deadline_ms);
  keep_rank_fields(&x->comm, &kept);
  if (rc) return sc_fail(d, rc, "rank %d: cannot create the NCCL communicators: %s", x->rank,
                         sc_strerror(rc));
  x->nccl_comm = true;
  return 0;
#else
  (void)x, (void)ids;
  return sc_fail(d, SC_ENOTSUP, "this sparsecp was built without CUDA and NCCL");
#endif
}

void sc_rank_ctx_nccl_drop(sc_rank_ctx *x) {
#ifdef SC_HAVE_CUDA
  if (!x->nccl_comm) return;
  const sc_comm kept = x->comm;
  sc_nccl_abort(&x->comm);
  sc_nccl_comm_destroy(&x->comm);
  x->nccl_comm = false;
  keep_rank_fields(&x->comm, &kept);
#else
  (void)x;
#endif
}

bool sc_rank_ctx_ipc_needed(const sc_rank_ctx *x, int g) {
#ifdef SC_HAVE_CUDA
  return x->comm.group_size[g] >= 2 && sc_nccl_id_needed(&x->plan_cfg, (sc_group)g);
#else
  (void)x, (void)g;
  return false;
#endif
}

#ifdef SC_HAVE_CUDA
/* A region's blocks: the largest block a plan of this configuration holds, as the host
 * backend bounds it, up to 8 MB (larger collectives run in rounds, backend_ipc.h). */
static size_t ipc_block_bytes(const sc_rank_ctx *x) {
  const size_t most = sc_plan_max_block_bytes(&x->plan_cfg, x->cfg.sched.token_budget);
  return most < ((size_t)8 << 20) ? most : ((size_t)8 << 20);
}

/* ---- the weights the ranks of one GPU share (rank_ctx.h, "Shared weights") ---- */

/* What member 0 of PCP puts in its region's note: the handle of its weights and what a
 * member checks before it reads them instead of its own. */
#define WEIGHTS_NOTE_MAGIC 0x53435754u /* "SCWT" */
typedef struct weights_note {
  uint32_t magic;
  int32_t tp_rank;
  uint64_t bytes;         /* sc_engine_weights_flat_bytes */
  uint64_t engine_digest; /* sc_engine_config_digest: the same model and weights source */
  unsigned char handle[SC_KCUDA_SHARE_HANDLE_BYTES];
} weights_note;
_Static_assert(sizeof(weights_note) <= SC_IPC_NOTE_BYTES, "the weights' note outgrew the note");
_Static_assert(sizeof(((sc_rank_ctx *)0)->weights_handle) == SC_KCUDA_SHARE_HANDLE_BYTES,
               "rank_ctx.h's handle bytes");

static bool weights_shared_wanted(const sc_rank_ctx *x) {
  const char *v = getenv("SPARSECP_SHARED_WEIGHTS");
  return x->cfg.ipc && x->comm.group_size[SC_GROUP_PCP] > 1 && !(v && !strcmp(v, "0"));
}

/* Member 0 of PCP, at create (its engine's thread: no step yet): the engine's weights
 * into one exported buffer, read from there. Where that cannot be (a checkpoint's
 * weights, no memory for the buffer) every rank of the group keeps its own copy: the
 * others find no handle in the note. */
static void weights_export(sc_rank_ctx *x) {
  const size_t bytes = sc_engine_weights_flat_bytes(x->engine);
  if (bytes == 0) {
    SC_INFO("rank", "rank %d: the weights are not shared by the ranks of the GPU (a "
            "checkpoint's): each reads its own", x->rank);
    return;
  }
  void *flat = NULL;
  int rc = sc_kernels_cuda_share_alloc(bytes, &flat, x->weights_handle);
  if (rc == 0 && (rc = sc_engine_weights_flat_copy(x->engine, flat)) == 0)
    rc = sc_engine_weights_flat_use(x->engine, flat, true);
  if (rc) {
    sc_kernels_cuda_share_free(flat);
    SC_WARN("rank", "rank %d: cannot share the weights with the ranks of the GPU (%s): each "
            "reads its own", x->rank, sc_strerror(rc));
    return;
  }
  x->weights_flat = flat;
  x->weights_owner = true;
  SC_INFO("rank", "rank %d: the ranks of the GPU read its weights (%.1f MB, one copy)",
          x->rank, (double)bytes / 1e6);
}

/* Keeps `p` in a bounded list of things peers or queued work may still use (a region
 * this rank created for an earlier generation, a member's mapping of an earlier owner's
 * weights), releasing the oldest beyond the bound, by then long unused. */
static void retire(void **list, int *n, void *p, void (*release)(void *)) {
  if (p == NULL) return;
  if (*n == SC_RANK_IPC_RETIRED_MAX) {
    release(list[0]);
    memmove(list, list + 1, sizeof(void *) * (SC_RANK_IPC_RETIRED_MAX - 1));
    (*n)--;
  }
  list[(*n)++] = p;
}

/* Another member of PCP, each time it mapped the group's region (the comm actor's thread,
 * the gate closed: no step is being queued): the owner's weights in place of its own,
 * if the note names weights equal to its own (same model, source and slice, same
 * layout); else it reads its own, saying why. After a rebuild the note names the same
 * weights (kept) or another owner's (a new member 0: back to its own, then those). */
static void weights_import(sc_rank_ctx *x) {
  weights_note n;
  int rc = sc_ipc_comm_note_read(&x->comm, SC_GROUP_PCP, &n, sizeof n);
  const bool noted = rc == 0 && n.magic == WEIGHTS_NOTE_MAGIC;
  if (x->weights_flat != NULL) {
    if (noted && !memcmp(n.handle, x->weights_handle, sizeof n.handle)) return;
    (void)sc_engine_weights_flat_drop(x->engine); /* (it kept its own: it cannot fail) */
    /* (kept open until the rank ends: work queued before may still read it) */
    retire(x->weights_retired, &x->weights_retired_n, x->weights_flat,
           sc_kernels_cuda_share_close);
    x->weights_flat = NULL;
  }
  if (rc == 0 && !noted) return; /* member 0 shares none (it said why) */
  const size_t bytes = sc_engine_weights_flat_bytes(x->engine);
  const char *why = rc ? sc_strerror(rc)
                    : n.tp_rank != x->comm.group_rank[SC_GROUP_TP] ? "another TP slice"
                    : n.engine_digest != x->plan_cfg.engine_digest ? "another model or weights"
                    : bytes == 0 || n.bytes != bytes ? "another layout"
                    : NULL;
  void *flat = NULL;
  if (why == NULL && (rc = sc_kernels_cuda_share_open(n.handle, &flat)) != 0) why = sc_strerror(rc);
  if (why == NULL && (rc = sc_engine_weights_flat_use(x->engine, flat, false)) != 0) {
    sc_kernels_cuda_share_close(flat);
    why = sc_strerror(rc);
  }
  if (why != NULL) {
    SC_WARN("rank", "rank %d: reads its own weights, not those of its GPU's first rank: %s",
            x->rank, why);
    return;
  }
  x->weights_flat = flat;
  memcpy(x->weights_handle, n.handle, sizeof n.handle);
  SC_INFO("rank", "rank %d: reads the weights of its GPU's first rank (%.1f MB)", x->rank,
          (double)n.bytes / 1e6);
}

static int weights_note_write(sc_rank_ctx *x, void *region) {
  if (!x->weights_owner) return 0; /* (a region starts zeroed: no note) */
  weights_note n = {.magic = WEIGHTS_NOTE_MAGIC,
                    .tp_rank = x->comm.group_rank[SC_GROUP_TP],
                    .bytes = sc_engine_weights_flat_bytes(x->engine),
                    .engine_digest = x->plan_cfg.engine_digest};
  memcpy(n.handle, x->weights_handle, sizeof n.handle);
  return sc_ipc_region_note_write(region, &n, sizeof n);
}
#endif

int sc_rank_ctx_ipc_region(sc_rank_ctx *x, int g, unsigned char id[128], sc_diag *d) {
#ifdef SC_HAVE_CUDA
  sc_ipc_id iid;
  int rc = sc_ipc_region_create(x->comm.group_size[g], ipc_block_bytes(x), &iid,
                                &x->ipc_owned[g]);
  if (rc) return sc_fail(d, rc, "rank %d: cannot create the IPC region of group %d: %s",
                         x->rank, g, sc_strerror(rc));
  if (g == SC_GROUP_PCP && (rc = weights_note_write(x, x->ipc_owned[g])))
    return sc_fail(d, rc, "rank %d: cannot write the weights' handle into the IPC region: %s",
                   x->rank, sc_strerror(rc));
  memcpy(id, iid.bytes, SC_IPC_ID_BYTES);
  return 0;
#else
  (void)x, (void)g, (void)id;
  return sc_fail(d, SC_ENOTSUP, "this sparsecp was built without CUDA");
#endif
}

int sc_rank_ctx_ipc_init(sc_rank_ctx *x, const unsigned char ids[SC_GROUP_COUNT][128],
                         sc_diag *d) {
#ifdef SC_HAVE_CUDA
  sc_ipc_id iid[SC_GROUP_COUNT];
  for (int g = 0; g < SC_GROUP_COUNT; g++) memcpy(iid[g].bytes, ids[g], SC_IPC_ID_BYTES);
  void *stream = sc_kernels_cuda_stream(sc_engine_kernels(x->engine));
  const sc_comm kept = x->comm;
  const int rc = sc_ipc_comm_create(&x->comm, &x->plan_cfg, x->rank, iid,
                                    (void *const *)x->ipc_owned, stream, x->cfg.deadline_ms);
  keep_rank_fields(&x->comm, &kept);
  if (rc) return sc_fail(d, rc, "rank %d: cannot map the IPC regions (ipc collectives need "
                         "every rank on one GPU, its processes MPS clients of one server): %s",
                         x->rank, sc_strerror(rc));
  x->ipc_comm = true;
  if (weights_shared_wanted(x) && x->comm.group_rank[SC_GROUP_PCP] != 0) weights_import(x);
  return 0;
#else
  (void)x, (void)ids;
  return sc_fail(d, SC_ENOTSUP, "this sparsecp was built without CUDA");
#endif
}

/* The regions this rank created for an earlier generation are kept, not freed (retire):
 * a peer may still map one (it drops its comm when its own rebuild message comes), and
 * freeing an exported allocation before every importer closed it is undefined (CUDA). A
 * rebuild follows a failure, so they are few; beyond IPC_RETIRED_MAX the oldest goes, by
 * then long unmapped by every live peer. All are freed with the rank (its peers are
 * shutting down too). */
void sc_rank_ctx_ipc_drop(sc_rank_ctx *x) {
#ifdef SC_HAVE_CUDA
  if (x->ipc_comm) {
    const sc_comm kept = x->comm;
    sc_ipc_abort(&x->comm);
    sc_ipc_comm_destroy(&x->comm);
    x->ipc_comm = false;
    keep_rank_fields(&x->comm, &kept);
  }
  for (int g = 0; g < SC_GROUP_COUNT; g++) {
    retire(x->ipc_retired, &x->ipc_retired_n, x->ipc_owned[g], sc_ipc_region_destroy);
    x->ipc_owned[g] = NULL;
  }
#else
  (void)x;
#endif
}

int sc_rank_ctx_create(const sc_pipeline_config *cfg, int32_t rank, sc_rank_ctx **out,
                       sc_diag *d) {
  *out = NULL;
  sc_rank_ctx *x = calloc(1, sizeof *x);
  const char **eps = calloc((size_t)cfg->num_ranks, sizeof *eps);
  int rc = SC_ENOMEM;
  if (x == NULL || eps == NULL) {
    free(x);
    free(eps);
    return sc_fail(d, SC_ENOMEM, "out of memory");
  }
  x->cfg = *cfg;
  x->cfg.coll_endpoints = NULL; /* borrowed only here */
  x->cfg.rank_keys = NULL;
  sc_wipe(&x->cfg.node_key, sizeof x->cfg.node_key); /* ZeroMQ keeps its own copy */
  /* NCCL: the comm actor exchanges the unique ids and creates the communicators, then
   * opens the gate; the host backend's exist once this function returns */
  const bool device_coll = cfg->nccl || cfg->ipc; /* built later by the comm actor */
  sc_step_gate_init(&x->gate, &x->comm, !device_coll);
  x->rank = rank;
  x->plan_cfg = cfg->engine.plan;
  sc_model_config_to_plan(&cfg->engine.model, &x->plan_cfg);
  x->plan_cfg.engine_digest = sc_engine_config_digest(&cfg->engine);
  if (device_coll && !cfg->engine.cuda) {
    rc = sc_fail(d, SC_EINVAL, "%s collectives need \"device\": \"cuda\"",
                 cfg->nccl ? "NCCL" : "IPC");
    goto fail;
  }
  /* 1. the comm's groups (the engine takes its TP slice from them), and for host
   *    collectives the backend itself */
  if (device_coll) {
    sc_comm_init_groups(&x->comm, &x->plan_cfg, rank);
  } else {
    for (int32_t r = 0; r < cfg->num_ranks; r++) eps[r] = cfg->coll_endpoints[r];
    /* a block is held before its step's plan is known only up to the largest block a
     * plan of this configuration can hold (backend_host.h states the memory bound) */
    sc_host_comm_config hc = {
        .rank = rank, .endpoints = eps, .deadline_ms = cfg->deadline_ms,
        .max_block_bytes = sc_plan_max_block_bytes(&x->plan_cfg, cfg->sched.token_budget)};
    if (cfg->rank_keys) {
      hc.public_key = cfg->node_key.public_key;
      hc.secret_key = cfg->node_key.secret_key;
      hc.rank_keys = (const uint8_t(*)[32])cfg->rank_keys;
    }
    if ((rc = sc_host_comm_create(&x->comm, &x->plan_cfg, &hc, d))) goto fail;
    x->host_comm = true;
  }
  /* 2. the engine (weights, cache, forward) */
  if ((rc = sc_engine_create(&cfg->engine, rank, &x->comm, &x->engine, d))) goto fail;
#ifdef SC_HAVE_CUDA
  if (weights_shared_wanted(x) && x->comm.group_rank[SC_GROUP_PCP] == 0) weights_export(x);
#endif
  /* 3. device buffers: staged through host memory for the host backend, or NCCL */
  if (cfg->engine.cuda && !device_coll) {
    if ((rc = sc_staged_comm_create(&x->comm, sc_engine_kernels(x->engine), d))) goto fail;
    x->staged = true;
  }
  if (cfg->inject.at[SC_FAULT_DESYNC].rank == rank)
    x->comm.inject_desync_step = cfg->inject.at[SC_FAULT_DESYNC].step;
  free(eps);
  *out = x;
  return 0;
fail:
  free(eps);
  sc_rank_ctx_destroy(x);
  return rc;
}

void sc_rank_ctx_destroy(sc_rank_ctx *x) {
  if (x == NULL) return;
  if (x->staged) sc_staged_comm_destroy(&x->comm);
  /* the communicators before the engine: NCCL waits on events of the engine's stream */
#ifdef SC_HAVE_CUDA
  if (x->nccl_comm) sc_nccl_comm_destroy(&x->comm);
#endif
  sc_rank_ctx_ipc_drop(x);
#ifdef SC_HAVE_CUDA
  for (int i = 0; i < x->ipc_retired_n; i++) sc_ipc_region_destroy(x->ipc_retired[i]);
#endif
  if (x->host_comm) sc_host_comm_destroy(&x->comm);
  sc_engine_destroy(x->engine);
#ifdef SC_HAVE_CUDA
  /* (after the engine, whose table points there; the owner's last, as its regions) */
  if (x->weights_owner)
    sc_kernels_cuda_share_free(x->weights_flat);
  else
    sc_kernels_cuda_share_close(x->weights_flat);
  for (int i = 0; i < x->weights_retired_n; i++) sc_kernels_cuda_share_close(x->weights_retired[i]);
#endif
  sc_step_gate_destroy(&x->gate);
  free(x);
}
