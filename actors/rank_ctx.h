/* rank_ctx.h - what one node process shares among its pipeline actors: its rank, the
 * configuration, the collectives of the rank (host or NCCL, staged or not), the engine
 * (weights, KV cache, forward) and the step gate where the executor and the comm actor
 * meet (collectives/step_gate.h).
 *
 * Backend choice: "collectives": "nccl" gives NCCL communicators, created later by the
 * comm actor once the unique ids were exchanged (the gate stays pending until then);
 * "ipc" likewise gives device collectives between ranks sharing one GPU
 * (collectives/backend_ipc.h), member 0 of each group creating the group's region and
 * the comm actor carrying its id where NCCL's travels;
 * otherwise the host backend over ZeroMQ binds this rank's endpoint at once, and with
 * "device": "cuda" its device buffers are staged through host memory (several ranks
 * sharing one GPU, DESIGN.md §8).
 *
 * Shared weights. With "ipc" and P > 1 the ranks of a PCP group (one GPU, one TP slice:
 * the same weights) read one copy of the weights: member 0 moves its engine's weights
 * into memory it exports (at create) and puts the handle in its PCP region's note; the
 * others map it when they map the region and point their engines there
 * (sc_rank_ctx_ipc_init), keeping their own copies unread (so memory is not saved yet:
 * each still builds its own before the handle comes); after a rebuild whose note names
 * other weights (a new member 0) they go back to their own and map the new ones. Why:
 * four ranks reading four copies of the same weights pay the device's memory four times,
 * where one copy's reads meet in its L2 (3-10% off a P4 N4 decode step on one H100,
 * bench/gpu-step.md, session 57). SPARSECP_SHARED_WEIGHTS=0: every rank reads its own.
 * A checkpoint's weights (resident fp8) are not shared.
 *
 * Ownership: the program that hosts the node creates the context before its actors start
 * and destroys it after they stopped; the actors borrow it (their startup argument).
 * Threads: each member says who touches it.
 */
#ifndef SC_RANK_CTX_H
#define SC_RANK_CTX_H

#include <stdbool.h>
#include <stdint.h>

#include "actors/pipeline_config.h"
#include "collectives/step_gate.h"

#define SC_RANK_IPC_RETIRED_MAX 12

typedef struct sc_rank_ctx {
  sc_pipeline_config cfg;         /* read-only */
  int32_t rank;
  sc_comm comm;                   /* the collectives of this rank: the executor's thread,
                                     and the comm actor's through the gate */
  bool host_comm, nccl_comm, staged; /* which backend comm holds, and whether staged */
  bool ipc_comm;
  void *ipc_owned[SC_GROUP_COUNT]; /* the regions this rank created (member 0) */
  void *ipc_retired[SC_RANK_IPC_RETIRED_MAX]; /* and those of earlier generations, kept
                                                 while peers may map them (rank_ctx.c) */
  int ipc_retired_n;
  void *weights_flat;             /* the weights the ranks of this GPU share ("ipc", P > 1):
                                     member 0 of PCP's exported copy, or another member's
                                     mapping of it; NULL: the engine's own (rank_ctx.c) */
  bool weights_owner;             /* weights_flat is this rank's allocation */
  unsigned char weights_handle[64]; /* its CUDA IPC handle */
  void *weights_retired[SC_RANK_IPC_RETIRED_MAX]; /* a member's mappings of earlier
                                                     owners', kept as ipc_retired */
  int weights_retired_n;
  sc_engine *engine;              /* owned; used by the executor's thread only */
  sc_plan_config plan_cfg;        /* what the partitioner plans with */
  sc_step_gate gate;              /* executor <-> comm actor */
} sc_rank_ctx;

/* Creates the rank context: host collectives (binds this rank's coll endpoint) and the
 * engine (weights, KV cache). The config is copied (its coll_endpoints only read here). */
int sc_rank_ctx_create(const sc_pipeline_config *cfg, int32_t rank, sc_rank_ctx **out,
                       sc_diag *d);
void sc_rank_ctx_destroy(sc_rank_ctx *ctx);

/* Creates this rank's NCCL communicators from the exchanged ids (the comm actor's
 * thread); the caller then opens the gate (sc_step_gate_set_ready). */
int sc_rank_ctx_nccl_init(sc_rank_ctx *ctx, const unsigned char ids[SC_GROUP_COUNT][128],
                          sc_diag *d);

/* Drops this rank's NCCL communicators, if any (aborted: a peer may be gone, so nothing
 * waits for one), before a rebuild creates new ones with sc_rank_ctx_nccl_init. The
 * comm actor's thread, with the gate closed (sc_step_gate_close). The collectives'
 * statistics are kept. */
void sc_rank_ctx_nccl_drop(sc_rank_ctx *ctx);

/* "ipc": whether group g needs a region (two members or more, DCP not sharing PCP's);
 * member 0 creates it with sc_rank_ctx_ipc_region (its id to send), then every member
 * sc_rank_ctx_ipc_init from the ids; sc_rank_ctx_ipc_drop before a rebuild. The comm
 * actor's thread, as for NCCL. */
bool sc_rank_ctx_ipc_needed(const sc_rank_ctx *ctx, int g);
int sc_rank_ctx_ipc_region(sc_rank_ctx *ctx, int g, unsigned char id[128], sc_diag *d);
int sc_rank_ctx_ipc_init(sc_rank_ctx *ctx, const unsigned char ids[SC_GROUP_COUNT][128],
                         sc_diag *d);
void sc_rank_ctx_ipc_drop(sc_rank_ctx *ctx);

#endif
