/* pipeline.h - the inference pipeline of a cluster: its configuration, the per-process
 * rank context shared by the actors of one node, and the startup list that puts the
 * pipeline actors on every node (DESIGN.md §3).
 *
 * Actors, by well-known name (sc_node_resolve "name@rank"):
 *   gateway@0      client socket (untrusted input), token streaming      actors/gateway
 *   scheduler@0    continuous batching, KV blocks, step results          actors/scheduler
 *   partitioner@0  global batch -> step plan, sent to every rank         actors/partitioner
 *   comm@r         step aborts, NCCL id exchange and watch, the rank's   actors/comm
 *                  collective communicator (own thread)
 *   metadata@r     verifies the plan and acknowledges its fingerprint;   actors/metadata
 *                  joins plan and inputs, derives the rank's local
 *                  inputs, hands the step to the executor
 *   executor@r     queues the rank's forward pass, handles its           actors/executor
 *                  completion (own thread)
 *
 * One step: the scheduler picks a batch and sends it to the partitioner and the step
 * inputs (tokens, block tables, sampling) to every metadata actor; the partitioner plans
 * it and sends the same plan to every metadata actor, which verifies it and acknowledges
 * its fingerprint to the scheduler (nothing waits for the acks before the step runs),
 * derives its rank's inputs and hands the step to its executor, which runs it, every
 * collective checked against the plan; rank 0's executor returns the sampled tokens, the
 * others report step_complete; once every ack matched and every rank completed, the
 * scheduler streams the tokens to clients via the gateway.
 *
 * Failure (docs/pipeline.md): any rank whose step fails reports step_abort to the
 * scheduler, which fails the step's requests (their clients get errors; they are not
 * re-run) and broadcasts the abort to every comm, which aborts its communicator so no
 * rank stays blocked. On host collectives a desync or a timeout lets the cluster
 * continue with the next step; with NCCL (aborted communicators cannot be revived), when
 * a device fails (SC_EDEVICE) and when a node goes down, the cluster shuts down.
 *
 * Ownership: the rank context is created by the node's process before its actors start
 * and destroyed after they stopped. Threads: see each member.
 */
#ifndef SC_PIPELINE_H
#define SC_PIPELINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "model/engine.h"
#include "actors/runtime/sc_node.h"
#include "actors/scheduler/sched.h"
#include "messages/messages.h"

#define SC_PIPELINE_NUM_ACTORS 6

/* Faults a run can inject (`--inject KIND:RANK:STEP`, docs/pipeline.md), to test that
 * each ends the way it should: */
typedef enum sc_fault {
  SC_FAULT_DESYNC,   /* "desync": the rank requests a collective of the wrong shape */
  SC_FAULT_KILL,     /* "kill": the rank's node process dies (SIGKILL) */
  SC_FAULT_BADACK,   /* "badack": the rank acknowledges a wrong plan fingerprint */
  SC_FAULT_NOACK,    /* "noack": the rank's acknowledgement is lost */
  SC_FAULT_DEVFAULT, /* "devfault": the rank's device fails (a kernel faults) */
  SC_FAULT_NOCOMPLETE, /* "nocomplete": the rank's step_complete is lost */
  SC_FAULT_COUNT
} sc_fault;

typedef struct sc_fault_at {
  int32_t rank;
  uint64_t step; /* 0: not injected */
} sc_fault_at;

typedef struct sc_pipeline_config {
  sc_engine_config engine;        /* plan layout (pcp, dcp, tp, interleave, ...), model,
                                     weights, KV pool, kernel threads */
  char weights_path[1024];        /* storage for engine.weights ("" = synthetic) */
  sc_sched_config sched;          /* token budget, running limit, pool, max length */
  sc_msg_limits limits;           /* the gateway's untrusted-input limits */
  int64_t deadline_ms;            /* per collective */
  bool nccl;                      /* NCCL collectives (one GPU per rank) instead of the
                                     host backend (CPU ranks, or ranks sharing a GPU,
                                     their device buffers staged through host memory) */
  sc_fault_at inject[SC_FAULT_COUNT]; /* `--inject KIND:RANK:STEP`, by kind */
  int32_t num_ranks;
  char (*coll_endpoints)[256];    /* [num_ranks] host collective endpoints */
  char listen[256];               /* the gateway's client endpoint */
  char listen_key_file[512];      /* its CURVE secret key file ("": plain) */
  bool listen_curve;              /* the head's program read that file: */
  uint8_t listen_secret[32];      /* the key, and its public half in Z85 for the log */
  char listen_public[41];
} sc_pipeline_config;

/* Reads the "pipeline" section and the nodes' "coll" endpoints of a cluster file
 * (docs/cluster-file.md), with the parallel layout of `cluster`. *present says whether
 * the file has a pipeline section at all (when not, out stays empty and 0 is returned). */
int sc_pipeline_config_load(const char *cluster_path, const sc_cluster *cluster,
                            sc_pipeline_config *out, bool *present, sc_diag *d);
void sc_pipeline_config_free(sc_pipeline_config *c);
/* Parses "KIND:RANK:STEP" (KIND: desync, kill, badack, noack, devfault or nocomplete:
 * sc_fault) into c->inject. */
int sc_pipeline_parse_inject(sc_pipeline_config *c, const char *spec, sc_diag *d);

/* Whether fault f is injected at (rank, step). Any thread. */
static inline bool sc_pipeline_fault_at(const sc_pipeline_config *c, sc_fault f,
                                        int32_t rank, uint64_t step) {
  return c->inject[f].step != 0 && c->inject[f].step == step && c->inject[f].rank == rank;
}

/* Everything one node process shares among its pipeline actors. */
typedef struct sc_rank_ctx {
  sc_pipeline_config cfg;
  int32_t rank;
  sc_comm comm;                   /* the collectives of this rank (host or NCCL) */
  bool host_comm, nccl_comm, staged; /* which backend comm holds, and whether it is staged */
  sc_engine *engine;              /* owned; used by the executor's thread only */
  sc_plan_config plan_cfg;        /* what the partitioner plans with */
  /* NCCL communicators are created by the comm actor once the unique ids have been
   * exchanged with the other ranks; the executor waits for them before its first step.
   * comm_state: 0 pending (NCCL only), 1 ready, < 0 failed (an SC_E* code). */
  _Atomic int comm_state;
  pthread_mutex_t comm_mu;
  pthread_cond_t comm_cv;
  _Atomic uint64_t executing;     /* step the executor is inside, 0 when idle */
  _Atomic uint64_t aborted;       /* highest step the comm was told to abort */
} sc_rank_ctx;

/* Creates the rank context: host collectives (binds this rank's coll endpoint) and the
 * engine (weights, KV cache). The config is copied. */
int sc_rank_ctx_create(const sc_pipeline_config *cfg, int32_t rank, sc_rank_ctx **out,
                       sc_diag *d);
void sc_rank_ctx_destroy(sc_rank_ctx *ctx);

/* Publishes the communicator state (1 ready, or a negative code) and wakes waiters. */
void sc_rank_ctx_comm_done(sc_rank_ctx *ctx, int state);
/* Waits up to timeout_ms for the communicators; returns 0 or the failure code. */
int sc_rank_ctx_comm_wait(sc_rank_ctx *ctx, int64_t timeout_ms);
/* Creates this rank's NCCL communicators from the exchanged ids (comm actor's thread). */
int sc_rank_ctx_nccl_init(sc_rank_ctx *ctx, const unsigned char ids[SC_GROUP_COUNT][128],
                          sc_diag *d);

/* Fills out[SC_PIPELINE_NUM_ACTORS] with the pipeline's startup actors for a node whose
 * process owns ctx (the list is identical on every node; only the argument differs). */
void sc_pipeline_startup(sc_rank_ctx **ctx_slot, sc_startup_actor *out);

/* For the head's orderly stop (any thread, before the node is destroyed): tells its
 * scheduler to answer every request it still holds with SC_ECLOSED ("the cluster is
 * shutting down (why)"), and gives the gateway SC_PIPELINE_STOP_ANSWER_MS to send the
 * answers. A node without a scheduler returns at once. */
#define SC_PIPELINE_STOP_ANSWER_MS 300 /* (the scheduler's own shut_down waits as long) */
void sc_pipeline_stop_clients(sc_node *node, const char *why);

/* Sends step_abort {code, rank, step, message} to dst from inside an actor; with a
 * failure record of that step (the comm's last_failure) also its sequence number and the
 * expected and requested collectives. Returns 0 or the send's code. */
int sc_pipeline_send_abort(sc_ctx *c, sc_actor_id dst, uint64_t step, int32_t rank, int code,
                           const char *message, const sc_coll_failure *failure);

/* The actor specs (defined in each actor's folder). */
extern const sc_actor_spec sc_gateway_spec;
extern const sc_actor_spec sc_scheduler_spec;
extern const sc_actor_spec sc_partitioner_spec;
extern const sc_actor_spec sc_comm_spec;
extern const sc_actor_spec sc_metadata_spec;
extern const sc_actor_spec sc_executor_spec;

#endif
