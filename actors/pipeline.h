/* pipeline.h - the inference pipeline of a cluster: the startup list that puts its
 * actors on every node (DESIGN.md §3), the head's word that the cluster is ready, and
 * the head's orderly stop. Its configuration is
 * pipeline_config.h, the per-process state its actors share rank_ctx.h.
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
 * scheduler, which fails the step's requests (or, with step_retries, runs them again)
 * and broadcasts the abort to every comm, which aborts its communicator so no rank stays
 * blocked; then every comm builds the next generation of the collectives (comm_rebuild:
 * NCCL needs new communicators) before the next step. A lost node, or a node whose device
 * failed, is awaited back with rejoin_wait_ms (its running requests requeued), and
 * otherwise ends the cluster, as a failed device on the head does.
 *
 * Threads: any (sc_pipeline_cluster_ready and sc_pipeline_stop_clients: see there).
 */
#ifndef SC_PIPELINE_H
#define SC_PIPELINE_H

#include "actors/rank_ctx.h"
#include "actors/runtime/sc_node.h"

#define SC_PIPELINE_NUM_ACTORS 6

/* Fills out[SC_PIPELINE_NUM_ACTORS] with the pipeline's startup actors for a node whose
 * process owns *ctx_slot (the list is identical on every node; only the argument
 * differs). *ctx_slot must stay where it is until the node has started. */
void sc_pipeline_startup(sc_rank_ctx **ctx_slot, sc_startup_actor *out);

/* For the head's program once sc_node_wait_ready succeeded (any thread): lets the
 * scheduler start steps, which it does not before (a step sent to a node that has not
 * joined waits in its queue, and when that node dies first its requests got no answer).
 * A node without a scheduler returns at once. */
void sc_pipeline_cluster_ready(sc_node *node);

/* For the head's orderly stop (any thread, before the node is destroyed): tells its
 * scheduler to answer every request it still holds with SC_ECLOSED ("the cluster is
 * shutting down (why)"), and gives the gateway SC_PIPELINE_STOP_ANSWER_MS to send the
 * answers. A node without a scheduler returns at once. */
#define SC_PIPELINE_STOP_ANSWER_MS 300 /* (the scheduler's own shut_down waits as long) */
void sc_pipeline_stop_clients(sc_node *node, const char *why);

/* The actor specs (defined in each actor's folder). */
extern const sc_actor_spec sc_gateway_spec;
extern const sc_actor_spec sc_scheduler_spec;
extern const sc_actor_spec sc_partitioner_spec;
extern const sc_actor_spec sc_comm_spec;
extern const sc_actor_spec sc_metadata_spec;
extern const sc_actor_spec sc_executor_spec;

#endif
